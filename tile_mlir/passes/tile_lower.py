"""tile-lower: rewrite every tile op with its variant, leaving gpu/vector/scf/arith/memref.

Each op is lowered by the variant tile-dispatch recorded on it (an op without
one is dispatched here first). After this pass no tile op remains: the IR is
at the "gpu" stage, ready for the upstream NVVM pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from tile_mlir import lowering
from tile_mlir.lowering.analysis import describe
from tile_mlir.passes import TilePass, op_error, tile_ops
from tile_mlir.passes.tile_dispatch import dispatch
from tile_mlir.passes.tile_verify import verify_op


@dataclass(frozen=True)
class Pass(TilePass):
    NAME = "tile-lower"
    SUMMARY = "lower each tile op with its chosen variant"

    def run(self, root: ir.Operation) -> bool:
        ok = True
        for op in tile_ops(root):
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
            variant.lower(info)
        return ok
