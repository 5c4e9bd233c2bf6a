"""Device time of a call on the GPU, the one way the benchmarks (bench/) and the
autotuner (tune.py) both take it, so that the tuner chooses by the figure the tables
report. It needs torch (CUDA events, the spin kernel, the flush buffer).

`DeviceTimer`:

- warm-up: each call is made `warmup` times first (module loads, torch.compile's
  compile, the library's plans), untimed;
- repetitions: at least `MIN_REPS` (100) per call, a CUDA event recorded just before
  and just after each; the figures are the median, the 10th and the 90th percentile
  of the repetitions (`Timing`);
- L2: before every repetition a buffer of twice the device's L2 size
  (torch.cuda.get_device_properties(0).L2_cache_size) is *read* (a max over it),
  untimed, so each repetition starts with none of its inputs or outputs in L2.
  Reading rather than writing the buffer is deliberate: after a write, L2 is full of
  dirty lines that the timed call must write back to memory as it evicts them
  (measured on an H100: a 2^22-element f32 add took 22.7 us after a zero-fill of the
  buffer, 17.3 us after a read of it, 20.0 us with no flush). Inputs are therefore not
  rotated: one input set per case, the same for every call timed together;
- host gaps: before each repetition a spin kernel (torch.cuda._sleep) holds the stream
  for longer than the host takes to issue one call (measured in the warm-up), so the
  whole call is queued before the start event runs and the events measure the
  device's work, not Python between launches of a multi-kernel formula. No CUDA
  graphs;
- interleaving: the calls timed together take turns repetition by repetition (A B C,
  B C A, ...), so clocks, temperature and the allocator's state are the same for all.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

MIN_REPS = 100  # never fewer for a reported figure
WARMUP = 3
SLEEP_US = (10.0, 5000.0)  # the spin before a repetition, at least and at most


@dataclass(frozen=True)
class Timing:
    """Seconds per call: median, 10th and 90th percentile over `reps` repetitions."""

    median_s: float
    p10_s: float
    p90_s: float
    reps: int

    def to_json(self) -> dict[str, float | int]:
        return asdict(self)

    @staticmethod
    def from_json(record: Mapping[str, Any]) -> Timing:
        return Timing(float(record["median_s"]), float(record["p10_s"]),
                      float(record["p90_s"]), int(record["reps"]))


def percentiles(samples: Sequence[float]) -> tuple[float, float, float]:
    """(median, 10th, 90th percentile), the percentiles by nearest rank."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)

    def pick(q: float) -> float:
        return ordered[min(int(q * len(ordered)), len(ordered) - 1)]

    return statistics.median(ordered), pick(0.1), pick(0.9)


def summarize(seconds: Sequence[float]) -> Timing:
    median, low, high = percentiles(seconds)
    return Timing(median, low, high, len(seconds))


def check_reps(reps: int) -> int:
    if reps < MIN_REPS:
        raise ValueError(f"repetitions: at least {MIN_REPS} for a reported figure, got {reps}")
    return reps


class DeviceTimer:
    """Times zero-argument calls on the GPU as the module docstring says. One per run:
    it holds the flush buffer (2x L2) for the run's life."""

    def __init__(self, reps: int = MIN_REPS, warmup: int = WARMUP) -> None:
        import torch

        self.torch = torch
        self.reps = check_reps(reps)
        self.warmup = warmup
        self.l2_bytes = int(torch.cuda.get_device_properties(0).L2_cache_size)
        # float32 zeros, written once here; read (never written) between repetitions
        self._flush = torch.zeros(2 * self.l2_bytes // 4, device="cuda")
        self._sleep = getattr(torch.cuda, "_sleep", None)
        self.cycles_per_us = self._calibrate_sleep()

    def _calibrate_sleep(self) -> float:
        """Clock cycles per microsecond of the spin kernel (its argument is cycles)."""
        if self._sleep is None:
            return 0.0
        torch = self.torch
        cycles = 2_000_000
        rates: list[float] = []
        for _ in range(3):
            start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            start.record()
            self._sleep(cycles)
            end.record()
            end.synchronize()
            rates.append(cycles / (float(start.elapsed_time(end)) * 1e3))
        return max(rates)

    def flush(self) -> None:
        """Evict L2 by reading 2x its size (clean lines: nothing to write back later)."""
        self.torch.amax(self._flush)

    def _host_us(self, fn: Callable[[], object]) -> float:
        """The host's time to issue one call (the longest of a few), after warm-up."""
        sync = self.torch.cuda.synchronize
        for _ in range(self.warmup):
            fn()
        worst = 0.0
        for _ in range(3):
            sync()
            start = time.perf_counter()
            fn()
            worst = max(worst, (time.perf_counter() - start) * 1e6)
        sync()
        return worst

    def _spin_cycles(self, host_us: float) -> int:
        low, high = SLEEP_US
        return int(min(max(2 * host_us + low, low), high) * self.cycles_per_us)

    def time(self, calls: Mapping[Any, Callable[[], object]]) -> dict[Any, Timing]:
        """Each call's device time, the calls interleaved repetition by repetition."""
        torch = self.torch
        names = list(calls)
        spin = {name: self._spin_cycles(self._host_us(calls[name])) for name in names}
        events: dict[Any, list[tuple[Any, Any]]] = {name: [] for name in names}
        for rep in range(self.reps):
            shift = rep % len(names) if names else 0
            for name in names[shift:] + names[:shift]:
                start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
                self.flush()
                if self._sleep is not None:
                    self._sleep(spin[name])
                start.record()
                calls[name]()
                end.record()
                events[name].append((start, end))
        torch.cuda.synchronize()
        return {name: summarize([s.elapsed_time(e) * 1e-3 for s, e in pairs])
                for name, pairs in events.items()}

    def time_one(self, fn: Callable[[], object]) -> Timing:
        return self.time({"call": fn})["call"]
