"""The synthesized partition [outer, threads, vec] of seed 000, for memory operands.

When every operand of an elementwise op or a copy is in memory (global or
shared), nothing about the operands says which thread takes which element, so
the partition is synthesized from the scope: the logical dimensions that are
contiguous in every operand are coalesced into one view, the innermost run of
the view is cut into vectors of up to 16 bytes, and thread t of the scope's T
takes vectors t, t + T, t + 2T, ... (the rounds). A scalar loop then takes the
tail of each row that is not a whole vector. The vector width shrinks, down to
scalar accesses, when alignment, strides or element types do not allow 16
bytes, and the plan says why.

Coalescing merges neighbouring dimensions in their order, so the view's
row-major order is dst's: an indexed row (compute.py) gets the row-major
index of each access's first element over the view, which is dst's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, memref, scf

from tile_mlir.contract import ACCESS_BYTES, widest_vector
from tile_mlir.lowering.support import tails
from tile_mlir.lowering.support.access import Access, Groups, View
from tile_mlir.lowering.support.alignment import static_index
from tile_mlir.lowering.support.analysis import DYNAMIC, OpInfo
from tile_mlir.lowering.support.compute import Address, Compute, row_major
from tile_mlir.lowering.support.emit import const_index, scope_thread_index

MAX_ACCESS_BYTES = ACCESS_BYTES
"""The default widest access (contract.ACCESS_BYTES); the gmem variant's vector_bytes
option may ask for wider (two accesses per vector) or narrower."""


@dataclass(frozen=True)
class Plan:
    groups: Groups  # logical dims coalesced into each view dim
    view_shape: tuple[int, ...]  # sizes of the view dims (DYNAMIC where unknown)
    vec: int  # elements per access
    why: str  # what set the vector width
    splat: frozenset[int] = frozenset()  # operands broadcast along the innermost dim


def _groups(accesses: list[Access], rank: int) -> Groups:
    groups: list[list[int]] = [[0]] if rank else []
    for dim in range(1, rank):
        if all(a.mergeable(dim) for a in accesses):
            groups[-1].append(dim)
        else:
            groups.append([dim])
    return tuple(tuple(g) for g in groups)


def _group_size(shape: tuple[int, ...], group: tuple[int, ...]) -> int:
    sizes = [shape[d] for d in group]
    return DYNAMIC if DYNAMIC in sizes else math.prod(sizes)


def plan(accesses: list[Access], shape: tuple[int, ...],
         vector_bytes: int = MAX_ACCESS_BYTES) -> Plan:
    """Coalesce, then pick the widest vector every operand allows (up to vector_bytes).

    An operand broadcast along the innermost dimension (stride 0, the bias of a bias
    add seen from the other side) does not limit the width: each access loads its one
    element and repeats it. dst is never splat."""
    groups = _groups(accesses, len(shape))
    view_shape = tuple(_group_size(shape, g) for g in groups)
    if not view_shape:
        return Plan(groups, view_shape, 1, "a 0-d tile")
    dst = accesses[0].index if accesses else 0
    splat = frozenset(a.index for a in accesses if a.index != dst and a.splat(groups))
    vectors = [a for a in accesses if a.index not in splat]
    vec = max(1, vector_bytes // max(a.nbytes for a in vectors))
    why = f"{vector_bytes}-byte accesses"
    for access in vectors:
        if access.inner_stride(groups) != 1:
            return Plan(groups, view_shape, 1, f"operand {access.index} is strided innermost",
                        splat)
    if view_shape[-1] != DYNAMIC:
        while vec > 1 and vec > view_shape[-1]:
            vec //= 2
            why = f"the innermost run is {view_shape[-1]} elements"
    for access in vectors:
        align = access.alignment(groups)
        if widest_vector(vec, align) < vec:
            vec = widest_vector(vec, align)
            why = f"operand {access.index} is aligned to {align * access.nbytes} bytes"
    return Plan(groups, view_shape, vec, why, splat)


def lower_synthesized(info: OpInfo, vector_bytes: int = MAX_ACCESS_BYTES, stage: int = 1
                      ) -> Plan:
    """The op's row over its memory operands with the synthesized partition: the lowering
    of the memory variants (elementwise/gmem, smem and mem, copy/gmem_smem). Elementwise
    inputs may broadcast (size 1); copies may have tails (support/tails.py)."""
    over = info.over
    broadcasting = info.name == "tile.elementwise"
    accesses = [Access.of(o, info.buffers, over, broadcasting) for o in info.memrefs]
    return emit(info, accesses, Compute(info), vector_bytes, stage)


def _size(p: Plan, dim: int, dynamic_source: ir.Value | None) -> ir.Value:
    static = p.view_shape[dim]
    if static != DYNAMIC:
        return const_index(static)
    assert dynamic_source is not None, "dynamic sizes come from a plain memref"
    return memref.dim(dynamic_source, const_index(dim))


def _product(values: list[ir.Value]) -> ir.Value:
    result = values[0] if values else const_index(1)
    for value in values[1:]:
        result = arith.muli(result, value)
    return result


def delinearize(index: ir.Value, sizes: list[ir.Value]) -> list[ir.Value]:
    """Split a linear index into row-major indices over `sizes` (the first is unbounded)."""
    indices: list[ir.Value] = []
    for size in reversed(sizes[1:]):
        indices.append(arith.remui(index, size))
        index = arith.divui(index, size)
    indices.append(index)
    return list(reversed(indices))


Item = Callable[[list[ir.Value], ir.Value], Callable[[], None]]
"""(row indices, index in the row) -> loads issued; calling the result finishes the access."""


@dataclass(frozen=True)
class Walk:
    """Items k = 0 .. rows * per_row - 1 shared by `threads` threads, this one `tid`."""

    tid: ir.Value
    threads: int
    outer: list[ir.Value]  # the row sizes
    per_row: ir.Value


def emit(info: OpInfo, accesses: list[Access], compute: Compute,
         vector_bytes: int = MAX_ACCESS_BYTES, stage: int = 1) -> Plan:
    """Lower the op at the insertion point: the vector rounds, then the scalar tail.

    With `stage` > 1, each thread issues the loads of `stage` whole rounds before it
    computes and stores any of them (register staging: independent loads in flight)."""
    p = plan(accesses, info.over, vector_bytes)
    tid = scope_thread_index(info.scope, info.block)
    threads = info.scope_threads
    assert threads is not None
    views = {a.index: a.view(p.groups) for a in accesses}
    # dynamic extents of the walk: from an operand that spans it (no tail, no broadcast)
    plain = next((views[a.index].buffer for a in accesses if not (a.tails or a.broadcast)
                  and views[a.index].flat_strides is None), None)
    if not p.view_shape:  # a 0-d tile: the scope's first thread does it
        first = scf.IfOp(arith.cmpi(arith.CmpIPredicate.eq, tid, const_index(0)))
        with ir.InsertionPoint(first.then_block):
            compute.apply(_at(views, []), 1, index=const_index(0))
            scf.YieldOp([])
        return p
    rank = len(p.view_shape)
    outer = [_size(p, d, plain) for d in range(rank - 1)]
    inner = _size(p, rank - 1, plain)
    items = _Items(compute, views, p, [*outer, inner], info.padding)
    vectors = arith.divui(inner, const_index(p.vec)) if p.vec > 1 else inner

    def vector_item(lead: list[ir.Value], j: ir.Value) -> Callable[[], None]:
        return items.item([*lead, arith.muli(j, const_index(p.vec)) if p.vec > 1 else j], p.vec)

    _rounds(Walk(tid, threads, outer, vectors), vector_item, max(stage, 1))
    static_inner = p.view_shape[-1]
    if p.vec > 1 and (static_inner == DYNAMIC or static_inner % p.vec):
        tail = arith.remui(inner, const_index(p.vec))
        start = arith.subi(inner, tail)

        def scalar_item(lead: list[ir.Value], j: ir.Value) -> Callable[[], None]:
            return items.item([*lead, arith.addi(start, j)], 1)

        _rounds(Walk(tid, threads, outer, tail), scalar_item, 1)
    return p


def _at(views: dict[int, View], indices: list[ir.Value]) -> dict[int, Address]:
    return {i: (v.buffer, v.indices(indices)) for i, v in views.items()}


class _Items:
    """One access of the walk at view indices: loads issued now and the rest when the
    returned finisher runs (staging), or, for a copy with tails, the whole access under
    its operands' guards (support/tails.py: loads and stores together)."""

    def __init__(self, compute: Compute, views: dict[int, View], p: Plan,
                 sizes: list[ir.Value], padding: float | int | None):
        self.compute, self.views, self.plan, self.sizes = compute, views, p, sizes
        dst = compute.info.dst
        self.padding = tails.Padding(padding, dst.dtype) if padding is not None else None
        self.guarded = any(v.bounds for v in views.values())

    def item(self, indices: list[ir.Value], vec: int) -> Callable[[], None]:
        if self.guarded:
            self._guarded(indices, vec)
            return lambda: None
        at = _at(self.views, indices)
        position = row_major(indices, self.sizes) if self.compute.indexed else None
        args = self.compute.load(at, vec, self.plan.splat, position)
        return lambda: self.compute.finish(args, at, vec)

    def _guarded(self, indices: list[ir.Value], vec: int) -> None:
        def at(lane: int) -> dict[int, Address]:
            shifted = indices if not lane else \
                [*indices[:-1], arith.addi(indices[-1], const_index(lane))]
            return _at(self.views, shifted)

        guards = {i: tails.guard_of(indices, v.bounds, vec) for i, v in self.views.items()
                  if v.bounds}
        tails.guarded(tails.Site(self.compute, at, padding=self.padding), vec, guards)


def _rounds(walk: Walk, item: Item, stage: int) -> None:
    """Items k = 0 .. rows * per_row - 1 spread over the threads: item(row indices,
    k % per_row) for each, the loads of `stage` rounds at a time."""
    total = arith.muli(_product(walk.outer), walk.per_row)
    for_each_item(walk.tid, total, walk.threads, lambda k: _item(walk, k, item), stage)


Step = Callable[[ir.Value], Callable[[], None] | None]
"""body(k): does item k, or issues its loads and returns what finishes it."""


def for_each_item(tid: ir.Value, total: ir.Value, threads: int, body: Step,
                  stage: int = 1) -> None:
    """body(k) for k = tid, tid + threads, ... < total. With a static total: `full`
    rounds with no bound check, `stage` at a time (a body that returns what finishes
    its item is finished after the group's other bodies ran: their loads first; one
    round or one group is straight-line code), then the last partial round under
    `tid < rest`; otherwise a strided loop."""
    count = static_index(total)
    if count is None:
        loop = scf.ForOp(tid, total, const_index(threads))
        with ir.InsertionPoint(loop.body):
            _finish(body(loop.induction_variable))
            scf.YieldOp([])
        return
    full, rest = divmod(count, threads)
    _full_rounds(tid, threads, body, full, min(stage, full) or 1)
    if rest:
        last = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ult, tid, const_index(rest)))
        with ir.InsertionPoint(last.then_block):
            _finish(body(arith.addi(const_index(full * threads), tid)))
            scf.YieldOp([])


def _finish(pending: Callable[[], None] | None) -> None:
    if pending is not None:
        pending()


def _full_rounds(tid: ir.Value, threads: int, body: Step, full: int, stage: int) -> None:
    """Rounds 0 .. full - 1 in groups of `stage`: a loop over the groups (none when there
    is one), each group's bodies run before any of them is finished."""
    groups, leftover = divmod(full, stage)

    def group(first: ir.Value, size: int) -> None:
        pending = []
        for r in range(size):
            round_ = arith.addi(first, const_index(r)) if r else first
            pending.append(body(arith.addi(arith.muli(round_, const_index(threads)), tid)))
        for finish in pending:
            _finish(finish)

    if groups == 1:
        group(const_index(0), stage)
    elif groups > 1:
        loop = scf.ForOp(const_index(0), const_index(groups * stage), const_index(stage))
        with ir.InsertionPoint(loop.body):
            group(loop.induction_variable, stage)
            scf.YieldOp([])
    if leftover:
        group(const_index(groups * stage), leftover)


def _item(walk: Walk, k: ir.Value, item: Item) -> Callable[[], None]:
    if not walk.outer:
        return item([], k)
    return item(delinearize(arith.divui(k, walk.per_row), walk.outer),
                arith.remui(k, walk.per_row))


