"""gpu tier: fused chains on the GPU compute what the unfused programs compute, and what
float64 NumPy computes.

Each chain (support/fuse_programs.py: registers at warp scope, or each thread's row of
global memory at thread scope, with scalars and broadcasts) is compiled twice: as
written, where tile-to-ptx's tile-fuse makes it one elementwise op, and lowered first
without tile-fuse. Both run on the same fresh random inputs, their outputs poisoned
(NaN) beforehand: every element must be written and the two must hold the same bits
(any NaN for any NaN; libdevice is called the same way in both). The directed chains
are also checked against the chain in float64 NumPy, each intermediate rounded to its
type as the program rounds it.
"""

from __future__ import annotations

import numpy as np
import pytest
from support.fuse_programs import (
    GPU_CASES,
    UNFUSED,
    Chain,
    GpuCase,
    check_fused,
    lower,
    program_text,
    random_chain,
    random_inputs,
    reference,
)

import tile_mlir
from tile_mlir.dtypes import DTYPES


def run_on_gpu(source: str, chain: Chain, inputs: dict[str, object], name: str
               ) -> np.ndarray:
    kernel = tile_mlir.compile(source, name=name).kernel("k")
    out = np.full(chain.shape, np.nan, DTYPES[chain.dtype].np_dtype())
    kernel(*(inputs[o.name] for o in chain.operands), out)
    return out


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[x.dtype.itemsize])


def fused_and_unfused(chain: Chain, inputs: dict[str, object], name: str) -> np.ndarray:
    """Run both programs; assert they agree and wrote everything; the fused output."""
    text = program_text(chain)
    check_fused(chain, text)
    fused = run_on_gpu(text, chain, inputs, f"{name}-fused")
    unfused = run_on_gpu(lower(text, UNFUSED), chain, inputs, f"{name}-unfused")
    wide_fused, wide_unfused = fused.astype(np.float64), unfused.astype(np.float64)
    nan = np.isnan(wide_fused) & np.isnan(wide_unfused)
    differ = (_bits(fused) != _bits(unfused)) & ~nan
    print(f"{name}: {chain.describe()}: {fused.size} elements, {int(differ.sum())} differ")
    assert not differ.any(), (
        f"fused {wide_fused[differ][:4]} unfused {wide_unfused[differ][:4]} at "
        f"{np.argwhere(differ)[:4].tolist()}")
    return fused


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: c.name)
def test_chain_on_gpu(case: GpuCase, rng: np.random.Generator) -> None:
    inputs = random_inputs(case.chain, rng, special=False)
    got = fused_and_unfused(case.chain, inputs, case.name).astype(np.float64)
    assert not np.isnan(got).any(), "elements never written (or NaN from finite inputs)"
    expected = reference(case.chain, inputs)
    error = np.abs(got - expected)
    bound = case.rtol * np.abs(expected) + case.atol
    worst = np.unravel_index(np.argmax(error - bound), error.shape)
    print(f"{case.name}: max error {error.max():.3g}, at {worst}: got {got[worst]}, "
          f"float64 {expected[worst]}")
    assert (error <= bound).all(), f"at {worst}: got {got[worst]}, float64 {expected[worst]}"


@pytest.mark.gpu
@pytest.mark.parametrize("setting", ["registers", "threads"])
@pytest.mark.parametrize("n", range(4))
def test_random_chain_on_gpu(setting: str, n: int, rng: np.random.Generator) -> None:
    """Random chains with special values (NaN, Inf, zeros) mixed in: fused and unfused
    agree bit for bit on the GPU."""
    chain = random_chain(rng, setting)
    fused_and_unfused(chain, random_inputs(chain, rng), f"random-{setting}-{n}")
