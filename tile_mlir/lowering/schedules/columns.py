"""The column engine for tile.reduce: reductions that keep the innermost axis.

Summing a [rows, cols] tile over rows with the row engine would have the
lanes of a group read one column, `cols` elements apart: uncoalesced. Here
the threads take the outputs instead: thread t owns a vector of `vec`
consecutive outputs along the innermost (kept, contiguous) axis, and walks the
reduced axes sequentially, loading `vec` elements a step (16-byte loads,
coalesced across the threads of a warp). When there are fewer output vectors
than threads, the reduced axes are split into `split` slices taken by
different threads, whose partials meet in shared memory: after the scope's
barrier, the thread owning each output vector folds its slices and writes.
No shuffles, so no lane has to wait for another.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, scf

from tile_mlir.contract import ACCESS_BYTES, widest_vector
from tile_mlir.lowering.schedules.reduction import UNROLL, Reduction, fold_strided, scratch, when
from tile_mlir.lowering.schedules.synthesized import delinearize, for_each_item
from tile_mlir.lowering.support import sync
from tile_mlir.lowering.support.access import Access
from tile_mlir.lowering.support.analysis import OpInfo
from tile_mlir.lowering.support.compute import convert, load, store
from tile_mlir.lowering.support.emit import const_index, scope_thread_index


def column_vector_width(src: Access, dst: Access, red: Reduction, shape: tuple[int, ...]
                        ) -> int:
    """The widest run of the innermost axis every thread can load (16 bytes of the
    source) and store at once; 1 when it is not contiguous, not a multiple, or not
    aligned. The destination's piece of a vector (its accumulators' or its type's width
    may be wider: stored 16 bytes at a time) must start aligned too."""
    inner = len(shape) - 1
    singles = tuple((d,) for d in range(len(shape)))
    dst_singles = tuple((d,) for d in range(len(dst.operand.shape)))
    if src.strides[inner] != 1 or dst.strides[-1] != 1:
        return 1
    vec = widest_vector(ACCESS_BYTES // src.nbytes, shape[inner], src.alignment(singles))
    dst_align = dst.alignment(dst_singles)
    while vec > 1 and dst_align % min(vec, max(ACCESS_BYTES // dst.nbytes, 1)):
        vec //= 2
    return vec


GLOBAL_FOLDS = {2: (16, 2), 4: (16, 1)}
"""(loads a round, accumulators) of a thread walking a global source's rows, by the
source's element bytes; other sources (and shared ones) take UNROLL loads into as many
accumulators. Fewer accumulators leave registers for more loads in flight. Measured on
an H100 (ops' sums, amax and amin over dim 0 of 2^26 elements: [8192, 8192], [65536,
1024], [524288, 128] and [1024, 65536]; each fold beside torch.compile in one process,
200 repetitions, L2 flushed; the 16-bit results' largest error against float64 the same
as before and as torch's, f32 sums' 5.0e-5 -> 8.2e-5 over columns of 8192, torch's
4.3e-5), TB/s against 4 loads into 4 accumulators: bf16 sums 2.622 -> 2.636, 2.627 ->
2.655, 2.624 -> 2.636 and 2.80 -> 2.863, f16 sum [1024, 65536] 2.80 -> 2.86, amax f16
[8192, 8192] 2.66 -> 2.683, amin bf16 [65536, 1024] 2.663 -> 2.681 at 16 loads into 2
(the 60 registers of 4 into 4 fall to 43; 16 into 4 kept 64 and ran 11% slower, 8 into
2, 8 into 1, 16 into 1 and 32 into 2 within 0.5% of 16 into 2 but at [1024, 65536],
where 16 into 1 and 8 into 1 gained nothing); f32 sums 2.962 -> 2.976, 2.875 -> 2.887
and 2.909 -> 2.934 ([8192, 8192], [524288, 128], [65536, 1024]), amax f32 [1024, 65536]
3.032 -> 3.038 at 16 loads into 1 (16 into 2: 2.960, 2.861, 2.923, 3.005). Strided sources
gain most: a bf16 sum over dim 0 of [8192, 8000] columns of an [8192, 8192] tensor 1.79
-> 2.56 TB/s (torch.compile 2.45), f32 2.82 -> 2.85, amax f16 of every second row of
[16384, 4096] 2.26 -> 2.28."""
SCALAR_FOLDS = (32, 2)
"""GLOBAL_FOLDS where a thread loads one element at a time (a batch of columns whose count
no vector divides: its rows start misaligned), each load 2 or 4 bytes: more of them in
flight. Measured on an H100 (sums over dim 0, beside torch.compile in one process, 200
repetitions, L2 flushed), TB/s against GLOBAL_FOLDS: bf16 [1024, 50257] 2.152 -> 2.341
(torch.compile 2.325), [65536, 1031] 1.601 -> 1.643 (2.126), [8192, 8191] 2.271 -> 2.270
(2.191); f32 [1024, 50257] 2.744 -> 2.804 (2.496), [65536, 1031] 2.403 -> 2.448 (2.501).
Also tried: 32 into 4, 8 into 2, and 64 into 4 (bf16 2.469 and 1.972 on the first two,
but 2.138 on [8192, 8191], whose 512 CTAs it no longer fit in one wave), twice the CTAs
(2.034 at [65536, 1031] but f32 [1024, 50257] 2.610)."""


@dataclass(frozen=True)
class ColumnPlan:
    vec: int  # outputs per thread and load
    units: int  # output vectors
    split: int  # slices of the reduced axes (1: each thread walks all of them)


class ColumnReducer:
    """One tile.reduce whose innermost axis is kept, being lowered at the insertion point."""

    def __init__(self, info: OpInfo, src: Access, dst: Access, vec: int):
        self.info, self.src, self.dst = info, src, dst
        self.red = Reduction.of(info)
        self.shape = info.sources[0].shape
        self.outputs, self.length = self.red.sizes(self.shape)
        threads = info.scope_threads
        assert threads is not None
        units = self.outputs // vec
        split = max(1, min(threads // units, self.length)) if units < threads else 1
        self.plan = ColumnPlan(vec, units, split)
        self.threads = threads

    def _coords(self, unit: ir.Value, k: ir.Value) -> list[ir.Value]:
        """Source coordinate of reduced element k of output vector `unit`."""
        red, shape, vec = self.red, self.shape, self.plan.vec
        sizes = [const_index(shape[a]) for a in red.kept]
        sizes[-1] = const_index(shape[red.kept[-1]] // vec)
        kept = delinearize(unit, sizes)
        kept[-1] = arith.muli(kept[-1], const_index(vec))
        reduced = delinearize(k, [const_index(shape[a]) for a in red.axes])
        return red.source_coords(kept, reduced)

    def _dst_coords(self, unit: ir.Value) -> list[ir.Value]:
        coords = self._coords(unit, const_index(0))
        if len(self.dst.operand.shape) == len(self.shape):
            return coords  # keepdims: the reduced axes are 0 there
        return [coords[a] for a in self.red.kept]

    def _walk(self, unit: ir.Value, first: ir.Value, step: int) -> ir.Value:
        """Fold reduced elements first, first + step, ... of one output vector."""
        red, src, vec = self.red, self.src, self.plan.vec

        def load_at(k: ir.Value) -> ir.Value:
            value = load(src.address(self._coords(unit, k)), src.operand.dtype, vec)
            return convert(value, src.operand.dtype, red.acc, vec)

        loads, accumulators = self.folds()
        return fold_strided(red, first, self.length, step=step, load_at=load_at, vec=vec,
                            unroll=loads, accumulators=accumulators)

    def folds(self) -> tuple[int, int]:
        """(loads a round, accumulators) of a thread's walk: GLOBAL_FOLDS (SCALAR_FOLDS
        for loads of one element) where the thread walks at least that many rows (a shorter
        walk would take no round of them, each load waiting on the one before), else
        UNROLL into as many."""
        if self.info.sources[0].space != "global" or self.src.nbytes not in GLOBAL_FOLDS:
            return UNROLL, UNROLL
        loads, accumulators = SCALAR_FOLDS if self.plan.vec == 1 else \
            GLOBAL_FOLDS[self.src.nbytes]
        if self.length // self.plan.split < loads:
            return UNROLL, UNROLL
        return loads, accumulators

    def _write(self, unit: ir.Value, value: ir.Value) -> None:
        self.red.store(value, self.dst.address(self._dst_coords(unit)), self.dst.operand.dtype,
                       self.plan.vec)

    def emit(self) -> ColumnPlan:
        tid = scope_thread_index(self.info.scope, self.info.block)
        if self.plan.split == 1:
            for_each_item(tid, const_index(self.plan.units), self.threads,
                          lambda unit: self._write(unit, self._walk(unit, const_index(0), 1)))
        else:
            self._split(tid)
        return self.plan

    def _split(self, tid: ir.Value) -> None:
        """Slice s of output vector u: thread s * units + u. Partials meet in shared memory."""
        plan, red, info = self.plan, self.red, self.info
        partials = scratch(info, red, plan.units * plan.split * plan.vec)
        used = arith.cmpi(arith.CmpIPredicate.ult, tid, const_index(plan.units * plan.split))
        unit = arith.remui(tid, const_index(plan.units))
        slot = arith.muli(tid, const_index(plan.vec))

        def first_phase() -> None:
            total = self._walk(unit, arith.divui(tid, const_index(plan.units)), plan.split)
            store(total, (partials, [slot]), red.acc, plan.vec)

        when(used, first_phase)
        sync.barrier(info.scope, info.block)

        def second_phase() -> None:
            loop = scf.ForOp(const_index(0), const_index(plan.split), const_index(1),
                             [red.identity(plan.vec)])
            with ir.InsertionPoint(loop.body):
                where = arith.muli(arith.addi(arith.muli(loop.induction_variable,
                                                         const_index(plan.units)), tid),
                                   const_index(plan.vec))
                part = load((partials, [where]), red.acc, plan.vec)
                scf.YieldOp([red.combine(loop.inner_iter_args[0], part)])
            self._write(tid, loop.results[0])

        when(arith.cmpi(arith.CmpIPredicate.ult, tid, const_index(plan.units)), second_phase)
        sync.barrier(info.scope, info.block)  # the scratch is free again (the op may loop)
