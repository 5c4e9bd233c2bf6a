"""The operator library's functions, with torch's signatures and semantics.

Each takes torch tensors (CUDA), CuPy arrays, NumPy arrays (computed on the
GPU, copied in and out) or any `__cuda_array_interface__` object, and Python
numbers where torch takes scalars; the result is an array of the first array
argument's kind, or `out`. Ops of one shape of signature are made by one
factory, so the list below reads as the registry does; the ops with their own
arguments (alpha, rounding_mode, min/max, nan/posinf/neginf...) are written out.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tile_mlir import op_table
from tile_mlir.dtypes import DTYPES, LIBRARY_FLOATS, lowest, max_value
from tile_mlir.ops import dispatch, fast
from tile_mlir.ops.dispatch import Arg

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

Unary = Callable[..., Any]
Binary = Callable[..., Any]


def _run(op: str, args: list[Arg], out: Any = None, result: str | None = None, *,
         what: str = "", check: Callable[[dispatch.Call], None] | None = None) -> Any:
    """The op on the arguments: through the fast path when an earlier call looked the same,
    else resolved, checked (`check`, an op's own rule) and launched, and recorded."""
    done = fast.call(op, args, out, result)
    if done is not None:
        return done
    call = dispatch.resolve(op, args, result, what or op)
    if check is not None:
        check(call)
    return dispatch.run(call, out, fast.recorder(op, args, out, result, call))


_NUMBERS = (bool, int, float)


def _float_tensor_dtype(value: Any) -> str | None:
    """The dtype of a torch or CuPy float array, cheaply; None for anything else."""
    dtype = getattr(value, "dtype", None)
    if dtype is None or not hasattr(value, "shape"):
        return None
    name = str(dtype).removeprefix("torch.")
    return next((n for n in LIBRARY_FLOATS if DTYPES[n].numpy == name), None)


def _named(fn: Callable[..., Any], name: str, summary: str) -> Callable[..., Any]:
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{summary} As torch.{name}."
    return fn


def _summary(name: str) -> str:
    row = op_table.ELEMENTWISE[name]
    dtypes = ", ".join(DTYPES[d].numpy for d in row.dtypes)
    return f"Elementwise {name} ({row.family}; {dtypes})."


def _unary(name: str) -> Unary:
    def op(input: Any, *, out: Any = None) -> Any:  # noqa: A002 - torch's name
        return _run(name, [Arg("input", input)], out)

    return _named(op, name, _summary(name))


def _binary(name: str) -> Binary:
    def op(input: Any, other: Any, *, out: Any = None) -> Any:  # noqa: A002
        return _run(name, [Arg("input", input), Arg("other", other)], out)

    return _named(op, name, _summary(name))


def _predicate(name: str) -> Unary:
    def op(input: Any) -> Any:  # noqa: A002
        return _run(name, [Arg("input", input)])

    return _named(op, name, _summary(name))


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


def round(input: Any, *, decimals: int = 0, out: Any = None) -> Any:  # noqa: A001, A002
    """Round to the nearest integer, half to even. As torch.round (decimals=0 only)."""
    if decimals:
        raise NotImplementedError("round: decimals other than 0 are not supported")
    return _run("round", [Arg("input", input)], out)


# -------------------------------------------------------------- binary_arith
mul = _binary("mul")
remainder = _binary("remainder")
maximum = _binary("maximum")
minimum = _binary("minimum")


def add(input: Any, other: Any, *, alpha: float = 1, out: Any = None) -> Any:  # noqa: A002
    """input + alpha * other (one fma for floats when alpha != 1). As torch.add."""
    if alpha == 1:
        return _run("add", [Arg("input", input), Arg("other", other)], out)
    return _run("add_alpha", [Arg("input", input), Arg("other", other),
                              Arg("alpha", alpha, promotes=False)],
                out, what="add")


def sub(input: Any, other: Any, *, alpha: float = 1, out: Any = None) -> Any:  # noqa: A002
    """input - alpha * other. As torch.sub."""
    if alpha == 1:
        return _run("sub", [Arg("input", input), Arg("other", other)], out)
    return _run("add_alpha", [Arg("input", input), Arg("other", other),
                              Arg("alpha", -alpha, promotes=False)],
                out, what="sub")


def div(input: Any, other: Any, *, rounding_mode: str | None = None,  # noqa: A002
        out: Any = None) -> Any:
    """True division (integers give float32), or rounded toward zero ("trunc") or down
    ("floor"). As torch.div: an array divided by a Python number is multiplied by the
    number's reciprocal, computed in double and rounded to the compute type."""
    args = [Arg("input", input), Arg("other", other)]
    if rounding_mode == "floor":
        return _floor_divide(input, other, out, "div")
    if rounding_mode == "trunc":
        return _run("div_trunc", args, out, what="div")
    if rounding_mode is not None:
        raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', "
                         f"got {rounding_mode!r}")
    if type(other) in _NUMBERS and type(input) not in _NUMBERS:
        result = _float_tensor_dtype(input) or dispatch.result_type("div", args)
        inverse = _reciprocal(float(other))
        return _run("mul", [Arg("input", input), Arg("other", inverse, promotes=False)], out,
                    result=result, what="div")
    return _run("div", args, out)


def floor_divide(input: Any, other: Any, *, out: Any = None) -> Any:  # noqa: A002
    """input / other rounded down. As torch.floor_divide: a float array divided by a
    Python number is multiplied by the number's reciprocal (in float32)."""
    return _floor_divide(input, other, out, "floor_divide")


def _floor_divide(input: Any, other: Any, out: Any, what: str) -> Any:  # noqa: A002
    args = [Arg("input", input), Arg("other", other)]
    if type(other) in _NUMBERS and type(input) not in _NUMBERS:
        result = _float_tensor_dtype(input) or dispatch.result_type("floor_divide", args)
        if DTYPES[result].is_float:
            with np.errstate(all="ignore"):  # 1/0 is the infinity torch multiplies by
                divisor = np.float32(other)
                inverse = np.float32(1.0) / divisor
            return _run("floor_divide_scalar",
                        [Arg("input", input), Arg("other", float(divisor), promotes=False),
                         Arg("inverse", float(inverse), promotes=False)],
                        out, result=result, what=what)
    return _run("floor_divide", args, out, what=what)


def _reciprocal(value: float) -> float:
    if value == 0:
        return math.copysign(math.inf, value)
    return 1.0 / value


_SPECIAL_POWERS = {0.5: "sqrt", -0.5: "rsqrt", -1.0: "reciprocal"}


def pow(input: Any, exponent: Any, *, out: Any = None) -> Any:  # noqa: A001, A002
    """input ** exponent; either may be a number. As torch.pow, which computes the
    exponents 0.5, -0.5, -1, 2, 3 and -2 of an array specially."""
    args = [Arg("input", input), Arg("exponent", exponent)]
    if type(exponent) not in _NUMBERS or type(input) in _NUMBERS:
        return _run("pow", args, out)
    result = _float_tensor_dtype(input) or dispatch.result_type("pow", args)
    if not DTYPES[result].is_float:
        if exponent < 0:
            raise ValueError("pow: integers to negative integer powers are not allowed")
        return _run("pow_scalar", args, out, what="pow")
    special = _SPECIAL_POWERS.get(float(exponent))
    if special is not None:
        return _run(special, [Arg("input", input)], out, result=result, what="pow")
    return _run("pow_scalar", args, out, what="pow")


def lerp(input: Any, end: Any, weight: Any, *, out: Any = None) -> Any:  # noqa: A002
    """input + weight * (end - input), torch's two-sided formula. As torch.lerp."""
    return _run("lerp", [Arg("input", input), Arg("end", end),
                         Arg("weight", weight, cast=False)], out)


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
isnan = _predicate("isnan")
isinf = _predicate("isinf")
isfinite = _predicate("isfinite")


def _bool_array(position: int, op: str) -> Callable[[dispatch.Call], None]:
    """A check that argument `position` is a bool array (where's condition, a mask)."""
    def check(call: dispatch.Call) -> None:
        operand = call.operands[position]
        if isinstance(operand, dispatch.Scalar) or operand.dtype != "bool":
            raise TypeError(f"{op}: argument '{call.names[position]}' must be a bool array")

    return check


def where(condition: Any, input: Any, other: Any, *, out: Any = None) -> Any:  # noqa: A002
    """input where condition holds, else other; either may be a number. As torch.where."""
    return _run("where", [Arg("condition", condition, promotes=False), Arg("input", input),
                          Arg("other", other)], out, check=_bool_array(0, "where"))


def clamp(input: Any, min: Any = None, max: Any = None, *, out: Any = None) -> Any:  # noqa: A002
    """min(max(input, min), max), NaN propagating; numbers or arrays. As torch.clamp."""
    if min is None and max is None:
        raise ValueError("clamp: at least one of 'min' or 'max' must not be None")
    result = dispatch.result_type("clamp", [Arg("input", input)] + [
        Arg(n, v) for n, v in (("min", min), ("max", max)) if v is not None])
    low = min if min is not None else _extreme(result, low=True)
    high = max if max is not None else _extreme(result, low=False)
    args = [Arg("input", input), Arg("min", low, promotes=min is not None),
            Arg("max", high, promotes=max is not None)]
    return _run("clamp", args, out, result=result)


def _extreme(dtype: str, low: bool) -> float | int:
    """The bound that clamps nothing: -inf/inf, or an integer type's limits."""
    if DTYPES[dtype].is_float:
        return -math.inf if low else math.inf
    return lowest(dtype) if low else max_value(dtype)


def masked_fill(input: Any, mask: Any, value: Any) -> Any:  # noqa: A002
    """input with value where mask holds (value cast to input's dtype). As
    torch.masked_fill."""
    if hasattr(value, "item"):  # a 0-d tensor
        value = value.item()
    if type(value) not in _NUMBERS:
        raise TypeError("masked_fill: argument 'value' must be a number or a 0-d tensor")
    dtype = _float_tensor_dtype(input) or dispatch.result_type("masked_fill",
                                                               [Arg("input", input)])
    kind = DTYPES[dtype].kind
    cast: bool | int | float = bool(value) if kind == "bool" else \
        int(value) if kind == "int" else float(value)
    return _run("masked_fill", [Arg("input", input), Arg("mask", mask, False),
                                Arg("value", cast, False)], result=dtype,
                check=_bool_array(1, "masked_fill"))


def nan_to_num(input: Any, nan: float = 0.0, posinf: float | None = None,  # noqa: A002
               neginf: float | None = None, *, out: Any = None) -> Any:
    """NaN, +inf and -inf replaced; the infinities by the dtype's extremes unless given.
    As torch.nan_to_num."""
    dtype = dispatch.result_type("nan_to_num", [Arg("input", input)])
    if not DTYPES[dtype].is_float:  # nothing to replace: the values are unused
        nan, posinf, neginf = 0, 0, 0
    replacements = [("nan", nan), ("posinf", max_value(dtype) if posinf is None else posinf),
                    ("neginf", lowest(dtype) if neginf is None else neginf)]
    return _run("nan_to_num", [Arg("input", input)] + [
        Arg(n, v, False) for n, v in replacements], out)
