"""null tier: the library's kernels are tile programs (tile_mlir.lang) behind
programs.KernelProgram, and they are the kernels the IR text writers made.

While the writers exist, every signature below compiles both ways and the PTX must be
the same; the one exception is RoPE's widening of max_position for a 64-bit position
with 32-bit indices (cvt.s64.s32 for cvt.u64.u32: index-width integers widen signed in
the front end; the count is never negative, one instruction either way).
"""

from __future__ import annotations

import dataclasses
import re

import pytest

import tile_mlir
from tile_mlir.ops.programs import KernelProgram
from tile_mlir.ops.programs.elementwise import (
    INDEX,
    ArraySpec,
    ElementwiseProgram,
    Signature,
    Strategy,
    kernel_text,
)
from tile_mlir.ops.programs.reduction import ReductionProgram, Stage, _Reduction, stages
from tile_mlir.ops.programs.rope import RopeProgram, RopeSignature, _RopeKernel


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
                                    ("i64", "i64", INDEX), 2, "blocks", DEFAULT, 80, 32),
        "indexed blocks rank 3": Signature("dropout_philox", _a("bf16", "?64", "?32", "1"),
                                           (_a("bf16", "?64", "?32", "1"), *stream), 3,
                                           "blocks", DEFAULT, 96, 32),
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
        "columns split offset": stages("sum", (2, 100000, 3), "bf16", "bf16", acc="f32",
                                       strides=("?1", "?3", "?1"), offset=True),
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


def _ptx(text: str) -> str:
    ptx: str = next(iter(tile_mlir.compile(text, cache=False).ptx.values()))
    return ptx


def _old_reduction(stage: Stage) -> str:
    writer = _Reduction(stage)
    return writer.rows() if stage.rows else writer.columns()


@pytest.mark.parametrize("name", list(_elementwise()))
def test_elementwise_ptx_is_the_writers(name: str) -> None:
    sig = _elementwise()[name]
    assert _ptx(ElementwiseProgram(sig).ir()) == _ptx(kernel_text(sig))


@pytest.mark.parametrize("name", list(_reductions()))
def test_reduction_ptx_is_the_writers(name: str) -> None:
    stage = _reductions()[name]
    assert _ptx(ReductionProgram(stage).ir()) == _ptx(_old_reduction(stage))


_SIGNED = re.compile(r"cvt\.s64\.s32")


@pytest.mark.parametrize("name", list(ROPE))
def test_rope_ptx_is_the_writers(name: str) -> None:
    sig = ROPE[name]
    new, old = _ptx(RopeProgram(sig).ir()), _ptx(_RopeKernel(sig).build())
    widened = sig.positions.dtype == "i64" and sig.index_bits == 32
    if widened:  # max_position widened signed: the one instruction that differs
        assert len(_SIGNED.findall(new)) == len(_SIGNED.findall(old)) + 1
        new = _SIGNED.sub("cvt.u64.u32", new, count=1)
    assert new == old


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
