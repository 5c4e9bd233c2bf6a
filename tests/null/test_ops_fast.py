"""null tier: the fast path (ops/fast.py) with tensors of a stand-in torch on the pretend
device: a repeated call skips resolving and preparing, and still computes the right thing
with its own pointers and numbers; anything new or unsafe takes the full path."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from support import fake_torch
from support.emulated import Device

from tile_mlir import ops
from tile_mlir.dtypes import DTYPES
from tile_mlir.ops import _runtime, dispatch, fast


@pytest.fixture
def torch(device: Device, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    module = fake_torch.module(device)
    monkeypatch.setitem(sys.modules, "torch", module)
    empty = _runtime.empty

    def empty_like(shape: Any, dtype: str, like: _runtime.ArrayRef) -> Any:
        if like.kind == "torch":
            return module.empty(shape, getattr(module, DTYPES[dtype].numpy))
        return empty(shape, dtype, like)

    monkeypatch.setattr(_runtime, "empty", empty_like)
    fast.clear()
    yield module
    fast.clear()


def _only_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on the full path fails the test: what runs must be the fast path."""
    monkeypatch.setattr(dispatch, "resolve", lambda *a, **k: pytest.fail("took the full path"))


def test_repeated_calls_take_the_fast_path(torch: Any, rng: np.random.Generator,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    x, y = rng.standard_normal((2, 3, 1000)).astype(np.float32)
    np.testing.assert_array_equal(ops.add(torch.tensor(x), torch.tensor(y)).numpy(), x + y)
    _only_fast(monkeypatch)
    for _ in range(3):
        a, b = rng.standard_normal((2, 3, 1000)).astype(np.float32)
        np.testing.assert_array_equal(ops.add(torch.tensor(a), torch.tensor(b)).numpy(), a + b)


def test_numbers_change_between_calls(torch: Any, rng: np.random.Generator,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    x = rng.standard_normal(777).astype(np.float16)
    i = rng.integers(-9, 9, 50).astype(np.int32)
    ops.mul(torch.tensor(x), 2.0)
    ops.add(torch.tensor(i), 1)
    _only_fast(monkeypatch)
    for s in (3.0, -0.5, 1e-3):
        got = ops.mul(torch.tensor(x), s).numpy()
        np.testing.assert_array_equal(got, (x.astype(np.float32) * np.float32(s)).astype(
            np.float16))
    with pytest.raises(OverflowError, match="argument 'other'"):
        ops.add(torch.tensor(i), 1 << 40)


def test_in_place_and_overlap(torch: Any, rng: np.random.Generator) -> None:
    x, y = rng.standard_normal((2, 4096)).astype(np.float32)
    for _ in range(2):  # the second time from the plan
        a = torch.tensor(x)
        assert ops.sub(a, torch.tensor(y), out=a) is a
        np.testing.assert_array_equal(a.numpy(), x - y)
    a = torch.tensor(np.arange(20, dtype=np.float32))
    front = fake_torch.Tensor(a.array.view((19,), (1,)), {"float32": torch.float32})
    shifted = fake_torch.Tensor(a.array.view((19,), (1,), offset=1), {"float32": torch.float32})
    for _ in range(2):  # refused by the full path, and not taken from a plan either
        with pytest.raises(ValueError, match="overlaps"):
            ops.neg(front, out=shifted)


def test_new_alignment_or_shape_prepares_again(torch: Any, rng: np.random.Generator) -> None:
    x = rng.standard_normal(1001).astype(np.float32)
    ops.exp(torch.tensor(x))
    misaligned = ops.exp(torch.tensor(x, offset=1)).numpy()
    np.testing.assert_allclose(misaligned, np.exp(x), rtol=1e-6)
    other = rng.standard_normal(999).astype(np.float32)
    np.testing.assert_allclose(ops.exp(torch.tensor(other)).numpy(), np.exp(other), rtol=1e-6)
    assert len(fast._PLANS) == 3


def test_a_0d_cpu_tensor_is_a_number(torch: Any, rng: np.random.Generator) -> None:
    """torch takes a 0-d CPU tensor beside CUDA tensors, with the 0-d priority in
    promotion: float32 beside float16 stays float16."""
    x = rng.standard_normal(300).astype(np.float16)
    scale = fake_torch.HostScalar(0.5, torch.float32)
    got = ops.mul(torch.tensor(x), scale).numpy()
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, (x.astype(np.float32) * np.float32(0.5)).astype(
        np.float16))
