"""How far apart in memory the elements of a view may be assumed aligned.

A vector access of `w` elements needs its address aligned to `w * bytes`.
Kernel arguments are assumed aligned to KERNEL_ARG_ALIGN bytes (the runtime
checks this before each launch); a view's offset and strides then decide
which widths stay aligned. Dynamic offsets are followed through the
subviews that made them, with a divisibility analysis of the index math
(`%bid * 2048` is a multiple of 2048), as Triton does for its pointers.
Integer kernel arguments may promise a divisor with the argument attribute
`tile.divisibility = n` (Triton's `tt.divisibility`): the operator library
passes strides so, and specializes its kernels on what the strides allow.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from mlir import ir

from tile_mlir.contract import DIVISIBILITY, KERNEL_ARG_ALIGN

_UNBOUNDED = 1 << 62  # the divisor of zero
_DYNAMIC = ir.ShapedType.get_dynamic_stride_or_offset()


def defining_op(value: ir.Value) -> ir.Operation | None:
    """The op that made a value; None for a block argument."""
    owner = value.owner
    return None if isinstance(owner, ir.Block) else owner.operation


FOLD: dict[str, Callable[[int, int], int | None]] = {
    "arith.muli": lambda a, b: a * b, "arith.divui": lambda a, b: a // b if b else None,
    "arith.remui": lambda a, b: a % b if b else None, "arith.addi": lambda a, b: a + b,
    "arith.subi": lambda a, b: a - b,
}
"""The index arithmetic static_index folds (a division by zero folds to nothing)."""


def static_index(value: ir.Value) -> int | None:
    """The value of an index computed from constants only (arith folds as it builds),
    None where it depends on anything else."""
    op = defining_op(value)
    if op is None:
        return None
    if op.name == "arith.constant":
        attr = op.attributes["value"]
        return int(ir.IntegerAttr(attr).value) if isinstance(attr, ir.IntegerAttr) else None
    if op.name not in FOLD:
        return None
    a, b = (static_index(v) for v in op.operands)
    return None if a is None or b is None else FOLD[op.name](a, b)


def divisor(value: ir.Value, depth: int = 0) -> int:
    """A number that provably divides the index value (1 when nothing is known)."""
    op = defining_op(value)
    if op is None:
        return argument_divisor(value)
    if depth > 32:
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
    return _divisor_of(value, op, depth)


def _divisor_of(value: ir.Value, op: ir.Operation, depth: int) -> int:
    """divisor's shifts and views' offsets."""
    operands = list(op.operands)
    if op.name == "memref.extract_strided_metadata" and \
            ir.OpResult(value).result_number == 1:
        return offset_divisor(operands[0], depth + 1)  # the view's offset
    if op.name == "arith.shli":
        shift = defining_op(operands[1])
        if shift is not None and shift.name == "arith.constant":
            amount = ir.IntegerAttr(shift.attributes["value"]).value
            return min(divisor(operands[0], depth + 1) << amount, _UNBOUNDED)
    return 1


def argument_divisor(value: ir.Value) -> int:
    """The `tile.divisibility` a kernel argument promises (1 when none)."""
    block = value.owner
    if not isinstance(block, ir.Block) or block.owner is None:
        return 1
    func = block.owner.operation
    attrs = func.attributes
    if func.name not in ("gpu.func", "func.func") or "arg_attrs" not in attrs:
        return 1
    number = ir.BlockArgument(value).arg_number
    arg_attrs = ir.ArrayAttr(attrs["arg_attrs"])
    if number >= len(arg_attrs):
        return 1
    entry = ir.DictAttr(arg_attrs[number])
    if DIVISIBILITY not in entry:
        return 1
    return abs(ir.IntegerAttr(entry[DIVISIBILITY]).value) or _UNBOUNDED


def dynamic_operand(op: ir.Operation, segment: int, static_attr: str, dim: int) -> ir.Value:
    """The SSA operand behind the dynamic entry `dim` of a view op's static offsets,
    sizes or strides (segment 1, 2 or 3 of its operands)."""
    segments = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    static = list(ir.DenseI64ArrayAttr(op.attributes[static_attr]))
    start = sum(segments[:segment]) + sum(1 for s in static[:dim] if s == _DYNAMIC)
    return op.operands[start]


def _kept_dims(op: ir.Operation, source_rank: int, result_rank: int) -> list[int]:
    """The source dims a (possibly rank-reducing) subview keeps, in order: the dropped
    dims have size 1, taken from the left. Where several unit dims could be the dropped
    ones, the choice only renames unit dims, whose stride never moves an address."""
    sizes = list(ir.DenseI64ArrayAttr(op.attributes["static_sizes"]))
    dropped = source_rank - result_rank
    kept = []
    for dim in range(source_rank):
        if dropped and sizes[dim] == 1:
            dropped -= 1
            continue
        kept.append(dim)
    return kept


def stride_divisor(view: ir.Value, dim: int, depth: int = 0) -> int:
    """A number of elements that divides the stride of dimension `dim` of a view,
    following dynamic strides to the values they were made from."""
    strides, _ = ir.MemRefType(view.type).get_strides_and_offset()
    if strides[dim] != _DYNAMIC:
        return abs(strides[dim]) or _UNBOUNDED
    op = defining_op(view)
    if depth > 32 or op is None:
        return 1
    if op.name == "memref.reinterpret_cast":
        return divisor(dynamic_operand(op, 3, "static_strides", dim), depth + 1)
    if op.name == "memref.cast":
        return stride_divisor(op.operands[0], dim, depth + 1)
    if op.name in ("memref.expand_shape", "memref.collapse_shape"):
        return _reshaped_stride_divisor(op, dim, depth)
    if op.name == "memref.subview":
        source = op.operands[0]
        source_rank = ir.MemRefType(source.type).rank
        source_dim = _kept_dims(op, source_rank, len(strides))[dim]
        steps = list(ir.DenseI64ArrayAttr(op.attributes["static_strides"]))
        step = steps[source_dim]
        step_divisor = divisor(dynamic_operand(op, 3, "static_strides", source_dim),
                               depth + 1) if step == _DYNAMIC else abs(step)
        return min(stride_divisor(source, source_dim, depth + 1) * step_divisor, _UNBOUNDED)
    return 1


def _reshaped_stride_divisor(op: ir.Operation, dim: int, depth: int) -> int:
    """A reshape's dim `dim` steps by a source dim's stride (collapse: the group's
    innermost; expand: its group's source dim) times the static sizes of the expanded
    dims inside it."""
    groups = [[int(ir.IntegerAttr(d).value) for d in ir.ArrayAttr(group)]
              for group in ir.ArrayAttr(op.attributes["reassociation"])]
    source = op.operands[0]
    if op.name == "memref.collapse_shape":
        return stride_divisor(source, groups[dim][-1], depth + 1)
    shape = ir.MemRefType(op.result.type).shape
    for source_dim, group in enumerate(groups):
        if dim in group:
            inner = group[group.index(dim) + 1:]
            if any(shape[d] == ir.ShapedType.get_dynamic_size() for d in inner):
                return 1
            return min(stride_divisor(source, source_dim, depth + 1) *
                       math.prod(shape[d] for d in inner), _UNBOUNDED)
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
    if op.name == "memref.reinterpret_cast":
        return divisor(dynamic_operand(op, 1, "static_offsets", 0), depth + 1)
    return 1


def _subview_offset_divisor(op: ir.Operation, depth: int) -> int:
    source = op.operands[0]
    static_offsets = list(ir.DenseI64ArrayAttr(op.attributes["static_offsets"]))
    dynamic = iter(list(op.operands)[1:])  # offsets come first among the index operands
    result = offset_divisor(source, depth + 1)
    for dim, static in enumerate(static_offsets):
        stride = stride_divisor(source, dim, depth + 1)
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
