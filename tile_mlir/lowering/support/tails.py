"""Tails: accesses where an operand ends before the op's iteration does.

A tile.copy between a static tile (registers, shared) and a memory view whose
extent is dynamic or smaller copies the overlap; with `padding = <number>` the
tile's elements past the view's extent get that number instead (-inf ahead of
a max, 0 ahead of a sum). A tile.elementwise whose memory operands are smaller
than its register tile applies on the overlap alike. The schedules iterate over
the whole tile and guard each access:

- an operand's `Guard` holds where it ends: the conditions on the dims other
  than the innermost (one per tail dim, the same for every lane of a vector)
  and, when the innermost dim has a tail, the vector's first index there and
  the bound;
- `guarded` emits one access under the guards: nothing to check, the plain
  access; lane-independent conditions, the access (a whole vector) under one
  `scf.if`; a tail on the innermost dim, the whole vector where it fits and
  element by element in the one vector that straddles the bound, so vectors
  stay 16 bytes in the body of the tile.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mlir import ir
from mlir.dialects import arith, scf

from tile_mlir.dtypes import DType
from tile_mlir.lowering.support.access import Bound
from tile_mlir.lowering.support.compute import Address, Compute, store, value_type
from tile_mlir.lowering.support.emit import const, const_index

Addresses = Callable[[int], dict[int, Address]]
"""lane -> each operand's address at that lane of the access (lane 0: the access's)."""


def _and(a: ir.Value | None, b: ir.Value | None) -> ir.Value | None:
    if a is None:
        return b
    if b is None:
        return a
    return arith.andi(a, b)


def below(index: ir.Value, bound: ir.Value) -> ir.Value:
    return arith.cmpi(arith.CmpIPredicate.ult, index, bound)


@dataclass
class Guard:
    """Where one operand's elements are in bounds, for one access of `vec` lanes."""

    outer: ir.Value | None = None  # the lane-independent conditions (None: always)
    inner: list[tuple[ir.Value, ir.Value]] = field(default_factory=list)  # (index, bound)

    def add(self, index: ir.Value, bound: ir.Value, innermost: bool) -> None:
        if innermost:
            self.inner.append((index, bound))
        else:
            self.outer = _and(self.outer, below(index, bound))

    def join(self, other: Guard) -> Guard:
        return Guard(_and(self.outer, other.outer), [*self.inner, *other.inner])

    def whole(self, vec: int) -> ir.Value | None:
        """All `vec` lanes in bounds."""
        cond = self.outer
        for index, bound in self.inner:
            if vec == 1:
                cond = _and(cond, below(index, bound))
                continue
            last = arith.addi(index, const_index(vec))
            cond = _and(cond, arith.cmpi(arith.CmpIPredicate.ule, last, bound))
        return cond

    def lane(self, lane: int) -> ir.Value | None:
        """Lane `lane` in bounds."""
        cond = self.outer
        for index, bound in self.inner:
            at = arith.addi(index, const_index(lane)) if lane else index
            cond = _and(cond, below(at, bound))
        return cond


def guard_of(indices: list[ir.Value], bounds: dict[int, Bound], vec: int) -> Guard:
    """The guard of an access of `vec` lanes at `indices` of an operand whose extent on
    dim d is bounds[d] (the tail dims only). An innermost bound that is a multiple of
    `vec` never splits a vector: its condition is the same for every lane."""
    guard = Guard()
    last = len(indices) - 1
    for dim, bound in sorted(bounds.items()):
        guard.add(indices[dim], bound.extent, dim == last and bound.multiple % vec != 0)
    return guard


def when(condition: ir.Value | None, body: Callable[[], None]) -> None:
    if condition is None:
        body()
        return
    branch = scf.IfOp(condition)
    with ir.InsertionPoint(branch.then_block):
        body()
        scf.YieldOp([])


@dataclass(frozen=True)
class Padding:
    """A copy's `padding`: what the destination gets where the source has no element."""

    value: float | int
    dtype: DType  # the tile's element type

    def vector(self, vec: int) -> ir.Value:
        return const(value_type(self.dtype, vec), self.value)


@dataclass(frozen=True)
class Site:
    """One access of a compute row: each operand's address per lane, and what the row
    needs beside (splat operands, an indexed row's position, a copy's padding)."""

    compute: Compute
    at: Addresses
    splat: frozenset[int] = frozenset()
    index: ir.Value | None = None  # the position of lane 0 (indexed rows)
    padding: Padding | None = None

    def apply(self, lane: int, vec: int) -> None:
        """The row on `vec` lanes from `lane` (all of them: lane 0)."""
        index = self.index
        if index is not None and lane:
            index = arith.addi(index, const_index(lane))
        self.compute.apply(self.at(lane), vec, self.splat, index)

    def pad(self, lane: int, vec: int) -> None:
        assert self.padding is not None
        dst = self.compute.info.dst
        store(self.padding.vector(vec), self.at(lane)[dst.index], dst.dtype, vec)

    def either(self, condition: ir.Value, lane: int, vec: int, dst: Guard) -> None:
        """The row where `condition` holds; else, with padding, the padding where dst's
        lanes are in bounds."""
        if self.padding is None:
            when(condition, lambda: self.apply(lane, vec))
            return
        branch = scf.IfOp(condition, has_else=True)
        with ir.InsertionPoint(branch.then_block):
            self.apply(lane, vec)
            scf.YieldOp([])
        with ir.InsertionPoint(branch.else_block):
            when(dst.whole(vec) if vec > 1 else dst.lane(lane),
                 lambda: self.pad(lane, vec))
            scf.YieldOp([])


def guarded(site: Site, vec: int, guards: dict[int, Guard]) -> None:
    """The site's row on one access of `vec` lanes, each lane only where every operand
    is in bounds; with padding (a copy) the destination's in-bounds lanes whose source
    is out of bounds get the padding instead."""
    dst = guards.get(site.compute.info.dst.index, Guard())
    everything = Guard()
    for guard in guards.values():
        everything = everything.join(guard)
    whole = everything.whole(vec)
    if whole is None:
        site.apply(0, vec)
        return
    if not everything.inner:  # the same answer for every lane: one branch per vector
        site.either(whole, 0, vec, dst)
        return
    branch = scf.IfOp(whole, has_else=True)
    with ir.InsertionPoint(branch.then_block):
        site.apply(0, vec)
        scf.YieldOp([])
    with ir.InsertionPoint(branch.else_block):
        for lane in range(vec):
            ok = everything.lane(lane)
            assert ok is not None
            site.either(ok, lane, 1, dst)
        scf.YieldOp([])
