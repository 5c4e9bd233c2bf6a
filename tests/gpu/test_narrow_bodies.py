"""gpu tier: the ops whose results narrower than f32 take a cheaper body (op_table's
narrow_body: bodies.softplus_narrow, mish_narrow, elu_narrow, selu_narrow, silu_narrow
(silu's and silu_and_mul's) and sigmoid_narrow, the MUFU's ex2.approx, lg2.approx and
div.approx in place of libdevice's expf, expm1f, log1pf and tanhf and the IEEE division)
on every value of f16, bf16 and the fp8 types (silu_and_mul's gate; its other half
random), softplus and elu for several of their parameters: within one ulp of the
float64 result rounded once (NaN, the infinities and subnormal results included), the
outputs poisoned first. How many results differ from torch's own (libdevice in f32) is
printed: torch's are not correctly rounded either.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from support.ops_check import CARRIERS_BY_SIZE, Case, compare, rounded
from support.ops_torch import HAVE_TORCH, poisoned_out, to_device, to_host, torch_module

from tile_mlir import ops
from tile_mlir.dtypes import DTYPES, FP8
from tile_mlir.op_table import refs
from tile_mlir.op_table.bodies import EXP_OVERFLOW

pytestmark = pytest.mark.gpu

PARAMETERS = [(1.0, 20.0), (2.0, 5.0), (0.5, 1.0), (-1.0, 20.0), (3.0, float("inf"))]
"""(beta, threshold): the default, others as torch's tests take them, a negative beta and
no threshold at all (every element through the smooth branch, overflow included)."""


def _every_value(dtype: str) -> np.ndarray:
    """Every bit pattern of the dtype, as its NumPy type."""
    np_type = DTYPES[dtype].np_dtype()
    carrier = CARRIERS_BY_SIZE[np_type.itemsize]
    return np.arange(1 << (8 * np_type.itemsize), dtype=np.uint32).astype(carrier).view(np_type)


def _float64_mish(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        result: np.ndarray = x * np.tanh(np.logaddexp(0.0, x))
    return result


def _float64_silu(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        result: np.ndarray = x / (1.0 + np.exp(-x))
    return result


def _float64_sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        result: np.ndarray = 1.0 / (1.0 + np.exp(-x))
    return result


def _float64_softplus(x: np.ndarray, beta: float, threshold: float) -> np.ndarray:
    """torch's softplus in float64, with its f32 overflow: exp(y) is inf from
    bodies.EXP_OVERFLOW on, so log1p(exp(y)) / beta is +-inf there."""
    with np.errstate(all="ignore"):
        y = x * beta
        smooth = np.where(y >= EXP_OVERFLOW, np.inf, np.logaddexp(0.0, y)) / beta
        return np.where(y > threshold, x, smooth)


NARROW = ["f16", "bf16", *FP8]


@pytest.mark.parametrize("dtype", NARROW)
@pytest.mark.parametrize(("beta", "threshold"), PARAMETERS)
def test_softplus_on_every_value(dtype: str, beta: float, threshold: float) -> None:
    _check("softplus", dtype, (beta, threshold),
           lambda F, x: F.softplus(x, beta, threshold),
           lambda x: _float64_softplus(x, beta, threshold))


@pytest.mark.parametrize("dtype", NARROW)
def test_silu_on_every_value(dtype: str) -> None:
    _check("silu", dtype, (), lambda F, x: F.silu(x), _float64_silu)


@pytest.mark.parametrize("dtype", NARROW)
def test_sigmoid_on_every_value(dtype: str) -> None:
    _check("sigmoid", dtype, (), lambda F, x: torch_module().sigmoid(x), _float64_sigmoid)


@pytest.mark.parametrize("dtype", NARROW)
def test_mish_on_every_value(dtype: str) -> None:
    _check("mish", dtype, (), lambda F, x: F.mish(x), _float64_mish)


@pytest.mark.parametrize("dtype", NARROW)
@pytest.mark.parametrize("alpha", [1.0, 0.5, 2.5, -1.0])
def test_elu_on_every_value(dtype: str, alpha: float) -> None:
    _check("elu", dtype, (alpha,), lambda F, x: F.elu(x, alpha), lambda x: refs.elu(x, alpha))


@pytest.mark.parametrize("dtype", NARROW)
def test_selu_on_every_value(dtype: str) -> None:
    _check("selu", dtype, (), lambda F, x: F.selu(x), refs.selu)


@pytest.mark.parametrize("dtype", NARROW)
def test_silu_and_mul_on_every_value(dtype: str) -> None:
    """silu_and_mul's narrow body (silu_narrow's, times the second half, rounded once):
    every value of dtype as the gate, against a second half of normal random values."""
    if not HAVE_TORCH:
        pytest.skip("needs torch")
    gate = _every_value(dtype)
    rng = np.random.default_rng(2611291)
    up = rounded(rng.standard_normal(gate.size) * 4.0, dtype)
    values = np.concatenate([gate, up])
    x = to_device(values, dtype)
    case = Case("silu_and_mul", dtype, ((values.size,),))
    out = poisoned_out(case, (gate.size,), x)
    ops.silu_and_mul(x, out=out)
    got = to_host(out, dtype)
    with np.errstate(invalid="ignore"):
        want = rounded(_float64_silu(gate.astype(np.float64)) * up.astype(np.float64), dtype)
    off = _within_an_ulp(case, got, want)
    print(f"silu_and_mul {dtype}: {off} of {gate.size} one ulp off the rounded float64 result")


def _within_an_ulp(case: Case, got: np.ndarray, want: np.ndarray) -> int:
    """Every result within one ulp of `want` (the float64 result rounded once), a number
    wherever it is one; how many are not `want` itself (NaN aside)."""
    report = compare(case, got, want)
    nan = np.isnan(want.astype(np.float64))
    assert not np.isnan(got.astype(np.float64))[~nan].any(), "NaN where a number is due"
    assert report.ok and report.max_ulp <= 1, report.detail or f"{report.max_ulp} ulp"
    bits = CARRIERS_BY_SIZE[want.dtype.itemsize]
    return int(np.sum((got.view(bits) != want.view(bits)) & ~nan))


def _check(op: str, dtype: str, params: tuple[float, ...], theirs: Callable[[Any, Any], Any],
           exact: Callable[[np.ndarray], np.ndarray]) -> None:
    """Every value of dtype through ops.<op>(x, *params, out=...) against `exact` (float64),
    and beside `theirs` (torch.nn.functional, x)."""
    if not HAVE_TORCH:
        pytest.skip("needs torch")
    values = _every_value(dtype)
    x = to_device(values, dtype)
    case = Case(op, dtype, ((values.size,), *(None for _ in params)))
    out = poisoned_out(case, (values.size,), x)
    getattr(ops, op)(x, *params, out=out)
    got = to_host(out, dtype)
    with np.errstate(invalid="ignore"):  # NaN into bf16
        want = rounded(exact(values.astype(np.float64)), dtype)
    off = _within_an_ulp(case, got, want)
    note = ""
    if dtype not in FP8:  # torch has no fp8 kernels
        torch_result = to_host(theirs(torch_module().nn.functional, x), dtype)
        bits = CARRIERS_BY_SIZE[values.dtype.itemsize]
        nan = np.isnan(want.astype(np.float64))
        note = f", {int(np.sum((torch_result.view(bits) != got.view(bits)) & ~nan))} " \
            "differ from torch"
    print(f"{op} {dtype} {params}: {off} of {values.size} one ulp off the rounded float64 "
          f"result{note}")
