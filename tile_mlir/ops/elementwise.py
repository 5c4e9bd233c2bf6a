"""One registry row applied to arrays and numbers: the plan of every elementwise call.

    operands -> result dtype (promotion.py) -> broadcast shape, output (or out=, in place)
             -> coalesced view (coalesce.py) -> strategy (strategy.py)
             -> signature -> program (programs/elementwise.py) -> a launch in the plan

A signature fixes everything the kernel is specialized on; the sizes, the strides
that are not 0 or 1 and the element offsets are constants of the plan (the key fixes
them), the pointers and the numbers are read per call. The front ends (functions.py,
activations.py, generators.py, reductions.py, rope.py) call `apply` with the operands
they made (views of their arguments included) and get the output's description back.

ops.fuse (fuse.py) traces a function of these front ends with a `Recording` builder:
`apply` hands it each resolved call instead of planning it, and the fused expression
comes back as one `Call` with `expr` set, planned by `run_call` as any other.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tile_mlir import op_table
from tile_mlir.contract import DIVISIBILITY_CAP
from tile_mlir.dtypes import DTYPES, opmath, promote_types
from tile_mlir.op_table import fusion
from tile_mlir.ops import args, coalesce, kernels, plan, promotion, strategy
from tile_mlir.ops.args import Array, Scalar, torch_name
from tile_mlir.ops.plan import Builder, Num, Value
from tile_mlir.ops.programs.elementwise import (
    INDEX,
    ArraySpec,
    ElementwiseProgram,
    Signature,
    Strategy,
)


@dataclass(frozen=True)
class Index:
    """An indexed row's last input, the index base: made in the kernel, never passed."""

    name: str = "base"


@dataclass(frozen=True)
class In:
    """One input of a row, as the op's semantics give it."""

    operand: Array | Scalar | Index
    promotes: bool = True  # takes part in the result's type promotion
    # A Python number here stands for a tensor operand, which torch casts to the common
    # dtype before the kernel; False for torch's Scalar parameters (lerp's weight).
    cast: bool = True
    keep: str | None = None  # a scalar passed in this dtype, whatever the compute type
    # a scalar whose value is a constant of the plan (ops.fuse's numbers, converted and
    # checked when traced): written into the kernel's parameters once, not per call
    fixed: bool = False


# ---------------------------------------------------------------- promotion


def _typed(operand: Array | Scalar | Index) -> promotion.Typed:
    if isinstance(operand, Index):
        return promotion.Typed("i64", promotion.SCALAR)
    if isinstance(operand, Scalar):
        return promotion.Typed(operand.dtype, operand.priority)
    return promotion.Typed(operand.dtype, promotion.TENSOR if operand.shape
                           else promotion.ZERO_DIM)


def promoted(inputs: Sequence[In]) -> str:
    """torch.result_type of the promoting inputs."""
    return promotion.result_type([_typed(i.operand) for i in inputs if i.promotes])


def _culprit(inputs: Sequence[In], common: str) -> str:
    """Which argument brought the promoted dtype in (for an error message)."""
    for given in inputs:
        operand = given.operand
        if given.promotes and not isinstance(operand, Index) and operand.dtype == common:
            return f"argument '{operand.name}' is {torch_name(common)}"
    return ""


def result_dtype(row: op_table.EwOp, common: str, what: str, culprit: str = "") -> str:
    """The op's result dtype from the promoted one; TypeError if the op lacks it."""
    if row.out == "float" and not DTYPES[common].is_float:
        common = "f32"
    if common not in row.dtypes:
        because = f"{culprit}; " if culprit else ""
        raise TypeError(f"{what} is not defined on {torch_name(common)} ({because}"
                        f"dtypes: {', '.join(torch_name(d) for d in row.dtypes)})")
    return "bool" if row.out == "bool" else common


def result_type(op: str, inputs: Sequence[In], what: str = "") -> str:
    """The result dtype of the row on these inputs (any subset of them)."""
    common = promoted(inputs)
    return result_dtype(op_table.ELEMENTWISE[op], common, what or op, _culprit(inputs, common))


CASTS_NUMBERS = frozenset(("eq", "ne", "gt", "lt", "ge", "le", "remainder", "pow_scalar"))
"""Ops whose torch CUDA kernels see a Python number cast to the f16/bf16 tensor's dtype
first: measured against torch on an H200, `x_bf16 == s`, `remainder(x_f16, s)` and
`x_f16 ** s` see bf16(s) and f16(s), while add, sub, mul and floor_divide take the
number as it is (in float, torch's opmath type)."""


def round_number(value: Any, dtype: str) -> float:
    """A number rounded to a float dtype first (CASTS_NUMBERS), as a Python float."""
    return float(np.asarray(float(value), dtype=DTYPES[dtype].np_dtype()))


def _overflow(name: str, value: Any, dtype: str) -> None:
    raise OverflowError(f"argument '{name}': {value} does not fit {torch_name(dtype)}")


plan.HELPERS.update({"_ROUND": round_number, "_OVERFLOW": _overflow})


def scalar_value(b: Builder, scalar: Scalar, dtype: str, round_to: str | None = None) -> Value:
    """A scalar as the kernel takes it, in `dtype` (the op's compute type, or the row's
    own), rounded first to `round_to` when given; integers are range-checked per call."""
    kind = DTYPES[dtype].kind
    expr = scalar.expr
    if kind == "float":
        return Num(f"_ROUND({expr}, {round_to!r})" if round_to is not None else expr)
    if kind == "bool":
        return Num(expr)
    if isinstance(scalar.value, float):
        raise TypeError(f"argument '{scalar.name}': a float ({scalar.value}) for an integer op")
    bits = DTYPES[dtype].bits
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    b.check(f"not {low} <= {expr} <= {high}", f"_OVERFLOW({scalar.name!r}, {expr}, {dtype!r})")
    if not low <= int(scalar.value) <= high:
        _overflow(scalar.name, scalar.value, dtype)
    return Num(expr)


# ------------------------------------------------------------------ calls


@dataclass(frozen=True)
class Call:
    """One row applied to inputs, resolved: what runs, on what, into what."""

    row: op_table.EwOp
    inputs: tuple[In, ...]
    result: str  # the result dtype
    compute: str  # the dtype scalars are passed in
    shape: tuple[int, ...]
    round_to: tuple[str | None, ...]  # per input (see CASTS_NUMBERS)
    what: str
    expr: tuple[str, ...] = ()  # a fused expression's steps (fuse.py), in place of the row
    common: str = ""  # torch's common dtype of the promoting inputs

    @property
    def op(self) -> str:
        """The tile op's `op`: the row's name, or "fused"."""
        return fusion.FUSED if self.expr else self.row.name

    @property
    def family(self) -> str:
        """Whose tuned strategies the call runs with (fused calls have none of their own
        yet: the defaults)."""
        return fusion.FUSED if self.expr else self.row.family

    @property
    def tuned_dtype(self) -> str:
        """The dtype of its key among the tuned strategies: the inputs' common dtype, as
        the autotuner times an op (lt of fp8 tensors: fp8, not its bool result), else the
        result's (the generators have no inputs)."""
        return self.common or self.result

    def scalar_dtype(self, n: int) -> str:
        """The type the scalar input n is passed in: the compute type, or its own where
        the row keeps it (the generators' i64 and f64 numbers)."""
        given = self.inputs[n]
        if given.keep is not None:
            return given.keep
        operand = given.operand
        assert isinstance(operand, Scalar)
        return operand.dtype if n in self.row.keep else self.compute


def resolve(op: str, inputs: Sequence[In], result: str | None = None, what: str = "",
            shape: tuple[int, ...] | None = None) -> Call:
    """Promote and broadcast: everything short of the output. `shape`: the result's, for
    a row without array inputs (the generators)."""
    row = op_table.ELEMENTWISE[op]
    what = what or op
    if len(inputs) != row.arity:
        raise TypeError(f"{what} takes {row.arity} inputs, got {len(inputs)}")
    arrays = [i.operand for i in inputs if isinstance(i.operand, Array)]
    if not arrays and shape is None:
        raise TypeError(f"{what} needs at least one array argument")
    common = promoted(inputs) if any(i.promotes for i in inputs) else (result or "f32")
    dtype = result or result_dtype(row, common, what, _culprit(inputs, common))
    if dtype not in (*row.dtypes, "bool" if row.out == "bool" else ""):
        raise TypeError(f"{what} is not defined on {torch_name(dtype)}")
    if shape is None:
        shape = coalesce.broadcast_shapes([a.shape for a in arrays],
                                          [f"argument '{a.name}'" for a in arrays])
    compute = opmath(common if row.out == "bool" else dtype)
    casts = common in ("f16", "bf16") and row.name in CASTS_NUMBERS
    round_to = tuple(common if casts and i.promotes and i.cast and
                     isinstance(i.operand, Scalar) else None for i in inputs)
    return Call(row, tuple(inputs), dtype, compute, shape, round_to, what, common=common)


def castable(src: str, dst: str) -> bool:
    """torch.can_cast for out=: never float into integer or bool, nor integer into bool."""
    order = ("bool", "int", "float")
    return order.index(DTYPES[src].kind) <= order.index(DTYPES[dst].kind)


def check_out(out: Array, shape: tuple[int, ...], result: str, arrays: Sequence[Array],
              what: str) -> None:
    """out= has the result's shape, is on the inputs' device, takes the result's dtype
    (torch.can_cast) and has a location of its own for every element; errors name
    `out`."""
    if out.shape != tuple(shape):
        raise ValueError(f"{what}: argument '{out.name}' has shape {out.shape}, the result "
                         f"has {tuple(shape)}")
    args.check_distinct(out, what)
    if arrays and ((out.device is None) != (arrays[0].device is None) or
                   out.device != arrays[0].device):
        where = "the host" if out.device is None else f"cuda:{out.device}"
        raise ValueError(f"{what}: argument '{out.name}' is a {out.kind} array on {where}, "
                         f"argument '{arrays[0].name}' is not")
    if not castable(result, out.dtype):
        raise TypeError(f"{what}: argument '{out.name}' is {torch_name(out.dtype)}, which the "
                        f"{torch_name(result)} result cannot be cast to")


class Recording(Builder):
    """A builder that records the elementwise calls an op's semantics make instead of
    planning them: ops.fuse's tracer (fuse.py) runs the library's semantics on one."""

    def record(self, call: Call, out: Array | None) -> Array:
        """The array standing for the call's result (out= is the recorder's to refuse)."""
        raise NotImplementedError


def apply(b: Builder, op: str, inputs: Sequence[In], out: Array | None = None, *,
          result: str | None = None, what: str = "", shape: tuple[int, ...] | None = None
          ) -> Array:
    """Plan row `op` on the inputs into `out` (checked: shape, device, castable dtype,
    overlap: the very same view as an input is in place), or into a new output; returns
    the array written. A Recording builder records the call instead."""
    call = resolve(op, inputs, result, what, shape)
    if isinstance(b, Recording):
        return b.record(call, out)
    return run_call(b, call, out)


def run_call(b: Builder, call: Call, out: Array | None = None) -> Array:
    """Plan a resolved call (a row's, or a fused expression's) into `out` or a new
    output, as `apply` does; returns the array written."""
    arrays = [i.operand for i in call.inputs if isinstance(i.operand, Array)]
    if arrays:
        b.place(arrays)
        call = _narrow_zero_dims(b, call)
    if out is None:
        target = b.output(call.shape, call.result)
        _launch(b, call, target, inplace=False)
        return target
    check_out(out, call.shape, call.result, arrays, call.what)
    if not arrays:
        b.place([out])
    made = out.root in {f"_p_{alloc.var}" for alloc in b.allocs}  # a temporary (fuse.py)
    same = [] if made else args.check_overlap(out, arrays, call.what)
    for given in arrays:
        if not any(given is s for s in same):
            b.disjoint(out, given, call.what)
    if out.dtype != call.result:  # computed in the result's type, then cast into out
        temporary = b.temporary(call.shape, call.result)
        _launch(b, call, temporary, inplace=False)
        cast = resolve("cast", [In(temporary)], out.dtype, call.what)
        _launch(b, cast, out, inplace=False)
        return out
    _launch(b, call, out, inplace=bool(same))
    return out


def _narrow_zero_dims(b: Builder, call: Call) -> Call:
    """torch casts every tensor operand to the common dtype before the op; a 0-d array
    wider than it (f32 beside an f16 tensor, i64 beside i32, f16 beside bf16: a 0-d
    tensor does not raise the tensors' dtype) would make the kernel's promotion, which
    knows no priorities, wider than torch's. Such an operand is cast into a one-element
    temporary of the common dtype first (the kernel rounds the others: lowering's
    compute.py). A fused call (no common dtype of its own: each step has its own) is
    left as traced."""
    if not call.common:
        return call
    inputs = list(call.inputs)
    for n, given in enumerate(inputs):
        operand = given.operand
        if given.promotes and isinstance(operand, Array) and \
                promote_types(operand.dtype, call.common) != call.common:
            narrowed = b.temporary(operand.shape, call.common)
            cast = resolve("cast", [In(operand)], call.common, call.what)
            _launch(b, cast, narrowed, inplace=False)
            inputs[n] = replace(given, operand=narrowed)
    return replace(call, inputs=tuple(inputs)) if inputs != list(call.inputs) else call


# ------------------------------------------------------------------ launches


def _launch(b: Builder, call: Call, out: Array, *, inplace: bool) -> None:
    """The launch of a resolved call into `out` (nothing for an empty result)."""
    if not out.numel:
        return
    arrays = [out, *(i.operand for i in call.inputs if isinstance(i.operand, Array))]
    strides = [out.strides] + [coalesce.expand_strides(a.shape, a.strides, call.shape)
                               for a in arrays[1:]]
    view = coalesce.coalesce(call.shape, strides)
    choice = strategy.choose(call.family, call.tuned_dtype, view.numel,
                             kernels.tuning_target(b.device), call.op, rows=view.rank > 1)
    sig = signature(call, view, arrays, choice=choice, inplace=inplace)
    program = ElementwiseProgram(sig)
    b.launch(program, (coalesce.grid(view, sig.mode, sig.piece()), 1, 1),
             kernel_arguments(b, call, sig, view, arrays))


def explain(op: str, shape: Sequence[int], dtype: str, target: str | None) -> str:
    """Which strategy the op runs over contiguous inputs of `shape` and `dtype` with on
    `target` (strategy.target's `sm_90-nvidia-h200`, or a chip for its base choices; None:
    no GPU), and where it comes from (strategy.find). A gated op's shape is its input's
    (its result is half the last dim)."""
    row = op_table.ELEMENTWISE.get(op)
    if row is None or not row.public:
        raise ValueError(f"explain: {op!r} is not one of the library's elementwise ops "
                         "(python -m tile_mlir.ops --list)")
    if dtype not in row.dtypes:
        raise ValueError(f"explain: {op} takes {', '.join(row.dtypes)}, not {dtype!r}")
    if any(d < 0 for d in shape):
        raise ValueError(f"explain: shape {list(shape)} has a negative size")
    numel = math.prod(shape)
    if row.family == "fused_gated":
        if not shape or shape[-1] % 2:
            raise ValueError(f"explain: {op} halves its input's last dim, which must be "
                             f"even; got shape {list(shape)}")
        numel //= 2
    what = f"{op} {dtype} {'x'.join(map(str, shape)) or 'scalar'}"
    if not numel:
        return f"{what}: an empty result: nothing is launched"
    found = strategy.find(row.family, dtype, numel, target, op)
    on = f"on {target}" if target is not None else "without a GPU (no tuned choices)"
    choice = found.strategy
    return (f"{what}: {strategy.name(choice)} {on}: {choice.threads} threads a CTA, "
            f"{choice.rounds} round(s) of {choice.vector_bytes}-byte accesses a thread"
            f"{', all loads issued first' if choice.stage > 1 else ''}; "
            f"{numel} elements, size class {strategy.size_class(numel)}; {found.why()}")


def signature(call: Call, view: coalesce.Coalesced, arrays: Sequence[Array], *,
              choice: Strategy, inplace: bool) -> Signature:
    """What the kernel for this call is specialized on."""
    specs = [ArraySpec(a.dtype, coalesce.stride_classes(strides), bool(a.offset))
             for a, strides in zip(arrays, view.strides, strict=True)]
    specs_in = iter(specs[1:])
    ins: list[ArraySpec | str] = [
        next(specs_in) if isinstance(i.operand, Array) else INDEX
        if isinstance(i.operand, Index) else call.scalar_dtype(n)
        for n, i in enumerate(call.inputs)]
    if call.expr:
        ins[2:] = one_type(ins[2:])
    draft = Signature(call.op, specs[0], tuple(ins), view.rank, "flat", choice,
                      inplace=inplace, expr=call.expr)
    mode, width = coalesce.pieces(view, draft.chunk())
    bits = 32 if coalesce.fits_32_bits(view, [a.offset for a in arrays], draft.chunk()) \
        else 64
    sig = Signature(call.op, specs[0], tuple(ins), view.rank, mode, choice, width, bits,
                    inplace, call.expr)
    # the extent a piece runs along (the run, a row, a block's rows) cut into whole pieces
    extent = view.shape[-2] if mode == "blocks" else view.shape[-1]
    return replace(sig, whole=extent % sig.piece()[0] == 0)


def one_type(slot: Sequence[ArraySpec | str]) -> list[ArraySpec | str]:
    """The inputs of the dialect's variadic slot c, which takes operands of one type (a
    fused op's third input on: fuse.py puts there arrays of one dtype, or numbers of
    one): a dimension whose static stride differs between the arrays becomes a dynamic
    one for all of them (0 is a multiple of anything, 1 of 1), and an element offset
    for one is an offset for all. Arrays that agree are left as they are."""
    specs = [s for s in slot if isinstance(s, ArraySpec)]
    if len(specs) < 2 or len(specs) != len(slot) or len({s.dtype for s in specs}) > 1:
        return list(slot)
    rank = len(specs[0].strides)
    differ = [len({s.static_strides()[d] for s in specs}) > 1 for d in range(rank)]
    offset = any(s.offset for s in specs)

    def dynamic(c: str) -> str:
        return c if c.startswith("?") else f"?{DIVISIBILITY_CAP if c == '0' else 1}"

    return [ArraySpec(s.dtype, tuple(dynamic(c) if moved else c
                                     for c, moved in zip(s.strides, differ, strict=True)),
                      offset) for s in specs]


def kernel_arguments(b: Builder, call: Call, sig: Signature, view: coalesce.Coalesced,
                     arrays: Sequence[Array]) -> list[Value]:
    """The kernel's arguments in the program's order: the sizes, then per operand its
    pointer (an aligned base), its dynamic strides and its element offset, or the
    scalar."""
    values: list[Value] = list(view.shape)
    views = iter(zip(arrays, view.strides, [sig.out, *(
        s for s in sig.inputs if isinstance(s, ArraySpec))], strict=True))

    def array_values() -> None:
        array, strides, spec = next(views)
        values.append(b.pointer(array))
        values.extend(s for s, c in zip(strides, spec.strides, strict=True) if c[0] == "?")
        if spec.offset:
            values.append(array.offset)

    array_values()
    for n, given in enumerate(call.inputs):
        if isinstance(given.operand, Array):
            array_values()
        elif isinstance(given.operand, Scalar):
            values.append(given.operand.value if given.fixed else
                          scalar_value(b, given.operand, call.scalar_dtype(n),
                                       call.round_to[n]))
    return values
