"""tile-lower: rewrite every tile op with the variant tile-dispatch recorded on it.

Each op carries `variant = "<name>"` (chosen by tile-dispatch, or forced by the
user and accepted there); its lowering builds the replacement at the op, which
then goes. Register tile.allocs go last, once nothing reads them. After this
pass no tile op remains: the IR is at the "gpu" stage, ready for the upstream
NVVM pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from tile_mlir import lowering
from tile_mlir.lowering.support.analysis import describe
from tile_mlir.lowering.support.buffers import Buffers
from tile_mlir.passes import TilePass, op_error, tile_ops


def recorded_variant(op: ir.OpView) -> tuple[lowering.Variant | None, str]:
    """The variant recorded on the op, or None and why it cannot be used."""
    attr = op.operation.attributes.get("variant")
    if attr is None:
        return None, "has no lowering variant recorded (tile-dispatch records one)"
    name = ir.StringAttr(attr).value
    variant = lowering.find(op.operation.name, name)
    if variant is None:
        return None, f"names unknown variant '{name}'"
    return variant, ""


@dataclass(frozen=True)
class Pass(TilePass):
    NAME = "tile-lower"
    SUMMARY = "lower each tile op with its recorded variant"
    REQUIRES = ("tile-dispatch", "tile-barriers", "tile-buffers")

    def run(self, root: ir.Operation) -> bool:
        ok = True
        buffers = Buffers()
        for op in tile_ops(root):
            variant, why = recorded_variant(op)
            if variant is None:
                op_error(op, why)
                ok = False
                continue
            info = describe(op)
            info.buffers = buffers
            with ir.InsertionPoint(op.operation), op.operation.location:
                variant.lower(info)
            op.operation.erase()
        for alloc, message in buffers.finish(root) if ok else []:
            op_error(alloc, message)
            ok = False
        return ok
