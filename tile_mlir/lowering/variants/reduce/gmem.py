"""reduce/gmem: a tile.reduce that reads global memory (the destination global or shared).

Applies where reduce/shared would but the source is in global memory, as
in the operator library's kernels that reduce rows of a tensor straight from
global memory: the same shuffle tree (lowering/schedules/reduction.py), each lane
gathering its part of a row with loads of up to 16 bytes when the reduced
innermost axis is contiguous and aligned. A row of at most a warp's loads takes a
lane a load (a 128-float row: 32 lanes, a float4 each, then 5 shuffles); a longer
one groups small enough that each lane has UNROLL loads in flight (a 256-float
row: 16 lanes taking 4 float4s each, then 4 shuffles): `loads_per_lane`.
"""

from __future__ import annotations

from tile_mlir.contract import WARP
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


def loads_per_lane(units: int) -> int:
    """Loads a lane folds before the shuffles, for a row of `units` loads: one where the
    row is at most a warp's (lanes enough for every load at once), else UNROLL.
    Measured on an H100 (row sums and maxima of 2^26-2^28 bytes, one load a lane
    against UNROLL, beside torch.compile): bf16 rows of 64 2.59 -> 2.83 TB/s, of 128
    2.73-2.77 -> 2.83-2.84 (torch.compile 2.80-2.83), f32 rows of 64 2.85 -> 2.95, of
    128 2.96 -> 2.97, bf16 rows of 32 and 256 within 0.7%; rows of 64 loads (bf16 of
    512, f32 of 256) 1.2-1.8% faster with UNROLL, longer ones alike."""
    return 1 if units <= WARP else UNROLL


def lower(info: OpInfo) -> None:
    src, dst = (Access.of(o, info.buffers) for o in (info.sources[0], info.dst))
    red, shape = Reduction.of(info), info.sources[0].shape
    vec = row_vector_width(src, red, shape)
    units = red.sizes(shape)[1] // vec
    reducer = RowReducer(info, src, dst, vec, per_lane=loads_per_lane(units))
    if info.scope == "thread":
        reducer.sequential()
    else:
        reducer.grouped()


register(Variant("tile.reduce", "gmem", 10, check, lower,
                 "global source; shuffle tree per group, rows read from global memory"))
