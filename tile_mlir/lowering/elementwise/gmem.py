"""elementwise/gmem: an elementwise op whose memref operands all live in global memory.

Applies at every scope (thread, warp, warpgroup, cta) once the scope's thread
count is known. The partition is synthesized (lowering/partition.py): the
dimensions contiguous in every operand are coalesced, the innermost run is cut
into vectors of up to 16 bytes (128-bit `ld.global` / `st.global`, and
`ld.global.nc` where the kernel argument is `llvm.noalias` and
`llvm.readonly`), thread t takes vectors t, t + T, ..., and a scalar loop takes
each row's tail. Plain memrefs with any static strides and dynamic sizes work;
the vector width shrinks where alignment or strides demand it.
"""

from __future__ import annotations

from tile_mlir.lowering import Variant, Verdict, partition, register
from tile_mlir.lowering.access import Access
from tile_mlir.lowering.analysis import OpInfo
from tile_mlir.lowering.compute import Compute
from tile_mlir.lowering.predicates import (
    FLOAT_COMPUTE,
    all_in,
    element_types,
    first_failure,
    scope_known,
)


def check(info: OpInfo) -> Verdict:
    return first_failure(all_in(info, ("global",)), scope_known(info),
                         element_types(info, FLOAT_COMPUTE))


def lower(info: OpInfo) -> None:
    partition.emit(info, [Access.of(o, info.buffers) for o in info.memrefs], Compute(info))


register(Variant("tile.elementwise", "gmem", 10, check, lower,
                 "global-memory operands; 16-byte vectors strided over the scope's threads"))
