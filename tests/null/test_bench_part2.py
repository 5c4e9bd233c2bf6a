"""bench/part2.py's pure-Python side, no GPU: the case list, the table, the notes with
the silu_and_mul bar, and the files it writes."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def part2() -> Any:
    spec = importlib.util.spec_from_file_location("bench_part2", ROOT / "bench" / "part2.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _args(part2: Any, *argv: str) -> Any:
    parser_args = ["--dry-run", *argv]
    captured: dict[str, Any] = {}
    original = part2.plan

    def spy(args: Any) -> Any:
        captured["args"] = args
        return original(args)

    part2.plan = spy
    try:
        part2.main(parser_args)
    finally:
        part2.plan = original
    return captured["args"]


def test_plans_every_group(part2: Any, capsys: pytest.CaptureFixture[str]) -> None:
    cases = part2.plan(_args(part2))
    assert "139 cases" in capsys.readouterr().out
    groups = {c.group for c in cases}
    assert groups == {"gated", "activation", "dropout", "generative"}
    assert {c.op for c in cases if c.group == "activation"} == set(part2.ACTIVATIONS)
    assert len(part2.ACTIVATIONS) == 14
    bar = part2.Case("gated", "silu_and_mul", "bf16", (8192, 2 * 14336))
    assert bar in cases and bar in part2.plan(_args(part2, "--quick"))


def test_table_and_notes(part2: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bar = part2.Case("gated", "silu_and_mul", "bf16", (8192, 2 * 14336))
    done = part2.Result(bar, bytes=3 * 8192 * 14336 * 2,
                        seconds={"tile_mlir": 230e-6, "torch": 680e-6, "inductor": 240e-6},
                        how={"tile_mlir": "graph", "torch": "graph", "inductor": "loop"})
    missing = part2.Result(part2.Case("activation", "mish", "f32", (1 << 26,)),
                           errors={"tile_mlir": "tile_mlir.ops has no mish"})
    rows = part2.table([done, missing])
    assert rows[2] == ("| gated | silu_and_mul | bf16 | 8192x28672 | 705 | 3.06 | 1.04 | "
                       "2.94* | 1.04x |")
    assert rows[3] == "| activation | mish | f32 | 2^26 | 0 | n/a | n/a | n/a | n/a |"
    notes = part2.notes([done, missing])
    assert "- mish (tile_mlir): tile_mlir.ops has no mish" in notes
    assert notes[-1] == ("- bar: silu_and_mul bf16 8192x14336 >= 3.0 TB/s (H100): "
                         "3.06 TB/s: met")

    monkeypatch.setattr(part2, "RESULTS", tmp_path)
    text = part2.report([done, missing], "NVIDIA H100 80GB HBM3", "--quick", "2.11", 12.0)
    stem = part2.write([done, missing], text, "NVIDIA H100 80GB HBM3")
    assert stem.name == "part2-nvidia-h100-80gb-hbm3"
    assert stem.with_suffix(".md").read_text().startswith("# Part 2 ops on NVIDIA H100")
    saved = json.loads(stem.with_suffix(".json").read_text())
    assert saved[0]["case"]["op"] == "silu_and_mul" and saved[0]["tbps"]["tile_mlir"] > 3.0
