"""gpu tier: ops.fuse (ops/fuse.py) on CUDA torch tensors.

The fused kernel against the unfused calls on the same tensors, bit for bit (any NaN for
any NaN): random chains of the unary, binary and activation ops over f32, f16 and bf16
with Python numbers, broadcasts and views (support/fuse_chains.py, the null tier's), into
fresh outputs and into outputs poisoned with NaN (every element must be written); every
unary, binary and activation row as a step between narrowing ones; a function cut into
two kernels by the operand slots. The bench's chain against float64 NumPy, each
intermediate rounded as the program rounds it. The fused custom op under
torch.compile(fullgraph=True) (inductor) against the eager fused call, and through
torch.library.opcheck.

    source .stage/mlir/env.sh && python3 -m pytest -m gpu tests/gpu/test_ops_fuse.py
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from support.fuse_chains import (
    ACTIVATIONS,
    BINARY,
    UNARY,
    Program,
    function,
    place,
    random_program,
    row_chain,
    same_bits,
)
from support.ops_torch import to_device, to_host

from tile_mlir import ops
from tile_mlir.dtypes import DTYPES

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu


def _tensors(program: Program, rng: np.random.Generator) -> list[Any]:
    """Each argument in its layout: a view (torch.as_strided) of a base of values."""
    made = []
    for argument in program.arguments:
        placed = place(argument, rng, DTYPES[argument.dtype].np_dtype())
        base = to_device(placed.base, argument.dtype)
        made.append(torch.as_strided(base, placed.shape, placed.strides, placed.offset))
    return made


def _library_dtype(t: Any) -> str:
    name = str(t.dtype).removeprefix("torch.")
    return next(k for k, d in DTYPES.items() if d.numpy == name)


def _host(t: Any) -> np.ndarray:
    return to_host(t, _library_dtype(t))


def _poisoned(like: Any, dtype: Any = None) -> Any:
    out = torch.empty(like.shape, dtype=dtype or like.dtype, device="cuda")
    return out.fill_(math.nan) if out.dtype.is_floating_point else out.fill_(0x5A)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("draw", range(8))
def test_random_chains_fused_against_unfused(rng: np.random.Generator, dtype: str,
                                             draw: int) -> None:
    program = random_program(rng, dtype, calls=int(rng.integers(2, 7)))
    what = program.describe()
    print(what)
    tensors = _tensors(program, rng)
    fn = function(program, ops)
    want = _host(fn(*tensors))
    fused = ops.fuse(fn)
    same_bits(_host(fused(*tensors)), want, what)
    out = _poisoned(fn(*tensors))
    assert fused(*tensors, out=out) is out
    same_bits(_host(out), want, f"out=: {what}")
    wide = _poisoned(out, torch.float32)  # another dtype: the result widened, exactly
    fused(*tensors, out=wide)
    same_bits(_host(wide), want.astype(np.float32), f"f32 out: {what}")


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_every_row_fused_against_unfused(rng: np.random.Generator, dtype: str) -> None:
    np_dtype = DTYPES[dtype].np_dtype()
    x = to_device((rng.standard_normal((37, 301)) * 3).astype(np_dtype), dtype)
    y = to_device(rng.uniform(0.25, 4, (37, 301)).astype(np_dtype), dtype)
    for op in (*UNARY, *ACTIVATIONS, *BINARY, "lerp", "where"):
        fn = row_chain(op, ops)
        out = _poisoned(x)
        ops.fuse(fn)(x, y, out=out)
        same_bits(_host(out), _host(fn(x, y)), f"{op} {dtype}")


def test_a_cut_function_keeps_the_bits(rng: np.random.Generator) -> None:
    """Layer norm's last step with three numbers: two kernels (an intermediate stored in
    bf16, as unfused), the same bits."""
    def bf16(values: np.ndarray) -> Any:
        return to_device(values.astype(DTYPES["bf16"].np_dtype()), "bf16")

    x = bf16(rng.standard_normal((64, 1000)))
    mean, rstd = bf16(rng.standard_normal((64, 1))), bf16(rng.uniform(0.5, 2, (64, 1)))
    w, b = bf16(rng.standard_normal(1000)), bf16(rng.standard_normal(1000))

    def scaled(x: Any, mean: Any, rstd: Any, w: Any, b: Any) -> Any:
        normed = ops.mul(ops.mul(ops.sub(x, mean), rstd), w)
        return ops.add(ops.mul(ops.add(normed, ops.mul(b, 0.5)), 1.5), 0.25)

    for first in (x, x.t().contiguous().t()):
        out = _poisoned(first)
        ops.fuse(scaled)(first, mean, rstd, w, b, out=out)
        same_bits(_host(out), _host(scaled(first, mean, rstd, w, b)), "cut")


TOLERANCE = {"f32": (5e-6, 1e-7), "f16": (2.0**-10, 2.0**-14), "bf16": (2.0**-7, 2.0**-10)}
"""(rtol, atol) of gelu's own error and rounding, the chain's one inexact step, for sums
above -2 (further left 1 + erf cancels: docs/ops.md)."""


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_the_bench_chain_against_float64(rng: np.random.Generator, dtype: str) -> None:
    np_dtype = DTYPES[dtype].np_dtype()
    xs = rng.uniform(-1.5, 4, (129, 4099)).astype(np_dtype)
    bs = rng.uniform(-0.5, 0.5, 4099).astype(np_dtype)
    fused = ops.fuse(lambda x, b: ops.mul(ops.gelu(ops.add(x, b)), 0.5))
    out = _poisoned(to_device(xs, dtype))
    fused(to_device(xs, dtype), to_device(bs, dtype), out=out)
    got = _host(out).astype(np.float64)
    # each step rounded to the dtype as the program rounds it: the sum, then gelu's result
    t = (xs.astype(np.float64) + bs.astype(np.float64)).astype(np_dtype).astype(np.float64)
    erf = np.vectorize(math.erf)
    g = (t * 0.5 * (1 + erf(t / math.sqrt(2)))).astype(np_dtype).astype(np.float64)
    assert not np.isnan(got).any()
    rtol, atol = TOLERANCE[dtype]
    np.testing.assert_allclose(got, 0.5 * g, rtol=rtol, atol=atol)


# ------------------------------------------------------------------ torch.compile


def test_the_fused_custom_op_under_torch_compile(rng: np.random.Generator) -> None:
    fused = ops.fuse(lambda x, b, s: ops.mul(ops.gelu(ops.add(x, b), approximate="tanh"), s),
                     name="bias_gelu_scale")
    op = fused.torch_op
    assert ops.torch_ops().fuse(fused) is op

    def block(x: Any, b: Any) -> Any:
        return op(torch.relu(x), b, 0.5) + 1  # torch's ops around it, inductor's fusion

    compiled = torch.compile(block, fullgraph=True)
    for shape in ((64, 512), (3, 1000)):
        x = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(shape[-1], device="cuda", dtype=torch.bfloat16)
        got, want = compiled(x, b), block(x, b)
        assert got.dtype == want.dtype == torch.bfloat16
        same_bits(_host(got), _host(want), f"compiled {shape}")
        same_bits(_host(op(x, b, 0.5)), _host(fused(x, b, 0.5)), "custom op = fused")


def test_the_fused_custom_op_passes_opcheck() -> None:
    fused = ops.fuse(lambda x, y: ops.where(ops.gt(x, y), ops.exp(x), ops.mul(x, y)))
    op = fused.torch_op
    x = torch.randn(8, 33, device="cuda")
    for name, args in ((fused.spec_name, [x, torch.randn(33, device="cuda")]),
                       (f"{fused.spec_name}_ts", [x, 0.5])):
        torch.library.opcheck(getattr(torch.ops.tile_mlir, name).default, args)
    assert op(x, 0.5).shape == (8, 33)
