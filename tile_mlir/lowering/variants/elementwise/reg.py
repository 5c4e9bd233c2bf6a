"""elementwise/reg (seed 003): an elementwise op whose operands are all register tiles.

Applies when every memref operand is a register buffer (tile.alloc in
#gpu.address_space<private>) and all are distributed alike. The partition is
induced by the anchor register layout (lowering/schedules/induced.py): its thread axes
fix each thread's coordinates and the thread loops over its private bundle,
one register at a time (8 per lane for S[(32, 8):(1@laneid, 1)]), or two at a
time for f16/bf16 so that the arithmetic is packed (`add.rn.f16x2`).
"""

from __future__ import annotations

from tile_mlir.lowering import Variant, Verdict, register
from tile_mlir.lowering.schedules import induced
from tile_mlir.lowering.support.analysis import OpInfo
from tile_mlir.lowering.variants.predicates import (
    FLOAT_COMPUTE,
    all_in,
    anchored,
    element_types,
    first_failure,
    register_anchor,
    scope_known,
)

PACKED_BYTES = 4
"""Register accesses group 4 bytes: f16x2 / bf16x2 pairs, single f32s."""


def check(info: OpInfo) -> Verdict:
    return first_failure(all_in(info, ("local",)), scope_known(info),
                         element_types(info, FLOAT_COMPUTE), anchored(info))


def lower(info: OpInfo) -> None:
    anchor, _ = register_anchor(info)
    assert anchor is not None
    induced.lower_induced(info, anchor, PACKED_BYTES)


register(Variant("tile.elementwise", "reg", 10, check, lower,
                 "register operands; partition induced by the register layout (seed 003)"))
