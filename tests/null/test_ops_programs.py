"""null tier: the library's kernels are tile programs (tile_mlir.lang) behind
programs.KernelProgram: every listed signature builds and compiles, and some keep the
PTX instruction counts of the IR text writers they replaced.

Until the programs replaced them, these signatures compiled both ways to the same PTX
(save RoPE's widening of max_position for 64-bit positions with 32-bit indices:
cvt.s64.s32 for cvt.u64.u32, the front end widening index-width integers signed; the
count is never negative, one instruction either way). GOLDEN holds the writers' counts
of 16-byte loads and stores, all global loads and stores, shuffles, barriers and
parameter loads for a few of each kernel, so that a change to the programs, the front
end or the lowering that costs instructions shows here.
"""

from __future__ import annotations

import dataclasses
import pickle
import re
import subprocess
import sys

import numpy as np
import pytest
from support.emulated import Device

import tile_mlir
from tile_mlir import ops
from tile_mlir.ops.programs import KernelProgram
from tile_mlir.ops.programs.elementwise import (
    INDEX,
    ArraySpec,
    ElementwiseProgram,
    Signature,
    Strategy,
)
from tile_mlir.ops.programs.lang import LangProgram
from tile_mlir.ops.programs.reduction import (
    COLUMN_BLOCK,
    COLUMN_WIDTH,
    ReductionProgram,
    Stage,
    column_blocks,
    column_width,
    stages,
)
from tile_mlir.ops.programs.rope import RopeProgram, RopeSignature


def _a(dtype: str, *strides: str, offset: bool = False) -> ArraySpec:
    return ArraySpec(dtype, strides, offset)


DEFAULT = Strategy()


def _elementwise() -> dict[str, Signature]:
    """Every mode, stride class, index width, offset, dtype family, indexed rows (INDEX in
    every mode), scalars, in place and the strategies."""
    f32, unit = _a("f32", "1"), ("1",)
    flat = Signature("add", f32, (f32, f32), 1, "flat", DEFAULT, index_bits=32)
    blocks = Signature("add", _a("bf16", "?32", "1"), (_a("bf16", "?32", "1"),
                                                       _a("bf16", "0", "1")),
                       2, "blocks", DEFAULT, 4096, 32)
    rows = Signature("neg", _a("f32", "?32", "1"), (_a("f32", "?8", "1"),), 2, "rows",
                     DEFAULT, 0, 32)
    stream = ("f32", "i64", "i64", "i64", INDEX)
    sigs = {
        "flat": flat,
        "flat offsets, scalar": Signature("mul", _a("f16", *unit, offset=True),
                                          (_a("f16", *unit, offset=True), "f32"), 1, "flat",
                                          DEFAULT, index_bits=32),
        "flat odd and broadcast strides": Signature(
            "fma", f32, (_a("f32", "?2"), _a("f32", "0"), _a("f32", "?1")), 1, "flat",
            DEFAULT, index_bits=32),
        "blocks": blocks,
        "blocks transposed": Signature("exp", _a("f32", "?32", "1"), (_a("f32", "?1", "?32"),),
                                       2, "blocks", DEFAULT, 64, 32),
        "rows": rows,
        "rows rank 3": Signature("mul", _a("f16", "?64", "?32", "1"),
                                 (_a("f16", "?64", "0", "1"), _a("f16", "?16", "?8", "1")), 3,
                                 "rows", DEFAULT, 0, 32),
        "blocks rank 3": Signature("sub", _a("bf16", "?16", "?8", "1"),
                                   (_a("bf16", "?16", "?8", "1"), "f32"), 3, "blocks",
                                   DEFAULT, 24, 32),
        "indexed flat": Signature("dropout_philox", f32, (f32, *stream), 1, "flat", DEFAULT,
                                  index_bits=32),
        "indexed rows": Signature("dropout_philox", _a("f32", "?32", "1"),
                                  (_a("f32", "?8", "1"), *stream), 2, "rows", DEFAULT, 0, 32),
        "indexed blocks": Signature("alibi_bias", _a("f32", "?16", "1"),
                                    ("i64", "i64", "i64", INDEX), 2, "blocks", DEFAULT, 80, 32),
        "indexed blocks rank 3": Signature("dropout_philox", _a("bf16", "?64", "?32", "1"),
                                           (_a("bf16", "?64", "?32", "1"), *stream), 3,
                                           "blocks", DEFAULT, 96, 32),
        "fused": Signature("fused", _a("bf16", "?32", "1"),
                           (_a("bf16", "?32", "1"), _a("bf16", "0", "1"), "f32"), 2, "rows",
                           DEFAULT, 0, 32, expr=("add(%0, %1) : bf16", "gelu($0) : bf16",
                                                 "mul($1, %2) : bf16")),
        "compare f16": Signature("eq", _a("bool", "1"), (_a("f16", "1"), _a("f16", "1")), 1,
                                 "flat", DEFAULT, index_bits=32),
        "where": Signature("where", f32, (_a("bool", "1"), f32, "f32"), 1, "flat", DEFAULT,
                           index_bits=32),
        "i32": Signature("bitwise_and", _a("i32", "1"), (_a("i32", "1"), _a("i32", "0")), 1,
                        "flat", DEFAULT, index_bits=32),
        "i64": Signature("add", _a("i64", "1"), (_a("i64", "1"), "i64"), 1, "flat", DEFAULT,
                         index_bits=32),
        "fp8": Signature("mul", _a("f8e4m3", "1"), (_a("f8e4m3", "1"), _a("f8e4m3", "1")), 1,
                         "flat", DEFAULT, index_bits=32),
        "bool": Signature("logical_and", _a("bool", "1"), (_a("bool", "1"), _a("bool", "1")),
                          1, "flat", DEFAULT, index_bits=32),
        "in place": dataclasses.replace(flat, inplace=True),
        "direct": dataclasses.replace(flat, strategy=Strategy(256, 1, 4, 1)),
        "vector": dataclasses.replace(blocks, strategy=Strategy(128, 16, 2, 1)),
    }
    for name in ("flat", "flat offsets, scalar", "blocks", "rows", "indexed rows",
                 "indexed blocks"):
        sigs[f"{name}, i64"] = dataclasses.replace(sigs[name], index_bits=64)
    return sigs


def _reductions() -> dict[str, Stage]:
    """Rows whole and split (the partials' stages too), columns whole and split, static
    and dynamic strides, misaligned bases, a mean's scale."""
    planned = {
        "rows": stages("sum", (64, 4096, 1), "f32", "f32", acc="f32"),
        "rows many waves": stages("sum", (8192, 8192, 1), "bf16", "bf16", acc="f32"),
        "rows split": stages("max", (4, 1 << 20, 1), "bf16", "bf16", acc="f32"),
        "rows strided offset": stages("sum", (8, 1000, 1), "f16", "f16", acc="f32",
                                      strides=("?8", "1"), offset=True),
        "rows mean": stages("sum", (32, 300, 1), "f32", "f32", acc="f32", scale_count=300,
                            strides=("?4", "?2")),
        "rows split offset": stages("sum", (5, 1 << 21, 1), "f16", "f32", acc="f32",
                                    strides=("?2", "?2"), offset=True),
        "columns": stages("sum", (16, 512, 384), "f32", "f32", acc="f32"),
        "columns split": stages("prod", (1, 1 << 16, 64), "f32", "f32", acc="f32",
                                strides=("?64", "?64", "1")),
        "columns broadcast": stages("min", (3, 7, 5), "f32", "f32", acc="f32",
                                    strides=("?1", "0", "1")),
        "columns bf16": stages("max", (1, 65536, 128), "bf16", "bf16", acc="f32"),
        "columns split offset": stages("sum", (2, 100000, 3), "bf16", "bf16", acc="f32",
                                       strides=("?1", "?3", "?1"), offset=True),
        "rows tail": stages("sum", (1, 100000007, 1), "f32", "f32", acc="f32"),
        "rows tail strided": stages("min", (3, 1000003, 1), "bf16", "bf16", acc="f32",
                                    strides=("?1", "1")),
        "columns tail": stages("max", (2, 21841, 384), "bf16", "bf16", acc="f32"),
        # unfolded (as rows no multiple of 8 would be): the element's loads
        "columns odd": [Stage("sum", 1, 1024, 50257, "bf16", "bf16", 1)],
        "columns folded": stages("sum", (1, 1024, 50257), "bf16", "bf16", acc="f32"),
    }
    return {f"{name} {n}": stage for name, found in planned.items()
            for n, stage in enumerate(found)}


def _rope(style: str, dtype: str, *, key: bool = True, rotary: int = 128, pos: str = "i64",
          bits: int = 32, offset: bool = False, tokens: int = 1) -> RopeSignature:
    qk = _a(dtype, "?16", "?16", "1")
    return RopeSignature(style, _a(dtype, "?16", "?16", "1", offset=offset),
                         qk if key else None, qk, qk if key else None, _a(dtype, "?32", "1"),
                         _a(pos, "1"), heads=32, key_heads=8 if key else 0, head_dim=128,
                         rotary_dim=rotary, threads=128, tokens_per_cta=tokens,
                         index_bits=bits)


ROPE = {
    "neox": _rope("neox", "bf16"),
    "gptj": _rope("gptj", "bf16"),
    "neox no key": _rope("neox", "f16", key=False),
    "neox partial": _rope("neox", "f32", rotary=64),
    "gptj partial no key": _rope("gptj", "bf16", rotary=64, key=False),
    "i32 positions": _rope("neox", "bf16", pos="i32"),
    "i64 indices": _rope("neox", "bf16", bits=64),
    "i32 positions, i64 indices": _rope("neox", "f16", pos="i32", bits=64),
    "misaligned query": _rope("gptj", "f32", offset=True),
    "two tokens a CTA": _rope("neox", "bf16", tokens=2),
}


def _programs() -> dict[str, LangProgram]:
    return {**{f"elementwise {n}": ElementwiseProgram(s) for n, s in _elementwise().items()},
            **{f"reduction {n}": ReductionProgram(s) for n, s in _reductions().items()},
            **{f"rope {n}": RopeProgram(s) for n, s in ROPE.items()}}


KINDS = ("ld.global.nc.v4", "ld.global", "st.global.v4", "st.global", "shfl.sync.bfly",
         "bar.sync", "ld.param")
"""Instruction prefixes counted (ld.global counts every global load, the 16-byte ones
too)."""

_E = "elementwise "
_R = "reduction "
GOLDEN: dict[str, tuple[int, ...]] = {  # per KINDS, in order
    _E + "flat": (10, 12, 5, 6, 0, 0, 4),
    _E + "flat offsets, scalar": (0, 33, 0, 33, 0, 0, 6),
    _E + "blocks": (8, 8, 5, 5, 0, 0, 6),
    _E + "rows rank 3": (10, 12, 5, 6, 0, 0, 10),
    _E + "indexed blocks rank 3": (5, 5, 5, 5, 0, 0, 11),
    _E + "fp8": (10, 12, 5, 6, 0, 0, 4),
    _E + "fused": (10, 12, 5, 6, 0, 0, 7),
    _E + "flat, i64": (10, 12, 5, 6, 0, 0, 4),
    _R + "rows 0": (4, 4, 0, 1, 8, 2, 2),
    _R + "rows many waves 0": (4, 4, 0, 1, 8, 2, 2),  # 8 warps a row: 5 + 3 shuffles
    _R + "rows split 0": (4, 4, 0, 1, 8, 2, 2),
    _R + "rows split 1": (1, 1, 0, 1, 3, 0, 2),  # rows of 8 vectors: 8 lanes, no barrier
    _R + "rows strided offset 0": (0, 7, 0, 1, 8, 2, 4),  # a remainder of 3 loads at once
    _R + "columns 0": (16, 16, 1, 1, 0, 2, 2),  # 16 loads a round (GLOBAL_FOLDS)
    # strides given at launch: LLVM makes 7 of the 16 loads ld.global.nc, not all
    _R + "columns split 0": (7, 16, 1, 1, 0, 2, 3),
    _R + "columns bf16 0": (16, 16, 2, 2, 0, 2, 2),  # f32 partials of 8 columns: 2 stores
    _R + "columns split offset 0": (0, 7, 0, 1, 6, 2, 6),
    # three spans (chunks of 189396, 188312 and 3 elements), a reduce each: float4s but the
    # last span's one load
    _R + "rows tail 0": (12, 13, 0, 3, 20, 4, 2),
    _R + "rows tail strided 0": (0, 14, 0, 3, 18, 4, 3),  # rows of odd length: scalars
    # two spans (993 rows, 480), a reduce each; LLVM sinks their stores into one
    _R + "columns tail 0": (47, 47, 2, 2, 0, 3, 2),
    # 50257 columns: blocks of 128 and one of 81 (a branch each), scalar loads 32 a round
    # (SCALAR_FOLDS) with remainders; LLVM sinks their stores into one
    _R + "columns odd 0": (0, 86, 0, 1, 0, 3, 2),
    # the same columns folded: 8 rows of 50257 as one of 402056, 16-byte loads, f32
    # partials stored 16 bytes at a time
    _R + "columns folded 0": (16, 16, 2, 2, 0, 2, 2),
    "rope neox": (8, 10, 11, 11, 0, 0, 19),
    "rope gptj": (0, 20, 5, 17, 0, 0, 19),
    "rope neox partial": (15, 17, 20, 20, 0, 0, 21),
    "rope i64 indices": (8, 10, 11, 11, 0, 0, 19),
}


def _counts(ptx: str) -> tuple[int, ...]:
    lines = [re.sub(r"^@!?%p\d+\s+", "", line.strip()) for line in ptx.splitlines()]
    return tuple(sum(1 for line in lines if line.startswith((kind + ".", kind + " ")))
                 for kind in KINDS)


@pytest.mark.parametrize("name", list(_programs()))
def test_every_kernel_compiles_and_keeps_its_instructions(name: str) -> None:
    program = _programs()[name]
    compiled = tile_mlir.compile(program.ir(), cache=False, name=name)
    assert compiled.cubin["kernels"][:4] == b"\x7fELF"
    params = compiled.kernels[program.name].params
    assert program.params() == tuple("ptr" if p.is_memref else p.dtype for p in params)
    if name in GOLDEN:
        assert dict(zip(KINDS, _counts(compiled.ptx["kernels"]), strict=True)) == \
            dict(zip(KINDS, GOLDEN[name], strict=True))


@pytest.mark.parametrize(("shape", "mode", "whole"), [
    ((1 << 14,), "flat", True), ((3 << 12,), "flat", True), (((1 << 14) + 1,), "flat", False),
    ((4095,), "flat", False), ((80, 100), "blocks", True), ((81, 100), "blocks", False),
    ((2, 3, 40, 100), "blocks", True), ((2, 3, 41, 100), "blocks", False),
    ((3, 4096), "rows", True), ((3, 4100), "rows", False)])
def test_whole_pieces_build_no_partial_one(device: Device, rng: np.random.Generator,
                                           shape: tuple[int, ...], mode: str,
                                           whole: bool) -> None:
    """Where the piece divides the extent it runs along, the kernel is specialized on it:
    no branch to a partial piece, no dynamic tile op (a shape that is not so plans its
    own kernel). The emulator's choice: 128 threads of one 16-byte access, 512 f32 a
    piece; a flat run of 2^14 is whole, a bias add over rows of 100 (blocks of 5 rows)
    is whole for 80 rows, one over rows of 4096 (the rows mode: pieces of 512 along a
    row) too. Every element right either way, the output poisoned before."""
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.standard_normal(shape[-1:] if len(shape) > 1 else shape).astype(np.float32)
    out = device.array(np.full(shape, np.nan, np.float32))
    ops.add(device.array(x), device.array(y), out=out)
    np.testing.assert_array_equal(out.numpy(), x + y)
    head = device.launches[-1].splitlines()[0]
    assert "128 threads x 1 rounds of 16 B" in head, head  # the docstring's chunk
    assert f"; {mode}" in head, head
    assert ("whole pieces" in head) == whole, head
    assert ("scf.if" in device.launches[-1]) != whole


def test_16_bit_columns_load_16_bytes() -> None:
    """A column reduction of bf16 loads 8 columns a thread (16 bytes, not the 8 bytes of
    its f32 accumulators' width: 2.1 against f32's 2.7 TB/s on an H100)."""
    program = _programs()["reduction columns bf16 0"]
    ptx = tile_mlir.compile(program.ir(), cache=False).ptx["kernels"]
    loads = re.findall(r"ld\.global\S*", ptx)
    assert loads and set(loads) == {"ld.global.nc.v4.b32"}, loads


def test_the_signatures_cover_every_case() -> None:
    """The lists above hold what the docstring promises."""
    sigs = list(_elementwise().values())
    assert {s.mode for s in sigs} == {"flat", "rows", "blocks"}
    assert {s.mode for s in sigs if INDEX in s.inputs} == {"flat", "rows", "blocks"}
    assert {s.index_bits for s in sigs} == {32, 64}
    classes = {c for s in sigs for a in s.arrays for c in a.strides}
    assert {"0", "1", "?1", "?2", "?32"} <= classes
    assert any(a.offset for s in sigs for a in s.arrays)
    assert {a.dtype for s in sigs for a in s.arrays} >= {"f32", "f16", "bf16", "f8e4m3",
                                                         "i32", "i64", "bool"}
    assert any(s.expr for s in sigs)
    reductions = list(_reductions().values())
    assert {(s.rows, s.chunks > 1, s.offset) for s in reductions} >= {
        (True, False, False), (True, True, False), (True, True, True),
        (False, False, False), (False, True, False), (False, True, True)}
    for has in (lambda s: s.key is not None, lambda s: s.key is None,
                lambda s: s.rotary_dim < s.head_dim):
        assert {s.style for s in ROPE.values() if has(s)} == {"neox", "gptj"}


def test_programs_are_kernel_programs() -> None:
    programs: list[KernelProgram] = [ElementwiseProgram(_elementwise()["flat"]),
                                     ReductionProgram(_reductions()["rows 0"]),
                                     RopeProgram(ROPE["neox"])]
    assert [p.name for p in programs] == ["kernel", "reduce_rows", "rope"]
    assert [p.threads for p in programs] == [256, 256, 128]
    for program in programs:
        first, second = program.ir().splitlines()[:2]
        assert first.startswith("// tile_mlir.ops ") and second.startswith("module")
        assert program.request().startswith("tile_mlir.lang kernel tile_mlir.ops.programs.")
        copy = pickle.loads(pickle.dumps(program))  # to the compile pool of ops_torch
        assert copy.request() == program.request() and copy.ir() == program.ir()


def test_rows_of_many_waves_take_cta_of_512_threads() -> None:
    """A rows stage of many waves of CTAs runs CTAs of 512 threads of about 32 KiB (2 rows
    of 8192 bf16), a small one 256 threads (programs/reduction.py's measurements); a row
    of 32 KiB or more takes a CTA's every warp, shorter ones share it."""
    large, small = _reductions()["rows many waves 0"], _reductions()["rows 0"]
    assert [ReductionProgram(s).threads for s in (large, small)] == [512, 256]
    assert large.grid == (8192 // 2, 1, 1)
    for n, per_cta in ((1024, 16), (4096, 4), (16384, 1), (65536, 1)):
        stage = stages("sum", ((1 << 26) // n, n, 1), "bf16", "bf16", acc="f32")[0]
        assert stage.grid == ((1 << 26) // n // per_cta, 1, 1), n


def test_column_blocks_are_about_128_columns() -> None:
    """A columns stage's CTA takes the divisor of B nearest 128 columns (B itself when it
    is narrower or has none nearer: an odd 131; 128 and a narrower last block where no
    divisor is within a factor of 2), wider where its rows are too few for the
    threads down the columns; a batch of 65 to 128 columns in halves, where they divide
    into vectors and the rows give every thread of the CTA one."""
    assert column_width(128, 4096, 8) == 64
    assert column_width(128, 16, 8) == 128  # 16 rows: too few for 256 threads down 8 across
    assert column_width(64, 4096, 8) == 64
    assert column_width(96, 4096, 8) == 48
    assert column_width(99, 4096, 1) == 99  # odd: no halves
    assert column_width(65536, 1024, 8) == 128
    assert column_width(192, 4096, 8) == 96
    assert column_width(131, 4096, 1) == 131
    assert column_width(50257, 1024, 1) == 128  # 29 * 1733: blocks of 128, the last 81
    assert column_width(2 * 257, 4096, 2) == 128  # not 2 columns a CTA
    assert column_width(100, 4096, 4) == 100
    assert column_width(1 << 26, 1, 8) == 2048  # one row: a vector a thread across


def test_column_blocks_divide_the_batch_into_vectors() -> None:
    """Whatever B, R and vector: a CTA's columns are whole vectors, and divide B or are
    COLUMN_WIDTH (the last block narrower: every column is some CTA's); a batch wider than
    COLUMN_WIDTH takes blocks within a factor of 2 of it, unless widened for few rows."""
    for vec in (1, 2, 4, 8):
        for b in range(vec, 400, vec):
            for r in (1, 16, 129, 4096):
                width = column_width(b, r, vec)
                assert width % vec == 0, (b, r, vec, width)
                assert b % width == 0 or width == COLUMN_WIDTH, (b, r, vec, width)
                if b > COLUMN_WIDTH and r >= COLUMN_BLOCK:
                    assert COLUMN_WIDTH // 2 <= width <= 2 * COLUMN_WIDTH, (b, r, vec, width)
    assert column_blocks(50257, column_width(50257, 1024, 1)) == 393  # 392 of 128, one of 81


def test_the_roles_name_the_library_s_arrays() -> None:
    """The reductions' and RoPE's launches fill the arguments by role, in the library's
    terms: RoPE's output once per slot, its cache's strides by the cache's own dims."""
    stage = _reductions()["columns split offset 0"]
    assert ReductionProgram(stage).roles() == (("x", 0), ("stride", 0), ("stride", 1),
                                               ("stride", 2), ("offset", 0), ("y", 0))
    sig = dataclasses.replace(ROPE["neox partial"], cache=_a("f32", "?32", "?2"))
    roles = RopeProgram(sig).roles()
    assert roles[:5] == (("tokens",), ("max_position",), ("pointer", "query_out"),
                         ("pointer", "query_out"), ("pointer", "query_out"))
    assert roles[5:7] == (("stride", "query_out", "0"), ("stride", "query_out", "1"))
    cache = [r for r in roles if "cache" in r]
    assert cache == [("pointer", "cache"), ("stride", "cache", "0"), ("stride", "cache", "1")]


NO_MLIR = """
import sys
sys.modules["mlir"] = None
from tile_mlir.ops.programs.elementwise import ArraySpec, ElementwiseProgram, Signature, Strategy
from tile_mlir.ops.programs.reduction import ReductionProgram, stages
f32 = ArraySpec("f32", ("1",))
programs = [ElementwiseProgram(Signature("add", f32, (f32, "f32"), 1, "flat", Strategy())),
            *map(ReductionProgram, stages("sum", (4, 1 << 20, 1), "f16", "f16", acc="f32"))]
for program in programs:
    print(program.name, program.params(), len(program.request()) > 100)
print(sorted(m for m in sys.modules if m.startswith("mlir") and sys.modules[m]))
"""


def test_requests_and_arguments_need_no_mlir() -> None:
    """A process without the MLIR bindings finds the library's kernels in a warm cache: a
    program's request and arguments are computed without building its IR."""
    result = subprocess.run([sys.executable, "-c", NO_MLIR], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "kernel ('i64', 'ptr', 'ptr', 'f32') True", "reduce_rows ('ptr', 'ptr') True",
        "reduce_rows ('ptr', 'ptr') True", "[]"]
