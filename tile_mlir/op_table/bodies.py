"""The MLIR bodies of the op registry's rows: one builder per op, on compute-type values.

A body takes its inputs already converted to the row's compute type (f32 for
the narrow floats, the integer type itself, i1 for bool; scalars broadcast to
the vector width) together with that type, and builds the result at the
current insertion point: a value of the compute type, or of i1 for the
predicates. One body serves scalars and vectors alike, and floats, integers
and bools where the op has them: each picks its arith op by the element kind.

The formulas follow PyTorch's CUDA kernels where torch defines the result by
one (remainder and floor_divide's sign rules, lerp's two-sided formula with
its fused multiply-adds, sign(NaN) = 0, nan_to_num's three replacements), so
that results are bit for bit torch's where the arithmetic is exact.

This module imports MLIR; the registry (op_table/__init__.py) names its bodies
through op_table/lazy.py, so that it imports without the bindings and builds a
body only when a lowering asks for one.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from mlir import ir
from mlir.dialects import arith, llvm, scf, vector
from mlir.dialects import math as mlir_math

from tile_mlir.lowering.support import emit

Value = ir.Value
Type = ir.Type
Body = Callable[..., ir.Value]  # (args, ty) -> Value; rows with `storage` take storage=name


# ------------------------------------------------------------------ types


def kind(ty: Type) -> str:
    """'float', 'int' or 'bool' for a compute type (scalar or vector)."""
    elem = emit.element_type(ty)
    if isinstance(elem, ir.IntegerType):
        return "bool" if ir.IntegerType(elem).width == 1 else "int"
    return "float"


def predicate_type(ty: Type) -> Type:
    """i1 of the shape of `ty`."""
    return emit.with_element_type(ty, ir.IntegerType.get_signless(1))


def const(ty: Type, value: float | int | bool) -> Value:
    return emit.const(ty, value)


def _all_ones(ty: Type) -> Value:
    return const(ty, True if kind(ty) == "bool" else -1)


# ------------------------------------------------------------- comparisons

_FLOAT_CMP = {"eq": "OEQ", "ne": "UNE", "gt": "OGT", "lt": "OLT", "ge": "OGE", "le": "OLE"}
_INT_CMP = {"eq": "eq", "ne": "ne", "gt": "sgt", "lt": "slt", "ge": "sge", "le": "sle"}
_BOOL_CMP = {"eq": "eq", "ne": "ne", "gt": "ugt", "lt": "ult", "ge": "uge", "le": "ule"}


def compare(how: str, a: Value, b: Value) -> Value:
    """a <how> b: ordered float predicates (NaN compares false) except `ne`, which is
    unordered (NaN != x holds), as in C; signed for integers, unsigned for bools."""
    kind_ = kind(a.type)
    if kind_ == "float":
        return arith.cmpf(getattr(arith.CmpFPredicate, _FLOAT_CMP[how]), a, b)
    table = _INT_CMP if kind_ == "int" else _BOOL_CMP
    return arith.cmpi(getattr(arith.CmpIPredicate, table[how]), a, b)


def comparison(how: str) -> Body:
    return lambda args, _: compare(how, args[0], args[1])


def truth(value: Value) -> Value:
    """value != 0 as i1 (NaN is true), as C converts to bool. An 8-bit float (a kept
    input: where's condition) is tested on its bits, sign aside: neither NVPTX nor the
    conversion to LLVM compares fp8 values, and +-0 are its only zeros."""
    if kind(value.type) == "bool":
        return value
    elem = emit.element_type(value.type)
    if isinstance(elem, ir.FloatType) and ir.FloatType(elem).width == 8:
        bits = arith.bitcast(emit.with_element_type(value.type, ir.IntegerType.get_signless(8)),
                             value)
        magnitude = arith.andi(bits, const(bits.type, 0x7F))
        return arith.cmpi(arith.CmpIPredicate.ne, magnitude, const(bits.type, 0))
    return compare("ne", value, const(value.type, 0))


# ------------------------------------------------------------- arithmetic


def by_kind(float_op: str, int_op: str, bool_op: str | None = None) -> Body:
    """An arith op chosen by the element kind (bool falls back to the integer op)."""
    def body(args: list[Value], ty: Type) -> Value:
        kind_ = kind(ty)
        name = float_op if kind_ == "float" else (bool_op or int_op) if kind_ == "bool" \
            else int_op
        return getattr(arith, name)(*args)

    return body


def math_op(name: str) -> Body:
    """A math-dialect function of floats (lowered to libdevice or an LLVM intrinsic)."""
    return lambda args, _: getattr(mlir_math, name)(*args)


def rounding(name: str) -> Body:
    """A rounding function (LLVM's llvm.floor, llvm.ceil, llvm.roundeven, llvm.trunc:
    cvt.rmi, cvt.rpi, cvt.rni, cvt.rzi) on floats, the identity on integers (torch
    returns integer tensors unchanged from floor, ceil, round and trunc)."""
    def body(args: list[Value], ty: Type) -> Value:
        return emit.intrinsic(f"llvm.{name}", args) if kind(ty) == "float" else args[0]

    return body


def sqrt(args: list[Value], _: Type) -> Value:
    # llvm.sqrt is the correctly rounded sqrt.rn; math.sqrt would go through
    # libdevice's __nv_sqrtf, which is sqrt.approx unless prec-sqrt is set.
    return emit.intrinsic("llvm.sqrt", args)


def reciprocal(args: list[Value], ty: Type) -> Value:
    return arith.divf(const(ty, 1.0), args[0])


def abs_(args: list[Value], ty: Type) -> Value:
    x = args[0]
    if kind(ty) == "float":
        return mlir_math.absf(x)
    return arith.select(compare("lt", x, const(ty, 0)), neg(args, ty), x)


def neg(args: list[Value], ty: Type) -> Value:
    if kind(ty) == "float":
        return arith.negf(args[0])
    return arith.subi(const(ty, 0), args[0])


def sign(args: list[Value], ty: Type) -> Value:
    """(0 < x) - (x < 0): 0 for NaN and for either zero, as torch's signum."""
    x = args[0]
    zero = const(ty, 0)
    negative = arith.select(compare("lt", x, zero), const(ty, -1), zero)
    return arith.select(compare("gt", x, zero), const(ty, 1), negative)


def add_alpha(args: list[Value], ty: Type) -> Value:
    """a + alpha * b, which torch's CUDA kernel computes as one fma for floats."""
    a, b, alpha = args
    if kind(ty) == "float":
        return mlir_math.fma(alpha, b, a)
    return arith.addi(a, arith.muli(alpha, b))


def remainder(args: list[Value], ty: Type) -> Value:
    """Python's modulo: the remainder takes the divisor's sign (torch.remainder)."""
    a, b = args
    zero = const(ty, 0)
    is_float = kind(ty) == "float"
    rem = arith.remf(a, b) if is_float else arith.remsi(a, b)
    differ = arith.xori(compare("lt", rem, zero), compare("lt", b, zero))
    fix = arith.andi(compare("ne", rem, zero), differ)
    return arith.select(fix, arith.addf(rem, b) if is_float else arith.addi(rem, b), rem)


def div_trunc(args: list[Value], ty: Type, storage: str | None = None) -> Value:
    """Division rounded toward zero: trunc(a / b) for floats, C's a / b for integers.
    torch divides in scalar_t (for f16 and bf16: in float, the quotient rounded back to
    the 16-bit type) and truncates that: a quotient just under an integer that rounds
    up to it truncates to the integer."""
    if kind(ty) == "float":
        return emit.intrinsic("llvm.trunc", [_in_storage(arith.divf(*args), storage)])
    return arith.divsi(*args)


def div_trunc_scalar(args: list[Value], ty: Type) -> Value:
    """div(rounding_mode="trunc") by a number, given as its reciprocal: torch's kernel for
    a CPU scalar divisor computes trunc(a * (1/b)) in float, with no rounding between."""
    a, inverse = args
    return emit.intrinsic("llvm.trunc", [arith.mulf(a, inverse)])


def floor_divide(args: list[Value], ty: Type, storage: str | None = None) -> Value:
    a, b = args
    if kind(ty) != "float":
        return _floor_divide_int(a, b, ty)
    return _floor_divide_float(a, b, arith.divf, ty, storage)


def floor_divide_scalar(args: list[Value], ty: Type, storage: str | None = None) -> Value:
    """floor_divide by a number b, given with its reciprocal: torch's kernel for a CPU
    scalar divisor multiplies by 1/b (rounded to float) where the other divides by b."""
    a, b, inverse = args
    return _floor_divide_float(a, b, lambda x, _: arith.mulf(x, inverse), ty, storage)


def signbit(x: Value) -> Value:
    """Whether a float's sign bit is set (-0.0 and negative NaNs included)."""
    ty = x.type
    bits = ir.FloatType(emit.element_type(ty)).width
    ints = emit.with_element_type(ty, ir.IntegerType.get_signless(bits))
    return compare("lt", arith.bitcast(ints, x), const(ints, 0))


def _floor_divide_int(a: Value, b: Value, ty: Type) -> Value:
    """Truncating division, one less where the signs differ and it was inexact."""
    zero = const(ty, 0)
    quotient, rem = arith.divsi(a, b), arith.remsi(a, b)
    differ = arith.xori(compare("lt", a, zero), compare("lt", b, zero))
    fix = arith.andi(differ, compare("ne", rem, zero))
    return arith.select(fix, arith.subi(quotient, const(ty, 1)), quotient)


def _floor_divide_float(a: Value, b: Value, divide: Callable[[Value, Value], Value],
                        ty: Type, storage: str | None) -> Value:
    """torch's div_floor_floating: (a - fmod(a, b)) / b, corrected toward the floor and
    rounded to the nearest integer; IEEE a / b when b is 0; a signed zero for zero.
    torch keeps the floor in the result's type (scalar_t): `storage`, when narrower than
    ty, rounds it there (which matters past 2048 for f16, 256 for bf16)."""
    zero, one = const(ty, 0.0), const(ty, 1.0)
    mod = arith.remf(a, b)
    quotient = divide(arith.subf(a, mod), b)
    differ = arith.xori(compare("lt", b, zero), compare("lt", mod, zero))
    down = arith.andi(compare("ne", mod, zero), differ)
    quotient = arith.select(down, arith.subf(quotient, one), quotient)
    floor = _in_storage(emit.intrinsic("llvm.floor", [quotient]), storage)
    up = compare("gt", arith.subf(quotient, floor), const(ty, 0.5))
    floor = arith.select(up, _in_storage(arith.addf(floor, one), storage), floor)
    true_quotient = divide(a, b)
    signed_zero = arith.select(signbit(true_quotient), const(ty, -0.0), zero)
    result = arith.select(compare("ne", quotient, zero), floor, signed_zero)
    return arith.select(compare("eq", b, zero), true_quotient, result)


def _in_storage(x: Value, storage: str | None) -> Value:
    """x (of the compute type) rounded to the `storage` type and back."""
    from tile_mlir.dtypes import DTYPES, by_mlir
    from tile_mlir.lowering.support.compute import convert

    compute = by_mlir(str(emit.element_type(x.type)))
    if storage is None or storage == compute.name:
        return x
    vec = ir.VectorType(x.type).shape[0] if isinstance(x.type, ir.VectorType) else 1
    return convert(convert(x, compute, DTYPES[storage], vec), DTYPES[storage], compute, vec)


def pow_(args: list[Value], ty: Type) -> Value:
    base, exponent = args
    if kind(ty) == "float":
        return mlir_math.powf(base, exponent)
    return _pow_int(base, exponent, ty)


def pow_scalar(args: list[Value], ty: Type) -> Value:
    """pow with a scalar exponent: torch's kernel computes x*x, x*x*x and 1/(x*x) for
    the exponents 2, 3 and -2, and powf otherwise (0.5, -0.5 and -1 are sqrt, rsqrt and
    reciprocal, which the library calls instead)."""
    if kind(ty) != "float":
        return pow_(args, ty)
    base, exponent = args
    square = arith.mulf(base, base)
    result = mlir_math.powf(base, exponent)
    for value, special in ((-2.0, reciprocal([square], ty)), (3.0, arith.mulf(square, base)),
                           (2.0, square)):
        result = arith.select(compare("eq", exponent, const(ty, value)), special, result)
    return result


def _pow_int(base: Value, exponent: Value, ty: Type) -> Value:
    """Square and multiply over every exponent bit (wrapping, as C integers do); a
    negative exponent gives 1 for base 1, +-1 for base -1 and 0 otherwise (torch's powi)."""
    bits = ir.IntegerType(emit.element_type(ty)).width
    one, zero = const(ty, 1), const(ty, 0)
    result, square, rest = one, base, exponent
    for _ in range(bits - 1):
        odd = compare("ne", arith.andi(rest, one), zero)
        result = arith.select(odd, arith.muli(result, square), result)
        square = arith.muli(square, square)
        rest = arith.shrui(rest, one)
    minus_one = const(ty, -1)
    odd_exponent = compare("ne", arith.andi(exponent, one), zero)
    negative = arith.select(compare("eq", base, one), one, zero)
    negative = arith.select(compare("eq", base, minus_one),
                            arith.select(odd_exponent, minus_one, one), negative)
    return arith.select(compare("lt", exponent, zero), negative, result)


def lerp(args: list[Value], ty: Type) -> Value:
    """start + w * (end - start) for |w| < 0.5, else end - (end - start) * (1 - w): torch's
    formula, each side one fma as nvcc contracts it."""
    start, end, weight = args
    diff = arith.subf(end, start)
    small = compare("lt", mlir_math.absf(weight), const(ty, 0.5))
    low = mlir_math.fma(weight, diff, start)
    high = mlir_math.fma(arith.negf(diff), arith.subf(const(ty, 1.0), weight), end)
    return arith.select(small, low, high)


def maximum(args: list[Value], ty: Type) -> Value:
    return by_kind("maximumf", "maxsi", "ori")(args, ty)


def minimum(args: list[Value], ty: Type) -> Value:
    return by_kind("minimumf", "minsi", "andi")(args, ty)


def clamp(args: list[Value], ty: Type) -> Value:
    """min(max(x, low), high): NaN anywhere gives NaN; low > high gives high."""
    x, low, high = args
    return minimum([maximum([x, low], ty), high], ty)


# ------------------------------------------------------------ bits and logic


def arith_op(name: str) -> Body:
    """One arith op on the inputs as they are (andi, ori, xori, divf...)."""
    return lambda args, _: getattr(arith, name)(*args)


def bitwise_not(args: list[Value], ty: Type) -> Value:
    return arith.xori(args[0], _all_ones(ty))


def logical_not(args: list[Value], _: Type) -> Value:
    return arith.xori(truth(args[0]), _all_ones(predicate_type(args[0].type)))


def logical(name: str) -> Body:
    return lambda args, _: getattr(arith, name)(truth(args[0]), truth(args[1]))


# ------------------------------------------------------------------ special


def where(args: list[Value], _: Type) -> Value:
    condition, x, y = args
    return arith.select(truth(condition), x, y)


def masked_fill(args: list[Value], _: Type) -> Value:
    x, mask, value = args
    return arith.select(truth(mask), value, x)


def nan_to_num(args: list[Value], ty: Type) -> Value:
    """NaN, +inf and -inf replaced by the three scalars; integers pass through."""
    x, nan, posinf, neginf = args
    if kind(ty) != "float":
        return x
    inf = const(ty, float("inf"))
    result = arith.select(compare("eq", x, inf), posinf, x)
    result = arith.select(compare("eq", x, arith.negf(inf)), neginf, result)
    return arith.select(_isnan(x), nan, result)


def _isnan(x: Value) -> Value:
    return arith.cmpf(arith.CmpFPredicate.UNO, x, x)


def classify(test: str) -> Body:
    """isnan, isinf, isfinite: on integers and bools the answer is a constant."""
    def body(args: list[Value], ty: Type) -> Value:
        x = args[0]
        if kind(ty) != "float":
            return const(predicate_type(ty), test == "isfinite")
        if test == "isnan":
            return _isnan(x)
        magnitude = mlir_math.absf(x)
        return compare("eq" if test == "isinf" else "lt", magnitude, const(ty, float("inf")))

    return body


# ---------------------------------------------------------------- primitives


def identity(args: list[Value], _: Type) -> Value:
    return args[0]


def zero(_: list[Value], ty: Type) -> Value:
    return const(ty, 0)


def tail_fill(args: list[Value], _: Type) -> Value:
    """x where the element's position (i64) is below the limit (i64), else the value."""
    x, value, limit, position = args
    return arith.select(arith.cmpi(arith.CmpIPredicate.slt, position, limit), x, value)


def fma(args: list[Value], _: Type) -> Value:
    return mlir_math.fma(*args)


# ------------------------------------------- the MUFU's approximations (narrow_body rows)
# Where a result is narrower than f32 (f16, bf16, fp8), a row's narrow_body may use the
# special function unit's approximations in place of libdevice's functions: their f32
# error (2^-22) is far below a narrow result's rounding, and libdevice's 20-50
# instructions an element held those rows compute bound.

EX2_APPROX = "llvm.nvvm.ex2.approx.f32"
"""ex2.approx.f32: 2^x within 2 ulp (relative 2^-22), subnormal results kept (no .ftz)."""
LG2_APPROX = "llvm.nvvm.lg2.approx.f"
"""lg2.approx.f32: log2(x) within 2^-22.6 absolute, subnormal inputs kept (no .ftz)."""
DIV_APPROX = "llvm.nvvm.div.approx.f"
"""div.approx.f32: x * rcp.approx(y), within 2 ulp of x / y (|y| < 2^126)."""


def _lanewise(name: str, *args: Value) -> Value:
    """A scalar f32 NVVM intrinsic on each lane of its arguments (of one type)."""
    ty = args[0].type
    f32 = emit.element_type(ty)

    def one(*values: Value) -> Value:
        return llvm.CallIntrinsicOp(f32, name, list(values), [], []).results[0]

    if not isinstance(ty, ir.VectorType):
        return one(*args)
    lanes = ir.VectorType(ty).shape[0]
    return vector.from_elements(ty, [one(*(vector.extract(a, [], [lane]) for a in args))
                                     for lane in range(lanes)])


def _exp_mufu(x: Value, ty: Type) -> Value:
    """e^x as ex2.approx(x * log2(e)) (the product rounds to f32 first)."""
    return _lanewise(EX2_APPROX, arith.mulf(x, const(ty, math.log2(math.e))))


def exp_fast(args: list[Value], ty: Type) -> Value:
    """e^x by ex2.approx, as Triton's exp on f32 (softmax's on 16-bit rows: ops/rows.py's
    SOFTMAX_EXP): within 2 ulp plus |x| / 2 ulp (x * log2(e) rounds to f32 first), 0
    below about -103, inf above 88.7, NaN for NaN."""
    return _exp_mufu(args[0], ty)


def _expm1_mufu(x: Value, ty: Type) -> Value:
    """expm1(x) within 2^-16 (relative) for x <= 0: e^x - 1 with ex2.approx, its Taylor
    series to x^6 / 720 where |x| < EXPM1_SERIES (its relative error, about x^6 / 5040,
    is 2^-24 there; e^x - 1 would cancel)."""
    e = _exp_mufu(x, ty)
    series = const(ty, 1.0 / 720.0)
    for k in (120, 24, 6, 2, 1):  # 1 + x/2 + x^2/6 + ... + x^5/720, by Horner
        series = mlir_math.fma(series, x, const(ty, 1.0 / k))
    small = arith.mulf(x, series)
    near = compare("lt", mlir_math.absf(x), const(ty, EXPM1_SERIES))
    return arith.select(near, small, arith.subf(e, const(ty, 1.0)))


EXPM1_SERIES = 0.25
"""Below it (in magnitude) _expm1_mufu sums the series; from it e^x - 1 loses at most a
factor e^-0.25 / (1 - e^-0.25) < 3.6 of ex2's accuracy to the cancellation."""


# ---------------------------------------------------------------- activations
# torch's CUDA kernels (ATen/native/cuda/Activation*Kernel.cu), in the compute type (f32
# for the narrow floats, torch's opmath), with the same operations in the same order so
# that the exact ones round as torch rounds.

_SQRT1_2 = 0.7071067811865476  # M_SQRT1_2
_GELU_BETA = 0.7978845608028654  # M_SQRT2 * M_2_SQRTPI * 0.5
_GELU_KAPPA = 0.044715
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _f32(value: float) -> float:
    """A double constant as torch's kernels hold it: rounded to float."""
    import numpy as np

    return float(np.float32(value))


def _std_max(a: Value, b: Value) -> Value:
    """std::max(a, b) = a < b ? b : a: a NaN in a passes through."""
    return arith.select(compare("lt", a, b), b, a)


def _std_min(a: Value, b: Value) -> Value:
    """std::min(a, b) = b < a ? b : a: a NaN in a passes through."""
    return arith.select(compare("lt", b, a), b, a)


def relu(args: list[Value], ty: Type) -> Value:
    """clamp_min(x, 0): NaN stays NaN, -0 gives +0."""
    return arith.maximumf(args[0], const(ty, 0.0))


def _positive_or(x: Value, ty: Type, otherwise: Value) -> Value:
    """x > 0 ? x : otherwise (NaN takes `otherwise`, which carries it)."""
    return arith.select(compare("gt", x, const(ty, 0.0)), x, otherwise)


def leaky_relu(args: list[Value], ty: Type) -> Value:
    x, slope = args
    return _positive_or(x, ty, arith.mulf(x, slope))


def prelu(args: list[Value], ty: Type) -> Value:
    x, weight = args
    return _positive_or(x, ty, arith.mulf(weight, x))


def elu(args: list[Value], ty: Type) -> Value:
    """x > 0 ? x : expm1(x) * alpha (torch's elu_kernel with scale = input_scale = 1)."""
    x, alpha = args
    return _positive_or(x, ty, arith.mulf(mlir_math.expm1(x), alpha))


def elu_narrow(args: list[Value], ty: Type) -> Value:
    """elu where the result is narrower than f32: expm1 by _expm1_mufu (libdevice's expm1f
    held 16-bit elu at 82-94% of the copy roofline); one ulp of the narrow result."""
    x, alpha = args
    return _positive_or(x, ty, arith.mulf(_expm1_mufu(x, ty), alpha))


def selu(args: list[Value], ty: Type) -> Value:
    """elu with scale: x > 0 ? x * scale : expm1(x) * (alpha * scale), the constants
    rounded to float and their product taken in float, as torch does."""
    return _selu(args[0], ty, mlir_math.expm1(args[0]))


def selu_narrow(args: list[Value], ty: Type) -> Value:
    """selu where the result is narrower than f32: expm1 by _expm1_mufu, as elu_narrow."""
    return _selu(args[0], ty, _expm1_mufu(args[0], ty))


def _selu(x: Value, ty: Type, expm1: Value) -> Value:
    scale = _f32(SELU_SCALE)
    negative = _f32(_f32(SELU_ALPHA) * scale)
    positive = arith.mulf(x, const(ty, scale))
    below = arith.mulf(expm1, const(ty, negative))
    return arith.select(compare("gt", x, const(ty, 0.0)), positive, below)


def sigmoid(args: list[Value], ty: Type) -> Value:
    """1 / (1 + exp(-x))."""
    x = args[0]
    one = const(ty, 1.0)
    return arith.divf(one, arith.addf(one, mlir_math.exp(arith.negf(x))))


def silu(args: list[Value], ty: Type) -> Value:
    """x / (1 + exp(-x))."""
    x = args[0]
    return arith.divf(x, arith.addf(const(ty, 1.0), mlir_math.exp(arith.negf(x))))


SILU_TAIL = -80.0
"""Below it silu_narrow takes x * e^x: 1 + e^-x passes 2^115 there, and div.approx's
divisor must stay under 2^126 (from x = -87.3 it returns 0, where bf16 still holds
x / (1 + e^-x), down to about -1e-38 at x = -88); e^x / (1 + e^x) and e^x differ by
under 2^-115 of it."""


def silu_narrow(args: list[Value], ty: Type) -> Value:
    """silu where the result is f16, bf16 or fp8 (computed in f32): x / (1 + e^-x) with
    e^-x by ex2.approx and the quotient by div.approx, x * e^x below SILU_TAIL, in place
    of libdevice's expf and an IEEE division. The f32 result is within 2^-17 of the
    exact one (relative: ex2's argument rounds, up to 2^-17.7 at |x| = 80; the sum and
    the quotient add a few ulps), so the narrow result is the correctly rounded one or
    its neighbour (one ulp); NaN and the infinities as in `silu` (-inf gives NaN)."""
    x = args[0]
    quotient = _lanewise(DIV_APPROX, x, arith.addf(const(ty, 1.0), _exp_mufu(arith.negf(x), ty)))
    tail = arith.mulf(x, _exp_mufu(x, ty))
    return arith.select(compare("lt", x, const(ty, SILU_TAIL)), tail, quotient)


def sigmoid_narrow(args: list[Value], ty: Type) -> Value:
    """sigmoid where the result is f16, bf16 or fp8 (computed in f32): 1 / (1 + e^-x) with
    e^-x by ex2.approx and the quotient by div.approx, e^x below SILU_TAIL (where 1 + e^-x
    would pass div.approx's 2^126), as silu_narrow; within a few f32 ulps of the exact
    result, so the narrow one is the correctly rounded one or its neighbour (one ulp). 0
    at -inf, 1 at +inf, NaN for NaN, as `sigmoid`."""
    x = args[0]
    one = const(ty, 1.0)
    quotient = _lanewise(DIV_APPROX, one, arith.addf(one, _exp_mufu(arith.negf(x), ty)))
    return arith.select(compare("lt", x, const(ty, SILU_TAIL)), _exp_mufu(x, ty), quotient)


def gelu(args: list[Value], ty: Type) -> Value:
    """x * 0.5 * (1 + erf(x * M_SQRT1_2))."""
    x = args[0]
    erf = mlir_math.erf(arith.mulf(x, const(ty, _f32(_SQRT1_2))))
    return arith.mulf(arith.mulf(x, const(ty, 0.5)), arith.addf(const(ty, 1.0), erf))


def gelu_tanh(args: list[Value], ty: Type) -> Value:
    """0.5 * x * (1 + tanh(kBeta * (x + kKappa * x^3))); nvcc contracts the inner
    x + kKappa * x^3 into one fma, and so does this body."""
    x = args[0]
    cube = arith.mulf(arith.mulf(x, x), x)
    inner = arith.mulf(const(ty, _f32(_GELU_BETA)),
                       mlir_math.fma(const(ty, _f32(_GELU_KAPPA)), cube, x))
    tanh = mlir_math.tanh(inner)
    return arith.mulf(arith.mulf(const(ty, 0.5), x), arith.addf(const(ty, 1.0), tanh))


def tanh(args: list[Value], _: Type) -> Value:
    return mlir_math.tanh(args[0])


def hardsigmoid(args: list[Value], ty: Type) -> Value:
    """min(max(x + 3, 0), 6) * (1/6), std::max/std::min (NaN passes through)."""
    x = args[0]
    clipped = _std_min(_std_max(arith.addf(x, const(ty, 3.0)), const(ty, 0.0)), const(ty, 6.0))
    return arith.mulf(clipped, const(ty, _f32(1.0 / 6.0)))


def hardswish(args: list[Value], ty: Type) -> Value:
    """x * min(max(x + 3, 0), 6) * (1/6), left to right (-inf gives NaN, as in torch)."""
    x = args[0]
    clipped = _std_min(_std_max(arith.addf(x, const(ty, 3.0)), const(ty, 0.0)), const(ty, 6.0))
    return arith.mulf(arith.mulf(x, clipped), const(ty, _f32(1.0 / 6.0)))


def hardtanh(args: list[Value], ty: Type) -> Value:
    """torch's hardtanh is clamp(x, min_val, max_val): NaN propagates."""
    return clamp(args, ty)


def softplus(args: list[Value], ty: Type) -> Value:
    """x * beta > threshold ? x : log1p(exp(x * beta)) * (1 / beta). The reciprocal is
    taken once, of the scalar (an IEEE division per element held the f16/bf16 rows at
    0.85x of Inductor, which divides approximately); the product is within one rounding
    of the quotient, and exact for the default beta = 1."""
    return _softplus(args, ty, lambda y: _log1p_exp(y, special=True))


def _softplus(args: list[Value], ty: Type, log1p_exp: Callable[[Value], Value]) -> Value:
    """softplus with log1p(exp(y)) built by `log1p_exp` (softplus's and softplus_narrow's)."""
    x, beta, threshold = args
    scaled = arith.mulf(x, beta)
    one = _lane0(beta)
    inverse = arith.divf(const(one.type, 1.0), one)
    if isinstance(ty, ir.VectorType):
        inverse = vector.broadcast(ty, inverse)
    smooth = arith.mulf(log1p_exp(scaled), inverse)
    return arith.select(compare("gt", scaled, threshold), x, smooth)


EXP_OVERFLOW = 88.72283935546875
"""The least f32 whose exp overflows (ln of f32's largest value, rounded up): torch's
log1p(exp(y)) is inf from there (where its threshold lets y through), and so is
softplus_narrow's, which would otherwise give y."""
LOG1P_SERIES = 2.0 ** -4
"""Below it, log1p(t) is its series to t^5 / 5 (relative error t^5 / 6 <= 2^-22.6);
from it, lg2(1 + t) * ln 2 (log1p >= 0.06 there: relative error <= 2^-18.5)."""


def softplus_narrow(args: list[Value], ty: Type) -> Value:
    """softplus where the result is f16, bf16 or fp8 (computed in f32): max(y, 0) +
    log1p(exp(-|y|)), y = x * beta, with the MUFU's ex2.approx and lg2.approx in place of
    libdevice's expf and log1pf (whose ~35 instructions an element held 16-bit softplus
    compute bound, below Inductor's fast exp). The f32 result is within 2^-17 of the
    exact one (relative: ex2's argument -|y| * log2(e) rounds to f32; LOG1P_SERIES), so
    the narrow result is the correctly rounded one or its neighbour (one ulp: the
    accuracy table's bound), subnormals included; NaN, the infinities, the threshold and
    exp's overflow (EXP_OVERFLOW) as in `softplus`."""
    return _softplus(args, ty, lambda y: _log1p_exp_mufu(y, ty))


def _log1p_exp_mufu(y: Value, ty: Type) -> Value:
    """log1p(exp(y)) as max(y, 0) + log1p(t), t = exp(-|y|) (softplus_narrow)."""
    t = _exp_mufu(arith.negf(mlir_math.absf(y)), ty)
    series, minus_t = const(ty, 1.0 / 5.0), arith.negf(t)
    for k in (4, 3, 2, 1):  # 1 - t/2 + t^2/3 - t^3/4 + t^4/5, by Horner
        series = mlir_math.fma(series, minus_t, const(ty, 1.0 / k))
    small = arith.mulf(t, series)
    large = arith.mulf(_lanewise(LG2_APPROX, arith.addf(const(ty, 1.0), t)),
                       const(ty, math.log(2.0)))
    log1p = arith.select(compare("lt", t, const(ty, LOG1P_SERIES)), small, large)
    total = arith.addf(arith.maximumf(y, const(ty, 0.0)), log1p)
    return arith.select(compare("ge", y, const(ty, EXP_OVERFLOW)), const(ty, math.inf), total)


F32_MAX = 3.4028234663852886e38
"""The largest finite f32."""


def _log1p_exp(y: Value, *, special: bool) -> Value:
    """log1p(exp(y)) by libdevice's expf and log1pf (torch's functions: its results bit for
    bit), log1pf's argument capped at F32_MAX and each lane's cap told to LLVM (an
    llvm.assume that its bits are below Inf's), which then folds away log1pf's branch
    for Inf, NaN and negative arguments: if-converted, that branch ran in every element
    (6 of the 53 SASS instructions an element of f32 mish). The cap moves only exp(y) =
    Inf (y > 88.72) and NaN y, to log1p(F32_MAX) = 88.72: with `special` those lanes
    take exp(y) back (Inf, NaN), as log1pf gives them; without, the caller's result is
    the same either way (mish: tanh(88.72) is 1, as tanh(Inf), and x is NaN)."""
    e = mlir_math.exp(y)
    if emit.element_type(y.type) != ir.F32Type.get():  # the cap and its bits are f32's
        return mlir_math.log1p(e)
    capped = arith.minnumf(e, const(y.type, F32_MAX))
    i32 = ir.IntegerType.get_signless(32)
    lanes = [vector.extract(capped, [], [k]) for k in range(_lanes(y.type))] \
        if isinstance(y.type, ir.VectorType) else [capped]
    for lane in lanes:
        finite = arith.cmpi(arith.CmpIPredicate.ult, arith.bitcast(i32, lane),
                            const(i32, 0x7F800000))
        llvm.intr_assume(finite, [], [])
    result = mlir_math.log1p(capped)
    if not special:
        return result
    unbounded = arith.cmpf(arith.CmpFPredicate.UGE, e, const(y.type, math.inf))  # Inf or NaN
    return arith.select(unbounded, e, result)


def mish(args: list[Value], _: Type) -> Value:
    """x * tanh(log1p(exp(x))): libdevice's expf, log1pf and tanhf, torch's own, so that
    f32 results are torch's bit for bit (log1p(exp(x)) by _log1p_exp: 47 SASS
    instructions an element, not 53). mish_narrow's n / (n + 2) with expf and an IEEE
    division would take ~25, but up to 6-7 ulps from the exact result (3.6 with a
    correctly rounded exp; torch's chain ~3), so f32 keeps torch's functions."""
    x = args[0]
    return arith.mulf(x, mlir_math.tanh(_log1p_exp(x, special=False)))


MISH_SATURATES = 20.0
"""From here on tanh(log1p(exp(x))) is 1 in f32 (1 - 2 exp(-2x) rounds to 1 from x = 9):
mish_narrow takes 1 there, where its quotient would overflow (from x = 44)."""


def mish_narrow(args: list[Value], ty: Type) -> Value:
    """mish where the result is f16, bf16 or fp8 (computed in f32): tanh(log1p(e^x)) is
    n / (n + 2) with n = e^x (e^x + 2), e^x by ex2.approx and the quotient by div.approx
    (libdevice's expf, log1pf and tanhf, some 50 instructions an element, held 16-bit
    mish at 61-73% of the copy roofline). The f32 result is within 2^-16 of the exact
    one (relative: ex2's argument rounds, the product and the quotient add a few ulps),
    so the narrow result is the correctly rounded one or its neighbour (one ulp); NaN
    and the infinities as in `mish` (-inf gives NaN: -inf * 0)."""
    x = args[0]
    e = _exp_mufu(x, ty)
    n = mlir_math.fma(e, e, arith.addf(e, e))
    ratio = _lanewise(DIV_APPROX, n, arith.addf(n, const(ty, 2.0)))
    ratio = arith.select(compare("gt", x, const(ty, MISH_SATURATES)), const(ty, 1.0), ratio)
    return arith.mulf(x, ratio)


def div_fp8(args: list[Value], ty: Type) -> Value:
    """a / b where a, b and the result are fp8: div.approx.f32 in place of the IEEE
    division, lane by lane. The fp8 results are the same: a quotient of two fp8 values
    is never within 2^-9 (relative) of a rounding boundary of the result's fp8 type
    unless it is exactly on one (a - m b, m a boundary of 5 significant bits, is a
    nonzero multiple of the operands' step), and exactly-on cases are a by a power of
    two, which rcp.approx and the product give exactly; 2 ulp of f32 is 2^-22. Inf,
    NaN, zeros and their signs come out of the product as IEEE's. The gpu tier
    compares every pair of fp8 values with the IEEE path."""
    return _lanewise(DIV_APPROX, *args)


# ----------------------------------------------------------- fused gated activations


def gated(activation: Body) -> Body:
    """act(a) * b on the two halves of the input, computed in the compute type and
    rounded once (FlashInfer's act_and_mul; vLLM rounds act(a) to the dtype first)."""
    def body(args: list[Value], ty: Type) -> Value:
        a, b = args
        return arith.mulf(activation([a], ty), b)

    return body


# --------------------------------------------------------------- generators
# Indexed rows (op_table): the last argument is each element's position (i64, base + its
# index in dst's row-major order); the integer scalars are i64 and sinusoidal's step and
# ratio f64, broadcast to the access's vector width like every scalar.

PHILOX_M = (0xD2511F53, 0xCD9E8D57)
"""Philox 4x32's multipliers (Salmon et al., SC'11; Random123's PHILOX_M4x32_0/1)."""
PHILOX_W = (0x9E3779B9, 0xBB67AE85)
"""Its Weyl key increments (the golden ratio and sqrt(3) - 1, as 32-bit fractions)."""
PHILOX_ROUNDS = 10


def _int(width: int) -> Type:
    return ir.IntegerType.get_signless(width)


def _i32(value: int) -> Value:
    """A 32-bit constant from its unsigned value."""
    return const(_int(32), value - (1 << 32) if value >= 1 << 31 else value)


def _lane0(value: Value) -> Value:
    """A scalar, or lane 0 of a vector (of a broadcast scalar: canonicalize folds it)."""
    if isinstance(value.type, ir.VectorType):
        return vector.extract(value, [], [0])
    return value


MULHI = "llvm.nvvm.mulhi.ui"
"""The high word of a 32x32 unsigned product (mul.hi.u32). arith.mului_extended's
lowering (a 64-bit product of zero-extended words) left LLVM keeping Philox's state in
64-bit registers (mul.lo.s64, xor.b64): twice the instructions."""


def mulhilo(a: Value, b: Value) -> tuple[Value, Value]:
    """(low, high) words of the unsigned product of two i32 scalars: mul.lo, mul.hi."""
    high = llvm.CallIntrinsicOp(a.type, MULHI, [a, b], [], []).results[0]
    return arith.muli(a, b), high


def philox4x32(counter: list[Value], key: list[Value]) -> list[Value]:
    """Philox 4x32-10 on i32 scalars: ten rounds of two 32x32->64 multiplies (mul.lo and
    mul.hi) and xors, the key bumped between rounds."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    m0, m1 = _i32(PHILOX_M[0]), _i32(PHILOX_M[1])
    for r in range(PHILOX_ROUNDS):
        if r:
            k0, k1 = arith.addi(k0, _i32(PHILOX_W[0])), arith.addi(k1, _i32(PHILOX_W[1]))
        lo0, hi0 = mulhilo(m0, c0)
        lo1, hi1 = mulhilo(m1, c2)
        c0, c1, c2, c3 = (arith.xori(arith.xori(hi1, c1), k0), lo1,
                          arith.xori(arith.xori(hi0, c3), k1), lo0)
    return [c0, c1, c2, c3]


def _split(value: Value) -> list[Value]:
    """An i64 as its (low, high) 32-bit words."""
    i32 = _int(32)
    return [arith.trunci(i32, value), arith.trunci(i32, arith.shrui(value, const(value.type, 32)))]


def random_words(position: Value, seed: Value, offset: Value) -> Value:
    """The stream (docs/ops.md, dropout): element i takes word i % 4 of Philox 4x32-10 at
    counter (offset + i // 4, 0) (a 128-bit counter, 64-bit halves) under the key seed,
    each 64-bit value as its (low, high) 32-bit words. An access of `vec` lanes, from
    position L on, spans at most (vec + 2) // 4 + 1 counters from L // 4: those are
    computed once, and lane l takes word l + L % 4 of them (three selects)."""
    vector_type = position.type if isinstance(position.type, ir.VectorType) else None
    lanes = ir.VectorType(vector_type).shape[0] if vector_type is not None else 1
    first, seed, offset = _lane0(position), _lane0(seed), _lane0(offset)
    i64 = first.type
    key = _split(seed)
    block = arith.shrui(first, const(i64, 2))  # positions are never negative
    shift = arith.trunci(_int(32), arith.andi(first, const(i64, 3)))
    zero = _i32(0)
    words: list[Value] = []
    for k in range((lanes + 2) // 4 + 1):
        counter = arith.addi(offset, arith.addi(block, const(i64, k)) if k else block)
        words += philox4x32([*_split(counter), zero, zero], key)
    picked = []
    for lane in range(lanes):
        word = words[lane]
        for s in (1, 2, 3):
            word = arith.select(arith.cmpi(arith.CmpIPredicate.eq, shift, _i32(s)),
                                words[lane + s], word)
        picked.append(word)
    if vector_type is None:
        return picked[0]
    return vector.from_elements(ir.VectorType.get([lanes], _int(32)), picked)


def _keep(position: Value, seed: Value, offset: Value, threshold: Value) -> Value:
    """Element kept: its word >= threshold (unsigned), threshold = floor(p * 2^32)."""
    words = random_words(position, seed, offset)
    limit = arith.trunci(emit.with_element_type(threshold.type, _int(32)), threshold)
    return arith.cmpi(arith.CmpIPredicate.uge, words, limit)


def dropout(args: list[Value], ty: Type) -> Value:
    """x * mask * scale, in the compute type, as torch's CUDA kernel computes it: a
    dropped element is x * 0 (a signed zero; NaN for NaN and Inf)."""
    x, scale, seed, offset, threshold, position = args
    mask = arith.uitofp(ty, _keep(position, seed, offset, threshold))
    return arith.mulf(arith.mulf(x, mask), scale)


def dropout_mask(args: list[Value], _: Type) -> Value:
    seed, offset, threshold, position = args
    return _keep(position, seed, offset, threshold)


def _f64(ty: Type) -> Type:
    return emit.with_element_type(ty, ir.F64Type.get())


def _lanes(ty: Type) -> int:
    """Lanes of a compute type: a vector's length, 1 for a scalar."""
    return ir.VectorType(ty).shape[0] if isinstance(ty, ir.VectorType) else 1


def _either(condition: Value, ty: Type, fast: Callable[[], Value],
            general: Callable[[], Value]) -> Value:
    """fast() where `condition` (uniform: a function of scalars) holds, else general():
    both built, one run."""
    branch = scf.IfOp(condition, [ty], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        scf.YieldOp([fast()])
    with ir.InsertionPoint(branch.else_block):
        scf.YieldOp([general()])
    result: Value = branch.results[0]
    return result


def alibi(args: list[Value], ty: Type) -> Value:
    """bias[h, j] = slope_h * j over (heads, length), position = h * length + j; with n
    the largest power of two <= heads, slope_h = 2^(-8(h+1)/n) for h < n and
    2^(-(8(h-n)+4)/n) for the rest (the odd powers of 2n heads' base, as the ALiBi
    paper's get_slopes and BLOOM's build_alibi_tensor). The scalars: length, n and
    length's division magic (op_table.division_magic: the position's head and column by a
    multiply-high and a shift, `_divide_magic`). The exponent is exact; exp2 and the
    product are computed in f64 and rounded once to f32. An access whose lanes see at
    most one head change (length at least its lane count, a uniform branch) divides once
    and takes two slopes (`_alibi_heads`); any other computes each lane's."""
    length, pow2, magic, position = args
    lanes = _lanes(ty)
    if lanes == 1:
        return _alibi_lanes(length, pow2, magic, position, ty)
    width = _lane0(length)
    wide = arith.cmpi(arith.CmpIPredicate.uge, width, const(width.type, lanes))
    return _either(wide, ty,
                   lambda: _alibi_heads(width, _lane0(pow2), _lane0(magic), position, ty),
                   lambda: _alibi_lanes(length, pow2, magic, position, ty))


def _divide_magic(a: Value, b: Value, magic: Value) -> tuple[Value, Value]:
    """(a / b, a % b) of unsigned i64 values (scalars or vectors), a < 2^63, 1 <= b < 2^63,
    by b's magic M (op_table.division_magic): a / b = mulhi(2a, M) >> l, l = ceil(log2 b)
    (64 less the leading zeros of b - 1: the b's, off the position's chain), a multiply-high
    and two shifts where a division took a branch to 32 bits and div.u32's sequence, or 64
    bits' much longer one. Measured (H100, 2026-12-07, bench/alibi_ab.py, torch.profiler
    over 200 calls a variant): ALiBi (32, 2048) f32's kernel 1.263 -> 1.190 us (Triton's
    1.06 beside each; the division by a constant 2048 a shift there)."""
    it = a.type
    shift = arith.subi(const(it, 64), llvm.intr_ctlz(arith.subi(b, const(it, 1)), False))
    _, high = arith.mului_extended(arith.shli(a, const(it, 1)), magic)
    quotient = arith.shrui(high, shift)
    return quotient, arith.subi(a, arith.muli(quotient, b))


def _alibi_slope(head: Value, pow2: Value, f64: Type) -> Value:
    """2^(-8(h+1)/n) for h < n, else 2^(-(8(h-n)+4)/n), in f64 (of `head`'s shape). The
    exponent is the integer times 1/n, exact: n = 2^k is an f64 of bits (1023 + k) << 52,
    1/n one of (1023 - k) << 52, their sum 2046 << 52 (a division took a Newton iteration
    and a fix-up branch). With a 32-bit branch of the head's division and _exp2_near, on an
    H100 (ALiBi (32, 2048) f32 at 128 threads of 16-byte stores, beside torch.compile's
    4.22-4.26 us in each run): 4.67 -> 4.48 -> 4.42 us (bench/part2.py: 0.89x -> 0.94x of
    torch.compile); of those ~4.4 us the kernel itself is ~1.25 (torch.profiler). No one
    piece of the arithmetic alone moved it: the kernel took 1.22 us (Triton's 0.96-0.99, in
    each run) with _exp2_near in Estrin's form (depth 4, not 13), with the slope from f32
    exp2, with a constant slope, without the division's 64-bit branch, and without the per-lane
    path (each change alone); nor did the geometry (64 to 512 threads, 4- to 32-byte
    stores, 1 or 2 rounds: 128 threads of 16 bytes, one of Triton's two configs, was the
    fastest). The whole body did: one that stores a constant (no division, no slope, no
    conversion) ran 4.38 -> 4.19 us, beside torch.compile's ALiBi and its fill of the same
    shape at 4.13 each (torch.profiler: our two kernels 1.14 us on average, the ALiBi
    one alone 1.22-1.25 in other runs, so the constant one ~1.04; Triton's 1.00 and 1.06).
    So the body's dependent chain (the position's division, the conversions to f64 and
    back, the slope) is ~190 ns of the call, and ~60 ns more are not the body's; not the
    launch either: from the previous kernel's end to the kernel's start took 0.99 us for
    ours and Triton's alike (torch eager's own kernels 0.96). Profiled again (H100,
    2026-12-07, torch.profiler over 50 calls a variant, each beside torch.compile): the
    kernel 1.24 us against Triton's 1.05; with the division by 2048 as a shift (Triton's,
    whose length is a constant) 1.19, with a constant slope 1.18, with both 1.08, and with
    _exp2_near in Estrin's form 1.25: the division and the slope are ~55-60
    ns each. The call (events, 200 repetitions) ran 1.07x of torch.compile's in that run:
    the ~3 us between the kernels move more from run to run than the kernels differ.
    Neither is the f64 pipe's throughput nor its conversions' latency the cost (H100,
    2026-12-07, 200 profiled calls a variant, Triton's kernel 0.99-1.01 us beside each,
    the results rounded once in all): this body 1.253 and 1.252 us; one with no
    conversion on the slope's way (integer splits of the exponent, 1.5 * 2^52 biases for
    the integers' f64s) 1.287, with the f64 -> f32 rounding by integer ops too 1.295,
    with its division as a shift 1.211, with one slope a thread 1.257; one that took one
    slope a thread only where an access stays in its row and f32 products (the slope as
    two f32s) 1.30. Each thing that lengthened the code slowed it, each that shortened
    it (a shift, one slope, a constant slope) sped it, whatever its latency; and not by
    the code's fetch after the L2's flush: with the L2 warm (no flush between calls) it
    ran 1.22 us against Triton's 0.98, and built without its partial-piece branch (all
    pieces whole) 1.25 flushed, 1.245 warm. The calls of those runs (events, 300
    repetitions) ranged 0.83x-1.09x of torch.compile's, two runs of this same kernel
    0.96x and 1.09x. With the division by the magic (_divide_magic) the kernel took 1.190
    us; a slope by the exponent's bits in its place (the integer part subtracted from the
    exponent, the fraction's top three bits as three selects of 2^-1/2, 2^-1/4, 2^-1/8 and
    two products, no series for up to 32 heads) 1.200, and with its integer work in 32
    bits 1.177 (H100, 2026-12-07, bench/alibi_ab.py then, 200 profiled calls a variant,
    Triton's 1.06 beside each): not worth a second body. Narrowed to f32 (the exponent
    times 1/n in f32, math.exp2 in f32, libdevice's exp2f; alibi_ab.py's _patched with
    _alibi_heads so written): the kernel 1.195 -> 1.115 us (the slope alone in f32, the
    product in f64: 1.156; Triton's 1.06 beside each; (12, 4097): 1.190 -> 1.111 against
    0.98), its largest relative error 1.57e-7 where this body's is 5.8e-8 (rounded once)
    and torch's f32 formula's (pow of 2 in f32, then the product; NumPy's on the host)
    9.1e-8: less exact than the f32 formula, and still slower than Triton's kernel, so
    not taken (H100, 2026-12-07, 200 profiled calls a variant)."""
    it = head.type
    eight = const(it, 8)
    first = arith.muli(arith.addi(head, const(it, 1)), eight)
    extra = arith.addi(arith.muli(arith.subi(head, pow2), eight), const(it, 4))
    exponent = arith.select(arith.cmpi(arith.CmpIPredicate.ult, head, pow2), first, extra)
    scale = arith.bitcast(it, arith.uitofp(f64, pow2))
    inverse = arith.bitcast(f64, arith.subi(const(it, 2046 << 52), scale))
    return _exp2_near(arith.mulf(arith.negf(arith.uitofp(f64, exponent)), inverse))


EXP2_SERIES = tuple(math.log(2) ** k / math.factorial(k) for k in range(14))
"""2^f = e^(f ln 2) = sum over k of (ln 2)^k / k! f^k, to degree 13: on |f| <= 1/2 the
terms left out sum to under (ln 2 / 2)^14 / 14! < 2^-57 of the result."""


def _exp2_near(t: Value) -> Value:
    """2^t in f64 (of t's shape) for |t| < 1000 (an ALiBi slope's exponent lies in
    [-8, 0): h < 2n heads): t = q + f with q the nearest integer (math.roundeven, as the
    sinusoidal pairs' quadrants) and |f| <= 1/2, 2^f by EXP2_SERIES in Horner's fused
    steps, q added to its exponent's bits. Straight-line code, where math.exp2
    (libdevice) branches to its cases of overflow, underflow and NaN, which kept two
    slopes' chains from overlapping."""
    ty = t.type
    bits_type = emit.with_element_type(ty, ir.IntegerType.get_signless(64))
    q = mlir_math.roundeven(t)
    f = arith.subf(t, q)
    p = const(ty, EXP2_SERIES[-1])
    for term in reversed(EXP2_SERIES[:-1]):
        p = mlir_math.fma(p, f, const(ty, term))
    shift = arith.shli(arith.fptosi(bits_type, q), const(bits_type, 52))
    return arith.bitcast(ty, arith.addi(arith.bitcast(bits_type, p), shift))


def _alibi_lanes(length: Value, pow2: Value, magic: Value, position: Value, ty: Type
                 ) -> Value:
    f64 = _f64(ty)
    head, column = _divide_magic(position, length, magic)
    return arith.truncf(ty, arith.mulf(_alibi_slope(head, pow2, f64),
                                       arith.uitofp(f64, column)))


def _alibi_heads(length: Value, pow2: Value, magic: Value, position: Value, ty: Type
                 ) -> Value:
    """One division for the access's first lane; lane l is at column j0 + l of its head,
    or j0 + l - length of the next."""
    lanes = ir.VectorType(ty).shape[0]
    i64, f64 = length.type, ir.F64Type.get()
    head, column = _divide_magic(_lane0(position), length, magic)
    slopes = [_alibi_slope(head, pow2, f64),
              _alibi_slope(arith.addi(head, const(i64, 1)), pow2, f64)]
    values = []
    for lane in range(lanes):
        at = arith.addi(column, const(i64, lane)) if lane else column
        wrapped = arith.cmpi(arith.CmpIPredicate.uge, at, length)
        at = arith.select(wrapped, arith.subi(at, length), at)
        slope = arith.select(wrapped, slopes[1], slopes[0])
        values.append(arith.truncf(emit.element_type(ty),
                                   arith.mulf(slope, arith.uitofp(f64, at))))
    return vector.from_elements(ty, values)


def sinusoidal(args: list[Value], ty: Type) -> Value:
    """PE[p, 2i] = sin(p * base^(-2i/dim)), PE[p, 2i+1] = cos(the same) over (positions,
    dim), position = p * dim + c; the scalars: the exponent step 2 log2(base) / dim of one
    column pair and its ratio 2^-step (f64), dim (i64).

    An access whose lanes see at most one row change (dim even and at least its lane
    count + 2, a uniform branch) takes `_sinusoidal_pairs`; any other (an odd or narrow
    dim) `_sinusoidal_lanes`, the formula per lane in f64."""
    step, ratio, dim, position = args
    width = _lane0(dim)
    even = arith.cmpi(arith.CmpIPredicate.eq, arith.andi(width, const(width.type, 1)),
                      const(width.type, 0))
    wide = arith.cmpi(arith.CmpIPredicate.uge, width, const(width.type, _lanes(ty) + 2))
    return _either(arith.andi(even, wide), ty,
                   lambda: _sinusoidal_pairs(width, _lane0(step), _lane0(ratio), position, ty),
                   lambda: _sinusoidal_lanes(dim, step, position, ty))


def _sinusoidal_lanes(dim: Value, step: Value, position: Value, ty: Type) -> Value:
    """The formula per lane: the angle p * exp2(-i * step) of column 2i or 2i + 1 in f64,
    the cosine as sin(angle + pi/2) (f64's rounding of the sum is far below f32's ulp),
    the result rounded once to f32."""
    it, f64 = position.type, _f64(ty)
    row, column = arith.divui(position, dim), arith.remui(position, dim)
    pair = arith.shrui(column, const(it, 1))
    odd = arith.andi(column, const(it, 1))
    angle = arith.mulf(arith.uitofp(f64, row),
                       mlir_math.exp2(arith.negf(arith.mulf(arith.uitofp(f64, pair), step))))
    phase = arith.addf(angle, arith.mulf(arith.uitofp(f64, odd), const(f64, math.pi / 2)))
    return arith.truncf(ty, mlir_math.sin(phase))


SIN_POLY = (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1)
"""sin x = x + x^3 (c3 + x^2 (c5 + x^2 c7)) on [-pi/4, pi/4], within an f32 ulp
(Cephes' sinf coefficients, highest degree first)."""
COS_POLY = (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2)
"""cos x = 1 - x^2 / 2 + x^4 (c4 + x^2 (c6 + x^2 c8)) on [-pi/4, pi/4] (Cephes' cosf)."""


def _horner(x2: Value, coefficients: tuple[float, ...]) -> Value:
    acc = const(x2.type, coefficients[0])
    for c in coefficients[1:]:
        acc = mlir_math.fma(acc, x2, const(x2.type, c))
    return acc


def _sin_cos_quarter(x: Value) -> tuple[Value, Value]:
    """(sin x, cos x) of an f32 |x| <= pi/4."""
    x2 = arith.mulf(x, x)
    sin = mlir_math.fma(arith.mulf(x, x2), _horner(x2, SIN_POLY), x)
    cos = mlir_math.fma(arith.mulf(x2, x2), _horner(x2, COS_POLY),
                        mlir_math.fma(x2, const(x.type, -0.5), const(x.type, 1.0)))
    return sin, cos


def _sinusoidal_pairs(dim: Value, step: Value, ratio: Value, position: Value, ty: Type
                      ) -> Value:
    """The lanes' column pairs computed once each (sin and cos share the angle), one
    exp2 per access: the pairs P0, P0 + 1, .. of its first lane's column have the
    frequencies w(P0) * ratio^j, a pair m past the row's end (of the next row) ratio^m.
    Each angle p * w / (pi/2) in quarter turns is f64 (a few roundings of 2^-53 of it:
    within 2^-30 of a quarter turn for p below 2^20), its nearest integer k the quadrant
    and the rest s, |s| <= 1/2, as x = s * pi/2 in f32; the result is sin x, cos x,
    -sin x or -cos x by k (and k + 1 for a cosine column): within two f32 ulps of the f64
    formula, where the plain f32 formula loses p * 2^-24 to its angle."""
    lanes = _lanes(ty)
    scalar = emit.element_type(ty)
    i64, i32, f64 = dim.type, _int(32), ir.F64Type.get()
    first = _lane0(position)
    row, column = arith.divui(first, dim), arith.remui(first, dim)
    shift = arith.andi(column, const(i64, 1))  # the first lane's column is a cosine's
    pair, half = arith.shrui(column, const(i64, 1)), arith.shrui(dim, const(i64, 1))
    slots = lanes // 2 + 1
    powers = [const(f64, 1.0)]
    for _ in range(1, slots):
        powers.append(arith.mulf(powers[-1], ratio))
    quarter = const(f64, 2.0 / math.pi)
    start = arith.mulf(mlir_math.exp2(arith.negf(arith.mulf(arith.uitofp(f64, pair), step))),
                       quarter)
    rows = [arith.uitofp(f64, row), arith.uitofp(f64, arith.addi(row, const(i64, 1)))]
    angles = []
    for j in range(slots):
        index = arith.addi(pair, const(i64, j)) if j else pair
        wrapped = arith.cmpi(arith.CmpIPredicate.uge, index, half)
        past = arith.subi(index, half)  # in [0, j] when wrapped
        restart = powers[0]
        for m in range(1, j + 1):
            restart = arith.select(arith.cmpi(arith.CmpIPredicate.eq, past, const(i64, m)),
                                   powers[m], restart)
        frequency = arith.select(wrapped, arith.mulf(restart, quarter),
                                 arith.mulf(start, powers[j]) if j else start)
        turns = arith.mulf(arith.select(wrapped, rows[1], rows[0]), frequency)
        nearest = mlir_math.roundeven(turns)
        x = arith.truncf(scalar, arith.mulf(arith.subf(turns, nearest),
                                            const(f64, math.pi / 2)))
        quadrant = arith.trunci(i32, arith.fptosi(i64, nearest))
        angles.append((quadrant, *_sin_cos_quarter(x)))
    odd_start = arith.cmpi(arith.CmpIPredicate.ne, shift, const(i64, 0))
    values = []
    for lane in range(lanes):
        picked = []
        for s in (0, 1):  # the first lane's column even, odd
            quadrant, sin, cos = angles[(s + lane) >> 1]
            picked.append((arith.addi(quadrant, _i32((s + lane) & 1)), sin, cos))
        quadrant = arith.select(odd_start, picked[1][0], picked[0][0])
        sin = arith.select(odd_start, picked[1][1], picked[0][1])
        cos = arith.select(odd_start, picked[1][2], picked[0][2])
        bit = arith.andi(quadrant, _i32(1))
        value = arith.select(arith.cmpi(arith.CmpIPredicate.ne, bit, _i32(0)), cos, sin)
        negative = arith.cmpi(arith.CmpIPredicate.ne, arith.andi(quadrant, _i32(2)), _i32(0))
        values.append(arith.select(negative, arith.negf(value), value))
    if lanes == 1 and not isinstance(ty, ir.VectorType):
        return values[0]
    return vector.from_elements(ty, values)


# ------------------------------------------------------------------ rope


def rope_first(args: list[Value], _: Type) -> Value:
    """RoPE's first output of a pair (x1, x2) rotated by the angle of (cos, sin):
    x1 * cos - x2 * sin, as one fma (nvcc contracts vLLM's CUDA kernel so)."""
    x1, x2, cos, sin = args
    return mlir_math.fma(x1, cos, arith.negf(arith.mulf(x2, sin)))


def rope_second(args: list[Value], _: Type) -> Value:
    """RoPE's second output of a pair: x2 * cos + x1 * sin, as one fma."""
    x1, x2, cos, sin = args
    return mlir_math.fma(x2, cos, arith.mulf(x1, sin))


# ------------------------------------------------------------ tuple reductions' merges


def online_softmax_merge(a: list[Value], b: list[Value]) -> list[Value]:
    """(m, s) of two parts: M = max(m_a, m_b) (NaN-propagating), S = s_a f_a + s_b f_b
    with f = exp(m - M), and f = 1 where m is M itself: the part holding the max keeps
    its sum exact, and two parts whose max is -inf (nothing yet, or a row of -inf) add
    their sums rather than make exp(-inf + inf) a NaN. exp by ex2.approx (_exp_mufu: a
    few ulp where m - M is near 0, the terms that weigh; 0 below -87): the merges stand
    one after another (a cluster of 16 CTAs of 256 threads: 5 for the lanes, 7 for the
    warps, 15 for the CTAs), where the precise expf's range reduction lengthens each."""
    (m_a, s_a), (m_b, s_b) = a, b
    ty = m_a.type
    top = maximum([m_a, m_b], ty)
    one = const(ty, 1.0)

    def factor(m: Value) -> Value:
        return arith.select(compare("eq", m, top), one, _exp_mufu(arith.subf(m, top), ty))

    return [top, mlir_math.fma(s_a, factor(m_a), arith.mulf(s_b, factor(m_b)))]


def welford_merge(a: list[Value], b: list[Value]) -> list[Value]:
    """(n, mean, M2) of two disjoint parts (Chan, Golub and LeVeque): n = n_a + n_b,
    d = mean_b - mean_a, mean = mean_a + d n_b / n, M2 = M2_a + M2_b + d^2 n_a n_b / n;
    an empty part (n = 0) leaves the other as it is. n_b / n by div.approx (within 2
    ulp): the IEEE division's slow path is a subroutine call, which cost a cluster's
    layer norm kernel 80 registers more (158 against 80 on rows of 2^18 bf16)."""
    (n_a, mean_a, m2_a), (n_b, mean_b, m2_b) = a, b
    ty = n_a.type
    zero = const(ty, 0.0)
    n = arith.addf(n_a, n_b)
    share = arith.select(compare("gt", n, zero), _lanewise(DIV_APPROX, n_b, n), zero)
    d = arith.subf(mean_b, mean_a)
    mean = mlir_math.fma(d, share, mean_a)
    spread = arith.mulf(arith.mulf(d, d), arith.mulf(n_a, share))
    return [n, mean, arith.addf(arith.addf(m2_a, m2_b), spread)]
