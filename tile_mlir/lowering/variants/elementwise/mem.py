"""elementwise/mem: an elementwise op over memory tiles of mixed kinds (global and shared).

Applies, below gmem and smem, when every memref operand is in global or shared
memory but not all in one of them (`b = b + s` with b global, s shared). The
partition is synthesized from the scope as for those two
(lowering/schedules/synthesized.py); each operand keeps its own strides and alignment.
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
    return first_failure(all_in(info, ("global", "shared"), uniform_inputs=True), scope_known(info),
                         element_types(info, MEMORY_DTYPES))


register(Variant("tile.elementwise", "mem", 5, check, synthesized.lower_synthesized,
                 "global and shared operands mixed; partition synthesized from the scope"))
