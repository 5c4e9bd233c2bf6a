"""Issue 11's composed kernels on a GPU: a row softmax, an RMSNorm with its weight in
global memory, an online softmax looping over tiles, each one kernel that keeps the row in
registers, against float64 NumPy on fresh random inputs with poisoned outputs (rows of
1000 and 4096 f32 and bf16, 48-, 96-, 128- and 256-thread CTAs). And tails on a GPU:
nothing is written past a view's end."""

from __future__ import annotations

import numpy as np
import pytest
from support.composed_programs import PROGRAMS, Composed

import tile_mlir
from tile_mlir.dtypes import DTYPES


@pytest.mark.gpu
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_composed_program_on_gpu(program: Composed, rng: np.random.Generator) -> None:
    kernel = tile_mlir.compile(program.mlir, name=program.name).kernel(program.kernel)
    inputs = program.inputs(rng)
    out = np.full((program.rows, program.length), np.nan, DTYPES[program.dtype].np_dtype())
    kernel(*inputs, out, grid=(program.rows, 1, 1))
    got = out.astype(np.float64)
    assert not np.isnan(got).any(), "elements never written"
    expected = program.reference(inputs)
    error = np.abs(got - expected)
    bound = program.tolerance(expected)
    worst = np.unravel_index(np.argmax(error - bound), error.shape)
    print(f"{program.name}: {got.size} elements, max |error| {error.max():.3g}, "
          f"max relative {(error / np.maximum(np.abs(expected), 1e-30)).max():.3g}")
    assert (error <= bound).all(), (f"|error| {error[worst]:.3g} > {bound[worst]:.3g} at "
                                    f"{worst}: got {got[worst]}, expected {expected[worst]}")


@pytest.mark.gpu
def test_softmax_rows_sum_to_one_with_extreme_values(rng: np.random.Generator) -> None:
    """Large magnitudes (exp overflows without the max) and a row's -inf elements."""
    program = next(p for p in PROGRAMS if p.name == "softmax-f32-1000-cta256")
    x = rng.uniform(-1e4, 1e4, (program.rows, program.length)).astype(np.float32)
    x[0, ::7] = -np.inf
    out = np.full_like(x, np.nan)
    tile_mlir.compile(program.mlir).kernel("softmax")(x, out, grid=(program.rows, 1, 1))
    assert not np.isnan(out).any()
    np.testing.assert_allclose(out.astype(np.float64).sum(axis=1), 1.0, rtol=1e-5)
    assert (out[0, ::7] == 0).all()


TAIL = """gpu.module @kernels {
  gpu.func @k(%a: memref<256x4xf32>, %n: i32, %out: memref<300x4xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>, known_grid_size = array<i32: 1, 1, 1>} {
    %rows = arith.index_cast %n : i32 to index
    %v = memref.subview %out[0, 0] [%rows, 4] [1, 1] : memref<300x4xf32> to memref<?x4xf32, strided<[4, 1]>>
    %x = "tile.alloc"() {layout = #tile.layout<"S[(256, 4):(1@tid, 1)]">} : () -> memref<256x4xf32, #gpu.address_space<private>>
    "tile.copy"(%x, %a) {scope = "cta"} : (memref<256x4xf32, #gpu.address_space<private>>, memref<256x4xf32>) -> ()
    "tile.copy"(%v, %x) {scope = "cta"} : (memref<?x4xf32, strided<[4, 1]>>, memref<256x4xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}
"""


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [0, 1, 97, 250, 256, 300])
def test_the_write_back_takes_the_overlap_only(rows: int, rng: np.random.Generator) -> None:
    a = rng.uniform(-4, 4, (256, 4)).astype(np.float32)
    out = np.full((300, 4), np.nan, np.float32)
    tile_mlir.compile(TAIL).kernel("k")(a, rows, out)
    kept = min(rows, 256)
    np.testing.assert_array_equal(out[:kept], a[:kept])
    assert np.isnan(out[kept:]).all(), "written past the view's end"
