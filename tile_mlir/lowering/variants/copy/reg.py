"""copy/reg: a copy with a register tile on one side (shared or global on the other),
or between two register tiles distributed alike.

Applies once the scope's thread count is known, when a register operand has a
layout. The register layout induces the partition (lowering/schedules/induced.py): each
thread moves exactly the elements it holds, so no barrier is needed on the
register side. Along the innermost dimension the thread's run is moved in
vectors of up to 16 bytes where the memory side is contiguous and aligned
there: lane i of S[(32, 8):(1@laneid, 1)] reads its row of a row-major
32x8 f32 shared tile as two `ld.shared.v4`. With a replicated register
layout, only the first replica writes memory.
"""

from __future__ import annotations

from tile_mlir.lowering import Variant, Verdict, register
from tile_mlir.lowering.schedules import induced
from tile_mlir.lowering.schedules.synthesized import MAX_ACCESS_BYTES
from tile_mlir.lowering.support.analysis import OpInfo
from tile_mlir.lowering.variants.predicates import (
    all_in,
    anchored,
    first_failure,
    register_anchor,
    scope_known,
)


def check(info: OpInfo) -> Verdict:
    return first_failure(all_in(info, ("global", "shared", "local")), scope_known(info),
                         anchored(info))


def lower(info: OpInfo) -> None:
    anchor, _ = register_anchor(info)
    assert anchor is not None
    induced.lower_induced(info, anchor, MAX_ACCESS_BYTES)


register(Variant("tile.copy", "reg", 10, check, lower,
                 "a register side; partition induced by the register layout"))
