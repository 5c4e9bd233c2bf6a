"""Benchmark: tile_mlir.ops' RoPE against vLLM's forward_native in torch (eager and
torch.compile), TB/s of essential traffic.

The traffic is what the op must move: query and key read once and written once,
one position and one cache row per token. Each implementation is timed as
bench/elementwise.py times ops (CUDA-graph replays over input sets rotated past
L2, median per call) after its result is checked against float64 (ours) or
ours (torch's, which rounds every product to the input's type).

    python3 bench/rope.py                      # Llama-3-8B's shapes, bf16 and f16
    python3 bench/rope.py --tokens 1,64,4096,16384 --dtypes bf16

It writes bench/results/rope-<device>.md and prints the table.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from elementwise import _l2_bytes, time_call

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tile_mlir import ops  # noqa: E402 - after the path is set

RESULTS = ROOT / "bench" / "results"
TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
# (name, heads, key_heads, head_dim, rotary_dim, neox)
MODELS = [
    ("llama3-8b neox", 32, 8, 128, 128, True),
    ("gpt-j gptj", 16, 16, 256, 64, False),
]


def forward_native(query: Any, key: Any, positions: Any, cache: Any, *, rotary_dim: int,
                   neox: bool) -> tuple[Any, Any]:
    """vLLM's RotaryEmbedding.forward_native, as torch code (gather, rotate, concatenate)."""
    cos, sin = cache.index_select(0, positions).chunk(2, dim=-1)
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)

    def rotate(x: Any) -> Any:
        rot, rest = x[..., :rotary_dim], x[..., rotary_dim:]
        x1, x2 = (rot.chunk(2, dim=-1) if neox else (rot[..., ::2], rot[..., 1::2]))
        o1, o2 = x1 * cos - x2 * sin, x2 * cos + x1 * sin
        out = torch.cat((o1, o2), -1) if neox else torch.stack((o1, o2), -1).flatten(-2)
        return torch.cat((out, rest), dim=-1)

    return rotate(query), rotate(key)


def measure(model: tuple[str, int, int, int, int, bool], tokens: int, dtype: str,
            replays: int) -> list[str]:
    name, heads, key_heads, head_dim, rotary_dim, neox = model
    t = TORCH_DTYPES[dtype]
    itemsize = torch.empty((), dtype=t).element_size()
    per_set = tokens * (heads + key_heads) * head_dim * itemsize * 2
    count = max(2, min(64, 3 * _l2_bytes() // max(per_set, 1) + 1))
    cache = ops.rope_cache("neox", rotary_dim=rotary_dim, max_position=8192, base=10000.0,
                           like=torch.empty(1, device="cuda", dtype=t))
    sets = []
    for _ in range(count):
        q = torch.randn(tokens, heads, head_dim, device="cuda", dtype=t)
        k = torch.randn(tokens, key_heads, head_dim, device="cuda", dtype=t)
        positions = torch.randint(0, 8192, (tokens,), device="cuda")
        sets.append([q, k, positions])
    fn = ops.rope_neox if neox else ops.rope_non_neox
    ours: Callable[..., Any] = lambda q, k, p: fn(q, k, p, cos_sin_cache=cache)  # noqa: E731
    eager: Callable[..., Any] = lambda q, k, p: forward_native(  # noqa: E731
        q, k, p, cache, rotary_dim=rotary_dim, neox=neox)
    compiled = torch.compile(eager)
    got, want = ours(*sets[0]), eager(*sets[0])
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a.float(), b.float(), rtol=2e-2, atol=2e-2)
    traffic = per_set + tokens * (8 + rotary_dim * itemsize)
    row = [name, dtype, str(tokens), f"{traffic / 1e6:.2f}"]
    for impl in (ours, eager, compiled):
        try:
            seconds, how = time_call(impl, sets, replays)
            mark = "" if how == "graph" else "*"
            row.append(f"{seconds * 1e6:.1f} us / {traffic / seconds / 1e12:.2f}{mark}")
        except Exception as e:  # noqa: BLE001 - a peer that does not run is reported
            row.append(f"n/a ({type(e).__name__})")
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description="tile_mlir.ops RoPE vs torch")
    parser.add_argument("--tokens", default="1,64,1024,4096,16384")
    parser.add_argument("--dtypes", default="bf16,f16")
    parser.add_argument("--replays", type=int, default=30)
    args = parser.parse_args()
    device = torch.cuda.get_device_name(0)
    header = ["model", "dtype", "tokens", "MB moved", "tile_mlir (us / TB/s)",
              "torch eager", "torch.compile"]
    rows = []
    for model in MODELS:
        for dtype in args.dtypes.split(","):
            for tokens in map(int, args.tokens.split(",")):
                rows.append(measure(model, tokens, dtype, args.replays))
                print(" | ".join(rows[-1]), flush=True)
    lines = [f"# RoPE on {device}", "",
             f"`python3 bench/rope.py {' '.join(sys.argv[1:])}`, torch {torch.__version__}, "
             f"{time.strftime('%Y-%m-%d')}. Microseconds per call and TB/s of essential "
             "traffic (query and key read and written once, a position and a cache row per "
             "token), median of CUDA-graph replays over input sets rotated past L2 (*: a "
             "plain loop).", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header),
             *("| " + " | ".join(r) + " |" for r in rows)]
    slug = re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"rope-{slug}.md"
    path.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
