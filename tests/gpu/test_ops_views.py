"""gpu tier: any view torch accepts, every op accepts (issue 16, part 1).

Misaligned views (a slice whose first element is 4 bytes past a 16-byte boundary),
transposed, sliced, reversed (NumPy, CuPy) and expanded arrays, through every
reduction, RoPE, dropout, the generators' out= and the elementwise family; results
against torch's op on a contiguous copy (float64 for the sums), the outputs poisoned
first where out= is given.

    source .stage/mlir/env.sh && python3 -m pytest -m gpu tests/gpu/test_ops_views.py
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from tile_mlir import ops
from tile_mlir.op_table import refs

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

REDUCTIONS = ["sum", "amax", "amin", "prod", "mean"]


def _views(dtype: Any) -> list[tuple[str, Any]]:
    base = torch.randn(1025 * 64 + 1, device="cuda", dtype=dtype)
    grid = torch.randn(130, 257, device="cuda", dtype=dtype)
    return [("x[1:]", base[1:]),
            ("x[1:] 2-d", base[1:].view(1025, 64)),
            ("transposed", grid.t()),
            ("sliced", grid[1:, 3:200:2]),
            ("flipped", grid.flip(0)[:, 1:]),
            ("expanded", grid[1:2, 1:].expand(40, 256)),
            ("3-d permuted", base[1:].view(5, 205, 64).permute(2, 0, 1))]


def _reference(name: str, x: Any, dim: Any) -> Any:
    """torch's reduction in float64 (torch.prod takes one dim at a time)."""
    if dim is None:
        return getattr(torch, name)(x)
    if name == "prod" and isinstance(dim, tuple):
        for d in sorted((d % x.dim() for d in dim), reverse=True):
            x = torch.prod(x, dim=d)
        return x
    return getattr(torch, name)(x, dim=dim)


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_reductions_of_views(name: str, dtype: Any) -> None:
    for label, x in _views(dtype):
        source = (1 + 0.001 * x) if name == "prod" else x
        for dim in [None, 0, -1, (0, -1)] if x.dim() > 1 else [None, 0]:
            got = getattr(ops, name)(source, dim=dim) if dim is not None else \
                getattr(ops, name)(source)
            want = _reference(name, source.double(), dim)
            assert got.dtype == source.dtype and got.shape == want.shape, (label, dim)
            tol = {torch.float32: 1e-4 if name == "prod" else 1e-5, torch.float16: 2e-3,
                   torch.bfloat16: 1.6e-2}[dtype]  # a product of 65k factors: sqrt(n) ulps
            scale = source.double().abs().sum() / max(got.numel(), 1) \
                if name in ("sum", "mean") else want.abs().max()
            # and the result's own rounding: half an ulp of its dtype at each result
            rounding = want.abs() * torch.finfo(dtype).eps / 2
            excess = (got.double() - want).abs() - rounding
            err = float(excess.max())
            print(f"{name} {label} dim={dim} {dtype}: max error past the rounding {err:.3g}")
            assert err <= tol * max(float(scale), 1.0), (label, dim)


def test_reductions_dtype_and_out() -> None:
    x = torch.randn(1025, 64, device="cuda", dtype=torch.float16)[1:]
    got = ops.sum(x, dim=-1, dtype=torch.float32)
    assert got.dtype == torch.float32
    assert torch.allclose(got, torch.sum(x, dim=-1, dtype=torch.float32), rtol=1e-5, atol=1e-4)
    out = torch.full((1024 * 3,), float("nan"), device="cuda")[1::3]  # misaligned, strided
    out = out[:1024]
    assert ops.mean(x.float(), dim=1, out=out) is out
    assert torch.allclose(out, x.float().mean(1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rope_of_misaligned_views(dtype: Any) -> None:
    tokens, heads, key_heads, head_dim = 37, 8, 2, 128
    qkv = torch.randn(tokens * (heads + 2 * key_heads) * head_dim + 2, device="cuda",
                      dtype=dtype)[2:].view(tokens, heads + 2 * key_heads, head_dim)
    q, k = qkv[:, :heads], qkv[:, heads:heads + key_heads]
    positions = torch.randint(0, 4096, (tokens,), device="cuda")[1:].clone()
    q, k = q[1:], k[1:]
    got_q, got_k = ops.rope_neox(q, k, positions, max_position=4096)
    want_q, want_k = ops.rope_neox(q.contiguous(), k.contiguous(), positions,
                                   max_position=4096)
    assert torch.equal(got_q, want_q) and torch.equal(got_k, want_k)
    q_in, k_in = q.clone(), k.clone()
    ops.rope_neox(q, k, positions, max_position=4096, out=(q, k))  # in place, in qkv
    assert torch.equal(q, want_q) and torch.equal(k, want_k)
    assert not torch.equal(q, q_in) and not torch.equal(k, k_in)


def test_dropout_of_misaligned_views() -> None:
    x = torch.randn(64 * 1000 + 1, device="cuda")[1:].view(64, 1000)
    for view in (x, x.t(), x[:, ::3], x.flip(1)):
        got, mask = ops.dropout(view, 0.25, seed=99, offset=5, return_mask=True)
        host = view.cpu().numpy()
        index = np.arange(host.size, dtype=np.uint64)
        threshold = math.floor(0.25 * 2**32)
        keep = refs.dropout_mask(99, 5, threshold, index).reshape(host.shape)
        want = refs.dropout(host.reshape(-1), np.float32(1 / 0.75), 99, 5, threshold,
                            index).reshape(host.shape)
        assert np.array_equal(mask.cpu().numpy(), keep)
        assert np.array_equal(got.cpu().numpy().view(np.uint32), want.view(np.uint32))


def test_generators_into_strided_out() -> None:
    wide = torch.full((12, 2 * 129), float("nan"), device="cuda")
    out = wide[:, 1::2]
    assert ops.alibi(12, 129, out=out) is out
    assert torch.equal(out, ops.alibi(12, 129, device="cuda"))
    assert torch.isnan(wide[:, ::2]).all()


def test_elementwise_of_views() -> None:
    base = torch.randn(4097, device="cuda", dtype=torch.bfloat16)
    x = base[1:].view(64, 64)
    for view in (x, x.t(), x.flip(0), x[:, ::2], x[:1].expand(64, 64)):
        rows, cols = view.shape
        other = x[:rows, :cols]
        assert torch.equal(ops.neg(view), torch.neg(view))
        assert torch.equal(ops.add(view, other), torch.add(view, other))
        out = torch.full_like(base, float("nan"))[1:].view(64, 64)[:rows, :cols]  # strided
        assert ops.maximum(view, 0.0, out=out) is out
        assert torch.equal(out, torch.maximum(view, torch.zeros_like(view)))
    h = base[1:].view(32, 128)
    assert torch.equal(ops.silu_and_mul(h), ops.silu_and_mul(h.contiguous()))


def test_numpy_and_cupy_negative_strides() -> None:
    x = np.random.default_rng(1).standard_normal((300, 64)).astype(np.float32)
    np.testing.assert_allclose(ops.sum(x[::-1], 0), x.astype(np.float64).sum(0), rtol=1e-5,
                               atol=1e-4)
    np.testing.assert_array_equal(ops.neg(x[::-1, ::-2]), -x[::-1, ::-2])
    cupy = pytest.importorskip("cupy")
    c = cupy.asarray(x)[::-1, 1:]
    assert cupy.allclose(ops.amax(c, 1), c.max(1))
    assert cupy.array_equal(ops.exp(c), cupy.exp(c))
