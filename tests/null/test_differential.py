"""null tier: the random differential test (support/differential.py) on the pretend device.

The same generator as the gpu tier's tests/gpu/test_differential.py, with small
arrays, against float64 NumPy: the registry's references after torch's type
promotion for the elementwise ops (exact ones bit for bit, the others within
docs/ops-accuracy.md's bounds), the Philox reference for dropout, the float64
formulas for RoPE, ALiBi and sinusoidal encodings. Arrays are fake torch tensors
(the library's torch paths, its fast path) or plain pretend-device arrays. The
reductions are left to the gpu tier (the emulator runs no shuffles or shared memory).

    TILE_MLIR_DIFF_CASES=150    cases in a run (default 150)
    TILE_MLIR_DIFF_SEED=<seed>  replay a run (the seed is printed, and in every failure)
    TILE_MLIR_DIFF_ONLY=<i>     run case i of that run alone

The generator itself is tested here too: deterministic per seed, every family, op,
view kind and form of out= drawn over a run, views laid out as NumPy lays them out.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from support import differential, fake_torch
from support.differential import NULL, Array, Case, Number, Out, View, draw
from support.emulated import Device

from tile_mlir.dtypes import DTYPES

SEED = differential.run_seed()
COUNT = differential.case_count(150)
ONLY = differential.only()
RAN: dict[str, tuple[int, int, float]] = {}  # family: cases run, kernels, seconds


@pytest.fixture
def torch(device: Device, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A stand-in torch whose tensors live on the pretend device."""
    yield from fake_torch.installed(device, monkeypatch)


@pytest.mark.parametrize("family", NULL.families)
def test_family(family: str, device: Device, torch: Any,
                request: pytest.FixtureRequest) -> None:
    request.node.user_properties.append(("seed", SEED))
    start = time.perf_counter()
    backend = differential.NullBackend(device, torch)
    ran, failures = differential.run_family(NULL, SEED, COUNT, family, backend=backend,
                                            reference=differential.NumpyReference(), one=ONLY)
    kernels = len(set(device.launches))
    RAN[family] = (ran, kernels, time.perf_counter() - start)
    print(f"seed {SEED}: {ran} {family} cases, {len(failures)} differ, {kernels} kernels, "
          f"{time.perf_counter() - start:.1f} s")
    assert not failures, differential.report(NULL, SEED, COUNT, family, ran=ran, failures=failures)


def test_run_summary() -> None:
    """The whole run (after the families): every case ran in one family."""
    if set(RAN) != set(NULL.families):
        pytest.skip("the totals need every family's test")
    cases, kernels, seconds = (sum(v[n] for v in RAN.values()) for n in range(3))
    print(f"seed {SEED}: {cases} cases, {kernels} kernels, {seconds:.1f} s")
    assert cases == (COUNT if ONLY is None else 1)


# ------------------------------------------------------------- the generator


def _cases(seed: int, count: int = 600) -> list[Case]:
    return [draw(differential.GPU, seed, i) for i in range(count)]


def test_deterministic_per_seed() -> None:
    first, again = _cases(7, 200), _cases(7, 200)
    assert [c.describe() for c in first] == [c.describe() for c in again]
    other = _cases(8, 200)
    assert sum(a != b for a, b in zip(first, other, strict=True)) > 150
    alone = draw(differential.GPU, 7, 123)
    assert alone == first[123]  # a case replays without the ones before it


def _arrays(case: Case) -> list[Array]:
    found = [a for a in [*case.args, *dict(case.kwargs).values()] if isinstance(a, Array)]
    return found


def test_a_run_covers_every_family_op_view_and_out() -> None:
    cases = _cases(SEED)
    families = collections.Counter(c.family for c in cases)
    assert set(families) == set(differential.FAMILIES), families
    every_op = {op for family in differential.FAMILIES for op in differential.family_ops(family)}
    seen = {c.op for c in cases}
    assert len(seen) >= 0.9 * len(every_op), sorted(every_op - seen)
    kinds = collections.Counter(k for c in cases for a in _arrays(c) for k in a.view.kinds)
    assert set(kinds) == set(differential.VIEW_KINDS), kinds
    outs = collections.Counter(c.out.kind for c in cases if c.out is not None)
    assert set(outs) == {"fresh", "inplace", "overlap", "interleaved", "expanded"}, outs
    expects = collections.Counter(c.expect for c in cases)
    assert set(expects) == set(differential.EXPECTS), expects
    ranks = {len(a.shape) for c in cases for a in _arrays(c)}
    assert ranks >= {0, 1, 2, 3, 4}
    assert any(isinstance(a, differential.Number) for c in cases for a in c.args)
    assert any(isinstance(a, differential.Same) for c in cases for a in c.args)
    dtypes = {a.dtype for c in cases for a in _arrays(c)}
    assert dtypes >= {"f32", "f16", "bf16", "f8e4m3", "f8e5m2", "i32", "i64", "bool"}
    print(f"seed {SEED}: {dict(families)}; views {dict(kinds)}; out {dict(outs)}; "
          f"{dict(expects)}")


def test_every_op_over_a_few_runs() -> None:
    every_op = {op for family in differential.FAMILIES for op in differential.family_ops(family)}
    seen = {c.op for seed in range(3) for c in _cases(seed)}
    assert seen == every_op, sorted(every_op - seen)


def test_sizes_stay_within_the_budget() -> None:
    for tier in (differential.GPU, NULL):
        for i in range(300):
            case = draw(tier, SEED, i)
            for a in _arrays(case):  # (a RoPE cache is read a row per token)
                if a.role != "cache":
                    assert np.prod(a.shape) <= 2 * tier.budget, (case.describe(), tier.name)


def test_views_are_laid_out_as_numpy_slices_them() -> None:
    """A view's layout (what the pretend device gets) against NumPy's own slicing of the
    storage (what the references read)."""
    rng = np.random.default_rng(SEED)
    for _ in range(300):
        shape = differential.draw_shape(rng, 4096)
        view = differential.draw_view(rng, shape, unit_last=bool(rng.random() < 0.3))
        storage = np.arange(view.size)
        values = view.of(storage)
        layout_shape, strides, offset = view.layout()
        assert values.shape == shape == layout_shape, view
        if values.size:
            by_layout = np.lib.stride_tricks.as_strided(
                storage[offset:], shape, tuple(s * storage.itemsize for s in strides))
            np.testing.assert_array_equal(by_layout, values)
            covered = np.zeros(view.size, bool)
            covered[values.reshape(-1)] = True
            np.testing.assert_array_equal(covered, view.covered())


def test_promotion_follows_torch_result_type() -> None:
    """The test's own torch.result_type against torch's documented cases."""
    result_type = differential.result_type
    t, z, n = differential.TENSOR, differential.ZERO_DIM, differential.NUMBER
    assert result_type([("i32", t), ("f32", n)]) == "f32"
    assert result_type([("f16", t), ("f32", z)]) == "f16"
    assert result_type([("i32", t), ("i64", z)]) == "i32"
    assert result_type([("i32", t), ("f16", z)]) == "f16"
    assert result_type([("bool", t), ("i64", n)]) == "i64"
    assert result_type([("f16", t), ("bf16", t)]) == "f32"
    assert result_type([("i32", t), ("bf16", t)]) == "bf16"
    assert result_type([("bool", z), ("f32", n)]) == "f32"


def test_replay_names_the_seed_and_case() -> None:
    case = draw(NULL, 1234, 17)
    assert "TILE_MLIR_DIFF_SEED=1234 TILE_MLIR_DIFF_ONLY=17" in case.replay()
    assert case.describe().startswith("case 17: ")


def test_a_product_past_its_types_range_is_its_infinity_or_zero() -> None:
    """A broadcast input (one value repeated thousands of times) takes a product past the
    result type's range: f16's infinity above 65504, 0 below its smallest step (torch's
    answers too); a long f32 product may be off by one rounding per factor, no more."""
    def error(dtype: str, got: float, want: float, count: int) -> str:
        return differential._reduction_error(
            "prod", dtype, np.array([got], np.float64).astype(np.float32), np.array([want]),
            magnitude=np.array([abs(want)]), count=count)

    assert error("f16", np.inf, 1.34e12, 4099) == ""
    assert error("f16", 0.0, 9.6e-15, 45056) == ""
    assert error("f16", 65504.0, 1.34e12, 4099) != ""  # a finite answer is wrong
    assert error("f32", 8.766714960974752e23, 8.76698360845796e23, 4576) == ""
    assert error("f32", 8.7e23, 8.76698360845796e23, 4576) != ""


def test_a_subtraction_with_a_bool_is_expected_to_fail() -> None:
    """sub with a bool array or a Python bool: torch raises, so must the library; with
    neither, the case stays one to compute."""
    plain = Case("gpu", 1, 0, "binary_arith", "sub", "i32", row="sub",
                              args=(Array("i32", View((4,))), Number(3)))
    assert differential._bool_subtraction(plain).expect == "ok"
    for args in ((Array("i32", View((4,))), Number(True)),
                 (Array("bool", View((4,))), Array("i32", View((4,))))):
        case = differential._bool_subtraction(replace(plain, args=args))
        assert case.expect == "error" and "bool" in case.why
    added = replace(plain, op="add", row="add", args=(Array("i32", View((4,))), Number(True)))
    assert differential._bool_subtraction(added).expect == "ok"


def test_a_fresh_out_wider_than_the_computation_is_compared_in_the_narrower_type() -> None:
    """pow(bf16, 3.0, out=f32) computes in bf16 and casts: its bounds are bf16 ulps; a
    narrower out= (f32 computed, bf16 written) is compared in its own type."""
    x = Array("bf16", View((4,)))
    case = Case("gpu", 1, 0, "binary_arith", "pow", "bf16", row="pow",
                             args=(x, Number(3.0)), out=Out("fresh", "f32", View((4,))))
    assert differential.computed_in(case, "f32") == "bf16"
    assert differential.computed_in(replace(case, out=None), "bf16") == "bf16"
    f32 = replace(case, dtype="f32", args=(Array("f32", View((4,))), Number(3.0)),
                  out=Out("fresh", "bf16", View((4,))))
    assert differential.computed_in(f32, "bf16") == "bf16"
    assert set(differential.MANTISSA) == {n for n, d in DTYPES.items() if d.is_float}


def test_a_truncating_division_by_a_number_multiplies_by_its_float32_reciprocal() -> None:
    """div(x, b, rounding_mode="trunc") with a Python number: torch's kernel (and the
    library) truncate x * (1/b in float32); a quotient of 2^24 and more shows it."""
    from support import ops_check

    x = np.array([4.736175e37, -12.25, 7.0, 3.4e9], np.float32)
    b = 7.184750323709557
    got = ops_check.expected(ops_check.Case("div_trunc", "f32", ((4,), None)), [x, b])
    want = np.trunc(x * (np.float32(1.0) / np.float32(b)))
    assert np.array_equal(got, want)
    assert not np.array_equal(got, np.trunc(x / np.float32(b)))
