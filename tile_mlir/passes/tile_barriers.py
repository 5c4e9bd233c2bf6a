"""tile-barriers: put the barriers that tile ops sharing memory imply between them.

Each variant decides which thread touches which element, so two tile ops that
touch the same shared or global buffer may pair different threads with an
element: the second waits for the first at the wider scope's barrier
(lowering/support/sync.py says which). Runs on tile ops, before they are
lowered, so that the barriers stand between the ops' whole replacements.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from tile_mlir.lowering.support import sync
from tile_mlir.lowering.support.analysis import enclosing, known_block_size
from tile_mlir.passes import TilePass, tile_ops


@dataclass(frozen=True)
class Pass(TilePass):
    NAME = "tile-barriers"
    SUMMARY = "insert the barriers implied between tile ops that share memory"
    REQUIRES = ("tile-verify",)

    def run(self, root: ir.Operation) -> bool:
        blocks = {op.operation.block: known_block_size(enclosing(op, "gpu.func"))
                  for op in tile_ops(root)}
        for block, threads in blocks.items():
            sync.insert_barriers(block, threads)
        return True
