"""bench/harness.py and bench/timing.py without a GPU: the summary's arithmetic on known
figures, a peer that raises (its reason in the table), merging runs made in parts."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load(name: str) -> ModuleType:
    """A bench/ module under the name bench_<name> (tests/ has its own reductions.py);
    bench/ on sys.path for the modules' own imports (harness, common, timing)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def harness() -> ModuleType:
    return load("harness")


def _result(h: Any, name: str, tbps: dict[str, float], reasons: dict[str, str] | None = None
            ) -> Any:
    """A case of 1 TB whose systems ran at the given TB/s (seconds = 1 / TB/s)."""
    timings = {k: h.Timing(1.0 / v, 0.9 / v, 1.1 / v, 100) for k, v in tbps.items()}
    return h.CaseResult(name, 10**12, "fresh", {}, timings, reasons or {})


def test_ratio_best_peer_and_summary(harness: Any) -> None:
    bench = harness.Benchmark("t", "T")
    a = _result(harness, "a", {"tile-mlir": 2.0, "eager": 1.0, "compile": 1.6})
    b = _result(harness, "b", {"tile-mlir": 1.0, "eager": 2.0, "compile": 1.0})
    c = _result(harness, "c", {"tile-mlir": 3.0, "eager": 3.0}, {"compile": "boom"})
    d = _result(harness, "d", {"eager": 1.0, "compile": 1.0}, {"tile-mlir": "missing"})
    assert harness.best_peer(bench, a) == ("compile", pytest.approx(1.6))
    assert harness.ratio(bench, a) == pytest.approx(1.25)
    assert harness.ratio(bench, b) == pytest.approx(0.5)
    assert harness.ratio(bench, c) == pytest.approx(1.0)
    assert harness.ratio(bench, d) is None
    summary = harness.summarize(bench, [a, b, c, d], worst=2)
    assert (summary.cases, summary.with_ratio, summary.at_least_one) == (4, 3, 2)
    # c has a peer missing: out of the geometric mean, in the counts
    assert summary.geomean_cases == 2
    assert summary.geomean == pytest.approx(math.sqrt(1.25 * 0.5))
    assert [name for name, _ in summary.worst] == ["b", "c"]
    lines = harness.summary_lines(bench, summary)
    assert "- tile-mlir >= 1.0x the best peer: 2 of 3" in lines
    assert any("over the 2 cases where every peer was timed: 0.791x" in line for line in lines)


def test_table_cells_and_roofline(harness: Any) -> None:
    bench = harness.Benchmark("t", "T")
    c = _result(harness, "c", {"tile-mlir": 1.5, "eager": 3.0},
                {"compile": "torch.compile failed: BackendCompilerFailed: x"})
    rows = harness.table(bench, [c], [3.0]).splitlines()
    assert rows[0].startswith("| case | outputs | MB | tile-mlir TB/s | torch eager TB/s | "
                              "torch.compile TB/s | best peer |")
    assert rows[2] == ("| c | fresh | 1000000.0 | 1.50 | 3.00 | n/a: torch.compile failed: "
                       "BackendCompilerFailed: x | torch eager | 0.50x | 50% |")


def test_percentiles(harness: Any) -> None:
    timing = load("timing")
    samples = [float(v) for v in range(100, 0, -1)]  # 1..100, shuffled order irrelevant
    median, p10, p90 = timing.percentiles(samples)
    assert (median, p10, p90) == (50.5, 11.0, 91.0)
    assert timing.summarize(samples).reps == 100
    with pytest.raises(ValueError, match="at least 100"):
        timing.check_reps(99)


def _plan(harness: Any, log: list[str]) -> Any:
    """Two pure-Python cases: one whose peers fail in three ways, one all fine."""

    def fails() -> Any:
        def boom() -> None:
            raise RuntimeError("boom\nsecond line")

        def gap() -> None:
            raise harness.Gap("torch has no fp8 kernel for add")

        def check(system: str, result: Any) -> None:
            log.append(system)
            if system == "tile-mlir":
                raise AssertionError("3 of 8 elements differ")

        return harness.Built({"tile-mlir": harness.Call(lambda: 1),
                              "eager": harness.Call(gap),
                              "compile": harness.Call(boom, compiled=True)}, check)

    def fine() -> Any:
        return harness.Built({"tile-mlir": harness.Call(lambda x: x, (1,)),
                              "eager": harness.Call(lambda: 2),
                              "compile": "n/a: compile skipped on purpose"})

    return lambda quick: [harness.Case("fails", 1000, fails),
                          harness.Case("fine", 2000, fine, "out=", {"k": 1},
                                       {"eager": "known gap"})][: 1 if quick else 2]


def test_peer_that_raises_shows_its_reason(harness: Any, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    bench = harness.Benchmark("t", "Test bench")
    checked: list[str] = []
    code = harness.main(bench, _plan(harness, checked), ["--results", str(tmp_path)],
                        backend=lambda args: harness.FakeBackend(args.reps, call=True))
    assert code == 0
    out = capsys.readouterr().out
    assert "[1/2] fails:" in out and "[2/2] fine:" in out and "Summary:" in out
    assert checked == ["tile-mlir"]  # the others failed before their check
    text = next(tmp_path.glob("t-*.md")).read_text()
    assert "| fails | fresh | 0.0 | n/a: wrong result: 3 of 8 elements differ | " \
           "n/a: torch has no fp8 kernel for add | n/a: torch.compile failed: " \
           "RuntimeError: boom | n/a | n/a | n/a |" in text
    assert "n/a: known gap" in text and "n/a: compile skipped on purpose" in text
    record = json.loads(next(tmp_path.glob("t-*.json")).read_text())
    assert [c["name"] for c in record["cases"]] == ["fails", "fine"]
    assert record["cases"][1]["timings"]["tile-mlir"]["reps"] == 100
    assert record["cases"][0]["reasons"]["eager"] == "torch has no fp8 kernel for add"


def test_runs_in_parts_merge_in_the_case_order(harness: Any, tmp_path: Path) -> None:
    bench = harness.Benchmark("t", "Test bench")
    plan = _plan(harness, [])

    def run(*argv: str) -> None:
        harness.main(bench, plan, ["--dry-run", "--results", str(tmp_path), *argv])

    run("--cases", "fine")
    run("--cases", "fails", "--append")
    record = json.loads((tmp_path / "t-dry-run.json").read_text())
    assert [c["name"] for c in record["cases"]] == ["fails", "fine"]
    assert len(record["runs"]) == 2 and record["cases"][0]["run"] == 1
    text = (tmp_path / "t-dry-run.md").read_text()
    assert "run 1 of 2: `python3 bench/t.py --dry-run" in text
    with pytest.raises(SystemExit):  # argparse's usage error, before anything is timed
        run("--reps", "10")
    assert json.loads((tmp_path / "t-dry-run.json").read_text()) == record


def test_merge_of_parts_saved_apart(harness: Any, tmp_path: Path) -> None:
    """Parts written to folders of their own, merged by --merge into one table."""
    bench = harness.Benchmark("t", "Test bench")
    plan = _plan(harness, [])
    for part, pattern in (("b", "fine"), ("a", "fails")):
        harness.main(bench, plan, ["--dry-run", "--results", str(tmp_path / part),
                                   "--cases", pattern])
    merged = tmp_path / "merged"
    assert harness.main(bench, plan, ["--merge", str(tmp_path / "b" / "t-dry-run.json"),
                                      str(tmp_path / "a" / "t-dry-run.json"),
                                      "--results", str(merged)]) == 0
    (saved,) = merged.glob("*.json")
    record = json.loads(saved.read_text())
    assert [c["name"] for c in record["cases"]] == ["fails", "fine"]
    assert [c["run"] for c in record["cases"]] == [1, 0]


def test_a_call_that_fails_the_second_time_is_its_own_gap(harness: Any) -> None:
    """Some calls take a fast path from their second call on: a failure there is the
    system's, found before timing (which could not say whose it was)."""
    calls = {"n": 0}

    def flaky() -> int:
        calls["n"] += 1
        if calls["n"] > 1:
            raise AttributeError("'float' object has no attribute 'data_ptr'")
        return 1

    built = harness.Built({"tile-mlir": harness.Call(flaky), "eager": harness.Call(lambda: 2),
                           "compile": harness.Call(lambda: 3, compiled=True)})
    ready, reasons = harness.prepare(built, harness.STANDARD, lambda fn: fn)
    assert set(ready) == {"eager", "compile"}
    assert reasons == {"tile-mlir": "AttributeError: 'float' object has no attribute 'data_ptr'"}


class _Buffer:
    """A stand-in device buffer: a name, and the views of it the calls take."""

    def __init__(self, name: str) -> None:
        self.name = name


def test_small_cases_take_their_placements_in_turn(harness: Any) -> None:
    """A small case's systems run on copies of its tensors in turn, the first placement the
    case's own (that result is the one checked); one buffer's copy serves every system
    and argument that held it; anything not a tensor is passed as it is."""
    x, out = _Buffer("x"), _Buffer("out")
    copies: list[str] = []

    def copy(value: Any, buffers: dict[Any, Any]) -> Any:
        if not isinstance(value, _Buffer):
            return value
        if id(value) not in buffers:
            buffers[id(value)] = _Buffer(f"{value.name}{len(copies)}")
            copies.append(buffers[id(value)].name)
        return buffers[id(value)]

    seen: dict[str, list[tuple[str, str, float]]] = {"tile-mlir": [], "eager": []}

    def record(system: str) -> Any:
        def call(a: _Buffer, alpha: float, *, out: _Buffer) -> str:
            seen[system].append((a.name, out.name, alpha))
            return a.name
        return call

    checked: list[tuple[str, str]] = []
    built = harness.Built({"tile-mlir": harness.Call(record("tile-mlir"), (x, 2.0), {"out": out}),
                           "eager": harness.Call(record("eager"), (x, 2.0), {"out": out}),
                           "compile": "n/a: no kernel"},
                          lambda system, result: checked.append((system, result)))
    assert harness.placements(harness.PLACED_BYTES) == harness.PLACEMENTS > 1
    assert harness.placements(harness.PLACED_BYTES + 1) == 1
    ready, reasons = harness.prepare(built, harness.STANDARD, lambda fn: fn, 3, copy)
    assert reasons == {"compile": "no kernel"} and checked == [("tile-mlir", "x"), ("eager", "x")]
    assert copies == ["x0", "out1", "x2", "out3"]  # two placements beyond the case's own
    for system in ("tile-mlir", "eager"):
        for _ in range(3):
            ready[system]()
        # the check's call, each placement once (warm-up), then the three above in turn
        assert [(a, o) for a, o, _ in seen[system]] == [
            ("x", "out"), ("x", "out"), ("x0", "out1"), ("x2", "out3"),
            ("x", "out"), ("x0", "out1"), ("x2", "out3")]
        assert {alpha for *_, alpha in seen[system]} == {2.0}
    one, _ = harness.prepare(built, harness.STANDARD, lambda fn: fn)
    assert not isinstance(one["eager"], harness.Rotation)


def test_replot_from_saved_json(harness: Any, tmp_path: Path) -> None:
    """--plot re-plots a saved run (where matplotlib is installed)."""
    pytest.importorskip("matplotlib")
    bench = harness.Benchmark("t", "Test bench")
    plan = _plan(harness, [])
    harness.main(bench, plan, ["--dry-run", "--results", str(tmp_path)])
    saved = tmp_path / "t-dry-run.json"
    assert harness.main(bench, plan, ["--plot", str(saved)]) == 0
    assert (tmp_path / "t-dry-run.png").stat().st_size > 0
