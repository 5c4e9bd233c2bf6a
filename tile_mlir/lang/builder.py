"""Building a kernel's IR from its Python function: the gpu.func, its arguments, the body.

`emit_kernel` makes the gpu.func for a Specialization in a module (its
gpu.module made or found): one block argument per role (spec.roles), each
Tensor parameter viewed as its memref (a static memref argument as it is; a
pointer re-viewed with `memref.reinterpret_cast` at its offset with its sizes
and strides, as the operator library's programs do), then runs the user's
function on those values with the kernel's `Build` current. The body API
(body.py, views.py and the operators of values.py) builds at the current
insertion point, each op located at the user's line (errors.place), and
records what the function needs afterwards: which parameters are written
(their arguments lose `llvm.readonly`) and the grid the program fixes.

The current Build is a ContextVar, set only while a body runs: no state of the
package outlives a build, and builds in several threads or host contexts do
not meet.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from mlir import ir
from mlir.dialects import arith, gpu, memref

from tile_mlir.contract import DIVISIBILITY
from tile_mlir.dialects import tile
from tile_mlir.dtypes import DTYPES
from tile_mlir.lang import errors
from tile_mlir.lang.spec import ScalarSpec, Specialization, TensorSpec, sizing
from tile_mlir.lang.values import SCALARS, Bool, Index, IndexLike, Number, Scalar, Tensor
from tile_mlir.lowering.support.compute import convert
from tile_mlir.toolchain import SPILL_ATTR

DYNAMIC = ir.ShapedType.get_dynamic_size()


@dataclass
class Build:
    """One kernel being built: what the body API needs to know and what it records."""

    spec: Specialization
    func: ir.OpView
    written: set[int] = field(default_factory=set)  # params (positions) written
    grid: tuple[int, int, int] | None = None  # fixed by tl.grid()
    # Where ops go: the entry block, then the open loop and branch bodies. Kept here
    # rather than on MLIR's insertion point stack, which a loop's generator could not
    # leave balanced when the body raises.
    blocks: list[ir.Block] = field(default_factory=list)

    @property
    def block(self) -> tuple[int, int, int]:
        return self.spec.block


_CURRENT: ContextVar[Build | None] = ContextVar("tile_mlir.lang.build", default=None)


def current() -> Build:
    build = _CURRENT.get()
    if build is None:
        raise errors.program_error("the tile body API (tl.block_id, tl.cta, ...) builds "
                                   "IR: call it inside a @tl.kernel function while it is built")
    return build


def here() -> ir.Location:
    """The location of the user's line being built."""
    where = errors.place()
    return ir.Location.file(where.file, where.line, where.col)


@contextmanager
def at() -> Iterator[Build]:
    """Build at the current block's end, located at the user's line."""
    build = current()
    with ir.InsertionPoint(build.blocks[-1]), here():
        yield build


# ------------------------------------------------------------------ numbers


def index_type() -> ir.Type:
    return ir.IndexType.get()


def element_type(dtype: str) -> ir.Type:
    return ir.Type.parse(DTYPES[dtype].mlir)


def index_constant(value: int) -> Index:
    with at():
        return Index(arith.constant(index_type(), int(value)))


def as_value(value: IndexLike) -> ir.Value:
    """An index operand: an Index's value, or a constant for an int."""
    if isinstance(value, Index):
        return value.value
    if isinstance(value, bool) or not isinstance(value, int):
        raise errors.program_error(f"expected an int or a tl.Index, got {type(value).__name__}")
    return arith.constant(index_type(), value)


_INDEX_OPS: dict[str, Callable[..., ir.Value]] = {
    "add": arith.addi, "sub": arith.subi, "mul": arith.muli, "div": arith.divui,
    "rem": arith.remui, "ceildiv": arith.ceildivui, "min": arith.minsi, "max": arith.maxsi,
}


def _folded(name: str, a: Index, b: int, swap: bool) -> Index | None:
    """x + 0, x - 0, x * 1, x // 1 need no op (the printed IR stays readable)."""
    if b == 0 and (name == "add" or (name == "sub" and not swap)):
        return a
    if b == 1 and (name == "mul" or (name in ("div", "ceildiv") and not swap)):
        return a
    return None


def index_op(name: str, a: Index, b: IndexLike, swap: bool) -> Index:
    """a <name> b (b <name> a when `swap`) on index values."""
    if isinstance(b, int) and not isinstance(b, bool):
        folded = _folded(name, a, b, swap)
        if folded is not None:
            return folded
    with at():
        lhs, rhs = a.value, as_value(b)
        if swap:
            lhs, rhs = rhs, lhs
        return Index(_INDEX_OPS[name](lhs, rhs))


def index_compare(predicate: str, a: Index, b: IndexLike) -> Bool:
    with at():
        return Bool(arith.cmpi(getattr(arith.CmpIPredicate, predicate), a.value, as_value(b)))


def index_to(a: Index, dtype: str) -> Scalar:
    """An index as a number: integers by index_cast, floats through i64 (and `convert`,
    which takes an integer to f16/bf16 through f32 as everywhere else)."""
    kind = DTYPES[dtype].kind
    if kind == "bool":
        raise errors.program_error("an Index converts to a number type, not bool: compare it")
    with at():
        if kind == "int":
            return SCALARS[dtype](arith.index_cast(element_type(dtype), a.value))
        wide = arith.index_cast(element_type("i64"), a.value)
        return SCALARS[dtype](convert(wide, DTYPES["i64"], DTYPES[dtype], 1))


def bool_value(value: Bool | Scalar | bool) -> ir.Value:
    """A predicate's i1: a Bool, a bool scalar (a tl.bool_ parameter) or a Python bool."""
    if isinstance(value, Bool) or (isinstance(value, Scalar) and value.dtype == "bool"):
        return value.value
    if isinstance(value, bool):
        return arith.constant(ir.IntegerType.get_signless(1), int(value))
    raise errors.program_error(f"expected a tl.Bool or a bool, got {type(value).__name__}")


def bool_op(name: str, a: Bool, b: Bool | Scalar | bool) -> Bool:
    ops = {"and": arith.andi, "or": arith.ori, "xor": arith.xori}
    with at():
        return Bool(ops[name](a.value, bool_value(b)))


def scalar_constant(dtype: str, value: float | int | bool) -> ir.Value:
    """An arith.constant of `dtype` (the caller is at a location)."""
    type_ = element_type(dtype)
    kind = DTYPES[dtype].kind
    if kind == "float":
        return arith.constant(type_, float(value))
    if kind == "int" and isinstance(value, float) and not value.is_integer():
        raise errors.program_error(f"{value} is not an {dtype} number")
    return arith.constant(type_, int(value))


def _operand(a: Scalar, other: Number) -> ir.Value:
    if isinstance(other, Scalar):
        if other.dtype != a.dtype:
            raise errors.program_error(f"mixing {a.dtype} and {other.dtype}: convert one "
                                       "with .to(dtype)")
        return other.value
    if isinstance(other, int | float | bool):
        return scalar_constant(a.dtype, other)
    raise errors.program_error(f"cannot combine a {a.dtype} scalar with "
                               f"{type(other).__name__}")


_FLOAT_OPS = {"add": arith.addf, "sub": arith.subf, "mul": arith.mulf, "div": arith.divf}
_INT_OPS = {"add": arith.addi, "sub": arith.subi, "mul": arith.muli}


def scalar_op(name: str, a: Scalar, b: Number, swap: bool) -> Scalar:
    kind = DTYPES[a.dtype].kind
    ops = _FLOAT_OPS if kind == "float" else _INT_OPS if kind == "int" else {}
    if name not in ops:
        raise errors.program_error(f"'{name}' is not defined on {a.dtype} scalars")
    with at():
        lhs, rhs = a.value, _operand(a, b)
        if swap:
            lhs, rhs = rhs, lhs
        return type(a)(ops[name](lhs, rhs))


_FLOAT_PREDICATES = {"lt": "OLT", "le": "OLE", "gt": "OGT", "ge": "OGE", "eq": "OEQ",
                     "ne": "UNE"}
_INT_PREDICATES = {"lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge", "eq": "eq", "ne": "ne",
                   "ult": "ult"}


def scalar_compare(predicate: str, a: Scalar, b: Number) -> Bool:
    with at():
        rhs = _operand(a, b)
        if DTYPES[a.dtype].kind == "float":
            if predicate not in _FLOAT_PREDICATES:
                raise errors.program_error(f"'{predicate}' compares integers, not {a.dtype}")
            cmp = arith.CmpFPredicate.__members__[_FLOAT_PREDICATES[predicate]]
            return Bool(arith.cmpf(cmp, a.value, rhs))
        return Bool(arith.cmpi(getattr(arith.CmpIPredicate, _INT_PREDICATES[predicate]),
                               a.value, rhs))


def scalar_to(a: Scalar, dtype: str) -> Scalar:
    if dtype == a.dtype:
        return a
    with at():
        return SCALARS[dtype](convert(a.value, DTYPES[a.dtype], DTYPES[dtype], 1))


def scalar_index(a: Scalar) -> Index:
    if DTYPES[a.dtype].kind != "int":
        raise errors.program_error(f"only integer scalars become indices, not {a.dtype}")
    with at():
        return Index(arith.index_cast(index_type(), a.value))


# ------------------------------------------------------------------ the kernel


def _argument_type(spec: Specialization, role_kind: str, param: int) -> ir.Type:
    p = spec.params[param]
    if role_kind == "scalar":
        return element_type(p.dtype)
    if role_kind != "array":
        return ir.IntegerType.get_signless(spec.index_bits)
    assert isinstance(p, TensorSpec)
    shape = [s for s in p.shape if s is not None] if p.memref else [1]
    return ir.MemRefType.get(shape, element_type(p.dtype))


_INDEX_32 = "#dlti.dl_spec<#dlti.dl_entry<index, 32 : i32>>"


def gpu_module(module: ir.Module, name: str, index_bits: int) -> ir.Block:
    """The body of the module's gpu.module `name` (made if missing), whose index width must
    be `index_bits` (a 32-bit one says so in its data layout)."""
    module.operation.attributes["gpu.container_module"] = ir.UnitAttr.get()
    for op in module.body.operations:
        if op.operation.name == "gpu.module" and \
                ir.StringAttr(op.operation.attributes["sym_name"]).value == name:
            has = "dlti.dl_spec" in op.operation.attributes
            if has != (index_bits == 32):
                raise ValueError(f"gpu.module @{name} has {'32' if has else '64'}-bit "
                                 f"indices; this kernel needs {index_bits}: emit it into "
                                 "another gpu.module")
            return op.operation.regions[0].blocks[0]
    with ir.InsertionPoint(module.body):
        made = gpu.GPUModuleOp(name)
        block = made.bodyRegion.blocks.append()
    if index_bits == 32:
        made.operation.attributes["dlti.dl_spec"] = ir.Attribute.parse(_INDEX_32)
    return block


def _free_name(block: ir.Block, name: str) -> str:
    taken = {ir.StringAttr(op.operation.attributes["sym_name"]).value
             for op in block.operations if "sym_name" in op.operation.attributes}
    candidate, n = name, 1
    while candidate in taken:
        candidate, n = f"{name}_{n}", n + 1
    return candidate


def _views(spec: Specialization, args: Sequence[ir.Value]
           ) -> dict[int, Tensor | Scalar | tuple[Tensor, ...]]:
    """The value of each non-constexpr parameter: a Tensor view (a tuple of them for a
    tensor of several pointers) or a Scalar. The index arguments (sizes, strides,
    offsets, and the scalars that give a dim's size) are cast to index once; a named
    dim's size serves every tensor that names it."""
    from tile_mlir.lang import views

    given: dict[tuple[str, int, int], Index] = {}
    named: dict[str, Index] = {}
    arrays: dict[int, list[ir.Value]] = {}
    sizes = sizing(spec.params)
    for role, arg in zip(spec.roles, args, strict=True):
        if role.kind in ("array", "scalar"):
            arrays.setdefault(role.param, []).append(arg)
            if role.name in sizes:  # a scalar giving a dim's size
                named[role.name] = Index(arith.index_cast(index_type(), arg))
            continue
        value = Index(arith.index_cast(index_type(), arg))
        given[(role.kind, role.param, role.dim)] = value
        named[role.name] = value
    values: dict[int, Tensor | Scalar | tuple[Tensor, ...]] = {}
    for n, p in enumerate(spec.params):
        if isinstance(p, ScalarSpec):
            values[n] = SCALARS[p.dtype](arrays[n][0])
            continue
        made = tuple(views.parameter_view(n, p, pointer, given, named) for pointer in arrays[n])
        values[n] = made if p.pointers > 1 else made[0]
    return values


def _arg_attrs(spec: Specialization, build: Build) -> list[ir.Attribute]:
    """Per argument: noalias/readonly promises of arrays, the divisibility of strides."""
    names = [p.name for p in spec.params]
    written = {names[n] for n in build.written}
    shared = {(a, b) for a, b in spec.overlaps if a in written or b in written}
    attrs: list[ir.Attribute] = []
    for role in spec.roles:
        entries: dict[str, ir.Attribute] = {}
        if role.kind == "array":
            name = names[role.param]
            if not any(name in pair for pair in shared):
                entries["llvm.noalias"] = ir.UnitAttr.get()
            if role.param not in build.written:
                entries["llvm.readonly"] = ir.UnitAttr.get()
        elif role.kind == "stride" and role.divisibility > 1:
            entries[DIVISIBILITY] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64),
                                                       role.divisibility)
        attrs.append(ir.DictAttr.get(entries))
    return attrs


@contextmanager
def building(build: Build) -> Iterator[Build]:
    token = _CURRENT.set(build)
    try:
        yield build
    finally:
        _CURRENT.reset(token)


def emit_kernel(fn: Callable[..., Any], spec: Specialization, module: ir.Module, *,
                name: str, gpu_module_name: str = "kernels") -> ir.OpView:
    """Build the kernel for `spec` into `module` (the current Context's) and return its
    gpu.func. Raises ProgramError for mistakes the body makes."""
    code = fn.__code__
    where = ir.Location.file(code.co_filename, code.co_firstlineno, 1)
    with where:
        tile.load(where.context)
        block = gpu_module(module, gpu_module_name, spec.index_bits)
        types = [_argument_type(spec, r.kind, r.param) for r in spec.roles]
        with ir.InsertionPoint(block):
            func = gpu.GPUFuncOp(ir.FunctionType.get(types, []), _free_name(block, name),
                                 kernel=True, known_block_size=list(spec.block))
        entry = func.body.blocks.append(
            *types, arg_locs=[ir.Location.name(r.name, where) for r in spec.roles])
        build = Build(spec, func, blocks=[entry])
        with ir.InsertionPoint(entry), building(build):
            values = _views(spec, list(entry.arguments))
            kwargs: dict[str, Any] = {p.name: values[n] for n, p in enumerate(spec.params)}
            kwargs.update(spec.constexprs)
            fn(**kwargs)
            gpu.ReturnOp([])
        func.attributes["arg_attrs"] = ir.ArrayAttr.get(_arg_attrs(spec, build))
        if build.grid is not None:
            func.attributes["known_grid_size"] = ir.DenseI32ArrayAttr.get(list(build.grid))
        if spec.cluster is not None:  # .reqnctapercluster: a plain launch runs clusters
            func.attributes["nvvm.cluster_dim"] = ir.DenseI32ArrayAttr.get(list(spec.cluster))
        if spec.occupancy is not None:  # .minnctapersm
            func.attributes["nvvm.minctasm"] = ir.IntegerAttr.get(
                ir.IntegerType.get_signless(32), spec.occupancy)
            if spec.spill:  # what the request may cost (the compiler reads it: toolchain)
                func.attributes[SPILL_ATTR] = ir.IntegerAttr.get(
                    ir.IntegerType.get_signless(32), spec.spill)
    return func


def mark_written(tensor: Tensor) -> None:
    if tensor.root is not None:
        current().written.add(tensor.root)


def memref_parts(value: ir.Value) -> tuple[list[int], list[int], int, ir.MemRefType]:
    """Static sizes, strides and offset of a memref value (DYNAMIC where dynamic)."""
    type_ = ir.MemRefType(value.type)
    strides, offset = type_.get_strides_and_offset()
    return list(type_.shape), list(strides), offset, type_


def load_element(ref: ir.Value, indices: Sequence[ir.Value]) -> ir.Value:
    return memref.load(ref, list(indices))
