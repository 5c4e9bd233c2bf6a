"""The seeds' primitives on a GPU: matches float64 NumPy on fresh random inputs."""

from __future__ import annotations

import numpy as np
import pytest
from support.primitive_programs import PROGRAMS, Program, check_on_gpu


@pytest.mark.gpu
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_program_on_gpu(program: Program, rng: np.random.Generator) -> None:
    check_on_gpu(program, rng)
