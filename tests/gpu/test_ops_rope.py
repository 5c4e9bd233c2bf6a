"""gpu tier: RoPE's five ops on the GPU against vLLM's forward_native formulas in torch.

The torch reference below is written in this file from vLLM's formulas
(RotaryEmbedding.forward_native and apply_rotary_emb_torch: gather the cache
rows of the positions, cos and sin cast to the input's dtype, x1 cos - x2 sin
and x2 cos + x1 sin in that dtype, the dims past rotary_dim passed through);
Phi-3's LongRoPE picks the long or short rows by an offset of the original
context. Every result is also held to the float64 rotation (rope_ref.py) within
one rounding of the result plus f32 arithmetic. torch's own bf16/f16 arithmetic
rounds each product, so the comparison with it allows a few ulps of the terms.
Outputs are poisoned (NaN) and written through `out=`.

Run on the GPU machine from the repository root:
    source .stage/mlir/env.sh && python3 -m pytest -m gpu tests/test_ops_rope_gpu.py
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from support import rope_ref

from tile_mlir import ops

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
DTYPES = list(TORCH_DTYPES)

LONG = [1.0 + 0.1 * i for i in range(64)]
SHORT = [1.0 + 0.01 * i for i in range(64)]

VARIANTS: dict[str, tuple[Any, dict[str, Any]]] = {
    "neox": (ops.rope_neox, {"base": 10000.0, "max_position": 8192}),
    "non_neox": (ops.rope_non_neox, {"base": 10000.0, "max_position": 8192}),
    "llama31": (ops.rope_llama31, {"base": 500000.0, "scaling_factor": 8.0,
                                   "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                   "original_max_position": 8192, "max_position": 131072}),
    "yarn": (ops.rope_yarn, {"base": 10000.0, "scaling_factor": 4.0,
                             "original_max_position": 4096}),
    "longrope": (ops.rope_longrope, {"base": 10000.0, "short_factor": SHORT,
                                     "long_factor": LONG, "original_max_position": 4096,
                                     "max_position": 131072}),
}

# (tokens, heads, key_heads, head_dim, rotary_dim): Llama-3-8B's GQA, a partial rotary
# (GPT-NeoX-20B's quarter), odd sizes
SHAPES = [(333, 32, 8, 128, 128), (17, 8, 8, 96, 24), (1, 4, 1, 64, 64)]


def _forward_native(x: Any, cos: Any, sin: Any, rotary_dim: int, neox: bool) -> Any:
    """vLLM's forward_native rotation of x (tokens, heads, head_dim) by per-token cos and
    sin (tokens, rotary_dim/2), in x's dtype."""
    rot, rest = x[..., :rotary_dim], x[..., rotary_dim:]
    c = cos.unsqueeze(-2).to(x.dtype)
    s = sin.unsqueeze(-2).to(x.dtype)
    if neox:
        x1, x2 = torch.chunk(rot, 2, dim=-1)
    else:
        x1, x2 = rot[..., ::2], rot[..., 1::2]
    o1 = x1 * c - x2 * s
    o2 = x2 * c + x1 * s
    rotated = torch.cat((o1, o2), dim=-1) if neox else \
        torch.stack((o1, o2), dim=-1).flatten(-2)
    return torch.cat((rotated, rest), dim=-1)


def _compare(got: Any, x: Any, rows: Any, *, rotary_dim: int, neox: bool, dtype: str) -> str:
    """got against vLLM's formula in torch and against the float64 rotation."""
    half = rotary_dim // 2
    cos, sin = rows[:, :half], rows[:, half:]
    want_torch = _forward_native(x, cos, sin, rotary_dim, neox).double().cpu().numpy()
    style = "neox" if neox else "gptj"
    want, size = rope_ref.rotate(x[..., :rotary_dim].double().cpu().numpy(),
                                 cos.double().cpu().numpy(), sin.double().cpu().numpy(), style)
    g = got.double().cpu().numpy()
    eps = rope_ref.EPS[dtype]
    exact_bound = rope_ref.bound(want, size, dtype)
    torch_bound = 4 * eps * (size + np.abs(want)) + exact_bound
    against_exact = np.abs(g[..., :rotary_dim] - want)
    against_torch = np.abs(g - want_torch)[..., :rotary_dim]
    print(f"  max |ours - float64| {against_exact.max():.3g}, "
          f"|ours - forward_native| {against_torch.max():.3g}")
    if not (against_exact <= exact_bound).all():
        return f"{int((against_exact > exact_bound).sum())} elements off the float64 rotation"
    if not (against_torch <= torch_bound).all():
        return f"{int((against_torch > torch_bound).sum())} elements off forward_native"
    if not torch.equal(got[..., rotary_dim:], x[..., rotary_dim:]):
        return "the dims past rotary_dim are not the input's"
    return ""


def _case_ids() -> list[tuple[str, str, tuple[int, ...], bool]]:
    cases: list[tuple[str, str, tuple[int, ...], bool]] = []
    for variant in VARIANTS:
        for dtype in DTYPES:
            for shape in SHAPES:
                styles = [True] if variant in ("neox", "longrope") else \
                    [False] if variant == "non_neox" else [True, False]
                cases += [(variant, dtype, shape, neox) for neox in styles]
    return cases


CASES = _case_ids()


@pytest.mark.parametrize("case", CASES, ids=[
    f"{v}-{d}-{'x'.join(map(str, s))}-{'neox' if n else 'gptj'}" for v, d, s, n in CASES])
def test_against_forward_native(case: tuple[str, str, tuple[int, ...], bool],
                                rng: np.random.Generator) -> None:
    variant, dtype, (tokens, heads, key_heads, head_dim, rotary_dim), neox = case
    fn, params = VARIANTS[variant]
    params = dict(params)
    if variant == "longrope":
        params["short_factor"] = SHORT[:rotary_dim // 2]
        params["long_factor"] = LONG[:rotary_dim // 2]
    torch.manual_seed(int(rng.integers(1 << 62)))
    t = TORCH_DTYPES[dtype]
    q = torch.randn(tokens, heads, head_dim, device="cuda", dtype=t) * 3
    k = torch.randn(tokens, key_heads, head_dim, device="cuda", dtype=t) * 3
    cache = ops.rope_cache(variant, rotary_dim=rotary_dim, like=q, **params)
    first, rows = 0, cache.shape[0]
    if variant == "longrope":  # max_position > original: vLLM's long rows
        first, rows = params["original_max_position"], params["max_position"]
    positions = torch.from_numpy(rng.permutation(rng.integers(0, rows, tokens))).cuda()
    out = (torch.full_like(q, float("nan")), torch.full_like(k, float("nan")))
    extra = {"is_neox": neox} if variant in ("llama31", "yarn") else {}
    q_out, k_out = fn(q, k, positions, rotary_dim=rotary_dim, out=out, **params, **extra)
    assert q_out is out[0] and k_out is out[1]
    gathered = cache.index_select(0, positions + first)
    print(f"{variant} {dtype} {tuple(q.shape)} {tuple(k.shape)} rotary_dim {rotary_dim}")
    assert _compare(q_out, q, gathered, rotary_dim=rotary_dim, neox=neox, dtype=dtype) == ""
    assert _compare(k_out, k, gathered, rotary_dim=rotary_dim, neox=neox, dtype=dtype) == ""


def _vllm_float32_cache(variant: str, rotary_dim: int, params: dict[str, Any]) -> Any:
    """The cache as vLLM computes it: inverse frequencies and angles in float32 torch."""
    exponents = torch.arange(0, rotary_dim, 2, dtype=torch.float) / rotary_dim
    inv = 1.0 / (params["base"] ** exponents)
    if variant == "llama31":
        factor, low, high = (params["scaling_factor"], params["low_freq_factor"],
                             params["high_freq_factor"])
        original = params["original_max_position"]
        wavelength = 2 * math.pi / inv
        smooth = (original / wavelength - low) / (high - low)
        inv = torch.where(wavelength < original / high, inv,
                          torch.where(wavelength > original / low, inv / factor,
                                      (1 - smooth) * inv / factor + smooth * inv))
    t = torch.arange(params["max_position"], dtype=torch.float)
    freqs = torch.einsum("i,j -> ij", t, inv)
    return torch.cat((freqs.cos(), freqs.sin()), dim=-1)


@pytest.mark.parametrize("variant", ["neox", "llama31"])
def test_cache_against_vllms_float32(variant: str) -> None:
    """rope_cache computes in float64; vLLM's float32 angles drift by a few ulps of
    position * inv_freq (inv_freq <= 1), which is all the two differ by."""
    params = dict(VARIANTS[variant][1])
    params["max_position"] = 8192
    ours = ops.rope_cache(variant, rotary_dim=128, **params)
    theirs = _vllm_float32_cache(variant, 128, params).double().numpy()
    positions = np.arange(8192, dtype=np.float64)[:, None]
    drift = (positions + 1) * 2.0**-21
    diff = np.abs(ours - theirs)
    print(f"{variant}: max |float64 - vLLM float32| {diff.max():.3g} (at 8191: "
          f"{diff[-1].max():.3g})")
    assert (diff <= drift).all()


def test_numpy_and_cupy_arrays(rng: np.random.Generator) -> None:
    """Host arrays are staged through the device (and their positions checked)."""
    q = rng.standard_normal((5, 4, 64)).astype(np.float32)
    k = rng.standard_normal((5, 2, 64)).astype(np.float32)
    positions = np.array([7, 0, 7, 3, 100])
    q_out, k_out = ops.rope_neox(q, k, positions, max_position=128)
    table = rope_ref.table("neox", 64, max_position=128)
    for got, x in ((q_out, q), (k_out, k)):
        want, size = rope_ref.rotate(x, table[positions, :32], table[positions, 32:], "neox")
        assert isinstance(got, np.ndarray)
        assert (np.abs(got - want) <= rope_ref.bound(want, size, "f32")).all()
    try:
        import cupy
    except ImportError:
        return
    q_out, k_out = ops.rope_neox(cupy.asarray(q), cupy.asarray(k), cupy.asarray(positions),
                                 max_position=128)
    assert isinstance(q_out, cupy.ndarray)
    want, size = rope_ref.rotate(q, table[positions, :32], table[positions, 32:], "neox")
    assert (np.abs(cupy.asnumpy(q_out) - want) <= rope_ref.bound(want, size, "f32")).all()


def test_out_of_range_positions_on_the_device_give_nan() -> None:
    q = torch.randn(4, 2, 64, device="cuda", dtype=torch.bfloat16)
    positions = torch.tensor([0, -1, 64, 5], device="cuda")
    q_out, _ = ops.rope_neox(q, None, positions, max_position=64)
    nan = torch.isnan(q_out.float())
    assert nan[1].all() and nan[2].all() and not nan[0].any() and not nan[3].any()


def test_packed_qkv_views() -> None:
    """vLLM's qkv projection output split into views: no copies, strided token rows."""
    tokens, heads, key_heads, head_dim = 100, 16, 4, 128
    qkv = torch.randn(tokens, (heads + 2 * key_heads) * head_dim, device="cuda",
                      dtype=torch.bfloat16)
    q, k, _ = qkv.split([heads * head_dim, key_heads * head_dim, key_heads * head_dim], -1)
    q, k = q.view(tokens, heads, head_dim), k.view(tokens, key_heads, head_dim)
    positions = torch.arange(tokens, device="cuda").flip(0)
    cache = ops.rope_cache("neox", rotary_dim=head_dim, like=q, max_position=4096,
                           base=10000.0)
    q_out, k_out = ops.rope_neox(q, k, positions, cos_sin_cache=cache)
    rows = cache.index_select(0, positions)
    assert _compare(q_out, q, rows, rotary_dim=head_dim, neox=True, dtype="bf16") == ""
    assert _compare(k_out, k, rows, rotary_dim=head_dim, neox=True, dtype="bf16") == ""
    assert math.isfinite(float(q_out.float().abs().max()))


@pytest.mark.parametrize("neox", [True, False], ids=["neox", "gptj"])
def test_expanded_query_key_and_cache(neox: bool, rng: np.random.Generator) -> None:
    """torch's expand: one query row for every token, one key head for every head and
    token, a cache whose rows are all one row; every element checked, outputs poisoned."""
    tokens, heads, head_dim = 37, 6, 64
    torch.manual_seed(int(rng.integers(1 << 62)))
    q = (torch.randn(1, heads, head_dim, device="cuda", dtype=torch.float16) * 3
         ).expand(tokens, heads, head_dim)
    k = (torch.randn(1, 1, head_dim, device="cuda", dtype=torch.float16) * 3
         ).expand(tokens, 2, head_dim)
    fn = ops.rope_neox if neox else ops.rope_non_neox
    positions = torch.from_numpy(rng.integers(0, 300, tokens)).cuda()
    out = (torch.full((tokens, heads, head_dim), float("nan"), device="cuda",
                      dtype=torch.float16),
           torch.full((tokens, 2, head_dim), float("nan"), device="cuda", dtype=torch.float16))
    q_out, k_out = fn(q, k, positions, max_position=300, out=out)
    cache = ops.rope_cache("neox" if neox else "non_neox", rotary_dim=head_dim, like=q,
                           max_position=300, base=10000.0)
    rows = cache.index_select(0, positions)
    assert _compare(q_out, q, rows, rotary_dim=head_dim, neox=neox, dtype="f16") == ""
    assert _compare(k_out, k, rows, rotary_dim=head_dim, neox=neox, dtype="f16") == ""
    one_row = cache[7:8].expand(300, head_dim)
    q_out, _ = fn(q.contiguous(), None, positions, cos_sin_cache=one_row)
    rows = one_row.index_select(0, positions)
    assert _compare(q_out, q, rows, rotary_dim=head_dim, neox=neox, dtype="f16") == ""
