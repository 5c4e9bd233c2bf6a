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
from collections.abc import Callable, Sequence
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


def tune_key(op: str, dtype: str, numel: int, log: Callable[[str], None]) -> Strategy:
    """The fastest candidate for the key of (op's family, dtype, numel)."""
    timings = []
    for choice in CANDIDATES:
        try:
            seconds = time_candidate(op, dtype, numel, choice)
        except Exception as e:  # noqa: BLE001 - a candidate that fails is not chosen
            log(f"  {choice}: failed ({type(e).__name__}: {e})")
            continue
        timings.append((seconds, choice))
        log(f"  {choice}: {seconds * 1e6:.1f} us")
    best = min(timings, key=lambda t: t[0])[1]
    log(f"{strategy.key(op_table.ELEMENTWISE[op].family, dtype, numel)}: {best}")
    return best


def run(cases: Sequence[tuple[str, str, int]], log: Callable[[str], None] = print) -> None:
    """Tune the keys of the (op, dtype, numel) cases (once each) and save the choices."""
    from tile_mlir.runtime import driver

    chip = driver.device_chip(0)
    choices: dict[str, Strategy] = {}
    for op, dtype, numel in cases:
        family = op_table.ELEMENTWISE[op].family if op in op_table.ELEMENTWISE else \
            "binary_arith"
        name = strategy.key(family, dtype, numel)
        if name in choices or op not in op_table.ELEMENTWISE:
            continue
        choices[name] = tune_key(op, dtype, numel, log)
    path = strategy.save(chip, choices, {"device": driver.device_name(0)})
    log(f"saved {len(choices)} choices to {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tile_mlir.ops.tune", description=__doc__)
    parser.add_argument("--ops", help="comma-separated ops (default: one per family)")
    parser.add_argument("--dtypes", help="comma-separated dtypes (default: each op's)")
    parser.add_argument("--sizes", default="16,20,24,28", help="log2 sizes, one per size class")
    args = parser.parse_args(argv)
    names = args.ops.split(",") if args.ops else list(REPRESENTATIVE.values())
    cases = [(op, dtype, 1 << int(size)) for op in names
             for dtype in (args.dtypes.split(",") if args.dtypes else
                           op_table.ELEMENTWISE[op].dtypes)
             if dtype in op_table.ELEMENTWISE[op].dtypes
             for size in args.sizes.split(",")]
    run(cases)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
