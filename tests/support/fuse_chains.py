"""Random Python functions of the library's elementwise ops, for ops.fuse (null and gpu tiers).

A `Program` is a few arguments (a dtype and a layout each: contiguous, a row or a column
broadcast, transposed, every other column, misaligned, expanded) and a chain of calls of
tile_mlir.ops on them, their results and Python numbers: unary math, activations (with
their parameters), binary arithmetic (add/sub with alpha, div and pow by numbers), lerp,
clamp, where on a comparison. `function(program)` is the chain as a Python function of
named arguments: called on arrays it runs the unfused calls, and `ops.fuse` of it is the
fused kernel, so the two tiers compare one function run both ways on the same arrays.
`Placed` says how to make an argument: a flat base of values, a shape, strides and an
element offset into the base (what torch.as_strided and the pretend device take).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

ROWS, COLUMNS = 6, 45
SHAPE = (ROWS, COLUMNS)

UNARY = ("exp", "log", "sqrt", "rsqrt", "abs", "neg", "reciprocal", "sign", "sin", "cos",
         "floor", "ceil", "round", "trunc", "erf", "log1p", "expm1")
ACTIVATIONS = ("relu", "gelu", "silu", "sigmoid", "tanh", "selu", "hardswish", "hardsigmoid",
               "mish", "leaky_relu", "elu", "hardtanh", "softplus")
BINARY = ("add", "sub", "mul", "div", "remainder", "pow", "floor_divide", "maximum",
          "minimum")
COMPARISONS = ("gt", "lt", "ge", "le", "eq", "ne")
LAYOUTS = ("contiguous", "row", "column", "transposed", "strided", "misaligned", "expanded")
NUMBERS = (0.5, -1.25, 2.0, 3.0, -0.5, 1e-3, 7.0, 0.0, -2.0, 1.0)


@dataclass(frozen=True)
class Ref:
    """An argument of a call: the function's argument or an earlier call's result."""

    index: int


@dataclass(frozen=True)
class Call:
    op: str
    args: tuple[Any, ...]  # Refs and Python numbers
    kwargs: tuple[tuple[str, Any], ...] = ()

    def text(self) -> str:
        given = [f"v{a.index}" if isinstance(a, Ref) else repr(a) for a in self.args]
        given += [f"{k}={v!r}" for k, v in self.kwargs]
        return f"{self.op}({', '.join(given)})"


@dataclass(frozen=True)
class Argument:
    dtype: str  # a tile_mlir.dtypes name
    layout: str


@dataclass(frozen=True)
class Program:
    arguments: tuple[Argument, ...]
    calls: tuple[Call, ...]

    def describe(self) -> str:
        names = [f"v{i}: {a.dtype} {a.layout}" for i, a in enumerate(self.arguments)]
        first = len(self.arguments)
        steps = [f"v{first + n} = {c.text()}" for n, c in enumerate(self.calls)]
        return "; ".join(names + steps)


def function(program: Program, ops: Any) -> Callable[..., Any]:
    """The program as a function of named arguments (ops.fuse takes no *args)."""
    def run(values: list[Any]) -> Any:
        for call in program.calls:
            given = [values[a.index] if isinstance(a, Ref) else a for a in call.args]
            values.append(getattr(ops, call.op)(*given, **dict(call.kwargs)))
        return values[-1]

    arity = len(program.arguments)
    if arity == 1:
        return lambda a: run([a])
    if arity == 2:
        return lambda a, b: run([a, b])
    assert arity == 3
    return lambda a, b, c: run([a, b, c])


def row_chain(op: str, ops: Any) -> Callable[[Any, Any], Any]:
    """A registry row between an add and a mul, its arguments narrow intermediates."""
    call = getattr(ops, op)

    def fn(x: Any, y: Any) -> Any:
        t = ops.add(x, y)
        if op in BINARY:
            r = call(t, y)
        elif op == "lerp":
            r = call(t, x, 0.25)
        elif op == "where":
            r = call(ops.gt(t, 1.0), t, y)
        else:
            r = call(t)
        return ops.mul(r, y)

    return fn


# ------------------------------------------------------------------ drawing


def _number(rng: np.random.Generator) -> float:
    return float(rng.choice(NUMBERS))


def _operand(rng: np.random.Generator, floats: list[int]) -> Any:
    """A float value of the chain, or sometimes a Python number."""
    if rng.random() < 0.3:
        return _number(rng)
    return Ref(int(rng.choice(floats)))


def _activation(rng: np.random.Generator, x: Ref) -> Call:
    op = str(rng.choice(ACTIVATIONS))
    parameters: dict[str, tuple[Any, ...]] = {
        "leaky_relu": (float(rng.choice([0.01, 0.2, -0.5])),),
        "elu": (float(rng.choice([1.0, 0.5])),),
        "hardtanh": (-1.5, float(rng.choice([1.0, 0.25]))),
        "softplus": (float(rng.choice([1.0, 2.0])), float(rng.choice([20.0, 1.0])))}
    if op == "gelu" and rng.random() < 0.5:
        return Call(op, (x,), (("approximate", "tanh"),))
    return Call(op, (x, *parameters.get(op, ())))


def _binary(rng: np.random.Generator, x: Ref, floats: list[int]) -> Call:
    op = str(rng.choice(BINARY))
    other = _operand(rng, floats)
    if op == "pow" and not isinstance(other, Ref):
        other = float(rng.choice([2.0, 3.0, -2.0, 0.5, -0.5, -1.0, 1.7]))
    if op in ("add", "sub") and rng.random() < 0.3:
        return Call(op, (x, other), (("alpha", float(rng.choice([2.0, -0.5]))),))
    return Call(op, (x, other) if rng.random() < 0.8 else (other, x))


def _call(rng: np.random.Generator, floats: list[int], calls: list[Call], first: int) -> None:
    """One more call (two for where: its condition first)."""
    x = Ref(int(rng.choice(floats)))
    kind = rng.choice(["unary", "activation", "binary", "binary", "lerp", "clamp", "where"])
    if kind == "unary":
        calls.append(Call(str(rng.choice(UNARY)), (x,)))
    elif kind == "activation":
        calls.append(_activation(rng, x))
    elif kind == "binary":
        calls.append(_binary(rng, x, floats))
    elif kind == "lerp":
        end = Ref(int(rng.choice(floats)))
        calls.append(Call("lerp", (x, end, _operand(rng, floats))))
    elif kind == "clamp":
        low = _number(rng)
        calls.append(Call("clamp", (x, low, low + 2.5)))
    else:
        calls.append(Call(str(rng.choice(COMPARISONS)), (x, _operand(rng, floats))))
        condition = Ref(first + len(calls) - 1)
        calls.append(Call("where", (condition, _operand(rng, floats), _operand(rng, floats))))
        if not any(isinstance(a, Ref) for a in calls[-1].args[1:]):
            calls[-1] = Call("where", (condition, x, calls[-1].args[2]))
    floats.append(first + len(calls) - 1)


def random_program(rng: np.random.Generator, dtype: str, calls: int = 4) -> Program:
    """1 to 3 arguments (mostly of `dtype`, one now and then of another float type), in
    random layouts, and `calls` calls or a few more."""
    count = int(rng.integers(1, 4))
    others = [d for d in ("f32", "f16", "bf16") if d != dtype]
    arguments = tuple(Argument(str(rng.choice(others)) if n and rng.random() < 0.25 else dtype,
                               str(rng.choice(LAYOUTS)))
                      for n in range(count))
    floats = list(range(count))
    made: list[Call] = []
    while len(made) < calls:
        _call(rng, floats, made, count)
    return Program(arguments, tuple(made))


# ------------------------------------------------------------------ arguments


@dataclass(frozen=True)
class Placed:
    """An argument as memory: `base` (flat values), the view's shape, strides and element
    offset into base; `values` the view's elements (what it holds, as NumPy sees it)."""

    base: np.ndarray
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int

    @property
    def values(self) -> np.ndarray:
        return np.lib.stride_tricks.as_strided(
            self.base[self.offset:], self.shape,
            tuple(s * self.base.itemsize for s in self.strides)).copy()


def _values(rng: np.random.Generator, count: int) -> np.ndarray:
    """Normal values, the special ones (NaN, infinities, signed zeros, halves) mixed in."""
    values = rng.standard_normal(count) * 3
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -2.5, 1.0, 3.0])
    return np.where(rng.random(count) < 1 / 12, rng.choice(specials, count), values)


def place(argument: Argument, rng: np.random.Generator, np_dtype: Any) -> Placed:
    """Memory for an argument in its layout (values rounded to its dtype)."""
    rows, cols = SHAPE
    layout = argument.layout
    if layout == "row":
        return Placed(_values(rng, cols).astype(np_dtype), (cols,), (1,), 0)
    if layout == "column":
        return Placed(_values(rng, rows).astype(np_dtype), (rows, 1), (1, 1), 0)
    if layout == "transposed":
        return Placed(_values(rng, rows * cols).astype(np_dtype), SHAPE, (1, rows), 0)
    if layout == "strided":
        return Placed(_values(rng, rows * 2 * cols).astype(np_dtype), SHAPE, (2 * cols, 2), 1)
    if layout == "misaligned":
        return Placed(_values(rng, rows * cols + 3).astype(np_dtype), SHAPE, (cols, 1), 3)
    if layout == "expanded":
        return Placed(_values(rng, cols).astype(np_dtype), SHAPE, (0, 1), 0)
    return Placed(_values(rng, rows * cols).astype(np_dtype), SHAPE, (cols, 1), 0)


def same_bits(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Equal element by element, bit for bit (any NaN for any NaN)."""
    assert got.shape == want.shape and got.dtype == want.dtype, \
        (what, got.shape, got.dtype, want.shape, want.dtype)
    if got.dtype.kind != "f" and got.dtype.name not in ("bfloat16",):
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    wide_got, wide_want = got.astype(np.float64), want.astype(np.float64)
    nan = np.isnan(wide_want)
    np.testing.assert_array_equal(np.isnan(wide_got), nan, err_msg=f"NaN where: {what}")
    carrier = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[got.itemsize]
    bits_got = np.ascontiguousarray(got).view(carrier)[~nan]
    bits_want = np.ascontiguousarray(want).view(carrier)[~nan]
    bad = np.flatnonzero(bits_got != bits_want)
    assert not bad.size, (f"{what}: {bad.size} elements differ, first at {bad[0]}: "
                          f"{wide_got[~nan][bad[0]]!r} against {wide_want[~nan][bad[0]]!r}")
