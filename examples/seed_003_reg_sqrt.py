"""Seed 003 (TIRx elementwise -> reg): a warp takes the sqrt of a 32x8 f32 register tile
with layout S[(32, 8):(1@laneid, 1)]: lane i holds row i in 8 registers. A goes to shared
memory, into registers, through sqrt (a loop over each lane's 8 registers), back to
shared memory and out to B.
"""

from __future__ import annotations

import sys

import numpy as np
from _example import header, main

import tile_mlir.lang as tl


@tl.kernel(threads=32)
def reg_sqrt(A: tl.Tensor["f32", (32, 8)], B: tl.Tensor["f32", (32, 8)]):
    tl.grid(1)
    A_smem = tl.alloc_shared((32, 8), tl.f32)
    tl.warp.copy(A_smem, A)
    R = tl.alloc_reg((32, 8), tl.f32, "S[(32, 8):(1@laneid, 1)]")  # lane i: row i
    tl.warp.copy(R, A_smem)
    tl.warp.sqrt(R, R)  # elementwise -> reg
    tl.warp.copy(A_smem, R)
    tl.warp.copy(B, A_smem)


ARGS = (tl.ArrayDesc("f32", (32, 8)),) * 2
"""The arguments the printed IR is specialized for (descriptions: no memory)."""


def ir_text() -> str:
    return header(__doc__, "seed_003_reg_sqrt") + reg_sqrt.ir(*ARGS)


def run(rng: np.random.Generator) -> float:
    """sqrt of a NumPy tile, which must be correctly rounded (sqrt.rn)."""
    a = rng.uniform(0.0, 100.0, (32, 8)).astype(np.float32)
    b = np.full((32, 8), np.nan, np.float32)
    reg_sqrt(a, b)
    expected = np.sqrt(a.astype(np.float64))
    error = np.abs(b - expected)
    assert (error <= 2.0 ** -24 * expected).all(), f"max error {error.max()}"
    return float(error.max())


if __name__ == "__main__":
    sys.exit(main("seed_003_reg_sqrt", ir_text, run))
