"""reduce/gmem: a tile.reduce that reads global memory (the destination global or shared).

Applies where reduce/shared would but the source is in global memory, as
in the operator library's kernels that reduce rows of a tensor straight from
global memory: the same shuffle tree (lowering/schedules/reduction.py), each lane
gathering its part of a row with loads of up to 16 bytes when the reduced
innermost axis is contiguous and aligned. A row of at most a warp's loads takes a
lane a load (a 128-float row: 32 lanes, a float4 each, then 5 shuffles); a longer
one groups small enough that each lane has UNROLL loads in flight (a 256-float
row: 16 lanes taking 4 float4s each, then 4 shuffles): schedules/rows.py's
group_plan.
"""

from __future__ import annotations

from tile_mlir.lowering import Variant, Verdict, register, reject
from tile_mlir.lowering.schedules.reduction import UNROLL, Reduction
from tile_mlir.lowering.schedules.rows import RowReducer, row_vector_width
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
    if info.sources[0].space != "global":
        return reject(f"operand 1 scope {info.sources[0].space} != global")
    return first_failure(all_in(info, ("global", "shared")), scope_known(info),
                         within_cta(info), element_types(info, FLOAT_COMPUTE))


def lower(info: OpInfo) -> None:
    src, dst = (Access.of(o, info.buffers) for o in (info.sources[0], info.dst))
    vec = row_vector_width(src, Reduction.of(info), info.sources[0].shape)
    reducer = RowReducer(info, src, dst, vec, per_lane=UNROLL)
    if info.scope == "thread":
        reducer.sequential()
    else:
        reducer.grouped()


register(Variant("tile.reduce", "gmem", 10, check, lower,
                 "global source; shuffle tree per group, rows read from global memory"))
