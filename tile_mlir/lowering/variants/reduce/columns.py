"""reduce/columns: a tile.reduce that keeps the innermost axis, read from memory.

Applies, ahead of reduce/gmem and reduce/shared, at warp, warpgroup and
CTA scope when the source is a global or shared tile whose innermost axis is
kept (not reduced) and contiguous, as in a column sum of a [rows, cols]
tensor: each thread owns a vector of consecutive outputs and walks the
reduced axes with coalesced 16-byte loads, splitting them over more threads
through shared memory when there are few outputs
(lowering/schedules/columns.py).
"""

from __future__ import annotations

from tile_mlir.lowering import ACCEPT, Variant, Verdict, register, reject
from tile_mlir.lowering.schedules.columns import ColumnReducer, column_vector_width
from tile_mlir.lowering.schedules.reduction import Reduction
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
    verdict = first_failure(all_in(info, ("global", "shared")), scope_known(info),
                            within_cta(info), element_types(info, FLOAT_COMPUTE))
    if not verdict[0]:
        return verdict
    if info.scope == "thread":
        return reject("scope thread reduces sequentially (reduce/shared or gmem)")
    src = info.sources[0]
    inner = len(src.shape) - 1
    if inner < 0 or inner in Reduction.of(info).axes:
        return reject("the innermost axis is reduced")
    if Access.of(src, info.buffers).strides[inner] != 1:
        return reject("the innermost axis is not contiguous")
    return ACCEPT


def lower(info: OpInfo) -> None:
    src, dst = (Access.of(o, info.buffers) for o in (info.sources[0], info.dst))
    red = Reduction.of(info)
    ColumnReducer(info, src, dst, column_vector_width(src, dst, red, info.sources[0].shape)
                  ).emit()


register(Variant("tile.reduce", "columns", 20, check, lower,
                 "innermost axis kept: a thread per output vector, coalesced loads"))
