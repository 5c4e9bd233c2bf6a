"""A/B of Geometry.stack (programs/rows.py: a CTA of a short row with edges holding 2 or 4
rows one after another, every row's loads before the first reduction) against one row a
CTA, on rows of odd length, for softmax, log_softmax and a held sum, beside torch eager
and torch.compile, each timed by the one DeviceTimer in one process (TB/s of the input
read once and the output written once). It decides whether and where the planner stacks.

    python3 bench/stacked_rows_ab.py [--reps 150] [--stacks 1,2,4,8]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

CASES = [("softmax", "bf16", 1025), ("log_softmax", "bf16", 1025), ("sum", "bf16", 1025),
         ("softmax", "bf16", 999), ("softmax", "bf16", 2049), ("sum", "bf16", 2049),
         ("softmax", "f32", 1025), ("sum", "f32", 1025), ("softmax", "bf16", 513),
         ("softmax", "bf16", 257), ("softmax", "bf16", 77), ("softmax", "f32", 257)]
"""Rows a CTA of 64 threads holds with edges (1025 to 2049), and shorter ones the planner
gives a group of lanes without edges (513, 257: a ViT's tokens, 77: CLIP's), which the
stacks hold a warp-sized CTA a row with edges."""
TOTAL = 1 << 27
"""Bytes of the input."""


def time_case(timer: Any, stacks: Sequence[int], op: str, dtype: str, n: int) -> str:
    """One case's line: TB/s of each system and stack, their results checked first."""
    import torch

    from tile_mlir import ops
    from tile_mlir.ops import entry, rows

    kinds = {"bf16": torch.bfloat16, "f32": torch.float32}
    size = 2 if dtype == "bf16" else 4
    m = TOTAL // size // n
    x = torch.randn(m, n, device="cuda", dtype=kinds[dtype])
    fn, peer = getattr(ops, op), getattr(torch, op)
    want = peer(x.double(), dim=-1)
    torch._dynamo.reset()  # past its recompile limit dynamo would quietly run eagerly
    compiled = torch.compile(lambda t: peer(t, dim=-1), dynamic=False)
    calls: dict[str, Any] = {"eager": lambda: peer(x, dim=-1), "compile": lambda: compiled(x)}
    entry.clear()
    fn(x, -1)
    calls["planned"] = _adopting(fn, x, dict(entry.PLANS))
    lanes = _lanes(m, n, size)
    for stack in stacks:
        with rows.forced("cta", lanes=lanes, stack=stack):  # stack 1: a CTA a row
            entry.clear()
            got = fn(x, -1)
            plans = dict(entry.PLANS)
        error = float((got.double() - want).abs().max())
        print(f"  {op} {dtype} {m}x{n} stack {stack}: max |error| {error:.3g}", flush=True)
        calls[f"stack{stack}"] = _adopting(fn, x, plans)
    compiled(x)
    times = timer.time(calls)
    out = m if op == "sum" else m * n
    traffic = (m * n + out) * size
    return f"{op} {dtype} {m}x{n} ({lanes} threads): " + ", ".join(
        f"{k} {traffic / t.median_s / 1e12:.3f}" for k, t in times.items()) + " TB/s"


def _adopting(fn: Any, x: Any, plans: dict[Any, Any]) -> Any:
    """A call of fn(x, -1) under `plans` (one variant's), in place of the others'."""
    from tile_mlir.ops import entry

    def call() -> Any:
        entry.adopt(plans)
        return fn(x, -1)

    return call


def _lanes(m: int, n: int, size: int) -> int:
    """The threads of a CTA a row with edges: the planner's where it gives one, else a
    warp's (rows it gives a group of lanes)."""
    from tile_mlir.ops import rows

    plan = rows.chosen(m, n, 1, 16, itemsize=size, inputs=1, early=0, f32_ahead=False,
                       wide=16 // size)
    g = plan.geometry
    return g.lanes if g.strategy == "cta" and g.edges else 32


def main(argv: Sequence[str] | None = None) -> int:
    import torch

    from tile_mlir.ops.timing import DeviceTimer

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=150)
    parser.add_argument("--stacks", default="1,2,4,8")
    args = parser.parse_args(argv)
    stacks = [int(s) for s in args.stacks.split(",")]
    timer = DeviceTimer(args.reps)
    print(f"device: {torch.cuda.get_device_name()}; {args.reps} repetitions")
    for op, dtype, n in CASES:
        print(time_case(timer, stacks, op, dtype, n), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
