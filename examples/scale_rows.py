"""y = x * s for an f16 matrix and an f32 scalar s: CTAs of 128 threads, each taking
ROWS = 8 rows. M and N are specialized (static=): for 1000 x 1003 (this IR) 125 CTAs;
the rows are contiguous, so each CTA's tile is one run of 8024 halves, 1003 vectors of
8 (16 bytes), every CTA's start 16-byte aligned. The product is computed in f32 (s
keeps its precision), then rounded to f16.
"""

from __future__ import annotations

import sys

import numpy as np
from _example import header, main

import tile_mlir.lang as tl


@tl.kernel(threads=128, static=("M", "N"))
def scale_rows(x: tl.Tensor["f16", ("M", "N")], s: tl.f32, y: tl.Tensor["f16", ("M", "N")],
               ROWS: tl.constexpr = 8):
    m, _ = y.shape
    tl.static_assert(m % ROWS == 0, f"M = {m} is not a multiple of ROWS = {ROWS}")
    tl.grid(m // ROWS)
    rows = tl.ds(tl.block_id() * ROWS, ROWS)
    tl.cta.mul(y[rows, :], x[rows, :], s)


SHAPE = (1000, 1003)


ARGS = (tl.ArrayDesc("f16", SHAPE), 1.0, tl.ArrayDesc("f16", SHAPE))
"""The arguments the printed IR is specialized for (descriptions: no memory)."""


def ir_text() -> str:
    return header(__doc__, "scale_rows") + scale_rows.ir(*ARGS)


def run(rng: np.random.Generator) -> float:
    """Scale a NumPy matrix (copied to the GPU and back): the largest error against float64,
    which must be at most f16's rounding of each product."""
    x = rng.uniform(-4.0, 4.0, SHAPE).astype(np.float16)
    s = float(rng.uniform(0.5, 2.0))
    y = np.full(SHAPE, np.nan, np.float16)
    scale_rows(x, s, y)
    expected = x.astype(np.float64) * np.float64(np.float32(s))
    error = np.abs(y.astype(np.float64) - expected)
    assert (error <= 2.0 ** -11 * np.abs(expected) + 2.0 ** -25).all(), \
        f"max error {error.max()}"
    return float(error.max())


if __name__ == "__main__":
    sys.exit(main("scale_rows", ir_text, run))
