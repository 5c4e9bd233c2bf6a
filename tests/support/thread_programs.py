"""Thread counts that do not divide evenly (issue 16, part 5): the seeds' programs and the
other primitives at CTA sizes that are not whole warps or warpgroups, 3-D blocks, and
reductions whose thread groups do not divide the threads.

Every program here either compiles to a correct kernel (the null tier compiles it and
runs it on the CPU with the SIMT emulator, support/simt.py; the gpu tier runs it on a
GPU; both against float64 NumPy on fresh random inputs with poisoned outputs) or is
refused with a located error whose message says why (REFUSED).

Scopes: `cta` at every block; `thread` on a row per thread; `warp` on a slice per warp
where the block is whole warps (refused elsewhere: a partial last warp would leave its
missing lanes' elements undone and its shuffles undefined); `warpgroup` on a slice per
warpgroup in blocks of 256 threads, refused in every block of BLOCKS (none is whole
warpgroups: dialect/tile.irdl.mlir says why it is refused rather than shrunk to the
threads there are).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

import numpy as np

import tile_mlir.lang as tl
from support.primitive_programs import EXAMPLES, Program, uniform
from support.reduction_programs import Reduce
from tile_mlir.dtypes import DTYPES

Block = tuple[int, int, int]

SIZES = (1, 7, 31, 33, 48, 96, 100, 129, 250, 1000)
"""CTA sizes: one thread, partial single warps, one warp and a lane, partial last warps
of 16, 4, 1, 26 and 8 lanes, whole warps that are not whole warpgroups."""

BLOCKS: tuple[Block, ...] = (*((n, 1, 1) for n in SIZES), (10, 10, 1), (7, 3, 2), (5, 5, 5),
                             (16, 2, 3))
"""The sizes as x blocks, and 3-D blocks of 100, 42, 125 (odd: a last warp of 29 lanes)
and 96 threads (whole warps)."""


def threads(block: Block) -> int:
    return math.prod(block)


def label(block: Block) -> str:
    return str(block[0]) if block[1:] == (1, 1) else "x".join(map(str, block))


def whole_warps(block: Block) -> bool:
    return threads(block) % 32 == 0


def _kernel(args: str, block: Block, body: str, name: str = "k") -> str:
    x, y, z = block
    return f"""gpu.module @kernels {{
  gpu.func @{name}({args}) kernel attributes {{known_block_size = array<i32: {x}, {y}, {z}>, known_grid_size = array<i32: 1, 1, 1>}} {{
{body}    gpu.return
  }}
}}
"""


def _linear_tid(block: Block) -> str:
    """IR for %tid, the thread's linear index x + bx * (y + by * z) (hardware warps are
    consecutive linear indices)."""
    x, y, _ = block
    return f"""\
    %tx = gpu.thread_id x
    %ty = gpu.thread_id y
    %tz = gpu.thread_id z
    %bx = arith.constant {x} : index
    %bxy = arith.constant {x * y} : index
    %ty_x = arith.muli %ty, %bx : index
    %tz_xy = arith.muli %tz, %bxy : index
    %txy = arith.addi %tx, %ty_x : index
    %tid = arith.addi %txy, %tz_xy : index
"""


def _memref(shape: tuple[int, ...], dtype: str = "f32", space: str = "") -> str:
    dims = "x".join(map(str, shape))
    return f"memref<{dims}x{DTYPES[dtype].mlir}{', ' + space if space else ''}>"


_SMEM = "#gpu.address_space<workgroup>"
_REG = "#gpu.address_space<private>"
_UNARY = "operandSegmentSizes = array<i32: 1, 1, 0, 0>"
_BINARY = "operandSegmentSizes = array<i32: 1, 1, 1, 0>"
_TERNARY = "operandSegmentSizes = array<i32: 1, 1, 1, 1>"


def _sqrt(x: np.ndarray) -> np.ndarray:
    root: np.ndarray = np.sqrt(x)
    return root


# ------------------------------------------------------------ shared memory (seeds 000, 001)


def seed_000(block: Block) -> Program:
    """Seed 000's own program (smem sqrt of a 32x32 tile, in place) at this block."""
    text = (EXAMPLES / "seed_000_smem_sqrt.mlir").read_text()
    x, y, z = block
    text = text.replace("array<i32: 256, 1, 1>", f"array<i32: {x}, {y}, {z}>")
    return Program(f"seed_000_smem_sqrt-{label(block)}", text,
                   uniform((32, 32), "f32", 0.0, 100.0), _sqrt, (32, 32), kernel="unary_op",
                   in_place=True)


def smem_f16(block: Block) -> Program:
    """A 17x45 f16 tile through shared memory, squared there: 765 halves, 95 vectors of 8
    and a scalar tail of 5 over the block's threads."""
    g, s = _memref((17, 45), "f16"), _memref((17, 45), "f16", _SMEM)
    body = f"""\
    %s = "tile.alloc"() {{layout = #tile.layout<"S[(17, 45)]">}} : () -> {s}
    "tile.copy"(%s, %a) {{scope = "cta"}} : ({s}, {g}) -> ()
    "tile.elementwise"(%s, %s, %s) {{op = "mul", scope = "cta", {_BINARY}}} : ({s}, {s}, {s}) -> ()
    "tile.copy"(%out, %s) {{scope = "cta"}} : ({g}, {s}) -> ()
"""
    return Program(f"smem_f16_square-{label(block)}", _kernel(f"%a: {g}, %out: {g}", block, body),
                   uniform((17, 45), "f16"), lambda a: a * a, (17, 45), dtype="f16")


def copy_smem(block: Block) -> Program:
    """A 33x7 f32 tile to shared memory and back (copy/gmem_smem both ways, 231 scalars)."""
    g, s = _memref((33, 7)), _memref((33, 7), "f32", _SMEM)
    body = f"""\
    %s = "tile.alloc"() {{layout = #tile.layout<"S[(33, 7)]">}} : () -> {s}
    "tile.copy"(%s, %a) {{scope = "cta"}} : ({s}, {g}) -> ()
    "tile.copy"(%out, %s) {{scope = "cta"}} : ({g}, {s}) -> ()
"""
    return Program(f"copy_global_shared_global-{label(block)}",
                   _kernel(f"%a: {g}, %out: {g}", block, body), uniform((33, 7), "f32"),
                   lambda a: a, (33, 7))


# ------------------------------------------------------------ registers (seed 003)


def lane_layout(n: int) -> tuple[tuple[int, ...], str]:
    """A register layout over laneid (and warpid) whose threads are exactly n: whole warps
    [W, 32, 8]; a partial last warp of L lanes [L, W, 8] (lane l of warp w holds row
    (l, w): the lanes past L of the other warps hold no row of their own)."""
    if n <= 32:
        return (n, 8), f"S[({n}, 8):(1@laneid, 1)]"
    warps, lanes = -(-n // 32), n % 32
    if not lanes:
        return (warps, 32, 8), f"S[({warps}, 32, 8):(1@warpid, 1@laneid, 1)]"
    return (lanes, warps, 8), f"S[({lanes}, {warps}, 8):(1@laneid, 1@warpid, 1)]"


def _reg_sqrt(name: str, block: Block, shape: tuple[int, ...], layout: str) -> Program:
    """Seed 003's pipeline at CTA scope: global -> shared -> registers, sqrt there,
    registers -> shared -> global."""
    g, s, r = _memref(shape), _memref(shape, "f32", _SMEM), _memref(shape, "f32", _REG)
    row_major = "S[(" + ", ".join(map(str, shape)) + ")]"
    body = f"""\
    %s = "tile.alloc"() {{layout = #tile.layout<"{row_major}">}} : () -> {s}
    "tile.copy"(%s, %a) {{scope = "cta"}} : ({s}, {g}) -> ()
    %r = "tile.alloc"() {{layout = #tile.layout<"{layout}">}} : () -> {r}
    "tile.copy"(%r, %s) {{scope = "cta"}} : ({r}, {s}) -> ()
    "tile.elementwise"(%r, %r) {{op = "sqrt", scope = "cta", {_UNARY}}} : ({r}, {r}) -> ()
    "tile.copy"(%s, %r) {{scope = "cta"}} : ({s}, {r}) -> ()
    "tile.copy"(%out, %s) {{scope = "cta"}} : ({g}, {s}) -> ()
"""
    return Program(f"{name}-{label(block)}", _kernel(f"%a: {g}, %out: {g}", block, body),
                   uniform(shape, "f32", 0.0, 100.0), _sqrt, shape)


def reg_sqrt_tid(block: Block) -> Program:
    """Seed 003 over the CTA: thread t holds row t (S[(T, 8):(1@tid, 1)])."""
    n = threads(block)
    return _reg_sqrt("reg_sqrt_tid", block, (n, 8), f"S[({n}, 8):(1@tid, 1)]")


def reg_sqrt_lanes(block: Block) -> Program:
    """Seed 003 over the CTA with a layout over laneid and warpid (lane_layout)."""
    shape, layout = lane_layout(threads(block))
    return _reg_sqrt("reg_sqrt_lanes", block, shape, layout)


def reg_copies(block: Block) -> Program:
    """Registers from and to global memory directly (copy/reg both ways) and from and to
    shared memory: an (T, 5) tile, thread t's row in 5 registers, doubled there."""
    n = threads(block)
    shape = (n, 5)
    g, s, r = _memref(shape), _memref(shape, "f32", _SMEM), _memref(shape, "f32", _REG)
    body = f"""\
    %r = "tile.alloc"() {{layout = #tile.layout<"S[({n}, 5):(1@tid, 1)]">}} : () -> {r}
    %s = "tile.alloc"() {{layout = #tile.layout<"S[({n}, 5)]">}} : () -> {s}
    "tile.copy"(%r, %a) {{scope = "cta"}} : ({r}, {g}) -> ()
    "tile.elementwise"(%r, %r, %r) {{op = "add", scope = "cta", {_BINARY}}} : ({r}, {r}, {r}) -> ()
    "tile.copy"(%s, %r) {{scope = "cta"}} : ({s}, {r}) -> ()
    "tile.copy"(%r, %s) {{scope = "cta"}} : ({r}, {s}) -> ()
    "tile.copy"(%out, %r) {{scope = "cta"}} : ({g}, {r}) -> ()
"""
    return Program(f"reg_copies_both_ways-{label(block)}",
                   _kernel(f"%a: {g}, %out: {g}", block, body), uniform(shape, "f32"),
                   lambda a: a + a, shape)


def reg_copy_unit_dim(block: Block) -> Program:
    """A (4, 4, 1, 8) register tile whose size-1 dim steps 3 warps (S[(4, 4, 1, 8):(1@laneid,
    1@warpid, 3@warpid, 1)], 100 threads): the partial last warp is warp 3, whose digit
    of that dim must wrap to 0 (a digit of 1 read and wrote past the tile)."""
    shape = (4, 4, 1, 8)
    g, r = _memref(shape), _memref(shape, "f32", _REG)
    layout = "S[(4, 4, 1, 8):(1@laneid, 1@warpid, 3@warpid, 1)]"
    body = f"""\
    %r = "tile.alloc"() {{layout = #tile.layout<"{layout}">}} : () -> {r}
    "tile.copy"(%r, %a) {{scope = "cta"}} : ({r}, {g}) -> ()
    "tile.copy"(%out, %r) {{scope = "cta"}} : ({g}, {r}) -> ()
"""
    return Program(f"reg_copy_unit_warp_dim-{label(block)}",
                   _kernel(f"%a: {g}, %out: {g}", block, body), uniform(shape, "f32"),
                   lambda a: a, shape)


def reg_sqrt_warps(block: Block) -> Program:
    """Seed 003's register tile at warp scope, each warp its own 32x8 slice of a (W, 32, 8)
    tensor (whole warps only)."""
    warps = threads(block) // 32
    full, reg = _memref((warps, 32, 8)), _memref((32, 8), "f32", _REG)
    view = "memref<32x8xf32, strided<[8, 1], offset: ?>>"
    body = _linear_tid(block) + f"""\
    %c32 = arith.constant 32 : index
    %w = arith.divui %tid, %c32 : index
    %in = memref.subview %a[%w, 0, 0] [1, 32, 8] [1, 1, 1] : {full} to {view}
    %o = memref.subview %out[%w, 0, 0] [1, 32, 8] [1, 1, 1] : {full} to {view}
    %r = "tile.alloc"() {{layout = #tile.layout<"S[(32, 8):(1@laneid, 1)]">}} : () -> {reg}
    "tile.copy"(%r, %in) {{scope = "warp"}} : ({reg}, {view}) -> ()
    "tile.elementwise"(%r, %r) {{op = "sqrt", scope = "warp", {_UNARY}}} : ({reg}, {reg}) -> ()
    "tile.copy"(%o, %r) {{scope = "warp"}} : ({view}, {reg}) -> ()
"""
    shape = (warps, 32, 8)
    return Program(f"reg_sqrt_warp_slices-{label(block)}",
                   _kernel(f"%a: {full}, %out: {full}", block, body),
                   uniform(shape, "f32", 0.0, 100.0), _sqrt, shape)


# ------------------------------------------------------------ global memory


def gmem_fma(block: Block) -> Program:
    """out = a * b + c over 37x45 f32 at CTA scope: 416 float4s and a scalar tail."""
    g = _memref((37, 45))
    body = (f'    "tile.elementwise"(%out, %a, %b, %c) {{op = "fma", scope = "cta", {_TERNARY}}} '
            f": ({g}, {g}, {g}, {g}) -> ()\n")
    return Program(f"gmem_fma-{label(block)}",
                   _kernel(f"%a: {g}, %b: {g}, %c: {g}, %out: {g}", block, body),
                   lambda rng: [rng.uniform(-4, 4, (37, 45)).astype(np.float32)
                                for _ in range(3)],
                   lambda a, b, c: a * b + c, (37, 45))


def gmem_fma_staged(block: Block) -> Program:
    """gmem_fma with elementwise/gmem's options: 32-byte vectors (two accesses each) and
    the loads of 3 rounds in flight."""
    program = gmem_fma(block)
    text = program.mlir.replace('scope = "cta",', 'scope = "cta", vector_bytes = 32 : i64, '
                                'stage = 3 : i64,')
    return Program(f"gmem_fma_staged-{label(block)}", text, program.inputs, program.expected,
                   program.out_shape)


def reg_mem_tail(block: Block) -> Program:
    """A register tile (T, 8) beside global operands of (T, 6): out = x * w on the overlap
    (elementwise/reg_mem, the vector that straddles column 6 taken element by element)."""
    n = threads(block)
    tile, part = _memref((n, 8)), _memref((n, 6))
    reg = _memref((n, 8), "f32", _REG)
    body = f"""\
    %x = "tile.alloc"() {{layout = #tile.layout<"S[({n}, 8):(1@tid, 1)]">}} : () -> {reg}
    "tile.copy"(%x, %a) {{scope = "cta"}} : ({reg}, {tile}) -> ()
    "tile.elementwise"(%out, %x, %w) {{op = "mul", scope = "cta", {_BINARY}}} : ({part}, {reg}, {part}) -> ()
"""
    return Program(f"reg_mem_tail-{label(block)}",
                   _kernel(f"%a: {tile}, %w: {part}, %out: {part}", block, body),
                   lambda rng: [rng.uniform(-4, 4, (n, 8)).astype(np.float32),
                                rng.uniform(-4, 4, (n, 6)).astype(np.float32)],
                   lambda a, w: a[:, :6] * w, (n, 6))


def gmem_thread_rows(block: Block) -> Program:
    """Thread scope: thread t squares row t of a (T, 45) tensor by itself."""
    n = threads(block)
    full = _memref((n, 45))
    view = "memref<1x45xf32, strided<[45, 1], offset: ?>>"
    body = _linear_tid(block) + f"""\
    %in = memref.subview %a[%tid, 0] [1, 45] [1, 1] : {full} to {view}
    %o = memref.subview %out[%tid, 0] [1, 45] [1, 1] : {full} to {view}
    "tile.elementwise"(%o, %in, %in) {{op = "mul", scope = "thread", {_BINARY}}} : ({view}, {view}, {view}) -> ()
"""
    return Program(f"gmem_thread_rows-{label(block)}",
                   _kernel(f"%a: {full}, %out: {full}", block, body), uniform((n, 45), "f32"),
                   lambda a: a * a, (n, 45))


def gmem_warp_slices(block: Block) -> Program:
    """Warp scope: warp w negates its (3, 45) slice of a (W, 3, 45) tensor."""
    warps = -(-threads(block) // 32)
    full = _memref((warps, 3, 45))
    view = "memref<3x45xf32, strided<[45, 1], offset: ?>>"
    body = _linear_tid(block) + f"""\
    %c32 = arith.constant 32 : index
    %w = arith.divui %tid, %c32 : index
    %in = memref.subview %a[%w, 0, 0] [1, 3, 45] [1, 1, 1] : {full} to {view}
    %o = memref.subview %out[%w, 0, 0] [1, 3, 45] [1, 1, 1] : {full} to {view}
    "tile.elementwise"(%o, %in) {{op = "neg", scope = "warp", {_UNARY}}} : ({view}, {view}) -> ()
"""
    shape = (warps, 3, 45)
    return Program(f"gmem_warp_slices-{label(block)}",
                   _kernel(f"%a: {full}, %out: {full}", block, body), uniform(shape, "f32"),
                   np.negative, shape)


def warpgroup_sqrt(block: Block) -> Program:
    """Warpgroup scope: seed 000's tile in shared memory (refused unless whole warpgroups)."""
    program = seed_000(block)
    return Program(f"warpgroup_smem_sqrt-{label(block)}",
                   program.mlir.replace('scope = "cta"', 'scope = "warpgroup"'),
                   program.inputs, program.expected, program.out_shape, kernel=program.kernel,
                   in_place=True)


# ------------------------------------------------------------ reductions


def _reduce(block: Block, kind: str, shape: tuple[int, ...], **options: object) -> Reduce:
    return Reduce(kind, shape, threads=threads(block), block=block, **options)  # type: ignore[arg-type]


def reductions(block: Block) -> list[Reduce]:
    """Seed 001's shared reduction and its relatives at this block, and register
    reductions across the block's (partial) warps."""
    n = threads(block)
    cases = [
        _reduce(block, "sum", (4, 8)),  # seed 001's tile
        _reduce(block, "max", (5, 300), nan=True),  # rows split over groups
        _reduce(block, "sum", (37, 3)),  # rows shorter than a group
        _reduce(block, "sum", (200, 33), memory="global"),  # reduce/gmem
        _reduce(block, "sum", (9, 70), axes=(0,), memory="global"),  # reduce/columns
        _reduce(block, "sum", (n, 4), axes=(0, 1), memory="registers", keepdims=True,
                layout=f"S[({n}, 4):(1@tid, 1)]|S[(1, 1)], R[{n}:1@tid]"),
        _reduce(block, "max", (n, 3), axes=(0,), memory="registers", into="global",
                layout=f"S[({n}, 3):(1@tid, 1)]|"),
    ]
    lanes = n & -n  # groups of `lanes` threads, n / lanes of them
    if lanes > 1:
        groups = n // lanes
        spread = f"S[({lanes}, {groups}):(1@tid, {lanes}@tid)]"
        cases += [
            _reduce(block, "sum", (lanes, groups), axes=(1,), memory="registers",
                    layout=f"{spread}|S[{lanes}:1@tid], R[{groups}:{lanes}@tid]"),
            _reduce(block, "min", (lanes, groups), axes=(0,), memory="registers",
                    layout=f"{spread}|S[{groups}:{lanes}@tid], R[{lanes}:1@tid]"),
        ]
    return cases


def lang_seed_000(block: int | Block) -> tl.KernelFunction:
    """examples/seed_000_smem_sqrt.py's kernel, written with tile_mlir.lang, for `block`
    threads (an int or x, y, z)."""

    def unary_op(A: Annotated[tl.Tensor, "f32", (32, 32)]) -> None:
        tl.grid(1)
        A_smem = tl.alloc_shared((32, 32), tl.f32)
        tl.cta.copy(A_smem, A)
        tl.cta.sqrt(A_smem, A_smem)  # elementwise -> smem
        tl.cta.copy(A, A_smem)

    return tl.kernel(unary_op, threads=block)


LANG_BLOCKS: tuple[int | Block, ...] = (100, (10, 10, 1), (7, 3, 2), 1000)


def lang_warpgroup(block: int | Block) -> tl.KernelFunction:
    """Seed 000's copy at warpgroup scope: refused for a block that is not whole
    warpgroups, at the line of the call."""

    def unary_op(A: Annotated[tl.Tensor, "f32", (32, 32)]) -> None:
        tl.grid(1)
        A_smem = tl.alloc_shared((32, 32), tl.f32)
        tl.warpgroup.copy(A_smem, A)  # LANG_WARPGROUP_LINE
        tl.cta.copy(A, A_smem)

    return tl.kernel(unary_op, threads=block)


def reduce_slices(block: Block, scope: str, shape: tuple[int, int], axis: int) -> Program:
    """Warp or warpgroup scope: each warp (warpgroup) takes the max of its own (R, L) slice
    of global memory over `axis`. Long rows (and few columns) split over the scope's
    groups, whose partials meet in a shared scratch: each warp (warpgroup) needs its own,
    or they overwrite each other's partials."""
    width = 32 if scope == "warp" else 128
    count = threads(block) // width
    rows, length = shape
    kept = rows if axis == 1 else length
    full, out_full = _memref((count, rows, length)), _memref((count, kept))
    view = f"memref<{rows}x{length}xf32, strided<[{length}, 1], offset: ?>>"
    out_view = f"memref<{kept}xf32, strided<[1], offset: ?>>"
    body = _linear_tid(block) + f"""\
    %width = arith.constant {width} : index
    %w = arith.divui %tid, %width : index
    %in = memref.subview %a[%w, 0, 0] [1, {rows}, {length}] [1, 1, 1] : {full} to {view}
    %o = memref.subview %out[%w, 0] [1, {kept}] [1, 1] : {out_full} to {out_view}
    "tile.reduce"(%o, %in) {{kind = "max", axes = array<i64: {axis}>, scope = "{scope}"}} : ({out_view}, {view}) -> ()
"""
    return Program(f"reduce_{scope}_slices_{rows}x{length}_ax{axis}-{label(block)}",
                   _kernel(f"%a: {full}, %out: {out_full}", block, body),
                   uniform((count, rows, length), "f32"),
                   lambda a: a.max(axis=axis + 1), (count, kept))


SLICED: tuple[tuple[Block, str], ...] = (
    ((96, 1, 1), "warp"), ((16, 2, 3), "warp"), ((256, 1, 1), "warpgroup"),
    ((128, 2, 1), "warpgroup"))
"""Blocks of whole warps (warpgroups) for ops at warp (warpgroup) scope on slices."""


def lane_reductions(block: Block) -> list[Reduce]:
    """Register reductions of lane_layout's tile: over each thread's registers (every
    block), and over the lanes where the layout gives every lane elements of its own
    (at most 32 threads, or whole warps)."""
    n = threads(block)
    shape, layout = lane_layout(n)
    whole = n > 32 and n % 32 == 0
    registers = {2: "S[({0}, {1}):(1@laneid, 1@warpid)]", 1: "S[{0}:1@laneid]"}
    if whole:
        registers[2] = "S[({0}, {1}):(1@warpid, 1@laneid)]"
    dst = registers[len(shape) - 1].format(*shape[:-1])
    cases = [_reduce(block, "sum", shape, axes=(len(shape) - 1,), memory="registers",
                     layout=f"{layout}|{dst}")]
    if n <= 32:
        cases.append(_reduce(block, "max", shape, axes=(0,), memory="registers",
                             layout=f"{layout}|S[8], R[{n}:1@laneid]"))
    elif whole:
        cases.append(_reduce(block, "max", shape, axes=(1,), memory="registers",
                             layout=f"{layout}|S[({shape[0]}, 8):(1@warpid, 1)], "
                                    "R[32:1@laneid]"))
    return cases


# ------------------------------------------------------------ refusals


@dataclass(frozen=True)
class Refused:
    """A program the compiler must refuse: its error's line and what its message says."""

    name: str
    mlir: str
    line: int  # of the op the error is at (1-based, in `mlir`)
    message: str


def _line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


def refused_warp(block: Block) -> Refused:
    program = gmem_warp_slices(block)
    n = threads(block)
    return Refused(f"warp_scope-{label(block)}", program.mlir,
                   _line_of(program.mlir, '"tile.elementwise"'),
                   f"at scope 'warp' needs whole warps, but the block has {n} threads")


def refused_warpgroup(block: Block) -> Refused:
    program = warpgroup_sqrt(block)
    n = threads(block)
    return Refused(f"warpgroup_scope-{label(block)}", program.mlir,
                   _line_of(program.mlir, '"tile.copy"'),
                   f"at scope 'warpgroup' needs whole warpgroups, but the block has {n} threads")


def refused_lanes(block: Block) -> Refused:
    """Whole warps' lanes over a block with a partial last warp: the layout reaches
    threads the block lacks."""
    n = threads(block)
    warps = -(-n // 32)
    shape, layout = (warps, 32, 8), f"S[({warps}, 32, 8):(1@warpid, 1@laneid, 1)]"
    program = _reg_sqrt("whole_warps_layout", block, shape, layout)
    return Refused(f"whole_warps_layout-{label(block)}", program.mlir,
                   _line_of(program.mlir, f'"tile.alloc"() {{layout = #tile.layout<"{layout}'),
                   f"layout spans {warps * 32} threads, the block has {n}")


def refused_lane_duplicates(block: Block) -> Refused:
    """A reduction over the lanes of lane_layout's tile in a block with a partial warp
    (and more than one warp): lanes past the last warp's hold copies of others'
    elements, which a butterfly would count twice."""
    shape, layout = lane_layout(threads(block))
    case = Reduce("sum", shape, axes=(0,), threads=threads(block), block=block,
                  memory="registers",
                  layout=f"{layout}|S[({shape[1]}, 8):(1@warpid, 1)], R[{shape[0]}:1@laneid]")
    text = case.mlir()
    return Refused(f"lane_duplicates-{label(block)}", text, _line_of(text, '"tile.reduce"'),
                   f"hold the same elements (the layout gives thread {shape[0]} none of its "
                   "own, as a layout over laneid does to lanes of a block with a partial warp)")


def refused_unpadded_group(block: Block) -> Refused:
    """A register reduction over 24 of 32 lanes whose other 8 exist (and hold other
    elements): the butterfly cannot leave them out."""
    case = Reduce("sum", (24, 2), axes=(0,), threads=threads(block), block=block,
                  memory="registers", layout="S[(24, 2):(1@tid, 24@tid)]|S[2:24@tid], R[24:1@tid]")
    text = case.mlir()
    return Refused(f"unpadded_lane_group-{label(block)}", text,
                   _line_of(text, '"tile.reduce"'),
                   "reduced axis 0 (24:1@tid) spans 24 lanes, not a power of two")


PROGRAMS: list[Program] = [
    *(make(block) for make in (seed_000, smem_f16, copy_smem, reg_sqrt_tid, reg_sqrt_lanes,
                               reg_copies, gmem_fma, gmem_thread_rows) for block in BLOCKS),
    *(make(block) for make in (reg_sqrt_warps, gmem_warp_slices) for block in BLOCKS
      if whole_warps(block)),
    *(reg_copy_unit_dim(block) for block in ((100, 1, 1), (10, 10, 1))),
    *(make(block) for make in (gmem_fma_staged, reg_mem_tail)
      for block in ((7, 1, 1), (100, 1, 1), (250, 1, 1), (7, 3, 2))),
    *(reduce_slices(block, scope, shape, axis) for block, scope in SLICED
      for shape, axis in (((2, 1000), 1), ((500, 4), 0), ((3, 40), 1))),
]
"""The programs that compile: every one is run against float64 NumPy."""

REDUCTIONS: list[Reduce] = [case for block in BLOCKS
                            for case in (*reductions(block), *lane_reductions(block))]

REFUSED: list[Refused] = [
    *(refused_warp(block) for block in BLOCKS if not whole_warps(block)),
    *(refused_warpgroup(block) for block in BLOCKS),
    *(refused_lanes(block) for block in BLOCKS if not whole_warps(block) and threads(block) > 32),
    refused_unpadded_group((48, 1, 1)),
    *(refused_lane_duplicates(block) for block in ((100, 1, 1), (10, 10, 1), (48, 1, 1))),
]
