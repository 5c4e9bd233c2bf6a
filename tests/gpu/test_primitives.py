"""The seeds' primitives on a GPU: matches float64 NumPy on fresh random inputs."""

from __future__ import annotations

import numpy as np
import pytest
from support.cases import ulp_distance
from support.primitive_programs import PROGRAMS, Program

import tile_mlir
from tile_mlir.dtypes import DTYPES


@pytest.mark.gpu
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_program_on_gpu(program: Program, rng: np.random.Generator) -> None:
    kernel = tile_mlir.compile(program.mlir, name=program.name).kernel(program.kernel)
    inputs = program.inputs(rng)
    expected = program.expected(*(np.asarray(a, np.float64) for a in inputs))
    if program.in_place:
        assert isinstance(inputs[0], np.ndarray)
        out = inputs[0].copy()
        kernel(out)
    else:
        out = np.full(program.out_shape, np.nan, DTYPES[program.dtype].np_dtype())
        kernel(*inputs, out)
    assert not np.isnan(out.astype(np.float64)).any(), "elements never written"
    ulps = ulp_distance(out, expected, program.dtype)
    print(f"{program.name}: {out.size} elements, max {int(ulps.max())} ulp")
    assert ulps.max() <= program.ulps, (
        f"max error {int(ulps.max())} ulp at {np.unravel_index(ulps.argmax(), ulps.shape)}")
