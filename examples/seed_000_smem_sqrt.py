"""Seed 000 (TIRx elementwise -> smem): a 256-thread CTA copies a 32x32 f32 tile into
shared memory, takes its sqrt there, and copies it back. With all operands shared, the
partition [outer, threads, vec] comes from the scope: 1024 floats over 256 threads is one
round of one float4 per thread.
"""

from __future__ import annotations

import sys

import numpy as np
from _example import header, main

import tile_mlir.lang as tl


@tl.kernel(threads=256)
def unary_op(A: tl.Tensor["f32", (32, 32)]):
    tl.grid(1)
    A_smem = tl.alloc_shared((32, 32), tl.f32)  # row-major: S[(32, 32)]
    tl.cta.copy(A_smem, A)
    tl.cta.sqrt(A_smem, A_smem)  # elementwise -> smem
    tl.cta.copy(A, A_smem)


ARGS = (tl.ArrayDesc("f32", (32, 32)),)
"""The arguments the printed IR is specialized for (descriptions: no memory)."""


def ir_text() -> str:
    return header(__doc__, "seed_000_smem_sqrt") + unary_op.ir(*ARGS)


def run(rng: np.random.Generator) -> float:
    """sqrt in place of a NumPy tile (copied to the GPU and back), which must be correctly
    rounded (sqrt.rn)."""
    a = rng.uniform(0.0, 100.0, (32, 32)).astype(np.float32)
    expected = np.sqrt(a.astype(np.float64))
    unary_op(a)
    error = np.abs(a - expected)
    assert (error <= 2.0 ** -24 * expected).all(), f"max error {error.max()}"
    return float(error.max())


if __name__ == "__main__":
    sys.exit(main("seed_000_smem_sqrt", ir_text, run))
