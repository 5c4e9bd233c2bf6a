"""tile-mlir: a tile-level GPU kernel compiler on the upstream MLIR Python bindings.

    import tile_mlir
    program = tile_mlir.compile("examples/vector_add.mlir")   # PTX + cubin
    program.kernel("vector_add")(a, b, c)                     # NumPy arrays in and out

Importing the package does not import MLIR: the runtime (tile_mlir.runtime)
runs compiled kernels with cuda-python alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

__version__ = "0.1.0"

if TYPE_CHECKING:
    from mlir import ir

    from tile_mlir.runtime.program import Program


def compile(  # noqa: A001 - mirrors the compiler's entry point
    source: str | Path | ir.Module, *, chip: str = "sm_90", cubin: bool = True,
    name: str = "<input>",
) -> Program:
    """Compile tile IR (a .mlir path, IR text or a module) to PTX and cubins.

    Raises tile_mlir.diagnostics.CompileError with located diagnostics on bad IR.
    """
    from tile_mlir.compiler import compile as compile_

    return compile_(source, chip=chip, cubin=cubin, name=name)
