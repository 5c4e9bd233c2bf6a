"""The partition induced by a register layout (seed 003), for ops with register operands.

A register tile's layout already says which thread holds which element:
`S[(32, 8):(1@laneid, 1)]` gives lane i row i. The logical dimensions over
thread axes are fixed by the executing thread; the dimensions in registers
form the thread's private bundle, which it walks with a loop (8 registers
per lane there). Every operand is addressed at the same logical coordinates:
a register operand at its layout's offset in the thread's storage, a memory
operand (shared or global) at that element, so the same walk lowers
register-to-register elementwise ops and copies between registers and memory.

Accesses along the innermost dimension are grouped into vectors when the
register layout keeps it in registers and every operand allows it (packed
`f16x2` for register arithmetic; up to 16 bytes for copies).

An indexed row (compute.py) gets each access's row-major index over the
logical tile from the thread's coordinates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

from mlir import ir
from mlir.dialects import arith, scf

from tile_mlir.contract import WARP, WARPGROUP, widest_vector
from tile_mlir.layout import TileLayout
from tile_mlir.lowering.support import tails
from tile_mlir.lowering.support.access import Access, Bound
from tile_mlir.lowering.support.analysis import OpInfo
from tile_mlir.lowering.support.compute import Address, Compute, row_major
from tile_mlir.lowering.support.emit import const_index, scope_thread_index


@dataclass(frozen=True)
class Bundle:
    anchor: TileLayout  # the register layout that induces the partition
    vec: int  # elements per access along the innermost dimension
    why: str
    splat: frozenset[int] = frozenset()  # operands broadcast along the innermost dimension


def same_distribution(a: TileLayout, b: TileLayout) -> bool:
    """Do two register layouts give every thread the same coordinates?"""
    return a.shape == b.shape and a.replicas == b.replicas and all(
        (x.axis, x.stride if x.axis else None) == (y.axis, y.stride if y.axis else None)
        for x, y in zip(a.shard, b.shard, strict=True))


COVERAGE_LIMIT = 1 << 20
"""Elements times owners past which coverage() is not enumerated (same_distribution
decides alone)."""


@cache
def coverage(anchor: TileLayout, other: TileLayout, writers_only: bool = False) -> str:
    """Why a thread walking the anchor's elements does not find the other register
    operand's matching element in its own registers ("" when every one does).

    The other layout's shape is the anchor's, or 1 on broadcast dims, where the element
    read is at index 0: thread T holding anchor element (r, n) reads other's (r, 0),
    so other must keep the anchor's distribution on the full dims and replicate over
    the threads the anchor spreads the broadcast dims on. With `writers_only` only the
    first replica of each anchor element walks (a memory dst: one writer each)."""
    if same_distribution(anchor, other):
        return ""
    if not other.is_distributed:
        return ""  # every thread holds all of it
    if not anchor.is_distributed:
        return "it is distributed over threads, but the tile is held whole by every thread"
    replicas = math.prod(r.extent for r in anchor.replicas)
    if anchor.size * replicas > COVERAGE_LIMIT:
        return f"it is distributed unlike the anchor, which is too large ({anchor.size} " \
            "elements) to check element by element"
    broadcast = [d for d in range(anchor.rank) if other.shape[d] == 1 < anchor.shape[d]]
    owners: dict[tuple[int, ...], frozenset[int]] = {}
    for coord in anchor.coords():
        read = tuple(0 if d in broadcast else c for d, c in enumerate(coord))
        if read not in owners:
            owners[read] = frozenset(other.threads_of(read))
        needed = anchor.threads_of(coord)
        missing = [t for t in (needed[:1] if writers_only else needed) if t not in owners[read]]
        if missing:
            return (f"thread {missing[0]} holds element {coord} of the tile but not element "
                    f"{read} of this operand")
    return ""


def plan(accesses: list[Access], anchor: TileLayout, max_bytes: int) -> Bundle:
    """The vector width along the innermost dimension that every operand allows; an
    operand broadcast along it (splat) takes one element per access, repeated."""
    rank = anchor.rank
    inner = anchor.shard[-1] if rank else None
    splat = frozenset(a.index for a in accesses if rank and rank - 1 in a.broadcast)
    if inner is None or inner.axis is not None:
        return Bundle(anchor, 1, "the innermost dimension is spread over threads", splat)
    vectors = [a for a in accesses if a.index not in splat]
    memory = [a for a in vectors if a.layout is None]  # registers take any width
    vec = max(1, max_bytes // max(a.nbytes for a in memory or vectors))
    why = f"{max_bytes}-byte accesses"
    if widest_vector(vec, inner.extent) < vec:
        vec, why = widest_vector(vec, inner.extent), f"each thread holds runs of {inner.extent}"
    singles = tuple((d,) for d in range(rank))
    for access in vectors:
        if access.strides[-1] != 1:
            return Bundle(anchor, 1, f"operand {access.index} is strided innermost", splat)
        align = access.alignment(singles)
        if widest_vector(vec, align) < vec:
            vec = widest_vector(vec, align)
            why = f"operand {access.index} is aligned to {align * access.nbytes} bytes"
    return Bundle(anchor, vec, why, splat)


def axis_values(layout: TileLayout, tid: ir.Value, threads: int
                 ) -> dict[str, tuple[ir.Value, int]]:
    """Each thread axis the layout uses, from the thread's index in a scope of `threads`,
    with the number of values it takes there (a partial last warp or warpgroup takes one
    more: digit() must not skip the remainder its value needs)."""
    def split(width: int) -> tuple[ir.Value, int]:
        if threads <= width:
            return const_index(0), 1
        return arith.divui(tid, const_index(width)), -(-threads // width)

    values = {}
    for axis in layout.thread_axes:
        if axis == "laneid":
            values[axis] = (tid if threads <= WARP else arith.remui(tid, const_index(WARP)),
                            min(threads, WARP))
        elif axis == "warpid":
            values[axis] = split(WARP)
        elif axis == "wgid":
            values[axis] = split(WARPGROUP)
        else:
            values[axis] = (tid, threads)
    return values


def digit(axis: tuple[ir.Value, int], stride: int, extent: int) -> ir.Value:
    """(value / stride) % extent: one iterator's coordinate from its axis value
    (the remainder only where the axis goes past the iterator)."""
    value, span = axis
    if stride != 1:
        value = arith.divui(value, const_index(stride))
    return value if span <= stride * extent else arith.remui(value, const_index(extent))


def first_replica(layout: TileLayout, axes: dict[str, tuple[ir.Value, int]]
                   ) -> ir.Value | None:
    """An i1 that holds on the threads of replica 0 (None when nothing is replicated)."""
    condition = None
    for rep in layout.replicas:
        assert rep.axis is not None
        zero = arith.cmpi(arith.CmpIPredicate.eq, digit(axes[rep.axis], rep.stride, rep.extent),
                          const_index(0))
        condition = zero if condition is None else arith.andi(condition, zero)
    return condition


def lower_induced(info: OpInfo, anchor: TileLayout, max_bytes: int) -> None:
    """The op's row applied over the bundle the anchor layout induces (accesses of up to
    `max_bytes`): the lowering of the register variants. Elementwise inputs may broadcast
    (size 1); memory operands may end before the tile (tails: guarded accesses, and a
    copy's padding past the source's extent)."""
    broadcasting = info.name == "tile.elementwise"
    accesses = [Access.of(o, info.buffers, anchor.shape, broadcasting) for o in info.memrefs]
    emit(info, accesses, Compute(info), plan(accesses, anchor, max_bytes))


@dataclass(frozen=True)
class _Walk:
    """What the walk over one thread's bundle needs at every access."""

    accesses: list[Access]
    compute: Compute
    bundle: Bundle
    bounds: dict[int, dict[int, Bound]]  # operand -> tail dim -> its extent
    padding: tails.Padding | None


def emit(info: OpInfo, accesses: list[Access], compute: Compute, bundle: Bundle) -> None:
    """Each thread walks its bundle: nested loops over the register dimensions."""
    anchor = bundle.anchor
    threads = info.scope_threads
    assert threads is not None
    axes = axis_values(anchor, scope_thread_index(info.scope, info.block), threads)
    coords: list[ir.Value | None] = [
        digit(axes[it.axis], it.stride, it.extent) if it.axis else None for it in anchor.shard]
    dst = next(a for a in accesses if a.index == info.dst.index)
    bounds = {a.index: {d: Bound(a.extent(d)) for d in sorted(a.tails)}
              for a in accesses if a.tails}
    padding = info.padding
    walk = _Walk(accesses, compute, bundle, bounds,
                 tails.Padding(padding, info.dst.dtype) if padding is not None else None)
    guard = first_replica(anchor, axes) if dst.layout is None or \
        not dst.layout.is_distributed else None
    tails.when(guard, lambda: _walk(walk, coords, 0))


def _walk(walk: _Walk, coords: list[ir.Value | None], dim: int) -> None:
    anchor = walk.bundle.anchor
    if dim == anchor.rank:
        _access(walk, [c for c in coords if c is not None])
        return
    if coords[dim] is not None:
        _walk(walk, coords, dim + 1)
        return
    step = walk.bundle.vec if dim == anchor.rank - 1 else 1
    loop = scf.ForOp(const_index(0), const_index(anchor.shape[dim]), const_index(step))
    with ir.InsertionPoint(loop.body):
        inner = list(coords)
        inner[dim] = loop.induction_variable
        _walk(walk, inner, dim + 1)
        scf.YieldOp([])


def _access(walk: _Walk, complete: list[ir.Value]) -> None:
    """One access of `vec` elements at `complete`, guarded where an operand has a tail."""
    anchor, bundle, compute = walk.bundle.anchor, walk.bundle, walk.compute
    assert len(complete) == anchor.rank
    index = row_major(complete, [const_index(s) for s in anchor.shape]) \
        if compute.indexed else None

    def at(lane: int) -> dict[int, Address]:
        coords = complete if not lane else \
            [*complete[:-1], arith.addi(complete[-1], const_index(lane))]
        return {a.index: a.address(coords) for a in walk.accesses}

    site = tails.Site(compute, at, bundle.splat, index, walk.padding)
    guards = {i: tails.guard_of(complete, dims, bundle.vec) for i, dims in walk.bounds.items()}
    tails.guarded(site, bundle.vec, guards)
