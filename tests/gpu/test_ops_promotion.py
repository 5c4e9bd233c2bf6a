"""gpu tier: mixed dtypes against torch, bit for bit (the differential test's replays).

torch's TensorIterator casts every tensor operand, 0-d ones too, to the common dtype
before computing in its opmath type; its CUDA kernels read a CPU scalar (a Python
number, or a 0-d CPU tensor) as the opmath type directly, or, in the comparisons,
remainder and pow, as the tensors' dtype (elementwise.CASTS_NUMBERS). Each case is
drawn fresh (integers around 1000, where bf16 and f16 round them; floats with a
fraction), computed by torch and by the library on the very same tensors, and every
element compared: the dtype, then the bits (NaN for NaN).

Run on the GPU machine from the repository root:
    python -m pytest -m gpu tests/gpu/test_ops_promotion.py
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tile_mlir import ops

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

SHAPE = (37, 129)
"""Odd sizes: vector tails in every row."""


def _tensor(rng: np.random.Generator, dtype: Any, shape: tuple[int, ...] = SHAPE) -> Any:
    """Integers in [-3000, 3000] (odd ones too: bf16 rounds past 256, f16 past 2048), or
    floats with a fraction, in `dtype`, on the GPU."""
    if dtype.is_floating_point:
        values = torch.from_numpy(rng.uniform(-3000, 3000, shape))
    else:
        values = torch.from_numpy(rng.integers(-3000, 3001, shape))
    return values.to(dtype).cuda()


def _same(got: Any, want: Any, what: str) -> None:
    assert got.dtype == want.dtype, f"{what}: {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{what}: {tuple(got.shape)} != {tuple(want.shape)}"
    if want.dtype.is_floating_point:
        g, w = got.float().cpu().numpy(), want.float().cpu().numpy()
        equal = (g == w) | (np.isnan(g) & np.isnan(w))
    else:
        equal = (got.cpu().numpy() == want.cpu().numpy())
    bad = np.flatnonzero(~equal)
    assert not bad.size, f"{what}: {bad.size} of {equal.size} differ, first at {bad[0]}: " \
        f"{got.flatten()[bad[0]].item()} != {want.flatten()[bad[0]].item()}"


TENSORS = [
    # op, the first operand's dtype, the second's
    ("add", torch.bfloat16, torch.int64), ("mul", torch.float16, torch.int32),
    ("sub", torch.int32, torch.bfloat16), ("eq", torch.int32, torch.bfloat16),
    ("ge", torch.int32, torch.bfloat16), ("lt", torch.int64, torch.float16),
    ("remainder", torch.int64, torch.bfloat16), ("floor_divide", torch.int64, torch.bfloat16),
    ("maximum", torch.int32, torch.float16), ("div", torch.int64, torch.bfloat16),
]


@pytest.mark.parametrize(("op", "first", "second"), TENSORS,
                         ids=[f"{o}-{a}-{b}".replace("torch.", "") for o, a, b in TENSORS])
def test_tensor_operands_are_cast_to_the_common_dtype(op: str, first: Any, second: Any,
                                                       rng: np.random.Generator) -> None:
    x, y = _tensor(rng, first), _tensor(rng, second)
    if op in ("remainder", "floor_divide"):
        y = torch.where(y == 0, torch.ones_like(y) * 7, y)
    _same(getattr(ops, op)(x, y), getattr(torch, op)(x, y), op)


ZERO_DIM = [
    # op, the tensor's dtype, the 0-d CUDA tensor's dtype and value (the 0-d one does not
    # raise the tensors' dtype: it is cast to it), a value put in every third element of
    # the tensor (equal to the 0-d one after the cast, not before), or None
    ("remainder", torch.float16, torch.float32, 0.1, None),
    ("ne", torch.float16, torch.float32, 0.1, 0.1),
    ("add", torch.float16, torch.float32, 1000.3, None),
    ("eq", torch.bfloat16, torch.float16, 1000.5, 1000.0),
    ("sub", torch.bfloat16, torch.float16, 1.0009765625, None),
    ("eq", torch.int32, torch.int64, 2**32 + 5, 5),
    ("lt", torch.int32, torch.int64, 2**32 + 5, 5),
    ("floor_divide", torch.int64, torch.bfloat16, 3.0, None),
    ("ne", torch.int64, torch.bfloat16, 999, 1001),
    ("maximum", torch.bfloat16, torch.float32, 1000.3, None),
]


@pytest.mark.parametrize(("op", "dtype", "zero_dim", "value", "plant"), ZERO_DIM,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}".replace("torch.", "") for c in ZERO_DIM])
def test_0d_device_tensors_are_cast_to_the_common_dtype(  # noqa: PLR0917 - the case's fields
        op: str, dtype: Any, zero_dim: Any, value: float, plant: float | None,
        rng: np.random.Generator) -> None:
    x = _tensor(rng, dtype)
    if plant is not None:
        x[::3] = torch.tensor(plant).to(dtype)
    scalar = torch.tensor(value, dtype=zero_dim, device="cuda")
    _same(getattr(ops, op)(x, scalar), getattr(torch, op)(x, scalar), op)
    _same(getattr(ops, op)(scalar, x), getattr(torch, op)(scalar, x), f"{op} (0-d first)")


HOST = [
    # op, the tensor's dtype, a CPU scalar (a 0-d CPU tensor or a Python number)
    ("add", torch.bfloat16, lambda: torch.tensor(2.001)),
    ("add", torch.bfloat16, lambda: 2.001),
    ("sub", torch.bfloat16, lambda: torch.tensor(545)),
    ("mul", torch.float16, lambda: torch.tensor(1.0001, dtype=torch.float32)),
    ("eq", torch.float16, lambda: torch.tensor(1000.3)),
    ("remainder", torch.bfloat16, lambda: torch.tensor(0.1)),
    ("lt", torch.int32, lambda: torch.tensor(1000, dtype=torch.int64)),
]


@pytest.mark.parametrize(("op", "dtype", "make"), HOST,
                         ids=[f"{c[0]}-{c[1]}-{i}".replace("torch.", "")
                              for i, c in enumerate(HOST)])
def test_cpu_scalars_are_read_as_torch_reads_them(op: str, dtype: Any, make: Callable[[], Any],
                                                  rng: np.random.Generator) -> None:
    """A CPU scalar is not cast to the common dtype first (except by CASTS_NUMBERS' ops):
    torch's CUDA kernels read it as their opmath type."""
    x = _tensor(rng, dtype)
    if op == "eq":
        x[::3] = torch.tensor(1000.3).to(dtype)
    scalar = make()
    _same(getattr(ops, op)(x, scalar), getattr(torch, op)(x, scalar), op)
