"""copy/reg: a copy with a register tile on one side (shared or global on the other),
or between two register tiles distributed alike.

Applies once the scope's thread count is known, when a register operand has a
layout. The register layout induces the partition (lowering/bundle.py): each
thread moves exactly the elements it holds, so no barrier is needed on the
register side. Along the innermost dimension the thread's run is moved in
vectors of up to 16 bytes where the memory side is contiguous and aligned
there: lane i of S[(32, 8):(1@laneid, 1)] reads its row of a row-major
32x8 f32 shared tile as two `ld.shared.v4`. With a replicated register
layout, only the first replica writes memory.
"""

from __future__ import annotations

from tile_mlir.lowering import Variant, Verdict, bundle, register, reject
from tile_mlir.lowering.access import Access
from tile_mlir.lowering.analysis import OpInfo
from tile_mlir.lowering.compute import Compute
from tile_mlir.lowering.partition import MAX_ACCESS_BYTES
from tile_mlir.lowering.predicates import all_in, first_failure, register_anchor, scope_known


def check(info: OpInfo) -> Verdict:
    verdict = first_failure(all_in(info, ("global", "shared", "local")), scope_known(info))
    if not verdict[0]:
        return verdict
    anchor, reason = register_anchor(info)
    return reject(reason) if anchor is None else verdict


def lower(info: OpInfo) -> None:
    anchor, _ = register_anchor(info)
    assert anchor is not None
    accesses = [Access.of(o, info.buffers) for o in info.memrefs]
    bundle.emit(info, accesses, Compute(info), bundle.plan(accesses, anchor, MAX_ACCESS_BYTES))


register(Variant("tile.copy", "reg", 10, check, lower,
                 "a register side; partition induced by the register layout"))
