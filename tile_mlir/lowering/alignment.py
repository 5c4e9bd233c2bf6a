"""How far apart in memory the elements of a view may be assumed aligned.

A vector access of `w` elements needs its address aligned to `w * bytes`.
Kernel arguments are assumed aligned to KERNEL_ARG_ALIGN bytes (the runtime
checks this before each launch); a view's offset and strides then decide
which widths stay aligned. Dynamic offsets are followed through the
subviews that made them, with a divisibility analysis of the index math
(`%bid * 2048` is a multiple of 2048), as Triton does for its pointers.
"""

from __future__ import annotations

import math

from mlir import ir

KERNEL_ARG_ALIGN = 16
"""Bytes of alignment assumed for every memref argument of a kernel."""

_UNBOUNDED = 1 << 62  # the divisor of zero
_DYNAMIC = ir.ShapedType.get_dynamic_stride_or_offset()


def defining_op(value: ir.Value) -> ir.Operation | None:
    """The op that made a value; None for a block argument."""
    owner = value.owner
    return None if isinstance(owner, ir.Block) else owner.operation


def divisor(value: ir.Value, depth: int = 0) -> int:
    """A number that provably divides the index value (1 when nothing is known)."""
    op = defining_op(value)
    if depth > 32 or op is None:
        return 1
    name = op.name
    if name == "arith.constant":
        attr = op.attributes["value"]
        if isinstance(attr, ir.IntegerAttr):
            return abs(ir.IntegerAttr(attr).value) or _UNBOUNDED
        return 1
    operands = list(op.operands)
    if name == "arith.muli":
        return min(divisor(operands[0], depth + 1) * divisor(operands[1], depth + 1), _UNBOUNDED)
    if name in ("arith.addi", "arith.subi"):
        return math.gcd(divisor(operands[0], depth + 1), divisor(operands[1], depth + 1))
    if name in ("arith.index_cast", "arith.index_castui", "arith.extui", "arith.extsi"):
        return divisor(operands[0], depth + 1)
    if name == "arith.shli":
        shift = defining_op(operands[1])
        if shift is not None and shift.name == "arith.constant":
            amount = ir.IntegerAttr(shift.attributes["value"]).value
            return min(divisor(operands[0], depth + 1) << amount, _UNBOUNDED)
    return 1


def offset_divisor(view: ir.Value, depth: int = 0) -> int:
    """A number of elements that divides the view's offset from its root buffer."""
    type_ = ir.MemRefType(view.type)
    _, static_offset = type_.get_strides_and_offset()
    if static_offset != _DYNAMIC:
        return abs(static_offset) or _UNBOUNDED
    op = defining_op(view)
    if depth > 32 or op is None:
        return 1
    if op.name in ("memref.collapse_shape", "memref.expand_shape", "memref.cast"):
        return offset_divisor(op.operands[0], depth + 1)
    if op.name == "memref.subview":
        return _subview_offset_divisor(op, depth)
    return 1


def _subview_offset_divisor(op: ir.Operation, depth: int) -> int:
    source = op.operands[0]
    source_strides, _ = ir.MemRefType(source.type).get_strides_and_offset()
    static_offsets = list(ir.DenseI64ArrayAttr(op.attributes["static_offsets"]))
    dynamic = iter(list(op.operands)[1:])  # offsets come first among the index operands
    result = offset_divisor(source, depth + 1)
    for static, source_stride in zip(static_offsets, source_strides, strict=True):
        stride = 1 if source_stride == _DYNAMIC else abs(source_stride)
        if static == _DYNAMIC:
            term = divisor(next(dynamic), depth + 1) * stride
        else:
            term = abs(static * stride) or _UNBOUNDED
        result = math.gcd(result, min(term, _UNBOUNDED))
    return result


_VIEWS = ("memref.subview", "memref.collapse_shape", "memref.expand_shape", "memref.cast",
          "memref.reinterpret_cast")


def root_buffer(view: ir.Value) -> ir.Value:
    """The buffer a view was cut from (through subviews, casts and reshapes)."""
    for _ in range(64):
        op = defining_op(view)
        if op is None or op.name not in _VIEWS:
            break
        view = op.operands[0]
    return view


def base_alignment(view: ir.Value, elem_bytes: int) -> int:
    """Bytes of alignment of the buffer a view was cut from: a kernel argument
    (KERNEL_ARG_ALIGN), a memref.global or an allocation with an alignment."""
    root = root_buffer(view)
    op = defining_op(root)
    if op is None:
        parent = root.owner.owner if isinstance(root.owner, ir.Block) else None
        is_argument = parent is not None and parent.operation.name == "gpu.func"
        return KERNEL_ARG_ALIGN if is_argument else elem_bytes
    if op.name == "memref.get_global":
        op = _global(op) or op
    align = op.attributes.get("alignment")
    return max(int(ir.IntegerAttr(align).value), elem_bytes) if align is not None else elem_bytes


def _global(get_global: ir.Operation) -> ir.Operation | None:
    """The memref.global a memref.get_global names, in the enclosing (gpu.)module."""
    name = ir.FlatSymbolRefAttr(get_global.attributes["name"]).value
    scope = get_global.parent
    while scope is not None and scope.name not in ("gpu.module", "builtin.module"):
        scope = scope.parent
    if scope is None:
        return None
    for op in scope.regions[0].blocks[0].operations:
        if op.operation.name == "memref.global" and \
                ir.StringAttr(op.operation.attributes["sym_name"]).value == name:
            return op.operation
    return None
