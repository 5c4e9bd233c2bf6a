"""ptxas: from PTX to a cubin.

ptxas comes from the pinned `nvidia-cuda-nvcc-cu12` wheel; the CUDA toolkit
(CUDA_HOME, CUDA_PATH, /usr/local/cuda, PATH) is the fallback, and
TILE_MLIR_PTXAS names one explicitly.

A kernel's `.minnctapersm N` (tl.kernel's occupancy=, NVVM's nvvm.minctasm) asks ptxas
to cap a thread's registers so that N CTAs fit on an SM. It is a request: where the cap
makes ptxas spill registers to local memory, the module is assembled again without it
(on an H100, row kernels whose cap spilled tens of bytes ran 6-10% slower than uncapped;
of those whose cap did not spill, softmax f32 over rows of 2^18 ran 7% faster), unless
the spill stays within what the kernel allows (tl.kernel's occupancy=(ctas, bytes), the
gpu.func's SPILL_ATTR): whether a few bytes of spill cost more than a CTA more an SM
gains depends on the kernel, and only a measurement says.
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
    """The PTX as assembled (without its occupancy requests where they made ptxas spill
    more than `spill` bytes) and its cubin."""
    requested = OCCUPANCY.search(ptx) is not None
    cubin, report = _ptxas(ptx, chip, opt_level, verbose=requested)
    if requested and spills(report, spill):
        ptx = OCCUPANCY.sub("", ptx)
        cubin, _ = _ptxas(ptx, chip, opt_level, verbose=False)
    return ptx, cubin


OCCUPANCY = re.compile(r"^[ \t]*\.minnctapersm[ \t]+\d+[ \t]*\n", re.MULTILINE)
"""A kernel's occupancy request, a directive line of its own (as LLVM writes it)."""


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
