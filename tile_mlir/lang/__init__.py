"""tile_mlir.lang: tile programs written as Python functions.

    import tile_mlir.lang as tl

    @tl.kernel(threads=256)
    def vector_add(a: tl.Tensor["T", ("N",)], b: tl.Tensor["T", ("N",)],
                   c: tl.Tensor["T", ("N",)], TILE: tl.constexpr = 2048):
        piece = tl.ds(tl.block_id() * TILE, TILE)
        tl.cta.add(c[piece], a[piece], b[piece])

    vector_add[lambda d: (d["N"] // 2048,)](a, b, c)    # torch, CuPy, NumPy arrays...

The body builds tile IR through the dialect's op builders (tile.copy,
tile.elementwise, tile.reduce, tile.alloc), each op located at its Python
line; docs/programs.md is the tutorial. Importing this package imports no
MLIR: the body API (tl.block_id, tl.cta, ...) loads it when a program is
built, and kernels run from a warm kernel cache without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tile_mlir.lang.arrays import ArrayDesc
from tile_mlir.lang.errors import ArgumentError, ProgramError
from tile_mlir.lang.kernel import KernelFunction, kernel
from tile_mlir.lang.spec import ScalarSpec, Specialization, TensorSpec
from tile_mlir.lang.values import (
    Bool,
    Index,
    Scalar,
    Tensor,
    bf16,
    bool_,
    cdiv,
    constexpr,
    ds,
    f16,
    f32,
    f64,
    i8,
    i16,
    i32,
    i64,
    maximum,
    minimum,
)

if TYPE_CHECKING:
    from tile_mlir.lang.body import (
        alloc_reg,
        alloc_shared,
        barrier,
        block_id,
        cluster,
        cta,
        grid,
        if_,
        lane_id,
        num_blocks,
        range,  # noqa: A004 - tl.range, as Triton's
        static_assert,
        thread,
        thread_id,
        warp,
        warp_id,
        warpgroup,
    )

_BODY = ("alloc_reg", "alloc_shared", "barrier", "block_id", "cluster", "cta", "grid", "if_",
         "lane_id", "num_blocks", "range", "static_assert", "thread", "thread_id", "warp",
         "warp_id", "warpgroup")


def __getattr__(name: str) -> Any:
    """The body API, from tile_mlir.lang.body (which imports MLIR) on first use."""
    if name in _BODY:
        return getattr(importlib.import_module("tile_mlir.lang.body"), name)
    raise AttributeError(f"module 'tile_mlir.lang' has no attribute '{name}'")


__all__ = [
    "ArgumentError",
    "ArrayDesc",
    "Bool",
    "Index",
    "KernelFunction",
    "ProgramError",
    "Scalar",
    "ScalarSpec",
    "Specialization",
    "Tensor",
    "TensorSpec",
    "alloc_reg",
    "alloc_shared",
    "barrier",
    "bf16",
    "block_id",
    "bool_",
    "cdiv",
    "cluster",
    "constexpr",
    "cta",
    "ds",
    "f16",
    "f32",
    "f64",
    "grid",
    "i8",
    "i16",
    "i32",
    "i64",
    "if_",
    "kernel",
    "lane_id",
    "maximum",
    "minimum",
    "num_blocks",
    "range",
    "static_assert",
    "thread",
    "thread_id",
    "warp",
    "warp_id",
    "warpgroup",
]
