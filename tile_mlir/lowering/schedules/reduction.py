"""What every reduction schedule shares: the decoded op, folds, shuffles and scratch.

A tile.reduce over `axes` of a tile of shape S splits S into the kept axes
(R output positions) and the reduced axes (L elements each). Partial results
accumulate in f32 for 16-bit floats (sums of halves lose too much otherwise)
and in the element type for f32; lanes with nothing to reduce contribute the
kind's identity (0, 1, -inf, +inf); max and min propagate NaN like torch. A tuple
kind (op_table.ReduceKind's arity > 1: online softmax's (max, sum), Welford's (count,
mean, M2)) folds its k sources together: its partials travel as one vector<k x f32>
(shuffled a component at a time), which only reduce/local takes. The
schedules: rows.py (the innermost axis reduced, seed 001's shuffle tree),
columns.py (the innermost axis kept), registers.py (register tiles).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, memref, nvvm, scf, vector

from tile_mlir import op_table
from tile_mlir.contract import WARP
from tile_mlir.dialects import tile
from tile_mlir.dtypes import DTYPES, DType
from tile_mlir.lowering.support.analysis import OpInfo
from tile_mlir.lowering.support.buffers import shared_scratch
from tile_mlir.lowering.support.compute import Address, convert, load, store, value_type
from tile_mlir.lowering.support.emit import const, const_index, linear_thread_id


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

    @property
    def arity(self) -> int:
        """Values per partial: 1, or a tuple kind's k."""
        return self.kind.arity

    @property
    def acc_type(self) -> ir.Type:
        """A partial's type: the accumulation type, a vector<k x it> for a tuple kind."""
        scalar = ir.Type.parse(self.acc.mlir)
        return scalar if self.arity == 1 else ir.VectorType.get([self.arity], scalar)

    def pack(self, values: list[ir.Value]) -> ir.Value:
        """A tuple kind's k values as one partial."""
        return values[0] if self.arity == 1 else vector.from_elements(self.acc_type, values)

    def unpack(self, partial: ir.Value) -> list[ir.Value]:
        return [partial] if self.arity == 1 else \
            [vector.extract(partial, [], [i]) for i in range(self.arity)]

    def combine(self, a: ir.Value, b: ir.Value) -> ir.Value:
        if self.kind.merge is not None:
            return self.pack(self.kind.merge(self.unpack(a), self.unpack(b)))
        row = op_table.lookup(self.kind.combine)
        assert row is not None
        return row.body([a, b], a.type)

    def identity(self, vec: int = 1) -> ir.Value:
        if self.arity > 1:
            assert vec == 1, "a tuple kind folds one partial at a time"
            scalar = ir.Type.parse(self.acc.mlir)
            return self.pack([const(scalar, v) for v in self.kind.identity])
        return const(value_type(self.acc, vec), self.kind.identity[0])

    def finish(self, value: ir.Value) -> ir.Value:
        """The result as stored: scaled when the op has a scale (before any accum)."""
        if self.scale is None:
            return value
        return arith.mulf(value, const(value.type, self.scale))

    def store(self, value: ir.Value, address: Address, dtype: DType, vec: int = 1) -> None:
        """A result (`vec` of them) into dst at `address`: scaled, combined with dst's old
        value under accum, converted from the accumulation type to dst's."""
        value = self.finish(value)
        if self.accum:
            value = self.combine(convert(load(address, dtype, vec), dtype, self.acc, vec), value)
        store(convert(value, self.acc, dtype, vec), address, dtype, vec)


UNROLL = 4
"""Independent accumulators per lane: that many loads in flight before the first fold."""


def fold_strided(red: Reduction, first: ir.Value, bound: int, *, step: int,
                 load_at: Callable[[ir.Value], ir.Value], vec: int, unroll: int = UNROLL,
                 accumulators: int | None = None, from_lane: bool = False) -> ir.Value:
    """Fold load_at(k) for k = first, first + step, ... < bound into a `vec`-wide value.

    Each round issues `unroll` independent loads of consecutive indices before it needs
    any of them (memory latency, not arithmetic, is the cost), and folds load u into
    accumulator u % `accumulators` (as many as loads unless given: fewer keep registers
    for the loads in flight); folds are not reassociated otherwise. What is left (fewer
    than `unroll` indices) takes one more round of loads issued together (`_fold_tail`),
    and the accumulators fold together last. `from_lane`: the caller promises first <
    step (a lane's place in its stride) or first >= bound (an idle lane), so that every
    working lane has the same full rounds (`_fold_rounds`).
    """
    accs = accumulators or unroll
    span = step * unroll
    main_end = bound - (unroll - 1) * step
    rounds = (bound // step) // unroll
    if from_lane and rounds and rounds * unroll * vec <= ROUND_VALUES:
        return _fold_rounds(red, first, bound, step=step, load_at=load_at, vec=vec,
                            unroll=unroll, accs=accs)
    if unroll == 1:
        return _fold_loop(red, first, bound, step=step, load_at=load_at,
                          accs=[red.identity(vec)])[0]
    if main_end <= 0:  # bound <= (unroll - 1) * step: fewer than `unroll` indices a thread
        return _fold_tail(red, first, bound, step=step, load_at=load_at,
                          accs=[red.identity(vec)], count=-(-bound // step))[0]
    end = const_index(main_end)
    loop = scf.ForOp(first, end, const_index(span), [red.identity(vec)] * accs)
    with ir.InsertionPoint(loop.body):
        scf.YieldOp(_fold_round(red, loop.induction_variable, list(loop.inner_iter_args),
                                step=step, load_at=load_at, unroll=unroll))
    # where the remainder starts: first + ceil((main_end - first) / span) * span, or first
    ahead = arith.cmpi(arith.CmpIPredicate.ult, first, end)
    rounds = arith.ceildivui(arith.subi(end, arith.select(ahead, first, end)), const_index(span))
    rest = arith.addi(first, arith.muli(rounds, const_index(span)))
    return _fold_together(red, _fold_tail(red, rest, bound, step=step, load_at=load_at,
                                          accs=list(loop.results), count=unroll - 1))


def _fold_round(red: Reduction, base: ir.Value, accs: list[ir.Value], *, step: int,
                load_at: Callable[[ir.Value], ir.Value], unroll: int) -> list[ir.Value]:
    """One round: the loads of base, base + step, ... (`unroll` of them) issued first,
    then load u folded into accs[u % len(accs)]."""
    values = [load_at(base if u == 0 else arith.addi(base, const_index(u * step)))
              for u in range(unroll)]
    folded = list(accs)
    for u, value in enumerate(values):
        folded[u % len(folded)] = red.combine(folded[u % len(folded)], value)
    return folded


def _fold_together(red: Reduction, accs: list[ir.Value]) -> ir.Value:
    """The accumulators folded in order, the last step of a strided fold."""
    total = accs[0]
    for acc in accs[1:]:
        total = red.combine(total, acc)
    return total


ROUND_VALUES = 32
"""The elements a lane's common rounds may load at most (`_fold_rounds`; 0: none, each lane
loops from its `first`): LLVM unrolls such a loop whole and ptxas issues every load of it
together, each load's registers held until its fold; longer rows keep the loop (many warps
keep their loads in flight anyway). Measured (H100, 2026-12-07, bench/rows_ab.py, 256 MiB,
150 repetitions, against ROUND_VALUES = 0, whose second round's loads waited for the
first's folds): sum f32 130816x513 2.97 -> 3.03 TB/s, amax 2.98 -> 3.03 (torch.compile
3.03, 3.02); sum f32 of 257, 1024, 128 and bf16 of 1024, 8192 within 0.01 TB/s."""


def _fold_rounds(red: Reduction, first: ir.Value, bound: int, *, step: int,
                 load_at: Callable[[ir.Value], ir.Value], vec: int, unroll: int,
                 accs: int) -> ir.Value:
    """fold_strided where first < step or first >= bound, and the rounds load at most
    ROUND_VALUES elements: a lane that works has bound // step indices or one more, so
    (bound // step) // unroll full rounds, a loop of that static trip count, which LLVM
    unrolls (the rounds' loads then issue together), then what is left, at most `unroll`
    indices (`_fold_tail`); an idle lane skips it all. fold_strided's loop from `first`
    to a bound has a trip count that depends on the lane: each round's loads waited for
    the previous round's folds."""
    rounds = (bound // step) // unroll
    identity = [red.identity(vec)] * accs
    working = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ult, first, const_index(bound)),
                       [a.type for a in identity], has_else=True)
    with ir.InsertionPoint(working.then_block):
        loop = scf.ForOp(const_index(0), const_index(rounds), const_index(1), identity)
        with ir.InsertionPoint(loop.body):
            base = arith.addi(first, arith.muli(loop.induction_variable,
                                                const_index(step * unroll)))
            scf.YieldOp(_fold_round(red, base, list(loop.inner_iter_args), step=step,
                                    load_at=load_at, unroll=unroll))
        left = (bound // step) % unroll + (1 if bound % step else 0)  # at most, a lane
        rest = arith.addi(first, const_index(rounds * step * unroll))
        scf.YieldOp(_fold_tail(red, rest, bound, step=step, load_at=load_at,
                               accs=list(loop.results), count=left) if left else
                    list(loop.results))
    with ir.InsertionPoint(working.else_block):
        scf.YieldOp(identity)
    return _fold_together(red, list(working.results))


def _fold_tail(red: Reduction, first: ir.Value, bound: int, *, step: int,
               load_at: Callable[[ir.Value], ir.Value], accs: list[ir.Value], count: int
               ) -> list[ir.Value]:
    """k = first, first + step, ... < bound, at most `count` of them, folded into accs[0]
    in order (the others carried), their loads issued together: straight-line code
    whose index past the end reads the last element instead and leaves the accumulator
    as it was. A loop there waited on each load before the next: measured on an H100
    (ops.sum over dim -1, beside torch eager and torch.compile in one process), bf16
    rows of 32000 (2048 of them) 2.66 -> 2.85 TB/s (torch.compile 2.83-2.84), of 8000
    2.09 -> 2.33, of 14336 2.33 -> 2.37 (torch.compile 2.85-2.90: still 0.81-0.83x, for
    the registers of four accumulators, which RowReducer.gather now spares); power-of-two
    rows unchanged. Threads with nothing left skip it."""
    branch = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ult, first, const_index(bound)),
                      [a.type for a in accs], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        last = const_index(bound - 1)
        picks: list[tuple[ir.Value | None, ir.Value]] = [(None, load_at(first))]
        for u in range(1, count):
            k = arith.addi(first, const_index(u * step))
            inside = arith.cmpi(arith.CmpIPredicate.ult, k, const_index(bound))
            picks.append((inside, load_at(arith.select(inside, k, last))))
        acc = accs[0]
        for inside, value in picks:
            folded = red.combine(acc, value)
            acc = folded if inside is None else arith.select(inside, folded, acc)
        scf.YieldOp([acc, *accs[1:]])
    with ir.InsertionPoint(branch.else_block):
        scf.YieldOp(accs)
    return list(branch.results)


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


def shuffle_xor(value: ir.Value, mask: ir.Value, offset: int, clamp: ir.Value) -> ir.Value:
    """The value of the lane whose index differs by xor `offset` (shfl.sync.bfly); a
    tuple kind's vector a component at a time."""
    return _shuffle(value, mask, offset, clamp, nvvm.ShflKind.bfly)


def broadcast(value: ir.Value, mask: ir.Value, lane: int = 0) -> ir.Value:
    """Lane `lane`'s value in every lane of the warp (shfl.sync.idx)."""
    return _shuffle(value, mask, lane, _i32(WARP - 1), nvvm.ShflKind.idx)


def _shuffle(value: ir.Value, mask: ir.Value, operand: int, clamp: ir.Value,
             kind: nvvm.ShflKind) -> ir.Value:
    if not isinstance(value.type, ir.VectorType):
        return nvvm.shfl_sync(value.type, mask, value, _i32(operand), clamp, kind)
    vector_type = ir.VectorType(value.type)
    parts = [vector.extract(value, [], [i]) for i in range(vector_type.shape[0])]
    return vector.from_elements(vector_type, [
        nvvm.shfl_sync(p.type, mask, p, _i32(operand), clamp, kind) for p in parts])


def butterfly(red: Reduction, value: ir.Value, mask: ir.Value, width: int,
              first_offset: int = 1) -> ir.Value:
    """Fold lanes that differ in the bits first_offset .. width/2: xor shuffles within
    segments of `width` lanes (the clamp operand carries the segment size)."""
    clamp = _i32(((WARP - width) << 8) | (WARP - 1))
    offset = first_offset
    while offset < width:
        other = shuffle_xor(value, mask, offset, clamp)
        value = red.combine(value, other)
        offset *= 2
    return value


def when(condition: ir.Value, body: Callable[[], None]) -> None:
    branch = scf.IfOp(condition)
    with ir.InsertionPoint(branch.then_block):
        body()
        scf.YieldOp([])


def scratch(info: OpInfo, red: Reduction, count: int, *, per_instance: bool = True
            ) -> ir.Value:
    """A shared buffer of `count` accumulators for this op's partial results.

    At warp and warpgroup scope every warp (warpgroup) of the block runs the op at once,
    on its own data: with `per_instance` each gets `count` accumulators of its own (a
    view at its index times count), where one buffer for all let them overwrite each
    other's partials. A caller that indexes by the thread in the CTA passes False."""
    threads, block = info.scope_threads, info.block_threads
    instances = block // threads if per_instance and info.scope in ("warp", "warpgroup") \
        and threads and block else 1
    buffer = shared_scratch(info.op, "__tile_reduce", red.acc_type, count * instances)
    flat = ir.MemRefType(buffer.type)
    workgroup = flat.memory_space
    if instances == 1:
        return buffer
    assert info.block is not None and threads is not None
    instance = arith.divui(linear_thread_id(info.block), const_index(threads))
    offset = arith.muli(instance, const_index(count))
    view = ir.MemRefType.get([count], flat.element_type, ir.StridedLayoutAttr.get(
        ir.ShapedType.get_dynamic_stride_or_offset(), [1]), workgroup)
    return memref.subview(buffer, [offset], [count], [1], result_type=view)
