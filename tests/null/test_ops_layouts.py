"""null tier: the op library's kernels on every layout and strategy, on the pretend device.

Broadcast patterns (seed 004's table), non-contiguous and misaligned inputs,
in-place and cast outputs, empty, one-element and 0-d arrays, 64-bit indices,
each strategy and piece shape, and the API forms with torch's special cases
(division by a scalar, pow's exponents, alpha, clamp's missing bounds,
nan_to_num's defaults). Results are compared exactly: every case here uses
exact ops.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from support.emulated import Device, EmuArray

from tile_mlir import ops
from tile_mlir.op_table import refs
from tile_mlir.ops import coalesce, strategy
from tile_mlir.ops.programs.elementwise import Strategy


def _normal(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any = np.float32
            ) -> np.ndarray:
    return (rng.standard_normal(shape) * 4).astype(dtype)


def _same(got: EmuArray, want: np.ndarray) -> None:
    values = got.numpy()
    assert values.shape == want.shape and values.dtype == want.dtype
    bits = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[values.dtype.itemsize]
    np.testing.assert_array_equal(np.atleast_1d(values).view(bits),
                                  np.atleast_1d(np.ascontiguousarray(want)).view(bits))


B, H, S, D = 2, 3, 33, 64


@pytest.mark.parametrize(("x_shape", "y_shape"), [
    ((B, S, D), (B, S, D)),  # same shape
    ((B, S, D), (1, 1, D)),  # bias add
    ((B, S, D), (B, S, 1)),  # scaling
    ((B, H, S, S), (1, 1, S, S)),  # attention mask
    ((B, H, S, S), (B, 1, 1, S)),  # interleaved
    ((77, 1), (1, 45)),  # outer product
    ((5, 3001), (3001,)),  # rows longer than a vector count, with a tail
], ids=["same", "bias", "scaling", "mask", "interleaved", "outer", "tail"])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_broadcast_patterns(device: Device, rng: np.random.Generator, x_shape: tuple[int, ...],
                            y_shape: tuple[int, ...], dtype: str) -> None:
    np_type = np.float32 if dtype == "f32" else ml_dtypes.bfloat16
    x, y = _normal(rng, x_shape, np_type), _normal(rng, y_shape, np_type)
    got = ops.add(device.array(x), device.array(y))
    _same(got, (x.astype(np.float32) + y.astype(np.float32)).astype(np_type))
    got = ops.mul(device.array(y), device.array(x))  # the broadcast operand first
    _same(got, (y.astype(np.float32) * x.astype(np.float32)).astype(np_type))


def test_rows_mode(device: Device, rng: np.random.Generator) -> None:
    """Rows longer than four pieces are cut along the row (with a ragged last piece)."""
    x, y = _normal(rng, (3, 40001)), _normal(rng, (40001,))
    got = ops.sub(device.array(x), device.array(y))
    _same(got, x - y)
    assert "; rows," in device.launches[-1]


def test_non_contiguous_inputs(device: Device, rng: np.random.Generator) -> None:
    base = _normal(rng, (40, 30))
    a = device.array(base)
    transposed = a.view((30, 40), (1, 30))
    every_other = a.view((20, 30), (60, 1))
    reversed_rows = a.view((40, 30), (-30, 1), offset=39 * 30)
    _same(ops.neg(transposed), -base.T)
    _same(ops.add(every_other, every_other), base[::2] + base[::2])
    _same(ops.maximum(reversed_rows, a), np.maximum(base[::-1], base))
    column = a.view((40, 1), (30, 1), offset=7)  # one column, broadcast across rows
    _same(ops.mul(a, column), base * base[:, 7:8])


@pytest.mark.parametrize("offset", [1, 2, 3])
def test_misaligned_views(device: Device, rng: np.random.Generator, offset: int) -> None:
    x, y = _normal(rng, (1000,)), _normal(rng, (1000,))
    got = ops.add(device.array(x, offset=offset), device.array(y))
    _same(got, x + y)
    assert "+offset" in device.launches[-1]


def test_in_place_and_cast_out(device: Device, rng: np.random.Generator) -> None:
    x, y = _normal(rng, (4, 513)), _normal(rng, (4, 513))
    a = device.array(x)
    assert ops.add(a, device.array(y), out=a) is a
    _same(a, x + y)
    half = device.empty((4, 513), "f16")
    ops.mul(device.array(x), device.array(y), out=half)
    _same(half, (x * y).astype(np.float16))
    assert len(device.launches) == 3  # the product in f32, then the cast


def test_empty_one_element_and_zero_dim(device: Device, rng: np.random.Generator) -> None:
    empty = device.array(np.zeros((0, 5), np.float32))
    result = ops.exp(empty)
    assert result.shape == (0, 5) and not device.launches
    one = device.array(np.array([2.5], np.float32))
    _same(ops.mul(one, one), np.array([6.25], np.float32))
    zero_dim = device.array(np.array(3.0, np.float32))
    row = _normal(rng, (7,))
    _same(ops.add(zero_dim, device.array(row)), row + np.float32(3.0))
    _same(ops.sqrt(zero_dim), np.sqrt(np.array(3.0, np.float32)))


def test_64_bit_indices(device: Device, rng: np.random.Generator,
                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels with 64-bit index math (forced here; arrays past 2^31 get them)."""
    monkeypatch.setattr(coalesce, "fits_32_bits", lambda *args: False)
    x, y = _normal(rng, (3, 1001)), _normal(rng, (1001,))
    _same(ops.add(device.array(x), device.array(y)), x + y)
    assert ", i64," in device.launches[-1]


STRATEGIES = [
    Strategy(256, 1, 1, 1),  # direct
    Strategy(256, 16, 4, 1),  # vectors, in turn
    Strategy(256, 16, 4, 4),  # staged
    Strategy(128, 32, 2, 2),  # 32-byte vectors
    Strategy(512, 16, 8, 4),  # staged in two groups
    Strategy(64, 16, 3, 3),  # an odd round count
    Strategy(256, 8, 2, 2),  # 8-byte vectors, staged
    Strategy(128, 8, 1, 1),
]


@pytest.fixture(params=STRATEGIES, ids=lambda s: f"t{s.threads}v{s.vector_bytes}r{s.rounds}s{s.stage}")
def forced(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Strategy]:
    choice: Strategy = request.param
    monkeypatch.setattr(strategy, "choose", lambda *args, **kwargs: choice)
    yield choice


@pytest.mark.parametrize("shape", [(100003,), (37, 1500), (3, 9000)], ids=["flat", "blocks", "rows"])
def test_strategies(device: Device, rng: np.random.Generator, forced: Strategy,
                    shape: tuple[int, ...]) -> None:
    x, y = _normal(rng, shape), _normal(rng, shape[-1:])
    _same(ops.add(device.array(x), device.array(y)), x + y)
    h = _normal(rng, shape, np.float16)
    _same(ops.gt(device.array(h), 0.5), h > np.float16(0.5))
    assert f"{forced.threads} threads x {forced.rounds} rounds" in device.launches[-1]


@pytest.mark.parametrize("choice", [Strategy(256, 8, 2, 2), Strategy(128, 8, 1, 1)],
                         ids=["t256v8r2s2", "t128v8r1s1"])
def test_8_byte_vectors_of_every_element_size(device: Device, rng: np.random.Generator,
                                              choice: Strategy,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """An 8-byte vector is one i64, two f32, four f16 or eight bytes (bool, fp8); a size
    that leaves a tail past the last full vector."""
    monkeypatch.setattr(strategy, "choose", lambda *args, **kwargs: choice)
    n = 3 * 8 * choice.threads * choice.rounds + 13
    i = rng.integers(-1 << 40, 1 << 40, n)
    _same(ops.add(device.array(i), device.array(i[::-1].copy())), i + i[::-1])
    flags = rng.random(n) < 0.5
    a, b = _normal(rng, (n,), ml_dtypes.float8_e5m2), _normal(rng, (n,), ml_dtypes.float8_e5m2)
    _same(ops.where(device.array(flags), device.array(a), device.array(b)), np.where(flags, a, b))
    _same(ops.logical_not(device.array(flags)), ~flags)
    h = _normal(rng, (n,), np.float16)
    _same(ops.neg(device.array(h)), -h)
    assert f"{choice.threads} threads x {choice.rounds} rounds of 8 B" in device.launches[-1]


def test_large_staged_default(device: Device, rng: np.random.Generator) -> None:
    """From 2^19 elements the default stages two rounds per thread (four from 2^24)."""
    x, y = _normal(rng, ((1 << 20) + 17,)), _normal(rng, ((1 << 20) + 17,))
    _same(ops.add(device.array(x), device.array(y)), x + y)
    assert "256 threads x 2 rounds of 16 B, stage 2" in device.launches[-1]


def test_one_kernel_serves_every_size_and_scalar(device: Device, rng: np.random.Generator
                                                 ) -> None:
    for n, s in ((1000, 2.0), (5000, -1.5), (777, 0.25)):
        x = _normal(rng, (n,))
        _same(ops.mul(device.array(x), s), x * np.float32(s))
    assert len(set(device.launches)) == 1


# --------------------------------------------------- torch's special forms


def test_promotion_of_mixed_operands(device: Device, rng: np.random.Generator) -> None:
    h, f = _normal(rng, (300,), np.float16), _normal(rng, (300,))
    i = rng.integers(-100, 100, 300).astype(np.int32)
    _same(ops.add(device.array(h), device.array(f)), h.astype(np.float32) + f)
    _same(ops.mul(device.array(i), 0.5), i.astype(np.float32) * np.float32(0.5))
    _same(ops.add(device.array(i), 3), i + np.int32(3))
    flags = rng.random(300) < 0.5
    _same(ops.add(device.array(flags), 2), flags.astype(np.int64) + 2)
    exp = ops.exp(device.array(np.arange(5, dtype=np.int32))).numpy()
    assert exp.dtype == np.float32
    np.testing.assert_allclose(exp, np.exp(np.arange(5.0)), rtol=1e-6)
    _same(ops.div(device.array(i), device.array(np.full(300, 4, np.int32))),
          (i / 4).astype(np.float32))


def test_division_by_a_number_multiplies_by_its_reciprocal(device: Device,
                                                          rng: np.random.Generator) -> None:
    x = _normal(rng, (2000,))
    _same(ops.div(device.array(x), 3.0), x * np.float32(1 / 3))
    _same(ops.div(device.array(x), 0.0), x * np.float32(np.inf))
    _same(ops.div(device.array(x), -0.0), x * np.float32(-np.inf))
    _same(ops.div(6.0, device.array(x)), np.float32(6.0) / x)
    n = np.array([7, -7, 7, -7, 0], np.int32)
    d = np.array([2, 2, -2, -2, 3], np.int32)
    _same(ops.div(device.array(n), device.array(d), rounding_mode="trunc"),
          np.array([3, -3, -3, 3, 0], np.int32))
    _same(ops.div(device.array(n), device.array(d), rounding_mode="floor"),
          np.array([3, -4, -4, 3, 0], np.int32))


def test_pow_special_exponents(device: Device, rng: np.random.Generator) -> None:
    x = np.abs(_normal(rng, (500,))) + np.float32(0.1)
    x[:3] = [np.inf, -np.inf, 0.0]
    a = device.array(x)
    with np.errstate(all="ignore"):
        _same(ops.pow(a, 2), x * x)
        _same(ops.pow(a, 3.0), x * x * x)
        _same(ops.pow(a, -2), np.float32(1) / (x * x))
        _same(ops.pow(a, 0.5), np.sqrt(x))  # sqrt(-inf) is NaN, as torch's pow gives
        _same(ops.pow(a, -1), np.float32(1) / x)
    i = np.arange(-4, 5, dtype=np.int64)
    _same(ops.pow(device.array(i), 3), i ** 3)
    _same(ops.pow(device.array(np.array([1, -1, -1, 2, 0], np.int32)),
                  device.array(np.array([-3, -3, -4, -1, 0], np.int32))),
          np.array([1, -1, 1, 0, 1], np.int32))


def test_pow_of_a_tensor_exponent_is_cs_pow() -> None:
    """pow(x, a 0-d tensor of 0.5) is C's pow, as the kernel's powf (and torch's on CUDA)
    compute it: +inf at -inf and +0.0 at -0.0, where NumPy given a scalar exponent of
    0.5 takes the square root (NaN, -0.0); differential seed 3015693185's case 133 met
    the -inf. A number exponent of 0.5 stays sqrt (test_pow_special_exponents)."""
    x = np.array([-np.inf, -0.0, 4.0, -2.0], np.float32)
    with np.errstate(all="ignore"):
        got = refs.pow_(x, np.array(0.5, np.float32))
    assert got.dtype == np.float32 and got.shape == (4,)
    assert got[0] == np.inf and got[1] == 0 and not np.signbit(got[1]) and got[2] == 2
    assert np.isnan(got[3])
    assert refs.pow_(np.float32(-np.inf), np.float32(0.5)) == np.inf  # both 0-d


def test_alpha_is_one_fma(device: Device, rng: np.random.Generator) -> None:
    x, y = _normal(rng, (1000,)), _normal(rng, (1000,))
    fused = (x.astype(np.float64) + np.float64(np.float32(0.3)) * y.astype(np.float64))
    _same(ops.add(device.array(x), device.array(y), alpha=0.3), fused.astype(np.float32))
    fused = (x.astype(np.float64) - np.float64(np.float32(2.5)) * y.astype(np.float64))
    _same(ops.sub(device.array(x), device.array(y), alpha=2.5), fused.astype(np.float32))
    i = np.arange(10, dtype=np.int32)
    _same(ops.sub(device.array(i), device.array(i), alpha=3), i - 3 * i)


def test_clamp_bounds(device: Device, rng: np.random.Generator) -> None:
    x = _normal(rng, (999,))
    x[:2] = [np.nan, -np.inf]
    a = device.array(x)
    _same(ops.clamp(a, min=-1.0), np.maximum(x, np.float32(-1)))
    _same(ops.clamp(a, max=0.5), np.minimum(x, np.float32(0.5)))
    low, high = _normal(rng, (999,)), np.float32(1.0)
    _same(ops.clamp(a, device.array(low), high), np.minimum(np.maximum(x, low), high))
    _same(ops.clamp(a, 2.0, -2.0), np.where(np.isnan(x), x, np.float32(-2.0)))
    nan = ops.clamp(a, float("nan"), 1.0).numpy()
    assert np.isnan(nan).all()
    i = rng.integers(-50, 50, 300).astype(np.int32)
    _same(ops.clamp(device.array(i), min=-10), np.maximum(i, -10).astype(np.int32))


def test_nan_to_num_defaults(device: Device) -> None:
    x = np.array([np.nan, np.inf, -np.inf, 1.5], np.float16)
    _same(ops.nan_to_num(device.array(x)), np.array([0, 65504, -65504, 1.5], np.float16))
    got = ops.nan_to_num(device.array(x.astype(np.float32)), nan=1.0, posinf=2.0)
    _same(got, np.array([1, 2, np.finfo(np.float32).min, 1.5], np.float32))
    i = np.array([1, 2, 3], np.int32)
    _same(ops.nan_to_num(device.array(i)), i)


def test_masked_fill_and_where(device: Device, rng: np.random.Generator) -> None:
    x = rng.integers(-9, 9, (6, 50)).astype(np.int64)
    mask = rng.random((50,)) < 0.5
    _same(ops.masked_fill(device.array(x), device.array(mask), 2.7),
          np.where(mask, np.int64(2), x))
    f = _normal(rng, (6, 50))
    _same(ops.where(device.array(mask), device.array(f), 0.0),
          np.where(mask, f, np.float32(0)))
    _same(ops.where(device.array(mask), 1.0, -1.0), np.where(mask, 1.0, -1.0).astype(np.float32))


def test_logical_and_comparison_nan(device: Device) -> None:
    x = np.array([np.nan, 0.0, -0.0, 1.0, np.inf], np.float32)
    a = device.array(x)
    _same(ops.logical_not(a), np.array([False, True, True, False, False]))
    _same(ops.logical_and(a, 1.0), np.array([True, False, False, True, True]))
    _same(ops.eq(a, a), np.array([False, True, True, True, True]))
    _same(ops.ne(a, a), np.array([True, False, False, False, False]))
    _same(ops.sign(a), np.array([0.0, 0.0, 0.0, 1.0, 1.0], np.float32))
    _same(ops.isfinite(a), np.array([False, True, True, True, False]))
