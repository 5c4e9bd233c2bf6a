"""gpu tier: the autotuner's candidates on the GPU (tune.py). Each candidate's call must
run the op under that candidate's own plan (the plan cache swapped before the call, so
the fast path a user's call takes) and give the op's result; a candidate that cannot
run is logged and left out; every candidate that ran is timed (timing.DeviceTimer) and
nothing is left forced or planned. Odd sizes included (a tail past the last full vector).

    source .stage/mlir/env.sh && python3 -m pytest -m gpu tests/gpu/test_ops_tune.py
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tile_mlir.ops import entry, strategy, tune
from tile_mlir.ops.programs.elementwise import Strategy

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

CHOICES = [Strategy(256, 1, 1, 1), Strategy(128, 16, 1, 1), Strategy(512, 16, 2, 2),
           Strategy(256, 16, 8, 8), Strategy(256, 8, 2, 2), Strategy(128, 8, 1, 1)]
BROKEN = Strategy(4096, 16, 1, 1)  # more threads than a CTA may have


def _reference(op: str, args: list[Any]) -> np.ndarray:
    """The op of the tuner's arguments in float64 (softplus: beta 1, threshold 20, the
    defaults the tuner leaves them at; silu_and_mul: one (M, 2N) input)."""
    host = [np.asarray(a.float().cpu(), np.float64) for a in args]
    x = host[0]
    if op == "add":
        return x + host[1]
    if op == "softplus":
        return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))
    if op == "silu_and_mul":
        n = x.shape[-1] // 2
        gate, up = x[..., :n], x[..., n:]
        result: np.ndarray = gate / (1 + np.exp(-gate)) * up
        return result
    assert op == "exp", op
    return np.exp(x)


@pytest.mark.parametrize(("op", "dtype", "numel"), [("add", "f32", (1 << 16) + 3),
                                                    ("exp", "bf16", 5 * 4099),
                                                    ("add", "bf16", 1 << 18)])
def test_every_candidate_runs_its_own_plan(op: str, dtype: str, numel: int) -> None:
    log: list[str] = []
    args, calls = tune.candidate_calls(op, dtype, numel, [*CHOICES, BROKEN], log.append)
    assert list(calls) == CHOICES
    assert len(log) == 1 and "4096x1" in log[0] and "failed" in log[0]
    assert not strategy._forced  # nothing left forced
    expected = _reference(op, args)
    tolerance = (2.0 ** -23 if dtype == "f32" else 2.0 ** -8) * (1 + 2.0 ** -10)  # half an ulp
    launchers = set()
    for call in calls.values():
        entry.PLANS.clear()
        out = call()
        assert len(entry.PLANS) == 1  # the fast path found the candidate's plan
        launchers.add(next(iter(entry.PLANS.values())))
        got = np.asarray(out.float().cpu(), np.float64)
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=tolerance, atol=0)
    assert len(launchers) == len(CHOICES)  # a plan of its own per candidate
    entry.PLANS.clear()


def test_every_candidate_is_timed_and_nothing_is_left_behind() -> None:
    log: list[str] = []
    timings = tune.time_candidates("add", "f32", 1 << 20, CHOICES, log.append)
    assert set(timings) == set(CHOICES) and not log
    assert all(1e-7 < t < 1e-3 for t in timings.values())
    assert not entry.PLANS and not strategy._forced


@pytest.mark.parametrize(("op", "dtype", "numel", "shapes"),
                         [("silu_and_mul", "bf16", 3 * tune.GATED_WIDTH,
                           [(3, 2 * tune.GATED_WIDTH)]),
                          ("silu_and_mul", "f32", 1000, [(1, 2000)]),
                          ("softplus", "f16", 4099, [(4099,)])])
def test_gated_ops_and_scalar_parameters_are_tuned_on_their_own_arguments(
        op: str, dtype: str, numel: int, shapes: list[tuple[int, ...]]) -> None:
    """A gated op is timed on one (M, 2N) input; softplus on its tensor alone (beta and
    threshold at their defaults): every candidate runs and gives the op's result."""
    log: list[str] = []
    args, calls = tune.candidate_calls(op, dtype, numel, CHOICES, log.append)
    assert [tuple(a.shape) for a in args] == shapes
    assert list(calls) == CHOICES and not log
    expected = _reference(op, args)
    rtol = {"bf16": 2.0 ** -8, "f16": 2.0 ** -10, "f32": 2.0 ** -20}[dtype]
    for call in calls.values():
        entry.PLANS.clear()
        got = np.asarray(call().float().cpu(), np.float64)
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=1e-6)
    entry.PLANS.clear()
