"""null tier: the registry's references against results torch defines (from torch's
documentation and its CUDA kernels' formulas), and the same cases through the kernels
on the pretend device. The other tests trust these references."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support.emulated import Device

from tile_mlir import op_table, ops

nan, inf = float("nan"), float("inf")
f32 = np.float32

CASES: list[tuple[str, list[Any], Any]] = [
    # op, inputs, what torch gives
    ("remainder", [[-3.0, 3.0, -3.0, 3.0, 5.5], [2.0, -2.0, -2.0, 2.0, inf]],
     [1.0, -1.0, -1.0, 1.0, 5.5]),
    ("remainder", [[-3, 3, -3, 3], [2, -2, -2, 2]], [1, -1, -1, 1]),
    ("floor_divide", [[-3.0, 3.0, -3.0, 3.0, -0.5, 1.0, -0.0, 0.0],
                      [2.0, -2.0, -2.0, 2.0, 2.0, 0.0, 2.0, -3.0]],
     [-2.0, -2.0, 1.0, 1.0, -1.0, inf, -0.0, -0.0]),
    ("floor_divide", [[-7, 7, -7, 7], [2, -2, -2, 2]], [-4, -4, 3, 3]),
    ("round", [[0.5, 1.5, 2.5, -0.5, -1.5, 2.4999998]], [0.0, 2.0, 2.0, -0.0, -2.0, 2.0]),
    ("sign", [[nan, -0.0, 0.0, -3.0, inf]], [0.0, 0.0, 0.0, -1.0, 1.0]),
    ("pow", [[1, -1, -1, 2, 0, 3], [-1, -1, -2, -1, 0, 4]], [1, -1, 1, 0, 1, 81]),
    ("pow", [[2.0, -8.0, nan, 1.0, 0.0], [0.5, 1.0 / 3, 0.0, nan, -1.0]],
     [2.0 ** 0.5, nan, 1.0, 1.0, inf]),
    ("maximum", [[nan, 1.0, -inf], [0.0, nan, -1.0]], [nan, nan, -1.0]),
    ("minimum", [[True, False, True], [True, True, False]], [True, False, False]),
    ("clamp", [[0.5, nan, 9.0, -9.0], [2.0, 0.0, 0.0, nan], [-2.0, 1.0, 1.0, 1.0]],
     [-2.0, nan, 1.0, nan]),
    ("lerp", [[1.0, 1.0, 0.0], [3.0, 3.0, 8.0], [0.25, 0.75, 1.0]], [1.5, 2.5, 8.0]),
    ("eq", [[nan, 1.0, -0.0], [nan, 1.0, 0.0]], [False, True, True]),
    ("ne", [[nan, 1.0], [nan, 2.0]], [True, True]),
    ("lt", [[nan, -inf], [1.0, inf]], [False, True]),
    ("logical_not", [[nan, 0.0, -0.0, 2.0]], [False, True, True, False]),
    ("logical_and", [[nan, 1.0, 0.0], [1.0, 0.0, 0.0]], [True, False, False]),
    ("bitwise_not", [[True, False]], [False, True]),
    ("bitwise_not", [[0, -1, 5]], [-1, 0, -6]),
    ("bitwise_xor", [[12, -1], [10, 1]], [6, -2]),
    ("isinf", [[inf, -inf, nan, 1.0]], [True, True, False, False]),
    ("isfinite", [[inf, nan, 0.0, -1e30]], [False, False, True, True]),
    ("isnan", [[1, 2]], [False, False]),
    ("div", [[1.0, -1.0, 0.0, 7.0], [0.0, 0.0, 0.0, -2.0]], [inf, -inf, nan, -3.5]),
    ("abs", [[-0.0, -inf, -3]], [0.0, inf, 3.0]),
    ("neg", [[0.0, -inf]], [-0.0, inf]),
    ("reciprocal", [[-0.0, 4.0, inf]], [-inf, 0.25, 0.0]),
    ("sqrt", [[-1.0, -0.0, 4.0, inf]], [nan, -0.0, 2.0, inf]),
    ("trunc", [[-2.5, 2.5, -0.3]], [-2.0, 2.0, -0.0]),
    ("floor", [[-2.5, 2.5]], [-3.0, 2.0]),
    ("ceil", [[-2.5, 2.5]], [-2.0, 3.0]),
    ("nan_to_num", [[nan, inf, -inf, 1.5], 0.0, 9.0, -9.0], [0.0, 9.0, -9.0, 1.5]),
    ("where", [[True, False], [1.0, 1.0], [2.0, 2.0]], [1.0, 2.0]),
    ("masked_fill", [[1.0, 2.0], [True, False], 7.0], [7.0, 2.0]),
]


def _arrays(op: str, inputs: list[Any]) -> list[Any]:
    row = op_table.ELEMENTWISE[op]
    converted = []
    for n, value in enumerate(inputs):
        if not isinstance(value, list):
            converted.append(np.asarray(value, f32))
            continue
        array = np.asarray(value)
        if n in row.keep or array.dtype == bool:
            converted.append(array.astype(bool))
        elif array.dtype.kind == "i":
            converted.append(array.astype(np.int32))
        else:
            converted.append(array.astype(f32))
    return converted


def _same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    both_nan = np.isnan(got) & np.isnan(want) if got.dtype.kind == "f" else False
    equal = (got == want) | both_nan
    assert np.all(equal), f"{got} != {want}"
    if got.dtype.kind == "f":
        zeros = (got == 0) & (want == 0)
        assert np.all(np.signbit(got[zeros]) == np.signbit(want[zeros])), f"{got} vs {want}"


def _want(op: str, expected: Any, arrays: list[Any]) -> np.ndarray:
    row = op_table.ELEMENTWISE[op]
    if row.out == "bool":
        return np.asarray(expected, bool)
    first = next(a for n, a in enumerate(arrays) if n not in row.keep)
    dtype = f32 if row.out == "float" else first.dtype
    return np.asarray(expected).astype(dtype)


@pytest.mark.parametrize(("op", "inputs", "expected"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_reference(op: str, inputs: list[Any], expected: Any) -> None:
    arrays = _arrays(op, inputs)
    row = op_table.ELEMENTWISE[op]
    _same(np.asarray(row.ref(*arrays)), _want(op, expected, arrays))


@pytest.mark.parametrize(("op", "inputs", "expected"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_kernel(device: Device, op: str, inputs: list[Any], expected: Any) -> None:
    arrays = _arrays(op, inputs)
    args = [device.array(a) if a.ndim else a.item() for a in arrays]
    _same(getattr(ops, op)(*args).numpy(), _want(op, expected, arrays))
