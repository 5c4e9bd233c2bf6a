"""Every benchmark script's --dry-run (no GPU): the whole pipeline on fake timings gives
a table and a JSON with every case of the script's list and every system's column;
the essential traffic of a few cases, counted by hand."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
SCRIPTS = ("elementwise", "reductions", "part2", "rope", "fusion", "fused", "sizes")


def load(name: str) -> ModuleType:
    """A bench/ script under the name bench_<name> (tests/ has its own reductions.py)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", SCRIPTS)
def test_dry_run_has_every_case_and_system(name: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    script = load(name)
    assert script.main(["--dry-run", "--results", str(tmp_path)]) == 0
    cases = [c.name for c in script.plan(False)]
    assert len(cases) == len(set(cases)) > 0
    out = capsys.readouterr().out
    assert f"[{len(cases)}/{len(cases)}]" in out and "Summary:" in out
    record = json.loads((tmp_path / f"{name}-dry-run.json").read_text())
    assert [c["name"] for c in record["cases"]] == cases
    systems = [s.key for s in script.BENCH.systems]
    assert {"tile-mlir", "eager", "compile"} <= set(systems)
    for c in record["cases"]:
        assert set(c["tbps"]) == set(systems)
        for key in systems:  # timed, or a reason why not
            assert (key in c["timings"]) != (key in c["reasons"]), (c["name"], key)
    table = (tmp_path / f"{name}-dry-run.md").read_text()
    header = next(line for line in table.splitlines() if line.startswith("| case |"))
    assert all(f"| {s.label} TB/s |" in header for s in script.BENCH.systems)
    rows = [line.split(" | ")[0].removeprefix("| ") for line in table.splitlines()
            if line.startswith("| ") and not line.startswith("| case |")]
    assert rows == cases
    quick = script.plan(True)
    assert 0 < len(quick) <= len(cases) and {c.name for c in quick} <= set(cases)


def test_cases_pattern_and_list(capsys: pytest.CaptureFixture[str]) -> None:
    script = load("reductions")
    assert script.main(["--list", "--cases", r"^amax bf16 .* dim=0$"]) == 0
    names = capsys.readouterr().out.split("\n")
    assert [n for n in names if n] == ["amax bf16 524288x128 dim=0", "amax bf16 65536x1024 dim=0",
                                       "amax bf16 8192x8192 dim=0", "amax bf16 1024x65536 dim=0",
                                       "amax bf16 261120x257 dim=0", "amax bf16 130816x513 dim=0",
                                       "amax bf16 65472x1025 dim=0", "amax bf16 16376x4097 dim=0",
                                       "amax bf16 1328x50257 dim=0"]
    assert script.main(["--list", "--cases", "nothing-matches"]) == 1


@pytest.mark.parametrize(("argv", "message"), [
    (["--list", "--cases", "(amax"], "--cases: '(amax' is not a regular expression"),
    (["--dry-run", "--reps", "5"], "--reps: at least 100 for a reported figure, got 5"),
])
def test_bad_options_are_named(argv: list[str], message: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        load("reductions").main(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_every_dtype_and_peer_for_reductions() -> None:
    cases = load("reductions").plan(False)
    # and rows and columns of odd length, rows of widths no power of two
    assert len(cases) == 3 * 3 * 4 * 2 + 2 * 2 * 5 * 2 + 2 * 2 * 3
    assert {(c.params["op"], c.params["dtype"], c.params["dim"]) for c in cases} == {
        (op, dtype, dim) for op in ("sum", "amax", "amin") for dtype in ("f32", "f16", "bf16")
        for dim in (-1, 0)}
    assert not any(c.gaps for c in cases)  # torch.compile is a system of every case
    by_name = {c.name: c for c in cases}
    assert by_name["sum f32 524288x128 dim=-1"].traffic == ((1 << 26) + 524288) * 4
    assert by_name["amin bf16 524288x128 dim=0"].traffic == ((1 << 26) + 128) * 2
    assert by_name["sum bf16 1335x50257 dim=-1"].traffic == (1335 * 50257 + 1335) * 2
    assert by_name["amax f32 1328x50257 dim=0"].traffic == (1328 * 50257 + 50257) * 4
    assert by_name["sum bf16 87381x768 dim=-1"].traffic == (87381 * 768 + 87381) * 2


def test_elementwise_cases_and_traffic() -> None:
    script = load("elementwise")
    by_name = {c.name: c for c in script.plan(False)}
    assert len(by_name) == 345
    n = 1 << 24
    assert by_name["add f32 2^24"].traffic == 3 * 4 * n
    assert by_name["lt f32 2^24"].traffic == (4 + 4 + 1) * n
    assert by_name["where bf16 2^24"].traffic == (1 + 2 + 2 + 2) * n
    assert by_name["clamp i64 2^24"].traffic == 2 * 8 * n
    assert by_name["isnan f8e4m3 2^24"].traffic == 2 * n
    assert by_name["isnan i64 2^24"].traffic == n  # the output alone: no NaN to look for
    assert by_name["bias_add bf16 65536x4096"].traffic == (2 * 65536 * 4096 + 4096) * 2
    assert by_name["isnan f32 2^16"].outputs == "fresh"
    assert by_name["add f32 2^16"].outputs == "out="


def test_fused_cases_and_stated_gaps() -> None:
    script = load("fused")
    cases = script.plan(False)
    assert len(cases) == 5 * 2 * 5 + 5 * 2 * 7  # and each op's odd rows
    by_name = {c.name: c for c in cases}
    assert by_name["softmax bf16 65536x1024"].traffic == 2 * (128 << 20)
    assert by_name["log_softmax bf16 1335x50257"].traffic == 2 * 1335 * 50257 * 2
    assert by_name["softmax f32 4096x8191"].params["odd"]
    assert by_name["fused_add_rms_norm bf16 2097x32001"].traffic == 4 * 2097 * 32001 * 2 + \
        32001 * 2
    assert by_name["fused_add_rms_norm f32 128x262144"].traffic == 4 * (128 << 20) + 4 * 262144
    assert by_name["layer_norm bf16 16384x4096"].traffic == 2 * (128 << 20) + 2 * 2 * 4096
    assert by_name["fused_add_rms_norm bf16 65536x1024"].outputs == "in place"
    from tile_mlir import ops

    for c in cases:  # a missing op is a stated gap, never a missing row
        assert ("tile-mlir" in c.gaps) == (not hasattr(ops, c.params["op"]))


def test_fusion_states_a_missing_fuse(tmp_path: Path) -> None:
    script = load("fusion")
    from tile_mlir import ops

    (only,) = script.plan(False)
    assert only.traffic == 3 * (1 << 26) * 2
    assert [s.label for s in script.BENCH.systems] == [
        "tile-mlir unfused", "tile-mlir fused", "torch eager", "torch.compile"]
    if not hasattr(ops, "fuse"):
        assert only.gaps == {"tile-mlir": "ops.fuse not in this build"}
        script.main(["--dry-run", "--results", str(tmp_path)])
        assert "n/a: ops.fuse not in this build" in (tmp_path / "fusion-dry-run.md").read_text()


def test_launch_cost_dry_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = load("launch_cost")
    assert script.main(["--dry-run", "--results", str(tmp_path)]) == 0
    text = (tmp_path / "launch_cost-dry-run.md").read_text()
    assert "FAKE figures" in text and "| floor us (params) |" in text
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| ")]
    ops = {(r[0].removeprefix("| "), r[1], r[2]) for r in rows[1:] if r[1].startswith("2^")}
    for size in ("2^10", "2^16"):
        for op in script.ORDER:
            assert (op, size, "yes" if "in turn" in op else "no") in ops
        for op in ("add", "add scalar", "exp", "silu_and_mul", "rope_neox",
                   "add, 2 shapes in turn", "add, 3 shapes in turn"):
            assert (op, size, "yes") in ops  # with out= where the library has it
    with pytest.raises(SystemExit):
        script.main(["--dry-run", "--calls", "10", "--batches", "10"])  # under 3000 calls
    capsys.readouterr()


def test_launch_cost_row_with_a_failing_call() -> None:
    script = load("launch_cost")
    row = script.Row("add scalar", 1024, True, "AttributeError: 'float' object",
                     (5.0, 4.0, 6.0), None, 0.0, 4, 3.5)
    assert row.cells() == ["add scalar", "2^10", "yes", "n/a: AttributeError: 'float' object",
                           "5.00 (4.00-6.00)", "n/a", "n/a", "0", "3.50 (4)"]


def test_sizes_cases_and_traffic() -> None:
    script = load("sizes")
    cases = {c.name: c for c in script.plan(False)}
    assert len(cases) == 4 * 2 * 4
    assert cases["add f32 2^16"].traffic == 3 * 4 << 16 and cases["add f32 2^16"].outputs == "out="
    assert cases["silu bf16 2^22"].traffic == 2 * 2 << 22
    assert cases["sum bf16 2^20"].traffic == ((1 << 20) + (1 << 10)) * 2
    assert cases["sum f32 2^18"].outputs == "fresh"


def test_rows_ab_reads_cases_and_variants() -> None:
    """bench/rows_ab.py's arguments: OP:DTYPE:N cases and STRATEGY[:KEY=VALUE,...]
    variants as rows.Forced takes them; anything else refused naming what is wrong."""
    import argparse

    from tile_mlir.ops import rows

    script = load("rows_ab")
    assert script.parse_case("layer_norm:f32:65536") == ("layer_norm", "f32", 65536)
    assert script.parse_case("sum:bf16:1025") == ("sum", "bf16", 1025)
    strategy, options = script.parse_variant("cluster:ctas=8,ahead=16,lanes=1024")
    assert (strategy, options) == ("cluster", {"ctas": 8, "ahead": 16, "lanes": 1024})
    g = rows.Forced(strategy, **options).plan(512, 65536, 4).geometry
    assert (g.strategy, g.ctas, g.ahead, g.lanes) == ("cluster", 8, 16, 1024)
    assert script.parse_variant("cta") == ("cta", {})
    assert script.parse_variant("cta:lanes=64,stack=4") == ("cta", {"lanes": 64, "stack": 4})
    for bad, says in [("gelu:f32:8", "OP:DTYPE:N"), ("softmax:i32:8", "OP:DTYPE:N"),
                      ("softmax:f32", "OP:DTYPE:N"), ("softmax:f32:0", "OP:DTYPE:N")]:
        with pytest.raises(argparse.ArgumentTypeError, match=says):
            script.parse_case(bad)
    for bad, says in [("ring", "the strategy is one of"), ("cta:threads=4", "KEY=NUMBER"),
                      ("cluster:ctas=x", "KEY=NUMBER")]:
        with pytest.raises(argparse.ArgumentTypeError, match=says):
            script.parse_variant(bad)
    assert script.parse_setting("COPY_BYTES=1") == ("COPY_BYTES", 1)
    assert script.parse_setting("reduction.ROW_CTA_BYTES=65536") == \
        ("reduction.ROW_CTA_BYTES", 65536)
    from tile_mlir.ops.programs import reduction
    with script._setting("reduction.ROW_CTA_BYTES", 7):
        assert reduction.ROW_CTA_BYTES == 7
    assert reduction.ROW_CTA_BYTES == 1 << 15
    # a lowering's constant: its variant's kernels compiled afresh, none kept loaded
    from tile_mlir.lowering.schedules import reduction as schedule
    from tile_mlir.ops import kernels
    assert script.parse_setting("schedule.ROUND_VALUES=0") == ("schedule.ROUND_VALUES", 0)
    kernels._LOADED[("request", 0)] = None  # type: ignore[assignment]
    with script._setting("schedule.ROUND_VALUES", 0):
        assert schedule.ROUND_VALUES == 0 and not kernels._LOADED
    assert schedule.ROUND_VALUES == 32
    for bad, says in [("NOPE=1", "NAME is one of"), ("other.ROW_CTA_BYTES=1", "NAME is one"),
                      ("reduction.ROW_CTA_BYTES=x", "a Python literal")]:
        with pytest.raises(argparse.ArgumentTypeError, match=says):
            script.parse_setting(bad)


def test_an_ab_variant_calls_under_its_own_plans(device: Any) -> None:
    """harness.variant (the A/B scripts'): `run` once under the variant's planning, and a
    call that launches that variant's plan again outside it, whatever another variant
    planned for the same call since."""
    from contextlib import nullcontext

    import numpy as np

    from tile_mlir import ops
    from tile_mlir.ops import rows

    harness = load("harness")
    values = np.random.default_rng(7).standard_normal((4, 1025)).astype(np.float32)
    x = device.array(values, "f32")
    want = np.exp(values - values.max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    texts = []
    for planning in (rows.forced("cta", lanes=64), nullcontext()):  # the planner: 128
        got, call = harness.variant(planning, lambda: ops.softmax(x, dim=-1))
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-7)
        texts.append((device.launches[-1], call))
    assert not rows._forced  # the planning undone
    (forced, again_forced), (planned, again_planned) = texts
    assert forced != planned
    for text, call in ((forced, again_forced), (planned, again_planned), (forced, again_forced)):
        np.testing.assert_allclose(call().numpy(), want, rtol=1e-5, atol=1e-7)
        assert device.launches[-1] == text


def test_alibi_ab_variants_build_their_bodies(device: Any) -> None:
    """bench/alibi_ab.py: each variant's patch of bodies builds a kernel of its own (the
    division's PTX divides, the body's multiplies high), every one within an f32 ulp of
    float64 (the generators' test), and the patch undone after."""
    import numpy as np

    import tile_mlir
    from tile_mlir import ops
    from tile_mlir.op_table import bodies

    script = load("alibi_ab")
    main_body = bodies._divide_magic
    slopes = [2.0 ** (-8 * (h + 1) / 8) for h in range(8)] + \
        [2.0 ** (-(8 * h + 4) / 8) for h in range(4)]  # 12 heads: n = 8
    want = np.array(slopes)[:, None] * np.arange(37)
    like = device.array(np.zeros(1, np.float32))
    texts = {}
    for name, patch in script._variants().items():
        with script._patched(patch):
            got = ops.alibi(12, 37, like=like).numpy().astype(np.float64)
            assert np.abs(got - want).max() <= 2.0**-23 * np.abs(want).max(), name
            texts[name] = tile_mlir.compile(device.launches[-1], chip="sm_90",
                                            cache=False).ptx["kernels"]
        assert bodies._divide_magic is main_body
    assert texts["body"] == texts["body again"] != texts["division"]
    assert "mul.hi.u64" in texts["body"] and "mul.hi.u64" not in texts["division"]
