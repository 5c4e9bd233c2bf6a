"""The fused row ops' references and error bounds, for both tiers (tests/null/test_ops_rows.py
on the pretend device, tests/gpu/test_ops_rows.py on the GPU).

References are float64 NumPy over the rows (the last dim, or the normalized dims), on
the input's values (16-bit inputs converted exactly). The bounds hold an f32 computation
to what its order of operations allows: a sum over n terms may lose about n ulps of
f32 in the worst case (a tree of partial sums loses far less), the math functions a
few ulps, and the one rounding into the output's type half an ulp of it (a whole one
here). Where torch is present the gpu tier also measures torch's own error on the same
input and holds ours to it.
"""

from __future__ import annotations

import math

import numpy as np

from tile_mlir.dtypes import DTYPES

Array = np.ndarray
F32_EPS = float(np.finfo(np.float32).eps)
ULP = {"f32": F32_EPS, "f16": 2.0 ** -10, "bf16": 2.0 ** -7}
"""One ulp at 1.0 of each output type."""
TINY = {"f32": 2.0 ** -149, "f16": 2.0 ** -24, "bf16": 2.0 ** -133}
"""The step of each type's subnormals: the rounding error of a result that small."""


def f64(a: Array) -> Array:
    return np.asarray(a, np.float64)


def rows_of(x: Array, k: int) -> Array:
    """x as [M, N]: its last k dims merged."""
    n = math.prod(x.shape[x.ndim - k:]) if x.ndim else 1
    return x.reshape(-1, n)


def softmax(x: Array, dim: int = -1) -> Array:
    x = f64(x)
    shifted = x - x.max(axis=dim, keepdims=True)
    e = np.exp(shifted)
    result: Array = e / e.sum(axis=dim, keepdims=True)
    return result


def log_softmax(x: Array, dim: int = -1) -> Array:
    x = f64(x)
    shifted = x - x.max(axis=dim, keepdims=True)
    result: Array = shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True))
    return result


def rms_norm(x: Array, k: int, w: Array | None, eps: float) -> Array:
    x64 = f64(x)
    axes = tuple(range(x.ndim - k, x.ndim))
    result: Array = x64 / np.sqrt((x64 * x64).mean(axis=axes, keepdims=True) + eps)
    return result * f64(w) if w is not None else result


def layer_norm(x: Array, k: int, w: Array | None, b: Array | None, eps: float) -> Array:
    x64 = f64(x)
    axes = tuple(range(x.ndim - k, x.ndim))
    centered = x64 - x64.mean(axis=axes, keepdims=True)
    result: Array = centered / np.sqrt((centered * centered).mean(axis=axes, keepdims=True)
                                       + eps)
    if w is not None:
        result = result * f64(w)
    if b is not None:
        result = result + f64(b)
    return result


def added(x: Array, r: Array, dtype: str) -> Array:
    """vLLM's residual: x + r in f32, rounded to the inputs' dtype (what the kernel
    stores, bit for bit)."""
    total = np.asarray(x, np.float32) + np.asarray(r, np.float32)
    return total.astype(DTYPES[dtype].np_dtype())


def terms(n: int) -> float:
    """The f32 error of a sum of n terms, in units of each term's size: n in the worst
    case; plus a few ulps for the functions around it."""
    return n + 16.0


def softmax_bound(expected: Array, n: int, dtype: str) -> Array:
    bound: Array = np.abs(expected) * (terms(n) * F32_EPS + ULP[dtype]) + TINY[dtype]
    return bound


def log_softmax_bound(x: Array, expected: Array, n: int, dtype: str, dim: int = -1) -> Array:
    """(x - m) - log(s): each term's error relative to its size, then the rounding."""
    x = f64(x)
    shifted = np.abs(x - x.max(axis=dim, keepdims=True))
    logsum = np.abs(expected) + shifted  # |log s| = |y - (x - m)| <= |y| + |x - m|
    bound: Array = (shifted + logsum + 1.0) * terms(n) * F32_EPS + \
        np.abs(expected) * ULP[dtype] + TINY[dtype]
    return bound


def norm_bound(expected: Array, n: int, dtype: str, shift: Array | float = 0.0) -> Array:
    """A normalized value (times its weight, plus `shift`'s size: the bias)."""
    bound: Array = (np.abs(expected) + np.abs(shift)) * terms(n) * F32_EPS + \
        np.abs(expected) * ULP[dtype] + TINY[dtype]
    return bound


def sums_to_one(got: Array, n: int, dtype: str) -> None:
    """Softmax rows sum to 1 within the dtype's rounding (half an ulp of each element,
    an ulp of 1 in all) and the f32 sum's error."""
    sums = f64(got).reshape(-1, max(n, 1)).sum(axis=-1)
    error = np.abs(sums - 1.0)
    assert (error <= ULP[dtype] + terms(n) * F32_EPS).all(), \
        f"a softmax row sums to 1 +- {error.max():.3g}"


def check(got: Array, expected: Array, bound: Array, what: str) -> float:
    """Every element within its bound (NaN where expected is NaN, the same infinities);
    returns the largest error relative to the bound."""
    got64 = f64(got)
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(got64), nan), f"{what}: NaN where none is expected, or " \
        "a number where NaN is"
    inf = np.isinf(expected)
    assert np.array_equal(got64[inf], expected[inf]), f"{what}: infinities differ"
    finite = ~nan & ~inf
    error = np.abs(got64[finite] - expected[finite])
    worst = float((error / bound[finite]).max()) if error.size else 0.0
    assert worst <= 1.0, f"{what}: error {error.max():.3g} beyond its bound (x{worst:.2f})"
    return worst
