"""A/B of ops/reductions.py's held rows (reduce_rows_held, rows with edges) against the
stages (programs/reduction.py's reduce_rows at the element's width) on rows of odd
length, beside torch eager and torch.compile, each timed by the one DeviceTimer in one
process (TB/s of the input read once and the output written once). It decides where
`_held` applies: the held kernel should win every row length it takes.

    python3 bench/held_rows_ab.py [--reps 200]
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import harness

CASES = [("sum", "bf16", 1025), ("sum", "bf16", 4097), ("sum", "bf16", 50257),
         ("sum", "f32", 1025), ("sum", "f32", 4097), ("sum", "f32", 50257),
         ("amax", "bf16", 50257), ("amax", "f32", 4097), ("sum", "bf16", 262145),
         ("sum", "bf16", 999), ("sum", "bf16", 16385)]
TOTAL = 1 << 26


def time_case(timer: Any, op: str, dtype: str, n: int) -> str:
    """One case's line: TB/s of each system and variant, their results checked first."""
    import torch

    from tile_mlir import ops

    m = TOTAL // n
    kinds = {"bf16": torch.bfloat16, "f32": torch.float32}
    x = torch.randn(m, n, device="cuda", dtype=kinds[dtype])
    fn, peer = getattr(ops, op), getattr(torch, op)
    want = peer(x.double(), dim=-1)
    torch._dynamo.reset()  # past its recompile limit dynamo would quietly run eagerly
    compiled = torch.compile(lambda t: peer(t, dim=-1), dynamic=False)
    calls: dict[str, Any] = {"eager": lambda: peer(x, dim=-1), "compile": lambda: compiled(x)}
    for variant in ("held", "stages"):
        got, calls[variant] = harness.variant(_holding(variant == "held"), lambda: fn(x, -1))
        error = float((got.double() - want).abs().max())
        print(f"  {op} {dtype} {m}x{n} {variant}: max |error| {error:.3g}", flush=True)
    compiled(x)
    times = timer.time(calls)
    traffic = (m * n + m) * x.element_size()
    return f"{op} {dtype} {m}x{n}: " + ", ".join(
        f"{k} {traffic / t.median_s / 1e12:.3f}" for k, t in times.items()) + " TB/s"


@contextmanager
def _holding(held: bool) -> Iterator[None]:
    """The reductions' plans: rows held in registers where `_held` gives them, or (not
    `held`) the stages always."""
    from tile_mlir.ops import reductions

    before = reductions._held
    if not held:
        reductions._held = lambda *a, **k: None
    try:
        yield
    finally:
        reductions._held = before


def main(argv: Sequence[str] | None = None) -> int:
    import torch

    from tile_mlir.ops.timing import DeviceTimer

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=200)
    args = parser.parse_args(argv)
    timer = DeviceTimer(args.reps)
    print(f"device: {torch.cuda.get_device_name()}; {args.reps} repetitions")
    for op, dtype, n in CASES:
        print(time_case(timer, op, dtype, n), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
