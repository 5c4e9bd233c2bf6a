"""ptxas: from PTX to a cubin.

ptxas comes from the pinned `nvidia-cuda-nvcc-cu12` wheel; the CUDA toolkit
(CUDA_HOME, CUDA_PATH, /usr/local/cuda, PATH) is the fallback, and
TILE_MLIR_PTXAS names one explicitly.
"""

from __future__ import annotations

import importlib.util
import os
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
    """Assemble PTX into a cubin for `chip` (sm_90, sm_90a, ...)."""
    ptxas = find_ptxas()
    with tempfile.TemporaryDirectory(prefix="tile-mlir-") as tmp:
        src, out = Path(tmp) / "kernel.ptx", Path(tmp) / "kernel.cubin"
        src.write_text(ptx)
        proc = subprocess.run(
            [str(ptxas), f"-arch={chip}", f"-O{opt_level}", str(src), "-o", str(out)],
            capture_output=True, text=True, check=False,
        )
        if proc.returncode != 0:
            raise ToolchainError(f"ptxas ({ptxas}) rejected the PTX for {chip}:\n"
                                 f"{proc.stderr.strip()}")
        return out.read_bytes()
