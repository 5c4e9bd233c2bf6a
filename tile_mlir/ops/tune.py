"""The autotuner: per (op family, dtype, size class), the fastest strategy on this GPU.

For each key it times every candidate strategy (threads per CTA, vector width,
rounds per thread, staged or not, and seed 004's direct one) on an op of the
family at a size of the class, with CUDA events around CUDA-graph replays over
input sets rotated past L2, keeps the fastest, and merges the choices into
`ops-tuning-<chip>.json` in the kernel cache's directory, where
strategy.choose finds them in every later process. It needs torch (for the
tensors, events and graphs).

    python -m tile_mlir.ops.tune                      # one op per family, every dtype
    python -m tile_mlir.ops.tune --ops add --dtypes bf16 --sizes 24,28
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tile_mlir import op_table, ops
from tile_mlir.dtypes import DTYPES
from tile_mlir.ops import strategy
from tile_mlir.ops.programs.elementwise import Strategy

CANDIDATES = [
    Strategy(256, 1, 1, 1),  # direct
    *(Strategy(threads, 16, rounds, stage)
      for threads in (128, 256, 512) for rounds in (1, 2, 4, 8)
      for stage in sorted({1, rounds})),
    Strategy(256, 32, 2, 2),  # 32-byte vectors
    Strategy(256, 32, 4, 4),
]
"""The strategies tried for every key."""

REPRESENTATIVE = {"unary_math": "exp", "binary_arith": "add", "comparison": "lt",
                  "bitwise": "bitwise_and", "logical": "logical_and", "special": "where"}


def _torch() -> Any:
    try:
        import torch
    except ImportError as e:
        raise RuntimeError("the autotuner needs torch (tensors, CUDA events and graphs)") from e
    return torch


def _arguments(torch: Any, op: str, dtype: str, numel: int) -> list[Any]:
    def make(kind: str) -> Any:
        if kind == "bool":
            return torch.rand(numel, device="cuda") < 0.5
        if not DTYPES[kind].is_float:
            return torch.randint(-100, 100, (numel,), device="cuda",
                                 dtype=getattr(torch, DTYPES[kind].numpy))
        return (torch.randn(numel, device="cuda") * 4).to(getattr(torch, DTYPES[kind].numpy))

    row = op_table.ELEMENTWISE[op]
    return [make("bool" if n in row.keep else dtype) for n in range(row.arity)]


def _seconds(torch: Any, fn: Callable[[], None], replays: int) -> float:
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    times = []
    for _ in range(replays):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return float(statistics.median(times)) / 1e3


def time_candidate(op: str, dtype: str, numel: int, choice: Strategy, replays: int = 20
                   ) -> float:
    """Seconds per call of the op with the given strategy."""
    torch = _torch()
    fn = getattr(ops, op)
    l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20))
    per_call = numel * DTYPES[dtype].bytes * (op_table.ELEMENTWISE[op].arity + 1)
    sets = [_arguments(torch, op, dtype, numel)
            for _ in range(min(32, max(1, math.ceil(4 * l2 / per_call))))]
    strategy.force(choice)
    try:
        for args in sets:
            fn(*args)

        def calls() -> None:
            for args in sets:
                fn(*args)

        return _seconds(torch, calls, replays) / len(sets)
    finally:
        strategy.force(None)


def tune_key(op: str, dtype: str, numel: int, log: Callable[[str], None]
             ) -> tuple[Strategy, dict[Strategy, float]]:
    """The fastest candidate for the key of (op's family, dtype, numel), and every
    candidate's seconds per call (those that ran)."""
    timings: dict[Strategy, float] = {}
    for choice in CANDIDATES:
        try:
            timings[choice] = time_candidate(op, dtype, numel, choice)
        except Exception as e:  # noqa: BLE001 - a candidate that fails is not chosen
            log(f"    {choice}: failed ({type(e).__name__}: {e})")
    if not timings:
        raise RuntimeError(f"no candidate ran for {op} {dtype} {numel}")
    return min(timings, key=lambda c: timings[c]), timings


@dataclass(frozen=True)
class Outcome:
    """One key's result: the choice, its time, and what the op ran with before."""

    key: str
    best: Strategy
    seconds: float
    before: Strategy
    before_seconds: float | None  # None when the earlier choice was not a candidate

    def line(self) -> str:
        if self.best == self.before:
            return f"{self.key}: {_name(self.best)} {self.seconds * 1e6:.1f} us (unchanged)"
        gain = f", {self.before_seconds / self.seconds:.2f}x" if self.before_seconds else ""
        return (f"{self.key}: {_name(self.best)} {self.seconds * 1e6:.1f} us (was "
                f"{_name(self.before)}{gain})")


def _name(choice: Strategy) -> str:
    kind = "direct" if choice.vector_bytes == 1 else \
        "staged" if choice.stage > 1 else "vector"
    return f"{kind} {choice.threads}x{choice.rounds} of {choice.vector_bytes} B"


def _keys(cases: Sequence[tuple[str, str, int]]) -> dict[str, tuple[str, str, int]]:
    """One case per key (the first), for the registry's ops."""
    keys: dict[str, tuple[str, str, int]] = {}
    for op, dtype, numel in cases:
        if op in op_table.ELEMENTWISE:
            keys.setdefault(strategy.key(op_table.ELEMENTWISE[op].family, dtype, numel),
                            (op, dtype, numel))
    return keys


def run(cases: Sequence[tuple[str, str, int]], log: Callable[[str], None] = print,
        ship: bool = False) -> list[Outcome]:
    """Tune the keys of the (op, dtype, numel) cases (once each), a line per key with its
    elapsed time as it goes, save the choices and end with a summary of what changed."""
    from tile_mlir.runtime import driver

    chip = driver.device_chip(0)
    keys = _keys(cases)
    outcomes: list[Outcome] = []
    started = time.perf_counter()
    for n, (name, (op, dtype, numel)) in enumerate(keys.items(), start=1):
        before = strategy.choose(op_table.ELEMENTWISE[op].family, dtype, numel, chip)
        t0 = time.perf_counter()
        best, timings = tune_key(op, dtype, numel, log)
        outcome = Outcome(name, best, timings[best], before, timings.get(before))
        outcomes.append(outcome)
        log(f"[{n}/{len(keys)}] {outcome.line()} in {time.perf_counter() - t0:.1f} s")
    choices = {o.key: o.best for o in outcomes}
    path = strategy.save(chip, choices, {"device": driver.device_name(0)}, shipped=ship)
    log(summary(outcomes, time.perf_counter() - started, path))
    return outcomes


def summary(outcomes: Sequence[Outcome], seconds: float, path: Path) -> str:
    """How many keys changed, by how much, and where the choices went."""
    changed = [o for o in outcomes if o.best != o.before]
    lines = [f"tuned {len(outcomes)} keys in {seconds:.0f} s: {len(changed)} changed, "
             f"{len(outcomes) - len(changed)} kept; saved to {path}"]
    lines += [f"  {o.line()}" for o in changed]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tile_mlir.ops.tune", description=__doc__)
    parser.add_argument("--ops", help="comma-separated ops (default: one per family)")
    parser.add_argument("--dtypes", help="comma-separated dtypes (default: each op's)")
    parser.add_argument("--sizes", default="16,20,24,28", help="log2 sizes, one per size class")
    parser.add_argument("--ship", action="store_true",
                        help="write the choices into the package's defaults for this chip "
                             "(tile_mlir/ops/tuned/<chip>.json) instead of the user's file")
    args = parser.parse_args(argv)
    names = args.ops.split(",") if args.ops else list(REPRESENTATIVE.values())
    cases = [(op, dtype, 1 << int(size)) for op in names
             for dtype in (args.dtypes.split(",") if args.dtypes else
                           op_table.ELEMENTWISE[op].dtypes)
             if dtype in op_table.ELEMENTWISE[op].dtypes
             for size in args.sizes.split(",")]
    run(cases, ship=args.ship)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
