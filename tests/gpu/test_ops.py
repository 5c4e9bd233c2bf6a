"""gpu tier: every op x dtype of tile_mlir.ops on the GPU, against torch (or NumPy).

On fresh random inputs with NaN, +-Inf, +-0 and the dtype's extremes mixed in,
over shapes that cover the kernels' ways of cutting work: empty, one element,
odd lengths (vector tails), a broadcast last dimension and a scalar operand,
seed 004's broadcast patterns, a transposed input, and one array past 2^31
bytes and one past 2^31 elements. Outputs are poisoned (NaN, or 0x5A bytes)
before each run and written through `out=`, so an unwritten element shows.
Exact ops must equal torch bit for bit (NaN for NaN; the sign of a zero from
maximum/minimum/clamp aside); the others stay within fp32 1e-5, fp16 1e-3,
bf16 1.6e-2 relative, or one ulp of their format (fp8: one ulp).

Run on the GPU machine from the repository root:
    source .stage/mlir/env.sh && python3 -m pytest -m gpu tests/test_ops_gpu.py
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support.ops_torch import HAVE_TORCH, cases, run, torch_module, warm_cache

from tile_mlir import op_table, ops

pytestmark = pytest.mark.gpu

OPS_AND_DTYPES = [(row.name, dtype) for row in op_table.public_ops() for dtype in row.dtypes]


@pytest.fixture(scope="module", autouse=True)
def _warm_kernel_cache() -> None:
    """Every case's kernel compiled up front on all cores (into the runtime's cache)."""
    count = warm_cache([case for op, dtype in OPS_AND_DTYPES for case in cases(op, dtype)])
    print(f"compiled {count} kernels ahead")


@pytest.mark.parametrize(("op", "dtype"), OPS_AND_DTYPES, ids=[f"{o}-{d}" for o, d in OPS_AND_DTYPES])
def test_op(op: str, dtype: str, rng: np.random.Generator) -> None:
    failed = [case.id for case in cases(op, dtype) if not run(case, rng).ok]
    assert not failed, f"failed: {failed}"


def _torch() -> Any:
    if not HAVE_TORCH:
        pytest.skip("needs torch")
    return torch_module()


@pytest.mark.parametrize("op", ["add", "mul", "maximum", "exp", "neg", "lt"])
def test_transposed_and_sliced_inputs(op: str) -> None:
    torch = _torch()
    x = torch.randn(37, 45, device="cuda")
    y = torch.randn(90, 37, device="cuda")[::2].t()  # strided and transposed
    row = op_table.ELEMENTWISE[op]
    args = [x.t().contiguous().t(), y][:row.arity]
    want = getattr(torch, op)(*args)
    got = getattr(ops, op)(*args)
    assert got.dtype == want.dtype
    if row.exact:
        assert torch.equal(got, want)
    else:
        assert torch.allclose(got, want, rtol=1e-5, equal_nan=True)


def test_past_2_to_the_31_bytes() -> None:
    """f32 add over 2^29 + 5 elements (2 GiB per array, 32-bit element indices)."""
    torch = _torch()
    n = (1 << 29) + 5
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    got = ops.add(x, y)
    assert torch.equal(got, x + y)
    del got, x, y
    torch.cuda.empty_cache()


def test_past_2_to_the_31_elements() -> None:
    """fp8 neg over 2^31 + 37 elements: 64-bit indices; neg flips the sign bit."""
    torch = _torch()
    n = (1 << 31) + 37
    bits = torch.randint(0, 256, (n,), dtype=torch.uint8, device="cuda")
    nan = ((bits & 0x7C) == 0x7C) & ((bits & 0x03) != 0)
    bits[nan] = 0  # NaN patterns come back as the canonical NaN, whatever their sign
    got = ops.neg(bits.view(torch.float8_e5m2))
    assert torch.equal(got.view(torch.uint8), bits ^ 0x80)
    del got, bits
    torch.cuda.empty_cache()


def test_launches_on_the_current_stream() -> None:
    torch = _torch()
    stream = torch.cuda.Stream()
    x = torch.randn(1 << 22, device="cuda")
    with torch.cuda.stream(stream):
        y = ops.exp(x)
        z = ops.mul(y, 2.0)
    stream.synchronize()
    assert torch.allclose(z, torch.exp(x) * 2, rtol=1e-5)


def test_cupy_arrays() -> None:
    cupy = pytest.importorskip("cupy")
    x = cupy.random.standard_normal((1000, 33), dtype=cupy.float32)
    y = cupy.random.standard_normal((33,), dtype=cupy.float32)
    got = ops.add(x, y)
    assert isinstance(got, cupy.ndarray)
    cupy.testing.assert_array_equal(got, x + y)


def test_numpy_arrays() -> None:
    x = np.random.default_rng(0).standard_normal((100, 7)).astype(np.float32)
    got = ops.maximum(x, 0.0)
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, np.maximum(x, np.float32(0)))


# ------------------------------------------------------------- activations


def _report(case_op: str, dtype: str, got: Any, want: Any) -> None:
    from support.ops_check import Case, compare
    from support.ops_torch import to_host

    case = Case(case_op, dtype, (tuple(got.shape),))
    report = compare(case, to_host(got, dtype), to_host(want, dtype))
    print(f"{case.id}: max rel {report.max_rel:.3g}, max {report.max_ulp} ulp")
    assert report.ok, report.detail


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_gelu_over_the_whole_line(approximate: str, dtype: str) -> None:
    """[-12, 12], the far left included, where torch's formula cancels (1 + erf -> 0) and
    the null tier's float64 reference cannot follow: same formula, same result."""
    torch = _torch()
    from support.ops_torch import torch_dtype

    x = torch.linspace(-12, 12, (1 << 16) + 3, device="cuda").to(torch_dtype(dtype))
    got = ops.gelu(x, approximate=approximate)
    want = torch.nn.functional.gelu(x, approximate=approximate)
    _report("gelu" if approximate == "none" else "gelu_tanh", dtype, got, want)


@pytest.mark.parametrize("op", ["silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul"])
def test_gated_on_sliced_and_large_inputs(op: str) -> None:
    """A column slice (rows 2N apart, not 16-byte aligned), and vLLM's bf16 8192 x 2*7168."""
    torch = _torch()
    from support.ops_torch import gated_reference

    wide = torch.randn(64, 2 * 1237 + 6, device="cuda", dtype=torch.bfloat16)
    for x in (wide[:, 3:-3], torch.randn(8192, 2 * 7168, device="cuda", dtype=torch.bfloat16)):
        got = getattr(ops, op)(x)
        _report(op, "bf16", got, gated_reference(op, x, "bf16"))


def test_prelu_channels_and_inplace_against_torch() -> None:
    torch = _torch()
    functional = torch.nn.functional
    x = torch.randn(4, 16, 9, 11, device="cuda", dtype=torch.float16)
    for weight in (torch.rand(16, device="cuda", dtype=torch.float16),
                   torch.rand(32, device="cuda", dtype=torch.float16)[::2],
                   torch.rand(1, device="cuda", dtype=torch.float16)):
        assert torch.equal(ops.prelu(x, weight), functional.prelu(x, weight))
    y = x.clone()
    assert ops.leaky_relu(y, 0.2, inplace=True) is y
    assert torch.equal(y, functional.leaky_relu(x, 0.2))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_div_trunc_of_quotients_just_under_an_integer(dtype: str,
                                                      rng: np.random.Generator) -> None:
    """div(rounding_mode="trunc") where a / b lies just under an integer (a = k * b, one
    or two ulp down): torch divides in the 16-bit type (the quotient rounds up to k,
    trunc gives k) where a float32 quotient truncates to k - 1; by a Python number,
    torch multiplies by the reciprocal in float32 and truncates with no rounding
    between. Both against torch, element for element."""
    torch = torch_module()
    t = getattr(torch, dtype)
    b = torch.tensor(rng.uniform(1.0, 9.0, 4099), device="cuda").to(t)
    k = torch.tensor(rng.integers(1, 60, 4099), device="cuda").to(t)
    a = (k.float() * b.float()).to(t)  # positive: one less in the bits is one ulp down
    bits = torch.int32 if dtype == "float32" else torch.int16
    a = (a.view(bits) - torch.tensor(rng.integers(1, 3, 4099), device="cuda").to(bits)
         ).view(t)
    want = torch.div(a, b, rounding_mode="trunc")
    got = torch.full_like(a, float("nan"))
    ops.div(a, b, rounding_mode="trunc", out=got)
    assert torch.equal(got, want), int((got != want).sum())
    for divisor in (3.0, 7.0, 0.1):
        assert torch.equal(ops.div(a, divisor, rounding_mode="trunc"),
                           torch.div(a, divisor, rounding_mode="trunc")), divisor


@pytest.mark.parametrize("source", ["int32", "int64"])
@pytest.mark.parametrize("target", ["bfloat16", "float16"])
def test_integers_into_a_16_bit_float_round_through_float32(source: str, target: str,
                                                            rng: np.random.Generator) -> None:
    """An integer result written to a 16-bit float `out=` is rounded as torch rounds it:
    to float32, then to the 16-bit type. Integers just past the midpoint between two
    bf16 values (the midpoint plus a few units: float32 rounds them onto the midpoint,
    which then rounds to even) differ from one direct rounding; fresh random ones too.
    Element for element against torch, every element written."""
    torch = torch_module()
    bits = 31 if source == "int32" else 63
    high = rng.integers(25, bits, 4099)  # the value's top bit; float32 is exact below 2^25
    top = np.left_shift(128 + rng.integers(0, 128, 4099), high - 7)  # a bf16 value
    past = top + np.left_shift(1, high - 8) + rng.integers(1, 1 << 62, 4099) % \
        np.left_shift(1, high - 24)  # its midpoint, plus less than half a float32 ulp
    values = np.concatenate([past, -past, rng.integers(-2**bits, 2**bits, 4099)])
    x = torch.tensor(values, device="cuda").to(getattr(torch, source))
    for op, args in (("bitwise_or", (x, 0)), ("bitwise_not", (~x,)), ("neg", (-x,))):
        want = getattr(torch, op)(*args).to(getattr(torch, target))
        got = torch.full(x.shape, float("nan"), dtype=getattr(torch, target), device="cuda")
        getattr(ops, op)(*args, out=got)
        assert torch.equal(got, want), (op, int((got != want).sum()))
