"""reduce/local: a tile.reduce of a register tile, into a register tile or into shared or
global memory.

Applies when the source is a register tile (tile.alloc in
#gpu.address_space<private>) whose reduced axes are in registers or over threads
that fold as bit fields (lowering/schedules/threads.py). Each thread folds the
elements it holds along the reduced axes with a sequential loop (all of them at
thread scope), then a butterfly of xor shuffles folds the reduced axes' lanes;
reduced axes spread over warps (warpid, wgid, tid past 32) meet in a shared
scratch: each thread leaves its value, one barrier, and every thread folds all
its warps' partials itself (lowering/schedules/registers.py). Every thread that
held the elements then holds the result: a register destination's layout must
keep the source's distribution of the kept axes and replicate over the reduced
thread axes (`R[32:1@laneid]` for a reduction across a warp, `R[256:1@tid]`
across a 256-thread CTA); into memory one thread writes each output. At warp
scope no barrier is needed; at warpgroup scope the warpgroup's named barrier. At
cluster scope (a kernel with nvvm.cluster_dim) reduced axes may spread over the
cluster's CTAs too: their partials meet through mailboxes in each CTA's shared
memory (a reduction that runs once a launch) or between two cluster barriers
(registers.py). A tuple kind (online_softmax, welford) folds its k sources together,
each partial a vector of k values, into its k destinations.
"""

from __future__ import annotations

from tile_mlir.layout import Iter, TileLayout
from tile_mlir.lowering import ACCEPT, Variant, Verdict, register, reject
from tile_mlir.lowering.schedules import registers
from tile_mlir.lowering.schedules.reduction import Reduction
from tile_mlir.lowering.schedules.threads import thread_plan
from tile_mlir.lowering.support.access import Access
from tile_mlir.lowering.support.analysis import OpInfo
from tile_mlir.lowering.variants.predicates import (
    FLOAT_COMPUTE,
    all_in,
    element_types,
    first_failure,
    scope_known,
)

_NAMES = {"laneid": "lanes", "warpid": "warps", "wgid": "warpgroups", "tid": "threads"}


def _dst_expected(src: TileLayout, red: Reduction, keepdims: bool) -> list[Iter]:
    """The thread iterators dst must have: those of the kept dims."""
    kept = [src.shard[a] if src.shard[a].axis else None for a in range(src.rank)
            if a in red.kept or keepdims]
    return [it for it in kept if it is not None and not (
        keepdims and src.shard.index(it) in red.axes)]


def _replicas_problem(src: TileLayout, dst: TileLayout, red: Reduction) -> str:
    """dst replicates over exactly the reduced thread iterators and src's replicas."""
    reduced = [src.shard[a] for a in red.axes if src.shard[a].axis]
    for it in reduced:
        if it not in dst.replicas:
            return (f"dst layout {dst} must replicate over the reduced {_NAMES[str(it.axis)]} "
                    f"(R[{it.extent}:{it.stride}@{it.axis}])")
    for it in src.replicas:
        if it not in dst.replicas:
            return (f"dst layout {dst} must keep the source's replication "
                    f"(R[{it.extent}:{it.stride}@{it.axis}])")
    needed = [*reduced, *src.replicas]
    for it in dst.replicas:
        if it not in needed:
            return (f"dst layout {dst} replicates over {it.extent}:{it.stride}@{it.axis}, "
                    "which holds other elements of the source")
    return ""


def _layout_problem(info: OpInfo, red: Reduction) -> str:
    src, dst = info.sources[0].layout, info.dst.layout
    threads = info.scope_threads
    assert threads is not None
    if src is None:
        return "the register source needs a layout (allocate it with tile.alloc)"
    _, why = thread_plan(src, red.axes, threads, registers.cluster_block(info))
    if why:
        return why
    if red.arity > 1:
        return ""  # a tuple kind's operands share the source's layout (tile-verify)
    if info.dst.space != "local":
        return ""  # one thread writes each output
    if dst is None:
        return "the register dst needs a layout (allocate it with tile.alloc)"
    keepdims = len(info.dst.shape) == len(info.sources[0].shape)
    have = [it for it in dst.shard if it.axis]
    if have != _dst_expected(src, red, keepdims):
        return f"dst layout {dst} does not keep the source's distribution of the kept axes"
    return _replicas_problem(src, dst, red)


def check(info: OpInfo) -> Verdict:
    source = info.sources[0]
    if source.space != "local":
        return reject(f"operand 1 scope {source.space} != local")
    verdict = first_failure(all_in(info, ("local", "shared", "global")), scope_known(info),
                            element_types(info, FLOAT_COMPUTE))
    if not verdict[0]:
        return verdict
    problem = _layout_problem(info, Reduction.of(info))
    return reject(problem) if problem else ACCEPT


def lower(info: OpInfo) -> None:
    accesses = [Access.of(o, info.buffers) for o in info.operands]
    registers.reduce(info, Reduction.of(info), tuple(accesses[1::2]), tuple(accesses[0::2]))


register(Variant("tile.reduce", "local", 10, check, lower,
                 "register source; per-thread loop, lane shuffles, warps through shared memory"))
