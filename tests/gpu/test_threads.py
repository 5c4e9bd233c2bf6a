"""Thread counts that do not divide evenly, on a GPU (support/thread_programs.py): CTAs
of 1 to 1000 threads, partial last warps, 3-D blocks, reductions whose thread groups
do not divide the threads, against float64 NumPy on fresh random inputs with poisoned
outputs. The null tier runs the same programs on the CPU's SIMT emulator."""

from __future__ import annotations

import numpy as np
import pytest
from support.cases import ulp_distance
from support.primitive_programs import Program, check_on_gpu
from support.reduction_programs import Reduce
from support.thread_programs import LANG_BLOCKS, PROGRAMS, REDUCTIONS, lang_seed_000

import tile_mlir
from tile_mlir.dtypes import DTYPES


@pytest.mark.gpu
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_program_on_gpu(program: Program, rng: np.random.Generator) -> None:
    check_on_gpu(program, rng)


@pytest.mark.gpu
@pytest.mark.parametrize("case", REDUCTIONS, ids=lambda c: c.id)
def test_reduction_on_gpu(case: Reduce, rng: np.random.Generator) -> None:
    kernel = tile_mlir.compile(case.mlir(), name=case.id).kernel("k")
    src, old = case.inputs(rng)
    out = np.full(case.out_shape, np.nan, DTYPES[case.dst_dtype].np_dtype())
    kernel(src, out)
    expected = case.reference(src, old)
    got = out.astype(np.float64)
    assert (np.isnan(got) == np.isnan(expected)).all(), "NaN where there is none, or lost"
    error = np.where(np.isnan(expected), 0.0, np.abs(got - expected))
    assert (error <= case.tolerance(src)).all(), f"max |error| {error.max():.3g}"


@pytest.mark.gpu
@pytest.mark.parametrize("block", LANG_BLOCKS, ids=str)
def test_seed_000_from_python_at_odd_blocks(block: int | tuple[int, int, int],
                                            rng: np.random.Generator) -> None:
    """Seed 000's kernel written with tile_mlir.lang at blocks that are not whole warps
    (the 100-thread CTA that tile-verify accepts), launched through the runtime."""
    a = rng.uniform(0.0, 100.0, (32, 32)).astype(np.float32)
    expected = np.sqrt(a.astype(np.float64))
    lang_seed_000(block)(a)
    assert ulp_distance(a, expected, "f32").max() == 0
