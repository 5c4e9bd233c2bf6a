"""Elementwise kernel cases shared by the tiers: the null tier compiles each one
(and ptxas must accept it); the gpu tier runs it on fresh random inputs.

Each case is a kernel around one `tile.elementwise` over global memory, in one
of several shapes of program: one scope doing a whole array, CTAs each taking a
block of rows, warps each taking a slice, or a strided view of a larger array.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tile_mlir import op_table
from tile_mlir.dtypes import DTYPES


@dataclass(frozen=True)
class Case:
    op: str
    shape: tuple[int, ...]
    dtype: str = "f32"
    scope: str = "cta"
    block: int = 256
    form: str = "whole"  # whole, rows, warps, view
    split: int = 1  # rows: CTAs; warps: warps per CTA
    scalar: bool = False  # pass the last input as an f32 scalar
    view: str = ""  # view: "offset" (shifted by 1 element) or "stride" (every other)

    @property
    def id(self) -> str:
        dims = "x".join(map(str, self.shape))
        extra = f"-{self.view}" if self.view else ""
        extra += "-scalar" if self.scalar else ""
        return f"{self.op}-{self.dtype}-{dims}-{self.scope}{self.block}-{self.form}{self.split}{extra}"

    @property
    def arity(self) -> int:
        row = op_table.lookup(self.op)
        assert row is not None
        return row.arity

    @property
    def memref_inputs(self) -> int:
        return self.arity - (1 if self.scalar else 0)

    @property
    def full_shape(self) -> tuple[int, ...]:
        """The kernel arguments' shape (the tile is a piece of it in rows/warps/view)."""
        if self.form in ("rows", "warps"):
            return (self.shape[0] * self.split, *self.shape[1:])
        if self.form == "view":
            return (self.shape[0] * 2,) if self.view == "stride" else (self.shape[0] + 1,)
        return self.shape

    # -------------------------------------------------------------- MLIR

    def mlir(self) -> str:
        elem = DTYPES[self.dtype].mlir
        full = f"memref<{'x'.join(map(str, self.full_shape))}x{elem}>"
        args = [f"%in{i}: {full} {{llvm.noalias, llvm.readonly}}"
                for i in range(self.memref_inputs)]
        if self.scalar:
            args.append("%s: f32")
        args.append(f"%out: {full} {{llvm.noalias}}")
        grid = self.split if self.form == "rows" else 1
        block = self.block * (self.split if self.form == "warps" else 1)
        body, tile_type, names = self._views(full, elem)
        inputs = [f"%v_in{i}" if names else f"%in{i}" for i in range(self.memref_inputs)]
        if self.scalar:
            inputs.append("%s")
        dst = "%v_out" if names else "%out"
        types = [tile_type] * (1 + self.memref_inputs) + (["f32"] if self.scalar else [])
        segments = ", ".join(["1"] + ["1" if i < self.arity else "0" for i in range(3)])
        return f"""gpu.module @kernels {{
  gpu.func @kernel({", ".join(args)}) kernel attributes {{known_block_size = array<i32: {block}, 1, 1>, known_grid_size = array<i32: {grid}, 1, 1>}} {{
{body}    "tile.elementwise"({", ".join([dst, *inputs])}) {{op = "{self.op}", scope = "{self.scope}", operandSegmentSizes = array<i32: {segments}>}} : ({", ".join(types)}) -> ()
    gpu.return
  }}
}}
"""

    def _views(self, full: str, elem: str) -> tuple[str, str, bool]:
        """IR that cuts each argument's tile, the tile's type, and whether views are used."""
        if self.form == "whole":
            return "", full, False
        rank = len(self.shape)
        sizes = ", ".join(map(str, self.shape))
        names = [f"in{i}" for i in range(self.memref_inputs)] + ["out"]
        if self.form == "view":
            offset, stride = (1, 1) if self.view == "offset" else (0, 2)
            layout = f"strided<[{stride}], offset: {offset}>" if offset else f"strided<[{stride}]>"
            tile = f"memref<{self.shape[0]}x{elem}, {layout}>"
            lines = [f"    %v_{n} = memref.subview %{n}[{offset}] [{self.shape[0]}] [{stride}] "
                     f": {full} to {tile}\n" for n in names]
            return "".join(lines), tile, True
        strides = [math.prod(self.shape[i + 1:]) for i in range(rank)]
        inner = ", ".join(map(str, strides))
        tile = f"memref<{'x'.join(map(str, self.shape))}x{elem}, strided<[{inner}], offset: ?>>"
        index = "%bid = gpu.block_id x" if self.form == "rows" else \
            "%tid = gpu.thread_id x\n    %c32 = arith.constant 32 : index\n" \
            "    %bid = arith.divui %tid, %c32 : index"
        zeros = ", ".join(["0"] * (rank - 1))
        lines = [f"    {index}\n", f"    %rows = arith.constant {self.shape[0]} : index\n",
                 "    %first = arith.muli %bid, %rows : index\n"]
        for n in names:
            offsets = "%first" + (f", {zeros}" if zeros else "")
            ones = ", ".join(["1"] * rank)
            lines.append(f"    %v_{n} = memref.subview %{n}[{offsets}] [{sizes}] [{ones}] "
                         f": {full} to {tile}\n")
        return "".join(lines), tile, True

    # -------------------------------------------------------------- data

    def inputs(self, rng: np.random.Generator) -> list[np.ndarray | float]:
        dtype = DTYPES[self.dtype].np_dtype()
        low, high = {"sqrt": (0.0, 100.0), "exp": (-10.0, 10.0), "reciprocal": (0.5, 4.0)}.get(
            self.op, (-4.0, 4.0))
        arrays: list[np.ndarray | float] = []
        for i in range(self.memref_inputs):
            values = rng.uniform(low, high, self.full_shape)
            if self.op == "div" and i == 1:
                values = np.sign(values + 1e-9) * (np.abs(values) + 0.5)
            arrays.append(values.astype(dtype))
        if self.scalar:
            arrays.append(float(np.float32(rng.uniform(0.5, 2.0))))
        return arrays

    def tile_of(self, array: np.ndarray) -> np.ndarray:
        """The part of a full-shape array that the op touches."""
        if self.form == "view":
            return array[1:] if self.view == "offset" else array[::2]
        return array

    def reference(self, inputs: list[np.ndarray | float]) -> np.ndarray:
        """The float64 result on the tile, from the op registry's NumPy reference."""
        row = op_table.lookup(self.op)
        assert row is not None
        args = [np.asarray(self.tile_of(a) if isinstance(a, np.ndarray) else a, np.float64)
                for a in inputs]
        result: np.ndarray = np.asarray(row.ref(*args), np.float64)
        return result


def ulp_distance(actual: np.ndarray, expected: np.ndarray, dtype: str) -> np.ndarray:
    """Units in the last place between two arrays of a float dtype (expected rounded to it)."""
    np_type = DTYPES[dtype].np_dtype()
    bits = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}[np_type.itemsize]

    def ordered(x: np.ndarray) -> np.ndarray:
        ints = np.ascontiguousarray(x.astype(np_type)).view(bits).astype(np.int64)
        sign_bit = np.int64(1) << (8 * np_type.itemsize - 1)
        return np.where(ints < 0, -(ints & (sign_bit - 1)), ints)

    distance: np.ndarray = np.abs(ordered(actual) - ordered(expected))
    return distance


EXACT = ("add", "sub", "mul", "div", "neg", "abs", "maximum", "minimum", "sqrt", "reciprocal",
         "copy")
"""Correctly rounded ops: the result must equal the float64 reference rounded."""

TOLERANCE_ULP = {"exp": 2, "fma": 1}


def allowed_ulps(op: str, dtype: str) -> int:
    if op in EXACT:
        return 0
    if op == "fma" and dtype == "f32":
        return 0  # fma.rn is correctly rounded
    return TOLERANCE_ULP.get(op, 2) if dtype == "f32" else 1


CASES: list[Case] = [
    # seed 002's vector add, one CTA per 2048-element block of rows
    Case("add", (2048,), form="rows", split=8),
    # odd sizes and thread counts: tails after the vector body
    *(Case(op, (n,), block=b) for op, n, b in (
        ("sqrt", 1, 32), ("sqrt", 3, 32), ("exp", 5, 96), ("add", 127, 96),
        ("mul", 1003, 128), ("sub", 4099, 256), ("div", 1000, 160), ("sqrt", 65537, 512))),
    # N-D contiguous tiles, narrow floats, scalars
    Case("mul", (3, 37, 129), scalar=True),
    Case("add", (37, 129), dtype="f16", block=128),
    Case("mul", (37, 129), dtype="bf16", block=128, scalar=True),
    Case("exp", (64, 64), dtype="f16", block=64),
    Case("fma", (4, 1031), block=128),
    Case("maximum", (333,), block=64),
    Case("reciprocal", (1024,), block=64),
    # CTAs each taking a block of rows of a larger tensor
    Case("exp", (4, 130), form="rows", split=5, block=128),
    # warps each taking a slice (warp scope), a thread doing a whole tile (thread scope)
    Case("sqrt", (8, 33), scope="warp", block=32, form="warps", split=4),
    Case("neg", (75,), scope="thread", block=1),
    Case("abs", (129,), scope="warpgroup", block=128),
    # views: misaligned by one element (scalar head-free narrowing), every other element
    Case("add", (1001,), form="view", view="offset", block=128),
    Case("sqrt", (500,), form="view", view="stride", block=128),
]
