"""The register reduction: each thread folds the elements it holds, lanes then butterfly.

A tile.reduce of a register tile into a register tile (reduce/local): the thread
loops over the kept register dimensions of its bundle; for each kept coordinate it
folds the reduced register dimensions sequentially, then, for a reduced axis spread
over lanes, xor-shuffles across those lanes (after which each of them holds the
result, which the destination layout replicates), and stores it.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import scf

from tile_mlir.layout import TileLayout
from tile_mlir.lowering.schedules.reduction import Reduction, butterfly, warp_mask
from tile_mlir.lowering.support.access import Access, linearize
from tile_mlir.lowering.support.analysis import OpInfo
from tile_mlir.lowering.support.compute import convert, load
from tile_mlir.lowering.support.emit import const_index, scope_thread_index


def reduce(info: OpInfo, red: Reduction, src: Access, dst: Access) -> None:
    """Lower the register reduction at the insertion point."""
    assert src.layout is not None
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
    red.store(value, (dst.storage, [_offset(dst.layout, dst_coords)]), dst.operand.dtype)


