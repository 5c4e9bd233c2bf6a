"""gpu tier: fp8 division (op_table's fp8_body for div, div.approx.f32) against the IEEE
path, on every pair of fp8 values.

Kernel A divides fp8 by fp8 into fp8 (the approximate division); kernel B divides the
same pairs into f32 (the IEEE division, as any wider result takes) and casts that to
fp8 with the same conversion: the fp8 results must agree bit for bit, NaNs, infinities,
zeros' signs and saturation included. Outputs poisoned first.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import ops_check

import tile_mlir
from tile_mlir.dtypes import DTYPES, FP8

pytestmark = pytest.mark.gpu

N = 1 << 16


def _kernels(dtype: str) -> str:
    t = DTYPES[dtype].mlir
    fp8, f32 = f"memref<{N}x{t}>", f"memref<{N}xf32>"
    attrs = ("kernel attributes {known_block_size = array<i32: 256, 1, 1>, "
             "known_grid_size = array<i32: 1, 1, 1>}")
    return f"""gpu.module @m {{
  gpu.func @approx(%a: {fp8}, %b: {fp8}, %y: {fp8}) {attrs} {{
    "tile.elementwise"(%y, %a, %b) {{op = "div", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>}} : ({fp8}, {fp8}, {fp8}) -> ()
    gpu.return
  }}
  gpu.func @ieee(%a: {fp8}, %b: {fp8}, %q: {f32}, %y: {fp8}) {attrs} {{
    "tile.elementwise"(%q, %a, %b) {{op = "div", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>}} : ({f32}, {fp8}, {fp8}) -> ()
    "tile.elementwise"(%y, %q) {{op = "cast", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>}} : ({fp8}, {f32}) -> ()
    gpu.return
  }}
}}"""


@pytest.mark.parametrize("dtype", FP8)
def test_every_pair_rounds_as_the_ieee_division(dtype: str) -> None:
    program = tile_mlir.compile(_kernels(dtype))
    assert "div.approx.f32" in program.ptx["m"]
    a, b = ops_check.every_pair(dtype)
    np_dtype = a.dtype
    fast = np.full(N, 0x55, np.uint8).view(np_dtype)
    slow = np.full(N, 0xAA, np.uint8).view(np_dtype)
    program.kernel("approx")(a, b, fast)
    program.kernel("ieee")(a, b, np.full(N, np.nan, np.float32), slow)
    same = fast.view(np.uint8) == slow.view(np.uint8)
    print(f"div {dtype}: {int(same.sum())} of {N} pairs identical")
    bad = np.flatnonzero(~same)[:5]
    assert same.all(), [(int(a.view(np.uint8)[i]), int(b.view(np.uint8)[i]),
                         int(fast.view(np.uint8)[i]), int(slow.view(np.uint8)[i])) for i in bad]
