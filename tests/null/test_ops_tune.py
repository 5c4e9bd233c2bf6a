"""null tier: the autotuner's progress and summary (fake timings, no GPU), and where its
choices go: the user's tuning file, or with --ship the package's defaults for the chip,
which the library reads when the user has tuned nothing."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tile_mlir import op_table
from tile_mlir.ops import strategy, tune
from tile_mlir.ops.programs.elementwise import Strategy
from tile_mlir.runtime import driver

FAST = Strategy(threads=512, vector_bytes=16, rounds=2, stage=2)
TARGET = "sm_90-nvidia-h100-80gb-hbm3"
"""What the tuner fixture's device is tuned as (strategy.target)."""


@pytest.fixture
def tuner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every candidate takes 10 us but FAST (5 us); the device an H100 (TARGET); files go
    to tmp."""
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
    assert strategy.choose("binary_arith", "bf16", 1 << 24, TARGET) == FAST


def test_a_second_run_keeps_what_it_chose(tuner: list[str]) -> None:
    tune.run([("add", "f32", 1 << 28)], tuner.append)
    tune.run([("add", "f32", 1 << 28)], tuner.append)
    assert "(unchanged)" in tuner[-2] and "0 changed, 1 kept" in tuner[-1]


def test_shipped_defaults_are_read_under_the_users_choices(tuner: list[str]) -> None:
    tune.run([("exp", "f16", 1 << 20)], tuner.append, ship=True)
    assert (strategy.SHIPPED / f"{TARGET}.json").is_file()
    assert strategy.choose("unary_math", "f16", 1 << 20, TARGET) == FAST
    mine = Strategy(threads=128, vector_bytes=16, rounds=8, stage=8)
    strategy.save(TARGET, {"unary_math/f16/2^20": mine}, {})
    assert strategy.choose("unary_math", "f16", 1 << 20, TARGET) == mine
    assert strategy.choose("unary_math", "f16", 1 << 20, "sm_80") == strategy.default(1 << 20)


def test_no_candidate_ran(tuner: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    def none_planned(*_: Any, **__: Any) -> dict[Strategy, float]:
        return {}  # time_candidates logs each candidate that failed and leaves it out

    monkeypatch.setattr(tune, "time_candidates", none_planned)
    with pytest.raises(RuntimeError, match="no candidate ran for add, div f32"):
        tune.run([("add", "f32", 1 << 16)], tuner.append)


def test_a_family_key_weighs_its_sample_ops_alike(tuner: list[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A candidate fastest on the named op but slow on the family's other samples loses to
    one fast on all of them (the geometric mean of the times); an op's own key is timed on
    the op alone."""
    narrow = Strategy(threads=128, vector_bytes=8, rounds=1, stage=1)
    timed: list[str] = []

    def seconds(op: str, dtype: str, numel: int, candidates: Sequence[Strategy],
                log: Callable[[str], None], *, reps: int = 100) -> dict[Strategy, float]:
        timed.append(op)
        at = {FAST: 8e-6, narrow: 5e-6 if op == "where" else 20e-6}
        return {c: at.get(c, 10e-6) for c in candidates}

    monkeypatch.setattr(tune, "time_candidates", seconds)
    assert tune.sample("where", "f16") == ("where", "clamp", "isnan")
    assert tune.sample("where", "i64") == ("where", "clamp", "isnan")
    assert tune.sample("where", "bool") == ("where", "isnan")  # clamp has no bool
    assert tune.sample("neg", "i32") == ("neg",)  # nor exp and sqrt i32
    tune.run([("where", "f16", 1 << 26)], tuner.append)
    assert timed == ["where", "clamp", "isnan"]
    assert strategy.choose("special", "f16", 1 << 26, TARGET) == FAST
    assert "8.0 us on where, clamp, isnan (was " in tuner[0]
    timed.clear()
    tune.run([("where", "f16", 1 << 26)], tuner.append, per_op=True)
    assert timed == ["where"]


def test_a_rows_key_is_timed_on_bias_adds() -> None:
    """A family's rows key (strategy.ROWS) is timed on its samples of two tensor inputs or
    more, each with its last input one row broadcast over the others' rows (ROW_WIDTH,
    or a single row of a smaller size)."""
    assert tune.sample("add", "bf16") == ("add", "div")
    assert tune.sample("add", "bf16", rows=True) == ("add@row", "div@row")
    assert tune.sample("mul", "i32", rows=True) == ("mul@row", "add@row")  # div has no i32
    assert tune.sample("where", "f16", rows=True) == ("where@row",)  # clamp, isnan: one
    shapes: list[tuple[str, tuple[int, ...]]] = []

    class FakeTorch:
        bfloat16 = "bfloat16"

        def randn(self, shape: tuple[int, ...], device: str) -> FakeTorch:
            shapes.append(("randn", shape))
            return self

        def rand(self, shape: tuple[int, ...], device: str) -> float:
            shapes.append(("rand", shape))
            return 0.0

        def __mul__(self, scale: float) -> FakeTorch:
            return self

        def to(self, dtype: str) -> FakeTorch:
            return self

    assert len(tune._arguments(FakeTorch(), "add@row", "bf16", 1 << 26)) == 2
    assert shapes == [("randn", (1 << 14, tune.ROW_WIDTH)), ("randn", (tune.ROW_WIDTH,))]
    shapes.clear()
    tune._arguments(FakeTorch(), "add@row", "bf16", 1 << 10)
    assert shapes == [("randn", (1, 1 << 10)), ("randn", (1 << 10,))]
    shapes.clear()
    tune._arguments(FakeTorch(), "where@row", "bf16", 1 << 20)  # the condition stays bool
    assert shapes == [("rand", (1 << 8, tune.ROW_WIDTH)), ("randn", (1 << 8, tune.ROW_WIDTH)),
                      ("randn", (tune.ROW_WIDTH,))]
    shapes.clear()
    tune._arguments(FakeTorch(), "add", "bf16", 1 << 26)
    assert shapes == [("randn", (1 << 26,)), ("randn", (1 << 26,))]


def test_rows_tuning_keys_the_familys_rows(tuner: list[str]) -> None:
    """tune --rows saves the family's rows key, which a launch over rows reads before the
    family's (and an op's own key before both); other launches keep the family's."""
    outcomes = tune.run([("add", "bf16", 1 << 26)], tuner.append, rows=True)
    assert [o.key for o in outcomes] == ["binary_arith@rows/bf16/2^26"]
    assert outcomes[0].ops == ("add@row", "div@row")
    assert strategy.choose("binary_arith", "bf16", 1 << 26, TARGET, rows=True) == FAST
    assert strategy.choose("binary_arith", "bf16", 1 << 26, TARGET) == \
        strategy.default(1 << 26)
    family = Strategy(threads=128, vector_bytes=8, rounds=1, stage=1)
    strategy.save(TARGET, {"binary_arith/f16/2^26": family}, {})
    assert strategy.choose("binary_arith", "f16", 1 << 26, TARGET, rows=True) == family
    own = Strategy(threads=128, vector_bytes=16, rounds=8, stage=8)
    strategy.save(TARGET, {"op:add/bf16/2^26": own}, {})
    assert strategy.choose("binary_arith", "bf16", 1 << 26, TARGET, "add", rows=True) == own
    assert strategy.find("binary_arith", "bf16", 1 << 26, TARGET, rows=True).key == \
        "binary_arith@rows/bf16/2^26"
    with pytest.raises(ValueError, match="not both"):
        tune.run([("add", "bf16", 1 << 26)], tuner.append, rows=True, per_op=True)


def test_a_chips_rows_key_does_not_override_a_devices_family_key(tuner: list[str]) -> None:
    """A rows key in the chip's file (an H100's, sm_90.json) is read for a device only
    where no later file of the device's keys the family: an H200 keeps its own."""
    chip_rows = Strategy(threads=512, vector_bytes=16, rounds=1, stage=1)
    device_family = Strategy(threads=512, vector_bytes=8, rounds=2, stage=2)
    rows_key = strategy.key("binary_arith" + strategy.ROWS, "bf16", 1 << 26)
    family_key = strategy.key("binary_arith", "bf16", 1 << 26)
    strategy.save("sm_90", {rows_key: chip_rows,
                            family_key: Strategy(128, 8, 1, 1)}, {}, shipped=True)
    h200 = "sm_90-nvidia-h200"
    strategy._choices.cache_clear()
    assert strategy.choose("binary_arith", "bf16", 1 << 26, h200, rows=True) == chip_rows
    strategy.save(h200, {family_key: device_family}, {}, shipped=True)
    strategy._choices.cache_clear()
    assert strategy.find("binary_arith", "bf16", 1 << 26, h200, rows=True).key == family_key
    assert strategy.choose("binary_arith", "bf16", 1 << 26, h200, rows=True) == device_family
    own_rows = Strategy(threads=256, vector_bytes=16, rounds=2, stage=2)
    strategy.save(h200, {rows_key: own_rows}, {}, shipped=True)
    strategy._choices.cache_clear()
    assert strategy.choose("binary_arith", "bf16", 1 << 26, h200, rows=True) == own_rows
    assert strategy.choose("binary_arith", "bf16", 1 << 26, h200) == device_family


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
    meta = json.loads((strategy.SHIPPED / f"{TARGET}.json").read_text())["meta"]
    assert meta["command"] == "tune second"  # saved key by key: listed once
    assert [run["command"] for run in meta["earlier"]] == ["tune first"]


def test_a_file_that_is_not_a_tuning_file_is_read_as_none(tuner: list[str]) -> None:
    path = strategy.tuning_file(TARGET)
    path.parent.mkdir(parents=True, exist_ok=True)
    for text in ("[1, 2]", "{\"choices\": [1], \"meta\": 3}", "not json"):
        path.write_text(text)
        strategy._choices.cache_clear()
        assert strategy.choose("binary_arith", "f32", 1 << 16, TARGET) == \
            strategy._read(strategy.SHIPPED / "sm_90.json").get(
                "binary_arith/f32/2^16", strategy.default(1 << 16))
        tune.run([("add", "f32", 1 << 16)], tuner.append)  # and a run writes it anew
        assert strategy.choose("binary_arith", "f32", 1 << 16, TARGET) == FAST
        path.write_text(text)


# ---------------------------------------------------------------- an op's own choice


def test_an_ops_own_choice_is_read_before_its_familys(tuner: list[str]) -> None:
    family, own = Strategy(128, 16, 2, 2), Strategy(128, 16, 4, 4)
    strategy.save(TARGET, {strategy.key("activation", "bf16", 1 << 24): family,
                            strategy.op_key("softplus", "bf16", 1 << 24): own},
                  {"device": "test"})
    assert strategy.op_key("softplus", "bf16", 1 << 25) == "op:softplus/bf16/2^24"
    assert strategy.choose("activation", "bf16", 1 << 24, TARGET, "softplus") == own
    assert strategy.choose("activation", "bf16", 1 << 24, TARGET, "silu") == family
    assert strategy.choose("activation", "bf16", 1 << 24, TARGET) == family
    assert strategy.choose("activation", "f16", 1 << 24, TARGET, "softplus") == \
        strategy.default(1 << 24)  # another dtype: neither key


def test_per_op_tuning_keys_each_op_against_its_familys_choice(tuner: list[str]) -> None:
    family = Strategy(128, 16, 2, 2)
    strategy.save(TARGET, {strategy.key("activation", "bf16", 1 << 24): family},
                  {"device": "test"})
    outcomes = tune.run([("softplus", "bf16", 1 << 24), ("mish", "bf16", 1 << 24)],
                        tuner.append, per_op=True)
    assert [o.key for o in outcomes] == ["op:softplus/bf16/2^24", "op:mish/bf16/2^24"]
    assert all(o.before == family for o in outcomes)  # what the op ran before: the family's
    assert strategy.choose("activation", "bf16", 1 << 24, TARGET, "softplus") == FAST
    assert strategy.choose("activation", "bf16", 1 << 24, TARGET, "silu") == family


def test_an_ops_key_that_says_what_its_family_does_is_dropped(
        tuner: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    strategy.save(TARGET, {strategy.op_key("elu", "f16", 1 << 24): FAST,
                            strategy.key("activation", "f16", 1 << 24): FAST},
                  {"device": "test"})
    tune.run([("elu", "f16", 1 << 24)], tuner.append, per_op=True)
    saved = json.loads(strategy.tuning_file(TARGET).read_text())["choices"]
    assert "op:elu/f16/2^24" not in saved and "activation/f16/2^24" in saved
    assert strategy.choose("activation", "f16", 1 << 24, TARGET, "elu") == FAST


def test_an_ops_key_for_the_device_shadows_the_chips_where_the_family_wins(
        tuner: list[str]) -> None:
    """The chip's file holds an op key made on another device of the chip (sm_90.json:
    an H100's); tuned on this device the op runs best with its family's choice: the
    device's file must say so, or the chip's op key would still be read first."""
    chip_key, other = strategy.op_key("exp", "bf16", 1 << 26), Strategy(128, 16, 1, 1)
    shipped = strategy.shipped_file("sm_90")
    shipped.parent.mkdir(parents=True)
    shipped.write_text(json.dumps({"choices": {chip_key: dataclasses.asdict(other)}}))
    strategy.save(TARGET, {strategy.key("unary_math", "bf16", 1 << 26): FAST},
                  {"device": "test"})
    assert strategy.choose("unary_math", "bf16", 1 << 26, TARGET, "exp") == other
    outcomes = tune.run([("exp", "bf16", 1 << 26)], tuner.append, per_op=True)
    assert outcomes[0].before == other and outcomes[0].best == FAST
    saved = json.loads(strategy.tuning_file(TARGET).read_text())["choices"]
    assert saved[chip_key] == dataclasses.asdict(FAST)
    assert strategy.choose("unary_math", "bf16", 1 << 26, TARGET, "exp") == FAST


def test_elsewhere_reads_a_key_in_every_file_but_one(tuner: list[str]) -> None:
    """What would be read for a key were it left out of one file: the last other file
    of the target's that has it (the tuner keeps an op's key where that differs)."""
    name, chip_choice = strategy.op_key("exp", "bf16", 1 << 26), Strategy(128, 16, 1, 1)
    shipped = strategy.shipped_file("sm_90")
    shipped.parent.mkdir(parents=True)
    shipped.write_text(json.dumps({"choices": {name: dataclasses.asdict(chip_choice)}}))
    mine = strategy.save(TARGET, {name: FAST}, {"device": "test"})
    assert strategy.elsewhere(TARGET, name, mine) == chip_choice
    assert strategy.elsewhere(TARGET, name, shipped) == FAST
    assert strategy.elsewhere(TARGET, strategy.op_key("exp", "f32", 1 << 26), mine) is None


def test_chip_ops_tunes_every_op_the_chips_file_keys(tuner: list[str]) -> None:
    """--chip-ops: per op, the ops, dtypes and size classes of the chip's file's op keys
    (at the smallest size of each class), into the device's file, over the chip's."""
    chip = {strategy.op_key("exp", "bf16", 1 << 26): Strategy(128, 16, 1, 1),
            strategy.op_key("where", "i64", 1 << 20): Strategy(256, 8, 1, 1),
            strategy.key("unary_math", "bf16", 1 << 26): Strategy(256, 16, 2, 2)}
    shipped = strategy.shipped_file("sm_90")
    shipped.parent.mkdir(parents=True)
    shipped.write_text(json.dumps({"choices": {k: dataclasses.asdict(v)
                                               for k, v in chip.items()}}))
    assert tune.chip_op_cases("sm_90") == [("exp", "bf16", 1 << 26), ("where", "i64", 1 << 20)]
    assert tune.main(["--chip-ops"]) == 0
    saved = json.loads(strategy.tuning_file(TARGET).read_text())["choices"]
    assert sorted(saved) == ["op:exp/bf16/2^26", "op:where/i64/2^20"]
    assert strategy.choose("unary_math", "bf16", 1 << 27, TARGET, "exp") == FAST


def test_the_margin_is_narrow_where_calls_are_long() -> None:
    """Below LARGE the default stays within 2%; from LARGE within half a percent."""
    default = strategy.default(1 << 24)
    other = Strategy(threads=256, vector_bytes=16, rounds=1, stage=1)
    one_percent = {default: 50.0e-6, other: 50.0e-6 / 1.01}
    assert tune.pick(one_percent, default, 1 << 24) == other
    assert tune.pick(one_percent, default, 1 << 18) == default
    assert tune.margin(tune.LARGE) < tune.margin(tune.LARGE - 1)


def test_the_tuner_passes_tensors_for_all_but_scalar_only_inputs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert tune.tensor_inputs("add") == 2
    assert tune.tensor_inputs("where") == 3
    assert tune.tensor_inputs("softplus") == 1  # beta and threshold take their defaults
    assert tune.tensor_inputs("leaky_relu") == 1
    assert tune.tensor_inputs("clamp") == 1  # its bounds scalars, as torch.clamp is called
    odd = dataclasses.replace(op_table.ELEMENTWISE["add"], scalar_only=(0,))
    monkeypatch.setitem(op_table.ELEMENTWISE, "add", odd)
    with pytest.raises(ValueError, match="scalar-only inputs"):
        tune.tensor_inputs("add")  # a scalar before a tensor: not passed by position


def test_a_line_says_when_the_margin_kept_a_slower_choice() -> None:
    default, other = strategy.default(1 << 24), Strategy(512, 16, 1, 1)
    line = tune.Outcome("logical/f32/2^24", default, 51.4e-6, default, 51.4e-6,
                        (other, 51.3e-6)).line()
    assert line == ("logical/f32/2^24: staged 256x4 of 16 B 51.4 us (unchanged; vector "
                    "512x1 of 16 B 51.3 us is within the margin)")


def test_a_run_without_ops_covers_every_tuned_family() -> None:
    """Each family the library reads choices for has its representative, one of its own."""
    families = {row.family for row in op_table.ELEMENTWISE.values()} - {"internal", "primitive"}
    for family, op in tune.REPRESENTATIVE.items():
        assert op_table.ELEMENTWISE[op].family == family
    shipped = {key.split("/")[0].removesuffix(strategy.ROWS)
               for path in strategy.SHIPPED.glob("*.json") for key in strategy._read(path)}
    assert {f for f in shipped if not f.startswith(strategy.OP_PREFIX)} <= \
        set(tune.REPRESENTATIVE) <= families


# ---------------------------------------------------------------- the command line


@pytest.mark.parametrize(("argv", "message"), [
    (["--ops", "nonexistent"], "--ops: 'nonexistent' is not one of the library's"),
    (["--ops", "alibi_bias"], "--ops: 'alibi_bias' is not one of the library's"),
    (["--ops", "add", "--dtypes", "bf17"], "--dtypes: 'bf17' is not a dtype"),
    (["--ops", "exp", "--dtypes", "i32"], "--dtypes: none of i32 is a dtype of exp"),
    (["--ops", "add", "--sizes", "20,x"], "--sizes: 'x' is not a log2 size"),
    (["--ops", "add", "--sizes", "99"], "--sizes: '99' is not a log2 size"),
    (["--reps", "5"], "--reps: at least 100, got 5"),
    (["--chip-ops", "--ops", "exp"], "--chip-ops: the ops, dtypes and sizes are the chip's"),
    (["--chip-ops", "--sizes", "24"], "--chip-ops: the ops, dtypes and sizes are the chip's"),
    (["--rows", "--per-op"], "--rows: the families' rows keys; give it without --per-op"),
    (["--rows", "--ops", "add,exp,sqrt"], "--rows: exp, sqrt takes one tensor input"),
])
def test_bad_options_are_named_before_anything_runs(
        argv: list[str], message: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tune, "run", lambda *a, **k: pytest.fail("ran"))
    with pytest.raises(SystemExit) as exit_info:
        tune.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_the_command_lines_cases() -> None:
    cases = tune._cases("add,silu_and_mul", "bf16,i32", "20, 24")
    assert cases == [("add", "bf16", 1 << 20), ("add", "bf16", 1 << 24),
                     ("add", "i32", 1 << 20), ("add", "i32", 1 << 24),
                     ("silu_and_mul", "bf16", 1 << 20), ("silu_and_mul", "bf16", 1 << 24)]
    every = tune._cases(None, None, "24")
    assert {op for op, _, _ in every} == set(tune.REPRESENTATIVE.values())


def test_rows_without_ops_tunes_the_families_of_two_inputs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[tuple[list[tuple[str, str, int]], dict[str, Any]]] = []
    monkeypatch.setattr(tune, "run", lambda cases, *a, **k: ran.append((list(cases), k)))
    assert tune.main(["--rows", "--sizes", "26"]) == 0
    cases, options = ran[0]
    assert options["rows"] is True
    assert {op for op, _, _ in cases} == {"add", "lt", "bitwise_and", "logical_and", "where"}


def test_the_default_sizes_tune_every_size_class(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run without --sizes takes one size of each class, and no class twice."""
    ran: list[list[tuple[str, str, int]]] = []
    monkeypatch.setattr(tune, "run", lambda cases, *a, **k: ran.append(list(cases)))
    assert tune.main(["--ops", "add", "--dtypes", "f32"]) == 0
    classes = [strategy.size_class(numel) for _, _, numel in ran[0]]
    assert classes == [name for _, name in strategy.SIZE_CLASSES]


def test_no_gpu_is_said_in_a_line(capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def no_gpu(device: int = 0) -> str:
        raise driver.NoGpuError("no usable CUDA driver or GPU: test")

    monkeypatch.setattr(driver, "device_chip", no_gpu)
    assert tune.main(["--ops", "add", "--sizes", "20"]) == 1
    assert "the autotuner times kernels on a GPU: no usable CUDA driver" in \
        capsys.readouterr().err


def test_a_family_key_keeps_its_earlier_choice_within_the_margin(
        tuner: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A re-run does not trade the key's choice, measured fastest, for the default within
    the margin of it (the default would be 2% slower by the run's own figures); a
    candidate faster by the margin still replaces it."""
    numel = 1 << 16
    earlier, default = Strategy(512, 8, 1, 1), strategy.default(numel)
    assert earlier != default
    strategy.save(TARGET, {strategy.key("binary_arith", "f32", numel): earlier},
                  {"device": "test"})
    times = {earlier: 4.8e-6, default: 4.9e-6}

    def seconds(op: str, dtype: str, n: int, candidates: Sequence[Strategy],
                log: Callable[[str], None], *, reps: int = 100) -> dict[Strategy, float]:
        return {c: times.get(c, 10e-6) for c in candidates}

    monkeypatch.setattr(tune, "time_candidates", seconds)
    outcome, = tune.run([("add", "f32", numel)], tuner.append)
    assert outcome.best == earlier and "(unchanged)" in tuner[0]
    assert strategy.choose("binary_arith", "f32", numel, TARGET) == earlier
    times[FAST] = 4.8e-6 / (1 + 2 * tune.MARGIN)
    outcome, = tune.run([("add", "f32", numel)], tuner.append)
    assert outcome.best == FAST
    assert strategy.choose("binary_arith", "f32", numel, TARGET) == FAST
