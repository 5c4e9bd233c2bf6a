"""The benchmarks' one way of timing: device time by CUDA events, and host time per call.

Device time (every system of every case: tile-mlir, torch eager, torch.compile,
Triton): `DeviceTimer`, from tile_mlir/ops/timing.py, where its rules are written
(warm-up; the median, 10th and 90th percentile of at least 100 repetitions; L2 flushed
by a read of twice its size before each; a spin kernel that hides the host's issue
time; the systems of a case interleaved repetition by repetition). The library's
autotuner (tile_mlir/ops/tune.py) times its candidates with the same class, so that it
chooses by the figure these tables report. Here: the copy roofline, timed as the cases.

Host time (bench/launch_cost.py, bench/compile_time.py): `per_call_us` and
`once_ms`, wall-clock by time.perf_counter.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from tile_mlir.ops.timing import (
    MIN_REPS,
    SLEEP_US,
    WARMUP,
    DeviceTimer,
    Timing,
    check_reps,
    percentiles,
    summarize,
)

__all__ = ["MIN_REPS", "SLEEP_US", "WARMUP", "DeviceTimer", "Timing", "check_reps",
           "copy_roofline", "once_ms", "per_call_us", "per_call_us_together", "percentiles",
           "summarize"]

COPY_ELEMENTS = 1 << 28  # float32: 1 GiB read and 1 GiB written


def copy_roofline(timer: DeviceTimer) -> tuple[float, Timing]:
    """(TB/s, timing) of a device-to-device copy of 1 GiB, bytes read + written,
    timed like every case: the bandwidth a memory-bound op can hope for."""
    timing = _time_copy(timer)
    timer.torch.cuda.empty_cache()  # the 2 GiB are free again: the cases start clean
    return 2 * 4 * COPY_ELEMENTS / timing.median_s / 1e12, timing


def _time_copy(timer: DeviceTimer) -> Timing:
    source = timer.torch.randn(COPY_ELEMENTS, device="cuda")
    target = timer.torch.empty_like(source)
    return timer.time_one(lambda: target.copy_(source))


# -------------------------------------------------------------------- host time


def per_call_us(fn: Callable[[], object], calls: int, repeats: int,
                sync: Callable[[], object] = lambda: None) -> list[float]:
    """Host microseconds per call of `fn`: `repeats` samples, each the mean of `calls`
    back-to-back calls, with `sync` (e.g. a device synchronize) between samples."""
    samples = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    sync()
    return samples


def per_call_us_together(fns: Sequence[Callable[[], object]], calls: int, repeats: int,
                         sync: Callable[[], object] = lambda: None) -> list[list[float]]:
    """`per_call_us` of several functions at once, their batches interleaved (the order
    turned each repeat), so a drift of the host's speed over the run, which moves host
    timings by a fifth and more on shared machines, falls on all of them alike; a list
    of samples per function."""
    samples: list[list[float]] = [[] for _ in fns]
    for repeat in range(repeats):
        for k in range(len(fns)):
            i = (k + repeat) % len(fns)
            samples[i].extend(per_call_us(fns[i], calls, 1, sync))
    return samples


def once_ms(fn: Callable[[], object], repeats: int,
            before: Callable[[], object] = lambda: None) -> list[float]:
    """Milliseconds per call of `fn`, one call a sample, `before` run untimed first."""
    samples = []
    for _ in range(repeats):
        before()
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return samples
