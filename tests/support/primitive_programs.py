"""Tile programs for the seeds' primitives (shared and register tiles, copies, scopes),
shared by the tiers: the null tier compiles each; the gpu tier runs each on fresh
random inputs against float64 NumPy.

A program's kernel is named `k` unless it says otherwise; its last parameter is
the output, which the test poisons with NaN before the run, unless the program
works in place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tile_mlir.dtypes import DTYPES

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

Array = np.ndarray


@dataclass(frozen=True)
class Program:
    name: str
    mlir: str
    inputs: Callable[[np.random.Generator], list[Array | float]]
    expected: Callable[..., Array]  # float64 result from the inputs (as float64)
    out_shape: tuple[int, ...]
    dtype: str = "f32"
    ulps: int = 0  # allowed error in units of the last place of `dtype`
    kernel: str = "k"
    in_place: bool = False  # one parameter, read and then overwritten


def check_on_gpu(program: Program, rng: np.random.Generator) -> None:
    """Compile and run a program on the GPU on fresh inputs, its output poisoned with NaN
    first: every element written, within `program.ulps` of the float64 reference."""
    import tile_mlir
    from support.cases import ulp_distance

    kernel = tile_mlir.compile(program.mlir, name=program.name).kernel(program.kernel)
    inputs = program.inputs(rng)
    expected = program.expected(*(np.asarray(a, np.float64) for a in inputs))
    if program.in_place:
        assert isinstance(inputs[0], np.ndarray)
        out = inputs[0].copy()
        kernel(out)
    else:
        out = np.full(program.out_shape, np.nan, DTYPES[program.dtype].np_dtype())
        kernel(*inputs, out)
    assert not np.isnan(out.astype(np.float64)).any(), "elements never written"
    ulps = ulp_distance(out, expected, program.dtype)
    print(f"{program.name}: {out.size} elements, max {int(ulps.max())} ulp")
    assert ulps.max() <= program.ulps, (
        f"max error {int(ulps.max())} ulp at {np.unravel_index(ulps.argmax(), ulps.shape)}")


def uniform(shape: tuple[int, ...], dtype: str, low: float = -4.0, high: float = 4.0
            ) -> Callable[[np.random.Generator], list[Array | float]]:
    np_type = DTYPES[dtype].np_dtype()
    return lambda rng: [rng.uniform(low, high, shape).astype(np_type)]


def _smem_pipeline(shape: tuple[int, int], layout: str, op: str, dtype: str, *, threads: int,
                   arity: int = 1) -> str:
    """g -> shared (copy), op in shared memory, shared -> g, at CTA scope."""
    elem = DTYPES[dtype].mlir
    dims = f"{shape[0]}x{shape[1]}x{elem}"
    smem = f"memref<{dims}, #gpu.address_space<workgroup>>"
    segments = ", ".join(["1"] + ["1" if i < arity else "0" for i in range(3)])
    srcs = ", ".join(["%s"] * arity)
    types = ", ".join([smem] * (arity + 1))
    return f"""gpu.module @kernels {{
  gpu.func @k(%a: memref<{dims}>, %out: memref<{dims}>) kernel attributes {{known_block_size = array<i32: {threads}, 1, 1>, known_grid_size = array<i32: 1, 1, 1>}} {{
    %s = "tile.alloc"() {{layout = #tile.layout<"{layout}">}} : () -> {smem}
    "tile.copy"(%s, %a) {{scope = "cta"}} : ({smem}, memref<{dims}>) -> ()
    "tile.elementwise"(%s, {srcs}) {{op = "{op}", scope = "cta", operandSegmentSizes = array<i32: {segments}>}} : ({types}) -> ()
    "tile.copy"(%out, %s) {{scope = "cta"}} : (memref<{dims}>, {smem}) -> ()
    gpu.return
  }}
}}
"""


def _warpgroup_registers(dtype: str) -> str:
    """Two warpgroups, each taking its half of a 2x4x32x8 tensor through registers:
    load, out = x * x + x (fma), store."""
    elem = DTYPES[dtype].mlir
    full = f"memref<2x4x32x8x{elem}>"
    half = f"memref<4x32x8x{elem}, strided<[256, 8, 1], offset: ?>>"
    reg = f"memref<4x32x8x{elem}, #gpu.address_space<private>>"
    return f"""gpu.module @kernels {{
  gpu.func @k(%a: {full} {{llvm.noalias, llvm.readonly}}, %out: {full} {{llvm.noalias}}) kernel attributes {{known_block_size = array<i32: 256, 1, 1>, known_grid_size = array<i32: 1, 1, 1>}} {{
    %t = gpu.thread_id x
    %c128 = arith.constant 128 : index
    %wg = arith.divui %t, %c128 : index
    %in = memref.subview %a[%wg, 0, 0, 0] [1, 4, 32, 8] [1, 1, 1, 1] : {full} to {half}
    %o = memref.subview %out[%wg, 0, 0, 0] [1, 4, 32, 8] [1, 1, 1, 1] : {full} to {half}
    %r = "tile.alloc"() {{layout = #tile.layout<"S[(4, 32, 8):(1@warpid, 1@laneid, 1)]">}} : () -> {reg}
    "tile.copy"(%r, %in) {{scope = "warpgroup"}} : ({reg}, {half}) -> ()
    "tile.elementwise"(%r, %r, %r, %r) {{op = "fma", scope = "warpgroup", operandSegmentSizes = array<i32: 1, 1, 1, 1>}} : ({reg}, {reg}, {reg}, {reg}) -> ()
    "tile.copy"(%o, %r) {{scope = "warpgroup"}} : ({half}, {reg}) -> ()
    gpu.return
  }}
}}
"""


def _replicated() -> str:
    """A tile loaded into registers replicated over 4 warps; each warp adds its copy
    to itself; warp 0 alone writes the result back through shared memory."""
    smem = "memref<32x4xf32, #gpu.address_space<workgroup>>"
    reg = "memref<32x4xf32, #gpu.address_space<private>>"
    return f"""gpu.module @kernels {{
  gpu.func @k(%a: memref<32x4xf32>, %out: memref<32x4xf32>) kernel attributes {{known_block_size = array<i32: 128, 1, 1>, known_grid_size = array<i32: 1, 1, 1>}} {{
    %s = "tile.alloc"() {{layout = #tile.layout<"S[(32, 4)]">}} : () -> {smem}
    "tile.copy"(%s, %a) {{scope = "cta"}} : ({smem}, memref<32x4xf32>) -> ()
    %r = "tile.alloc"() {{layout = #tile.layout<"S[(32, 4):(1@laneid, 1)], R[4:1@warpid]">}} : () -> {reg}
    "tile.copy"(%r, %s) {{scope = "cta"}} : ({reg}, {smem}) -> ()
    "tile.elementwise"(%r, %r, %r) {{op = "add", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>}} : ({reg}, {reg}, {reg}) -> ()
    "tile.copy"(%s, %r) {{scope = "cta"}} : ({smem}, {reg}) -> ()
    "tile.copy"(%out, %s) {{scope = "cta"}} : (memref<32x4xf32>, {smem}) -> ()
    gpu.return
  }}
}}
"""


def _packed_registers() -> str:
    """A warp's f16 register tile: out = a + a, two halves at a time (add.rn.f16x2)."""
    reg = "memref<32x16xf16, #gpu.address_space<private>>"
    return f"""gpu.module @kernels {{
  gpu.func @k(%a: memref<32x16xf16>, %out: memref<32x16xf16>) kernel attributes {{known_block_size = array<i32: 32, 1, 1>, known_grid_size = array<i32: 1, 1, 1>}} {{
    %r = "tile.alloc"() {{layout = #tile.layout<"S[(32, 16):(1@laneid, 1)]">}} : () -> {reg}
    "tile.copy"(%r, %a) {{scope = "warp"}} : ({reg}, memref<32x16xf16>) -> ()
    "tile.elementwise"(%r, %r, %r) {{op = "add", scope = "warp", operandSegmentSizes = array<i32: 1, 1, 1, 0>}} : ({reg}, {reg}, {reg}) -> ()
    "tile.copy"(%out, %r) {{scope = "warp"}} : (memref<32x16xf16>, {reg}) -> ()
    gpu.return
  }}
}}
"""


def _register_chain() -> str:
    """A warp's register tiles through fill, maximum, sub, div and minimum with a scalar."""
    reg = "memref<32x8xf32, #gpu.address_space<private>>"
    layout = '#tile.layout<"S[(32, 8):(1@laneid, 1)]">'
    binary = "operandSegmentSizes = array<i32: 1, 1, 1, 0>"
    steps = "\n".join(
        f'    "tile.elementwise"(%r, %r, %q) {{op = "{op}", scope = "warp", {binary}}} '
        f": ({reg}, {reg}, {reg}) -> ()" for op in ("max", "sub", "div", "min"))
    return f"""gpu.module @kernels {{
  gpu.func @k(%a: memref<32x8xf32>, %s: f32, %out: memref<32x8xf32>) kernel attributes {{known_block_size = array<i32: 32, 1, 1>, known_grid_size = array<i32: 1, 1, 1>}} {{
    %r = "tile.alloc"() {{layout = {layout}}} : () -> {reg}
    %q = "tile.alloc"() {{layout = {layout}}} : () -> {reg}
    "tile.copy"(%r, %a) {{scope = "warp"}} : ({reg}, memref<32x8xf32>) -> ()
    "tile.elementwise"(%q, %s) {{op = "fill", scope = "warp", operandSegmentSizes = array<i32: 1, 1, 0, 0>}} : ({reg}, f32) -> ()
{steps}
    "tile.copy"(%out, %r) {{scope = "warp"}} : (memref<32x8xf32>, {reg}) -> ()
    gpu.return
  }}
}}
"""


# ---------------------------------------------------------- issue 11's features
# broadcast inputs (size 1), register and memory operands mixed, tails (the overlap
# copied, padding past the source's end), tail_fill

_REG = "#gpu.address_space<private>"
_SMEM = "#gpu.address_space<workgroup>"


def _kernel(args: str, threads: int, body: str) -> str:
    return f"""gpu.module @kernels {{
  gpu.func @k({args}) kernel attributes {{known_block_size = array<i32: {threads}, 1, 1>, known_grid_size = array<i32: 1, 1, 1>}} {{
{body}    gpu.return
  }}
}}
"""


def _gmem_broadcast() -> str:
    """out = a * b + c over 4x64 with b (1, 64) and c (4, 1) read at index 0 there."""
    return _kernel("%a: memref<4x64xf32>, %b: memref<1x64xf32>, %c: memref<4x1xf32>, "
                   "%out: memref<4x64xf32>", 64,
                   '    "tile.elementwise"(%out, %a, %b, %c) {op = "fma", scope = "cta", '
                   "operandSegmentSizes = array<i32: 1, 1, 1, 1>} : (memref<4x64xf32>, "
                   "memref<4x64xf32>, memref<1x64xf32>, memref<4x1xf32>) -> ()\n")


def _smem_broadcast() -> str:
    """A 32x48 shared tile minus a shared row (1, 48), then times a column (32, 1)."""
    tile, row, col = (f"memref<{d}xf32, {_SMEM}>" for d in ("32x48", "1x48", "32x1"))
    return _kernel("%a: memref<32x48xf32>, %r: memref<1x48xf32>, %c: memref<32x1xf32>, "
                   "%out: memref<32x48xf32>", 96, f"""\
    %s = "tile.alloc"() {{layout = #tile.layout<"S[(32, 48)]">}} : () -> {tile}
    %sr = "tile.alloc"() {{layout = #tile.layout<"S[(1, 48)]">}} : () -> {row}
    %sc = "tile.alloc"() {{layout = #tile.layout<"S[(32, 1)]">}} : () -> {col}
    "tile.copy"(%s, %a) {{scope = "cta"}} : ({tile}, memref<32x48xf32>) -> ()
    "tile.copy"(%sr, %r) {{scope = "cta"}} : ({row}, memref<1x48xf32>) -> ()
    "tile.copy"(%sc, %c) {{scope = "cta"}} : ({col}, memref<32x1xf32>) -> ()
    "tile.elementwise"(%s, %s, %sr) {{op = "sub", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>}} : ({tile}, {tile}, {row}) -> ()
    "tile.elementwise"(%s, %s, %sc) {{op = "mul", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>}} : ({tile}, {tile}, {col}) -> ()
    "tile.copy"(%out, %s) {{scope = "cta"}} : (memref<32x48xf32>, {tile}) -> ()
""")


def _register_broadcast() -> str:
    """A warp's 32x8 register tile (lane i: row i) minus its rows' values (32, 1) in the
    same lanes, times a row (1, 8) that every lane holds (R[32:1@laneid])."""
    tile, col, row = (f"memref<{d}xf32, {_REG}>" for d in ("32x8", "32x1", "1x8"))
    return _kernel("%a: memref<32x8xf32>, %c: memref<32x1xf32>, %r: memref<1x8xf32>, "
                   "%out: memref<32x8xf32>", 32, f"""\
    %x = "tile.alloc"() {{layout = #tile.layout<"S[(32, 8):(1@laneid, 1)]">}} : () -> {tile}
    %xc = "tile.alloc"() {{layout = #tile.layout<"S[(32, 1):(1@laneid, 1)]">}} : () -> {col}
    %xr = "tile.alloc"() {{layout = #tile.layout<"S[(1, 8)], R[32:1@laneid]">}} : () -> {row}
    "tile.copy"(%x, %a) {{scope = "warp"}} : ({tile}, memref<32x8xf32>) -> ()
    "tile.copy"(%xc, %c) {{scope = "warp"}} : ({col}, memref<32x1xf32>) -> ()
    "tile.copy"(%xr, %r) {{scope = "warp"}} : ({row}, memref<1x8xf32>) -> ()
    "tile.elementwise"(%x, %x, %xc) {{op = "sub", scope = "warp", operandSegmentSizes = array<i32: 1, 1, 1, 0>}} : ({tile}, {tile}, {col}) -> ()
    "tile.elementwise"(%x, %x, %xr) {{op = "mul", scope = "warp", operandSegmentSizes = array<i32: 1, 1, 1, 0>}} : ({tile}, {tile}, {row}) -> ()
    "tile.copy"(%out, %x) {{scope = "warp"}} : (memref<32x8xf32>, {tile}) -> ()
""")


def _mixed(dtype: str) -> str:
    """Register and memory operands in one op (elementwise/reg_mem): x_reg = x_reg + s_smem,
    out_global = x_reg * w_global, with x [4, 128, 4] over 128 threads."""
    elem = DTYPES[dtype].mlir
    mem = f"memref<512x4x{elem}>"
    view = f"memref<4x128x4x{elem}>"
    reg, smem = f"memref<4x128x4x{elem}, {_REG}>", f"memref<4x128x4x{elem}, {_SMEM}>"
    expand = "[[0, 1], [2]] output_shape [4, 128, 4]"
    return _kernel(f"%a: {mem}, %s: {mem}, %w: {mem}, %out: {mem}", 128, f"""\
    %av = memref.expand_shape %a {expand} : {mem} into {view}
    %sv = memref.expand_shape %s {expand} : {mem} into {view}
    %wv = memref.expand_shape %w {expand} : {mem} into {view}
    %ov = memref.expand_shape %out {expand} : {mem} into {view}
    %x = "tile.alloc"() {{layout = #tile.layout<"S[(4, 128, 4):(4, 1@tid, 1)]">}} : () -> {reg}
    %sh = "tile.alloc"() {{layout = #tile.layout<"S[(4, 128, 4)]">}} : () -> {smem}
    "tile.copy"(%x, %av) {{scope = "cta"}} : ({reg}, {view}) -> ()
    "tile.copy"(%sh, %sv) {{scope = "cta"}} : ({smem}, {view}) -> ()
    "tile.elementwise"(%x, %x, %sh) {{op = "add", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>}} : ({reg}, {reg}, {smem}) -> ()
    "tile.elementwise"(%ov, %x, %wv) {{op = "mul", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>}} : ({view}, {reg}, {view}) -> ()
""")


def _register_tail() -> str:
    """A warp's 32x32 register tile (lane i: row i) from a 30 x n view (n dynamic):
    padding -1 past the view; then tail_fill sets positions >= 31 * 32 - 3 to 2.5."""
    tile = f"memref<32x32xf32, {_REG}>"
    view = "memref<30x?xf32, strided<[40, 1]>>"
    return _kernel("%a: memref<30x40xf32>, %n: i32, %out: memref<32x32xf32>", 32, f"""\
    %cols = arith.index_cast %n : i32 to index
    %v = memref.subview %a[0, 0] [30, %cols] [1, 1] : memref<30x40xf32> to {view}
    %x = "tile.alloc"() {{layout = #tile.layout<"S[(32, 32):(1@laneid, 1)]">}} : () -> {tile}
    "tile.copy"(%x, %v) {{scope = "warp", padding = -1.0 : f32}} : ({tile}, {view}) -> ()
    %value = arith.constant 2.5 : f32
    %limit = arith.constant 989 : i64
    %base = arith.constant 0 : i64
    "tile.elementwise"(%x, %x, %value, %limit, %base) {{op = "tail_fill", scope = "warp", operandSegmentSizes = array<i32: 1, 1, 1, 2>}} : ({tile}, {tile}, f32, i64, i64) -> ()
    "tile.copy"(%out, %x) {{scope = "warp"}} : (memref<32x32xf32>, {tile}) -> ()
""")


def _register_tail_inputs(rng: np.random.Generator) -> list[Array | float]:
    return [rng.uniform(-4, 4, (30, 40)).astype(np.float32), int(rng.integers(1, 33))]


def _register_tail_reference(a: Array, n: Array) -> Array:
    cols = int(n)
    out = np.full((32, 32), -1.0)
    out[:30, :cols] = a[:, :cols]
    out.reshape(-1)[989:] = 2.5
    return out


def _shared_tail() -> str:
    """A shared 64x64 tile from the first n rows of a global tensor (padding 7 past them),
    then the tile's first m x k elements over a copy of b (the overlap written back)."""
    smem = f"memref<64x64xf32, {_SMEM}>"
    rows, part = "memref<?x64xf32, strided<[64, 1]>>", "memref<?x?xf32, strided<[64, 1]>>"
    return _kernel("%a: memref<50x64xf32>, %b: memref<64x64xf32>, %n: i32, %m: i32, %k: i32, "
                   "%out: memref<64x64xf32>", 128, f"""\
    %rows = arith.index_cast %n : i32 to index
    %mi = arith.index_cast %m : i32 to index
    %ki = arith.index_cast %k : i32 to index
    %v = memref.subview %a[0, 0] [%rows, 64] [1, 1] : memref<50x64xf32> to {rows}
    %s = "tile.alloc"() {{layout = #tile.layout<"S[(64, 64)]">}} : () -> {smem}
    "tile.copy"(%s, %v) {{scope = "cta", padding = 7.0 : f32}} : ({smem}, {rows}) -> ()
    "tile.copy"(%out, %b) {{scope = "cta"}} : (memref<64x64xf32>, memref<64x64xf32>) -> ()
    %o = memref.subview %out[0, 0] [%mi, %ki] [1, 1] : memref<64x64xf32> to {part}
    "tile.copy"(%o, %s) {{scope = "cta"}} : ({part}, {smem}) -> ()
""")


def _shared_tail_inputs(rng: np.random.Generator) -> list[Array | float]:
    a = rng.uniform(-4, 4, (50, 64)).astype(np.float32)
    b = rng.uniform(-4, 4, (64, 64)).astype(np.float32)
    return [a, b, int(rng.integers(0, 51)), int(rng.integers(0, 65)), int(rng.integers(0, 65))]


def _shared_tail_reference(a: Array, b: Array, n: Array, m: Array, k: Array) -> Array:
    tile = np.full((64, 64), 7.0)
    tile[:int(n)] = a[:int(n)]
    out = b.copy()
    out[:int(m), :int(k)] = tile[:int(m), :int(k)]
    return out


def _chain_inputs(rng: np.random.Generator) -> list[Array | float]:
    return [rng.uniform(-4, 4, (32, 8)).astype(np.float32), float(np.float32(rng.uniform(0.5, 2)))]


def _chain_reference(a: Array, s: Array) -> Array:
    """Each step rounded to f32, as the kernel computes it (every step is exact)."""
    def f32(x: Array) -> Array:
        return np.asarray(x, np.float32).astype(np.float64)

    x = f32(np.maximum(a, s))
    x = f32(x - s)
    x = f32(x / s)
    return f32(np.minimum(x, s))


def _sqrt(x: Array) -> Array:
    root: Array = np.sqrt(x)
    return root


PROGRAMS: list[Program] = [
    Program("seed_000_smem_sqrt", (EXAMPLES / "seed_000_smem_sqrt.mlir").read_text(),
            uniform((32, 32), "f32", 0.0, 100.0), _sqrt, (32, 32), kernel="unary_op",
            in_place=True),
    Program("seed_003_reg_sqrt", (EXAMPLES / "seed_003_reg_sqrt.mlir").read_text(),
            uniform((32, 8), "f32", 0.0, 100.0), _sqrt, (32, 8), kernel="reg_sqrt"),
    # several rounds, 128- and 512-thread CTAs
    Program("smem_exp_rounds_128", _smem_pipeline((64, 64), "S[(64, 64)]", "exp", "f32", threads=128),
            uniform((64, 64), "f32", -8.0, 8.0), np.exp, (64, 64), ulps=2),
    Program("smem_square_512", _smem_pipeline((48, 80), "S[(48, 80)]", "mul", "f32", threads=512, arity=2),
            uniform((48, 80), "f32"), lambda a: a * a, (48, 80)),
    # layouts with non-unit strides: padded rows (vectors per row), column-major (scalars)
    Program("smem_padded_rows", _smem_pipeline((32, 32), "S[(32, 32):(36, 1)]", "sqrt",
                                               "f32", threads=256),
            uniform((32, 32), "f32", 0.0, 9.0), _sqrt, (32, 32)),
    Program("smem_column_major", _smem_pipeline((32, 33), "S[(32, 33):(1, 32)]", "neg",
                                                "f32", threads=96),
            uniform((32, 33), "f32"), np.negative, (32, 33)),
    # narrow floats in shared memory: bf16 padded, f16 exact arithmetic
    Program("smem_bf16_padded_512", _smem_pipeline((64, 64), "S[(64, 64):(72, 1)]", "mul",
                                                   "bf16", threads=512, arity=2),
            uniform((64, 64), "bf16"), lambda a: a * a, (64, 64), dtype="bf16"),
    Program("smem_f16_reciprocal", _smem_pipeline((16, 40), "S[(16, 40)]", "reciprocal",
                                                  "f16", threads=64),
            uniform((16, 40), "f16", 0.5, 4.0), np.reciprocal, (16, 40), dtype="f16"),
    # registers: warpgroup scope, a replicated layout, packed halves
    Program("warpgroup_registers_fma", _warpgroup_registers("f32"),
            uniform((2, 4, 32, 8), "f32"), lambda a: a * a + a, (2, 4, 32, 8)),
    Program("warpgroup_registers_bf16", _warpgroup_registers("bf16"),
            uniform((2, 4, 32, 8), "bf16"), lambda a: a * a + a, (2, 4, 32, 8), dtype="bf16",
            ulps=1),
    Program("replicated_registers", _replicated(), uniform((32, 4), "f32"),
            lambda a: a + a, (32, 4)),
    Program("packed_f16_registers", _packed_registers(), uniform((32, 16), "f16"),
            lambda a: a + a, (32, 16), dtype="f16"),
    Program("register_chain_fill_max_sub_div_min", _register_chain(), _chain_inputs,
            _chain_reference, (32, 8)),
    # issue 11: broadcasts, mixed operands, tails
    Program("gmem_broadcast_fma", _gmem_broadcast(),
            lambda rng: [rng.uniform(-4, 4, s).astype(np.float32)
                         for s in ((4, 64), (1, 64), (4, 1))],
            lambda a, b, c: a * b + c, (4, 64), ulps=1),
    Program("smem_broadcast_row_column", _smem_broadcast(),
            lambda rng: [rng.uniform(-4, 4, s).astype(np.float32)
                         for s in ((32, 48), (1, 48), (32, 1))],
            lambda a, r, c: np.asarray(np.float32(a - r), np.float64) * c, (32, 48)),
    Program("register_broadcast_row_column", _register_broadcast(),
            lambda rng: [rng.uniform(-4, 4, s).astype(np.float32)
                         for s in ((32, 8), (32, 1), (1, 8))],
            lambda a, c, r: np.asarray(np.float32(a - c), np.float64) * r, (32, 8)),
    Program("mixed_register_shared_global", _mixed("f32"),
            lambda rng: [rng.uniform(-4, 4, (512, 4)).astype(np.float32) for _ in range(3)],
            lambda a, s, w: np.asarray(np.float32(a + s), np.float64) * w, (512, 4)),
    Program("mixed_register_shared_global_bf16", _mixed("bf16"),
            lambda rng: [rng.uniform(-4, 4, (512, 4)).astype(DTYPES["bf16"].np_dtype())
                         for _ in range(3)],
            lambda a, s, w: (a + s).astype(DTYPES["bf16"].np_dtype()).astype(np.float64) * w,
            (512, 4), dtype="bf16"),
    Program("register_tail_padding_tail_fill", _register_tail(), _register_tail_inputs,
            _register_tail_reference, (32, 32)),
    Program("shared_tail_padding_overlap", _shared_tail(), _shared_tail_inputs,
            _shared_tail_reference, (64, 64)),
]

EMULATED = ("gmem_broadcast_fma", "register_broadcast_row_column", "register_tail_padding_tail_fill")
"""Programs the null tier also runs on the host emulator (tests/support/host.py): no shared
memory, barriers or shuffles."""
