"""What the benchmarks share: timing, a markdown table, where results go, the test kernels."""

from __future__ import annotations

import platform
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the package and tests/support, uninstalled


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


def summary(samples: Sequence[float]) -> tuple[float, float, float]:
    """(median, 10th, 90th percentile)."""
    ordered = sorted(samples)
    pick = lambda q: ordered[min(int(q * len(ordered)), len(ordered) - 1)]  # noqa: E731
    return statistics.median(ordered), pick(0.1), pick(0.9)


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def cpu_name() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
        m = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
        if m:
            return m.group(1).strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()


def save(name: str, machine: str, text: str) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}-{slug(machine)}.md"
    path.write_text(text)
    return path
