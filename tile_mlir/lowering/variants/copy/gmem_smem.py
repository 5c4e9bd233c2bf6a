"""copy/gmem_smem: a copy between memory tiles (global -> shared, shared -> global,
and global or shared to its own kind).

Applies at every scope once its thread count is known, when neither side is
in registers. As for elementwise/smem, the partition [outer, threads, vec] is
synthesized from the scope (lowering/schedules/synthesized.py); the vector width is the
widest that both sides' contiguous runs and alignment allow (float4 for f32).
Any element type: bits are copied, never converted.
"""

from __future__ import annotations

from tile_mlir.lowering import Variant, Verdict, register
from tile_mlir.lowering.schedules import synthesized
from tile_mlir.lowering.support.analysis import OpInfo
from tile_mlir.lowering.variants.predicates import all_in, first_failure, scope_known


def check(info: OpInfo) -> Verdict:
    return first_failure(all_in(info, ("global", "shared")), scope_known(info))


register(Variant("tile.copy", "gmem_smem", 10, check, synthesized.lower_synthesized,
                 "memory to memory; partition synthesized from the scope"))
