"""tile-buffers: give every shared-memory tile.alloc its storage.

Each shared tile.alloc becomes a view of a 16-byte aligned `memref.global` of its
layout's storage size in the gpu.module (one `.shared` array per allocation),
strided as the layout says (lowering/support/buffers.py), so that later passes
and the variants see a plain workgroup memref. Register tile.allocs keep their
op until tile-lower: only tile ops can address a register layout.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from tile_mlir.lowering.support.buffers import Buffers
from tile_mlir.passes import TilePass


@dataclass(frozen=True)
class Pass(TilePass):
    NAME = "tile-buffers"
    SUMMARY = "place shared tile.allocs in shared memory (memref.global views)"
    REQUIRES = ("tile-verify",)

    def run(self, root: ir.Operation) -> bool:
        Buffers().place_shared(root)
        return True
