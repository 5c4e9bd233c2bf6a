"""null tier: any view an array library makes, every family takes (issue 16, part 1).

On the pretend device (emulated.py), for each family: offset (misaligned) views,
negative strides (as NumPy and CuPy make them: device views here, and NumPy arrays
copied in), expanded (zero-stride) inputs and transposes, against NumPy on the same
values; out= that is the very same view as an input is in place, any other overlap an
error naming out. The reductions' views are in test_ops_reductions.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from support.emulated import Device, EmuArray

from tile_mlir import ops
from tile_mlir.op_table import refs


def _views(device: Device, rng: np.random.Generator) -> list[tuple[str, EmuArray, np.ndarray]]:
    base = rng.standard_normal((24, 40)).astype(np.float32)
    buffer = device.array(base, offset=3)  # 12 bytes past a 16-byte boundary
    host = buffer.numpy()
    return [("offset", buffer, host),
            ("reversed rows", buffer.view((24, 40), (-40, 1), 23 * 40), host[::-1]),
            ("reversed columns", buffer.view((24, 40), (40, -1), 39), host[:, ::-1]),
            ("every third column", buffer.view((24, 13), (40, 3), 1), host[:, 1::3]),
            ("transposed", buffer.view((40, 24), (1, 40)), host.T),
            ("expanded", buffer.view((24, 40), (0, 1), 40), np.broadcast_to(host[1], (24, 40)))]


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view({1: np.uint8, 2: np.uint16, 4: np.uint32}[a.itemsize])


def test_elementwise(device: Device, rng: np.random.Generator) -> None:
    for label, view, values in _views(device, rng):
        np.testing.assert_array_equal(ops.neg(view).numpy(), -values, err_msg=label)
        np.testing.assert_array_equal(ops.maximum(view, 0.25).numpy(),
                                      np.maximum(values, np.float32(0.25)), err_msg=label)
        other = device.array(np.ascontiguousarray(values))
        np.testing.assert_array_equal(ops.sub(view, other).numpy(), np.zeros_like(values),
                                      err_msg=label)


def test_numpy_views_are_copied_in(device: Device, rng: np.random.Generator) -> None:
    """NumPy's negative-stride and strided views go through the device as their values."""
    x = rng.standard_normal((30, 17)).astype(np.float32)
    for view in (x[::-1], x[:, ::-2], x.T, np.broadcast_to(x[0], (5, 17)), x[3:4, 5]):
        np.testing.assert_array_equal(ops.neg(view), -view)
        np.testing.assert_allclose(ops.sum(view, dim=0), view.astype(np.float64).sum(0),
                                   rtol=1e-5, atol=1e-5)
        out = np.full(view.shape, np.nan, np.float32)
        assert ops.exp(view, out=out) is out
        np.testing.assert_allclose(out, np.exp(view), rtol=1e-6)


def test_in_place_views(device: Device, rng: np.random.Generator) -> None:
    """out= the very same (strided, misaligned) view as an input: in place; a strided
    view interleaved with the input's elements: allowed, as torch allows it; a dense view
    of the input's memory shifted by one element: refused, naming out."""
    base = rng.standard_normal((10, 21)).astype(np.float32)
    buffer = device.array(base, offset=1)
    view = buffer.view((10, 10), (21, 2), 1)
    want = np.exp(view.numpy())
    for _ in range(2):  # planned, then from the plan
        fresh = device.array(base, offset=1).view((10, 10), (21, 2), 1)
        assert ops.exp(fresh, out=fresh) is fresh
        np.testing.assert_allclose(fresh.numpy(), want, rtol=1e-6)
    between = buffer.view((10, 10), (21, 2), 2)  # the elements between view's
    assert ops.exp(view, out=between) is between
    np.testing.assert_allclose(between.numpy(), np.exp(view.numpy()), rtol=1e-6)
    dense = buffer.view((20,), (1,))
    with pytest.raises(ValueError, match="argument 'out' overlaps argument 'input'"):
        ops.exp(dense, out=buffer.view((20,), (1,), 1))
    numpy_in_place = base.copy()
    assert ops.exp(numpy_in_place, out=numpy_in_place) is numpy_in_place
    np.testing.assert_allclose(numpy_in_place, np.exp(base), rtol=1e-6)


def test_gated_and_prelu(device: Device, rng: np.random.Generator) -> None:
    x = rng.uniform(-2, 2, (12, 2 * 33)).astype(np.float32)
    buffer = device.array(x, offset=2)
    reversed_rows = buffer.view((12, 66), (-66, 1), 11 * 66)
    got = ops.silu_and_mul(reversed_rows).numpy()
    host = x[::-1].astype(np.float64)
    want = host[:, :33] / (1 + np.exp(-host[:, :33])) * host[:, 33:]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    weight = device.array(np.linspace(0.1, 0.5, 66).astype(np.float32)[::-1].copy(), offset=1)
    reversed_weight = weight.view((66,), (-1,), 65)  # a NumPy-style reversed view
    got = ops.prelu(buffer.view((12, 66), (66, 1)), reversed_weight).numpy()
    slope = np.linspace(0.1, 0.5, 66).astype(np.float32)
    np.testing.assert_array_equal(got, np.where(x > 0, x, slope * x))


def test_dropout(device: Device, rng: np.random.Generator) -> None:
    """Element i of the logical (row-major) order draws word i of the stream, whatever the
    view's layout."""
    threshold = math.floor(0.4 * 2**32)
    for label, view, values in _views(device, rng):
        got, mask = ops.dropout(view, 0.4, seed=17, offset=9, return_mask=True)
        index = np.arange(values.size, dtype=np.uint64)
        keep = refs.dropout_mask(17, 9, threshold, index).reshape(values.shape)
        want = refs.dropout(np.ascontiguousarray(values).reshape(-1), np.float32(1 / 0.6), 17,
                            9, threshold, index).reshape(values.shape)
        assert np.array_equal(mask.numpy(), keep), label
        assert np.array_equal(_bits(got.numpy()), _bits(want)), label
    host = rng.standard_normal((9, 7)).astype(np.float32)
    got = ops.dropout(host[::-1], 0.4, seed=17, offset=9)  # NumPy, reversed
    want = refs.dropout(np.ascontiguousarray(host[::-1]).reshape(-1), np.float32(1 / 0.6), 17,
                        9, threshold, np.arange(63, dtype=np.uint64)).reshape(9, 7)
    assert np.array_equal(_bits(got), _bits(want))


def test_dropout_in_place_and_out(device: Device, rng: np.random.Generator) -> None:
    x = rng.standard_normal((5, 50)).astype(np.float32)
    reference = ops.dropout(device.array(x), 0.5, seed=3).numpy()
    placed = device.array(x, offset=1)
    assert ops.dropout(placed, 0.5, seed=3, inplace=True) is placed
    assert np.array_equal(_bits(placed.numpy()), _bits(reference))
    out = device.empty((5, 50), "f32")
    assert ops.dropout(device.array(x), 0.5, seed=3, out=out) is out
    assert np.array_equal(_bits(out.numpy()), _bits(reference))
    eval_out = device.empty((5, 50), "f32")
    assert ops.dropout(device.array(x), 0.5, training=False, out=eval_out) is eval_out
    assert np.array_equal(eval_out.numpy(), x)


def test_generators_into_views(device: Device) -> None:
    like = device.array(np.zeros(1, np.float32))
    wide = device.empty((6, 2 * 37), "f32")
    out = wide.view((6, 37), (74, 2), 1)
    assert ops.alibi(6, 37, out=out) is out
    np.testing.assert_array_equal(out.numpy(), ops.alibi(6, 37, like=like).numpy())
    assert np.isnan(wide.numpy()[:, ::2]).all()  # the other columns untouched
    pe = ops.sinusoidal(9, 8, like=np.zeros(1, np.float32))
    assert isinstance(pe, np.ndarray) and pe.shape == (9, 8)
    np.testing.assert_array_equal(pe, ops.sinusoidal(9, 8, like=like).numpy())


def test_rope(device: Device, rng: np.random.Generator) -> None:
    """Tokens in reverse order (a negative token stride) and an offset start: the same
    rotation as the contiguous arrays give."""
    q = rng.standard_normal((6, 4, 32)).astype(np.float32)
    k = rng.standard_normal((6, 2, 32)).astype(np.float32)
    positions = np.array([3, 0, 7, 7, 1, 5])
    want_q, want_k = (a.numpy() for a in ops.rope_neox(
        device.array(q[::-1].copy()), device.array(k[::-1].copy()),
        device.array(positions[::-1].copy()), max_position=8))
    q_buf, k_buf = device.array(q, offset=1), device.array(k, offset=3)
    q_rev = q_buf.view((6, 4, 32), (-128, 32, 1), 5 * 128)
    k_rev = k_buf.view((6, 2, 32), (-64, 32, 1), 5 * 64)
    p_rev = device.array(positions).view((6,), (-1,), 5)
    got_q, got_k = ops.rope_neox(q_rev, k_rev, p_rev, max_position=8)
    np.testing.assert_array_equal(got_q.numpy(), want_q)
    np.testing.assert_array_equal(got_k.numpy(), want_k)
    numpy_q, numpy_k = ops.rope_neox(q[::-1], k[::-1], positions[::-1], max_position=8)
    np.testing.assert_array_equal(numpy_q, want_q)
    np.testing.assert_array_equal(numpy_k, want_k)
