"""gpu tier: fp8 binary ops and where on every pair of fp8 values, against float64.

Each op takes a of byte i % 256 and b of byte i // 256 (all 65536 pairs of the type),
through tile.elementwise at 16-byte accesses (a vector of 16, where the results are
narrowed a word of four bytes at a time), into a poisoned fp8 output; the expectation
is the float64 result of op_table's reference rounded as the kernels round
(ops_check.rounded: e5m2 to Inf past its largest finite value, e4m3fn saturating; NaN
kept; maximum and minimum order -0 below +0, as arith's maximumf and minimumf). The
pairs cover every overflow of a sum, a difference or a product (57344 + 57344, Inf -
Inf), every NaN and both zeros. `where` runs in the fp8 type itself (op_table's native):
its bytes must be the chosen input's, NaN payloads included.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import ops_check

import tile_mlir
from tile_mlir import op_table
from tile_mlir.dtypes import DTYPES, FP8
from tile_mlir.runtime import Program

pytestmark = pytest.mark.gpu

N = 1 << 16
BINARY = ("add", "sub", "mul", "maximum", "minimum")


def _kernels(dtype: str) -> str:
    t = DTYPES[dtype].mlir
    fp8, cond = f"memref<{N}x{t}>", f"memref<{N}xi1>"
    attrs = ("kernel attributes {known_block_size = array<i32: 256, 1, 1>, "
             "known_grid_size = array<i32: 1, 1, 1>}")
    segments = "operandSegmentSizes = array<i32: 1, 1, 1, 0>"
    funcs = [f"""  gpu.func @{op}(%a: {fp8}, %b: {fp8}, %y: {fp8}) {attrs} {{
    "tile.elementwise"(%y, %a, %b) {{op = "{op}", scope = "cta", vector_bytes = 16, {segments}}} : ({fp8}, {fp8}, {fp8}) -> ()
    gpu.return
  }}""" for op in BINARY]
    funcs.append(f"""  gpu.func @where(%c: {cond}, %a: {fp8}, %b: {fp8}, %y: {fp8}) {attrs} {{
    "tile.elementwise"(%y, %c, %a, %b) {{op = "where", scope = "cta", vector_bytes = 16, operandSegmentSizes = array<i32: 1, 1, 1, 1>}} : ({fp8}, {cond}, {fp8}, {fp8}) -> ()
    gpu.return
  }}""")
    return "gpu.module @m {\n" + "\n".join(funcs) + "\n}"


def _differ(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Where the bytes differ, NaNs of any payload counted equal."""
    same = (got.view(np.uint8) == want.view(np.uint8)) | \
        (np.isnan(got.astype(np.float64)) & np.isnan(want.astype(np.float64)))
    return np.flatnonzero(~same)


@pytest.fixture(scope="module", params=FP8)
def compiled(request: pytest.FixtureRequest) -> tuple[str, Program]:
    return request.param, tile_mlir.compile(_kernels(request.param))


@pytest.mark.parametrize("op", BINARY)
def test_every_pair_rounds_as_float64(compiled: tuple[str, Program], op: str
                                      ) -> None:
    dtype, program = compiled
    a, b = ops_check.every_pair(dtype)
    y = np.full(N, 0x55, np.uint8).view(a.dtype)
    program.kernel(op)(a, b, y)
    x, z = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(all="ignore"):
        exact = np.asarray(op_table.ELEMENTWISE[op].ref(x, z), np.float64)
    if op in ("maximum", "minimum"):  # arith's maximumf/minimumf order -0 below +0
        both = np.signbit(x) & np.signbit(z) if op == "maximum" else \
            np.signbit(x) | np.signbit(z)
        exact = np.where((x == 0) & (z == 0), np.where(both, -0.0, 0.0), exact)
    want = ops_check.rounded(exact, dtype)
    bad = _differ(y, want)
    overflows = int(np.isinf(want.astype(np.float64)).sum())
    print(f"{op} {dtype}: {N - bad.size} of {N} pairs as float64 rounds ({overflows} Inf)")
    assert bad.size == 0, [(int(a.view(np.uint8)[i]), int(b.view(np.uint8)[i]),
                            int(y.view(np.uint8)[i]), int(want.view(np.uint8)[i]))
                           for i in bad[:5]]


def test_where_keeps_the_chosen_bytes(compiled: tuple[str, Program]) -> None:
    dtype, program = compiled
    a, b = ops_check.every_pair(dtype)
    condition = np.random.default_rng(7).random(N) < 0.5
    y = np.full(N, 0x55, np.uint8).view(a.dtype)
    program.kernel("where")(condition, a, b, y)
    want = np.where(condition, a.view(np.uint8), b.view(np.uint8))
    assert np.array_equal(y.view(np.uint8), want), np.flatnonzero(y.view(np.uint8) != want)[:5]
