"""tile-lower: rewrite every tile op with its variant, leaving gpu/vector/scf/arith/memref.

Each op is lowered by the variant tile-dispatch recorded on it (an op without
one is dispatched here first). Before that, shared tile.allocs become views of
their storage (lowering/buffers.py) and barriers go between tile ops that
share a shared or global buffer (lowering/sync.py); afterwards the register
tile.allocs go. After this pass no tile op remains: the IR is at the "gpu"
stage, ready for the upstream NVVM pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from tile_mlir import lowering
from tile_mlir.lowering.support import sync
from tile_mlir.lowering.support.analysis import describe, enclosing, known_block_size
from tile_mlir.lowering.support.buffers import Buffers
from tile_mlir.passes import TilePass, op_error, tile_ops
from tile_mlir.passes.tile_dispatch import dispatch
from tile_mlir.passes.tile_verify import verify_op


@dataclass(frozen=True)
class Pass(TilePass):
    NAME = "tile-lower"
    SUMMARY = "lower each tile op with its chosen variant"

    def run(self, root: ir.Operation) -> bool:
        ok = True
        buffers = Buffers()
        buffers.place_shared(root)
        ops = tile_ops(root)
        blocks = {op.operation.block: known_block_size(enclosing(op, "gpu.func")) for op in ops}
        for block, threads in blocks.items():
            sync.insert_barriers(block, threads)
        for op in ops:
            errors = verify_op(op)
            for message in errors:
                op_error(op, message)
            if errors:
                ok = False
                continue
            info = describe(op)
            forced = info.attr("variant")
            variant = lowering.find(info.name, ir.StringAttr(forced).value) if forced else None
            if variant is None or not variant.check(info)[0]:
                variant = dispatch(info)
            if variant is None:
                ok = False
                continue
            info.buffers = buffers
            with ir.InsertionPoint(op.operation), op.operation.location:
                variant.lower(info)
            op.operation.erase()
        for alloc, message in buffers.finish(root) if ok else []:
            op_error(alloc, message)
            ok = False
        return ok
