"""A/B of programs/reduction.py's folded columns (G rows of an odd width read as one
aligned row, FOLD_COLUMNS) against the narrow loads of the unfolded stage, on column
reductions of odd widths, beside torch eager and torch.compile, each timed by the one
DeviceTimer in one process (TB/s of the input read once and the output written once).
It decides whether and where stages() folds.

    python3 bench/folded_columns_ab.py [--reps 150]
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import harness

CASES = [("sum", "bf16", 65536, 1031), ("sum", "f32", 32768, 1031),
         ("amax", "bf16", 1328, 50257), ("sum", "bf16", 16376, 4097),
         ("sum", "bf16", 65536, 1030), ("amax", "f32", 4096, 4097),
         ("sum", "bf16", 262144, 263), ("sum", "bf16", 1024, 1031),
         ("sum", "bf16", 65539, 1031), ("amax", "f32", 32771, 1031),
         ("sum", "bf16", 262147, 263)]
"""(op, dtype, rows, columns): over dim 0; the eighth a small call (2 MiB); the last three
with rows no multiple of the fold, whose rows past the folded ones a stage of their own
reduces (stages: `start`)."""


def time_case(timer: Any, op: str, dtype: str, m: int, n: int) -> str:
    """One case's line: TB/s of each system and variant, their results checked first."""
    import torch

    from tile_mlir import ops

    kinds = {"bf16": torch.bfloat16, "f32": torch.float32}
    x = torch.randn(m, n, device="cuda", dtype=kinds[dtype])
    fn, peer = getattr(ops, op), getattr(torch, op)
    want = peer(x.double(), dim=0)
    torch._dynamo.reset()  # past its recompile limit dynamo would quietly run eagerly
    compiled = torch.compile(lambda t: peer(t, dim=0), dynamic=False)
    calls: dict[str, Any] = {"eager": lambda: peer(x, dim=0), "compile": lambda: compiled(x)}
    for variant in ("folded", "narrow"):
        got, calls[variant] = harness.variant(_folding(variant == "folded"), lambda: fn(x, 0))
        error = float((got.double() - want).abs().max())
        print(f"  {op} {dtype} {m}x{n} {variant}: max |error| {error:.3g}", flush=True)
    compiled(x)
    times = timer.time(calls)
    traffic = (m * n + n) * x.element_size()
    return f"{op} {dtype} {m}x{n} dim=0: " + ", ".join(
        f"{k} {traffic / t.median_s / 1e12:.3f}" for k, t in times.items()) + " TB/s"


@contextmanager
def _folding(fold: bool) -> Iterator[None]:
    """The reductions' plans with the columns of odd widths folded (programs/reduction.py's
    FOLD_COLUMNS) or not."""
    from tile_mlir.ops.programs import reduction

    before = reduction.FOLD_COLUMNS
    reduction.FOLD_COLUMNS = fold
    try:
        yield
    finally:
        reduction.FOLD_COLUMNS = before


def main(argv: Sequence[str] | None = None) -> int:
    import torch

    from tile_mlir.ops.timing import DeviceTimer

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=150)
    args = parser.parse_args(argv)
    timer = DeviceTimer(args.reps)
    print(f"device: {torch.cuda.get_device_name()}; {args.reps} repetitions")
    for op, dtype, m, n in CASES:
        print(time_case(timer, op, dtype, m, n), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
