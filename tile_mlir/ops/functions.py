"""The operator library's functions, with torch's signatures and semantics.

Each takes torch tensors (CUDA), CuPy arrays, NumPy arrays (computed on the GPU,
copied in and out) or any `__cuda_array_interface__` object, and Python numbers where
torch takes scalars; the result is an array of the first array argument's kind, or
`out`. Ops of one shape of signature are made by one factory, so the list below reads
as the registry does; the ops with their own arguments (alpha, rounding_mode,
min/max, nan/posinf/neginf...) are written out. What each function writes here is its
semantics only (which row, on which operands, promotion's exceptions); entry.py makes
the public function and plan.py the launch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from tile_mlir import op_table
from tile_mlir.dtypes import DTYPES, lowest, max_value
from tile_mlir.ops import entry, plan, promotion
from tile_mlir.ops.args import Array, Scalar
from tile_mlir.ops.elementwise import In, apply, result_type
from tile_mlir.ops.plan import Builder

__all__ = [
    "abs",
    "add",
    "bitwise_and",
    "bitwise_not",
    "bitwise_or",
    "bitwise_xor",
    "ceil",
    "clamp",
    "cos",
    "div",
    "eq",
    "erf",
    "exp",
    "expm1",
    "floor",
    "floor_divide",
    "ge",
    "gt",
    "isfinite",
    "isinf",
    "isnan",
    "le",
    "lerp",
    "log",
    "log1p",
    "logical_and",
    "logical_not",
    "logical_or",
    "lt",
    "masked_fill",
    "maximum",
    "minimum",
    "mul",
    "nan_to_num",
    "ne",
    "neg",
    "pow",
    "reciprocal",
    "remainder",
    "round",
    "rsqrt",
    "sign",
    "sin",
    "sqrt",
    "sub",
    "trunc",
    "where",
]
"""The 47 ops of seed 004's part 1, in the registry's order."""

Operand = Array | Scalar
UNARY_ROLES = {"input": "operand", "out": "out"}
BINARY_ROLES = {"input": "operand", "other": "operand", "out": "out"}


def run(b: Builder, op: str, inputs: list[In], out: Array | None, **kwargs: Any) -> str:
    """Plan the row on the inputs; the launcher's expression for the array written."""
    return b.object_of(apply(b, op, inputs, out, **kwargs))


def float_dtype(operand: Operand) -> str | None:
    """The dtype of a float array, None for anything else."""
    return operand.dtype if isinstance(operand, Array) and DTYPES[operand.dtype].is_float \
        else None


def constant(b: Builder, name: str, value: bool | int | float) -> Scalar:
    """A number the plan fixes (a default bound, a derived constant)."""
    return Scalar(name, value, promotion.scalar_dtype(value), promotion.SCALAR,
                  b.name(value, "K"))


def _summary(name: str) -> str:
    row = op_table.ELEMENTWISE[name]
    dtypes = ", ".join(DTYPES[d].numpy for d in row.dtypes)
    return f"Elementwise {name} ({row.family}; {dtypes})."


def _unary(name: str, summary: str = "") -> Callable[..., Any]:
    def semantics(b: Builder, input: Operand, *, out: Array | None = None) -> str:  # noqa: A002
        return run(b, name, [In(input)], out)

    semantics.__doc__ = f"{name}(input, *, out=None) -> Tensor\n\n" \
                        f"{summary or _summary(name)} As torch.{name}."
    return entry.op(UNARY_ROLES, name=name)(semantics)


def _binary(name: str) -> Callable[..., Any]:
    def semantics(b: Builder, input: Operand, other: Operand, *,  # noqa: A002
                  out: Array | None = None) -> str:
        return run(b, name, [In(input), In(other)], out)

    semantics.__doc__ = f"{name}(input, other, *, out=None) -> Tensor\n\n" \
                        f"{_summary(name)} Either may be a number. As torch.{name}."
    return entry.op(BINARY_ROLES, name=name)(semantics)


# ---------------------------------------------------------------- unary_math
exp = _unary("exp")
log = _unary("log")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
abs = _unary("abs")  # noqa: A001 - torch's name
neg = _unary("neg")
reciprocal = _unary("reciprocal")
sign = _unary("sign")
sin = _unary("sin")
cos = _unary("cos")
floor = _unary("floor")
ceil = _unary("ceil")
trunc = _unary("trunc")
erf = _unary("erf")
log1p = _unary("log1p")
expm1 = _unary("expm1")


@entry.op({"input": "operand", "out": "out"})
def round(b: Builder, input: Operand, *, decimals: int = 0,  # noqa: A001, A002
          out: Array | None = None) -> str:
    """round(input, *, decimals=0, out=None) -> Tensor

    Round to the nearest integer, half to even. As torch.round (decimals=0 only)."""
    if decimals:
        raise NotImplementedError("round: decimals other than 0 are not supported")
    return run(b, "round", [In(input)], out)


# -------------------------------------------------------------- binary_arith
mul = _binary("mul")
remainder = _binary("remainder")
maximum = _binary("maximum")
minimum = _binary("minimum")

ALPHA_ROLES = {**BINARY_ROLES, "alpha": "number"}


@entry.op(ALPHA_ROLES, {"alpha": "alpha == 1"})
def add(b: Builder, input: Operand, other: Operand, *, alpha: Scalar | float = 1,  # noqa: A002
        out: Array | None = None) -> str:
    """add(input, other, *, alpha=1, out=None) -> Tensor

    input + alpha * other (one fma for floats when alpha != 1). As torch.add."""
    assert isinstance(alpha, Scalar)
    if alpha.value == 1:
        return run(b, "add", [In(input), In(other)], out)
    return run(b, "add_alpha", [In(input), In(other), In(alpha, promotes=False)], out,
               what="add")


@entry.op(ALPHA_ROLES, {"alpha": "alpha == 1"})
def sub(b: Builder, input: Operand, other: Operand, *, alpha: Scalar | float = 1,  # noqa: A002
        out: Array | None = None) -> str:
    """sub(input, other, *, alpha=1, out=None) -> Tensor

    input - alpha * other. As torch.sub, which refuses a bool operand (an array, a
    0-d array or a Python bool) whatever the other's dtype."""
    assert isinstance(alpha, Scalar)
    for operand in (input, other):
        if operand.dtype == "bool":
            raise TypeError(f"sub: argument '{operand.name}' is a bool: torch.sub does not "
                            f"subtract bools (for a mask, use logical_not or bitwise_xor)")
    if alpha.value == 1:
        return run(b, "sub", [In(input), In(other)], out)
    negated = replace(alpha, value=-alpha.value, expr=f"-({alpha.expr})")
    return run(b, "add_alpha", [In(input), In(other), In(negated, promotes=False)], out,
               what="sub")


plan.HELPERS.update({"_COPYSIGN": math.copysign, "_INF": math.inf})


@entry.op(BINARY_ROLES)
def div(b: Builder, input: Operand, other: Operand, *,  # noqa: A002
        rounding_mode: str | None = None, out: Array | None = None) -> str:
    """div(input, other, *, rounding_mode=None, out=None) -> Tensor

    True division (integers give float32), or rounded toward zero ("trunc") or down
    ("floor"). As torch.div: an array divided by a Python number is multiplied by the
    number's reciprocal, computed in double and rounded to the compute type."""
    if rounding_mode == "floor":
        return _floor_divide(b, input, other, out, "div")
    if rounding_mode == "trunc":
        return _div_trunc(b, input, other, out)
    if rounding_mode is not None:
        raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', "
                         f"got {rounding_mode!r}")
    if isinstance(other, Scalar) and isinstance(input, Array):
        result = float_dtype(input) or result_type("div", [In(input), In(other)])
        v = other.expr
        value = 1.0 / float(other.value) if other.value else math.copysign(math.inf,
                                                                          other.value)
        inverse = Scalar(other.name, value, "f32", promotion.SCALAR,
                         f"(1.0 / {v} if {v} else _COPYSIGN(_INF, {v}))")
        return run(b, "mul", [In(input), In(inverse, promotes=False)], out, result=result,
                   what="div")
    return run(b, "div", [In(input), In(other)], out)


@entry.op(BINARY_ROLES)
def floor_divide(b: Builder, input: Operand, other: Operand, *,  # noqa: A002
                 out: Array | None = None) -> str:
    """floor_divide(input, other, *, out=None) -> Tensor

    input / other rounded down. As torch.floor_divide: a float array divided by a
    Python number is multiplied by the number's reciprocal (in float32)."""
    return _floor_divide(b, input, other, out, "floor_divide")


def _f32(value: Any) -> float:
    with np.errstate(all="ignore"):
        return float(np.float32(value))


def _f32_reciprocal(value: Any) -> float:
    with np.errstate(all="ignore"):  # 1/0 is the infinity torch multiplies by
        return float(np.float32(1.0) / np.float32(value))


plan.HELPERS.update({"_F32": _f32, "_F32_RECIPROCAL": _f32_reciprocal})


def _div_trunc(b: Builder, input: Operand, other: Operand,  # noqa: A002
               out: Array | None) -> str:
    """A float array divided by a Python number is multiplied by its reciprocal in
    float32 and truncated, as torch's kernel for a CPU scalar divisor does."""
    if isinstance(other, Scalar) and isinstance(input, Array):
        result = float_dtype(input) or result_type("div", [In(input), In(other)], "div")
        if DTYPES[result].is_float:
            inverse = Scalar("inverse", _f32_reciprocal(other.value), "f32",
                             promotion.SCALAR, f"_F32_RECIPROCAL({other.expr})")
            return run(b, "div_trunc_scalar", [In(input), In(inverse, promotes=False)],
                       out, result=result, what="div")
    return run(b, "div_trunc", [In(input), In(other)], out, what="div")


def _floor_divide(b: Builder, input: Operand, other: Operand,  # noqa: A002
                  out: Array | None, what: str) -> str:
    if isinstance(other, Scalar) and isinstance(input, Array):
        result = float_dtype(input) or result_type("floor_divide", [In(input), In(other)],
                                                   what)
        if DTYPES[result].is_float:
            v = other.expr
            divisor = Scalar(other.name, _f32(other.value), "f32", promotion.SCALAR,
                             f"_F32({v})")
            inverse = Scalar("inverse", _f32_reciprocal(other.value), "f32",
                             promotion.SCALAR, f"_F32_RECIPROCAL({v})")
            return run(b, "floor_divide_scalar", [In(input), In(divisor, promotes=False),
                                                  In(inverse, promotes=False)],
                       out, result=result, what=what)
    return run(b, "floor_divide", [In(input), In(other)], out, what=what)


_SPECIAL_POWERS = {0.5: "sqrt", -0.5: "rsqrt", -1.0: "reciprocal"}
entry.NAMES["_POW_SPECIAL"] = frozenset(_SPECIAL_POWERS)


def _negative_power() -> None:
    raise ValueError("pow: integers to negative integer powers are not allowed")


plan.HELPERS["_NEGATIVE_POWER"] = _negative_power


@entry.op({"input": "operand", "exponent": "operand", "out": "out"},
          {"exponent": "exponent in _POW_SPECIAL and exponent"})  # which one: sqrt, rsqrt...
def pow(b: Builder, input: Operand, exponent: Operand, *,  # noqa: A001, A002
        out: Array | None = None) -> str:
    """pow(input, exponent, *, out=None) -> Tensor

    input ** exponent; either may be a number. As torch.pow, which computes the
    exponents 0.5, -0.5, -1, 2, 3 and -2 of an array specially."""
    if isinstance(exponent, Array) or isinstance(input, Scalar):
        return run(b, "pow", [In(input), In(exponent)], out)
    if exponent.expr != "exponent":  # a 0-d tensor: the key does not hold its value
        b.cacheable = False
    result = float_dtype(input) or result_type("pow", [In(input), In(exponent)])
    if not DTYPES[result].is_float:
        if exponent.value < 0:
            _negative_power()
        b.check(f"{exponent.expr} < 0", "_NEGATIVE_POWER()")
        return run(b, "pow_scalar", [In(input), In(exponent)], out, what="pow")
    special = _SPECIAL_POWERS.get(float(exponent.value))
    if special is not None:
        return run(b, special, [In(input)], out, result=result, what="pow")
    return run(b, "pow_scalar", [In(input), In(exponent)], out, what="pow")


@entry.op({"input": "operand", "end": "operand", "weight": "operand", "out": "out"})
def lerp(b: Builder, input: Operand, end: Operand, weight: Operand, *,  # noqa: A002
         out: Array | None = None) -> str:
    """lerp(input, end, weight, *, out=None) -> Tensor

    input + weight * (end - input), torch's two-sided formula. As torch.lerp."""
    return run(b, "lerp", [In(input), In(end), In(weight, cast=False)], out)


# ---------------------------------------------------------------- comparison
eq = _binary("eq")
ne = _binary("ne")
gt = _binary("gt")
lt = _binary("lt")
ge = _binary("ge")
le = _binary("le")

# ------------------------------------------------------------------- bitwise
bitwise_and = _binary("bitwise_and")
bitwise_or = _binary("bitwise_or")
bitwise_xor = _binary("bitwise_xor")
bitwise_not = _unary("bitwise_not")

# ------------------------------------------------------------------- logical
logical_not = _unary("logical_not")
logical_and = _binary("logical_and")
logical_or = _binary("logical_or")

# ------------------------------------------------------------------- special
isnan = _unary("isnan", "Whether each element is NaN (bool).")
isinf = _unary("isinf", "Whether each element is +-inf (bool).")
isfinite = _unary("isfinite", "Whether each element is finite (bool).")


def bool_array(operand: Operand, op: str) -> Array:
    """An operand that must be a bool array (where's condition, a mask)."""
    if not isinstance(operand, Array) or operand.dtype != "bool":
        raise TypeError(f"{op}: argument '{operand.name}' must be a bool array")
    return operand


@entry.op({"condition": "array", "input": "operand", "other": "operand", "out": "out"})
def where(b: Builder, condition: Operand, input: Operand, other: Operand, *,  # noqa: A002
          out: Array | None = None) -> str:
    """where(condition, input, other, *, out=None) -> Tensor

    input where condition holds, else other; either may be a number. As torch.where."""
    bool_array(condition, "where")
    return run(b, "where", [In(condition, promotes=False), In(input), In(other)], out)


@entry.op({"input": "operand", "min": "optional", "max": "optional", "out": "out"})
def clamp(b: Builder, input: Operand, min: Operand | None = None,  # noqa: A002
          max: Operand | None = None, *, out: Array | None = None) -> str:  # noqa: A002
    """clamp(input, min=None, max=None, *, out=None) -> Tensor

    min(max(input, min), max), NaN propagating; numbers or arrays. As torch.clamp."""
    if min is None and max is None:
        raise ValueError("clamp: at least one of 'min' or 'max' must not be None")
    result = result_type("clamp", [In(input)] + [In(v) for v in (min, max) if v is not None])
    low = min if min is not None else constant(b, "min", _extreme(result, low=True))
    high = max if max is not None else constant(b, "max", _extreme(result, low=False))
    inputs = [In(input), In(low, promotes=min is not None),
              In(high, promotes=max is not None)]
    return run(b, "clamp", inputs, out, result=result)


def _extreme(dtype: str, low: bool) -> float | int:
    """The bound that clamps nothing: -inf/inf, or an integer type's limits."""
    if DTYPES[dtype].is_float:
        return -math.inf if low else math.inf
    return lowest(dtype) if low else max_value(dtype)


@entry.op({"input": "operand", "mask": "array", "value": "operand", "out": "out"})
def masked_fill(b: Builder, input: Operand, mask: Operand, value: Operand, *,  # noqa: A002
                out: Array | None = None) -> str:
    """masked_fill(input, mask, value, *, out=None) -> Tensor

    input with value where mask holds (value cast to input's dtype). As
    torch.masked_fill (value: a number or a 0-d tensor)."""
    if isinstance(value, Array):
        if value.shape:
            raise TypeError("masked_fill: argument 'value' must be a number or a 0-d tensor")
        value = Scalar("value", 0, value.dtype, promotion.ZERO_DIM, "value.item()")
        b.cacheable = False  # its value is read on the host per call: no plan for it
    bool_array(mask, "masked_fill")
    dtype = float_dtype(input) or result_type("masked_fill", [In(input)])
    kind = DTYPES[dtype].kind
    cast = {"bool": "bool", "int": "int", "float": "float"}[kind]
    converted = Scalar("value", {"bool": bool, "int": int, "float": float}[kind](value.value),
                       dtype if kind != "float" else "f32", promotion.SCALAR,
                       f"{cast}({value.expr})")
    return run(b, "masked_fill", [In(input), In(mask, promotes=False),
                                  In(converted, promotes=False)], out, result=dtype)


def _replacement(b: Builder, name: str, given: Operand | None, default: float | int) -> Scalar:
    if given is None:
        return constant(b, name, default)
    if not isinstance(given, Scalar):
        raise TypeError(f"nan_to_num: argument '{name}' must be a number or None")
    return given


@entry.op({"input": "operand", "nan": "optional", "posinf": "optional", "neginf": "optional",
           "out": "out"})
def nan_to_num(b: Builder, input: Operand, nan: Operand | None = 0.0,  # type: ignore[assignment] # noqa: A002
               posinf: Operand | None = None, neginf: Operand | None = None, *,
               out: Array | None = None) -> str:
    """nan_to_num(input, nan=0.0, posinf=None, neginf=None, *, out=None) -> Tensor

    NaN, +inf and -inf replaced; the infinities by the dtype's extremes unless given.
    As torch.nan_to_num."""
    dtype = result_type("nan_to_num", [In(input)])
    if not DTYPES[dtype].is_float:  # nothing to replace: the values are unused
        replacements = [constant(b, n, 0) for n in ("nan", "posinf", "neginf")]
    else:
        replacements = [_replacement(b, "nan", nan, 0.0),
                        _replacement(b, "posinf", posinf, max_value(dtype)),
                        _replacement(b, "neginf", neginf, lowest(dtype))]
    return run(b, "nan_to_num", [In(input), *(In(r, promotes=False) for r in replacements)],
               out)
