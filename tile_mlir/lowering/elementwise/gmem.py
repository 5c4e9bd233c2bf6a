"""elementwise/gmem: an elementwise op whose memref operands all live in global memory.

Applies at every scope (thread, warp, warpgroup, cta) once the scope's thread
count is known, for float element types. The scope's T threads share the
tile: the dimensions that are contiguous in every operand are coalesced into
one view, the innermost run is cut into vectors of up to 16 bytes, and thread
t takes vectors t, t + T, t + 2T, ... (128-bit `ld.global` / `st.global`;
`ld.global.nc` where the kernel argument is `llvm.noalias` and `llvm.readonly`).
Then a scalar loop takes each row's tail that is not a whole vector, so no
size is too odd. The vector width shrinks when alignment, strides or the
element type do not allow 16 bytes (down to scalar accesses), and says why.

Narrow floats (f16, bf16) compute in f32 unless the op is exact in them;
scalar inputs are broadcast.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, memref, scf, vector

from tile_mlir import op_table
from tile_mlir.dtypes import DTYPES, DType
from tile_mlir.lowering import ACCEPT, Variant, Verdict, register, reject
from tile_mlir.lowering.alignment import base_alignment, offset_divisor
from tile_mlir.lowering.analysis import DYNAMIC, DYNAMIC_STRIDE, Operand, OpInfo
from tile_mlir.lowering.emit import const_index, scope_thread_index

MAX_ACCESS_BYTES = 16
SUPPORTED = ("f32", "f16", "bf16")


def check(info: OpInfo) -> Verdict:
    for operand in info.memrefs:
        if operand.space != "global":
            return reject(f"operand {operand.index} is in {operand.space} memory, not global")
    if info.scope_threads is None:
        return reject(f"scope {info.scope} needs the kernel's known_block_size")
    for operand in info.operands:
        if operand.dtype.name not in SUPPORTED:
            return reject(f"element type {operand.dtype.name} is not one of {', '.join(SUPPORTED)}")
    return ACCEPT


# ------------------------------------------------------------------ the plan


@dataclass(frozen=True)
class Plan:
    groups: tuple[tuple[int, ...], ...]  # dims of the tile coalesced into each view dim
    view_shape: tuple[int, ...]  # sizes of the view dims (DYNAMIC where unknown)
    vec: int  # elements per access
    why: str  # what limited the vector width


def _is_identity(operand: Operand) -> bool:
    assert operand.memref is not None
    rank = len(operand.shape)
    return operand.memref.affine_map == ir.AffineMap.get_identity(rank)


def _mergeable(operands: list[Operand], dim: int) -> bool:
    """Can `dim` join the group of `dim - 1` (contiguous in every operand)?"""
    for operand in operands:
        if _is_identity(operand):
            continue
        strides, size = operand.strides, operand.shape[dim]
        if DYNAMIC in (size,) or DYNAMIC_STRIDE in (strides[dim], strides[dim - 1]):
            return False
        if strides[dim - 1] != strides[dim] * size:
            return False
    return True


def _groups(operands: list[Operand], rank: int) -> tuple[tuple[int, ...], ...]:
    groups: list[list[int]] = [[0]] if rank else []
    for dim in range(1, rank):
        if _mergeable(operands, dim):
            groups[-1].append(dim)
        else:
            groups.append([dim])
    return tuple(tuple(g) for g in groups)


def _group_size(shape: tuple[int, ...], group: tuple[int, ...]) -> int:
    sizes = [shape[d] for d in group]
    return DYNAMIC if DYNAMIC in sizes else math.prod(sizes)


def _alignment_elems(operand: Operand, groups: tuple[tuple[int, ...], ...]) -> int:
    """Elements by which every row start of the operand's view is aligned."""
    nbytes = operand.dtype.bytes
    align = math.gcd(base_alignment(operand.value, nbytes), offset_divisor(operand.value) * nbytes)
    for group in groups[:-1]:
        stride = operand.strides[group[-1]] if not _is_identity(operand) else None
        if stride is None:  # identity layout: the row stride is the inner size
            inner = _group_size(operand.shape, groups[-1])
            stride = DYNAMIC_STRIDE if inner == DYNAMIC else inner
        align = math.gcd(align, nbytes if stride == DYNAMIC_STRIDE else stride * nbytes)
    return max(align // nbytes, 1)


def plan(info: OpInfo) -> Plan:
    operands = info.memrefs
    shape = info.dst.shape
    groups = _groups(operands, len(shape))
    view_shape = tuple(_group_size(shape, g) for g in groups)
    vec = MAX_ACCESS_BYTES // max(o.dtype.bytes for o in operands)
    why = f"{MAX_ACCESS_BYTES}-byte accesses"
    inner = groups[-1][-1] if groups else None
    for operand in operands:
        if inner is not None and not _is_identity(operand) and operand.strides[inner] != 1:
            return Plan(groups, view_shape, 1, f"operand {operand.index} is strided innermost")
    if not view_shape:
        return Plan(groups, view_shape, 1, "a 0-d tile")
    if view_shape[-1] != DYNAMIC:
        while vec > 1 and vec > view_shape[-1]:
            vec //= 2
            why = f"the innermost run is {view_shape[-1]} elements"
    for operand in operands:
        align = _alignment_elems(operand, groups)
        while vec > 1 and align % vec:
            vec //= 2
            why = f"operand {operand.index} is aligned to {align * operand.dtype.bytes} bytes"
    return Plan(groups, view_shape, vec, why)


# ------------------------------------------------------------------ emission


def _view(operand: Operand, p: Plan) -> ir.Value:
    """The operand as a memref of the plan's view shape (collapsing coalesced dims)."""
    assert operand.memref is not None
    if len(p.groups) == len(operand.shape):
        return operand.value
    if _is_identity(operand):
        layout = None
    else:
        strides, offset = operand.strides_and_offset
        layout = ir.StridedLayoutAttr.get(offset, [strides[g[-1]] for g in p.groups])
    type_ = ir.MemRefType.get(
        list(p.view_shape), operand.memref.element_type, layout, operand.memref.memory_space
    )
    reassociation = ir.ArrayAttr.get(
        [ir.ArrayAttr.get([ir.IntegerAttr.get(ir.IntegerType.get_signless(64), d) for d in g])
         for g in p.groups]
    )
    return memref.collapse_shape(type_, operand.value, reassociation)


def _size(view: ir.Value, p: Plan, dim: int) -> ir.Value:
    static = p.view_shape[dim]
    return memref.dim(view, const_index(dim)) if static == DYNAMIC else const_index(static)


def _product(values: list[ir.Value]) -> ir.Value:
    result = values[0] if values else const_index(1)
    for value in values[1:]:
        result = arith.muli(result, value)
    return result


def _delinearize(row: ir.Value, sizes: list[ir.Value]) -> list[ir.Value]:
    """Split a row number into indices over the outer view dims (row-major)."""
    indices: list[ir.Value] = []
    for size in reversed(sizes[1:]):
        indices.append(arith.remui(row, size))
        row = arith.divui(row, size)
    indices.append(row)
    return list(reversed(indices))


def _type(dtype: DType, vec: int) -> ir.Type:
    elem = ir.Type.parse(dtype.mlir)
    return ir.VectorType.get([vec], elem) if vec > 1 else elem


def _convert(value: ir.Value, src: DType, dst: DType, vec: int) -> ir.Value:
    if src.name == dst.name:
        return value
    target = _type(dst, vec)
    return arith.extf(target, value) if dst.bits > src.bits else arith.truncf(target, value)


class _Emitter:
    """Builds the loads, the body and the store for one access of `vec` elements."""

    def __init__(self, info: OpInfo, views: dict[int, ir.Value]):
        self.info = info
        self.views = views
        self.row = op_table.lookup(ir.StringAttr(info.op.operation.attributes["op"]).value)
        assert self.row is not None
        compute = DTYPES[self.row.compute_dtype(info.dst.dtype.name)]
        # A scalar wider than the tile (an f32 scale of an f16 tile) keeps its
        # precision: the op runs in the scalar's type, as torch computes it.
        for operand in info.sources:
            if not operand.is_memref and operand.dtype.bits > compute.bits:
                compute = operand.dtype
        self.compute = compute

    def access(self, indices: list[ir.Value], vec: int) -> None:
        args = [self._input(operand, indices, vec) for operand in self.info.sources]
        assert self.row is not None
        result = self.row.body(args, _type(self.compute, vec))
        dst = self.info.dst
        result = _convert(result, self.compute, dst.dtype, vec)
        self._store(result, self.views[dst.index], indices, dst, vec)

    def _input(self, operand: Operand, indices: list[ir.Value], vec: int) -> ir.Value:
        if not operand.is_memref:
            scalar = _convert(operand.value, operand.dtype, self.compute, 1)
            return vector.broadcast(_type(self.compute, vec), scalar) if vec > 1 else scalar
        view = self.views[operand.index]
        align = vec * operand.dtype.bytes
        if vec > 1:
            loaded = vector.load(_type(operand.dtype, vec), view, indices, alignment=align)
        else:
            loaded = memref.load(view, indices)
        return _convert(loaded, operand.dtype, self.compute, vec)

    @staticmethod
    def _store(value: ir.Value, view: ir.Value, indices: list[ir.Value], dst: Operand,
               vec: int) -> None:
        if vec > 1:
            vector.store(value, view, indices, alignment=vec * dst.dtype.bytes)
        else:
            memref.store(value, view, indices)


def _strided_loop(start: ir.Value, stop: ir.Value, step: int) -> scf.ForOp:
    return scf.ForOp(start, stop, const_index(step))


def lower(info: OpInfo) -> None:
    p = plan(info)
    op = info.op.operation
    with ir.InsertionPoint(op), op.location:
        tid = scope_thread_index(info.scope, info.block)
        threads = info.scope_threads
        assert threads is not None
        views = {o.index: _view(o, p) for o in info.memrefs}
        emitter = _Emitter(info, views)
        if not p.view_shape:  # a 0-d tile: one thread does it
            _single(tid, emitter)
        else:
            _loops(p, tid, threads, views[info.dst.index], emitter)
    op.erase()


def _single(tid: ir.Value, emitter: _Emitter) -> None:
    first = arith.cmpi(arith.CmpIPredicate.eq, tid, const_index(0))
    branch = scf.IfOp(first)
    with ir.InsertionPoint(branch.then_block):
        emitter.access([], 1)
        scf.YieldOp([])


def _loops(p: Plan, tid: ir.Value, threads: int, dst_view: ir.Value, emitter: _Emitter) -> None:
    rank = len(p.view_shape)
    outer = [_size(dst_view, p, d) for d in range(rank - 1)]
    inner = _size(dst_view, p, rank - 1)
    rows = _product(outer)
    vectors = arith.divui(inner, const_index(p.vec)) if p.vec > 1 else inner
    # The vector body: item k is vector k % vectors of row k // vectors.
    body = _strided_loop(tid, arith.muli(rows, vectors), threads)
    with ir.InsertionPoint(body.body):
        index = body.induction_variable
        lead, col = [], index
        if rank > 1:
            lead = _delinearize(arith.divui(index, vectors), outer)
            col = arith.remui(index, vectors)
        column = arith.muli(col, const_index(p.vec)) if p.vec > 1 else col
        emitter.access([*lead, column], p.vec)
        scf.YieldOp([])
    static_inner = p.view_shape[-1]
    if p.vec == 1 or (static_inner != DYNAMIC and static_inner % p.vec == 0):
        return
    # The tail: the last inner % vec elements of every row, one scalar each.
    tail = arith.remui(inner, const_index(p.vec))
    start = arith.subi(inner, tail)
    loop = _strided_loop(tid, arith.muli(rows, tail), threads)
    with ir.InsertionPoint(loop.body):
        index = loop.induction_variable
        lead, col = [], index
        if rank > 1:
            lead, col = _delinearize(arith.divui(index, tail), outer), arith.remui(index, tail)
        emitter.access([*lead, arith.addi(start, col)], 1)
        scf.YieldOp([])


register(Variant("tile.elementwise", "gmem", 10, check, lower,
                 "global-memory operands; 16-byte vectors strided over the scope's threads"))
