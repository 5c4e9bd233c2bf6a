"""Composed tile programs for both tiers: kernels of many tile ops that keep a row in
registers (issue 11): a row softmax, an RMSNorm with its weight in global memory, an
online softmax looping over tiles of a long row.

Each kernel takes `rows` rows of `length` elements, one row per CTA: the row is read
once into a register tile (a copy with padding where the tile is longer than the
row), reduced across the CTA's warps (a register reduction: shuffles, then one
barrier and the warps' partials in shared memory), combined elementwise with the
reduced value broadcast back, and written once (the copy out takes the overlap).
The null tier compiles each (ptxas accepts it, no register tile spills to .local)
and checks its PTX; the gpu tier runs it against float64 NumPy.

A row of `length` elements is a register tile of `threads` threads times `vec`
consecutive elements each (16 bytes), [threads, vec], or [rounds, threads, vec]
when the row needs several rounds of the CTA (then a whole number of them): the
row's view is reshaped to [length / vec, vec] (its tail inside the first dim) or
[rounds, threads, vec].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tile_mlir.dtypes import DTYPES

Array = np.ndarray
F32_EPS = float(np.finfo(np.float32).eps)


@dataclass(frozen=True)
class RowTile:
    """How a row of `length` maps onto a register tile of a `threads`-thread CTA."""

    length: int
    threads: int
    vec: int

    @property
    def rounds(self) -> int:
        per_round = self.threads * self.vec
        if self.length <= per_round:
            return 0  # one partial round: the tile [threads, vec]
        assert self.length % per_round == 0, "several rounds: a whole number of them"
        return self.length // per_round

    @property
    def shape(self) -> tuple[int, ...]:
        inner = (self.threads, self.vec)
        return (self.rounds, *inner) if self.rounds else inner

    @property
    def view(self) -> tuple[int, ...]:
        """The row's view: as the tile, or [length / vec, vec] (the tail in dim 0)."""
        assert self.length % self.vec == 0
        return self.shape if self.rounds else (self.length // self.vec, self.vec)

    @property
    def layout(self) -> str:
        if self.rounds:
            return (f"S[({self.rounds}, {self.threads}, {self.vec}):"
                    f"({self.vec}, 1@tid, 1)]")
        return f"S[({self.threads}, {self.vec}):(1@tid, 1)]"

    @property
    def scalar_layout(self) -> str:
        """A reduced value, [1, 1(, 1)], held by every thread."""
        ones = ", ".join(["1"] * len(self.shape))
        return f"S[({ones})], R[{self.threads}:1@tid]"


def _dims(shape: tuple[int, ...], elem: str) -> str:
    return "x".join(map(str, shape)) + "x" + elem


class _Builder:
    """Lines of a kernel whose register tiles all follow one RowTile."""

    def __init__(self, tile: RowTile, rows: int, scope: str = "cta"):
        self.tile, self.rows, self.scope = tile, rows, scope
        self.lines: list[str] = []
        self.count = 0

    def reg(self, elem: str, scalar: bool = False) -> str:
        shape = tuple(1 for _ in self.tile.shape) if scalar else self.tile.shape
        return f"memref<{_dims(shape, elem)}, #gpu.address_space<private>>"

    def alloc(self, elem: str, scalar: bool = False) -> str:
        self.count += 1
        name = f"%t{self.count}"
        layout = self.tile.scalar_layout if scalar else self.tile.layout
        self.lines.append(f'{name} = "tile.alloc"() {{layout = #tile.layout<"{layout}">}} '
                          f": () -> {self.reg(elem, scalar)}")
        return name

    def op(self, text: str) -> None:
        self.lines.append(text)

    def ew(self, op: str, operands: list[tuple[str, str]], extra: str = "") -> None:
        """tile.elementwise: operands (value, type), dst first; scalars after the tiles."""
        names = ", ".join(v for v, _ in operands)
        types = ", ".join(t for _, t in operands)
        inputs = len(operands) - 1
        segments = ", ".join(["1", *("1" if i < min(inputs, 2) else "0" for i in range(2)),
                              str(max(inputs - 2, 0))])
        self.lines.append(f'"tile.elementwise"({names}) {{op = "{op}", scope = "{self.scope}", '
                          f"operandSegmentSizes = array<i32: {segments}>{extra}}} : "
                          f"({types}) -> ()")

    def copy(self, dst: tuple[str, str], src: tuple[str, str], padding: str = "") -> None:
        pad = f", padding = {padding}" if padding else ""
        self.lines.append(f'"tile.copy"({dst[0]}, {src[0]}) {{scope = "{self.scope}"{pad}}} : '
                          f"({dst[1]}, {src[1]}) -> ()")

    def reduce(self, kind: str, dst: tuple[str, str], src: tuple[str, str],
               extra: str = "") -> None:
        self.lines.append(f'"tile.reduce"({dst[0]}, {src[0]}) {{kind = "{kind}", '
                          f'scope = "{self.scope}"{extra}}} : ({dst[1]}, {src[1]}) -> ()')


def _row_view(b: _Builder, arg: str, elem: str, length: int, name: str) -> tuple[str, str]:
    """The CTA's row of a [rows, length] argument, reshaped to the tile's view."""
    view = b.tile.view
    strides = [math.prod(view[i + 1:]) for i in range(len(view))]
    row_type = f"memref<{length}x{elem}, strided<[1], offset: ?>>"
    view_type = (f"memref<{_dims(view, elem)}, strided<[{', '.join(map(str, strides))}], "
                 "offset: ?>>")
    dims = ", ".join(map(str, range(len(view))))
    b.op(f"%{name}_row = memref.subview %{arg}[%bid, 0] [1, {length}] [1, 1] : "
         f"memref<{b.rows}x{length}x{elem}> to {row_type}")
    b.op(f"%{name}_view = memref.expand_shape %{name}_row [[{dims}]] output_shape "
         f"[{', '.join(map(str, view))}] : {row_type} into {view_type}")
    return f"%{name}_view", view_type


def _kernel(name: str, args: list[str], threads: int, body: list[str]) -> str:
    lines = "\n".join(f"    {line}" for line in body)
    return f"""gpu.module @kernels {{
  gpu.func @{name}({", ".join(args)}) kernel attributes {{known_block_size = array<i32: {threads}, 1, 1>}} {{
    %bid = gpu.block_id x
{lines}
    gpu.return
  }}
}}
"""


NEG_INF = {"f32": "0xFF800000 : f32", "bf16": "0xFF80 : bf16", "f16": "0xFC00 : f16"}


def _load_row_f32(b: _Builder, dtype: str, view: tuple[str, str], padding: str
                  ) -> tuple[str, str]:
    """The row into an f32 register tile (narrow types through a tile of their own)."""
    f32 = b.reg("f32")
    x = b.alloc("f32")
    if dtype == "f32":
        b.copy((x, f32), view, padding)
        return x, f32
    elem = DTYPES[dtype].mlir
    narrow = b.alloc(elem)
    b.copy((narrow, b.reg(elem)), view, padding)
    b.ew("cast", [(x, f32), (narrow, b.reg(elem))])
    return x, f32


def _store_row(b: _Builder, dtype: str, view: tuple[str, str], x: tuple[str, str]) -> None:
    """The f32 register tile into the row: a copy, or a cast into the narrow row."""
    if dtype == "f32":
        b.copy(view, x)
    else:
        b.ew("cast", [view, x])


def softmax_mlir(tile: RowTile, dtype: str, rows: int) -> str:
    """y = exp(x - max(x)) / sum(exp(x - max(x))) per row, the row in registers."""
    elem = DTYPES[dtype].mlir
    b = _Builder(tile, rows)
    xv = _row_view(b, "x", elem, tile.length, "x")
    yv = _row_view(b, "y", elem, tile.length, "y")
    x = _load_row_f32(b, dtype, xv, NEG_INF[dtype])
    one = b.reg("f32", scalar=True)
    m, s = b.alloc("f32", scalar=True), b.alloc("f32", scalar=True)
    b.reduce("max", (m, one), x)
    b.ew("sub", [x, x, (m, one)])
    b.ew("exp", [x, x])
    b.reduce("sum", (s, one), x)
    b.ew("div", [x, x, (s, one)])
    _store_row(b, dtype, yv, x)
    args = [f"%x: memref<{rows}x{tile.length}x{elem}> {{llvm.noalias, llvm.readonly}}",
            f"%y: memref<{rows}x{tile.length}x{elem}> {{llvm.noalias}}"]
    return _kernel("softmax", args, tile.threads, b.lines)


def rmsnorm_mlir(tile: RowTile, dtype: str, rows: int) -> str:
    """y = x * rsqrt(mean(x^2) + eps) * w per row: w read from global memory beside the
    register tile (elementwise/reg_mem), the mean a sum with scale 1/length."""
    elem = DTYPES[dtype].mlir
    b = _Builder(tile, rows)
    xv = _row_view(b, "x", elem, tile.length, "x")
    yv = _row_view(b, "y", elem, tile.length, "y")
    view = tile.view
    w_type = f"memref<{_dims(view, elem)}>"
    b.op(f"%w_view = memref.expand_shape %w [[{', '.join(map(str, range(len(view))))}]] "
         f"output_shape [{', '.join(map(str, view))}] : memref<{tile.length}x{elem}> "
         f"into {w_type}")
    x = _load_row_f32(b, dtype, xv, "0.0 : f32" if dtype == "f32" else f"0.0 : {elem}")
    one = b.reg("f32", scalar=True)
    sq, r = b.alloc("f32"), b.alloc("f32", scalar=True)
    b.ew("mul", [(sq, x[1]), x, x])
    scale = np.float64(1.0 / tile.length).view(np.uint64)
    b.reduce("sum", (r, one), (sq, x[1]), f", scale = 0x{scale:016X} : f64")
    b.ew("add", [(r, one), (r, one), ("%eps", "f32")])
    b.ew("rsqrt", [(r, one), (r, one)])
    b.ew("mul", [x, x, (r, one)])
    if dtype == "f32":
        b.ew("mul", [yv, x, ("%w_view", w_type)])  # y_global = x_reg * w_global
    else:
        b.ew("mul", [x, x, ("%w_view", w_type)])  # x_reg = x_reg * w_global, then a cast
        _store_row(b, dtype, yv, x)
    args = [f"%x: memref<{rows}x{tile.length}x{elem}> {{llvm.noalias, llvm.readonly}}",
            f"%w: memref<{tile.length}x{elem}> {{llvm.noalias, llvm.readonly}}",
            "%eps: f32", f"%y: memref<{rows}x{tile.length}x{elem}> {{llvm.noalias}}"]
    return _kernel("rmsnorm", args, tile.threads, b.lines)


def layernorm_mlir(tile: RowTile, rows: int) -> str:
    """y = (x - mean) * rsqrt(var + eps) * w + b per row (f32), var the mean of
    (x - mean)^2: x's padding is 0, but x - mean is -mean past the row, so tail_fill sets
    it to 0 again before the squares are summed."""
    b = _Builder(tile, rows)
    xv = _row_view(b, "x", "f32", tile.length, "x")
    yv = _row_view(b, "y", "f32", tile.length, "y")
    view = tile.view
    vtype = f"memref<{_dims(view, 'f32')}>"
    for name in ("w", "b"):
        b.op(f"%{name}_view = memref.expand_shape %{name} "
             f"[[{', '.join(map(str, range(len(view))))}]] output_shape "
             f"[{', '.join(map(str, view))}] : memref<{tile.length}xf32> into {vtype}")
    reg, one = b.reg("f32"), b.reg("f32", scalar=True)
    x = b.alloc("f32")
    b.copy((x, reg), xv, "0.0 : f32")
    mean, var, sq = b.alloc("f32", scalar=True), b.alloc("f32", scalar=True), b.alloc("f32")
    scale = f", scale = 0x{np.float64(1.0 / tile.length).view(np.uint64):016X} : f64"
    b.reduce("sum", (mean, one), (x, reg), scale)
    b.ew("sub", [(x, reg), (x, reg), (mean, one)])
    b.ew("tail_fill", [(x, reg), (x, reg), ("%zero", "f32"), ("%limit", "i64"),
                       ("%base", "i64")])
    b.ew("mul", [(sq, reg), (x, reg), (x, reg)])
    b.reduce("sum", (var, one), (sq, reg), scale)
    b.ew("add", [(var, one), (var, one), ("%eps", "f32")])
    b.ew("rsqrt", [(var, one), (var, one)])
    b.ew("mul", [(x, reg), (x, reg), (var, one)])
    b.ew("mul", [(x, reg), (x, reg), ("%w_view", vtype)])
    b.ew("add", [yv, (x, reg), ("%b_view", vtype)])
    head = ["%zero = arith.constant 0.0 : f32", f"%limit = arith.constant {tile.length} : i64",
            "%base = arith.constant 0 : i64"]
    args = [f"%x: memref<{rows}x{tile.length}xf32> {{llvm.noalias, llvm.readonly}}",
            f"%w: memref<{tile.length}xf32> {{llvm.noalias, llvm.readonly}}",
            f"%b: memref<{tile.length}xf32> {{llvm.noalias, llvm.readonly}}",
            "%eps: f32", f"%y: memref<{rows}x{tile.length}xf32> {{llvm.noalias}}"]
    return _kernel("layernorm", args, tile.threads, head + b.lines)


def _strided(shape: tuple[int, ...], strides: list[int]) -> str:
    return (f"memref<{_dims(shape, 'f32')}, strided<[{', '.join(map(str, strides))}], "
            "offset: ?>>")


def _tiled_rows(b: _Builder, tiles: int) -> tuple[str, str]:
    """The CTA's rows of x and y as [tiles, *tile view]; (their type, a tile's type)."""
    tile = b.tile
    length = tile.length * tiles
    view = (tiles, *tile.view)
    strides = [math.prod(view[i + 1:]) for i in range(len(view))]
    row_type = f"memref<{length}xf32, strided<[1], offset: ?>>"
    full = _strided(view, strides)
    dims = ", ".join(map(str, range(len(view))))
    for name in ("x", "y"):
        b.op(f"%{name}_row = memref.subview %{name}[%bid, 0] [1, {length}] [1, 1] : "
             f"memref<{b.rows}x{length}xf32> to {row_type}")
        b.op(f"%{name}_view = memref.expand_shape %{name}_row [[{dims}]] output_shape "
             f"[{', '.join(map(str, view))}] : {row_type} into {full}")
    return full, _strided(tile.view, strides[1:])


def _tile_of(b: _Builder, name: str, types: tuple[str, str]) -> tuple[str, str]:
    """Tile %i of the row `name` (a subview in the loop's body)."""
    view = b.tile.view
    zeros, ones = ", ".join(["0"] * len(view)), ", ".join(["1"] * (len(view) + 1))
    b.op(f"%{name}_tile = memref.subview %{name}_view[%i, {zeros}] "
         f"[1, {', '.join(map(str, view))}] [{ones}] : {types[0]} to {types[1]}")
    return f"%{name}_tile", types[1]


def online_softmax_mlir(tile: RowTile, tiles: int, rows: int) -> str:
    """Softmax of rows of `tiles` tiles (f32): a loop carries the running max m and sum s
    in registers (s rescaled by exp(m_old - m_new), reductions with accum), a second
    loop writes exp(x - m) / s."""
    b = _Builder(tile, rows)
    types = _tiled_rows(b, tiles)
    one, reg = b.reg("f32", scalar=True), b.reg("f32")
    m, m_old, s = ((b.alloc("f32", scalar=True), one) for _ in range(3))
    x = (b.alloc("f32"), reg)
    b.ew("fill", [m, ("%neg_inf", "f32")])
    b.ew("fill", [s, ("%zero", "f32")])
    b.op("scf.for %i = %c0 to %ctiles step %c1 {")
    b.copy(x, _tile_of(b, "x", types), NEG_INF["f32"])
    b.copy(m_old, m)
    b.reduce("max", m, x, ", accum = true")
    b.ew("sub", [m_old, m_old, m])
    b.ew("exp", [m_old, m_old])
    b.ew("mul", [s, s, m_old])
    b.ew("sub", [x, x, m])
    b.ew("exp", [x, x])
    b.reduce("sum", s, x, ", accum = true")
    b.op("}")
    b.op("scf.for %i = %c0 to %ctiles step %c1 {")
    b.copy(x, _tile_of(b, "x", types), NEG_INF["f32"])
    b.ew("sub", [x, x, m])
    b.ew("exp", [x, x])
    b.ew("div", [x, x, s])
    b.copy(_tile_of(b, "y", types), x)
    b.op("}")
    head = ["%c0 = arith.constant 0 : index", "%c1 = arith.constant 1 : index",
            f"%ctiles = arith.constant {tiles} : index",
            "%neg_inf = arith.constant 0xFF800000 : f32", "%zero = arith.constant 0.0 : f32"]
    length = tile.length * tiles
    args = [f"%x: memref<{rows}x{length}xf32> {{llvm.noalias, llvm.readonly}}",
            f"%y: memref<{rows}x{length}xf32> {{llvm.noalias}}"]
    return _kernel("online_softmax", args, tile.threads, head + b.lines)


# ------------------------------------------------------------------ references


def softmax_ref(x: Array) -> Array:
    shifted = x - x.max(axis=-1, keepdims=True)
    e = np.exp(shifted)
    result: Array = e / e.sum(axis=-1, keepdims=True)
    return result


def layernorm_ref(x: Array, w: Array, b: Array, eps: float) -> Array:
    centered = x - x.mean(axis=-1, keepdims=True)
    var = (centered * centered).mean(axis=-1, keepdims=True)
    result: Array = centered / np.sqrt(var + eps) * w + b
    return result


def rmsnorm_ref(x: Array, w: Array, eps: float) -> Array:
    result: Array = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * w
    return result


@dataclass(frozen=True)
class Composed:
    name: str
    kernel: str
    mlir: str
    rows: int
    length: int
    dtype: str
    kind: str  # softmax, rmsnorm, layernorm, online_softmax
    bars: int  # bar.sync in the PTX: one per reduction across warps (a loop: once in it)

    def inputs(self, rng: np.random.Generator) -> list[Array | float]:
        np_type = DTYPES[self.dtype].np_dtype()
        x = rng.uniform(-8.0, 8.0, (self.rows, self.length)).astype(np_type)
        if self.kind not in ("rmsnorm", "layernorm"):
            return [x]
        w = rng.uniform(-2.0, 2.0, self.length).astype(np_type)
        eps = float(np.float32(1e-5))
        if self.kind == "rmsnorm":
            return [x, w, eps]
        x += np_type.type(3.0)  # an offset the mean takes away
        return [x, w, rng.uniform(-2.0, 2.0, self.length).astype(np_type), eps]

    def reference(self, inputs: list[Array | float]) -> Array:
        x, *rest = (np.asarray(a, np.float64) for a in inputs)
        if self.kind == "rmsnorm":
            return rmsnorm_ref(x, rest[0], float(rest[1]))
        if self.kind == "layernorm":
            return layernorm_ref(x, rest[0], rest[1], float(rest[2]))
        return softmax_ref(x)

    def tolerance(self, expected: Array) -> Array:
        """|error| allowed per element: f32 accumulation over the row (the sum's order
        differs from NumPy's) and a few ulps of the math functions, then one rounding
        to the output type."""
        scale = np.abs(expected)
        if self.kind == "layernorm":  # the shift b: its error is relative to the product's
            scale = scale + 8.0
        bound: Array = scale * (self.length + 16) * F32_EPS
        if self.dtype != "f32":
            ulp = 2.0 ** -8 if self.dtype == "bf16" else 2.0 ** -11
            bound = bound + np.abs(expected) * ulp
        return bound + 1e-30


def _softmax(length: int, dtype: str, threads: int, rows: int = 7) -> Composed:
    tile = RowTile(length, threads, 16 // DTYPES[dtype].bytes)
    return Composed(f"softmax-{dtype}-{length}-cta{threads}", "softmax",
                    softmax_mlir(tile, dtype, rows), rows, length, dtype, "softmax", 2)


def _rmsnorm(length: int, dtype: str, threads: int, rows: int = 5) -> Composed:
    tile = RowTile(length, threads, 16 // DTYPES[dtype].bytes)
    return Composed(f"rmsnorm-{dtype}-{length}-cta{threads}", "rmsnorm",
                    rmsnorm_mlir(tile, dtype, rows), rows, length, dtype, "rmsnorm", 1)


def _layernorm(length: int, threads: int, rows: int = 5) -> Composed:
    tile = RowTile(length, threads, 4)
    return Composed(f"layernorm-f32-{length}-cta{threads}", "layernorm",
                    layernorm_mlir(tile, rows), rows, length, "f32", "layernorm", 2)


def _online(length: int, tiles: int, threads: int, rows: int = 3) -> Composed:
    tile = RowTile(length, threads, 4)
    return Composed(f"online-softmax-f32-{tiles}x{length}-cta{threads}", "online_softmax",
                    online_softmax_mlir(tile, tiles, rows), rows, length * tiles, "f32",
                    "online_softmax", 2)


PROGRAMS: list[Composed] = [
    _softmax(1000, "f32", 256),  # [256, 4] in registers, the row's view [250, 4]
    _softmax(4096, "f32", 256),  # [4, 256, 4]: four rounds
    _softmax(1000, "bf16", 128),  # [128, 8]: 16 bytes of bf16 a thread, the view [125, 8]
    _softmax(4096, "bf16", 256),  # [2, 256, 8]
    _softmax(180, "f32", 48),  # a 48-thread CTA: its second warp is half a warp
    _softmax(360, "f32", 96),  # three warps, the row ending in the second
    _softmax(1152, "f32", 96),  # [3, 96, 4]
    _rmsnorm(1000, "f32", 256),
    _rmsnorm(4096, "f32", 256),
    _rmsnorm(1000, "bf16", 128),
    _rmsnorm(180, "f32", 48),
    _layernorm(1000, 256),  # tail_fill: (x - mean) back to 0 past the row
    _layernorm(4096, 256),
    _online(1024, 4, 256),  # four tiles of [256, 4]
    _online(384, 4, 96),
]
