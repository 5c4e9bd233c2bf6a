"""elementwise/smem (seed 000): an elementwise op whose operands are all in shared memory.

Applies at every scope once its thread count is known, when every memref
operand is shared (a tile.alloc buffer, whose layout places the elements, or a
plain workgroup memref). Nothing assigns elements to threads, so the
partition [outer, threads, vec] is synthesized from the scope's thread count
(lowering/schedules/synthesized.py) with the vector width from the layouts' innermost
contiguous run: a 256-thread CTA takes the sqrt of a 32x32 f32 tile in one
round of one float4 per thread (`ld.shared.v4` / `st.shared.v4`).
"""

from __future__ import annotations

from tile_mlir.lowering import Variant, Verdict, register
from tile_mlir.lowering.schedules import synthesized
from tile_mlir.lowering.support.analysis import OpInfo
from tile_mlir.lowering.variants.predicates import (
    MEMORY_DTYPES,
    all_in,
    element_types,
    first_failure,
    scope_known,
)


def check(info: OpInfo) -> Verdict:
    return first_failure(all_in(info, ("shared",), uniform_inputs=True), scope_known(info),
                         element_types(info, MEMORY_DTYPES))


register(Variant("tile.elementwise", "smem", 10, check, synthesized.lower_synthesized,
                 "shared-memory operands; partition synthesized from the scope (seed 000)"))
