"""Cases, inputs, expectations and error measures for the operator library's ops.

Shared by the null tier (tests/test_ops_emulated.py, on the pretend device),
the gpu tier (tests/test_ops_gpu.py, against torch or NumPy) and the accuracy
table (tests/ops_accuracy.py). Inputs mix random values from each op's domain
with the special values (NaN, +-Inf, +-0, the extremes of the dtype) at
random places; expectations come from the registry's NumPy references, which
follow torch, evaluated in the op's compute type and rounded as the kernel
rounds (fp8 e4m3fn saturating, e5m2 keeping Inf).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tile_mlir import op_table
from tile_mlir.dtypes import DTYPES, max_value, opmath

TOLERANCE = {"f32": 1e-5, "f16": 1e-3, "bf16": 1.6e-2}
"""Relative error allowed of the inexact ops (the issue's bounds); fp8 is held to one
ulp of its format, and every type accepts one ulp of itself."""

CARRIERS_BY_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
"""Unsigned integers of each size: the bytes of any dtype, for NumPy tools that need them."""

SIGNED_ZERO_FREE = ("maximum", "minimum", "clamp")
"""Ops whose zero's sign torch leaves to the hardware's max/min: not compared."""


@dataclass(frozen=True)
class Case:
    """One op on one dtype: the shape of every input (None: a Python scalar)."""

    op: str
    dtype: str
    shapes: tuple[tuple[int, ...] | None, ...]

    @property
    def row(self) -> op_table.EwOp:
        return op_table.ELEMENTWISE[self.op]

    @property
    def id(self) -> str:
        shapes = ",".join("s" if s is None else "x".join(map(str, s)) for s in self.shapes)
        return f"{self.op}-{self.dtype}-{shapes}"

    @property
    def result(self) -> str:
        if self.row.out == "bool":
            return "bool"
        if self.row.out == "float" and not DTYPES[self.dtype].is_float:
            return "f32"
        return self.dtype

    @property
    def compute(self) -> str:
        return opmath(self.dtype)


def scalar_inputs(op: str) -> tuple[int, ...]:
    """Inputs that must be Python numbers: the rows' scalar-only inputs (nan_to_num's
    replacements, the activations' parameters), masked_fill's value."""
    return {"masked_fill": (2,)}.get(op, op_table.ELEMENTWISE[op].scalar_only)


PARAMETERS: dict[str, tuple[tuple[float, ...], ...]] = {
    "leaky_relu": ((0.01, 0.2, -0.5, 1.5),),  # negative_slope
    "elu": ((1.0, 0.5, 2.5),),  # alpha
    "hardtanh": ((-1.0, 0.0, -2.5), (1.0, 6.0, 0.5)),  # min_val, max_val: any pair
    "softplus": ((1.0, 2.0, 0.5, -1.0), (20.0, 5.0, 1.0)),  # beta, threshold
}
"""The values an activation's scalar parameters take in the cases (torch's default
first), one drawn per run for each."""

GATED = "fused_gated"
"""The family whose ops take one input (..., 2N) and apply their row to its halves."""


def gated(op: str) -> bool:
    return op_table.ELEMENTWISE[op].family == GATED


NUMBER_POSITIONS = {"lerp": (2,), "clamp": (1, 2)}
"""Where a Python number goes in the scalar variant of an op (torch takes lerp's weight
as a number, clamp's bounds both or neither); the second input elsewhere."""


def standard_cases(op: str, dtype: str, shape: tuple[int, ...] = (5, 1237)) -> list[Case]:
    """Every input an array of `shape`; for two-input ops also a broadcast second input
    (its last dim only) and a variant with Python numbers (NUMBER_POSITIONS)."""
    row = op_table.ELEMENTWISE[op]
    if gated(op):  # one input, its last dim twice the result's
        return [Case(op, dtype, ((*shape[:-1], 2 * shape[-1]) if shape else (2,),))]
    if op == "prelu":  # a weight per channel (dim 1), and a single one
        per_channel = [(shape[1],)] if len(shape) > 1 else []
        return [Case(op, dtype, (shape, w)) for w in [*per_channel, (1,)]]
    shapes = [None if i in scalar_inputs(op) else shape for i in range(row.arity)]
    cases = [Case(op, dtype, tuple(shapes))]
    if row.arity >= 2 and 1 not in scalar_inputs(op) and 1 not in row.keep:
        cases.append(Case(op, dtype, (shape, shape[-1:], *shapes[2:])))
        numbers = NUMBER_POSITIONS.get(op, (1,))
        cases.append(Case(op, dtype, tuple(None if n in numbers else s
                                           for n, s in enumerate(shapes))))
    return cases


# ------------------------------------------------------------------ inputs


GELU_LOW = -2.0
"""gelu's inputs (both forms, and the gated ones') are drawn above this: further left,
torch's formula 0.5 x (1 + erf(x / sqrt 2)) cancels, its result no more accurate than
erf's last ulp (|x| 2^-25 absolute), which no relative bound takes; the gpu tier also
compares the far left with torch itself (test_ops_gpu.py)."""


def _float_domain(op: str, position: int, rng: np.random.Generator, shape: tuple[int, ...]
                  ) -> np.ndarray:
    uniform = rng.uniform
    if op.startswith("gelu"):
        return uniform(GELU_LOW, 6, shape)
    if op in ("exp", "expm1"):
        return uniform(-10, 10, shape)
    if op in ("log", "sqrt", "rsqrt", "log1p") or (op == "pow" and position == 0):
        return uniform(0.01, 50, shape)
    if op == "pow":
        return uniform(-3, 3, shape)
    if op in ("sin", "cos"):
        return uniform(-20, 20, shape)
    if op == "lerp" and position == 2:
        return uniform(-0.5, 1.5, shape)
    if (op in ("div", "remainder", "floor_divide", "reciprocal") and position == 1) or \
            op == "reciprocal":
        return np.where(rng.random(shape) < 0.5, -1, 1) * uniform(0.25, 8, shape)
    return rng.standard_normal(shape) * 4


def _int_domain(op: str, position: int, dtype: str, rng: np.random.Generator,
                shape: tuple[int, ...]) -> np.ndarray:
    if op.startswith("bitwise"):
        info = np.iinfo(DTYPES[dtype].np_dtype())
        return rng.integers(info.min, info.max, shape, dtype=DTYPES[dtype].np_dtype())
    if op == "pow":
        return rng.integers(-2, 9, shape) if position else rng.integers(-5, 6, shape)
    values = rng.integers(-1000, 1001, shape)
    if op in ("remainder", "floor_divide") and position == 1:
        values = np.where(values == 0, 7, values)
    return values


def _specials(dtype: str) -> np.ndarray:
    big = float(max_value(dtype))
    return np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, big, -big,
                     3.0, 2.0, -0.5])


def array(case: Case, position: int, rng: np.random.Generator) -> np.ndarray:
    """Input `position` of a case, in its storage dtype (specials in about 1 in 16)."""
    shape = case.shapes[position]
    assert shape is not None
    if position in case.row.keep:
        return rng.random(shape) < 0.5
    dtype = case.dtype
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if not DTYPES[dtype].is_float:
        return _int_domain(case.op, position, dtype, rng, shape).astype(
            DTYPES[dtype].np_dtype())
    values = _float_domain(case.op, position, rng, shape)
    special = rng.random(shape) < 1 / 16
    values = np.where(special, rng.choice(_specials(dtype), shape), values)
    return rounded(values, dtype)


def scalar(case: Case, position: int, rng: np.random.Generator) -> bool | int | float:
    """Input `position` as a Python number (the second of two, or a replacement)."""
    if case.op in PARAMETERS:
        return float(rng.choice(PARAMETERS[case.op][position - 1]))
    if case.op == "nan_to_num":
        value = [0.25, 7.5, -3.0][position - 1]
        return value if DTYPES[case.dtype].is_float else int(value)
    if case.op == "pow":  # torch's special exponents, and one that is not
        if not DTYPES[case.dtype].is_float:
            return int(rng.choice([0, 1, 2, 3]))  # negative ones are refused, as by torch
        return float(rng.choice([2.0, 3.0, -2.0, 0.5, -0.5, -1.0, 1.7]))
    if case.dtype == "bool":
        return bool(rng.random() < 0.5)
    if not DTYPES[case.dtype].is_float:
        return int(_int_domain(case.op, position, case.dtype, rng, (1,))[0])
    return float(_float_domain(case.op, position, rng, (1,))[0])


def inputs(case: Case, rng: np.random.Generator) -> list[Any]:
    return [scalar(case, n, rng) if shape is None else array(case, n, rng)
            for n, shape in enumerate(case.shapes)]


def every_pair(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of values of an 8-bit dtype: a of byte i % 256 and b of byte i // 256
    (65536 of each; the exhaustive fp8 tests)."""
    np_dtype = DTYPES[dtype].np_dtype()
    bits = np.arange(1 << 16, dtype=np.uint32)
    return ((bits & 0xFF).astype(np.uint8).view(np_dtype),
            (bits >> 8).astype(np.uint8).view(np_dtype))


# ------------------------------------------------------------ expectations


def rounded(values: np.ndarray, dtype: str) -> np.ndarray:
    """float values rounded to dtype as the kernels round: e4m3fn saturates (NaN kept)."""
    if dtype == "f8e4m3":
        values = np.where(np.isnan(values), values, np.clip(values, -448.0, 448.0))
    with np.errstate(all="ignore"):
        return np.asarray(values).astype(DTYPES[dtype].np_dtype())


def _to_compute(value: Any, dtype: str) -> Any:
    return np.asarray(value).astype(DTYPES[dtype].np_dtype())


_POWERS = {0.5: "sqrt", -0.5: "rsqrt", -1.0: "reciprocal"}


def _api_form(case: Case, args: list[Any], converted: list[Any], compute: str) -> Any:
    """The reference of what the library (as torch) runs for the call: a division by a
    number multiplies by its reciprocal (double, then the compute type; float32 for
    rounding_mode "trunc" and "floor", as torch's kernels for a CPU scalar); pow by a number
    is sqrt, rsqrt or reciprocal for 0.5, -0.5, -1, and multiplies out 2, 3, -2."""
    if case.op == "div" and case.shapes[1] is None:
        inverse = np.float64(1.0) / np.float64(args[1])
        return converted[0] * _to_compute(inverse, compute)
    if case.op == "pow" and case.shapes[1] is None and case.shapes[0] is not None:
        special = _POWERS.get(float(args[1])) if DTYPES[case.dtype].is_float else None
        name = special or "pow_scalar"
        operands = converted[:1] if special else converted
        return op_table.ELEMENTWISE[name].ref(*operands)
    storage = {"storage": case.row.storage_type(case.result)} if case.row.storage else {}
    if case.op == "floor_divide" and case.shapes[1] is None and case.shapes[0] is not None \
            and DTYPES[case.result].is_float:
        with np.errstate(all="ignore"):
            b32 = np.float32(args[1])
            inverse32 = np.float32(1.0) / b32
        return op_table.ELEMENTWISE["floor_divide_scalar"].ref(
            converted[0], _to_compute(b32, compute), _to_compute(inverse32, compute),
            **storage)
    if case.op == "div_trunc" and case.shapes[1] is None and case.shapes[0] is not None \
            and DTYPES[case.result].is_float:
        with np.errstate(all="ignore"):
            inverse32 = np.float32(1.0) / np.float32(args[1])
        return op_table.ELEMENTWISE["div_trunc_scalar"].ref(converted[0],
                                                             _to_compute(inverse32, compute))
    return case.row.ref(*converted, **storage)


def _cast_number(case: Case, position: int, value: Any) -> Any:
    """A Python number as the kernel sees it: cast to f16/bf16 first for the ops whose
    torch kernels do so (elementwise.CASTS_NUMBERS)."""
    from tile_mlir.ops.elementwise import CASTS_NUMBERS

    op = "pow_scalar" if case.op == "pow" else case.op
    if op not in CASTS_NUMBERS or case.dtype not in ("f16", "bf16") or \
            case.shapes[position] is not None:
        return value
    return rounded(np.asarray(float(value)), case.dtype)


def operands(case: Case, args: list[Any]) -> list[Any]:
    """The row's inputs for the call's arguments: a gated op's two halves, prelu's weight
    broadcast along dim 1 (as torch broadcasts it); the arguments themselves elsewhere."""
    if gated(case.op):
        x = np.asarray(args[0])
        n = x.shape[-1] // 2
        return [x[..., :n], x[..., n:]]
    if case.op == "prelu":
        x, weight = np.asarray(args[0]), np.asarray(args[1])
        shape = [1] * x.ndim
        if x.ndim > 1:
            shape[1] = weight.size
        return [x, weight.reshape(shape)]
    return list(args)


def result_shape(case: Case, args: list[Any]) -> tuple[int, ...]:
    return tuple(np.broadcast_shapes(*[np.shape(a) for a in operands(case, args)]))


def expected(case: Case, args: list[Any]) -> np.ndarray:
    """The result torch defines, from the registry's reference in the compute type."""
    row = case.row
    compute = opmath(case.result if row.out != "bool" else case.dtype)
    inputs = operands(case, args)
    converted = [np.asarray(a) if n in row.keep else _to_compute(_cast_number(case, n, a),
                                                                  compute)
                 for n, a in enumerate(inputs)]
    with np.errstate(all="ignore"):
        result = np.asarray(_api_form(case, args, converted, compute))
    shape = result_shape(case, args)
    result = np.broadcast_to(result, shape)
    if case.result == "bool" or not DTYPES[case.result].is_float:
        return result.astype(DTYPES[case.result].np_dtype())
    return rounded(result.astype(np.float64), case.result)


# ------------------------------------------------------------------ errors


@dataclass(frozen=True)
class Report:
    """How a result compares with its expectation."""

    ok: bool
    max_rel: float  # over finite elements
    max_ulp: int
    detail: str


def _ordered(x: np.ndarray, dtype: str) -> np.ndarray:
    """Floats as integers that count ulps (the sign folded so that order is kept)."""
    np_type = DTYPES[dtype].np_dtype()
    bits = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}[np_type.itemsize]
    ints = np.ascontiguousarray(x.astype(np_type)).view(bits).astype(np.int64)
    sign = np.int64(1) << (8 * np_type.itemsize - 1)
    return np.where(ints < 0, -(ints & (sign - 1)), ints)


def compare(case: Case, got: np.ndarray, want: np.ndarray) -> Report:
    """Exact ops bit for bit (NaN for NaN); others within the dtype's tolerance or one
    ulp; NaN and Inf where expected, in either case."""
    dtype = case.result
    if dtype == "bool" or not DTYPES[dtype].is_float:
        wrong = np.flatnonzero(got != want)
        detail = "" if not wrong.size else \
            f"{wrong.size} differ, first at {wrong[0]}: {got.flat[wrong[0]]} != {want.flat[wrong[0]]}"
        return Report(not wrong.size, 0.0, int(bool(wrong.size)), detail)
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan_mismatch = np.isnan(g) != np.isnan(w)
    inf_mismatch = (np.isinf(g) | np.isinf(w)) & ~(g == w)
    finite = np.isfinite(g) & np.isfinite(w)
    with np.errstate(all="ignore"):
        tiny = float(np.finfo(np.float32).tiny) if dtype == "f32" else 2.0 ** -14
        rel = np.where(finite, np.abs(g - w) / np.maximum(np.abs(w), tiny), 0.0)
    ulp = np.where(finite, np.abs(_ordered(got, dtype) - _ordered(want, dtype)), 0)
    if case.op in SIGNED_ZERO_FREE:
        ulp = np.where((g == 0) & (w == 0), 0, ulp)
    max_rel = float(rel.max()) if rel.size else 0.0
    max_ulp = int(ulp.max()) if ulp.size else 0
    if case.row.exact:
        bad = nan_mismatch | inf_mismatch | (ulp > 0)
    else:
        bad = nan_mismatch | inf_mismatch | ((rel > TOLERANCE.get(dtype, 0.0)) & (ulp > 1))
    detail = ""
    if bad.any():
        at = int(np.flatnonzero(bad)[0])
        detail = (f"{int(bad.sum())} of {bad.size} out of bounds; first at {at}: got "
                  f"{got.flat[at]!r}, want {want.flat[at]!r}")
    return Report(not bad.any(), max_rel, max_ulp, detail)


# --------------------------------------------------------------- signatures


@dataclass(frozen=True)
class Prepared:
    """A case's launch as the library plans it: the kernel's program, its arguments
    (pointers and numbers as this call's values) and its grid."""

    program: Any
    args: list[Any]
    grid: int

    @property
    def signature(self) -> Any:
        return self.program.sig


def prepared(case: Case, rng: np.random.Generator | None = None) -> Prepared:
    """The launch the library plans for a case, from made-up arrays: the kernel's
    program (signature), arguments and grid, with no memory behind them."""
    from tile_mlir.ops import activations, plan
    from tile_mlir.ops import args as library_args
    from tile_mlir.ops.elementwise import In, apply

    rng = rng or np.random.default_rng(0)
    builder = plan.Builder(case.op, ())
    inputs: list[Any] = []
    pointers: dict[str, int] = {}
    numbers: dict[str, Any] = {}
    for n, shape in enumerate(case.shapes):
        if shape is None:
            numbers[f"x{n}"] = scalar(case, n, rng)
            inputs.append(In(library_args.classify(numbers[f"x{n}"], f"x{n}"), promotes=False))
            continue
        dtype = "bool" if n in case.row.keep else case.dtype
        pointers[f"_p_x{n}"] = (n + 1) << 32
        array = library_args.Array(f"x{n}", "cai", dtype, shape, library_args.row_major(shape),
                                   (n + 1) << 32, 0, None, f"_p_x{n}")
        inputs.append(In(array, promotes=n not in case.row.keep))
    if gated(case.op):
        halves = activations.split_halves(inputs[0].operand, case.op)
        inputs = [In(half) for half in halves]
    elif case.op == "prelu":
        inputs[1] = In(activations.channel_weight(inputs[0].operand, inputs[1].operand))
    apply(builder, case.op, inputs)
    pointers[f"_p_{builder.allocs[0].var}"] = 1 << 40
    launch = builder.launches[0]
    names = {**plan.HELPERS, **builder.names}

    def value(v: Any) -> Any:
        if isinstance(v, plan.Ptr):
            return pointers[v.root] + v.delta
        if isinstance(v, plan.Num):
            return eval(v.expr, names, dict(numbers))
        return v

    return Prepared(launch.program, [value(v) for v in launch.values], launch.grid[0])
