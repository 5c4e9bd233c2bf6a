"""NumPy references of the op registry's rows, with PyTorch's semantics.

Each reference takes NumPy arrays (or 0-d arrays for scalars) in the op's
compute type (float32 for the float ops on f32, f16, bf16 and fp8 data, the
integer type for integers, bool) and returns the result. Formulas that torch
evaluates in that precision (remainder, floor_divide, lerp, clamp...) are
evaluated in it too, so that exact ops can be compared bit for bit; the
transcendental functions are evaluated in float64 and rounded once, the
reference a kernel's error is measured against. Float64 inputs work as well
(the test cases of the compiler's primitives pass them).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

Array = Any  # np.ndarray; references are applied to arrays and 0-d arrays alike
Reference = Callable[..., Array]


def _is_float(x: Array) -> bool:
    return bool(np.issubdtype(np.asarray(x).dtype, np.floating))


def in_float64(fn: Callable[..., Array]) -> Reference:
    """fn evaluated in float64 on float inputs, the result in the inputs' float type."""
    def ref(*args: Array) -> Array:
        dtype = np.result_type(*args)
        if not np.issubdtype(dtype, np.floating):
            dtype = np.dtype(np.float32)  # integer inputs of a float op: torch's default
        with np.errstate(all="ignore"):
            result = fn(*[np.asarray(a, np.float64) for a in args])
        return np.asarray(result).astype(dtype)

    return ref


def _same(fn: Callable[..., Array]) -> Reference:
    """fn evaluated in the inputs' own type (exact or correctly rounded there)."""
    def ref(*args: Array) -> Array:
        with np.errstate(all="ignore"):
            return np.asarray(fn(*args))

    return ref


exp = in_float64(np.exp)
log = in_float64(np.log)
sqrt = in_float64(np.sqrt)
rsqrt = in_float64(lambda x: 1.0 / np.sqrt(x))
sin = in_float64(np.sin)
cos = in_float64(np.cos)
log1p = in_float64(np.log1p)
expm1 = in_float64(np.expm1)
erf = in_float64(np.vectorize(math.erf, otypes=[np.float64]))
reciprocal = in_float64(lambda x: 1.0 / x)
div = in_float64(np.divide)


def _c_power(base: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """C's pow, elementwise: np.power with the exponent a whole array of the result's
    shape. Given an exponent of 0.5 as a scalar (0-d, or broadcast: one value for every
    element), NumPy takes the square root instead, which differs from pow at -inf (NaN,
    not +inf) and -0.0 (-0.0, not +0.0)."""
    shape = np.broadcast_shapes(np.shape(base), np.shape(exponent))
    b, e = np.broadcast_arrays(np.atleast_1d(base), np.atleast_1d(exponent))
    return np.power(b, np.array(e)).reshape(shape)


def pow_(base: Array, exponent: Array) -> Array:
    if _is_float(base) or _is_float(exponent):
        return in_float64(_c_power)(base, exponent)
    return _pow_int(np.asarray(base), np.asarray(exponent))


def pow_scalar(base: Array, exponent: Array) -> Array:
    """pow with a scalar exponent: torch multiplies out 2, 3 and -2 in the compute type."""
    if not _is_float(base):
        return _pow_int(np.asarray(base), np.asarray(exponent))
    e = float(exponent)
    with np.errstate(all="ignore"):
        if e == 2.0:
            return np.asarray(base * base)
        if e == 3.0:
            return np.asarray(base * base * base)
        if e == -2.0:
            return np.asarray(np.ones_like(base) / (base * base))
    return in_float64(_c_power)(base, exponent)


def _pow_int(base: Array, exponent: Array) -> Array:
    """Wrapping square-and-multiply; negative exponents as torch's powi."""
    base, exponent = np.broadcast_arrays(base, exponent)
    dtype = np.result_type(base, exponent)
    result = np.ones(base.shape, dtype)
    square, rest = base.astype(dtype), exponent.astype(dtype)
    with np.errstate(over="ignore"):
        for _ in range(8 * dtype.itemsize - 1):
            result = np.where(rest & 1, result * square, result)
            square = square * square
            rest = (rest.view(np.dtype(f"u{dtype.itemsize}")) >> 1).view(dtype)
    odd = (exponent & 1) != 0
    negative = np.where(base == 1, 1, np.where(base == -1, np.where(odd, -1, 1), 0))
    return np.where(exponent < 0, negative.astype(dtype), result)


def sign(x: Array) -> Array:
    """(0 < x) - (x < 0): NaN and both zeros give +0 (torch; NumPy gives NaN)."""
    x = np.asarray(x)
    return ((x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)).astype(x.dtype)


def _rounding(fn: Callable[[Array], Array]) -> Reference:
    return lambda x: np.asarray(fn(x)) if _is_float(x) else np.asarray(x)


floor = _rounding(np.floor)
ceil = _rounding(np.ceil)
trunc = _rounding(np.trunc)
round_ = _rounding(np.rint)  # half to even, as torch.round

abs_ = _same(np.abs)
neg = _same(np.negative)
add = _same(np.add)
sub = _same(np.subtract)
mul = _same(np.multiply)


def add_alpha(a: Array, b: Array, alpha: Array) -> Array:
    """a + alpha * b with one rounding for floats (fma), wrapping for integers."""
    if not _is_float(a):
        with np.errstate(over="ignore"):
            return np.asarray(a + alpha * b)
    return fma(alpha, b, a)


def fma(a: Array, b: Array, c: Array) -> Array:
    """a * b + c rounded once: the float64 product of two float32s is exact."""
    dtype = np.result_type(a, b, c)
    if dtype == np.float64:
        return np.asarray(a * b + c)
    with np.errstate(all="ignore"):
        wide = np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.asarray(c, np.float64)
    return wide.astype(dtype)


def remainder(a: Array, b: Array) -> Array:
    with np.errstate(all="ignore"):
        rem = np.fmod(a, b)
        fix = (rem != 0) & ((rem < 0) != (b < 0))
        return np.asarray(np.where(fix, rem + b, rem))


def div_trunc(a: Array, b: Array, storage: str | None = None) -> Array:
    with np.errstate(all="ignore"):
        if _is_float(a):
            return np.asarray(np.trunc(_in_storage(a / b, storage)))
        quotient = np.abs(a) // np.abs(b)
        return np.asarray(np.where((a < 0) != (b < 0), -quotient, quotient)).astype(a.dtype)


def div_trunc_scalar(a: Array, inverse: Array) -> Array:
    """div(rounding_mode="trunc") by a number: trunc(a * (1/b)) (bodies.py)."""
    with np.errstate(all="ignore"):
        return np.asarray(np.trunc(a * inverse))


def floor_divide(a: Array, b: Array, storage: str | None = None) -> Array:
    if not _is_float(a):
        with np.errstate(all="ignore"):
            return np.asarray(np.floor_divide(a, b))
    return _floor_divide_float(a, b, np.divide, storage)


def floor_divide_scalar(a: Array, b: Array, inverse: Array, storage: str | None = None
                        ) -> Array:
    """floor_divide by a number: torch multiplies by its reciprocal (bodies.py)."""
    return _floor_divide_float(a, b, lambda x, _: x * inverse, storage)


def _floor_divide_float(a: Array, b: Array, divide: Callable[[Array, Array], Array],
                        storage: str | None) -> Array:
    with np.errstate(all="ignore"):
        mod = np.fmod(a, b)
        quotient = divide(a - mod, b)
        quotient = np.where((mod != 0) & ((b < 0) != (mod < 0)), quotient - 1, quotient)
        floor = _in_storage(np.floor(quotient), storage)
        floor = np.where(quotient - floor > 0.5, _in_storage(floor + 1, storage), floor)
        zero = np.copysign(np.zeros_like(quotient), divide(a, b))
        result = np.where(quotient != 0, floor, zero)
        return np.asarray(np.where(b == 0, divide(a, b), result))


def _in_storage(x: Array, storage: str | None) -> Array:
    """x rounded to the `storage` type and back, as the kernels round (e4m3 saturates)."""
    if storage is None:
        return x
    from tile_mlir.dtypes import DTYPES

    if storage == "f8e4m3":
        x = np.where(np.isnan(x), x, np.clip(x, -448.0, 448.0))
    return np.asarray(x).astype(DTYPES[storage].np_dtype()).astype(np.asarray(x).dtype)


def lerp(start: Array, end: Array, weight: Array) -> Array:
    with np.errstate(all="ignore"):
        diff = end - start
        low = fma(weight, diff, start)
        high = fma(-diff, np.ones_like(weight) - weight, end)
        return np.asarray(np.where(np.abs(weight) < 0.5, low, high))


maximum = _same(np.maximum)  # NaN-propagating; logical or on bools
minimum = _same(np.minimum)


def clamp(x: Array, low: Array, high: Array) -> Array:
    return minimum(maximum(np.asarray(x), np.asarray(low)), np.asarray(high))


eq = _same(np.equal)
ne = _same(np.not_equal)
gt = _same(np.greater)
lt = _same(np.less)
ge = _same(np.greater_equal)
le = _same(np.less_equal)

bitwise_and = _same(np.bitwise_and)
bitwise_or = _same(np.bitwise_or)
bitwise_xor = _same(np.bitwise_xor)
bitwise_not = _same(np.invert)
logical_not = _same(np.logical_not)
logical_and = _same(np.logical_and)
logical_or = _same(np.logical_or)


def where(condition: Array, x: Array, y: Array) -> Array:
    return np.asarray(np.where(np.asarray(condition).astype(bool), x, y))


def masked_fill(x: Array, mask: Array, value: Array) -> Array:
    return np.asarray(np.where(np.asarray(mask).astype(bool), value, x))


def nan_to_num(x: Array, nan: Array, posinf: Array, neginf: Array) -> Array:
    x = np.asarray(x)
    if not _is_float(x):
        return x
    replaced = np.where(x == np.inf, posinf, np.where(x == -np.inf, neginf, x))
    return np.asarray(np.where(np.isnan(x), nan, replaced)).astype(x.dtype)


def isnan(x: Array) -> Array:
    return np.isnan(x) if _is_float(x) else np.zeros(np.shape(x), bool)


def isinf(x: Array) -> Array:
    return np.isinf(x) if _is_float(x) else np.zeros(np.shape(x), bool)


def isfinite(x: Array) -> Array:
    return np.isfinite(x) if _is_float(x) else np.ones(np.shape(x), bool)


def identity(x: Array) -> Array:
    return np.asarray(x)


def zero() -> Array:
    return np.zeros(())


# ---------------------------------------------------------------- activations
# torch's CUDA formulas (bodies.py): the transcendental ones in float64 and rounded once,
# the exact ones (relu, leaky_relu, prelu, hardtanh, hardsigmoid, hardswish) operation by
# operation in the compute type, as the kernels round.

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def relu(x: Array) -> Array:
    """clamp_min(x, 0): NaN kept, -0 gives +0."""
    x = np.asarray(x)
    return np.asarray(np.where((x > 0) | np.isnan(x), x, np.zeros_like(x)))


def leaky_relu(x: Array, slope: Array) -> Array:
    with np.errstate(all="ignore"):
        return np.asarray(np.where(x > 0, x, x * slope))


def prelu(x: Array, weight: Array) -> Array:
    with np.errstate(all="ignore"):
        return np.asarray(np.where(x > 0, x, weight * x))


def _f32(value: float) -> float:
    return float(np.float32(value))


_erf64 = np.vectorize(math.erf, otypes=[np.float64])


elu = in_float64(lambda x, alpha: np.where(x > 0, x, np.expm1(x) * alpha))
selu = in_float64(lambda x: np.where(x > 0, x * _f32(_SELU_SCALE),
                                     np.expm1(x) * _f32(_f32(_SELU_ALPHA) * _f32(_SELU_SCALE))))


def _exp_in(x: Array) -> Array:
    """exp(-x) for sigmoid and silu, rounded to x's type: infinite where the kernel's
    overflows (silu(-100) is -0 in torch's float formula, not -3.7e-42)."""
    with np.errstate(all="ignore"):
        return np.exp(-np.asarray(x, np.float64)).astype(np.asarray(x).dtype)


def sigmoid(x: Array) -> Array:
    return in_float64(lambda x, e: 1.0 / (1.0 + e))(x, _exp_in(x))


def silu(x: Array) -> Array:
    return in_float64(lambda x, e: x / (1.0 + e))(x, _exp_in(x))


tanh = in_float64(np.tanh)
gelu = in_float64(lambda x: x * 0.5 * (1.0 + _erf64(x * math.sqrt(0.5))))
gelu_tanh = in_float64(lambda x: 0.5 * x * (1.0 + np.tanh(
    math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x))))
mish = in_float64(lambda x: x * np.tanh(np.log1p(np.exp(x))))
softplus = in_float64(lambda x, beta, threshold: np.where(
    x * beta > threshold, x, np.log1p(np.exp(x * beta)) / beta))


def _std_clip(x: Array, low: float, high: float) -> Array:
    """std::min(std::max(x, low), high): NaN passes through."""
    x = np.where(x < low, np.asarray(low, x.dtype), x)
    return np.where(high < x, np.asarray(high, x.dtype), x)


def hardsigmoid(x: Array) -> Array:
    x = np.asarray(x)
    with np.errstate(all="ignore"):
        return np.asarray(_std_clip(x + x.dtype.type(3), 0.0, 6.0) * x.dtype.type(1 / 6))


def hardswish(x: Array) -> Array:
    x = np.asarray(x)
    with np.errstate(all="ignore"):
        return np.asarray(x * _std_clip(x + x.dtype.type(3), 0.0, 6.0) * x.dtype.type(1 / 6))


def hardtanh(x: Array, low: Array, high: Array) -> Array:
    return clamp(x, low, high)


# ----------------------------------------------------------- fused gated activations


def _gated(activation: Callable[[Array], Array]) -> Reference:
    """act(a) * b in float64, rounded once (bodies.gated)."""
    return in_float64(lambda a, b: activation(a) * b)




def silu_and_mul(a: Array, b: Array) -> Array:
    return in_float64(lambda a, e, b: a / (1.0 + e) * b)(a, _exp_in(a), b)


gelu_and_mul = _gated(lambda a: a * 0.5 * (1.0 + _erf64(a * math.sqrt(0.5))))
gelu_tanh_and_mul = _gated(lambda a: 0.5 * a * (1.0 + np.tanh(
    math.sqrt(2.0 / math.pi) * (a + 0.044715 * a * a * a))))


# --------------------------------------------------------------- generators
# The indexed rows' references take the row's inputs with, last, each element's position
# (its linear index plus the base); integer scalars may come as signed i64.

_PHILOX_M = (0xD2511F53, 0xCD9E8D57)
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)
_WORD = 0xFFFFFFFF


def _unsigned64(value: Array) -> int:
    return int(np.asarray(value)) & ((1 << 64) - 1)


def philox4x32_10(counter: tuple[Array, Array, Array, Array], key: tuple[int, int]
                  ) -> list[np.ndarray]:
    """Philox 4x32-10 (Salmon et al., SC'11) on arrays of 32-bit counter words, in uint64
    arithmetic: products of two 32-bit words are exact there."""
    c = [np.asarray(v, np.uint64) & np.uint64(_WORD) for v in counter]
    k0, k1 = np.uint64(key[0] & _WORD), np.uint64(key[1] & _WORD)
    m0, m1 = np.uint64(_PHILOX_M[0]), np.uint64(_PHILOX_M[1])
    for r in range(10):
        if r:
            k0 = (k0 + np.uint64(_PHILOX_W[0])) & np.uint64(_WORD)
            k1 = (k1 + np.uint64(_PHILOX_W[1])) & np.uint64(_WORD)
        p0, p1 = m0 * c[0], m1 * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k0, p1 & np.uint64(_WORD),
             (p0 >> np.uint64(32)) ^ c[3] ^ k1, p0 & np.uint64(_WORD)]
    return [w.astype(np.uint32) for w in c]


def random_words(position: Array, seed: Array, offset: Array) -> np.ndarray:
    """Element i's 32-bit word: word i % 4 of Philox 4x32-10 at counter
    (offset + i // 4 mod 2^64 as (low, high), 0, 0), key (seed low, seed high)."""
    index = np.asarray(position).astype(np.uint64)
    seed_, offset_ = _unsigned64(seed), _unsigned64(offset)
    counter = index // np.uint64(4) + np.uint64(offset_)  # wraps mod 2^64, as the kernel
    words = philox4x32_10((counter, counter >> np.uint64(32), 0, 0),
                          (seed_ & _WORD, seed_ >> 32))
    return np.choose((index % np.uint64(4)).astype(np.intp), words)


def dropout_mask(seed: Array, offset: Array, threshold: Array, position: Array) -> Array:
    """Kept: the element's word >= threshold = floor(p * 2^32)."""
    return random_words(position, seed, offset) >= np.uint32(_unsigned64(threshold))


def dropout(x: Array, scale: Array, seed: Array, offset: Array,  # noqa: PLR0917 - a row's
            threshold: Array, position: Array) -> Array:  # inputs, in order
    """x * mask * scale in x's (compute) type, as the kernel: dropped elements are x * 0."""
    x = np.asarray(x)
    mask = dropout_mask(seed, offset, threshold, position).astype(x.dtype)
    with np.errstate(all="ignore"):
        return x * mask * np.asarray(scale, x.dtype)


def alibi(length: Array, pow2: Array, magic: Array, position: Array) -> Array:
    """slope_h * j in float64 for position h * length + j (bodies.alibi's formula; `magic`,
    length's division magic, is the kernel's way to the head and column)."""
    index = np.asarray(position).astype(np.int64)
    n = int(np.asarray(pow2))
    head, column = np.divmod(index, int(np.asarray(length)))
    exponent = np.where(head < n, 8 * (head + 1), 8 * (head - n) + 4)
    return np.exp2(-exponent / n) * column


def sinusoidal(step: Array, ratio: Array, dim: Array,
               position: Array) -> Array:
    """sin / cos of p * 2^(-i * step) = p * base^(-2i/dim) in float64 for position
    p * dim + c, c = 2i or 2i+1, step = 2 log2(base) / dim (ratio = 2^-step is the
    kernel's)."""
    index = np.asarray(position).astype(np.int64)
    row, column = np.divmod(index, int(np.asarray(dim)))
    angle = row * np.exp2(-(column // 2) * float(step))
    return np.where(column % 2 == 1, np.cos(angle), np.sin(angle))


def tail_fill(x: Array, value: Array, limit: Array, position: Array) -> Array:
    """x where position < limit, else value (bodies.tail_fill)."""
    index = np.asarray(position).astype(np.int64)
    return np.asarray(np.where(index < int(np.asarray(limit)), x, value))


# ------------------------------------------------------------------ rope


def rope_first(x1: Array, x2: Array, cos: Array, sin: Array) -> Array:
    """x1 * cos - x2 * sin, the product x2 * sin rounded once and the rest fused."""
    x1, x2, cos, sin = (np.asarray(a) for a in (x1, x2, cos, sin))
    product = (x2 * sin).astype(x1.dtype)
    return np.asarray((x1.astype(np.float64) * cos - product).astype(x1.dtype))


def rope_second(x1: Array, x2: Array, cos: Array, sin: Array) -> Array:
    """x2 * cos + x1 * sin, the product x1 * sin rounded once and the rest fused."""
    x1, x2, cos, sin = (np.asarray(a) for a in (x1, x2, cos, sin))
    product = (x1 * sin).astype(x1.dtype)
    return np.asarray((x2.astype(np.float64) * cos + product).astype(x1.dtype))
