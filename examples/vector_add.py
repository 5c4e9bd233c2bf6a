"""c = a + b (seed 002's vector add), one tile op per CTA: CTAs of 256 threads, each
adding a 2048-element slice. N is specialized (static=), so for 2^20 floats (this IR)
the grid is fixed at 512 CTAs, every slice is whole, and the arrays are static memrefs:
float4 loads (ld.global.nc.v4: a and b are noalias and read-only) and stores. Any other
length adds a tail (the last CTA's dynamic slice); strided or misaligned arrays come as
pointers with their strides and offsets.
"""

from __future__ import annotations

import sys

import numpy as np
from _example import header, main

import tile_mlir.lang as tl


@tl.kernel(threads=256, static=("N",))
def vector_add(a: tl.Tensor["T", ("N",)], b: tl.Tensor["T", ("N",)],
               c: tl.Tensor["T", ("N",)], TILE: tl.constexpr = 2048):
    n = c.shape[0]  # an int: N is static
    tl.grid(tl.cdiv(n, TILE))
    start = tl.block_id() * TILE
    if n % TILE == 0:  # decided while building: every slice is whole
        piece = tl.ds(start, TILE)
        tl.cta.add(c[piece], a[piece], b[piece])
        return
    with tl.if_(start + TILE <= n) as whole:
        piece = tl.ds(start, TILE)
        tl.cta.add(c[piece], a[piece], b[piece])
    with whole.otherwise():
        tl.cta.add(c[start:], a[start:], b[start:])


N = 1 << 20


ARGS = (tl.ArrayDesc("f32", (N,)),) * 3
"""The arguments the printed IR is specialized for (descriptions: no memory)."""


def ir_text() -> str:
    return header(__doc__, "vector_add") + vector_add.ir(*ARGS)


def run(rng: np.random.Generator, n: int = N) -> float:
    """Add NumPy arrays (copied to the GPU and back): the largest error against float64,
    which must be at most the f32 rounding of each sum."""
    a, b = rng.standard_normal((2, n)).astype(np.float32)
    c = np.full(n, np.nan, np.float32)
    vector_add(a, b, c)
    expected = a.astype(np.float64) + b
    error = np.abs(c - expected)
    assert (error <= 2.0 ** -24 * np.abs(expected)).all(), f"max error {error.max()}"
    return float(error.max())


if __name__ == "__main__":
    sys.exit(main("vector_add", ir_text, run))
