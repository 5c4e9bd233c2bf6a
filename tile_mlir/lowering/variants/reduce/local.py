"""reduce/local: a tile.reduce from a register tile into a register tile.

Applies when both operands are register tiles (tile.alloc in
#gpu.address_space<private>). Each thread folds the elements it holds along
the reduced axes with a sequential loop (all of them at thread scope;
lowering/schedules/registers.py). A
reduced axis spread over lanes then takes a butterfly of xor shuffles across
those lanes, after which every one of them holds the result: the
destination's layout must replicate over those lanes (`R[32:1@laneid]` for a
reduction across a warp). Reductions across warps need shared memory: copy
the tile there and use reduce/shared.
"""

from __future__ import annotations

from tile_mlir.layout import Iter, TileLayout
from tile_mlir.lowering import ACCEPT, Variant, Verdict, register, reject
from tile_mlir.lowering.schedules import registers
from tile_mlir.lowering.schedules.reduction import Reduction
from tile_mlir.lowering.support.access import Access
from tile_mlir.lowering.support.analysis import OpInfo
from tile_mlir.lowering.variants.predicates import (
    FLOAT_COMPUTE,
    all_in,
    element_types,
    first_failure,
    scope_known,
)


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
    registers.reduce(info, Reduction.of(info), src, dst)


register(Variant("tile.reduce", "local", 10, check, lower,
                 "register tiles; per-thread loop, lane shuffles for reduced lane axes"))
