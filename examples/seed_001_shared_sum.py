"""Seed 001 (TIRx reduction -> shared): a 32-thread CTA reduces each row of a 4x8 f32
shared tile (axis -1) to a 4-vector. Groups of min(next_pow2(8), 32, 32) = 8 lanes, one
row each: each lane loads one element, three xor shuffles (masks 1, 2 and 4, width 8)
fold the row, and lane 0 of each group writes.
"""

from __future__ import annotations

import sys

import numpy as np
from _example import header, main

import tile_mlir.lang as tl


@tl.kernel(threads=32)
def test_reduction(A: tl.Tensor["f32", (4, 8)], B: tl.Tensor["f32", (4,)]):
    tl.grid(1)
    A_smem = tl.alloc_shared((4, 8), tl.f32)
    B_smem = tl.alloc_shared((4,), tl.f32)
    tl.cta.copy(A_smem, A)
    tl.cta.sum(B_smem, A_smem, axes=(-1,))  # reduction -> shared
    tl.cta.copy(B, B_smem)


ARGS = (tl.ArrayDesc("f32", (4, 8)), tl.ArrayDesc("f32", (4,)))
"""The arguments the printed IR is specialized for (descriptions: no memory)."""


def ir_text() -> str:
    return header(__doc__, "seed_001_shared_sum") + test_reduction.ir(*ARGS)


def run(rng: np.random.Generator) -> float:
    """Row sums of a NumPy tile: within f32 rounding of 7 additions."""
    a = rng.standard_normal((4, 8)).astype(np.float32)
    b = np.full(4, np.nan, np.float32)
    test_reduction(a, b)
    expected = a.astype(np.float64).sum(axis=-1)
    error = np.abs(b - expected)
    bound = 8 * 2.0 ** -24 * np.abs(a.astype(np.float64)).sum(axis=-1)
    assert (error <= bound).all(), f"max error {error.max()}"
    return float(error.max())


if __name__ == "__main__":
    sys.exit(main("seed_001_shared_sum", ir_text, run))
