"""gpu tier: dropout, alibi and sinusoidal on the GPU.

Dropout's mask and values against the NumPy Philox reference bit for bit, on several
launch strategies (one mask for all), its keep rate over 2^22 elements at several p,
and torch, CuPy and NumPy arrays; the encodings against float64 torch formulas (the
ALiBi paper's slopes, PE's p / base^(2i/dim)).

    source .stage/mlir/env.sh && python3 -m pytest -m gpu tests/gpu/test_generators.py
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from null.test_generators import STRATEGIES
from support.differential import paper_slopes
from support.ops_torch import HAVE_TORCH, torch_module

from tile_mlir import ops
from tile_mlir.op_table import refs
from tile_mlir.ops import strategy

pytestmark = pytest.mark.gpu


def _torch() -> Any:
    if not HAVE_TORCH:
        pytest.skip("needs torch")
    return torch_module()


def _reference(x: np.ndarray, p: float, seed: int, offset: int) -> tuple[np.ndarray, np.ndarray]:
    index = np.arange(x.size, dtype=np.uint64)
    threshold = math.floor(p * 2**32)
    keep = refs.dropout_mask(seed, offset, threshold, index).reshape(x.shape)
    values = refs.dropout(x.reshape(-1), np.float32(1 / (1 - p)), seed, offset, threshold,
                          index).reshape(x.shape)
    return values, keep


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float8_e4m3fn"])
def test_dropout_matches_the_reference_on_every_strategy(dtype: str,
                                                         rng: np.random.Generator) -> None:
    torch = _torch()
    x = torch.randn(301, 1037, device="cuda").to(getattr(torch, dtype))
    x_wide = torch.randn(602, 1037, device="cuda").to(x.dtype)[::2]  # rows pieces
    seed, offset = int(rng.integers(0, 2**63)), int(rng.integers(0, 2**40))
    for array in (x, x_wide):
        host = array.float().cpu().numpy()
        want, keep = _reference(host, 0.2, seed, offset)
        want_t = torch.from_numpy(want).to(x.dtype)
        if dtype == "float8_e4m3fn":
            want_t = torch.from_numpy(np.clip(want, -448, 448)).to(x.dtype)
        try:
            for choice in [None, *STRATEGIES]:
                strategy.force(choice)
                got, mask = ops.dropout(array, 0.2, seed=seed, offset=offset, return_mask=True)
                assert torch.equal(mask.cpu(), torch.from_numpy(keep)), choice
                assert torch.equal(got.cpu().view(torch.uint8), want_t.view(torch.uint8)), choice
        finally:
            strategy.force(None)
        print(f"{dtype} {tuple(array.shape)} stride {array.stride()}: {1 + len(STRATEGIES)} "
              f"strategies, one mask, bit for bit; kept {keep.mean():.4f}")


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_keep_rate(p: float) -> None:
    torch = _torch()
    n = 1 << 22
    kept = ops.dropout(torch.ones(n, device="cuda"), p, return_mask=True)[1].sum().item()
    sigma = math.sqrt(n * p * (1 - p))
    print(f"p={p}: kept {kept / n:.5f} ({(kept - n * (1 - p)) / sigma:+.2f} sigma)")
    assert abs(kept - n * (1 - p)) <= 6 * sigma


def test_library_generator_is_deterministic() -> None:
    torch = _torch()
    x = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    ops.manual_seed(7)
    a, b = ops.dropout(x, 0.5), ops.dropout(x, 0.5)
    ops.manual_seed(7)
    assert torch.equal(ops.dropout(x, 0.5), a) and not torch.equal(a, b)


def test_cupy_and_numpy_arrays() -> None:
    x = np.random.default_rng(0).standard_normal((33, 65)).astype(np.float32)
    want, keep = _reference(x, 0.5, 5, 0)
    got, mask = ops.dropout(x, 0.5, seed=5, return_mask=True)
    assert isinstance(got, np.ndarray) and np.array_equal(got, want)
    assert np.array_equal(mask, keep)
    cupy = pytest.importorskip("cupy")
    got_c, mask_c = ops.dropout(cupy.asarray(x), 0.5, seed=5, return_mask=True)
    assert isinstance(got_c, cupy.ndarray) and np.array_equal(cupy.asnumpy(got_c), want)
    assert np.array_equal(cupy.asnumpy(mask_c), keep)
    pe = ops.sinusoidal(16, 8, like=cupy.zeros(1))
    assert isinstance(pe, cupy.ndarray) and pe.shape == (16, 8)
    pe_np = ops.sinusoidal(16, 8, like=x)
    assert isinstance(pe_np, np.ndarray) and np.allclose(pe_np, cupy.asnumpy(pe))


@pytest.mark.parametrize("heads", [8, 12, 48])
def test_alibi_against_torch(heads: int) -> None:
    torch = _torch()
    for dtype, tol in ((torch.float32, 2.0**-22), (torch.bfloat16, 2.0**-7)):
        got = ops.alibi(heads, 2049, dtype=dtype)
        assert got.dtype == dtype and got.is_cuda
        slopes = torch.tensor(paper_slopes(heads), dtype=torch.float64, device="cuda")
        want = slopes[:, None] * torch.arange(2049, dtype=torch.float64, device="cuda")
        error = ((got.double() - want).abs() / want.abs().clamp_min(1e-30)).max().item()
        print(f"alibi {heads} heads {dtype}: max rel error {error:.3g}")
        assert error <= tol


def test_sinusoidal_against_torch() -> None:
    torch = _torch()
    positions, dim = 8192, 1024
    got = ops.sinusoidal(positions, dim)
    p = torch.arange(positions, dtype=torch.float64, device="cuda")[:, None]
    inv = torch.pow(10000.0, -torch.arange(0, dim, 2, dtype=torch.float64, device="cuda") / dim)
    want = torch.empty(positions, dim, dtype=torch.float64, device="cuda")
    want[:, 0::2] = torch.sin(p * inv)
    want[:, 1::2] = torch.cos(p * inv)
    error = (got.double() - want).abs().max().item()
    print(f"sinusoidal ({positions}, {dim}): max abs error {error:.3g} against float64")
    assert error <= 1e-6


SINUSOIDAL_BOUNDS = {"f32": 2.5e-7, "f16": 2.0**-11 + 2.5e-7, "bf16": 2.0**-8 + 2.5e-7}
"""Half an ulp of 1 in the dtype plus the f32 result's error (two f32 ulps of values
near 1: the quadrant polynomials' and x's rounding)."""


def _sinusoidal64(positions: int, dim: int, base: float) -> np.ndarray:
    p = np.arange(positions, dtype=np.float64)[:, None]
    angle = p / np.power(base, (np.arange(dim) // 2 * 2) / dim)[None]
    return np.where(np.arange(dim) % 2 == 1, np.cos(angle), np.sin(angle))


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize(("positions", "dim", "base"),
                         [(20000, 64, 10000.0), (333, 4096, 10000.0), (4097, 130, 500000.0),
                          (1000, 10, 10000.0), (77, 6, 10.0), (517, 63, 10000.0),
                          (9, 1, 10000.0), (3, 2, 10000.0), (131072, 34, 10000.0)])
def test_sinusoidal_every_dim(dtype: str, positions: int, dim: int, base: float) -> None:
    """Both ways of the kernel (column pairs for an even dim of at least the lanes + 2,
    the f64 formula per lane otherwise) at every launch strategy, into a fresh tensor
    and into a poisoned out= one element past a 16-byte boundary (accesses whose first
    lane is a cosine column), against float64: every element within the bound."""
    torch = _torch()
    torch_dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    want = _sinusoidal64(positions, dim, base)
    bound = SINUSOIDAL_BOUNDS[dtype]
    worst = 0.0
    try:
        for choice in [None, *STRATEGIES]:
            strategy.force(choice)
            fresh = ops.sinusoidal(positions, dim, base=base, dtype=torch_dtype)
            store = torch.full((positions * dim + 1,), float("nan"), dtype=torch_dtype,
                               device="cuda")
            view = store[1:].view(positions, dim)
            assert ops.sinusoidal(positions, dim, base=base, out=view) is view
            assert torch.isnan(store[:1]).all()
            for got in (fresh, view):
                error = np.abs(got.double().cpu().numpy() - want)
                assert not np.isnan(error).any(), choice  # every element written
                worst = max(worst, float(error.max()))
                assert error.max() <= bound, (choice, np.unravel_index(error.argmax(),
                                                                       error.shape))
    finally:
        strategy.force(None)
    print(f"sinusoidal {dtype} ({positions}, {dim}) base {base}: max abs error {worst:.3g} "
          f"(bound {bound:.3g})")


@pytest.mark.parametrize(("heads", "length"), [(12, 2049), (5, 9), (48, 129), (3, 7), (16, 8),
                                               (7, 1), (1, 3), (100, 33), (200, 2), (1031, 5)])
def test_alibi_every_length(heads: int, length: int) -> None:
    """Both ways of the kernel (two slopes an access where a row holds the access's lanes,
    each lane's otherwise) at every launch strategy, fresh and into a poisoned out= one
    element past a 16-byte boundary: f32 within an ulp of float64 (one rounding)."""
    torch = _torch()
    want = np.array(paper_slopes(heads))[:, None] * np.arange(length)
    worst = 0.0
    try:
        for choice in [None, *STRATEGIES]:
            strategy.force(choice)
            fresh = ops.alibi(heads, length)
            store = torch.full((heads * length + 1,), float("nan"), device="cuda")
            view = store[1:].view(heads, length)
            assert ops.alibi(heads, length, out=view) is view
            assert torch.isnan(store[:1]).all()
            for got in (fresh, view):
                error = np.abs(got.double().cpu().numpy() - want) / np.maximum(np.abs(want),
                                                                                1e-30)
                assert not np.isnan(error).any(), choice  # every element written
                worst = max(worst, float(error.max()))
                assert error.max() <= 2.0**-23, choice
    finally:
        strategy.force(None)
    print(f"alibi ({heads}, {length}): max rel error {worst:.3g}")
