"""gpu tier: every elementwise case run on the GPU against a float64 NumPy reference.

Outputs are poisoned with NaN before each run, so an element the kernel never
wrote shows up; elements outside the op's tile must stay poisoned.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.cases import CASES, Case, allowed_ulps, ulp_distance

import tile_mlir
from tile_mlir.dtypes import DTYPES

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_elementwise_case(case: Case, rng: np.random.Generator) -> None:
    kernel = tile_mlir.compile(case.mlir(), name=case.id).kernel("kernel")
    inputs = case.inputs(rng)
    out = np.full(case.full_shape, np.nan, DTYPES[case.dtype].np_dtype())
    kernel(*inputs, out)
    got, expected = case.tile_of(out), case.reference(inputs)
    unwritten = np.isnan(got.astype(np.float64)) & ~np.isnan(expected)
    assert not unwritten.any(), f"{unwritten.sum()} of {got.size} elements never written"
    ulps = ulp_distance(got, expected, case.dtype)
    print(f"{case.id}: {got.size} elements, max {int(ulps.max())} ulp")
    assert ulps.max() <= allowed_ulps(case.op, case.dtype), (
        f"max error {int(ulps.max())} ulp at {np.unravel_index(ulps.argmax(), ulps.shape)}")
    untouched = np.ones(case.full_shape, bool)
    case.tile_of(untouched)[...] = False
    assert np.isnan(out.astype(np.float64)[untouched]).all(), "wrote outside the tile"


def test_vector_add_example(rng: np.random.Generator) -> None:
    program = tile_mlir.compile(EXAMPLES / "vector_add.mlir")
    a, b = (rng.standard_normal(1 << 20).astype(np.float32) for _ in range(2))
    c = np.full(1 << 20, np.nan, np.float32)
    program.kernel("vector_add")(a, b, c)
    expected = (a.astype(np.float64) + b.astype(np.float64)).astype(np.float32)
    print(f"vector_add: {c.size} elements, {np.count_nonzero(c != expected)} mismatches")
    np.testing.assert_array_equal(c, expected)


def test_device_buffers_and_pointers(rng: np.random.Generator) -> None:
    """The same kernel on DeviceBuffers and on raw device pointers."""
    from tile_mlir.runtime import DeviceBuffer

    case = Case("mul", (1000,), block=128)
    kernel = tile_mlir.compile(case.mlir()).kernel("kernel")
    a, b = (rng.standard_normal(1000).astype(np.float32) for _ in range(2))
    with DeviceBuffer.from_array(a) as da, DeviceBuffer.from_array(b) as db, \
            DeviceBuffer.from_array(np.full(1000, np.nan, np.float32)) as dc:
        kernel(da, db.ptr, dc)
        np.testing.assert_array_equal(dc.numpy(), (a * b).astype(np.float32))
