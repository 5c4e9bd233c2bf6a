"""gpu tier: the library's ops under torch.compile (ops/torch_library.py), on CUDA.

torch.library.opcheck on every op of the table (schema, fake against the real
result's meta, autograd registration, AOT dispatch with dynamic shapes), and
blocks compiled with fullgraph=True by inductor against eager torch: one of
part 1's ops and reductions, and an MLP with a fused gated activation and RoPE
on q/k.

    source .stage/mlir/env.sh && python3 -m pytest -m gpu tests/test_ops_torch_compile_gpu.py
"""

from __future__ import annotations

from typing import Any

import pytest

from tile_mlir import ops
from tile_mlir.ops.torch_library import OPS, Entry, variants

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

INTEGER_OPS = ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not")


@pytest.fixture(scope="module")
def tops() -> Any:
    return ops.torch_ops()


def _sample(entry: Entry, choice: str, name: str) -> Any:
    """An argument of a variant: a CUDA tensor ("t") or a number ("s")."""
    if entry.name in INTEGER_OPS:
        return torch.randint(-100, 100, (4, 8), device="cuda", dtype=torch.int32) \
            if choice == "t" else 7
    if name in ("condition", "mask"):
        return torch.rand(4, 8, device="cuda") < 0.5
    if choice == "s":
        return 0.5
    shape = (4, 8) if name in ("input", "x") else (8,)
    return torch.rand(shape, device="cuda") + 0.5  # positive: log, sqrt, pow give no NaN


def _arguments(entry: Entry, variant_params: Any, choices: Any) -> list[Any]:
    """The required operands sampled; parameters with defaults left to them (clamp's
    bounds are given, one of them is needed)."""
    args = []
    for p, c in zip(variant_params, choices, strict=True):
        if p.operand and (p.default is not None or entry.name == "clamp"):
            args.append(_sample(entry, c or "t", p.name))
        elif p.type == "Scalar" and p.name == "value":
            args.append(1.5)
    return args


def _rope_arguments(name: str) -> list[Any]:
    """query (5, 4, 16) and key (5, 2, 16) rotated by rows of a 32-position cache, and the
    variants' own parameters (LongRoPE's lengths: the short factors' rows)."""
    query = torch.randn(5, 4, 16, device="cuda")
    key = torch.randn(5, 2, 16, device="cuda")
    positions = torch.tensor([0, 3, 31, 3, 7], device="cuda")
    cache = torch.randn(32, 16, device="cuda")
    extra = [32, 32] if name == "rope_longrope" else []
    return [query, key, positions, cache, 16, *extra]


def _special_arguments(name: str) -> list[Any] | None:
    """Arguments of the forms that are not operands and numbers: RoPE's, dropout's (a
    seed, so that every run draws the same stream), the generators' sizes and device."""
    carrier = torch.empty(0, device="cuda")
    if name.startswith("rope_"):
        return _rope_arguments(name)
    if name in ("dropout", "dropout_mask"):
        return [torch.randn(4, 8, device="cuda"), 0.25, True, 11, 0]
    rows, weight = torch.randn(4, 8, device="cuda"), torch.rand(8, device="cuda") + 0.5
    if name == "rms_norm":  # the row ops' normalized_shape, weights and eps
        return [rows, [8], weight, 1e-6]
    if name == "layer_norm":
        return [rows, [8], weight, torch.randn(8, device="cuda"), 1e-5]
    if name == "fused_add_rms_norm":
        return [rows, torch.randn(4, 8, device="cuda"), weight, 1e-6]
    return {"alibi": [6, 10, torch.float32, carrier],
            "sinusoidal": [10, 8, torch.float32, carrier]}.get(name)


CALLS = [(v.name, e) for e in OPS for v in variants(e)]


@pytest.mark.parametrize(("name", "entry"), CALLS, ids=[n for n, _ in CALLS])
def test_opcheck(tops: Any, name: str, entry: Entry) -> None:
    variant = next(v for v in variants(entry) if v.name == name)
    args = _special_arguments(name) or _arguments(entry, variant.params, variant.choices)
    op = getattr(tops.ops, name).default
    print(op._schema, [getattr(a, "dtype", a) for a in args])
    torch.library.opcheck(op, args)


def _counted(backend: str = "inductor") -> Any:
    from torch._dynamo.testing import CompileCounterWithBackend

    return CompileCounterWithBackend(backend)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_part_1_block_compiles_whole(tops: Any, dtype: Any) -> None:
    def block(x: Any, y: Any, bias: Any) -> tuple[Any, ...]:
        h = tops.where(tops.gt(x, 0), tops.mul(tops.exp(x), y), tops.add(x, bias, alpha=0.5))
        return tops.sum(h, dim=-1), tops.amax(h, dim=0), tops.mean(h)

    def reference(x: Any, y: Any, bias: Any) -> tuple[Any, ...]:
        h = torch.where(x > 0, torch.exp(x) * y, torch.add(x, bias, alpha=0.5))
        return h.sum(-1), h.amax(0), h.mean()

    x = torch.randn(64, 4096, device="cuda", dtype=dtype)
    y = torch.randn(64, 4096, device="cuda", dtype=dtype)
    bias = torch.randn(4096, device="cuda", dtype=dtype)
    counter = _counted()
    compiled = torch.compile(block, backend=counter, fullgraph=True)
    got, eager, want = compiled(x, y, bias), block(x, y, bias), reference(x, y, bias)
    assert counter.frame_count == 1
    tolerance = {"rtol": 2e-2, "atol": 1e-1} if dtype == torch.bfloat16 else \
        {"rtol": 1e-4, "atol": 1e-3}
    for g, e, w in zip(got, eager, want, strict=True):
        torch.testing.assert_close(g, e, rtol=0, atol=0)  # the same kernels, compiled or not
        torch.testing.assert_close(g, w, **tolerance)
    print(f"{dtype}: compiled == eager tile_mlir; vs torch max |diff| "
          f"{max(float((g.float() - w.float()).abs().max()) for g, w in zip(got, want, strict=True)):.3g}")


# ------------------------------------------------------------- part 2 block


def _rope_neox(query: Any, key: Any, positions: Any, cache: Any, head_dim: int
               ) -> tuple[Any, Any]:
    """NeoX RoPE in torch: (tokens, heads * head_dim) arrays, the whole head rotated by
    cache rows [cos | sin] of head_dim / 2 each (vLLM's layout)."""
    cos, sin = cache[positions].float().chunk(2, dim=-1)

    def rotate(x: Any) -> Any:
        x1, x2 = x.view(x.shape[0], -1, head_dim).float().chunk(2, dim=-1)
        c, s = cos[:, None, :], sin[:, None, :]
        return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).to(x.dtype).view(x.shape)

    return rotate(query), rotate(key)


def test_mlp_and_rope_block_compiles_whole(tops: Any) -> None:
    """linear -> silu_and_mul -> linear, and RoPE on q/k projections, bf16, against
    eager torch (F.silu(h[..., :N]) * h[..., N:], the rotation above)."""
    tokens, hidden, inter, heads, kv_heads, head_dim = 256, 1024, 2816, 8, 2, 128
    dt = torch.bfloat16
    up = torch.nn.Linear(hidden, 2 * inter, bias=False, device="cuda", dtype=dt)
    down = torch.nn.Linear(inter, hidden, bias=False, device="cuda", dtype=dt)
    wq = torch.nn.Linear(hidden, heads * head_dim, bias=False, device="cuda", dtype=dt)
    wk = torch.nn.Linear(hidden, kv_heads * head_dim, bias=False, device="cuda", dtype=dt)
    inverse = 1.0 / 10000 ** (torch.arange(0, head_dim, 2, device="cuda").float() / head_dim)
    angles = torch.arange(4096, device="cuda").float()[:, None] * inverse[None, :]
    cache = torch.cat((angles.cos(), angles.sin()), dim=-1).to(dt)
    positions = torch.randint(0, 4096, (tokens,), device="cuda")

    def block(x: Any) -> tuple[Any, Any, Any]:
        q = wq(x).view(tokens, heads, head_dim)
        k = wk(x).view(tokens, kv_heads, head_dim)
        q, k = tops.rope_neox(q, k, positions, cos_sin_cache=cache, rotary_dim=head_dim)
        return down(tops.silu_and_mul(up(x))), q.view(tokens, -1), k.view(tokens, -1)

    def reference(x: Any) -> tuple[Any, Any, Any]:
        h = up(x)
        q, k = _rope_neox(wq(x), wk(x), positions, cache, head_dim)
        return down(torch.nn.functional.silu(h[..., :inter]) * h[..., inter:]), q, k

    x = torch.randn(tokens, hidden, device="cuda", dtype=dt)
    counter = _counted()
    with torch.no_grad():
        compiled = torch.compile(block, backend=counter, fullgraph=True)
        got, want = compiled(x), reference(x)
    assert counter.frame_count == 1
    for name, g, w in zip(("mlp", "q", "k"), got, want, strict=True):
        print(name, "max |diff|", float((g.float() - w.float()).abs().max()))
        torch.testing.assert_close(g, w, rtol=2e-2, atol=2e-2)
