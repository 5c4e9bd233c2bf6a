"""Small IR-building helpers shared by the lowering variants.

All functions build at the current insertion point and location (callers run
under `with ir.InsertionPoint(...), loc:`).
"""

from __future__ import annotations

from collections.abc import Sequence

from mlir import ir
from mlir.dialects import arith, gpu, llvm, memref, nvvm

from tile_mlir.contract import SCOPE_THREADS


def const_index(value: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), value)


def const(type_: ir.Type, value: float | int | bool) -> ir.Value:
    """A scalar constant, or a splat when `type_` is a vector."""
    if isinstance(type_, ir.VectorType):
        elem = ir.VectorType(type_).element_type
        splat = ir.DenseElementsAttr.get_splat(type_, _scalar_attr(elem, value))
        return arith.constant(type_, splat)
    return arith.constant(type_, _scalar_attr(type_, value))


def _scalar_attr(type_: ir.Type, value: float | int | bool) -> ir.Attribute:
    if isinstance(type_, ir.IntegerType | ir.IndexType):
        return ir.IntegerAttr.get(type_, int(value))
    return ir.FloatAttr.get(type_, float(value))


def element_type(type_: ir.Type) -> ir.Type:
    return ir.VectorType(type_).element_type if isinstance(type_, ir.VectorType) else type_


def with_element_type(type_: ir.Type, elem: ir.Type) -> ir.Type:
    """`type_` (a scalar or a vector) with its element type replaced."""
    if isinstance(type_, ir.VectorType):
        return ir.VectorType.get(ir.VectorType(type_).shape, elem)
    return elem


def _mangle(type_: ir.Type) -> str:
    """LLVM's overloaded-intrinsic suffix for a type: f32, v4f32, bf16, v2f16."""
    if isinstance(type_, ir.VectorType):
        vec = ir.VectorType(type_)
        return f"v{vec.shape[0]}{_mangle(vec.element_type)}"
    return str(type_)


def intrinsic(base: str, args: Sequence[ir.Value], result: ir.Type | None = None) -> ir.Value:
    """Call an overloaded LLVM intrinsic, mangled by the result type (`llvm.sqrt.v4f32`).

    Used where the math dialect's libdevice lowering is not what the op
    promises (math.sqrt becomes the approximate `sqrt.approx.f32`).
    """
    result = result or args[0].type
    op = llvm.CallIntrinsicOp(result, f"{base}.{_mangle(result)}", list(args), [], [])
    return op.results[0]


def linear_thread_id(block: Sequence[int]) -> ir.Value:
    """threadIdx linearized as x + bx * (y + by * z), emitting only the axes in use."""
    tid = gpu.thread_id(gpu.Dimension.x)
    if block[1] > 1 or block[2] > 1:
        y = gpu.thread_id(gpu.Dimension.y)
        tid = arith.addi(tid, arith.muli(y, const_index(block[0])))
    if block[2] > 1:
        z = gpu.thread_id(gpu.Dimension.z)
        tid = arith.addi(tid, arith.muli(z, const_index(block[0] * block[1])))
    return tid


def cta_rank() -> ir.Value:
    """This CTA's rank in its cluster (%cluster_ctarank), as an index."""
    rank = nvvm.read_ptx_sreg_cluster_ctarank(ir.IntegerType.get_signless(32))
    return arith.index_castui(ir.IndexType.get(), rank)


_DYNAMIC_INDEX = -(1 << 31)
"""llvm.getelementptr's marker of an index given as an operand."""


def shared_pointer(buffer: ir.Value) -> ir.Value:
    """A shared memref's first element as an !llvm.ptr<3>."""
    base = memref.extract_aligned_pointer_as_index(buffer)
    address = arith.index_castui(ir.IntegerType.get_signless(64), base)
    return llvm.inttoptr(ir.Type.parse("!llvm.ptr<3>"), address)


def cluster_address(pointer: ir.Value, rank: ir.Value, element: ir.Type | None = None,
                    index: ir.Value | None = None) -> ir.Value:
    """The address in the cluster's shared window (!llvm.ptr<7>, mapa.shared::cluster)
    of a shared pointer of this CTA (element `index` past it) in the CTA of `rank`."""
    if index is not None:
        assert element is not None
        pointer = shared_element(pointer, element, index)
    return nvvm.mapa(ir.Type.parse("!llvm.ptr<7>"), pointer,
                     arith.index_cast(ir.IntegerType.get_signless(32), rank))


def shared_element(pointer: ir.Value, element: ir.Type, index: ir.Value) -> ir.Value:
    """The shared pointer (!llvm.ptr<3>) `index` elements of `element` past `pointer`."""
    return llvm.getelementptr(ir.Type.parse("!llvm.ptr<3>"), pointer,
                              [arith.index_cast(ir.IntegerType.get_signless(32), index)],
                              [_DYNAMIC_INDEX], element, llvm.GEPNoWrapFlags.none)


def byte_address(pointer: ir.Value, offset: ir.Value) -> ir.Value:
    """The pointer `offset` (an i64) bytes past `pointer`, in its address space."""
    return llvm.getelementptr(pointer.type, pointer, [offset], [_DYNAMIC_INDEX],
                              ir.IntegerType.get_signless(8), llvm.GEPNoWrapFlags.none)


def scope_thread_index(scope: str, block: Sequence[int] | None) -> ir.Value:
    """This thread's index among the threads of an execution scope (tile-verify has
    made sure the block size is known and, for warps and warpgroups, whole ones). A
    cluster's threads are numbered CTA by CTA: rank * (threads per CTA) + the thread's
    index in its CTA."""
    if scope == "thread":
        return const_index(0)
    assert block is not None, f"scope {scope} needs the kernel's block size"
    tid = linear_thread_id(block)
    if scope == "cluster":
        threads = block[0] * block[1] * block[2]
        return arith.addi(arith.muli(cta_rank(), const_index(threads)), tid)
    if scope == "cta" or block[0] * block[1] * block[2] <= SCOPE_THREADS[scope]:
        return tid
    return arith.remui(tid, const_index(SCOPE_THREADS[scope]))
