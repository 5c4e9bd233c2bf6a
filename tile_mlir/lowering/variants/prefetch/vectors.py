"""prefetch/vectors: tile.prefetch of a view of global memory, 16 bytes at a time.

Applies to every tile.prefetch (tile-verify has made sure its view is in global
memory) once the scope's thread count is known. The view's outer dims are walked in
loops; its innermost dim is cut into units of 16 bytes (the widest access a thread
makes) where it is contiguous, of one element where it is strided, and the scope's T
threads take units t, t + T, t + 2T, ... of each row (unrolled where the extent is
static and short, a guard only on a last, partial round; a loop otherwise): thread t of
a cluster's 4096 reading a bf16 row of 2^18 elements fetches the 8 vectors t,
t + 4096, ... of it, the ones a copy over the same threads would load. Each unit's
first element's sector is brought into L2 (`prefetch.global.L2`): no register is
written and nothing waits, so a thread goes on at once. Every address formed lies
inside the view: a dynamic extent of 0 fetches nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, builtin, llvm, memref, nvvm, scf

from tile_mlir.lowering import Variant, Verdict, register
from tile_mlir.lowering.support.analysis import DYNAMIC, OpInfo, enclosing, index_bits
from tile_mlir.lowering.support.emit import byte_address, const, const_index, scope_thread_index
from tile_mlir.lowering.variants.predicates import all_in, first_failure, scope_known

UNIT = 16
"""Bytes per prefetch. Finer than PTX's 128-byte line or L2's 32-byte sector, and faster:
measured on an H100, the row ops' cluster kernels prefetching the row 4 MiB on (ops/rows.py),
layer norm bf16 rows of 2^16 ran 2.68 TB/s without, 2.72 with a prefetch per 128 bytes,
2.87 per 32 and 2.89 per 16; rows of 2^18 2.47, 2.59, 2.61 and 2.70."""
UNROLLED = 16
"""Rounds of the scope's threads over a row written out in straight-line code at most (a
row kernel's slice takes 1-8); more go in a loop."""


def check(info: OpInfo) -> Verdict:
    return first_failure(all_in(info, ("global",)), scope_known(info))


def _base_pointer(info: OpInfo, base: ir.Value) -> ir.Value:
    """The aligned pointer of a 0-d memref (extract_strided_metadata's base buffer) as a
    64-bit !llvm.ptr: through the descriptor that finalize-memref-to-llvm makes of it
    (its casts reconciled away), since memref.extract_aligned_pointer_as_index gives an
    index, which kernels of 32-bit indices would cut to 32 bits."""
    module = enclosing(info.op, "gpu.module")
    width = (index_bits(module.operation) if module is not None else None) or 64
    space = ir.MemRefType(base.type).memory_space
    pointer = ir.Type.parse("!llvm.ptr" if space is None else "!llvm.ptr<1>")
    descriptor = ir.Type.parse(f"!llvm.struct<({pointer}, {pointer}, i{width})>")
    made = builtin.UnrealizedConversionCastOp([descriptor], [base]).results[0]
    return llvm.extractvalue(pointer, made, [1])


@dataclass(frozen=True)
class _Walk:
    """What each prefetch of the view needs: its metadata, base pointer and partition."""

    meta: memref.ExtractStridedMetadataOp
    base: ir.Value  # the aligned pointer, 64-bit
    bytes: int  # of an element
    unit: int  # elements a prefetch
    threads: int
    first: ir.Value  # this thread's first unit of a row (its index in the scope x unit)
    extent: int  # the innermost dim's (DYNAMIC where it is)

    def fetch(self, indices: list[ir.Value]) -> None:
        linear = self.meta.offset
        for index, stride in zip(indices, list(self.meta.strides), strict=True):
            linear = arith.addi(linear, arith.muli(index, stride))
        i64 = ir.IntegerType.get_signless(64)
        offset = arith.muli(arith.index_cast(i64, linear), const(i64, self.bytes))
        address = byte_address(self.base, offset)
        if str(address.type) == "!llvm.ptr":
            address = llvm.addrspacecast(ir.Type.parse("!llvm.ptr<1>"), address)
        nvvm.PrefetchOp(address, cacheLevel=nvvm.PrefetchCacheLevel.L2)

    def row(self, indices: list[ir.Value]) -> None:
        """The innermost dim: unrolled where its extent is static and takes at most
        UNROLLED rounds of the threads (a guard only on a last, partial round), else a
        loop."""
        span = self.threads * self.unit
        if self.extent == DYNAMIC or self.extent > UNROLLED * span:
            end = list(self.meta.sizes)[-1] if self.extent == DYNAMIC else \
                const_index(self.extent)
            loop = scf.ForOp(self.first, end, const_index(span))
            with ir.InsertionPoint(loop.body):
                self.fetch([*indices, loop.induction_variable])
                scf.YieldOp([])
            return
        for k in range(self.extent // span):
            self.fetch([*indices, arith.addi(self.first, const_index(k * span))])
        if self.extent % span:
            at = arith.addi(self.first, const_index(self.extent // span * span))
            inside = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ult, at,
                                         const_index(self.extent)))
            with ir.InsertionPoint(inside.then_block):
                self.fetch([*indices, at])
                scf.YieldOp([])

    def dims(self, indices: list[ir.Value], rank: int) -> None:
        """The outer dims in loops, then the row."""
        if len(indices) == rank - 1:
            self.row(indices)
            return
        loop = scf.ForOp(const_index(0), list(self.meta.sizes)[len(indices)], const_index(1))
        with ir.InsertionPoint(loop.body):
            self.dims([*indices, loop.induction_variable], rank)
            scf.YieldOp([])


def lower(info: OpInfo) -> None:
    src = info.operands[0]
    threads = info.scope_threads
    assert threads is not None
    rank = len(src.shape)
    meta = memref.ExtractStridedMetadataOp(src.value)
    contiguous = rank == 0 or src.strides[-1] == 1
    unit = max(1, UNIT // src.dtype.bytes) if contiguous else 1
    tid = scope_thread_index(info.scope, info.block)
    walk = _Walk(meta, _base_pointer(info, meta.base_buffer), src.dtype.bytes, unit, threads,
                 arith.muli(tid, const_index(unit)), src.shape[-1] if rank else 1)
    if rank:
        walk.dims([], rank)
        return
    only = scf.IfOp(arith.cmpi(arith.CmpIPredicate.eq, tid, const_index(0)))
    with ir.InsertionPoint(only.then_block):
        walk.fetch([])
        scf.YieldOp([])


register(Variant("tile.prefetch", "vectors", 10, check, lower,
                 "the view into L2, 16 bytes a prefetch, shared by the scope's threads"))
