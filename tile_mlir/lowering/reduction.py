"""The reduction engines behind tile.reduce's variants.

A tile.reduce over `axes` of a tile of shape S splits S into the kept axes
(R output positions) and the reduced axes (L elements each). Partial results
accumulate in f32 for 16-bit floats (sums of halves lose too much otherwise)
and in the element type for f32; lanes with nothing to reduce contribute the
kind's identity (0, 1, -inf, +inf); max and min propagate NaN like torch.

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

import math
from collections.abc import Callable
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, memref, nvvm, scf, vector

from tile_mlir import op_table
from tile_mlir.dialects import tile
from tile_mlir.dtypes import DTYPES, DType
from tile_mlir.lowering import sync
from tile_mlir.lowering.access import Access
from tile_mlir.lowering.analysis import OpInfo, enclosing
from tile_mlir.lowering.buffers import STORAGE_ALIGN
from tile_mlir.lowering.compute import convert, load, store, value_type
from tile_mlir.lowering.emit import const, const_index, scope_thread_index
from tile_mlir.lowering.partition import delinearize

WARP = 32


@dataclass(frozen=True)
class Reduction:
    """A tile.reduce, decoded: which axes, how to combine, in which type."""

    kind: op_table.ReduceKind
    axes: tuple[int, ...]  # reduced axes of src, ascending
    kept: tuple[int, ...]  # the other axes
    accum: bool
    acc: DType  # accumulator type
    scale: float | None  # applied to the result before it is stored

    @staticmethod
    def of(info: OpInfo) -> Reduction:
        op = info.op
        assert isinstance(op, tile.ReduceOp)
        rank = len(info.sources[0].shape)
        axes = tuple(sorted({a % rank for a in (op.axes if op.axes is not None
                                                  else range(rank))}))
        kept = tuple(a for a in range(rank) if a not in axes)
        dtype = info.sources[0].dtype
        acc = DTYPES["f32"] if dtype.is_float and dtype.bits < 32 else dtype
        return Reduction(op_table.REDUCE_KINDS[op.kind], axes, kept, op.accum, acc, op.scale)

    def source_coords(self, kept: list[ir.Value], reduced: list[ir.Value]) -> list[ir.Value]:
        """The source coordinate whose kept axes are `kept` and reduced axes `reduced`."""
        coords: list[ir.Value] = [const_index(0)] * (len(self.kept) + len(self.axes))
        for axis, value in [*zip(self.kept, kept, strict=True),
                            *zip(self.axes, reduced, strict=True)]:
            coords[axis] = value
        return coords

    def sizes(self, shape: tuple[int, ...]) -> tuple[int, int]:
        """(R outputs, L elements per output)."""
        return (math.prod(shape[a] for a in self.kept),
                math.prod(shape[a] for a in self.axes))

    def combine(self, a: ir.Value, b: ir.Value) -> ir.Value:
        row = op_table.lookup(self.kind.combine)
        assert row is not None
        return row.body([a, b], a.type)

    def identity(self, vec: int = 1) -> ir.Value:
        return const(value_type(self.acc, vec), self.kind.identity)

    def finish(self, value: ir.Value) -> ir.Value:
        """The result as stored: scaled when the op has a scale (before any accum)."""
        if self.scale is None:
            return value
        return arith.mulf(value, const(value.type, self.scale))


UNROLL = 4
"""Independent accumulators per lane: that many loads in flight before the first fold."""


def fold_strided(red: Reduction, first: ir.Value, bound: int, *, step: int,
                 load_at: Callable[[ir.Value], ir.Value], vec: int, unroll: int = UNROLL
                 ) -> ir.Value:
    """Fold load_at(k) for k = first, first + step, ... < bound into a `vec`-wide value.

    `unroll` accumulators take consecutive indices of each round, so a thread issues
    that many independent loads before it needs any of them (folds are not
    reassociated otherwise, and memory latency, not arithmetic, is the cost); a
    remainder loop takes what is left, and the accumulators fold together last.
    """
    span = step * unroll
    main_end = bound - (unroll - 1) * step
    if unroll == 1 or main_end <= 0:
        return _fold_loop(red, first, bound, step=step, load_at=load_at,
                          accs=[red.identity(vec)])[0]
    end = const_index(main_end)
    loop = scf.ForOp(first, end, const_index(span), [red.identity(vec)] * unroll)
    with ir.InsertionPoint(loop.body):
        base = loop.induction_variable
        values = [load_at(base if u == 0 else arith.addi(base, const_index(u * step)))
                  for u in range(unroll)]
        scf.YieldOp([red.combine(acc, value)
                     for acc, value in zip(loop.inner_iter_args, values, strict=True)])
    # where the remainder starts: first + ceil((main_end - first) / span) * span, or first
    ahead = arith.cmpi(arith.CmpIPredicate.ult, first, end)
    rounds = arith.ceildivui(arith.subi(end, arith.select(ahead, first, end)), const_index(span))
    rest = arith.addi(first, arith.muli(rounds, const_index(span)))
    accs = _fold_loop(red, rest, bound, step=step, load_at=load_at, accs=list(loop.results))
    total = accs[0]
    for acc in accs[1:]:
        total = red.combine(total, acc)
    return total


def _fold_loop(red: Reduction, first: ir.Value, bound: int, *, step: int,
               load_at: Callable[[ir.Value], ir.Value], accs: list[ir.Value]
               ) -> list[ir.Value]:
    """k = first, first + step, ... < bound folded into accs[0] (the others carried)."""
    loop = scf.ForOp(first, const_index(bound), const_index(step), accs)
    with ir.InsertionPoint(loop.body):
        k = loop.induction_variable
        carried = list(loop.inner_iter_args)
        scf.YieldOp([red.combine(carried[0], load_at(k)), *carried[1:]])
    return list(loop.results)


def next_pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def pow2_divisor(n: int) -> int:
    """The largest power of two dividing n."""
    return n & -n


def row_vector_width(src: Access, red: Reduction, shape: tuple[int, ...]) -> int:
    """The widest loads (up to 16 bytes) along the innermost axis when it is reduced,
    contiguous, a multiple of the width long and every vector start aligned; else 1."""
    inner = len(shape) - 1
    if inner not in red.axes or src.strides[inner] != 1 or not src.vectorizable:
        return 1
    vec = 16 // src.nbytes
    align = src.alignment(tuple((d,) for d in range(len(shape))))
    while vec > 1 and (shape[inner] % vec or align % vec):
        vec //= 2
    return vec


def group_size(length: int, threads: int) -> int:
    return min(next_pow2(length), WARP, pow2_divisor(threads))


# ------------------------------------------------------------ shuffles


def _i32(value: int) -> ir.Value:
    return const(ir.IntegerType.get_signless(32), value)


def warp_mask(tid: ir.Value, threads: int) -> ir.Value:
    """The lanes of this thread's warp that exist in a scope of `threads` threads."""
    if threads % WARP == 0:
        return _i32(-1)
    i32 = ir.IntegerType.get_signless(32)
    first = arith.muli(arith.divui(tid, const_index(WARP)), const_index(WARP))
    lanes = arith.index_cast(i32, arith.minui(arith.subi(const_index(threads), first),
                                              const_index(WARP)))
    full = arith.cmpi(arith.CmpIPredicate.eq, lanes, _i32(WARP))
    partial = arith.subi(arith.shli(_i32(1), lanes), _i32(1))
    return arith.select(full, _i32(-1), partial)


def butterfly(red: Reduction, value: ir.Value, mask: ir.Value, width: int,
              first_offset: int = 1) -> ir.Value:
    """Fold lanes that differ in the bits first_offset .. width/2: xor shuffles within
    segments of `width` lanes (the clamp operand carries the segment size)."""
    clamp = _i32(((WARP - width) << 8) | (WARP - 1))
    offset = first_offset
    while offset < width:
        other = nvvm.shfl_sync(value.type, mask, value, _i32(offset), clamp, nvvm.ShflKind.bfly)
        value = red.combine(value, other)
        offset *= 2
    return value


def when(condition: ir.Value, body: Callable[[], None]) -> None:
    branch = scf.IfOp(condition)
    with ir.InsertionPoint(branch.then_block):
        body()
        scf.YieldOp([])


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
    before the shuffles."""
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
        """Fold units first, first + step, ... of a row into an accumulator."""
        red, src, vec = self.red, self.src, self.vec

        def load_at(unit: ir.Value) -> ir.Value:
            k = arith.muli(unit, const_index(vec)) if vec > 1 else unit
            value = load(src.address(self._coords(row, k)), src.operand.dtype, vec)
            return convert(value, src.operand.dtype, red.acc, vec)

        acc = fold_strided(red, first, self.units, step=step, load_at=load_at, vec=vec)
        if vec == 1:
            return acc
        lanes = [vector.extract(acc, [], [i]) for i in range(vec)]
        total = lanes[0]
        for lane in lanes[1:]:
            total = red.combine(total, lane)
        return total

    def write(self, row: ir.Value, value: ir.Value) -> None:
        """dst[row] = value, or dst[row] combined with value under accum, in dst's type."""
        red, dst = self.red, self.dst
        dtype = dst.operand.dtype
        address = dst.address(self._dst_coords(row))
        value = red.finish(value)
        if red.accum:
            value = red.combine(convert(load(address, dtype, 1), dtype, red.acc, 1), value)
        store(convert(value, red.acc, dtype, 1), address, dtype, 1)

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


def scratch(info: OpInfo, red: Reduction, count: int) -> ir.Value:
    """A shared buffer of `count` accumulators for this op's partial results."""
    module = enclosing(info.op, "gpu.module")
    assert module is not None
    body = module.operation.regions[0].blocks[0]
    taken = {ir.StringAttr(op.operation.attributes["sym_name"]).value
             for op in body.operations if "sym_name" in op.operation.attributes}
    name = next(f"__tile_reduce_{n}" for n in range(len(taken) + 1)
                if f"__tile_reduce_{n}" not in taken)
    flat = ir.MemRefType.get([count], ir.Type.parse(red.acc.mlir),
                             memory_space=ir.Attribute.parse("#gpu.address_space<workgroup>"))
    with ir.InsertionPoint.at_block_begin(body):
        memref.GlobalOp(name, ir.TypeAttr.get(flat), sym_visibility="private",
                        initial_value=ir.UnitAttr.get(), alignment=STORAGE_ALIGN)
    return memref.get_global(flat, name)
