"""reduce/shared (seed 001): a tile.reduce whose source and destination are shared.

Applies at every scope once its thread count is known, for float tiles in
shared memory. At warp, warpgroup and CTA scope the scope's threads form
groups of min(next_pow2(L), 32, the largest power of two dividing the thread
count) lanes, one group per output position; each lane gathers its part of
the reduction axis into a register, log2(group) `shfl.sync.bfly` steps fold
the group within a segment of `group` lanes, and lane 0 writes
(lowering/schedules/reduction.py, which also loops groups over extra rows and splits
long rows over several warps through shared memory). A 32-thread CTA reducing
the rows of a 4x8 tile: groups of 8, shuffles with masks 1, 2 and 4. At
thread scope the thread loops over everything. The barriers around the op
come from lowering/sync.py.
"""

from __future__ import annotations

from tile_mlir.lowering import Variant, Verdict, register
from tile_mlir.lowering.schedules.rows import RowReducer
from tile_mlir.lowering.support.access import Access
from tile_mlir.lowering.support.analysis import OpInfo
from tile_mlir.lowering.variants.predicates import (
    FLOAT_COMPUTE,
    all_in,
    element_types,
    first_failure,
    scope_known,
    within_cta,
)


def check(info: OpInfo) -> Verdict:
    return first_failure(all_in(info, ("shared",)), scope_known(info), within_cta(info),
                         element_types(info, FLOAT_COMPUTE))


def lower(info: OpInfo) -> None:
    src, dst = (Access.of(o, info.buffers) for o in (info.sources[0], info.dst))
    reducer = RowReducer(info, src, dst)
    if info.scope == "thread":
        reducer.sequential()
    else:
        reducer.grouped()


register(Variant("tile.reduce", "shared", 10, check, lower,
                 "shared source and destination; shuffle tree per group (seed 001)"))
