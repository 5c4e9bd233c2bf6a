"""bench/part2.py on the harness, no GPU: the case list (every group, the 14
activations, the silu_and_mul bar in --quick too) and the traffic counted by hand."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def part2() -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("bench_part2", BENCH / "part2.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_plans_every_group(part2: ModuleType) -> None:
    cases = part2.plan(False)
    assert len(cases) == 139
    assert {c.params["group"] for c in cases} == {"gated", "activation", "dropout", "generative"}
    activations = {c.params["op"] for c in cases if c.params["group"] == "activation"}
    assert activations == set(part2.ACTIVATIONS) and len(activations) == 14
    sizes = {c.params["shape"][0] for c in cases if c.params["group"] == "activation"}
    assert sizes == {1 << 24, 1 << 26, 1 << 28}
    bar = "gated silu_and_mul bf16 8192x28672"
    assert bar in {c.name for c in cases} and bar in {c.name for c in part2.plan(True)}


def test_traffic(part2: ModuleType) -> None:
    by_name = {c.name: c for c in part2.plan(False)}
    assert by_name["gated silu_and_mul bf16 8192x28672"].traffic == 3 * 8192 * 14336 * 2
    assert by_name["activation relu f16 2^28"].traffic == 2 * 2 * (1 << 28)
    assert by_name["activation prelu f32 2^24"].traffic == 2 * 4 * (1 << 24) + 4
    assert by_name["dropout dropout bf16 2^26"].traffic == 2 * 2 * (1 << 26)
    assert by_name["generative sinusoidal f32 16384x4096"].traffic == 16384 * 4096 * 4


def test_bar_in_the_notes(part2: ModuleType) -> None:
    assert any("silu_and_mul bf16 8192x28672 >= 3.0 TB/s" in n for n in part2.BENCH.notes)
