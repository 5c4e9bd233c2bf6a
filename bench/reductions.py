"""Benchmark: tile_mlir.ops reductions against torch eager and torch.compile, same run.

Shapes [2**26 / N, N] for N in 128, 1024, 8192, 65536, reduced along the last dim
and along dim 0, fp32 and bf16; sum (and amax). Each time is the median of many
samples, each a batch of back-to-back calls between two CUDA events (the GPU's
time, not the host's), after warm-up. The input (256 MiB in fp32, 128
in bf16) is far past L2, so one buffer is not served from the cache. Traffic is
the essential one: the input read once plus the output written once; TB/s = that
over the time. A device-to-device copy of the input gives the roofline.

    python3 bench/reductions.py [--quick] [--ops sum,amax] [--no-compile]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from typing import Any

from common import save, table

SIZES = (128, 1024, 8192, 65536)
TOTAL = 1 << 26


def time_ms(torch: Any, fn: Callable[[], object], runs: int, warmup: int = 3,
            batch: int = 10) -> float:
    """Median milliseconds of one call of `fn`, by CUDA events around `batch` calls made
    back to back: the host queues the next launches while the GPU runs, so the time is
    the GPU's (host-side cost per call is bench/launch_cost.py's subject)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(batch):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / batch)
    return statistics.median(times)


def tbps(nbytes: int, ms: float) -> float:
    return nbytes / (ms * 1e-3) / 1e12


def check(torch: Any, got: Any, want: Any, dtype: Any) -> None:
    """The benchmark only counts results that are right."""
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-4
    scale = max(float(want.double().abs().max()), 1.0)
    err = float((got.double() - want.double()).abs().max())
    if not err <= tol * scale * 8:
        sys.exit(f"wrong result: max |error| {err:.3g} (scale {scale:.3g})")


def run_case(torch: Any, ops: Any, case: tuple[str, Any, int, int], runs: int,
             use_compile: bool) -> list[object]:
    name, dtype, n, dim = case
    x = torch.randn(TOTAL // n, n, device="cuda", dtype=dtype)
    ours = getattr(ops, name)
    eager = getattr(torch, name)
    want = eager(x, dim=dim)
    check(torch, ours(x, dim), want, dtype)
    nbytes = x.numel() * x.element_size() + want.numel() * want.element_size()
    results = {"tile-mlir": time_ms(torch, lambda: ours(x, dim), runs),
               "torch eager": time_ms(torch, lambda: eager(x, dim=dim), runs)}
    if use_compile:
        compiled = torch.compile(lambda t: eager(t, dim=dim))
        check(torch, compiled(x), want, dtype)
        results["torch.compile"] = time_ms(torch, lambda: compiled(x), runs)
    best_peer = max(tbps(nbytes, ms) for key, ms in results.items() if key != "tile-mlir")
    row: list[object] = [name, str(dtype).removeprefix("torch."), f"{TOTAL // n}x{n}", dim]
    row += [f"{tbps(nbytes, results[k]):.2f}" if k in results else "-"
            for k in ("tile-mlir", "torch eager", "torch.compile")]
    row.append(f"{tbps(nbytes, results['tile-mlir']) / best_peer:.2f}x")
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    parser.add_argument("--ops", default="sum,amax")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        sys.exit("this benchmark needs torch with CUDA")
    from tile_mlir import ops

    runs = 10 if args.quick else 50
    copy_src = torch.randn(TOTAL, device="cuda")
    copy_dst = torch.empty_like(copy_src)
    copy = tbps(2 * copy_src.numel() * 4, time_ms(torch, lambda: copy_dst.copy_(copy_src), runs))
    rows = []
    for name in args.ops.split(","):
        for dtype in (torch.float32, torch.bfloat16):
            for n in SIZES:
                for dim in (-1, 0):
                    row = run_case(torch, ops, (name, dtype, n, dim), runs,
                                   use_compile=not args.no_compile and name == "sum")
                    print(" | ".join(map(str, row)), flush=True)
                    rows.append(row)
    device = torch.cuda.get_device_name()
    text = (f"# Reductions: TB/s of essential traffic (input read once + output written once)\n\n"
            f"device: {device}; torch {torch.__version__}; median of {runs} runs by CUDA "
            f"events; a device-to-device copy of 2^26 fp32 moves {copy:.2f} TB/s (roofline)\n\n"
            + table(["op", "dtype", "shape", "dim", "tile-mlir", "torch eager", "torch.compile",
                     "vs best peer"], rows) + "\n")
    print(text)
    print(f"saved to {save('reductions', device, text)}")


if __name__ == "__main__":
    main()
