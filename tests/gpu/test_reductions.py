"""tile.reduce on a GPU: matches float64 NumPy on fresh random inputs (poisoned outputs,
NaN inputs)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.reduction_programs import REDUCTIONS, Reduce

import tile_mlir
from tile_mlir.dtypes import DTYPES

SEED_001 = Path(__file__).resolve().parents[2] / "examples" / "seed_001_shared_sum.mlir"


@pytest.mark.gpu
@pytest.mark.parametrize("case", REDUCTIONS, ids=lambda c: c.id)
def test_reduction_on_gpu(case: Reduce, rng: np.random.Generator) -> None:
    kernel = tile_mlir.compile(case.mlir(), name=case.id).kernel("k")
    src, old = case.inputs(rng)
    out = old.copy() if case.accum else \
        np.full(case.out_shape, np.nan, DTYPES[case.dst_dtype].np_dtype())
    kernel(src, out)
    expected = case.reference(src, old)
    got = out.astype(np.float64)
    assert (np.isnan(got) == np.isnan(expected)).all(), "NaN where torch has none, or lost"
    error = np.where(np.isnan(expected), 0.0, np.abs(got - expected))
    print(f"{case.id}: {got.size} outputs, max |error| {error.max():.3g}")
    assert (error <= case.tolerance(src)).all(), f"max |error| {error.max():.3g}"


@pytest.mark.gpu
def test_seed_001_on_gpu(rng: np.random.Generator) -> None:
    a = rng.uniform(-4, 4, (4, 8)).astype(np.float32)
    b = np.full(4, np.nan, np.float32)
    tile_mlir.compile(SEED_001).kernel("test_reduction")(a, b)
    # f32 sums of 8: each addition rounds by at most 2^-24 of the running magnitude (a
    # relative bound fails where the row's values cancel)
    bound = 8 * 2.0**-24 * np.abs(a.astype(np.float64)).sum(axis=1)
    error = np.abs(b.astype(np.float64) - a.astype(np.float64).sum(axis=1))
    assert (error <= bound).all(), (error, bound)


@pytest.mark.gpu
def test_48_thread_sum_sees_every_lane() -> None:
    """TileLang dropped lanes 32..47 of a 48-thread sum (528 instead of 1176)."""
    case = next(c for c in REDUCTIONS if c.id == "sum-48-threads")
    out = np.full(1, np.nan, np.float32)
    tile_mlir.compile(case.mlir()).kernel("k")(np.arange(1, 49, dtype=np.float32), out)
    assert out[0] == 1176.0
