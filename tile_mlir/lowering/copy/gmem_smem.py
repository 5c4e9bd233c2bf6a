"""copy/gmem_smem: a copy between memory tiles (global -> shared, shared -> global,
and global or shared to its own kind).

Applies at every scope once its thread count is known, when neither side is
in registers. As for elementwise/smem, the partition [outer, threads, vec] is
synthesized from the scope (lowering/partition.py); the vector width is the
widest that both sides' contiguous runs and alignment allow (float4 for f32).
Any element type: bits are copied, never converted.
"""

from __future__ import annotations

from tile_mlir.lowering import Variant, Verdict, partition, register
from tile_mlir.lowering.access import Access
from tile_mlir.lowering.analysis import OpInfo
from tile_mlir.lowering.compute import Compute
from tile_mlir.lowering.predicates import all_in, first_failure, scope_known


def check(info: OpInfo) -> Verdict:
    return first_failure(all_in(info, ("global", "shared")), scope_known(info))


def lower(info: OpInfo) -> None:
    partition.emit(info, [Access.of(o, info.buffers) for o in info.memrefs], Compute(info))


register(Variant("tile.copy", "gmem_smem", 10, check, lower,
                 "memory to memory; partition synthesized from the scope"))
