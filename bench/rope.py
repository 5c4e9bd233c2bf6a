"""Benchmark: tile_mlir.ops' RoPE against vLLM's forward_native written in torch (eager
and torch.compile), TB/s of essential traffic (bench/harness.py times and reports).

Cases: Llama-3-8B's shapes (32 query heads, 8 key heads, head_dim 128, neox) and
GPT-J's (16 and 16, head_dim 256, rotary_dim 64, interleaved pairs), bf16 and f16,
1 to 16384 tokens. Traffic: query and key read once and written once, one position
(int64) and one cache row per token. Outputs: fresh (forward_native has no out=).
tile-mlir's result is checked against forward_native's (which rounds every product to
the input's type, hence the tolerance).

    python3 bench/rope.py [--quick] [--cases 'llama.*bf16'] [--dry-run]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import harness
from harness import Benchmark, Built, Call, Case, torch_dtype, torch_module

# (name, heads, key_heads, head_dim, rotary_dim, neox)
MODELS = (
    ("llama3-8b neox", 32, 8, 128, 128, True),
    ("gpt-j gptj", 16, 16, 256, 64, False),
)
DTYPES = ("bf16", "f16")
TOKENS = (1, 64, 1024, 4096, 16384)
MAX_POSITION = 8192

BENCH = Benchmark("rope", "RoPE against vLLM's forward_native",
                  notes=("torch eager: vLLM's RotaryEmbedding.forward_native formulas "
                         "(gather, rotate, concatenate); torch.compile: the same",))

Model = tuple[str, int, int, int, int, bool]


def traffic(model: Model, tokens: int, dtype: str) -> int:
    _, heads, key_heads, head_dim, rotary_dim, _ = model
    size = harness.ITEMSIZE[dtype]
    return tokens * (heads + key_heads) * head_dim * size * 2 + tokens * (8 + rotary_dim * size)


def case(model: Model, tokens: int, dtype: str) -> Case:
    return Case(f"{model[0]} {dtype} tokens={tokens}", traffic(model, tokens, dtype),
                lambda: build(model, tokens, dtype), "fresh",
                {"model": model[0], "dtype": dtype, "tokens": tokens})


def plan(quick: bool) -> list[Case]:
    tokens = (64, 4096) if quick else TOKENS
    dtypes = ("bf16",) if quick else DTYPES
    return [case(model, n, dtype) for model in MODELS for dtype in dtypes for n in tokens]


def forward_native(query: Any, key: Any, positions: Any, cache: Any, *, rotary_dim: int,
                   neox: bool) -> tuple[Any, Any]:
    """vLLM's RotaryEmbedding.forward_native, as torch code (gather, rotate, concatenate)."""
    torch = torch_module()
    cos, sin = cache.index_select(0, positions).chunk(2, dim=-1)
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)

    def rotate(x: Any) -> Any:
        rot, rest = x[..., :rotary_dim], x[..., rotary_dim:]
        x1, x2 = (rot.chunk(2, dim=-1) if neox else (rot[..., ::2], rot[..., 1::2]))
        o1, o2 = x1 * cos - x2 * sin, x2 * cos + x1 * sin
        out = torch.cat((o1, o2), -1) if neox else torch.stack((o1, o2), -1).flatten(-2)
        return torch.cat((out, rest), dim=-1)

    return rotate(query), rotate(key)


def build(model: Model, tokens: int, dtype: str) -> Built:
    from tile_mlir import ops

    torch = torch_module()
    _, heads, key_heads, head_dim, rotary_dim, neox = model
    t = torch_dtype(dtype)
    cache = ops.rope_cache("neox", rotary_dim=rotary_dim, max_position=MAX_POSITION,
                           base=10000.0, like=torch.empty(1, device="cuda", dtype=t))
    q = torch.randn(tokens, heads, head_dim, device="cuda", dtype=t)
    k = torch.randn(tokens, key_heads, head_dim, device="cuda", dtype=t)
    positions = torch.randint(0, MAX_POSITION, (tokens,), device="cuda")
    fn = ops.rope_neox if neox else ops.rope_non_neox

    def eager(q: Any, k: Any, p: Any, cache: Any) -> tuple[Any, Any]:
        return forward_native(q, k, p, cache, rotary_dim=rotary_dim, neox=neox)

    want = eager(q, k, positions, cache)

    def check(system: str, got: Any) -> None:
        if system != "eager":
            for a, b in zip(got, want, strict=True):
                harness.assert_close(a, b, rtol=2e-2, atol=2e-2)

    return Built({
        "tile-mlir": Call(fn, (q, k, positions), {"cos_sin_cache": cache}),
        "eager": Call(eager, (q, k, positions, cache)),
        "compile": Call(eager, (q, k, positions, cache), compiled=True),
    }, check)


def main(argv: Sequence[str] | None = None) -> int:
    return harness.main(BENCH, plan, argv)


if __name__ == "__main__":
    raise SystemExit(main())
