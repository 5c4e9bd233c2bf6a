"""The operator library: ops on torch tensors, CuPy arrays and NumPy arrays, made of
tile programs compiled through the tile passes (and cached)."""

from tile_mlir.ops.reductions import amax, amin, mean, prod, sum  # noqa: A004 - torch's names

__all__ = ["amax", "amin", "mean", "prod", "sum"]
