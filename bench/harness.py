"""The benchmarks' harness: one way to list cases, time every system, and report.

A benchmark is a list of `Case`s; a case is a name, its essential traffic in bytes
(every input read once, every output written once) and, built only when the case
runs on the GPU, one `Call` per system: tile-mlir, torch eager, torch.compile
(dynamic=False; the harness wraps the function once per case, its compile in the
untimed warm-up) and Triton where a benchmark has it. A system that cannot run a
case gets a reason, shown in its cell ("n/a: torch has no fp8 kernel"): from the
case's `gaps` (known when listing), a string in place of its call, or the exception
its first call (or the result's check) raised. Every system is timed by
bench/timing.py's DeviceTimer, the same way, in the same state: the inputs made
once per case and shared, the previous case's tensors freed and the allocator's
cache emptied between cases, a fresh dynamo per case, no CUDA graphs. A small case
(`placements`) is timed on several copies of its tensors, taken in turn repetition by
repetition (the systems share each copy as they share the originals): where a
few-microsecond call's buffers lie moves its time by several percent.

Output allocation: `Case.outputs` says which policy the case's calls follow:
"out=" (every system writes into an output allocated once, used when every system
of the case takes out=), "fresh" (each call allocates its result from torch's
caching allocator: no device time, the block reused), "in place" (the op's
semantics: it overwrites its inputs).

Every run prints a line per case as it finishes and a summary at the end, and
writes bench/results/<bench>-<device>.md (a table: TB/s per system, the best peer,
tile-mlir over the best peer; the header names the device, the versions, the date
and the copy roofline measured in the same run), .json (every figure) and .png
(the ratio to the best peer per case). Common options (every benchmark script):

    --quick            a short subset            --cases REGEX   only cases whose name matches
    --reps N           repetitions (>= 100)      --dry-run       no GPU: fake timings, no plot
    --results DIR      where files go            --append        merge into DIR's saved run
    --plot JSON        re-plot a saved run       --merge JSON..  merge saved runs (parts of one)
"""

from __future__ import annotations

import argparse
import functools
import gc
import hashlib
import importlib.util
import json
import math
import re
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from common import RESULTS, environment, environment_line, slug
from timing import MIN_REPS, DeviceTimer, Timing, check_reps, copy_roofline

# ------------------------------------------------------------------ the model


@dataclass(frozen=True)
class System:
    """A column of the table. Peers are what tile-mlir is compared with."""

    key: str
    label: str
    peer: bool


TILE = System("tile-mlir", "tile-mlir", peer=False)
EAGER = System("eager", "torch eager", peer=True)
COMPILE = System("compile", "torch.compile", peer=True)
TRITON = System("triton", "Triton", peer=True)
STANDARD = (TILE, EAGER, COMPILE)


class Gap(Exception):
    """Raised by a call (or a build) to say in the table's words why it cannot run."""


@dataclass(frozen=True)
class Call:
    """fn(*args, **kwargs); `compiled`: fn is wrapped in torch.compile(dynamic=False)
    once per case first (the compile happens in the untimed warm-up)."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    compiled: bool = False


@dataclass
class Built:
    """A case made on the GPU: each system's call (or the reason it has none), and a
    check of a system's first result (raises AssertionError when it is wrong)."""

    calls: dict[str, Call | str]
    check: Callable[[str, Any], None] | None = None


@dataclass(frozen=True)
class Case:
    name: str
    traffic: int  # essential bytes: inputs read once + outputs written once
    build: Callable[[], Built] = field(compare=False, repr=False)
    outputs: str = "fresh"  # "out=", "fresh" or "in place" (see the module docstring)
    params: Mapping[str, Any] = field(default_factory=dict, compare=False)
    gaps: Mapping[str, str] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Benchmark:
    name: str  # the script's stem: the results' file names
    title: str
    systems: tuple[System, ...] = STANDARD
    primary: str = "tile-mlir"  # the system whose ratio to the best peer is reported
    notes: tuple[str, ...] = ()
    extra_plot: Callable[[Benchmark, list[CaseResult], Path, str], None] | None = None
    reps: int = MIN_REPS  # --reps's default: more where a case takes a few microseconds

    def peers(self) -> list[System]:
        return [s for s in self.systems if s.peer]

    def label(self, key: str) -> str:
        return next((s.label for s in self.systems if s.key == key), key)


@dataclass
class CaseResult:
    name: str
    traffic: int
    outputs: str
    params: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, Timing] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    elapsed_s: float = 0.0
    run: int = 0  # index into the saved runs (several when parts were merged)

    def tbps(self, key: str) -> float | None:
        timing = self.timings.get(key)
        if timing is None or timing.median_s <= 0:
            return None
        return self.traffic / timing.median_s / 1e12


def best_peer(bench: Benchmark, result: CaseResult) -> tuple[str, float] | None:
    """(system, TB/s) of the fastest peer timed on the case."""
    timed = [(s.key, result.tbps(s.key)) for s in bench.peers()]
    found = [(k, v) for k, v in timed if v is not None]
    return max(found, key=lambda kv: kv[1]) if found else None


def ratio(bench: Benchmark, result: CaseResult) -> float | None:
    """The primary system's TB/s over the best peer's."""
    ours, best = result.tbps(bench.primary), best_peer(bench, result)
    return ours / best[1] if ours is not None and best is not None else None


def every_peer_timed(bench: Benchmark, result: CaseResult) -> bool:
    return all(s.key in result.timings for s in bench.peers())


@dataclass(frozen=True)
class Summary:
    cases: int
    with_ratio: int  # cases where the primary and at least one peer were timed
    at_least_one: int  # of those, the primary >= 1.0x the best peer
    geomean: float | None  # over the cases where every peer was timed
    geomean_cases: int
    worst: tuple[tuple[str, float], ...]


def summarize(bench: Benchmark, results: Sequence[CaseResult], worst: int = 5) -> Summary:
    ratios = [(r.name, ratio(bench, r), every_peer_timed(bench, r)) for r in results]
    known = [(name, value, full) for name, value, full in ratios if value is not None]
    full = [value for _, value, complete in known if complete]
    geomean = math.exp(sum(map(math.log, full)) / len(full)) if full else None
    ranked = sorted(((name, value) for name, value, _ in known), key=lambda kv: kv[1])
    return Summary(len(results), len(known), sum(1 for _, v, _ in known if v >= 1.0),
                   geomean, len(full), tuple(ranked[:worst]))


def summary_lines(bench: Benchmark, summary: Summary) -> list[str]:
    primary = bench.label(bench.primary)
    geomean = "n/a" if summary.geomean is None else f"{summary.geomean:.3f}x"
    lines = [f"- cases: {summary.cases}; with a ratio ({primary} and a peer timed): "
             f"{summary.with_ratio}",
             f"- {primary} >= 1.0x the best peer: {summary.at_least_one} of {summary.with_ratio}",
             f"- geometric mean of {primary} / best peer over the {summary.geomean_cases} "
             f"cases where every peer was timed: {geomean}"]
    lines += [f"- worst: {name} {value:.2f}x" for name, value in summary.worst]
    return lines


# ------------------------------------------------------------------ measuring


def reason_of(error: BaseException, compiled: bool = False) -> str:
    """A reason for a table cell: a Gap's words, else the error's type and first line."""
    if isinstance(error, Gap):
        return str(error)
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    text = f"{type(error).__name__}: {first}"[:100].rstrip(": ")
    if isinstance(error, AssertionError):
        return f"wrong result: {first[:90]}"
    return f"torch.compile failed: {text}" if compiled else text


def _strip_na(reason: str) -> str:
    return reason.removeprefix("n/a:").strip()


PLACEMENTS = 8
"""Copies of a small case's tensors (PLACED_BYTES of traffic or less), each system's
repetitions taking them in turn: where a few-microsecond call's buffers lie moves its
median by up to 6% (an H100, ops.add of 2^18 f32 elements: 5.31-5.41 us into 15 of 16
input/output pairs, allocated one after another, and 5.66 us into one, in two runs), so a
case timed on one placement per system could land one system on a slow one."""
PLACED_BYTES = 64 << 20
"""Above this a call streams through many pages and its median no longer depends on
where its buffers lie: one placement."""


def placements(traffic: int) -> int:
    """How many placements of a case's tensors its systems are timed on."""
    return PLACEMENTS if traffic <= PLACED_BYTES else 1


Copier = Callable[[Any, dict[Any, Any]], Any]
"""A tensor's copy in memory of its own (anything else as it is); views of one buffer
stay views of one copy (the dict: the copies made so far, by buffer)."""


class Rotation:
    """A zero-argument call that runs its calls in turn, one a repetition."""

    def __init__(self, calls: Sequence[Callable[[], Any]]) -> None:
        self.calls, self.turn = list(calls), 0

    def __call__(self) -> Any:
        call = self.calls[self.turn % len(self.calls)]
        self.turn += 1
        return call()


def _placed(calls: Mapping[str, Call | str], count: int, copy: Copier
            ) -> list[dict[str, Call | str]]:
    """The calls on `count` placements: the first the case's own tensors, each other one
    every argument tensor copied (shared by the systems as the originals are: one
    buffer's copy serves every call and view of it). Tensors a call's function holds
    itself stay where they are."""
    placed: list[dict[str, Call | str]] = [dict(calls)]
    for _ in range(count - 1):
        buffers: dict[Any, Any] = {}
        placed.append({
            key: call if isinstance(call, str) else
            Call(call.fn, tuple(copy(a, buffers) for a in call.args),
                 {k: copy(v, buffers) for k, v in call.kwargs.items()}, call.compiled)
            for key, call in calls.items()})
    return placed


def prepare(built: Built, systems: Sequence[System],
            wrap: Callable[[Callable[..., Any]], Callable[..., Any]],
            count: int = 1, copy: Copier | None = None
            ) -> tuple[dict[str, Callable[[], Any]], dict[str, str]]:
    """Each system's zero-argument call, made twice (the first warm-ups: compiles, plans)
    and its first result checked; or the reason it cannot run. With `count` > 1 (and
    `copy`), the call takes `count` placements of the case's tensors in turn."""
    ready: dict[str, Callable[[], Any]] = {}
    reasons: dict[str, str] = {}
    placed = _placed(built.calls, count, copy) if count > 1 and copy is not None else \
        [built.calls]
    for system in systems:
        call = built.calls.get(system.key)
        if call is None or isinstance(call, str):
            reasons[system.key] = _strip_na(call or "no call for this case")
            continue
        fn = wrap(call.fn) if call.compiled else call.fn
        bound = [functools.partial(fn, *c.args, **c.kwargs)
                 for c in (p[system.key] for p in placed) if isinstance(c, Call)]
        try:
            result = bound[0]()
            if built.check is not None:
                built.check(system.key, result)
            del result
            for each in bound:  # a second call: some take a faster path from it on
                each()
        except Exception as e:  # noqa: BLE001 - a system that cannot run the case: its reason
            reasons[system.key] = reason_of(e, call.compiled)
            continue
        ready[system.key] = bound[0] if len(bound) == 1 else Rotation(bound)
    return ready, reasons


class Backend(Protocol):
    def environment(self) -> dict[str, str]: ...

    def roofline(self) -> float: ...

    def measure(self, case: Case, systems: Sequence[System]
                ) -> tuple[dict[str, Timing], dict[str, str]]: ...


class GpuBackend:
    """The real thing: torch, CUDA events (bench/timing.py)."""

    def __init__(self, reps: int) -> None:
        import torch

        self.torch = torch
        self.timer = DeviceTimer(reps)

    def environment(self) -> dict[str, str]:
        return environment(self.torch)

    def roofline(self) -> float:
        return copy_roofline(self.timer)[0]

    def _compile(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        compiled: Callable[..., Any] = self.torch.compile(fn, dynamic=False)
        return compiled

    def _copy(self, value: Any, buffers: dict[Any, Any]) -> Any:
        """A tensor's copy (its storage's: a view stays that view of the copy)."""
        torch = self.torch
        if not isinstance(value, torch.Tensor):
            return value
        storage = value.untyped_storage()
        key = (storage.data_ptr(), storage.nbytes())
        if key not in buffers:
            buffers[key] = storage.clone()
        copy = torch.empty(0, dtype=value.dtype, device=value.device)
        return copy.set_(buffers[key], value.storage_offset(), value.size(), value.stride())

    def measure(self, case: Case, systems: Sequence[System]
                ) -> tuple[dict[str, Timing], dict[str, str]]:
        self.release()
        reasons = {k: _strip_na(v) for k, v in case.gaps.items()}
        todo = [s for s in systems if s.key not in reasons]
        timings: dict[str, Timing] = {}
        try:
            ready, failed = prepare(case.build(), todo, self._compile,
                                    placements(case.traffic), self._copy)
            reasons |= failed
            timings = self.timer.time(ready) if ready else {}
        except Exception as e:  # noqa: BLE001 - the build (or a timed call) failed: say so
            reasons |= {s.key: reason_of(e) for s in todo if s.key not in reasons}
        finally:
            ready = {}
            self.release()
        return timings, reasons

    def release(self) -> None:
        """Free the case's tensors before the next: every system starts from the same
        allocator state. A fresh dynamo too: formulas share code objects, and past its
        recompile limit dynamo would quietly run one eagerly."""
        self.torch._dynamo.reset()
        gc.collect()
        self.torch.cuda.synchronize()
        self.torch.cuda.empty_cache()


class FakeBackend:
    """No GPU: made-up timings (a fixed function of case and system) for --dry-run and
    the null tier's tests. With `call=True` the cases are built and each call is made
    once (pure-Python cases in tests), so failures and checks give their reasons."""

    def __init__(self, reps: int, call: bool = False) -> None:
        self.reps = check_reps(reps)
        self.call = call

    def environment(self) -> dict[str, str]:
        return environment(None)

    def roofline(self) -> float:
        return 3.0

    def measure(self, case: Case, systems: Sequence[System]
                ) -> tuple[dict[str, Timing], dict[str, str]]:
        reasons = {k: _strip_na(v) for k, v in case.gaps.items()}
        names = [s.key for s in systems if s.key not in reasons]
        if self.call:
            ready, failed = prepare(case.build(), [s for s in systems if s.key in names],
                                    lambda fn: fn)
            reasons |= failed
            names = list(ready)
        return {n: fake_timing(case, n, self.reps) for n in names}, reasons


def fake_timing(case: Case, system: str, reps: int) -> Timing:
    """1.0 to 3.5 TB/s, fixed per (case, system)."""
    digest = hashlib.sha256(f"{case.name}|{system}".encode()).digest()
    tbps = 1.0 + 2.5 * int.from_bytes(digest[:4], "big") / 2**32
    seconds = max(case.traffic, 1) / (tbps * 1e12)
    return Timing(seconds, 0.98 * seconds, 1.05 * seconds, reps)


def run_cases(bench: Benchmark, cases: Sequence[Case], backend: Backend,
              log: Callable[[str], object] = print) -> list[CaseResult]:
    """Measure every case, a progress line per case."""
    results = []
    for index, case in enumerate(cases, 1):
        start = time.perf_counter()
        timings, reasons = backend.measure(case, bench.systems)
        result = CaseResult(case.name, case.traffic, case.outputs, dict(case.params),
                            timings, reasons, time.perf_counter() - start)
        results.append(result)
        log(progress_line(bench, result, index, len(cases)))
    return results


def progress_line(bench: Benchmark, result: CaseResult, index: int, count: int) -> str:
    cells = " | ".join(f"{s.label} {cell(result, s.key, 40)}" for s in bench.systems)
    value = ratio(bench, result)
    shown = "n/a" if value is None else f"{value:.2f}x"
    return f"[{index}/{count}] {result.name}: {cells} | ratio {shown} ({result.elapsed_s:.1f} s)"


# ------------------------------------------------------- helpers for the builds

ITEMSIZE = {"f32": 4, "f16": 2, "bf16": 2, "f8e4m3": 1, "f8e5m2": 1, "i32": 4, "i64": 8,
            "bool": 1}
TORCH_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16",
                "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2", "i32": "int32",
                "i64": "int64", "bool": "bool"}


def torch_module() -> Any:
    """torch, imported when a case is built (never when cases are listed)."""
    import torch

    return torch


def library_has(name: str) -> bool:
    """Whether tile_mlir.ops has `name` in this build (False when it does not import)."""
    try:
        from tile_mlir import ops
    except ImportError:
        return False
    return hasattr(ops, name)


def torch_dtype(name: str) -> Any:
    return getattr(torch_module(), TORCH_DTYPES[name])


def poison(tensor: Any) -> Any:
    """Fill an output before its first write: NaN (floats), the largest value (ints),
    so that an element left unwritten fails the check."""
    torch = torch_module()
    if tensor.dtype == torch.bool:
        return tensor
    if tensor.is_floating_point():
        return tensor.fill_(float("nan"))
    return tensor.fill_(torch.iinfo(tensor.dtype).max)


def variant(planning: AbstractContextManager[Any], run: Callable[[], Any],
            timed: Callable[[], Any] | None = None) -> tuple[Any, Callable[[], Any]]:
    """One variant of an A/B of the library's plans: `run` once under `planning` (a
    context that changes what the planners choose), its plans made afresh; returns its
    result (to check) and a call of `timed` (`run` by default) that adopts those plans in
    place of any other variant's (ops/entry.py's adopt), for the timer."""
    from tile_mlir.ops import entry

    with planning:
        entry.clear()
        got = run()
        plans = dict(entry.PLANS)
    again = timed or run

    def call() -> Any:
        entry.adopt(plans)
        return again()

    return got, call


def assert_close(got: Any, want: Any, rtol: float, atol: float) -> None:
    """got against the reference want: the same dtype and shape, then every element
    within tolerance (NaN matching NaN); exact for integers and booleans."""
    torch = torch_module()
    if got.dtype != want.dtype or tuple(got.shape) != tuple(want.shape):
        raise AssertionError(f"got {got.dtype}{tuple(got.shape)}, the reference is "
                             f"{want.dtype}{tuple(want.shape)}")
    if not got.is_floating_point():
        if not torch.equal(got, want):
            raise AssertionError(f"{int((got != want).sum())} elements differ")
        return
    close = torch.isclose(got.float(), want.float(), rtol=rtol, atol=atol, equal_nan=True)
    if not bool(close.all()):
        raise AssertionError(f"{int((~close).sum())} of {close.numel()} elements differ")


# ------------------------------------------------------------------ reporting


def cell(result: CaseResult, key: str, width: int = 80) -> str:
    value = result.tbps(key)
    if value is not None:
        return f"{value:.2f}"
    reason = result.reasons.get(key, "not run")
    return ("n/a: " + reason)[:width].replace("|", "/")


def table(bench: Benchmark, results: Sequence[CaseResult], rooflines: Sequence[float]) -> str:
    primary = bench.label(bench.primary)
    header = ["case", "outputs", "MB", *(f"{s.label} TB/s" for s in bench.systems),
              "best peer", f"{primary} / best peer", f"{primary} / copy"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in results:
        best, value, ours = best_peer(bench, r), ratio(bench, r), r.tbps(bench.primary)
        roof = rooflines[r.run] if r.run < len(rooflines) else None
        row = [r.name, r.outputs, f"{r.traffic / 1e6:.1f}",
               *(cell(r, s.key) for s in bench.systems),
               "n/a" if best is None else bench.label(best[0]),
               "n/a" if value is None else f"{value:.2f}x",
               "n/a" if ours is None or not roof else f"{ours / roof:.0%}"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def run_lines(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = []
    for index, run in enumerate(runs):
        part = f"run {index + 1} of {len(runs)}: " if len(runs) > 1 else ""
        lines += [f"- {part}`{run['command']}`",
                  f"  - {environment_line(run['env'])}",
                  f"  - copy roofline: {run['roofline_tbps']:.2f} TB/s (a device-to-device copy "
                  f"of 1 GiB, bytes read + written, timed as the cases); {run['reps']} "
                  f"repetitions per system and case"
                  + (f"; cases of {run['placed_bytes'] >> 20} MiB or less on "
                     f"{run['placements']} placements of their tensors in turn"
                     if run.get("placements", 1) > 1 else "")
                  + ("; FAKE timings (--dry-run)" if run.get("fake") else "")]
    return lines


METHOD = ("TB/s of essential traffic (inputs read once, outputs written once) over the "
          "median device time (CUDA events) of the repetitions, each after L2 was flushed "
          "(a read of 2x its size) and a spin kernel that hides the host's issue time; the "
          "systems interleaved, warmed up, torch.compile(dynamic=False) compiled before; "
          "no CUDA graphs (bench/timing.py, bench/harness.py).")


def markdown(bench: Benchmark, results: Sequence[CaseResult],
             runs: Sequence[Mapping[str, Any]]) -> str:
    device = runs[-1]["env"]["device"] if runs else "?"
    notes = [f"- {n}" for n in bench.notes]
    lines = [f"# {bench.title} on {device}", "", *run_lines(runs), "", METHOD, "",
             *(["Notes:", *notes, ""] if notes else []),
             table(bench, results, [run["roofline_tbps"] for run in runs]), "",
             "Summary:", *summary_lines(bench, summarize(bench, results)), ""]
    return "\n".join(lines)


def to_json(bench: Benchmark, results: Sequence[CaseResult],
            runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {"bench": bench.name, "title": bench.title, "primary": bench.primary,
            "systems": [vars(s) for s in bench.systems], "runs": list(runs),
            "cases": [{"name": r.name, "traffic": r.traffic, "outputs": r.outputs,
                       "params": r.params, "run": r.run, "elapsed_s": r.elapsed_s,
                       "timings": {k: t.to_json() for k, t in r.timings.items()},
                       "tbps": {s.key: r.tbps(s.key) for s in bench.systems},
                       "reasons": r.reasons} for r in results]}


def from_json(record: Mapping[str, Any]) -> tuple[list[CaseResult], list[dict[str, Any]]]:
    results = [CaseResult(c["name"], int(c["traffic"]), c["outputs"], dict(c["params"]),
                          {k: Timing.from_json(t) for k, t in c["timings"].items()},
                          dict(c["reasons"]), float(c["elapsed_s"]), int(c["run"]))
               for c in record["cases"]]
    return results, list(record["runs"])


def merge(parts: Sequence[tuple[list[CaseResult], list[dict[str, Any]]]],
          order: Sequence[str]) -> tuple[list[CaseResult], list[dict[str, Any]]]:
    """Several runs' results as one: a later part's case replaces an earlier's of the
    same name; cases in `order` (the benchmark's full list), others after; the runs
    still referenced kept in their order."""
    latest: dict[str, tuple[CaseResult, dict[str, Any]]] = {}
    for results, runs in parts:
        for r in results:
            latest[r.name] = (r, runs[r.run])
    rank = {name: i for i, name in enumerate(order)}
    names = sorted(latest, key=lambda n: (rank.get(n, len(rank)), n))
    used = {id(run) for _, run in latest.values()}
    runs_out = [run for _, runs in parts for run in runs if id(run) in used]
    index = {id(run): i for i, run in enumerate(runs_out)}
    merged = []
    for name in names:
        r, run = latest[name]
        merged.append(CaseResult(r.name, r.traffic, r.outputs, r.params, r.timings,
                                 r.reasons, r.elapsed_s, index[id(run)]))
    return merged, runs_out


def plot_ratios(bench: Benchmark, results: Sequence[CaseResult], path: Path,
                device: str) -> None:
    """A dot per case: the primary's TB/s over the best peer's, on an axis zoomed to the
    ratios (parity marked); cases with no ratio are listed with "n/a"."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [r.name for r in results]
    values = [ratio(bench, r) for r in results]
    known = [v for v in values if v is not None] or [1.0]
    low, high = min(*known, 0.9) * 0.95, max(*known, 1.1) * 1.05
    fig, ax = plt.subplots(figsize=(8, 0.16 * len(labels) + 1.4))
    for y, v in enumerate(values):
        if v is None:
            ax.text(low, y, " n/a", va="center", fontsize=5)
        else:
            ax.plot([1.0, v], [y, y], color="0.8", linewidth=0.6)
            ax.plot(v, y, "o", markersize=3, color="C2" if v >= 1 else "C3")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlim(low, high)
    ax.set_yticks(range(len(labels)), labels, fontsize=5)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.grid(axis="x", alpha=0.3)
    ax.set_xlabel(f"{bench.label(bench.primary)} TB/s / best peer's")
    ax.set_title(f"{bench.title} on {device}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(bench: Benchmark, results: list[CaseResult], runs: list[dict[str, Any]],
          stem: Path, plot: bool) -> None:
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".md").write_text(markdown(bench, results, runs))
    stem.with_suffix(".json").write_text(json.dumps(to_json(bench, results, runs), indent=1))
    if plot and importlib.util.find_spec("matplotlib") is None:
        print("matplotlib is not installed: no plot (re-plot later with --plot JSON)")
    elif plot:
        device = runs[-1]["env"]["device"]
        plot_ratios(bench, results, stem.with_suffix(".png"), device)
        if bench.extra_plot is not None:
            bench.extra_plot(bench, results, stem, device)


# ------------------------------------------------------------------ the command


def parser(bench: Benchmark) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"bench/{bench.name}.py", description=bench.title)
    p.add_argument("--quick", action="store_true", help="a short subset of the cases")
    p.add_argument("--cases", metavar="REGEX", help="only cases whose name matches (re.search)")
    p.add_argument("--list", action="store_true", help="print the case names and stop")
    p.add_argument("--reps", type=int, default=bench.reps,
                   help=f"repetitions per system and case (at least {MIN_REPS}; "
                        f"default {bench.reps})")
    p.add_argument("--dry-run", action="store_true",
                   help="no GPU: the whole pipeline on fake timings, no plot")
    p.add_argument("--results", type=Path, help="the folder for the files (default "
                   "bench/results; a temporary folder for --dry-run)")
    p.add_argument("--append", action="store_true",
                   help="merge into the saved run in the results folder (running in parts)")
    p.add_argument("--plot", type=Path, metavar="JSON", help="only re-plot a saved run")
    p.add_argument("--merge", type=Path, nargs="+", metavar="JSON",
                   help="merge saved runs (parts of one benchmark) into the results folder")
    return p


def select(cases: Sequence[Case], pattern: str | None) -> list[Case]:
    if pattern is None:
        return list(cases)
    regex = re.compile(pattern)
    return [c for c in cases if regex.search(c.name)]


def _load(path: Path) -> tuple[list[CaseResult], list[dict[str, Any]]]:
    return from_json(json.loads(path.read_text()))


def _destination(bench: Benchmark, args: argparse.Namespace, device: str) -> Path:
    folder: Path | None = args.results
    if folder is None:
        folder = Path(tempfile.mkdtemp(prefix="bench-dry-run-")) if args.dry_run else RESULTS
    return folder / f"{bench.name}-{'dry-run' if args.dry_run else slug(device)}"


def _offline(bench: Benchmark, args: argparse.Namespace, order: Sequence[str]) -> int:
    """--plot and --merge: no GPU, no timing."""
    if args.plot is not None:
        results, runs = _load(args.plot)
        write(bench, results, runs, args.plot.with_suffix(""), plot=True)
        print(f"wrote {args.plot.with_suffix('.png')}")
        return 0
    results, runs = merge([_load(p) for p in args.merge], order)
    device = runs[-1]["env"]["device"]
    stem = (args.results or RESULTS) / f"{bench.name}-{slug(device)}"
    write(bench, results, runs, stem, plot=True)
    print(f"merged {len(results)} cases into {stem}.md, .json, .png")
    return 0


def main(bench: Benchmark, plan: Callable[[bool], list[Case]],
         argv: Sequence[str] | None = None,
         backend: Callable[[argparse.Namespace], Backend] | None = None,
         before: Callable[[Sequence[Case]], object] | None = None) -> int:
    """The command line of a benchmark script: `plan(quick)` lists its cases; `backend`
    replaces the GPU's (tests); `before` runs on the chosen cases first (not dry)."""
    command_line = parser(bench)
    args = command_line.parse_args(argv)
    if args.reps < MIN_REPS:
        command_line.error(f"--reps: at least {MIN_REPS} for a reported figure, got {args.reps}")
    order = [c.name for c in plan(False)]
    if args.plot is not None or args.merge:
        return _offline(bench, args, order)
    try:
        cases = select(plan(args.quick), args.cases)
    except re.error as e:
        command_line.error(f"--cases: {args.cases!r} is not a regular expression ({e})")
    if args.list or not cases:
        print("\n".join(c.name for c in cases) or f"no case matches {args.cases!r}")
        return 0 if cases else 1
    if before is not None and not args.dry_run:
        before(cases)
    chosen = backend(args) if backend is not None else \
        FakeBackend(args.reps) if args.dry_run else GpuBackend(args.reps)
    command = f"python3 bench/{bench.name}.py " + " ".join(sys.argv[1:] if argv is None else argv)
    started = time.perf_counter()
    env = chosen.environment()
    run = {"command": command.strip(), "env": env, "roofline_tbps": chosen.roofline(),
           "reps": args.reps, "placements": 1 if args.dry_run else PLACEMENTS,
           "placed_bytes": PLACED_BYTES, "fake": args.dry_run}
    print(f"{bench.title}: {len(cases)} cases on {env['device']}; copy roofline "
          f"{run['roofline_tbps']:.2f} TB/s", flush=True)
    results = run_cases(bench, cases, chosen, lambda line: print(line, flush=True))
    run["elapsed_s"] = round(time.perf_counter() - started, 1)
    stem = _destination(bench, args, env["device"])
    parts = [(results, [run])]
    if args.append and stem.with_suffix(".json").exists():
        parts.insert(0, _load(stem.with_suffix(".json")))
    merged, runs = merge(parts, order)
    write(bench, merged, runs, stem, plot=not args.dry_run)
    print("\n".join(["", "Summary:", *summary_lines(bench, summarize(bench, results))]))
    print(f"{len(results)} cases in {run['elapsed_s']:.0f} s; wrote {stem}.md, .json"
          + ("" if args.dry_run else ", .png"))
    return 0
