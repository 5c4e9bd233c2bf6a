"""ptxas: from PTX to a cubin.

ptxas comes from the pinned `nvidia-cuda-nvcc-cu12` wheel; the CUDA toolkit
(CUDA_HOME, CUDA_PATH, /usr/local/cuda, PATH) is the fallback, and
TILE_MLIR_PTXAS names one explicitly.

A kernel's `.minnctapersm N` (tl.kernel's occupancy=, NVVM's nvvm.minctasm) asks ptxas
to cap a thread's registers so that N CTAs fit on an SM. It is a request: where the cap
makes ptxas spill registers to local memory (on an H100, row kernels whose cap spilled
tens of bytes ran 6-10% slower than uncapped; of those whose cap did not spill, softmax
f32 over rows of 2^18 ran 7% faster), the module's one kernel asks for N - 1, N - 2, ...
CTAs, the first that does not spill, while that is more than ptxas gives it unasked
(`ctas_an_sm`); else (or in a module of several requests) it is assembled without one.
A spill within what the kernel allows (tl.kernel's occupancy=(ctas, bytes), the
gpu.func's SPILL_ATTR) counts as none: whether a few bytes of spill cost more than a
CTA more an SM gains depends on the kernel, and only a measurement says. The lower requests,
measured on an H200 against none (one process, torch.compile interleaved, 150
repetitions, TB/s; each 4 CTAs of 128 threads an SM unasked, 5 asked, 96 registers):
log_softmax bf16 rows of 32001 3.47 -> 3.59 and 3.47 -> 3.60 (two runs), the fused add +
RMSNorm bf16 rows of 65536 4.18 -> 4.23, of 32768 4.15 -> 4.18, layer norm f32 rows of
32768 3.83 -> 3.87 and 3.84 -> 3.88, of 65536 3.72 -> 3.70 and 3.68 -> 3.67.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path

DEFAULT_CHIP = "sm_90"


class ToolchainError(RuntimeError):
    """ptxas is missing or rejected the PTX."""


def _wheel_ptxas() -> Path | None:
    spec = importlib.util.find_spec("nvidia.cuda_nvcc")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "bin" / "ptxas"
        if candidate.is_file():
            return candidate
    return None


@cache
def find_ptxas() -> Path:
    explicit = os.environ.get("TILE_MLIR_PTXAS")
    if explicit:
        return Path(explicit)
    wheel = _wheel_ptxas()
    if wheel:
        return wheel
    for var in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"):
        root = os.environ.get(var)
        if root and (Path(root) / "bin" / "ptxas").is_file():
            return Path(root) / "bin" / "ptxas"
    for candidate in (Path("/usr/local/cuda/bin/ptxas"), shutil.which("ptxas")):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise ToolchainError(
        "ptxas not found: install nvidia-cuda-nvcc-cu12 (a dependency of tile-mlir), "
        "set CUDA_HOME, or point TILE_MLIR_PTXAS at it"
    )


def assemble(ptx: str, chip: str = DEFAULT_CHIP, opt_level: int = 3) -> bytes:
    """Assemble PTX into a cubin for `chip` (sm_90, sm_90a, ...); an occupancy request
    that makes ptxas spill is dropped (module docstring)."""
    return settle(ptx, chip, opt_level)[1]


def settle(ptx: str, chip: str = DEFAULT_CHIP, opt_level: int = 3, spill: int = 0
           ) -> tuple[str, bytes]:
    """The PTX as assembled and its cubin: its occupancy request where ptxas takes it
    spilling at most `spill` bytes, else the highest lower one that does and gives more
    CTAs an SM than none, else none (module docstring)."""
    requests = OCCUPANCY.findall(ptx)
    cubin, report = _ptxas(ptx, chip, opt_level, verbose=bool(requests))
    if not requests or not spills(report, spill):
        return ptx, cubin
    bare = OCCUPANCY.sub("", ptx)
    cubin, report = _ptxas(bare, chip, opt_level, verbose=True)
    threads = THREADS.search(ptx)
    if len(requests) > 1 or threads is None:
        return bare, cubin
    unasked = ctas_an_sm(report, int(threads.group(1)))
    for ctas in range(int(requests[0].split()[1]) - 1, unasked, -1):
        lowered = OCCUPANCY.sub(f".minnctapersm {ctas}\n", ptx)
        lowered_cubin, lowered_report = _ptxas(lowered, chip, opt_level, verbose=True)
        if not spills(lowered_report, spill):
            return lowered, lowered_cubin
    return bare, cubin


OCCUPANCY = re.compile(r"^[ \t]*\.minnctapersm[ \t]+\d+[ \t]*\n", re.MULTILINE)
"""A kernel's occupancy request, a directive line of its own (as LLVM writes it)."""
THREADS = re.compile(r"^[ \t]*\.maxntid[ \t]+(\d+)", re.MULTILINE)
"""A kernel's threads a CTA (x; the row kernels' CTAs are one-dimensional)."""
REGISTERS = 65536
"""32-bit registers of an SM (sm_70..sm_90)."""
REGISTER_UNIT = 8
"""A thread's registers are allocated in multiples of this (a warp's 256)."""


def ctas_an_sm(report: str, threads: int) -> int:
    """CTAs of `threads` threads an SM's registers hold at the registers ptxas's report
    gives a thread (its one function's)."""
    used = [int(n) for n in re.findall(r"Used (\d+) registers", report)]
    if not used:
        return 0
    per_thread = max(-(-max(used) // REGISTER_UNIT), 1) * REGISTER_UNIT
    return REGISTERS // (per_thread * -(-threads // 32) * 32)


SPILL_ATTR = "tile.spill_allowance"
"""The gpu.func attribute (i32) with the bytes of spill stores its occupancy request may
cost (tile_mlir.lang writes it; the compiler passes it to settle)."""


def spills(report: str, allowed: int = 0) -> bool:
    """Whether ptxas -v's report has a function that spills registers (more than
    `allowed` bytes of spill stores)."""
    return any(int(n) > allowed for n in re.findall(r"(\d+) bytes spill stores", report))


def _ptxas(ptx: str, chip: str, opt_level: int, *, verbose: bool) -> tuple[bytes, str]:
    """The cubin, and ptxas's report (-v) where `verbose`."""
    ptxas = find_ptxas()
    with tempfile.TemporaryDirectory(prefix="tile-mlir-") as tmp:
        src, out = Path(tmp) / "kernel.ptx", Path(tmp) / "kernel.cubin"
        src.write_text(ptx)
        proc = subprocess.run(
            [str(ptxas), f"-arch={chip}", f"-O{opt_level}", *(["-v"] if verbose else []),
             str(src), "-o", str(out)],
            capture_output=True, text=True, check=False,
        )
        if proc.returncode != 0:
            raise ToolchainError(f"ptxas ({ptxas}) rejected the PTX for {chip}:\n"
                                 f"{proc.stderr.strip()}")
        return out.read_bytes(), proc.stderr
