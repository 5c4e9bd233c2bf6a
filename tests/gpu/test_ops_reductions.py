"""The reduction library on a GPU: results against torch or float64 NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import tile_mlir.ops

GPU_CASES = [
    ("sum", (4096, 128), 1, False, "float32"), ("sum", (4096, 128), 0, False, "float32"),
    ("amax", (257, 1031), -1, True, "float32"), ("amin", (1031, 257), 0, False, "float16"),
    ("prod", (64, 50), 1, False, "float32"), ("mean", (3, 5, 700), (0, 2), False, "bfloat16"),
    ("sum", (1, 1 << 20), None, False, "float32"), ("mean", (2048, 96), 0, True, "float16"),
    ("sum", (7, 9, 11, 13), (1, 3), False, "float32"), ("amax", (33,), 0, False, "bfloat16"),
    ("sum", (16, 65536), 1, False, "bfloat16"), ("mean", (1000, 1000), None, False, "float32"),
    # 16-bit columns, 8 a thread (16-byte loads; f32 partials stored 16 bytes at a time)
    ("sum", (4096, 1024), 0, False, "bfloat16"), ("amax", (8192, 128), 0, True, "float16"),
    # rows cut into chunks by divisors that are not powers of two: 7 chunks of 165
    # rows, 85 of 257
    ("sum", (1155, 256), 0, False, "float32"), ("amax", (21845, 384), 0, False, "bfloat16"),
    # rows of odd length, held by a CTA or a cluster and read with edges (reduce_rows_held):
    # clusters of 8 CTAs (50257), of 16 (262145 f32), CTAs of 64 and 128 threads; rows
    # longer than a cluster holds (2^20 + 1) take the stages
    ("sum", (1335, 50257), -1, False, "bfloat16"), ("amax", (64, 50257), -1, False, "float32"),
    ("mean", (4096, 1025), -1, False, "bfloat16"), ("amin", (512, 4097), 1, True, "float16"),
    ("sum", (16, 262145), -1, False, "float32"), ("sum", (8, 1048577), -1, False, "bfloat16"),
    ("amax", (300, 999), -1, False, "bfloat16"),
    # columns whose rows start unaligned, folded (8 rows of 1031 bf16 as one, 4 of f32 or
    # of 1030 f16, 8 of 263): 16-byte loads, then the folded partials reduced
    ("sum", (65536, 1031), 0, False, "bfloat16"), ("amax", (4096, 1031), 0, True, "float32"),
    ("mean", (3, 4096, 1030), 1, False, "float16"), ("amin", (8192, 263), 0, False, "bfloat16"),
]


@pytest.mark.gpu
@pytest.mark.parametrize(("name", "shape", "dim", "keepdim", "dtype"), GPU_CASES, ids=str)
def test_against_torch(name: str, shape: tuple[int, ...], dim: int | tuple[int, ...] | None,
                       keepdim: bool, dtype: str) -> None:
    torch = pytest.importorskip("torch")
    x = torch.randn(shape, device="cuda", dtype=getattr(torch, dtype))
    if name == "prod":
        x = 1 + 0.01 * x
    if name in ("amax", "amin"):
        x.view(-1)[:: max(1, x.numel() // 7)] = float("nan")
    got = getattr(tile_mlir.ops, name)(x, dim, keepdim)
    want = getattr(torch, name)(x.double(), dim=dim, keepdim=keepdim) if dim is not None \
        else getattr(torch, name)(x.double())
    assert got.dtype == x.dtype and got.shape == want.shape and got.device == x.device
    same_nans = torch.isnan(got) == torch.isnan(want)
    assert bool(same_nans.all()), "NaN propagation differs from torch"
    tol = {"float32": 1e-5, "float16": 1e-3, "bfloat16": 1.6e-2}[dtype]
    scale = x.double().abs().sum() / max(got.numel(), 1) if name in ("sum", "mean") else 1.0
    err = (got.double() - want).nan_to_num().abs().max()
    print(f"{name}{tuple(shape)} dim={dim} {dtype}: max |error| {float(err):.3g}")
    assert float(err) <= tol * float(max(scale, want.nan_to_num().abs().max(), 1.0))


@pytest.mark.gpu
def test_numpy_and_non_contiguous_inputs(rng: np.random.Generator) -> None:
    x = rng.standard_normal((300, 64)).astype(np.float32)
    np.testing.assert_allclose(tile_mlir.ops.sum(x, 0), x.astype(np.float64).sum(0),
                               rtol=1e-5, atol=1e-4)
    torch = pytest.importorskip("torch")
    t = torch.randn(64, 300, device="cuda").t()  # a transposed view
    assert torch.allclose(tile_mlir.ops.amax(t, 1), t.amax(1))


TAIL_CASES = [
    # rows no power of two divides well: chunks of whole 16-byte vectors, then the
    # rest's vectors, then its last elements (programs/reduction.py's _uneven)
    ("sum", (100000007,), None, "float32"), ("amax", (100000007,), None, "bfloat16"),
    ("sum", (8, 1000003), -1, "bfloat16"), ("amin", (3, 1000003), 1, "float32"),
    # prime row counts of columns: chunks of ceil(R / wanted) rows and a shorter last one
    ("sum", (21841, 3072), 0, "bfloat16"), ("amax", (21841, 384), 0, "float32"),
    ("mean", (2, 21841, 100), 1, "float32"),
    # odd column counts: blocks of 128 columns and a narrower last one (81, 7)
    ("sum", (1024, 50257), 0, "bfloat16"), ("amin", (21841, 263), 0, "float32"),
    # folded columns (8 rows of 1031 bf16, 4 of f32 as one), their partials' chunks
    ("sum", (65536, 1031), 0, "bfloat16"), ("amax", (4096, 1031), 0, "float32"),
    # and the rows past the folded ones (R no multiple of G: 3, 3, 1 and 5 of them), the
    # spikes at -1 among them
    ("sum", (65539, 1031), 0, "bfloat16"), ("amax", (4099, 1031), 0, "float32"),
    ("amin", (1027, 1030), 0, "float32"), ("mean", (4101, 1031), 0, "bfloat16"),
]


@pytest.mark.gpu
@pytest.mark.parametrize(("name", "shape", "dim", "dtype"), TAIL_CASES, ids=str)
def test_chunks_with_a_tail(name: str, shape: tuple[int, ...], dim: int | None,
                            dtype: str) -> None:
    """Reductions whose chunks end in a tail, against float64, with spikes of 2^16 (exact
    in every dtype here, far above the tolerance) along the reduced dim in the first
    element, the last, and 4 and 8 from the end (the last of the vector-wide rest for f32
    and bf16 rows of these lengths), so that a chunk left out shows: all at once for sums,
    one at a time for amax and amin; out= poisoned with NaN first."""
    torch = pytest.importorskip("torch")
    base = torch.randn(shape, device="cuda", dtype=getattr(torch, dtype))
    axis = len(shape) - 1 if dim is None else dim % len(shape)
    spikes = (0, -1, -4, -8)
    for group in [spikes] if name in ("sum", "mean") else [(at,) for at in spikes]:
        x = base.clone()
        for at in group:
            index: list[int | slice] = [slice(None)] * len(shape)
            index[axis] = at
            x[tuple(index)] = -65536.0 if name == "amin" else 65536.0
        want = getattr(torch, name)(x.double(), dim=dim) if dim is not None \
            else getattr(torch, name)(x.double())
        out = torch.full(want.shape, float("nan"), device="cuda", dtype=x.dtype)
        got = getattr(tile_mlir.ops, name)(x, dim, out=out)
        assert got.data_ptr() == out.data_ptr() and not bool(torch.isnan(out).any())
        tol = {"float32": 1e-5, "bfloat16": 1.6e-2}[dtype]
        scale = x.double().abs().sum() / got.numel() / (x.shape[axis] if name == "mean"
                                                         else 1) \
            if name in ("sum", "mean") else 1.0
        err = (out.double() - want).abs().max()
        print(f"{name}{tuple(shape)} dim={dim} {dtype} spikes {group}: max |error| "
              f"{float(err):.3g}")
        assert float(err) <= tol * float(max(scale, want.abs().max(), 1.0))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_rows_at_an_odd_offset_with_a_stride(dtype: str) -> None:
    """Rows of a wider array from an odd column on (each row's start unaligned): sum,
    amax and amin against float64; the array around the rows is only read."""
    torch = pytest.importorskip("torch")
    wide = torch.randn(257, 3000, device="cuda", dtype=getattr(torch, dtype))
    x = wide[:, 3:2004]
    for name in ("sum", "amax", "amin"):
        got = getattr(tile_mlir.ops, name)(x, -1)
        want = getattr(torch, name)(x.double(), dim=-1)
        tol = {"float32": 1e-5, "bfloat16": 1.6e-2}[dtype]
        scale = float(x.double().abs().sum(-1).max()) if name == "sum" else 1.0
        assert float((got.double() - want).abs().max()) <= tol * max(scale, 1.0), name
