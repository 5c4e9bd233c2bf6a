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
]
