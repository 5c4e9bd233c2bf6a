"""elementwise/gmem: an elementwise op whose memref operands all live in global memory.

Applies at every scope (thread, warp, warpgroup, cta) once the scope's thread
count is known. The partition is synthesized (lowering/schedules/synthesized.py): the
dimensions contiguous in every operand are coalesced, the innermost run is cut
into vectors of up to 16 bytes (128-bit `ld.global` / `st.global`, and
`ld.global.nc` where the kernel argument is `llvm.noalias` and
`llvm.readonly`), thread t takes vectors t, t + T, ..., and a scalar loop takes
each row's tail. Plain memrefs with any strides (dynamic ones too, whose
alignment the `tile.divisibility` of the values they come from tells) and
dynamic sizes work; the vector width shrinks where alignment or strides
demand it. An operand broadcast along the innermost dimension (stride 0) is
read one element per vector and repeated.

Options, as attributes of the op (the strategies of seed 004):
  vector_bytes = 16 : i64  the widest access in bytes (1: one element per access,
                           "direct"; 32: two 16-byte accesses per vector)
  stage = 1 : i64          rounds whose loads a thread issues before the first
                           compute (1: load, compute, store one vector at a time,
                           "explicit vectors"; the round count: register staging)
"""

from __future__ import annotations

from mlir import ir

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

OPTIONS = {"vector_bytes": synthesized.MAX_ACCESS_BYTES, "stage": 1}
"""The variant's options and their defaults."""


def option(info: OpInfo, name: str) -> int:
    attr = info.attr(name)
    return int(ir.IntegerAttr(attr).value) if attr is not None else OPTIONS[name]


def check(info: OpInfo) -> Verdict:
    return first_failure(all_in(info, ("global",), uniform_inputs=True), scope_known(info),
                         element_types(info, MEMORY_DTYPES))


def lower(info: OpInfo) -> None:
    synthesized.lower_synthesized(info, option(info, "vector_bytes"), option(info, "stage"))


register(Variant("tile.elementwise", "gmem", 10, check, lower,
                 "global-memory operands; 16-byte vectors strided over the scope's threads"))
