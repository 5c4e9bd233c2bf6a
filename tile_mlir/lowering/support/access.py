"""How a memory operand of a tile op is addressed: strides, alignment and index math.

Two kinds of memory operand:
- a plain memref (a kernel argument, a subview of one, a workgroup
  attribution): its memref type gives the strides; accesses index it directly,
  through a collapse_shape where dimensions are coalesced;
- a tile.alloc buffer: its layout gives the memory strides; accesses index its
  flat storage (lowering/buffers.py) at the layout's offsets.

Both answer the same questions for the planners (schedules/synthesized.py,
schedules/induced.py): the stride of each logical dimension, the static offset,
and the alignment of a row start; and both turn logical indices into (buffer,
indices).

An access is seen over the op's iteration shape (`over`: dst's shape, or the
register tile's), which its own shape may differ from in two ways:
- broadcast dims (tile.elementwise, numpy's rule): the operand has size 1
  where the iteration has more; it is read at index 0 there, as a stride 0;
- tail dims (tile.copy, and memory operands beside a register tile): the
  operand's extent is dynamic or smaller than the iteration's; only the
  overlap is read or written, so accesses there are guarded (support/tails.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from mlir import ir
from mlir.dialects import arith, memref

from tile_mlir.layout import TileLayout
from tile_mlir.lowering.support.alignment import base_alignment, offset_divisor, stride_divisor
from tile_mlir.lowering.support.analysis import DYNAMIC, DYNAMIC_STRIDE, Operand
from tile_mlir.lowering.support.buffers import REGISTER_ALIGN, Buffers
from tile_mlir.lowering.support.emit import const_index

Groups = tuple[tuple[int, ...], ...]


def dim_roles(shape: tuple[int, ...], over: tuple[int, ...] | None, broadcasting: bool
              ) -> tuple[frozenset[int], frozenset[int]]:
    """(broadcast dims, tail dims) of an operand of `shape` in an op iterated over `over`.

    With `broadcasting` (tile.elementwise), a size of 1 under a larger extent is a
    broadcast; otherwise any extent that may end before the iteration's is a tail.
    A static extent larger than the iteration's needs nothing: the op stops first."""
    if over is None:
        return frozenset(), frozenset()
    broadcast, tails = set(), set()
    for d, (own, full) in enumerate(zip(shape, over, strict=True)):
        if own == full:
            continue
        if broadcasting and own == 1:
            broadcast.add(d)
        elif DYNAMIC in (own, full) or own < full:
            tails.add(d)
    return frozenset(broadcast), frozenset(tails)


@dataclass
class Access:
    """A memory operand, seen by a planner."""

    operand: Operand
    layout: TileLayout | None  # tile.alloc buffers; None for plain memrefs
    storage: ir.Value | None = None  # the flat storage of a tile.alloc buffer
    broadcast: frozenset[int] = frozenset()  # dims read at index 0 (stride 0)
    tails: frozenset[int] = frozenset()  # dims where the operand may end before the op

    @staticmethod
    def of(operand: Operand, buffers: Buffers | None, over: tuple[int, ...] | None = None,
           broadcasting: bool = False) -> Access:
        """The operand's access; without `buffers` (when only planning, as predicates do)
        a tile.alloc operand has no storage to address yet. `over` is the op's iteration
        shape (dim_roles), when it may differ from the operand's."""
        # a dst is never broadcast (one element cannot take many results): a size of 1
        # under a larger extent is where it ends, a tail (a row's last element)
        broadcast, tails = dim_roles(operand.shape, over, broadcasting and operand.index != 0)
        if operand.layout is None:
            return Access(operand, None, None, broadcast, tails)
        storage = buffers.storage(operand.value) if buffers is not None else None
        return Access(operand, operand.layout, storage, broadcast, tails)

    @property
    def index(self) -> int:
        return self.operand.index

    @property
    def nbytes(self) -> int:
        return self.operand.dtype.bytes

    @property
    def identity(self) -> bool:
        """A plain memref with the identity layout: contiguous, even with dynamic sizes."""
        memref_type = self.operand.memref
        assert memref_type is not None
        return self.layout is None and memref_type.affine_map == ir.AffineMap.get_identity(
            len(self.operand.shape))

    @property
    def strides(self) -> tuple[int, ...]:
        """Memory stride of each logical dimension (DYNAMIC_STRIDE when unknown; 0 for a
        broadcast dim)."""
        return tuple(0 if d in self.broadcast else s for d, s in enumerate(self._strides))

    @property
    def _strides(self) -> tuple[int, ...]:
        if self.layout is not None:
            return self.layout.memory_strides
        if self.identity and DYNAMIC not in self.operand.shape:
            shape = self.operand.shape
            return tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))
        return self.operand.strides

    def mergeable(self, dim: int) -> bool:
        """Are dims `dim - 1` and `dim` contiguous with each other? Never across a tail
        on `dim` (its bound would not be one of the merged index), nor between a
        broadcast dim and another."""
        if dim in self.tails or (dim - 1 in self.broadcast) != (dim in self.broadcast):
            return False
        if self.identity:
            return True
        strides, size = self.strides, self.operand.shape[dim]
        if DYNAMIC_STRIDE in (strides[dim], strides[dim - 1]) or size == DYNAMIC:
            return False
        return strides[dim - 1] == strides[dim] * size

    def alignment(self, groups: Groups) -> int:
        """Elements by which the start of every row of the coalesced view is aligned."""
        nbytes = self.nbytes
        if self.layout is not None:  # a register tile's storage
            align = math.gcd(REGISTER_ALIGN, self.layout.offset * nbytes or REGISTER_ALIGN)
        else:
            align = math.gcd(base_alignment(self.operand.value, nbytes),
                             offset_divisor(self.operand.value) * nbytes)
        for group in groups[:-1]:
            if all(self.operand.shape[d] == 1 for d in group):
                continue  # a dimension of one: its index is always 0
            stride = self._group_stride(group, groups)
            if stride == DYNAMIC_STRIDE:
                stride = 1 if self.layout is not None else \
                    stride_divisor(self.operand.value, group[-1])
            align = math.gcd(align, stride * nbytes)
        return max(align // nbytes, 1)

    def _group_stride(self, group: tuple[int, ...], groups: Groups) -> int:
        if self.identity:
            inner = [self.operand.shape[d] for g in groups[groups.index(group) + 1:] for d in g]
            return DYNAMIC_STRIDE if DYNAMIC in inner else math.prod(inner)
        return self.strides[group[-1]]

    def inner_stride(self, groups: Groups) -> int:
        inner = groups[-1][-1]
        if inner in self.broadcast:
            return 0
        return 1 if self.identity else self.strides[inner]

    def splat(self, groups: Groups) -> bool:
        """Broadcast along the innermost dimension (stride 0): one element per row,
        loaded once and repeated across a vector."""
        return self.inner_stride(groups) == 0

    # ------------------------------------------------------------- emission

    def address(self, coords: list[ir.Value]) -> tuple[ir.Value, list[ir.Value]]:
        """Where the element at logical `coords` is: (memref, indices) for a plain memref,
        (storage, [layout offset]) for a tile.alloc buffer; broadcast dims at 0."""
        if self.broadcast:
            zero = const_index(0)
            coords = [zero if d in self.broadcast else c for d, c in enumerate(coords)]
        if self.layout is not None:
            assert self.storage is not None, "made with Access.of(operand, None): no storage"
            offset = linearize(coords, list(self.strides), self.layout.offset)
            return self.storage, [offset]
        return self.operand.value, coords

    def extent(self, dim: int) -> ir.Value:
        """The operand's own extent on a logical dim (memref.dim where it is dynamic)."""
        size = self.operand.shape[dim]
        if size != DYNAMIC:
            return const_index(size)
        return memref.dim(self.operand.value, const_index(dim))

    def view(self, groups: Groups) -> View:
        """Make (at the insertion point) what accesses to the coalesced view index."""
        zero = frozenset(g for g, dims in enumerate(groups) if dims[0] in self.broadcast)
        if self.layout is not None:
            assert self.storage is not None, "made with Access.of(operand, None): no storage"
            strides = [self.strides[g[-1]] for g in groups]
            return View(self.storage, strides, self.layout.offset, zero)
        value = self.operand.value
        if len(groups) != len(self.operand.shape):
            value = _collapse(self, groups)
        return View(value, None, 0, zero, self._bounds(value, groups))

    def _bounds(self, view: ir.Value, groups: Groups) -> dict[int, Bound]:
        """The view's extent on each group that holds a tail (its outermost dim: the
        others do not merge with it), a multiple of the group's other dims."""
        bounds = {}
        for g, dims in enumerate(groups):
            if dims[0] in self.tails:
                size = _group_size(self.operand.shape, dims)
                extent = const_index(size) if size != DYNAMIC else \
                    memref.dim(view, const_index(g))
                inside = _group_size(self.operand.shape, dims[1:])
                bounds[g] = Bound(extent, inside if inside != DYNAMIC else 1)
        return bounds


@dataclass(frozen=True)
class Bound:
    """Where an operand ends on one dim of a view: `extent`, known a multiple of
    `multiple` (a tail merged with the whole dims inside it)."""

    extent: ir.Value
    multiple: int = 1


@dataclass
class View:
    """Indices into an operand's coalesced view become this (buffer, indices)."""

    buffer: ir.Value
    flat_strides: list[int] | None  # set for flat storage: linearize with these strides
    offset: int
    zero: frozenset[int] = frozenset()  # broadcast view dims: always index 0
    bounds: dict[int, Bound] = field(default_factory=dict)  # tail view dims' extents

    def indices(self, view_indices: list[ir.Value]) -> list[ir.Value]:
        if self.flat_strides is None:
            if not self.zero:
                return view_indices
            return [const_index(0) if g in self.zero else index
                    for g, index in enumerate(view_indices)]
        return [linearize(view_indices, self.flat_strides, self.offset)]


def linearize(indices: list[ir.Value], strides: list[int], offset: int = 0) -> ir.Value:
    """offset + sum(index * stride), skipping zero terms."""
    total: ir.Value | None = const_index(offset) if offset else None
    for index, stride in zip(indices, strides, strict=True):
        if stride == 0:
            continue
        term = index if stride == 1 else arith.muli(index, const_index(stride))
        total = term if total is None else arith.addi(total, term)
    return total if total is not None else const_index(0)


def _group_size(shape: tuple[int, ...], group: tuple[int, ...]) -> int:
    sizes = [shape[d] for d in group]
    return DYNAMIC if DYNAMIC in sizes else math.prod(sizes)


def _collapse(access: Access, groups: Groups) -> ir.Value:
    """The operand viewed with each group of dims as one (its own sizes: 1 on a
    broadcast group, its own extent on a tail)."""
    memref_type = access.operand.memref
    assert memref_type is not None
    if access.identity:
        layout = None
    else:
        strides, offset = access.operand.strides_and_offset
        layout = ir.StridedLayoutAttr.get(offset, [strides[g[-1]] for g in groups])
    shape = [_group_size(access.operand.shape, g) for g in groups]
    type_ = ir.MemRefType.get(shape, memref_type.element_type, layout,
                              memref_type.memory_space)
    i64 = ir.IntegerType.get_signless(64)
    reassociation = ir.ArrayAttr.get(
        [ir.ArrayAttr.get([ir.IntegerAttr.get(i64, d) for d in g]) for g in groups])
    return memref.collapse_shape(type_, access.operand.value, reassociation)
