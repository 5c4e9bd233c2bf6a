"""reduction/local: a tile.reduce from a register tile into a register tile.

Applies when both operands are register tiles (tile.alloc in
#gpu.address_space<private>). Each thread folds the elements it holds along
the reduced axes with a sequential loop (all of them at thread scope). A
reduced axis spread over lanes then takes a butterfly of xor shuffles across
those lanes, after which every one of them holds the result: the
destination's layout must replicate over those lanes (`R[32:1@laneid]` for a
reduction across a warp). Reductions across warps need shared memory: copy
the tile there and use reduction/shared.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import scf

from tile_mlir.layout import Iter, TileLayout
from tile_mlir.lowering import ACCEPT, Variant, Verdict, register, reject
from tile_mlir.lowering.access import Access, linearize
from tile_mlir.lowering.analysis import OpInfo
from tile_mlir.lowering.compute import convert, load, store
from tile_mlir.lowering.emit import const_index, scope_thread_index
from tile_mlir.lowering.predicates import (
    FLOAT_COMPUTE,
    all_in,
    element_types,
    first_failure,
    scope_known,
)
from tile_mlir.lowering.reduction import Reduction, butterfly, warp_mask


def _dst_expected(src: TileLayout, red: Reduction, keepdims: bool
                  ) -> tuple[list[Iter], list[Iter]]:
    """The thread iterators dst must have (kept dims) and the lane replication it needs."""
    kept = [src.shard[a] if src.shard[a].axis else None for a in range(src.rank)
            if a in red.kept or keepdims]
    threads = [it for it in kept if it is not None and not (
        keepdims and src.shard.index(it) in red.axes)]
    lanes = [src.shard[a] for a in red.axes if src.shard[a].axis == "laneid"]
    return threads, lanes


def _layout_problem(info: OpInfo, red: Reduction) -> str:
    src, dst = info.sources[0].layout, info.dst.layout
    if src is None or dst is None:
        return "register operands need layouts (allocate them with tile.alloc)"
    for a in red.axes:
        it = src.shard[a]
        if it.axis not in (None, "laneid"):
            return (f"reduced axis {a} is spread over {it.axis}: "
                    "reduce across warps in shared memory")
        if it.axis == "laneid" and it.extent & (it.extent - 1):
            return f"reduced axis {a} spans {it.extent} lanes, not a power of two"
    keepdims = len(info.dst.shape) == len(info.sources[0].shape)
    threads, lanes = _dst_expected(src, red, keepdims)
    have = [it for it in dst.shard if it.axis]
    if have != threads:
        return f"dst layout {dst} does not keep the source's distribution of the kept axes"
    for lane in lanes:
        if not any(r.axis == "laneid" and r.extent == lane.extent and r.stride == lane.stride
                   for r in dst.replicas):
            return (f"dst layout {dst} must replicate over the reduced lanes "
                    f"(R[{lane.extent}:{lane.stride}@laneid])")
    return ""


def check(info: OpInfo) -> Verdict:
    verdict = first_failure(all_in(info, ("local",)), scope_known(info),
                            element_types(info, FLOAT_COMPUTE))
    if not verdict[0]:
        return verdict
    problem = _layout_problem(info, Reduction.of(info))
    return reject(problem) if problem else ACCEPT


def lower(info: OpInfo) -> None:
    src, dst = (Access.of(o, info.buffers) for o in (info.sources[0], info.dst))
    assert src.layout is not None
    red = Reduction.of(info)
    threads = info.scope_threads
    assert threads is not None
    mask = warp_mask(scope_thread_index(info.scope, info.block), threads)
    _kept_loops(_Local(info, red, src, dst, mask), {}, 0)


def _register_dims(layout: TileLayout, dims: tuple[int, ...]) -> list[int]:
    return [a for a in dims if layout.shard[a].axis is None]


def _offset(layout: TileLayout, coords: dict[int, ir.Value]) -> ir.Value:
    """A register offset: memory dims only (thread dims have no memory stride)."""
    dims = [a for a in range(layout.rank) if layout.shard[a].axis is None]
    return linearize([coords[a] for a in dims], [layout.shard[a].stride for a in dims],
                     layout.offset)


@dataclass(frozen=True)
class _Local:
    info: OpInfo
    red: Reduction
    src: Access
    dst: Access
    mask: ir.Value  # the warp's lanes, for the shuffles


def _kept_loops(op: _Local, coords: dict[int, ir.Value], depth: int) -> None:
    """Loop over the kept register dims; at the bottom, fold, shuffle and store one result."""
    layout = op.src.layout
    assert layout is not None
    kept = _register_dims(layout, op.red.kept)
    if depth < len(kept):
        axis = kept[depth]
        loop = scf.ForOp(const_index(0), const_index(layout.shape[axis]), const_index(1))
        with ir.InsertionPoint(loop.body):
            _kept_loops(op, {**coords, axis: loop.induction_variable}, depth + 1)
            scf.YieldOp([])
        return
    value = _fold_registers(op.red, op.src, coords, _register_dims(layout, op.red.axes))
    for a in op.red.axes:
        it = layout.shard[a]
        if it.axis == "laneid":
            value = butterfly(op.red, value, op.mask, it.stride * it.extent, it.stride)
    _store(op.info, op.red, op.dst, coords, value)


def _fold_registers(red: Reduction, src: Access, coords: dict[int, ir.Value],
                    dims: list[int]) -> ir.Value:
    """Fold the thread's registers over the reduced register dims (nested loops)."""
    assert src.layout is not None and src.storage is not None
    layout, storage = src.layout, src.storage
    if not dims:
        value = load((storage, [_offset(layout, coords)]), src.operand.dtype, 1)
        return convert(value, src.operand.dtype, red.acc, 1)
    loop = scf.ForOp(const_index(0), const_index(layout.shape[dims[0]]), const_index(1),
                     [red.identity()])
    with ir.InsertionPoint(loop.body):
        inner = _fold_registers(red, src, {**coords, dims[0]: loop.induction_variable}, dims[1:])
        scf.YieldOp([red.combine(loop.inner_iter_args[0], inner)])
    result: ir.Value = loop.results[0]
    return result


def _store(info: OpInfo, red: Reduction, dst: Access, coords: dict[int, ir.Value],
           value: ir.Value) -> None:
    """dst at the kept coordinates (dst has the kept axes, or all of them with 1s)."""
    assert dst.layout is not None and dst.storage is not None
    rank = len(info.sources[0].shape)
    zero = const_index(0)
    if dst.layout.rank == rank:
        dst_coords = {a: coords.get(a, zero) if a in red.kept else zero for a in range(rank)}
    else:
        dst_coords = {i: coords.get(a, zero) for i, a in enumerate(red.kept)}
    address = (dst.storage, [_offset(dst.layout, dst_coords)])
    dtype = dst.operand.dtype
    value = red.finish(value)
    if red.accum:
        value = red.combine(convert(load(address, dtype, 1), dtype, red.acc, 1), value)
    store(convert(value, red.acc, dtype, 1), address, dtype, 1)


register(Variant("tile.reduce", "local", 10, check, lower,
                 "register tiles; per-thread loop, lane shuffles for reduced lane axes"))
