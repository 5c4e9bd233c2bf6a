"""A/B of ops/reductions.py's held rows (reduce_rows_held, rows with edges) against the
stages (programs/reduction.py's reduce_rows at the element's width) on rows of odd
length, beside torch eager and torch.compile, each timed by the one DeviceTimer in one
process (TB/s of the input read once and the output written once). It decides where
`_held` applies: the held kernel should win every row length it takes.

    python3 bench/held_rows_ab.py [--reps 200]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

CASES = [("sum", "bf16", 1025), ("sum", "bf16", 4097), ("sum", "bf16", 50257),
         ("sum", "f32", 1025), ("sum", "f32", 4097), ("sum", "f32", 50257),
         ("amax", "bf16", 50257), ("amax", "f32", 4097), ("sum", "bf16", 262145),
         ("sum", "bf16", 999), ("sum", "bf16", 16385)]
TOTAL = 1 << 26


def time_case(timer: Any, op: str, dtype: str, n: int) -> str:
    """One case's line: TB/s of each system and variant, their results checked first."""
    import torch

    from tile_mlir import ops
    from tile_mlir.ops import entry, reductions

    m = TOTAL // n
    kinds = {"bf16": torch.bfloat16, "f32": torch.float32}
    x = torch.randn(m, n, device="cuda", dtype=kinds[dtype])
    fn, peer = getattr(ops, op), getattr(torch, op)
    want = peer(x.double(), dim=-1)
    torch._dynamo.reset()  # past its recompile limit dynamo would quietly run eagerly
    compiled = torch.compile(lambda t: peer(t, dim=-1), dynamic=False)
    calls: dict[str, Any] = {"eager": lambda: peer(x, dim=-1), "compile": lambda: compiled(x)}
    held = reductions._held
    try:
        for variant in ("held", "stages"):
            reductions._held = held if variant == "held" else (lambda *a, **k: None)
            entry.clear()
            got = fn(x, -1)
            plans = dict(entry.PLANS)
            error = float((got.double() - want).abs().max())
            print(f"  {op} {dtype} {m}x{n} {variant}: max |error| {error:.3g}", flush=True)

            def call(plans: dict[Any, Any] = plans) -> Any:
                entry.adopt(plans)  # this variant's plan, in place of the other's
                return fn(x, -1)

            calls[variant] = call
    finally:
        reductions._held = held
    compiled(x)
    times = timer.time(calls)
    traffic = (m * n + m) * x.element_size()
    return f"{op} {dtype} {m}x{n}: " + ", ".join(
        f"{k} {traffic / t.median_s / 1e12:.3f}" for k, t in times.items()) + " TB/s"


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
