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

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, scf

from tile_mlir.contract import WARP, WARPGROUP, widest_vector
from tile_mlir.layout import TileLayout
from tile_mlir.lowering.support.access import Access
from tile_mlir.lowering.support.analysis import OpInfo
from tile_mlir.lowering.support.compute import Compute, row_major
from tile_mlir.lowering.support.emit import const_index, scope_thread_index


@dataclass(frozen=True)
class Bundle:
    anchor: TileLayout  # the register layout that induces the partition
    vec: int  # elements per access along the innermost dimension
    why: str


def same_distribution(a: TileLayout, b: TileLayout) -> bool:
    """Do two register layouts give every thread the same coordinates?"""
    return a.shape == b.shape and a.replicas == b.replicas and all(
        (x.axis, x.stride if x.axis else None) == (y.axis, y.stride if y.axis else None)
        for x, y in zip(a.shard, b.shard, strict=True))


def plan(accesses: list[Access], anchor: TileLayout, max_bytes: int) -> Bundle:
    """The vector width along the innermost dimension that every operand allows."""
    rank = anchor.rank
    inner = anchor.shard[-1] if rank else None
    if inner is None or inner.axis is not None:
        return Bundle(anchor, 1, "the innermost dimension is spread over threads")
    vec = max(1, max_bytes // max(a.nbytes for a in accesses))
    why = f"{max_bytes}-byte accesses"
    if widest_vector(vec, inner.extent) < vec:
        vec, why = widest_vector(vec, inner.extent), f"each thread holds runs of {inner.extent}"
    singles = tuple((d,) for d in range(rank))
    for access in accesses:
        if access.strides[-1] != 1:
            return Bundle(anchor, 1, f"operand {access.index} is strided innermost")
        align = access.alignment(singles)
        if widest_vector(vec, align) < vec:
            vec = widest_vector(vec, align)
            why = f"operand {access.index} is aligned to {align * access.nbytes} bytes"
    return Bundle(anchor, vec, why)


def axis_values(layout: TileLayout, tid: ir.Value, threads: int
                 ) -> dict[str, tuple[ir.Value, int]]:
    """Each thread axis the layout uses, from the thread's index in a scope of `threads`,
    with the number of values it takes there."""
    def split(width: int) -> tuple[ir.Value, int]:
        if threads <= width:
            return const_index(0), 1
        return arith.divui(tid, const_index(width)), threads // width

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


def _first_replica(layout: TileLayout, axes: dict[str, tuple[ir.Value, int]]
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
    `max_bytes`): the lowering of the register variants."""
    accesses = [Access.of(o, info.buffers) for o in info.memrefs]
    emit(info, accesses, Compute(info), plan(accesses, anchor, max_bytes))


def emit(info: OpInfo, accesses: list[Access], compute: Compute, bundle: Bundle) -> None:
    """Each thread walks its bundle: nested loops over the register dimensions."""
    anchor = bundle.anchor
    threads = info.scope_threads
    assert threads is not None
    axes = axis_values(anchor, scope_thread_index(info.scope, info.block), threads)
    coords: list[ir.Value | None] = [
        digit(axes[it.axis], it.stride, it.extent) if it.axis else None for it in anchor.shard]
    dst = next(a for a in accesses if a.index == info.dst.index)
    guard = _first_replica(anchor, axes) if dst.layout is None or \
        not dst.layout.is_distributed else None
    if guard is not None:
        branch = scf.IfOp(guard)
        with ir.InsertionPoint(branch.then_block):
            _walk(accesses, compute, bundle, coords, 0)
            scf.YieldOp([])
    else:
        _walk(accesses, compute, bundle, coords, 0)


def _walk(accesses: list[Access], compute: Compute, bundle: Bundle,
          coords: list[ir.Value | None], dim: int) -> None:
    anchor = bundle.anchor
    if dim == anchor.rank:
        complete = [c for c in coords if c is not None]
        assert len(complete) == anchor.rank
        vec = bundle.vec
        index = row_major(complete, [const_index(s) for s in anchor.shape]) \
            if compute.indexed else None
        compute.apply({a.index: a.address(complete) for a in accesses}, vec, index=index)
        return
    if coords[dim] is not None:
        _walk(accesses, compute, bundle, coords, dim + 1)
        return
    step = bundle.vec if dim == anchor.rank - 1 else 1
    loop = scf.ForOp(const_index(0), const_index(anchor.shape[dim]), const_index(step))
    with ir.InsertionPoint(loop.body):
        inner = list(coords)
        inner[dim] = loop.induction_variable
        _walk(accesses, compute, bundle, inner, dim + 1)
        scf.YieldOp([])
