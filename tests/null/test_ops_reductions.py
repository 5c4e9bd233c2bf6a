"""The reduction library: how calls become kernels (null tier: plans, and every kernel
compiles), and results against torch or float64 NumPy (gpu tier)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tile_mlir
from tile_mlir.ops import reductions
from tile_mlir.ops.reductions import Stage, normalize_dims, plan

SHAPES_AND_DIMS = [
    ((524288, 128), (1,)), ((8192, 8192), (1,)), ((1024, 65536), (1,)),
    ((524288, 128), (0,)), ((1024, 65536), (0,)), ((1, 1 << 26), (1,)),
    ((4, 6, 10), (0, 2)), ((3, 1, 5), (1,)), ((7,), (0,)), ((37, 129), (0, 1)),
    ((5, 300, 7), (1,)), ((1000, 3), (1,)),
]


def test_normalize_dims() -> None:
    assert normalize_dims(None, 3) == (0, 1, 2)
    assert normalize_dims(-1, 3) == (2,)
    assert normalize_dims((2, 0), 3) == (0, 2)
    with pytest.raises(ValueError, match="dim 3 is out of range for a 3-d tensor"):
        normalize_dims(3, 3)
    with pytest.raises(ValueError, match="names a dimension twice"):
        normalize_dims((1, -2), 3)
    with pytest.raises(TypeError, match="dim must be an int"):
        normalize_dims(1.5, 2)  # type: ignore[arg-type]


def test_plans_cut_long_rows_and_tall_columns_into_chunks() -> None:
    rows = plan((1, 1 << 26), "f32", (1,), "sum")
    assert [(s.a, s.r, s.b, s.chunks) for s in rows] == [(1, 1 << 26, 1, 512), (1, 512, 1, 1)]
    cols = plan((524288, 128), "bf16", (0,), "mean")
    assert [(s.src, s.dst, s.chunks) for s in cols] == [("bf16", "f32", 512), ("f32", "bf16", 1)]
    assert cols[0].scale is None and cols[1].scale == 1 / 524288  # a mean scales once, last
    assert len(plan((8192, 8192), "f32", (1,), "amax")) == 1


@pytest.mark.parametrize(("shape", "dims"), SHAPES_AND_DIMS, ids=str)
def test_every_stage_covers_its_tensor(shape: tuple[int, ...], dims: tuple[int, ...]) -> None:
    stages = plan(shape, "f32", dims, "sum")
    assert stages[0].a * stages[0].r * stages[0].b == math.prod(shape)
    kept = math.prod(s for i, s in enumerate(shape) if i not in dims)
    last = stages[-1]
    assert last.a * last.b == kept and last.chunks == 1


@pytest.mark.parametrize("stage", sorted({s for shape, dims in SHAPES_AND_DIMS if
                                          math.prod(shape) < 1 << 22 for s in
                                          plan(shape, "bf16", dims, "mean")},
                                         key=str), ids=str)
def test_stage_kernels_compile(stage: Stage) -> None:
    program = tile_mlir.compile(stage.mlir(), name="reduction stage")
    assert program.cubin["kernels"][:4] == b"\x7fELF"


def test_bad_arguments_name_them() -> None:
    with pytest.raises(TypeError, match="x must be a torch tensor, a CuPy array or a NumPy"):
        reductions.sum([1.0, 2.0])
    with pytest.raises(TypeError, match="x has element type int32"):
        reductions.sum(np.zeros(4, np.int32))
    with pytest.raises(ValueError, match="dim 2 is out of range"):
        reductions.amax(np.zeros((2, 2), np.float32), dim=2)


def test_empty_reductions_follow_torch() -> None:
    empty = np.zeros((3, 0), np.float32)
    np.testing.assert_array_equal(reductions.sum(empty, dim=1), np.zeros(3))
    np.testing.assert_array_equal(reductions.prod(empty, dim=1), np.ones(3))
    assert np.isnan(reductions.mean(empty, dim=1)).all()
    with pytest.raises(ValueError, match="amax\\(\\) of an empty selection"):
        reductions.amax(empty, dim=1)
    assert reductions.sum(empty, dim=0).shape == (0,)
