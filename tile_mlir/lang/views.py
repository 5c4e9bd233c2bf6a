"""Tensor views: parameters re-viewed from their pointers, slices, reshapes, broadcasts.

Every view is a memref op the lowering follows back to its kernel argument
(memref.subview, expand_shape, collapse_shape, reinterpret_cast), with its
offsets as arith ops on the block and thread ids and the arguments: that is
how lowering/support/alignment.py proves a vector access aligned (`%bid *
2048` is a multiple of 2048; a stride argument promises `tile.divisibility`),
so a view never costs the tile op its vectors. Result types are computed here
exactly as MLIR infers them (its verifier compares them).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, NamedTuple

from mlir import ir
from mlir.dialects import memref

from tile_mlir.contract import PIECE
from tile_mlir.dtypes import DTYPES
from tile_mlir.lang import builder, errors
from tile_mlir.lang.builder import DYNAMIC, as_value, at
from tile_mlir.lang.spec import TensorSpec
from tile_mlir.lang.values import SCALARS, Index, IndexLike, Number, Scalar, Tensor, ds

STRIDE = ir.ShapedType.get_dynamic_stride_or_offset()


def _static(value: IndexLike) -> int:
    return value if isinstance(value, int) else DYNAMIC


def _split(values: Sequence[IndexLike]) -> tuple[list[ir.Value], list[int]]:
    """The dynamic operands and the static list (DYNAMIC where dynamic) of a view op."""
    dynamic = [v.value for v in values if isinstance(v, Index)]
    return dynamic, [_static(v) for v in values]


def _times(a: int, b: int) -> int:
    """A product of static-or-dynamic numbers as MLIR folds it: 0 wins, else dynamic wins."""
    if a == 0 or b == 0:
        return 0
    if STRIDE in (a, b):
        return STRIDE
    return a * b


def _layout(strides: Sequence[int], offset: int) -> ir.Attribute:
    return ir.StridedLayoutAttr.get(offset, list(strides))


def _inferred(source: ir.MemRefType, strides: Sequence[int], offset: int
              ) -> ir.Attribute | None:
    """The layout a reshape of `source` has, as MLIR infers it: the identity (none) when
    the source's map is the identity (a 1-d unit stride at offset 0 is), else the strided
    layout, row-major strides included."""
    if source.affine_map == ir.AffineMap.get_identity(source.rank):
        return None
    return _layout(strides, offset)


# ------------------------------------------------------------------ parameters


def parameter_view(n: int, p: TensorSpec, pointer: ir.Value,
                   given: dict[tuple[str, int, int], Index], named: dict[str, Index]) -> Tensor:
    """A Tensor parameter in the body: its static memref, or its pointer re-viewed with
    the sizes, strides and offset the launch passes (`given` by role, `named` by dim)."""
    if p.memref:
        return Tensor(pointer, tuple(s for s in p.shape if s is not None), p.dtype, "global",
                      root=n)
    sizes: list[IndexLike] = []
    for dim, (size, name) in enumerate(zip(p.shape, p.dims, strict=True)):
        sizes.append(size if size is not None else named[name] if name is not None
                     else given[("size", n, dim)])
    strides = [given[("stride", n, d)] if c.startswith("?") else int(c)
               for d, c in enumerate(p.strides)]
    offset: IndexLike = given[("offset", n, -1)] if p.offset else 0
    type_ = ir.MemRefType.get([_static(s) for s in sizes], builder.element_type(p.dtype),
                              _layout([s if isinstance(s, int) else STRIDE for s in strides],
                                      STRIDE if p.offset else 0))
    offsets, static_offsets = _split([offset])
    dyn_sizes, static_sizes = _split(sizes)
    dyn_strides, static_strides = _split(strides)
    view = memref.ReinterpretCastOp(type_, pointer, offsets, dyn_sizes, dyn_strides,
                                    static_offsets, static_sizes, static_strides).result
    return Tensor(view, tuple(sizes), p.dtype, "global", root=n)


# ------------------------------------------------------------------ subscripts


def _normalize(t: Tensor, index: Any) -> list[Any]:
    items = list(index) if isinstance(index, tuple) else [index]
    ellipses = [i for i, item in enumerate(items) if item is Ellipsis]
    if len(ellipses) > 1:
        raise errors.program_error("an index has at most one '...'")
    named = len(items) - len(ellipses)
    if named > t.rank:
        raise errors.program_error(f"{named} indices for a {t.rank}-d tensor")
    fill = [slice(None)] * (t.rank - named)
    if ellipses:
        at = ellipses[0]
        return [*items[:at], *fill, *items[at + 1:]]
    return items + fill


def _clamp_static(value: int, extent: int) -> int:
    return min(max(value + extent if value < 0 else value, 0), extent)


def _size(start: IndexLike, stop: IndexLike, step: int, extent: IndexLike) -> IndexLike:
    """Elements of start:stop:step (stop already clamped), never negative."""
    if isinstance(start, int) and isinstance(stop, int):
        return max(-(-(stop - start) // step), 0)
    if isinstance(start, int) and start == 0 and step == 1 and stop is extent:
        return extent
    length = builder.index_op("max", _index(stop) - start, 0, False)
    return length if step == 1 else builder.index_op("ceildiv", length, step, False)


def _index(value: IndexLike) -> Index:
    return value if isinstance(value, Index) else builder.index_constant(value)


def _slice(item: slice, extent: IndexLike, dim: int) -> tuple[IndexLike, IndexLike, int]:
    """(offset, size, step) of a slice along a dim: ends past the extent are clamped."""
    step = 1 if item.step is None else item.step
    if not isinstance(step, int) or isinstance(step, bool) or step < 1:
        raise errors.program_error(f"dim {dim}: a slice's step is a positive int, "
                                   f"got {item.step!r}")
    start = 0 if item.start is None else item.start
    stop = extent if item.stop is None else item.stop
    for bound in (start, stop):
        if not isinstance(bound, int | Index) or isinstance(bound, bool):
            raise errors.program_error(f"dim {dim}: slice bounds are ints or tl.Index values, "
                                       f"got {type(bound).__name__}")
        if isinstance(bound, int) and bound < 0 and not isinstance(extent, int):
            raise errors.program_error(f"dim {dim}: a negative bound needs a static extent")
    if isinstance(extent, int):
        start = _clamp_static(start, extent) if isinstance(start, int) else start
        asked = stop
        stop = _clamp_static(stop, extent) if isinstance(stop, int) else \
            builder.index_op("min", stop, extent, False)
        size = _size(start, stop, step, extent)
        if isinstance(size, int) and size == 1 and isinstance(start, int) and \
                isinstance(asked, int) and _size(start, asked, step, asked) > 1:
            # a tail of one element: a static 1 would be taken for a broadcast by an op
            # beside a register tile (the one element in every lane), so its size is
            # given at run time, as a tail's is
            return start, builder.index_constant(1), step
        return start, size, step
    if stop is not extent:
        stop = builder.index_op("min", _index(stop), extent, False)
    return start, _size(start, stop, step, extent), step


def _pick(item: IndexLike, extent: IndexLike, dim: int) -> IndexLike:
    if isinstance(item, bool) or not isinstance(item, int | Index):
        raise errors.program_error(f"dim {dim}: an index is an int, a tl.Index, a slice or "
                                   f"tl.ds(start, size), got {type(item).__name__}")
    if isinstance(item, int):
        if isinstance(extent, int):
            if not -extent <= item < extent:
                raise errors.program_error(f"dim {dim}: index {item} is out of bounds for "
                                           f"size {extent}")
            return item % extent
        if item < 0:
            raise errors.program_error(f"dim {dim}: a negative index needs a static extent")
    return item


def _window(item: ds, extent: IndexLike, dim: int) -> tuple[IndexLike, IndexLike, int]:
    if not isinstance(item.step, int) or item.step < 1:
        raise errors.program_error(f"dim {dim}: tl.ds's step is a positive int")
    if isinstance(item.start, int) and isinstance(item.size, int) and \
            isinstance(extent, int) and (item.start < 0 or
                                         item.start + (item.size - 1) * item.step >= extent):
        raise errors.program_error(f"dim {dim}: tl.ds({item.start}, {item.size}) is out of "
                                   f"bounds for size {extent}")
    return item.start, item.size, item.step


def subscript(t: Tensor, index: Any) -> Tensor:
    """t[index]: a memref.subview (rank-reducing where an index picks)."""
    if t.space == "local":
        raise errors.program_error("a register tile is used whole: its layout spreads it "
                                   "over threads, so it has no views")
    offsets: list[IndexLike] = []
    sizes: list[IndexLike] = []
    steps: list[int] = []
    kept: list[bool] = []
    for dim, (item, extent) in enumerate(zip(_normalize(t, index), t.sizes, strict=True)):
        if isinstance(item, slice):
            offset, size, step = _slice(item, extent, dim)
        elif isinstance(item, ds):
            offset, size, step = _window(item, extent, dim)
        else:
            offset, size, step = _pick(item, extent, dim), 1, 1
        offsets.append(offset)
        sizes.append(size)
        steps.append(step)
        kept.append(isinstance(item, slice | ds))
    if all(kept) and all(o == 0 for o in offsets if isinstance(o, int)) and \
            not any(isinstance(o, Index) for o in offsets) and steps == [1] * t.rank and \
            all(_same(s, e) for s, e in zip(sizes, t.sizes, strict=True)):
        return t
    return _subview(t, offsets, sizes, steps, kept)


def _same(a: IndexLike, b: IndexLike) -> bool:
    """The same size: equal ints, or the very same Index."""
    return a is b or (isinstance(a, int) and isinstance(b, int) and a == b)


def _subview(t: Tensor, offsets: list[IndexLike], sizes: list[IndexLike], steps: list[int],
             kept: list[bool]) -> Tensor:
    _, strides, offset, type_ = builder.memref_parts(t.value)
    result_offset = offset
    for o, stride in zip(offsets, strides, strict=True):
        term = _times(_static(o) if isinstance(o, int) else STRIDE, stride)
        result_offset = STRIDE if STRIDE in (result_offset, term) else result_offset + term
    result_strides = [_times(s, step) for s, step, k in zip(strides, steps, kept, strict=True)
                      if k]
    result_sizes = [s for s, k in zip(sizes, kept, strict=True) if k]
    result = ir.MemRefType.get([_static(s) for s in result_sizes], type_.element_type,
                               _layout(result_strides, result_offset), type_.memory_space)
    with at():
        dyn_offsets, static_offsets = _split(offsets)
        dyn_sizes, static_sizes = _split(sizes)
        view = memref.SubViewOp(result, t.value, dyn_offsets, dyn_sizes, [], static_offsets,
                                static_sizes, steps).result
    return Tensor(view, tuple(result_sizes), t.dtype, t.space, root=t.root)


# ------------------------------------------------------------------ reshape


def _shape_arg(shape: Sequence[Any]) -> list[IndexLike]:
    if len(shape) == 1 and isinstance(shape[0], tuple | list):
        shape = shape[0]
    dims = list(shape)
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int | Index):
            raise errors.program_error(f"a shape holds ints and tl.Index values, got {d!r}")
    return dims


def _grow(dims: list[IndexLike], at: int, group: list[int]) -> int:
    """Add dim at+1 to a group of static dims; its size (a located error if there is
    none, or it is dynamic)."""
    at += 1
    if at == len(dims) or not isinstance(dims[at], int):
        raise errors.program_error("reshape: the static dims do not match up")
    group.append(at)
    size: int = dims[at]  # type: ignore[assignment]
    return size


def _groups(source: list[IndexLike], target: list[IndexLike]) -> list[tuple[list[int],
                                                                           list[int]]]:
    """Which source dims become which target dims: runs of static dims with equal products;
    a dynamic dim only as itself (the same Index on both sides)."""
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(source) and j < len(target):
        a, b = source[i], target[j]
        if not isinstance(a, int) or not isinstance(b, int):
            if a is not b:
                raise errors.program_error("reshape keeps a dynamic dim whole (the same "
                                           "tl.Index on both sides); static dims may merge "
                                           "and split")
            groups.append(([i], [j]))
        else:
            src, dst = [i], [j]
            while a != b:
                if a < b:
                    a *= _grow(source, src[-1], src)
                else:
                    b *= _grow(target, dst[-1], dst)
            groups.append((src, dst))
            i, j = src[-1], dst[-1]
        i, j = i + 1, j + 1
    rest = source[i:] + target[j:]
    if any(not _same(d, 1) for d in rest) or (not groups and rest):
        raise errors.program_error(f"cannot reshape {_text(source)} to {_text(target)}")
    if groups:
        groups[-1][0].extend(range(i, len(source)))
        groups[-1][1].extend(range(j, len(target)))
    return groups


def _text(shape: Sequence[IndexLike]) -> str:
    return "(" + ", ".join(str(d) if isinstance(d, int) else "?" for d in shape) + ")"


def reshape(t: Tensor, shape: Sequence[Any]) -> Tensor:
    """The same elements in another shape: a collapse_shape of the merged dims (which must
    be contiguous), then an expand_shape of the split ones."""
    target = _shape_arg(shape)
    if t.space == "local":
        raise errors.program_error("a register tile is used whole: it has no reshape")
    if len(target) == len(t.sizes) and all(_same(a, b) for a, b in
                                             zip(target, t.sizes, strict=True)):
        return t
    groups = _groups(list(t.sizes), target)
    collapsed = _collapse(t, [src for src, _ in groups])
    return _expand(collapsed, [dst for _, dst in groups], target)


def _collapse(t: Tensor, groups: list[list[int]]) -> Tensor:
    if all(len(g) == 1 for g in groups):
        return t
    shape, strides, offset, type_ = builder.memref_parts(t.value)
    sizes: list[IndexLike] = []
    result_strides = []
    for group in groups:
        inner = [d for d in group if shape[d] != 1] or [group[-1]]
        for a, b in itertools.pairwise(inner):
            if STRIDE in (strides[a], strides[b]) or strides[a] != strides[b] * shape[b]:
                raise errors.program_error("reshape merges dims that are not contiguous "
                                           "(or whose strides are known only at launch)")
        product = 1
        for d in group:
            product *= shape[d]
        sizes.append(product if len(group) > 1 else t.sizes[group[0]])
        result_strides.append(strides[inner[-1]])
    result = ir.MemRefType.get([_static(s) for s in sizes], type_.element_type,
                               _inferred(type_, result_strides, offset), type_.memory_space)
    with at():
        view = memref.CollapseShapeOp(result, t.value, _reassociation(groups)).result
    return Tensor(view, tuple(sizes), t.dtype, t.space, root=t.root)


def _reassociation(groups: list[list[int]]) -> ir.ArrayAttr:
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, d) for d in g])
                             for g in groups])


def _expand(t: Tensor, groups: list[list[int]], target: list[IndexLike]) -> Tensor:
    if all(len(g) == 1 for g in groups):
        return t
    _, strides, offset, type_ = builder.memref_parts(t.value)
    result_strides: list[int] = []
    for source_dim, group in enumerate(groups):
        inner = strides[source_dim]
        group_strides = []
        for d in reversed(group):
            group_strides.append(inner)
            inner = _times(inner, _static(target[d]))
        result_strides.extend(reversed(group_strides))
    result = ir.MemRefType.get([_static(s) for s in target], type_.element_type,
                               _inferred(type_, result_strides, offset), type_.memory_space)
    with at():
        dynamic, static = _split(target)
        view = memref.ExpandShapeOp(result, t.value, _reassociation(groups), dynamic,
                                    static).result
    return Tensor(view, tuple(target), t.dtype, t.space, root=t.root)


def broadcast_to(t: Tensor, shape: Sequence[Any]) -> Tensor:
    """A view of `shape` repeating t along new leading dims and its size-1 dims: new dims
    come from an expand_shape, then a subview with step 0 along every stretched dim."""
    target = _shape_arg(shape)
    if t.space == "local":
        raise errors.program_error("a register tile is used whole: it has no broadcast")
    extra = len(target) - t.rank
    if extra < 0:
        raise errors.program_error(f"cannot broadcast a {t.rank}-d tensor to {len(target)} "
                                   "dims")
    for dim, (size, want) in enumerate(zip(t.sizes, target[extra:], strict=True)):
        if not _same(size, 1) and not _same(size, want):
            raise errors.program_error(f"dim {extra + dim}: size {_text([size])[1:-1]} does "
                                       f"not broadcast to {_text([want])[1:-1]}")
    if t.rank == 0:
        raise errors.program_error("broadcasting a 0-d tensor: view it as 1-d first")
    source = t
    if extra:
        ones: list[IndexLike] = [*([1] * extra), *t.sizes]
        groups = [[*range(extra + 1)]] + [[extra + d] for d in range(1, t.rank)]
        source = _expand(t, groups, ones)
    stretched = [_same(s, 1) and not _same(w, 1)
                 for s, w in zip(source.sizes, target, strict=True)]
    if not any(stretched):
        return source
    return _subview(source, [0] * len(target), target,
                    [0 if s else 1 for s in stretched], [True] * len(target))


# ------------------------------------------------------------------ aligned vectors


def aligned(t: Tensor, vec: int) -> tuple[Tensor, Tensor, Tensor]:
    """A contiguous 1-d global view as (head, body, tail): body [?, vec] the whole vectors
    of `vec` elements in it that start at an address aligned to `vec` elements, head and
    tail [?, 1] the elements before and after them (fewer than `vec` each), as columns: a
    copy into a register tile whose first dim is over threads gives each element to a
    thread of its own, so that the threads access them together (one element a thread,
    where a row of them would be one thread's elements one by one). Every element of t
    is in exactly one of them, at run time: a row whose start is not aligned (a row of
    odd length, a view at an odd offset) keeps its vector accesses.

    The body is a memref.reinterpret_cast of t at offset vec * ceil(offset(t) / vec)
    (offset(t) from memref.extract_strided_metadata), a multiple of `vec` that the
    alignment analysis sees as one (`%q * vec`); the head and tail are re-viewed likewise,
    at offset(t) and after the body."""
    offset = _contiguous_offset(t, vec, "aligned()")
    end = offset + t.sizes[0]
    q = builder.index_op("ceildiv", offset, vec, False)
    start = q * vec  # the body's first element: a multiple of vec by construction
    count = builder.index_op("max", end // vec - q, 0, False)
    head_end = builder.index_op("min", start, end, False)
    tail_start = builder.index_op("max", start + count * vec, head_end, False)
    tail = builder.index_op("max", end - tail_start, 0, False)
    body = _recast(t, f"body:{vec}", start, [count, vec], [vec, 1])
    return (_recast(t, f"head:{vec}", offset, [head_end - offset, 1], [1, 1]), body,
            _recast(t, f"tail:{vec}", tail_start, [tail, 1], [1, 1]))


def aligned_as(t: Tensor, vec: int, like: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """A contiguous 1-d global view as (head, body, tail) of the sizes `like.aligned(vec)`
    gives `like` (a view as long: a row whose pieces t's are to line up with, element for
    element: a weight beside a row of odd length). Where t starts at another alignment
    than `like` its body's vectors are not aligned: their accesses narrow to what the
    alignment analysis can prove (the element's, at worst)."""
    if t.rank != 1 or like.rank != 1 or not _same(t.sizes[0], like.sizes[0]):
        raise errors.program_error("aligned_as() splits a 1-d view like another as long")
    split = _split_like(t, vec, like, "aligned_as()")
    return _pieces(t, vec, split, split.base, split.base + split.head)


def aligned_copy_as(t: Tensor, vec: int, like: Tensor, period: int) -> tuple[Tensor, Tensor,
                                                                          Tensor]:
    """(head, body, tail) of the sizes `like.aligned(vec)` gives `like`, taken from one of
    `vec` copies of a vector as long as `like` that t holds (1-d, contiguous): copy c at
    element c * (period + 1) of t, `period` a multiple of vec. The copy taken is the one
    whose element c sits where like's start does within a vector (c = like's offset mod
    vec), so that the body's vectors start aligned in it wherever `like` starts: at c *
    period + (ceil(offset / vec) - offset // vec) * vec, a multiple of vec the alignment
    analysis sees (where `like` is shorter than its head the body is empty)."""
    if t.rank != 1 or like.rank != 1:
        raise errors.program_error("aligned_copy_as() takes 1-d views")
    if isinstance(period, bool) or not isinstance(period, int) or period < 1 or \
            period % vec:
        raise errors.program_error(f"aligned_copy_as(): period is a positive multiple of vec "
                                   f"({vec}), got {period!r}")
    split = _split_like(t, vec, like, "aligned_copy_as()")
    offset = split.offset
    klass = offset % vec
    copy = split.base + klass * (period + 1)  # the copy's element 0
    # copy + head, where the head is whole: a multiple of vec the analysis sees
    body = split.base + klass * period + (split.q - offset // vec) * vec
    return _pieces(t, vec, split, copy, body)


class _Split(NamedTuple):
    """`like.aligned(vec)`'s pieces as element counts (aligned_as, aligned_copy_as): like's
    offset and t's (`base`), q = ceil(offset / vec), the head's and the body's sizes, and
    the tail's start and size (from like's start)."""

    offset: Index
    base: Index
    q: Index
    head: Index
    vectors: Index
    tail_start: Index
    tail: Index


def _split_like(t: Tensor, vec: int, like: Tensor, what: str) -> _Split:
    offset = _contiguous_offset(like, vec, what)
    base = _contiguous_offset(t, vec, what)
    length = like.sizes[0]
    end = offset + length
    q = builder.index_op("ceildiv", offset, vec, False)
    count = builder.index_op("max", end // vec - q, 0, False)
    head = builder.index_op("min", q * vec, end, False) - offset
    tail_start = head + count * vec
    tail = builder.index_op("max", length - tail_start, 0, False)
    return _Split(offset, base, q, head, count, tail_start, tail)


def _pieces(t: Tensor, vec: int, split: _Split, start: Index, body: Index
            ) -> tuple[Tensor, Tensor, Tensor]:
    """t's (head, body, tail) of `split`'s sizes, the head (and the tail after it) from
    element `start` of t's memory, the body from element `body`."""
    return (_recast(t, f"head:{vec}", start, [split.head, 1], [1, 1]),
            _recast(t, f"body:{vec}", body, [split.vectors, vec], [vec, 1]),
            _recast(t, f"tail:{vec}", start + split.tail_start, [split.tail, 1], [1, 1]))


def _contiguous_offset(t: Tensor, vec: int, what: str) -> Index:
    """The element offset of a contiguous 1-d global view (`what` names the caller in its
    errors)."""
    if t.space != "global" or t.rank != 1:
        raise errors.program_error(f"{what} takes a 1-d view of global memory, got a "
                                   f"{t.rank}-d {t.space} tensor")
    if isinstance(vec, bool) or not isinstance(vec, int) or vec < 1 or vec & (vec - 1):
        raise errors.program_error(f"{what}: vec is a power of two, got {vec!r}")
    _, strides, _, _ = builder.memref_parts(t.value)
    if strides[0] != 1 and not _same(t.sizes[0], 1):
        raise errors.program_error(f"{what} takes a contiguous view (unit stride)")
    with at():
        meta = memref.ExtractStridedMetadataOp(t.value)
        return Index(meta.results[1])


def _recast(t: Tensor, piece: str, offset: Index, sizes: list[IndexLike],
            strides: list[int]) -> Tensor:
    """Piece `piece` (PIECE's "<piece>:<split>") of t's memory: re-viewed at an element
    offset from its base, with sizes and strides."""
    type_ = ir.MemRefType(t.value.type)
    result = ir.MemRefType.get([_static(s) for s in sizes], type_.element_type,
                               _layout(strides, STRIDE), type_.memory_space)
    with at():
        dyn_sizes, static_sizes = _split(sizes)
        op = memref.ReinterpretCastOp(result, t.value, [offset.value], dyn_sizes, [],
                                      [STRIDE], static_sizes, strides)
        op.attributes[PIECE] = ir.StringAttr.get(piece)
    return Tensor(op.result, tuple(sizes), t.dtype, t.space, root=t.root)


# ------------------------------------------------------------------ elements


def _indices(t: Tensor, indices: Sequence[IndexLike]) -> list[ir.Value]:
    if len(indices) != t.rank:
        raise errors.program_error(f"{len(indices)} indices for a {t.rank}-d tensor")
    if t.space == "local":
        raise errors.program_error("a register tile is used whole: its elements live in "
                                   "other threads' registers")
    if t.dtype == "bool":
        raise errors.program_error("bool tensors hold bytes the tile ops read; load and "
                                   "store their elements as i8 views is not supported")
    return [as_value(i) for i in indices]


def load(t: Tensor, indices: Sequence[IndexLike]) -> Scalar:
    with at():
        return SCALARS[t.dtype](memref.load(t.value, _indices(t, indices)))


def store(t: Tensor, value: Number, indices: Sequence[IndexLike]) -> None:
    with at():
        where = _indices(t, indices)
        if isinstance(value, Scalar):
            if value.dtype != t.dtype:
                raise errors.program_error(f"storing a {value.dtype} into a {t.dtype} tensor: "
                                           "convert it with .to()")
            element = value.value
        else:
            element = builder.scalar_constant(t.dtype, value)
        memref.store(element, t.value, where)
    builder.mark_written(t)


def element_bytes(t: Tensor) -> int:
    return DTYPES[t.dtype].bytes
