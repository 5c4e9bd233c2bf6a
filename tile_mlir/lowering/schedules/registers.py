"""The register reduction: each thread folds its registers, lanes butterfly, warps meet in
shared memory.

A tile.reduce of a register tile (reduce/local), into a register tile or into a
shared or global dst. For each kept register coordinate of its bundle (a slot),
a thread folds the reduced register dims sequentially, then xor-shuffles across
the reduced axes' lane fields (threads.py: a butterfly, after which every lane
of the group holds the group's value). Where reduced axes are spread over warps
too (warp fields), every thread leaves its value in a shared scratch at [slot,
its thread index]; after one barrier of the scope every thread reads the
partials of the warps that share its elements, in the same order everywhere (so
every thread holds the same bits), and folds them. The result then goes into
every holder's registers (dst's layout replicates over the reduced thread axes)
or, for a memory dst, is written by one thread per output. A second barrier
after the reads frees the scratch for the op's next run, only where it can run
again (a loop) with no other barrier between (reused_without_barrier).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, memref, nvvm, scf

from tile_mlir.contract import WARP
from tile_mlir.dialects.tile import SCOPES
from tile_mlir.layout import TileLayout
from tile_mlir.lowering.schedules import induced
from tile_mlir.lowering.schedules.reduction import Reduction, butterfly, scratch, warp_mask
from tile_mlir.lowering.schedules.threads import Field, ThreadPlan, thread_plan
from tile_mlir.lowering.support import sync, tails
from tile_mlir.lowering.support.access import Access, linearize
from tile_mlir.lowering.support.analysis import OpInfo, describe
from tile_mlir.lowering.support.compute import convert, load, row_major
from tile_mlir.lowering.support.emit import const, const_index, linear_thread_id, scope_thread_index


def _register_dims(layout: TileLayout, dims: tuple[int, ...]) -> list[int]:
    return [a for a in dims if layout.shard[a].axis is None]


def _offset(layout: TileLayout, coords: dict[int, ir.Value]) -> ir.Value:
    """A register offset: memory dims only (thread dims have no memory stride)."""
    dims = [a for a in range(layout.rank) if layout.shard[a].axis is None]
    return linearize([coords[a] for a in dims], [layout.shard[a].stride for a in dims],
                     layout.offset)


def _i32(value: int) -> ir.Value:
    return const(ir.IntegerType.get_signless(32), value)


@dataclass(frozen=True)
class _Local:
    info: OpInfo
    red: Reduction
    src: Access
    dst: Access
    plan: ThreadPlan
    tid: ir.Value  # the thread's index in the scope
    mask: ir.Value  # the warp's existing lanes, for the shuffles

    @property
    def layout(self) -> TileLayout:
        assert self.src.layout is not None
        return self.src.layout


def reduce(info: OpInfo, red: Reduction, src: Access, dst: Access) -> None:
    """Lower the register reduction at the insertion point."""
    assert src.layout is not None
    threads = info.scope_threads
    assert threads is not None
    plan, why = thread_plan(src.layout, red.axes, threads)
    assert plan is not None, why
    tid = scope_thread_index(info.scope, info.block)
    op = _Local(info, red, src, dst, plan, tid, warp_mask(tid, threads))
    if plan.warps:
        _across_warps(op)
    else:
        _store_all(op, lambda coords, _: _partial(op, coords))


def _store_all(op: _Local, value_at: Callable[[dict[int, ir.Value], ir.Value], ir.Value]
               ) -> None:
    """Each kept coordinate's result into dst: every holder's registers, or one writer
    per output for a memory dst."""
    writer = None if op.dst.operand.space == "local" else _writer(op)

    def body(coords: dict[int, ir.Value], slot: ir.Value) -> None:
        value = value_at(coords, slot)  # shuffles: every lane runs them
        tails.when(writer, lambda: _store(op, coords, value))

    _kept_loops(op, body)


def _kept_loops(op: _Local, body: Callable[[dict[int, ir.Value], ir.Value], None],
                coords: dict[int, ir.Value] | None = None, depth: int = 0) -> None:
    """body(coords, slot) for each kept coordinate of the thread (the kept dims over
    threads fixed by it, the kept register dims looped over; slot: the row-major index
    over the kept register dims)."""
    coords = _thread_coords(op) if coords is None else coords
    kept = _register_dims(op.layout, op.red.kept)
    if depth == len(kept):
        extents = [const_index(op.layout.shape[a]) for a in kept]
        body(coords, row_major([coords[a] for a in kept], extents))
        return
    axis = kept[depth]
    loop = scf.ForOp(const_index(0), const_index(op.layout.shape[axis]), const_index(1))
    with ir.InsertionPoint(loop.body):
        _kept_loops(op, body, {**coords, axis: loop.induction_variable}, depth + 1)
        scf.YieldOp([])


def _partial(op: _Local, coords: dict[int, ir.Value]) -> ir.Value:
    """The thread's registers folded, then the butterflies over the lane fields."""
    value = _fold_registers(op.red, op.src, coords, _register_dims(op.layout, op.red.axes))
    for field in op.plan.lanes:
        value = _butterfly(op, value, field)
    return value


def _butterfly(op: _Local, value: ir.Value, field: Field) -> ir.Value:
    """Fold lanes differing in one lane field. In a scope whose last warp is partial the
    lanes past its end contribute the identity (shfl.sync reads them as undefined)."""
    width = field.stride * field.extent
    if not op.plan.partial_warp:
        return butterfly(op.red, value, op.mask, width, field.stride)
    lane = arith.remui(op.tid, const_index(WARP))
    first = arith.subi(op.tid, lane)
    present = arith.subi(const_index(op.plan.threads), first)  # lanes of this warp, capped
    offset = field.stride
    while offset < width:
        other = nvvm.shfl_sync(value.type, op.mask, value, _i32(offset), _i32(WARP - 1),
                               nvvm.ShflKind.bfly)
        partner = arith.xori(lane, const_index(offset))
        valid = arith.cmpi(arith.CmpIPredicate.ult, partner, present)
        value = op.red.combine(value, arith.select(valid, other, op.red.identity()))
        offset *= 2
    return value


def _fold_registers(red: Reduction, src: Access, coords: dict[int, ir.Value],
                    dims: list[int]) -> ir.Value:
    """Fold the thread's registers over the reduced register dims (nested loops, each
    starting from its first element rather than the identity)."""
    assert src.layout is not None and src.storage is not None
    layout, storage = src.layout, src.storage
    if not dims:
        value = load((storage, [_offset(layout, coords)]), src.operand.dtype, 1)
        return convert(value, src.operand.dtype, red.acc, 1)
    first = _fold_registers(red, src, {**coords, dims[0]: const_index(0)}, dims[1:])
    if layout.shape[dims[0]] == 1:
        return first
    loop = scf.ForOp(const_index(1), const_index(layout.shape[dims[0]]), const_index(1),
                     [first])
    with ir.InsertionPoint(loop.body):
        inner = _fold_registers(red, src, {**coords, dims[0]: loop.induction_variable}, dims[1:])
        scf.YieldOp([red.combine(loop.inner_iter_args[0], inner)])
    result: ir.Value = loop.results[0]
    return result


# ------------------------------------------------------------ across warps


def _across_warps(op: _Local) -> None:
    """Partials through the shared scratch: write, one barrier, every thread reads and
    folds its warps' partials (a second barrier only where the op may run again)."""
    info = op.info
    block = info.block
    assert block is not None
    again = reused_without_barrier(info.op.operation, info.scope)  # before ours stands
    cta_threads = math.prod(block)
    slots = math.prod(op.layout.shape[a] for a in _register_dims(op.layout, op.red.kept))
    partials = scratch(info, op.red, slots * cta_threads, per_instance=False)
    # the scratch is the CTA's: a warpgroup-scope op indexes by the thread in the CTA
    cta_tid = op.tid if info.scope == "cta" else linear_thread_id(block)
    scope_base = arith.subi(cta_tid, op.tid) if info.scope != "cta" else None

    def at(slot: ir.Value, thread: ir.Value) -> ir.Value:
        index = arith.addi(arith.muli(slot, const_index(cta_threads)), thread)
        return index if scope_base is None else arith.addi(index, scope_base)

    _kept_loops(op, lambda coords, slot: memref.store(_partial(op, coords), partials,
                                                      [at(slot, op.tid)]))
    sync.barrier(info.scope, block)
    base = _base(op)

    def gather(coords: dict[int, ir.Value], slot: ir.Value) -> ir.Value:
        return _gather(op, lambda thread: memref.load(partials, [at(slot, thread)]), base)

    _store_all(op, gather)
    if again:
        sync.barrier(info.scope, block)


def _base(op: _Local) -> ir.Value:
    """This thread's index with its reduced fields cleared: partial k is at base + k."""
    base = op.tid
    for field in (*op.plan.lanes, *op.plan.warps):
        digit = arith.divui(op.tid, const_index(field.stride)) if field.stride > 1 else op.tid
        digit = arith.remui(digit, const_index(field.extent))
        base = arith.subi(base, arith.muli(digit, const_index(field.stride)))
    return base


def _gather(op: _Local, load_at: Callable[[ir.Value], ir.Value], base: ir.Value) -> ir.Value:
    """The warps' partials folded in one order (the same bits in every thread); a partial
    past the scope's last thread (a partial warp's missing group) is the identity."""
    total = None
    for offset in op.plan.offsets():
        thread = arith.addi(base, const_index(offset)) if offset else base
        if op.plan.beyond:
            exists = arith.cmpi(arith.CmpIPredicate.ult, thread, const_index(op.plan.threads))
            value = arith.select(exists, load_at(arith.select(exists, thread, base)),
                                 op.red.identity())
        else:
            value = load_at(thread)
        total = value if total is None else op.red.combine(total, value)
    assert total is not None
    return total


def _writer(op: _Local) -> ir.Value:
    """The one holder of each output that writes a memory dst: reduced fields and
    replicas at 0."""
    first = arith.cmpi(arith.CmpIPredicate.eq, op.tid, _base(op))
    threads = op.plan.threads
    axes = induced.axis_values(op.layout, op.tid, threads)
    replica = induced.first_replica(op.layout, axes)
    return first if replica is None else arith.andi(first, replica)


def _store(op: _Local, coords: dict[int, ir.Value], value: ir.Value) -> None:
    """dst at the kept coordinates: dst has the kept axes, or all of them with 1s (or is
    (1,) for a reduction of everything)."""
    info, red, dst = op.info, op.red, op.dst
    rank = len(info.sources[0].shape)
    zero = const_index(0)
    if len(dst.operand.shape) == rank:
        indices = [coords[a] if a in red.kept else zero for a in range(rank)]
    else:
        indices = [coords[a] for a in red.kept] or [zero]
    if dst.layout is not None:
        assert dst.storage is not None
        dims = {i: index for i, index in enumerate(indices)}
        red.store(value, (dst.storage, [_offset(dst.layout, dims)]), dst.operand.dtype)
        return
    red.store(value, (dst.operand.value, indices), dst.operand.dtype)


def _thread_coords(op: _Local) -> dict[int, ir.Value]:
    """The kept source dims spread over threads: their coordinate from the thread index."""
    layout = op.layout
    axes = induced.axis_values(layout, op.tid, op.plan.threads)
    coords = {}
    for a in op.red.kept:
        it = layout.shard[a]
        if it.axis is not None:
            coords[a] = induced.digit(axes[it.axis], it.stride, it.extent)
    return coords


# ------------------------------------------------------------ the scratch's reuse


def _barrier_scope(other: ir.Operation) -> str | None:
    """The scope of the barrier an op is or will lower to (None: none known)."""
    name = other.name
    if name == "gpu.barrier":
        return "cta"
    if name == "nvvm.barrier":
        return "warpgroup"
    if name != "tile.reduce" or "variant" not in other.attributes or \
            ir.StringAttr(other.attributes["variant"]).value != "local":
        return None
    info = describe(other.opview)
    layout, threads = info.sources[0].layout, info.scope_threads
    if layout is None or threads is None:
        return None
    plan, _ = thread_plan(layout, Reduction.of(info).axes, threads)
    return info.scope if plan is not None and plan.warps else None


def reused_without_barrier(op: ir.Operation, scope: str) -> bool:
    """Can the op run again (a loop encloses it) with no barrier of its scope (or wider)
    between one run's reads of its scratch and the next run's writes? Another op of its
    block that is or lowers to such a barrier runs between any two of its runs."""
    if not sync.in_loop(op):
        return False
    for other in op.block.operations:
        if other.operation == op:
            continue
        found = _barrier_scope(other.operation)
        if found is not None and SCOPES.index(found) >= SCOPES.index(scope):
            return False
    return True
