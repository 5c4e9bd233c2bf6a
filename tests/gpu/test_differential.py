"""gpu tier: the random differential test (support/differential.py) against torch.

Each case builds its inputs as CUDA tensors, views made with torch's own
slicing, permute and expand (offset and misaligned, transposed, strided, rows
with gaps, expanded with stride 0), calls tile_mlir.ops.<op> and torch's op on
the very same tensors, and compares: the dtype and shape with torch's, exact ops
bit for bit (NaN for NaN), the others within docs/ops-accuracy.md's bounds
(support.ops_check.compare); an error where torch raises one too (the library's
TypeError, ValueError, NotImplementedError or OverflowError for torch's
RuntimeError, TypeError, ValueError or IndexError), or where the library
documents a difference (docs/ops.md). fp8, which torch's kernels mostly lack, is
compared with torch's op on float32 and a saturating cast. The ops torch does
not have are compared with float64 NumPy: the reductions, RoPE (support.rope_ref),
dropout (bit for bit against tile_mlir.op_table.refs' Philox stream, its keep
rate), ALiBi and sinusoidal encodings. No input may change, nor anything of an
out='s storage outside its view (outputs start poisoned).

    TILE_MLIR_DIFF_CASES=600    cases in a run (default 600)
    TILE_MLIR_DIFF_SEED=<seed>  replay a run (the seed is printed, and in every failure)
    TILE_MLIR_DIFF_ONLY=<i>     run case i of that run alone

Run on the GPU machine from the repository root (-s shows the counts and times):
    python -m pytest -m gpu tests/gpu/test_differential.py -s
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from support import differential
from support.differential import GPU

import tile_mlir

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

SEED = differential.run_seed()
COUNT = differential.case_count(600)
ONLY = differential.only()
RAN: dict[str, int] = {}  # family: cases run


class Compiles:
    """tile_mlir.compile, counting the kernels it compiles and the time it takes (every
    kernel of tile_mlir.ops goes through it once per process, then from memory)."""

    def __init__(self, original: Any):
        self.original = original
        self.sources: set[int] = set()
        self.seconds = 0.0
        self.started = time.perf_counter()

    def __call__(self, source: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.original(source, *args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start
            self.sources.add(hash(str(source)))


@pytest.fixture(scope="module")
def compiles() -> Iterator[Compiles]:
    counter = Compiles(tile_mlir.compile)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tile_mlir, "compile", counter)
        yield counter


@pytest.mark.parametrize("family", GPU.families)
def test_family(family: str, compiles: Compiles, request: pytest.FixtureRequest) -> None:
    request.node.user_properties.append(("seed", SEED))
    start, kernels, compiling = time.perf_counter(), len(compiles.sources), compiles.seconds
    ran, failures = differential.run_family(
        GPU, SEED, COUNT, family, backend=differential.TorchBackend(torch),
        reference=differential.TorchReference(torch), one=ONLY)
    torch.cuda.synchronize()
    RAN[family] = ran
    print(f"seed {SEED}: {ran} {family} cases, {len(failures)} differ, "
          f"{len(compiles.sources) - kernels} kernels compiled in "
          f"{compiles.seconds - compiling:.1f} s, {time.perf_counter() - start:.1f} s in all")
    assert not failures, differential.report(GPU, SEED, COUNT, family, ran=ran, failures=failures)


def test_run_summary(compiles: Compiles) -> None:
    """The whole run (after the families): every case ran in one family; the kernels
    it compiled and the time it took."""
    if set(RAN) != set(GPU.families):
        pytest.skip("the totals need every family's test")
    elapsed = time.perf_counter() - compiles.started
    print(f"seed {SEED}: {sum(RAN.values())} cases, {len(compiles.sources)} kernels "
          f"compiled in {compiles.seconds:.1f} s, {elapsed:.1f} s in all")
    assert sum(RAN.values()) == (COUNT if ONLY is None else 1)
