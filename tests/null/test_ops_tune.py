"""null tier: the autotuner's progress and summary (fake timings, no GPU), and where its
choices go: the user's tuning file, or with --ship the package's defaults for the chip,
which the library reads when the user has tuned nothing."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tile_mlir.ops import strategy, tune
from tile_mlir.ops.programs.elementwise import Strategy
from tile_mlir.runtime import driver

FAST = Strategy(threads=512, vector_bytes=16, rounds=2, stage=2)


@pytest.fixture
def tuner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every candidate takes 10 us but FAST (5 us); the chip is sm_90; files go to tmp."""
    monkeypatch.setenv("TILE_MLIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(strategy, "SHIPPED", tmp_path / "shipped")
    monkeypatch.setattr(driver, "device_chip", lambda device=0: "sm_90")
    monkeypatch.setattr(driver, "device_name", lambda device=0: "NVIDIA H100 80GB HBM3")

    def seconds(op: str, dtype: str, numel: int, candidates: Sequence[Strategy],
                log: Callable[[str], None], *, reps: int = 100) -> dict[Strategy, float]:
        return {c: 5e-6 if c == FAST else 10e-6 for c in candidates}

    monkeypatch.setattr(tune, "time_candidates", seconds)
    strategy._choices.cache_clear()
    log: list[str] = []
    yield log
    strategy._choices.cache_clear()


def test_progress_a_line_per_key_and_a_summary(tuner: list[str]) -> None:
    outcomes = tune.run([("add", "bf16", 1 << 24), ("mul", "bf16", 1 << 24),
                         ("exp", "f32", 1 << 20)], tuner.append)
    assert [o.key for o in outcomes] == ["binary_arith/bf16/2^24", "unary_math/f32/2^20"]
    progress = [line for line in tuner if line.startswith("[")]
    assert progress[0].startswith("[1/2] binary_arith/bf16/2^24: staged 512x2 of 16 B 5.0 us")
    assert "(was staged 256x4 of 16 B, 2.00x)" in progress[0] and progress[0].endswith(" s")
    assert tuner[-1].startswith("tuned 2 keys in ") and "2 changed, 0 kept" in tuner[-1]
    assert strategy.choose("binary_arith", "bf16", 1 << 24, "sm_90") == FAST


def test_a_second_run_keeps_what_it_chose(tuner: list[str]) -> None:
    tune.run([("add", "f32", 1 << 28)], tuner.append)
    tune.run([("add", "f32", 1 << 28)], tuner.append)
    assert "(unchanged)" in tuner[-2] and "0 changed, 1 kept" in tuner[-1]


def test_shipped_defaults_are_read_under_the_users_choices(tuner: list[str]) -> None:
    tune.run([("exp", "f16", 1 << 20)], tuner.append, ship=True)
    assert (strategy.SHIPPED / "sm_90.json").is_file()
    assert strategy.choose("unary_math", "f16", 1 << 20, "sm_90") == FAST
    mine = Strategy(threads=128, vector_bytes=16, rounds=8, stage=8)
    strategy.save("sm_90", {"unary_math/f16/2^20": mine}, {})
    assert strategy.choose("unary_math", "f16", 1 << 20, "sm_90") == mine
    assert strategy.choose("unary_math", "f16", 1 << 20, "sm_80") == strategy.default(1 << 20)


def test_no_candidate_ran(tuner: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    def none_planned(*_: Any, **__: Any) -> dict[Strategy, float]:
        return {}  # time_candidates logs each candidate that failed and leaves it out

    monkeypatch.setattr(tune, "time_candidates", none_planned)
    with pytest.raises(RuntimeError, match="no candidate ran for add f32"):
        tune.run([("add", "f32", 1 << 16)], tuner.append)


def test_the_default_stays_unless_a_candidate_beats_it_by_the_margin() -> None:
    default = strategy.default(1 << 18)
    other = Strategy(threads=512, vector_bytes=16, rounds=1, stage=1)
    near = {default: 5.00e-6, other: 5.00e-6 / (1 + tune.MARGIN / 2)}
    assert tune.pick(near, default) == default
    far = {default: 5.00e-6, other: 5.00e-6 / (1 + 2 * tune.MARGIN)}
    assert tune.pick(far, default) == other
    assert tune.pick({other: 1e-6}, default) == other  # the default did not run


def test_a_file_lists_the_runs_that_made_it(tuner: list[str]) -> None:
    tune.run([("add", "f32", 1 << 18)], tuner.append, ship=True, command="tune first")
    tune.run([("exp", "f32", 1 << 18), ("exp", "f32", 1 << 20)], tuner.append, ship=True,
             command="tune second")
    meta = json.loads((strategy.SHIPPED / "sm_90.json").read_text())["meta"]
    assert meta["command"] == "tune second"  # saved key by key: listed once
    assert [run["command"] for run in meta["earlier"]] == ["tune first"]


def test_a_file_that_is_not_a_tuning_file_is_read_as_none(tuner: list[str]) -> None:
    path = strategy.tuning_file("sm_90")
    path.parent.mkdir(parents=True, exist_ok=True)
    for text in ("[1, 2]", "{\"choices\": [1], \"meta\": 3}", "not json"):
        path.write_text(text)
        strategy._choices.cache_clear()
        assert strategy.choose("binary_arith", "f32", 1 << 16, "sm_90") == \
            strategy._read(strategy.SHIPPED / "sm_90.json").get(
                "binary_arith/f32/2^16", strategy.default(1 << 16))
        tune.run([("add", "f32", 1 << 16)], tuner.append)  # and a run writes it anew
        assert strategy.choose("binary_arith", "f32", 1 << 16, "sm_90") == FAST
        path.write_text(text)
