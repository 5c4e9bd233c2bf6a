"""tile-mlir: a tile-level GPU kernel compiler on the upstream MLIR Python bindings.

    import tile_mlir
    program = tile_mlir.compile("examples/vector_add.mlir")   # PTX + cubin, cached
    program.kernel("vector_add")(a, b, c)                     # torch, CuPy, NumPy arrays...

A host compiler with its own Context and PassManager uses the embedding API
(tile_mlir/embedding.py, docs/embedding.md):

    tile_mlir.register(context)                          # the tile dialect
    tile_mlir.add_pipeline(pm, "tile-to-ptx", chip="sm_90")
    pm.run(module.operation); tile_mlir.ptx(module)       # gpu.module -> PTX

Importing the package does not import MLIR: the runtime (tile_mlir.runtime)
runs compiled kernels with cuda-python alone, and compile() answers from the
kernel cache without MLIR; only a kernel that must be compiled needs it (and the
embedding API's names import it when first used).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from mlir import ir

    from tile_mlir.embedding import Remark as Remark
    from tile_mlir.embedding import add_pipeline as add_pipeline
    from tile_mlir.embedding import kernel_specs as kernel_specs
    from tile_mlir.embedding import parse as parse
    from tile_mlir.embedding import ptx as ptx
    from tile_mlir.embedding import register as register
    from tile_mlir.runtime.program import Program

_EMBEDDING = frozenset({"Remark", "add_pipeline", "kernel_specs", "parse", "ptx", "register"})
"""The embedding API's names, imported (with MLIR) on first use."""


def __getattr__(name: str) -> Any:
    if name in _EMBEDDING:
        from tile_mlir import embedding

        return getattr(embedding, name)
    raise AttributeError(f"module 'tile_mlir' has no attribute '{name}'")


def compile(  # noqa: A001 - mirrors the compiler's entry point
    source: str | Path | ir.Module, *, chip: str | None = None, cubin: bool = True,
    name: str = "<input>", cache: bool = True,
) -> Program:
    """Compile tile IR (a .mlir path, IR text or a module) to PTX and cubins.

    `chip` defaults to the GPU's (sm_90 where there is none). The result comes from
    the kernel cache when the same request was compiled before (cache=False: never).

    Raises tile_mlir.diagnostics.CompileError with located diagnostics on bad IR, and
    tile_mlir.runtime.cache.CompilerUnavailableError when the kernel must be compiled
    and the MLIR bindings are missing.
    """
    from tile_mlir.runtime import binary
    from tile_mlir.runtime import cache as kernel_cache

    chip = chip or binary.detect_chip()
    if cache and isinstance(source, str | Path):  # answered without importing MLIR
        text, _ = kernel_cache.source_text(source, name)
        hit = kernel_cache.lookup(text, chip, kernel_cache.compile_options(cubin=cubin))
        if hit is not None:
            return hit
    try:
        from tile_mlir.compiler import compile as compile_
    except ImportError as e:
        raise kernel_cache.CompilerUnavailableError(e) from e
    return compile_(source, chip=chip, cubin=cubin, name=name, cache=cache)
