"""The seeds' primitives in both tiers: each program compiles (ptxas accepts it) on
any machine and, on a GPU, matches float64 NumPy on fresh random inputs."""

from __future__ import annotations

import pytest
from support.primitive_programs import PROGRAMS, Program

import tile_mlir


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_program_compiles(program: Program) -> None:
    compiled = tile_mlir.compile(program.mlir, name=program.name)
    assert compiled.cubin["kernels"][:4] == b"\x7fELF"
    assert ".local" not in compiled.ptx["kernels"], "register tiles spilled to local memory"
