"""How a register reduction folds across threads: the reduced axes' thread fields.

A register tile's layout spreads some reduced axes over threads (laneid,
warpid, wgid or tid). In the flat thread index T of the scope (laneid + 32 *
warpid + 128 * wgid, or tid), such an iterator of extent e and stride s is the
digit (T / f) % e, f = s times the axis's weight. The reduction splits each
into fields:

- lane fields (f * e <= 32): a butterfly of xor shuffles with offsets f, 2f,
  ... < f * e folds them within each warp (f a power of two; e rounded up to one
  where the lanes past it do not exist, as in a CTA of 7 threads: they contribute
  the identity);
- warp fields (f a multiple of 32): the warps' partials meet in shared memory
  after one barrier, and every thread folds all of them itself;
- an iterator that straddles the warp boundary (f < 32 < f * e, as tid over a
  whole CTA) is both: a lane field (f, 32 / f) and a warp field (32, ceil(e *
  f / 32)). Its last warp may be partial (a 48-thread CTA): lanes that do not
  exist contribute the identity;
- at cluster scope (T threads per CTA, the cluster's threads numbered CTA by
  CTA), warp fields that reach past the CTA split once more at T: the part
  within the CTA stays a warp field, the rest (f a multiple of T) is a CTA
  field, folded across the cluster's CTAs through distributed shared memory.

`thread_plan` builds the fields and checks them against the layout by
simulation, thread by thread, with the lowering's own decoding (induced.py):
every butterfly partner holds the same kept elements, and the partials a thread
reads cover exactly the threads that hold its elements, each once. A layout
that fails (fields that are not bit fields, a thread bit no iterator uses)
gets the reason.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cache

from tile_mlir.contract import WARP, WARPGROUP
from tile_mlir.layout import Iter, TileLayout

WEIGHT = {"laneid": 1, "warpid": WARP, "wgid": WARPGROUP, "tid": 1}
"""A thread axis's step in the flat thread index."""


@dataclass(frozen=True)
class Field:
    """A digit of the flat thread index: (T / stride) % extent."""

    stride: int
    extent: int

    def digit(self, thread: int) -> int:
        return (thread // self.stride) % self.extent


@dataclass(frozen=True)
class ThreadPlan:
    """The reduced axes' thread fields, and what the lowering needs beside."""

    lanes: tuple[Field, ...]  # butterflied within warps
    warps: tuple[Field, ...]  # folded through the CTA's shared memory
    threads: int  # the scope's
    beyond: bool  # some partial a thread reads may lie past the scope's last thread
    ctas: tuple[Field, ...] = ()  # folded across a cluster's CTAs (strides: whole CTAs)
    block: int = 0  # threads per CTA (cluster scope), else 0

    @property
    def partial_warp(self) -> bool:
        """The scope's last warp is partial: its missing lanes contribute the identity."""
        return self.threads % WARP != 0

    @property
    def partials(self) -> int:
        return math.prod(f.extent for f in self.warps)

    def leader(self, thread: int) -> int:
        """The thread with this one's lane fields cleared."""
        return thread - sum(f.digit(thread) * f.stride for f in self.lanes)

    def base(self, thread: int) -> int:
        """The leader with the warp fields cleared too: partial k is at base + k."""
        leader = self.leader(thread)
        return leader - sum(f.digit(thread) * f.stride for f in self.warps)

    def root(self, thread: int) -> int:
        """The base with the CTA fields cleared too: the cluster's partials are at root +
        each offset of cta_offsets() (+ offsets() within each CTA)."""
        return self.base(thread) - sum(f.digit(thread) * f.stride for f in self.ctas)

    def offsets(self) -> list[int]:
        """Each partial's offset from the base, in the order every thread folds them."""
        return _offsets(self.warps)

    def cta_offsets(self) -> list[int]:
        """Each CTA's partial's offset from the root (in threads), in folding order."""
        return _offsets(self.ctas)


def _offsets(fields: tuple[Field, ...]) -> list[int]:
    ranges = [range(f.extent) for f in fields]
    return [sum(k * f.stride for k, f in zip(ks, fields, strict=True))
            for ks in itertools.product(*ranges)]


def flat_iter(it: Iter) -> Field:
    assert it.axis is not None
    return Field(it.stride * WEIGHT[it.axis], it.extent)


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def next_pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def split(field: Field) -> tuple[list[Field], list[Field], str]:
    """(lane fields, warp fields, why not) of one reduced thread iterator."""
    stride, extent = field.stride, field.extent
    if stride * next_pow2(extent) <= WARP:
        if not _pow2(stride):
            return [], [], (f"steps {stride} lanes, not a power of two (the shuffles pair "
                            "lanes by xor)")
        # a butterfly over the next power of two: the lanes past the extent must not exist
        # (a partial last warp: they contribute the identity), which _simulate checks
        return [Field(stride, next_pow2(extent))], [], ""
    if stride >= WARP:
        if stride % WARP:
            return [], [], f"steps {stride} threads, which is not whole warps"
        return [], [field], ""
    if not _pow2(stride):
        return [], [], f"steps {stride} threads, not a power of two"
    per_warp = WARP // stride
    return [Field(stride, per_warp)], [Field(WARP, -(-extent // per_warp))], ""


def split_ctas(field: Field, block: int) -> tuple[list[Field], list[Field], str]:
    """(warp fields, CTA fields, why not) of a warp field at cluster scope, `block`
    threads per CTA: the part within a CTA, the part across CTAs."""
    stride, extent = field.stride, field.extent
    if stride * extent <= block:
        if block % (stride * extent):
            return [], [], f"spans {extent} warps of a {block}-thread CTA unevenly"
        return [field], [], ""
    if stride % block == 0:
        return [], [field], ""
    if block % stride or (stride * extent) % block:
        return [], [], (f"steps {stride} threads over {extent}, which does not split into "
                        f"whole {block}-thread CTAs")
    return [Field(stride, block // stride)], [Field(block, stride * extent // block)], ""


def _fields(field: Field, block: int) -> tuple[list[Field], list[Field], list[Field], str]:
    """(lane, warp, CTA fields, why not) of one reduced thread iterator; CTA fields only
    at cluster scope (`block` threads per CTA, else 0)."""
    lanes, warps, why = split(field)
    if why or not block:
        return lanes, warps, [], why
    within: list[Field] = []
    across: list[Field] = []
    for warp in warps:
        inside, outside, why = split_ctas(warp, block)
        if why:
            return [], [], [], why
        within += inside
        across += outside
    return lanes, within, across, ""


def axis_value(axis: str, thread: int, threads: int) -> int:
    """A thread axis's value for flat thread `thread` (as induced.axis_values builds it)."""
    if axis == "laneid":
        return thread % WARP if threads > WARP else thread
    if axis == "tid":
        return thread
    return thread // WEIGHT[axis]


def decode(layout: TileLayout, thread: int, threads: int) -> tuple[int, ...]:
    """Every thread iterator's digit (shard, then replicas) for a thread."""
    return tuple((axis_value(it.axis, thread, threads) // it.stride) % it.extent
                 for it in (*layout.shard, *layout.replicas) if it.axis)


@cache
def thread_plan(layout: TileLayout, axes: tuple[int, ...], threads: int, block: int = 0
                ) -> tuple[ThreadPlan | None, str]:
    """The fields of the reduced axes' thread iterators, checked; (None, why) if they do
    not fold correctly. `block`: threads per CTA at cluster scope (0 otherwise)."""
    lanes: list[Field] = []
    warps: list[Field] = []
    ctas: list[Field] = []
    padded = ""  # a lane field rounded up to a power of two, for the reason
    for a in axes:
        it = layout.shard[a]
        if it.axis is None:
            continue
        lane, warp, cta, why = _fields(flat_iter(it), block)
        name = f"reduced axis {a} ({it.extent}:{it.stride}@{it.axis})"
        if why:
            return None, f"{name} {why}"
        if lane and not warp and lane[0].extent != it.extent:
            padded = padded or (
                f"{name} spans {it.extent} lanes, not a power of two: the shuffles pair "
                f"{lane[0].extent} lanes by xor, and only lanes the scope lacks (a partial "
                "last warp) may fill the rest")
        lanes += lane
        warps += warp
        ctas += cta
    plan = ThreadPlan(tuple(lanes), tuple(warps), threads, False, tuple(ctas), block)
    problem, beyond = _simulate(layout, axes, plan)
    if problem:
        return None, padded or problem
    return ThreadPlan(plan.lanes, plan.warps, threads, beyond, plan.ctas, block), ""


def _keys(layout: TileLayout, axes: tuple[int, ...], threads: int
          ) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
    """Per thread: the digits it keeps (kept iterators, replicas) and those reduced."""
    thread_iters = [(n, it) for n, it in enumerate((*layout.shard, *layout.replicas))
                    if it.axis]
    reduced = {n for n, _ in thread_iters if n < layout.rank and n in axes}
    position = {n: i for i, (n, _) in enumerate(thread_iters)}
    kept_keys, reduced_keys = [], []
    for t in range(threads):
        digits = decode(layout, t, threads)
        kept_keys.append(tuple(digits[position[n]] for n, _ in thread_iters
                               if n not in reduced))
        reduced_keys.append(tuple(digits[position[n]] for n in sorted(reduced)))
    return kept_keys, reduced_keys


def _simulate(layout: TileLayout, axes: tuple[int, ...], plan: ThreadPlan) -> tuple[str, bool]:
    """Why the plan would fold wrongly ("" if it is right), and whether a read partial
    may lie past the last thread (and so take the identity)."""
    threads = plan.threads
    if not (plan.lanes or plan.warps):
        return "", False  # each thread folds its own registers: nothing meets
    kept, reduced = _keys(layout, axes, threads)
    holders: dict[tuple[int, ...], dict[tuple[int, ...], int]] = {}
    for t in range(threads):
        same = holders.setdefault(kept[t], {})
        if reduced[t] in same:
            return (f"threads {same[reduced[t]]} and {t} hold the same elements (the layout "
                    f"gives thread {t} none of its own, as a layout over laneid does to "
                    "lanes of a block with a partial warp): folding across threads would "
                    "count them twice"), False
        same[reduced[t]] = t
    beyond = False
    for key, by_reduced in holders.items():
        members = list(by_reduced.values())
        t = min(members)
        if any(plan.root(u) != plan.root(t) for u in members):
            return ("the reduced thread axes do not split into lane and warp fields "
                    f"(threads {t}, ... find their partials apart)"), False
        seen: list[int] = []
        for offset in [c + w for c in plan.cta_offsets() for w in plan.offsets()]:
            first = plan.root(t) + offset
            beyond = beyond or first >= threads
            seen += [u for u in _group(plan, first) if u < threads]
        if sorted(seen) != sorted(members) or any(kept[u] != key for u in seen):
            return (f"the reduced thread axes do not split into lane and warp fields "
                    f"(thread {t} would fold threads {sorted(seen)[:8]}...)"), False
    return "", beyond


def _group(plan: ThreadPlan, leader: int) -> list[int]:
    """The threads a butterfly from `leader` folds (existing or not)."""
    spans = [[k * f.stride for k in range(f.extent)] for f in plan.lanes]
    return [leader + sum(parts) for parts in itertools.product(*spans)]
