"""null tier: the registry's references against results torch defines (from torch's
documentation and its CUDA kernels' formulas), and the same cases through the kernels
on the pretend device. The other tests trust these references."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support.emulated import Device

from tile_mlir import op_table, ops
from tile_mlir.dtypes import DTYPES

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


# ------------------------------------------------------------------ mixed dtypes

MIXED: list[tuple[str, list[tuple[Any, str]], str, list[Any]]] = [
    # torch casts every tensor operand (0-d ones too) to the common dtype first, then
    # computes in its opmath type: op, (values, dtype) per input ("[]": a 0-d array),
    # the result's dtype, what torch gives
    # 542 -> bf16 544 (a tie, to even); 544 + 2.953125 -> 548 (unrounded: 544.95 -> 544)
    ("add", [([2.953125, 1.0], "bf16"), ([542, 3], "i64")], "bf16", [548.0, 4.0]),
    # 1001 -> bf16 1000
    ("eq", [([1001, 999], "i32"), ([1000.0, 1000.0], "bf16")], "bool", [True, True]),
    ("le", [([1001], "i32"), ([1000.0], "bf16")], "bool", [True]),
    # 1003 -> bf16 1004, / 4 = 251 (unrounded: 250.75 -> 250)
    ("floor_divide", [([1003, 8], "i64"), (4.0, "bf16[]")], "bf16", [251.0, 2.0]),
    # 1003 -> 1004 = 15 * 64 + 44 (unrounded: 43)
    ("remainder", [([1003], "i64"), ([64.0], "bf16")], "bf16", [44.0]),
    # a 0-d array wider than the tensors: cast to their dtype (f32 0.1 -> f16
    # 0.0999755859375: 1 - 10 * that = 2^-12; unrounded: 0.1)
    ("remainder", [([1.0], "f16"), (0.1, "f32[]")], "f16", [2.0 ** -12]),
    ("ne", [([0.0999755859375, 0.5], "f16"), (0.1, "f32[]")], "bool", [False, True]),
    ("eq", [([5, 6], "i32"), (2**32 + 5, "i64[]")], "bool", [True, False]),  # wraps to 5
    ("lt", [([6, 4], "i32"), (2**32 + 5, "i64[]")], "bool", [False, True]),
    ("add", [([1, -7], "i32"), (2**32 + 5, "i64[]")], "i32", [6, -2]),
    # f16 1 + 2^-10 -> bf16 1.0
    ("eq", [([1.0, 1.0078125], "bf16"), (1.0009765625, "f16[]")], "bool", [True, False]),
    ("sub", [([1.0], "bf16"), (1.0009765625, "f16[]")], "bf16", [0.0]),
]


def _mixed_operand(device: Device, values: Any, dtype: str) -> Any:
    if dtype.endswith("[]"):
        return device.array(np.asarray(values, np.float64), dtype[:-2])
    return device.array(np.asarray(values, np.float64), dtype)


@pytest.mark.parametrize(("op", "inputs", "dtype", "expected"), MIXED,
                         ids=[f"{c[0]}-{'-'.join(d for _, d in c[1])}" for c in MIXED])
def test_mixed_dtypes_round_to_the_common_dtype(device: Device, op: str,
                                                 inputs: list[tuple[Any, str]], dtype: str,
                                                 expected: list[Any]) -> None:
    """Tensors of other dtypes are cast to the common dtype before the op (torch's
    TensorIterator), 0-d arrays wider than the tensors too."""
    got = getattr(ops, op)(*(_mixed_operand(device, v, d) for v, d in inputs)).numpy()
    want = np.asarray(expected, np.float64).astype(DTYPES[dtype].np_dtype())
    _same(got, want)


def test_numbers_are_not_rounded_to_the_common_dtype(device: Device) -> None:
    """A Python number is taken as it is, in the compute type (torch's kernels read it as
    their opmath type): bf16 544 + 2.001 is 546.001, bf16 548 (2.001 rounded to bf16
    first, 2.0, would give 546: a tie, to even 544); 544 - 545 is -1 (545 rounded to
    bf16 first, 544, would give 0)."""
    bf16 = DTYPES["bf16"].np_dtype()
    x = device.array(np.asarray([544.0, 544.0]), "bf16")
    _same(ops.add(x, 2.001).numpy(), np.asarray([548.0, 548.0]).astype(bf16))
    _same(ops.sub(x, 545).numpy(), np.asarray([-1.0, -1.0]).astype(bf16))


def test_which_inputs_the_lowering_rounds() -> None:
    """compute.rounding: the tiles of another type than the tiles and dst promote to, where
    that type is narrower than the compute type; kept inputs and scalars never (nor do
    they choose the type: an f32 scalar beside bf16 tiles leaves it bf16)."""
    from tile_mlir.lowering.support.compute import rounding

    def through(op: str, types: list[str], tiles: list[bool], dst: str) -> list[str | None]:
        row = op_table.ELEMENTWISE[op]
        compute = row.compute_dtype(types, dst)
        return [None if t is None else t.name
                for t in rounding(row, types, tiles, dst, compute)]

    assert through("add", ["bf16", "i64"], [True, True], "bf16") == [None, "bf16"]
    assert through("eq", ["i32", "bf16"], [True, True], "bool") == ["bf16", None]
    assert through("where", ["bool", "i64", "f16"], [True, True, True], "f16") == \
        [None, "f16", None]
    assert through("add_alpha", ["bf16", "i64", "f32"], [True, True, False], "bf16") == \
        [None, "bf16", None]
    assert through("add", ["bf16", "i64"], [True, False], "bf16") == [None, None]
    assert through("div", ["i32", "i64"], [True, True], "f32") == [None, None]  # f32
    assert through("add", ["f32", "i64"], [True, True], "f32") == [None, None]
    assert through("add", ["f16", "f8e4m3"], [True, True], "f16") == [None, "f16"]
