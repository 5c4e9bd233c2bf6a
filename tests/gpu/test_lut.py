"""gpu tier: elementwise/lut, an op on an fp8 tile by a shared table of its 256 results.

Every fp8 unary row (and binary rows with a scalar) over every fp8 value, on tiles of
odd length (the scalar tail) at two block sizes (a thread per entry, and 64 threads
filling 4 entries each): the table kernel (the default) bit for bit against the same
op forced onto gmem, which computes each element; outputs poisoned first.
"""

from __future__ import annotations

import numpy as np
import pytest
from support.cases import Case

import tile_mlir
from tile_mlir import op_table
from tile_mlir.dtypes import DTYPES, FP8

pytestmark = pytest.mark.gpu

UNARY = sorted(r.name for r in op_table.ELEMENTWISE.values()
               if r.arity == 1 and not r.indexed and r.out != "bool" and "f8e4m3" in r.dtypes
               and r.name not in ("copy", "fill", "cast"))
SCALAR = ["add", "mul", "div", "sub", "maximum", "pow"]
LENGTH = 256 * 37 + 29


def _forced(text: str, variant: str) -> str:
    return text.replace('{op = "', f'{{variant = "{variant}", op = "', 1)


def _run(text: str, args: list[object], out_dtype: np.dtype) -> np.ndarray:
    kernel = tile_mlir.compile(text).kernel("kernel")
    out = np.full(LENGTH, 0x7F, np.uint8).view(out_dtype) if out_dtype.itemsize == 1 else \
        np.full(LENGTH, np.nan, out_dtype)
    kernel(*args, out)
    return out


@pytest.mark.parametrize("block", [256, 64])
@pytest.mark.parametrize("dtype", FP8)
@pytest.mark.parametrize("op", [*UNARY, *(f"{op}-scalar" for op in SCALAR)])
def test_table_is_the_computed_op(op: str, dtype: str, block: int,
                                  rng: np.random.Generator) -> None:
    name, scalar = op.removesuffix("-scalar"), op.endswith("-scalar")
    case = Case(name, (LENGTH,), dtype=dtype, block=block, scalar=scalar)
    text = case.mlir()
    assert '{op = "' in text
    np_dtype = DTYPES[dtype].np_dtype()
    x = rng.permutation(np.resize(np.arange(256, dtype=np.uint8), LENGTH)).view(np_dtype)
    args: list[object] = [x, np.float32(1.75)] if scalar else [x]
    table = _run(_forced(text, "lut"), args, np_dtype)
    computed = _run(_forced(text, "gmem"), args, np_dtype)
    default = _run(text, args, np_dtype)
    same = table.view(np.uint8) == computed.view(np.uint8)
    print(f"{op} {dtype} block {block}: {int(same.sum())} of {LENGTH} identical")
    assert same.all(), f"first difference at byte {int(x.view(np.uint8)[~same][0]):#04x}"
    assert np.array_equal(default.view(np.uint8), table.view(np.uint8))
