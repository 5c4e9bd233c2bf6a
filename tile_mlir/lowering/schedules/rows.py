"""Row reductions: the reduced axes innermost, seed 001's groups of lanes and shuffle tree.

- `sequential`: one thread walks everything (scope thread).
- `grouped` (seed 001): the scope's threads form groups of
  `group = min(next_pow2(L / vec), 32, the largest power of two dividing T)`
  lanes; each lane gathers its part of a row into a register, the group folds
  it with log2(group) `shfl.sync.bfly` steps over a segment of `group` lanes,
  and lane 0 writes. Groups loop when there are more rows than groups; when
  there are fewer rows than groups and the rows are long, several groups share
  a row and combine their partials through shared memory. Groups never
  straddle missing threads: T = 48 gives groups of 16, not 32 (a 48-thread
  sum must see all 48 lanes).
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, memref, scf, vector

from tile_mlir.contract import ACCESS_BYTES, WARP, widest_vector
from tile_mlir.lowering.schedules.reduction import (
    Reduction,
    butterfly,
    fold_strided,
    next_pow2,
    pow2_divisor,
    scratch,
    warp_mask,
    when,
)
from tile_mlir.lowering.schedules.synthesized import delinearize
from tile_mlir.lowering.support import sync
from tile_mlir.lowering.support.access import Access
from tile_mlir.lowering.support.analysis import OpInfo
from tile_mlir.lowering.support.compute import convert, load
from tile_mlir.lowering.support.emit import const, const_index, scope_thread_index


def row_vector_width(src: Access, red: Reduction, shape: tuple[int, ...]) -> int:
    """The widest loads (up to 16 bytes) along the innermost axis when it is reduced,
    contiguous, a multiple of the width long and every vector start aligned; else 1."""
    inner = len(shape) - 1
    if inner not in red.axes or src.strides[inner] != 1:
        return 1
    return widest_vector(ACCESS_BYTES // src.nbytes, shape[inner],
                         src.alignment(tuple((d,) for d in range(len(shape)))))


def group_size(length: int, threads: int) -> int:
    return min(next_pow2(length), WARP, pow2_divisor(threads))


def _eq0(value: ir.Value) -> ir.Value:
    return arith.cmpi(arith.CmpIPredicate.eq, value, const_index(0))


def _below(value: ir.Value, bound: int) -> ir.Value:
    return arith.cmpi(arith.CmpIPredicate.ult, value, const_index(bound))


@dataclass(frozen=True)
class GroupPlan:
    group: int  # lanes per group
    groups: int  # groups in the scope
    split: int  # groups sharing one row (1: each row is one group's)


def group_plan(outputs: int, length: int, threads: int, per_lane: int = 1) -> GroupPlan:
    """How the scope's threads share the rows. With per_lane > 1 a group is made small
    enough that each lane folds at least that many of a row's units (loads in flight)
    before the shuffles, but for a row of at most a warp's units, which takes a lane a
    unit (lanes enough for every load at once). Measured on an H100 with reduce/gmem
    (row sums and maxima of 2^26-2^28 bytes, a unit a lane against per_lane = 4, beside
    torch.compile): bf16 rows of 64 2.59 -> 2.83 TB/s, of 128 2.73-2.77 -> 2.83-2.84
    (torch.compile 2.80-2.83), f32 rows of 64 2.85 -> 2.95, of 128 2.96 -> 2.97, bf16
    rows of 32 and 256 within 0.7%; rows of 64 units (bf16 of 512, f32 of 256) 1.2-1.8%
    faster with 4 a lane, longer ones alike."""
    if length <= WARP:
        per_lane = 1
    group = group_size(-(-length // per_lane), threads)
    groups = threads // group
    # A row's partials are folded by its first group, one partial a lane.
    split = min(groups // outputs, group) if outputs < groups and length > group else 1
    return GroupPlan(group, groups, split)


@dataclass(frozen=True)
class _Lanes:
    lane: ir.Value  # index within the group
    group: ir.Value  # the group's index in the scope
    mask: ir.Value  # the warp's existing lanes


# ------------------------------------------------------------ the reducer


class RowReducer:
    """One tile.reduce over memory tiles being lowered, at the insertion point.

    With vec > 1 each lane loads `vec` consecutive elements of the innermost
    (reduced, contiguous) axis at a time into a vector accumulator, folded to a
    scalar before the shuffles: 16-byte loads for rows read from global memory.
    """

    def __init__(self, info: OpInfo, src: Access, dst: Access, vec: int = 1,
                 per_lane: int = 1):
        self.info, self.src, self.dst, self.vec = info, src, dst, vec
        self.per_lane = per_lane  # units a lane should fold at least (see group_plan)
        self.red = Reduction.of(info)
        self.shape = info.sources[0].shape
        self.outputs, self.length = self.red.sizes(self.shape)
        self.units = self.length // vec  # what a lane takes at a time

    def _coords(self, row: ir.Value, k: ir.Value) -> list[ir.Value]:
        """The source coordinate of element k of output row `row`."""
        red, shape = self.red, self.shape
        kept = delinearize(row, [const_index(shape[a]) for a in red.kept]) if red.kept else []
        reduced = delinearize(k, [const_index(shape[a]) for a in red.axes])
        return red.source_coords(kept, reduced)

    def _dst_coords(self, row: ir.Value) -> list[ir.Value]:
        """dst's coordinate of output row `row` (dst has the kept axes, or all with 1s)."""
        red, shape, rank = self.red, self.shape, len(self.dst.operand.shape)
        kept = delinearize(row, [const_index(shape[a]) for a in red.kept]) if red.kept else []
        if rank == len(shape):
            values = iter(kept)
            return [next(values) if a in red.kept else const_index(0) for a in range(rank)]
        return kept if kept else [const_index(0)] * rank  # a full reduction into shape (1,)

    def gather(self, row: ir.Value, first: ir.Value, step: int) -> ir.Value:
        """Fold units first, first + step, ... of a row into an accumulator: one (of `vec`
        lanes), each round's loads folding into it in turn. Four, as fold_strided
        takes by default, held 32 registers for 16-bit rows (vectors of 8 f32) and
        left an SM two CTAs of 512 threads where one accumulator leaves it four.
        Measured on an H100 (ops.sum over dim -1, beside torch eager and
        torch.compile in one process): bf16 rows of 14336 (4096 of them; 51 -> 30
        registers) 2.37 -> 2.83 TB/s, of 8000 2.33 -> 2.79 (torch.compile 2.86 and
        2.90), of 32000 2.85 -> 2.82, of 8192 and 1024 unchanged (29 -> 30
        registers), f32 rows within 1%."""
        red, src, vec = self.red, self.src, self.vec

        def load_at(unit: ir.Value) -> ir.Value:
            k = arith.muli(unit, const_index(vec)) if vec > 1 else unit
            value = load(src.address(self._coords(row, k)), src.operand.dtype, vec)
            return convert(value, src.operand.dtype, red.acc, vec)

        acc = fold_strided(red, first, self.units, step=step, load_at=load_at, vec=vec,
                           accumulators=1, from_lane=step > 1)
        if vec == 1:
            return acc
        lanes = [vector.extract(acc, [], [i]) for i in range(vec)]
        total = lanes[0]
        for lane in lanes[1:]:
            total = red.combine(total, lane)
        return total

    def write(self, row: ir.Value, value: ir.Value) -> None:
        """dst[row] = value, or dst[row] combined with value under accum, in dst's type."""
        self.red.store(value, self.dst.address(self._dst_coords(row)), self.dst.operand.dtype)

    def sequential(self) -> None:
        """One thread: for each output row, a loop over its elements."""
        loop = scf.ForOp(const_index(0), const_index(self.outputs), const_index(1))
        with ir.InsertionPoint(loop.body):
            row = loop.induction_variable
            self.write(row, self.gather(row, const_index(0), 1))
            scf.YieldOp([])

    def grouped(self) -> GroupPlan:
        """Seed 001's shuffle tree, with row loops and split rows (see the module docstring).

        Every lane of a warp runs every shuffle: `shfl.sync` names the whole warp, so the
        control flow around shuffles is uniform (trip counts from the scope, not the
        lane) and lanes without work contribute the identity instead of skipping.
        """
        info = self.info
        threads = info.scope_threads
        assert threads is not None
        plan = group_plan(self.outputs, self.units, threads, self.per_lane)
        tid = scope_thread_index(info.scope, info.block)
        lanes = _Lanes(
            arith.remui(tid, const_index(plan.group)) if plan.group < threads else tid,
            arith.divui(tid, const_index(plan.group)),
            warp_mask(tid, threads),
        )
        if plan.split == 1:
            self._rows_per_group(plan, lanes)
        else:
            self._split_rows(plan, lanes)
        return plan

    def _fold(self, row: ir.Value, active: ir.Value, first: ir.Value, *, step: int,
              lanes: _Lanes, width: int) -> ir.Value:
        """Gather (nothing when inactive: the identity) and fold across `width` lanes."""
        start = arith.select(active, first, const_index(self.units))
        partial = self.gather(arith.select(active, row, const_index(0)), start, step)
        return butterfly(self.red, partial, lanes.mask, width)

    def _rows_per_group(self, plan: GroupPlan, lanes: _Lanes) -> None:
        """Group g takes rows g, g + groups, ...: ceil(outputs / groups) rounds for all."""
        rounds = -(-self.outputs // plan.groups)
        loop = scf.ForOp(const_index(0), const_index(rounds), const_index(1))
        with ir.InsertionPoint(loop.body):
            row = arith.addi(arith.muli(loop.induction_variable, const_index(plan.groups)),
                             lanes.group)
            active = _below(row, self.outputs) if self.outputs % plan.groups else \
                const(ir.IntegerType.get_signless(1), 1)
            total = self._fold(row, active, lanes.lane, step=plan.group, lanes=lanes,
                               width=plan.group)
            when(arith.andi(active, _eq0(lanes.lane)), lambda: self.write(row, total))
            scf.YieldOp([])

    def _split_rows(self, plan: GroupPlan, lanes: _Lanes) -> None:
        """`split` groups per row: each folds a stripe, lane 0 leaves the partial in shared
        memory, and after the scope's barrier the row's first group folds the partials."""
        info, red, group, lane = self.info, self.red, lanes.group, lanes.lane
        partials = scratch(info, red, self.outputs * plan.split)
        active = _below(group, self.outputs * plan.split)
        stripe = arith.remui(group, const_index(plan.split))
        first = arith.addi(arith.muli(stripe, const_index(plan.group)), lane)
        total = self._fold(arith.divui(group, const_index(plan.split)), active, first,
                           step=plan.group * plan.split, lanes=lanes, width=plan.group)
        when(arith.andi(active, _eq0(lane)), lambda: memref.store(total, partials, [group]))
        sync.barrier(info.scope, info.block)
        leader = _below(group, self.outputs)
        have = arith.andi(leader, _below(lane, plan.split))
        part = arith.addi(arith.muli(group, const_index(plan.split)), lane)
        value = arith.select(
            have, memref.load(partials, [arith.select(have, part, const_index(0))]),
            red.identity())
        total = butterfly(red, value, lanes.mask, next_pow2(plan.split))
        when(arith.andi(leader, _eq0(lane)), lambda: self.write(group, total))
        sync.barrier(info.scope, info.block)  # the scratch is free again (the op may loop)


