"""null tier: the reductions: how calls become kernels (views, stages), every stage's kernel
compiles, and calls on the pretend device (emulated.py) with every kind of view: offset
(misaligned), negative strides, expanded, transposed, sliced; dtype=, keepdim, out=.

Most tests here check the plan (views, strides, offsets, pointers, stages, outputs):
the pretend device's reduction launches run a NumPy model of the stage's signature
(emulated.reduce_model). test_the_kernels_themselves runs the stage kernels, each CTA's
threads together with their shuffles and barriers (support/simt.py), on small views;
the gpu tier runs them on the same views and larger.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from support.emulated import Device, EmuArray

import tile_mlir
from tile_mlir import ops
from tile_mlir.ops import reductions
from tile_mlir.ops.programs import reduction as reduction_programs
from tile_mlir.ops.programs.reduction import (
    ReductionProgram,
    Stage,
    describe,
    divisor_at_most,
    stages,
)
from tile_mlir.ops.reductions import normalize_dims, reduction_view

SHAPES_AND_DIMS = [
    ((524288, 128), (1,)), ((8192, 8192), (1,)), ((1024, 65536), (1,)),
    ((524288, 128), (0,)), ((1024, 65536), (0,)), ((1, 1 << 26), (1,)),
    ((4, 6, 10), (0, 2)), ((3, 1, 5), (1,)), ((7,), (0,)), ((37, 129), (0, 1)),
    ((5, 300, 7), (1,)), ((1000, 3), (1,)),
]


def _row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))


def plan(shape: tuple[int, ...], dtype: str, dims: tuple[int, ...], name: str) -> list[Stage]:
    """The stages the library plans for a contiguous array, pass by pass."""
    kind, mean = reductions.KINDS[name]
    count = math.prod(shape[d] for d in dims)
    return [stage for step in reductions.passes(shape, _row_major(shape), dims, dtype, dtype)
            for stage in stages(kind, step.view[0], step.src, step.dst, acc="f32",
                                scale_count=count if mean and step.last else None)]


def test_normalize_dims() -> None:
    assert normalize_dims(None, 3) == (0, 1, 2)
    assert normalize_dims(-1, 3) == (2,)
    assert normalize_dims((2, 0), 3) == (0, 2)
    assert normalize_dims([2, 0], 3) == (0, 2)
    with pytest.raises(ValueError, match="argument 'dim': 3 is out of range for a 3-d"):
        normalize_dims(3, 3)
    with pytest.raises(ValueError, match=r"argument .dim. .* names a dimension twice"):
        normalize_dims((1, -2), 3)
    with pytest.raises(TypeError, match="argument 'dim' must be an int"):
        normalize_dims(1.5, 2)  # type: ignore[arg-type]


def test_passes_reduce_what_merges_first_then_the_rest() -> None:
    """One pass where the reduced dims merge; else first the dims that do (smallest
    stride first) into f32 partials over the rest, then the rest; a layout no split of
    the kept dims merges in is copied first. Each pass's view covers its array."""
    one = reductions.passes((4, 6, 10), (60, 10, 1), (1, 2), "bf16", "bf16")
    assert [(p.source, p.dims, p.last, p.view[0]) for p in one] == [
        ("input", (1, 2), True, (4, 60, 1))]
    apart = reductions.passes((4, 6, 10), (60, 10, 1), (0, 2), "bf16", "bf16")
    assert [(p.source, p.dims, p.remaining, p.kept, p.src, p.dst, p.last) for p in apart] == [
        ("input", (2,), (0, 2), (4, 6), "bf16", "f32", False),
        ("partials", (0,), (0,), (6,), "f32", "bf16", True)]
    # three kept dims of which no two merge: no split of them makes an [A, R, B] view
    tangled = reductions.passes((2, 3, 4, 5), (1, 1000, 7, 50), (3,), "f32", "f32")
    assert [(p.source, p.strides, p.last) for p in tangled] == [("copy", (60, 20, 5, 1), True)]
    for steps in (one, apart, tangled):
        for step in steps:
            (a, r, b), _, _ = step.view
            assert a * r * b == math.prod(step.shape)


def test_views_choose_a_unit_innermost_stride() -> None:
    """Rows when the reduced run is contiguous, columns when a kept one is; a transposed
    array reduced over its (strided) rows is read as columns; negative reduced strides
    are flipped; a layout no split merges has no view (the plan copies it first)."""
    assert reduction_view((8, 16), (16, 1), (1,)) == ((8, 16, 1), (16, 1, 0), 0)
    assert reduction_view((8, 16), (16, 1), (0,)) == ((1, 8, 16), (0, 16, 1), 0)
    assert reduction_view((16, 8), (1, 16), (1,)) == ((1, 8, 16), (0, 16, 1), 0)  # x.t()
    assert reduction_view((8, 16), (16, -1), (1,)) == ((8, 16, 1), (16, 1, 0), -15)
    assert reduction_view((4, 8, 16), (128, 16, 1), (0, 2)) is None
    assert reduction_view((4, 8, 16), (0, 16, 1), (0,)) == ((1, 4, 128), (0, 0, 1), 0)


def test_plans_cut_long_rows_and_tall_columns_into_chunks() -> None:
    rows = plan((1, 1 << 26), "f32", (1,), "sum")
    assert [(s.a, s.r, s.b, s.chunks) for s in rows] == [(1, 1 << 26, 1, 512), (1, 512, 1, 1)]
    cols = stages("sum", (1, 524288, 128), "bf16", "bf16", acc="f32", scale_count=524288)
    # two halves of 64 columns (programs/reduction.py's NARROW_WIDTH), 256 chunks each
    assert [(s.src, s.dst, s.chunks) for s in cols] == [("bf16", "f32", 256), ("f32", "bf16", 1)]
    assert cols[0].scale is None and cols[1].scale == 1 / 524288  # a mean scales once, last
    assert len(plan((8192, 8192), "f32", (1,), "amax")) == 1


def test_columns_are_cut_by_any_divisor_of_their_rows() -> None:
    """21845 = 5 * 17 * 257 rows: 17 chunks of 1285 (the largest divisor up to the 22 that
    fill the GPU with 24 blocks of 128 columns), where powers of two left one chunk and 24
    CTAs; 1155 = 3 * 5 * 7 * 11 rows of 256 f32 columns: 7 chunks."""
    odd = stages("sum", (1, 21845, 3072), "bf16", "bf16", acc="f32")
    assert [(s.r, s.chunks, s.grid) for s in odd] == [(21845, 17, (24, 17, 1)),
                                                      (17, 1, (24, 1, 1))]
    assert stages("sum", (1, 1155, 256), "f32", "f32", acc="f32")[0].chunks == 7
    assert [divisor_at_most(n, cap) for n, cap in
            ((21845, 22), (97, 50), (12, 0), (12, 99), (0, 5))] == [17, 1, 1, 12, 1]


def test_without_a_divisor_that_fills_the_gpu_chunks_end_in_a_tail() -> None:
    """A row of 100000007 f32 (odd: one CTA before) takes 527 chunks of 189396 elements
    (whole float4s), one of the rest's 188312 and one of its last 3; a prime 21841 rows
    of columns take 21 chunks of 993 rows and one of 988. Every chunk but the tail's
    fills the GPU as even ones would, and they cover R once; powers of two stay even."""
    row = stages("sum", (1, 100000007, 1), "f32", "f32", acc="f32")
    assert [(s.chunks, s.piece, s.tail, s.grid) for s in row] == [
        (529, 189396, (188312, 3), (529, 1, 1)), (1, 0, (), (1, 1, 1))]
    assert "(chunks of 189396, the last 188312, 3)" in describe(row[0])
    half = stages("amax", (3, 1000003, 1), "bf16", "bf16", acc="f32")[0]
    assert (half.chunks, half.piece, half.tail) == (31, 33336, (33256, 3))
    assert half.grid == (3 * 31, 1, 1)
    prime = stages("sum", (1, 21841, 3072), "bf16", "bf16", acc="f32")
    assert [(s.chunks, s.piece, s.tail, s.grid) for s in prime] == [
        (22, 993, (988,), (24, 22, 1)), (1, 0, (), (24, 1, 1))]
    for stage in (row[0], half, prime[0]):
        spans = stage.spans()
        assert len(spans) == stage.chunks and spans[0][0] == 0
        assert all(a + n == b for (a, n), (b, _) in itertools.pairwise(spans))
        assert spans[-1][0] + spans[-1][1] == stage.r
    assert stages("sum", (1, 1 << 26, 1), "f32", "f32", acc="f32")[0].tail == ()
    assert stages("sum", (1, 21845, 3072), "bf16", "bf16", acc="f32")[0].tail == ()


def test_columns_that_start_unaligned_are_folded() -> None:
    """Columns whose rows are no multiple of 16 bytes: G rows read as one of G * B (16-byte
    loads), into f32 partials that a next stage reduces as [A, chunks * G, B]; the
    folded stage is never the last (a mean scales there). R no multiple of G (A = 1): the
    rows past the folded ones reduced apart into one more partial row. Not folded: B
    aligned, R no multiple of G where A > 1, a strided or offset source, a source under
    SMALL_STAGE, rows."""
    def shape_of(planned: list[Stage]) -> list[tuple[Any, ...]]:
        return [(s.a, s.r, s.b, s.fold, s.src, s.dst, s.chunks, s.vec()) for s in planned]

    bf16 = stages("sum", (1, 65536, 1031), "bf16", "bf16", acc="f32", scale_count=65536)
    assert shape_of(bf16) == [(1, 8192, 8248, 8, "bf16", "f32", 8, 8),
                              (1, 64, 1031, 1, "f32", "bf16", 1, 1)]
    assert bf16[0].scale is None and bf16[1].scale == 1 / 65536
    assert "(8 rows folded into one)" in describe(bf16[0])
    assert shape_of(stages("amax", (3, 4096, 1030), "f32", "f32", acc="f32"))[0][:4] == \
        (3, 2048, 2060, 2)  # 4-byte rows of 1030: two make 16-byte ones
    assert stages("sum", (1, 4096, 1030), "bf16", "bf16", acc="f32")[0].fold == 4
    assert reduction_programs.fold_of((1, 4096, 1031), 2) == 8
    odd = stages("sum", (1, 65539, 1031), "bf16", "bf16", acc="f32", scale_count=65539)
    assert shape_of(odd) == [(1, 8192, 8248, 8, "bf16", "f32", 8, 8),
                             (1, 3, 1031, 1, "bf16", "f32", 1, 1),
                             (1, 65, 1031, 1, "f32", "bf16", 1, 1)]
    assert (odd[1].start, odd[1].offset, odd[0].start) == (65536, False, 0)
    assert odd[2].scale == 1 / 65539 and odd[1].scale is None
    assert "(rows 65536 on, past the folded ones)" in describe(odd[1])
    said = reductions.explain("sum", (65539, 1031), "bf16", dim=0)
    assert "3 kernels" in said and "rows 65536 on, the 3 past the folded ones" in said, said
    cases: list[tuple[tuple[int, int, int], int, dict[str, Any]]] = [
        ((1, 4096, 1024), 2, {}), ((3, 4097, 1031), 2, {}), ((1, 7, 100003), 2, {}),
        ((1, 4096, 1031), 2, {"offset": True}),
        ((1, 4096, 1031), 2, {"strides": ("?8", "?1031", "1")}),
        ((1, 8, 1031), 2, {}), ((4096, 1031, 1), 2, {})]
    for view, nbytes, options in cases:
        assert reduction_programs.fold_of(view, nbytes, **options) == 1, (view, options)


def test_folded_columns_on_the_pretend_device(device: Device, rng: np.random.Generator
                                              ) -> None:
    """Folded columns against float64 (the stages' model): sums, maxima with a NaN, means
    and keepdim over dim 0 of [1024, 1031], of [1027, 1031] (3 rows past the folded ones,
    the last row's NaN among them too) and dim 1 of [3, 256, 1031], out=; the folded stage
    launched."""
    for dtype in ("f32", "bf16"):
        for shape, dim in (((1024, 1031), 0), ((3, 256, 1031), 1), ((1027, 1031), 0)):
            values = rng.standard_normal(shape).astype(np.float32)
            values[(0,) * len(shape)] = np.nan
            values[-1, 5] = np.nan  # a row past the folded ones where R % 8
            x = device.array(values, dtype)
            host = x.numpy()
            for name in ("sum", "amax", "mean"):
                before = len(device.launches)
                got = getattr(ops, name)(x, dim=dim, keepdim=name == "mean")
                want = _reference(name, host, dim, name == "mean")
                assert np.array_equal(np.isnan(got.numpy().astype(np.float64)),
                                      np.isnan(want)), name
                keep = ~np.isnan(want)
                tol = {"f32": 1e-5, "bf16": 1.6e-2}[dtype]
                np.testing.assert_allclose(got.numpy().astype(np.float64)[keep], want[keep],
                                           rtol=tol, atol=tol * 4)
                folded = [t for t in device.launches[before:] if "folded into" in t]
                assert len(folded) == 1, device.launches[before:]
                rest = [t for t in device.launches[before:] if "past the folded" in t]
                assert len(rest) == (shape[0] == 1027), device.launches[before:]
    x = device.array(rng.standard_normal((1024, 1031)).astype(np.float32))
    out = device.empty((1031,), "f32")
    assert ops.sum(x, dim=0, out=out) is out
    _close(out, _reference("sum", x.numpy(), 0, False), "f32")


def test_a_folded_stage_loads_16_bytes() -> None:
    """The folded stage of [65536, 1031] bf16 columns reads in 16-byte loads only (its
    unfolded one in 2-byte ones)."""
    folded = stages("sum", (1, 65536, 1031), "bf16", "bf16", acc="f32")[0]
    ptx = tile_mlir.compile(ReductionProgram(folded).ir(), cache=False).ptx["kernels"]
    assert set(re.findall(r"ld\.global\S*", ptx)) == {"ld.global.nc.v4.b32"}
    unfolded = Stage("sum", 1, 65536, 1031, "bf16", "f32", 8)
    ptx = tile_mlir.compile(ReductionProgram(unfolded).ir(), cache=False).ptx["kernels"]
    assert "ld.global.nc.v4.b32" not in ptx and "ld.global.nc.b16" in ptx


@pytest.mark.parametrize(("shape", "dim"), [((16, 131), 0), ((2, 8, 131), 1), ((19, 131), 0)],
                         ids=str)
def test_folded_column_kernels_themselves(device: Device, rng: np.random.Generator,
                                          monkeypatch: pytest.MonkeyPatch,
                                          shape: tuple[int, ...], dim: int) -> None:
    """The folded stage's kernel runs (not the model), folds of 4 rows of 131 f32 made
    small enough to (SMALL_STAGE 0), and the 3 rows past them where R is 19 (a stage of
    their own, from row 16): sums and maxima against float64."""
    monkeypatch.setattr(reduction_programs, "SMALL_STAGE", 0)
    device.reduction_kernels = True
    x = rng.standard_normal(shape).astype(np.float32)
    view = reduction_view(shape, _row_major(shape), (dim,))
    assert view is not None
    planned = stages("sum", view[0], "f32", "f32", acc="f32")
    assert planned[0].fold == 4 and (planned[1].start == 16) == (shape[0] == 19), planned
    for name in ("sum", "amax"):
        _close(getattr(ops, name)(device.array(x), dim=dim), _reference(name, x, dim, False),
               "f32")


def test_tail_chunks_of_a_row_load_16_bytes() -> None:
    """A single row's chunks start at a multiple of the piece (whole vectors): every load
    but the last few elements' is 16 bytes wide (the row's index is a constant 0, so its
    odd stride does not make the lowering drop to scalars)."""
    for dtype, last in (("f32", "ld.global.nc.b32"), ("bf16", "ld.global.nc.b16")):
        stage = stages("sum", (1, 100000007, 1), dtype, "f32", acc="f32")[0]
        ptx = tile_mlir.compile(ReductionProgram(stage).ir(), cache=False).ptx["kernels"]
        loads = re.findall(r"ld\.global\S*", ptx)
        assert set(loads) == {"ld.global.nc.v4.b32", last}, loads
        assert loads.count(last) == 1, loads


@pytest.mark.parametrize("case", [((1, 131), 1, 64), ((2, 131), 1, 64), ((53, 16), 0, 256),
                                  ((2, 53, 16), 1, 256), ((53, 262), 0, 1024)], ids=str)
def test_tail_kernels_themselves(device: Device, rng: np.random.Generator,
                                 monkeypatch: pytest.MonkeyPatch,
                                 case: tuple[tuple[int, ...], int, int]) -> None:
    """The tails' branches run (the kernels, threads together), on chunks made small:
    rows of 131 f32 in 6 chunks of 20, one of 8 and one of 3; 53 rows of columns in 10 of
    5 and one of 3; 262 = 2 * 131 columns in blocks of 128 and a last one of 6, over 17
    chunks of 3 rows and one of 2."""
    shape, dim, chunk_bytes = case
    monkeypatch.setattr(reduction_programs, "CHUNK_BYTES", chunk_bytes)
    device.reduction_kernels = True
    x = rng.standard_normal(shape).astype(np.float32)
    view = reduction_view(shape, _row_major(shape), (dim,))
    assert view is not None
    planned = stages("sum", view[0], "f32", "f32", acc="f32")
    assert planned[0].tail, planned
    for name in ("sum", "amax"):
        _close(getattr(ops, name)(device.array(x), dim=dim), _reference(name, x, dim, False),
               "f32")


@pytest.mark.parametrize(("shape", "dims"), SHAPES_AND_DIMS, ids=str)
def test_every_stage_covers_its_tensor(shape: tuple[int, ...], dims: tuple[int, ...]) -> None:
    planned = plan(shape, "f32", dims, "sum")
    assert planned[0].a * planned[0].r * planned[0].b == math.prod(shape)
    kept = math.prod(s for i, s in enumerate(shape) if i not in dims)
    last = planned[-1]
    assert last.a * last.b == kept and last.chunks == 1


STRIDED = [Stage("max", 4, 65536, 1, "bf16", "f32", 8, strides=("?4", "1"), offset=True),
           Stage("sum", 2, 300, 64, "f16", "f32", 4, strides=("?2", "?64", "1")),
           Stage("sum", 128, 8, 1, "f32", "f32", 1, strides=("?1", "?8")),
           Stage("min", 3, 1000, 1, "f32", "f32", 1, strides=("?1", "0"))]


@pytest.mark.parametrize("stage", sorted({s for shape, dims in SHAPES_AND_DIMS if
                                          math.prod(shape) < 1 << 22 for s in
                                          plan(shape, "bf16", dims, "mean")},
                                         key=str) + STRIDED, ids=str)
def test_stage_kernels_compile(stage: Stage) -> None:
    program = tile_mlir.compile(ReductionProgram(stage).ir(), name="reduction stage")
    assert program.cubin["kernels"][:4] == b"\x7fELF"


def test_bad_arguments_name_them() -> None:
    with pytest.raises(TypeError, match="argument 'input'"):
        reductions.sum([1.0, 2.0])
    with pytest.raises(TypeError, match="argument 'input' has element type int32"):
        reductions.sum(np.zeros(4, np.int32))
    with pytest.raises(ValueError, match="argument 'dim': 2 is out of range"):
        reductions.amax(np.zeros((2, 2), np.float32), dim=2)
    with pytest.raises(TypeError, match="argument 'dtype'"):
        reductions.sum(np.zeros(4, np.float32), dtype="int32")


EXPLAINED = [("sum", (1000, 3), "f32", -1), ("sum", (64, 4097), "bf16", -1),
             ("amax", (37, 129), "f16", (0, 1)), ("mean", (4, 6, 10), "bf16", (0, 2)),
             ("amin", (5, 300, 7), "bf16", 1), ("sum", (2, 1 << 20), "f32", -1),
             ("prod", (3000, 1031), "bf16", 0), ("sum", (2048, 2048), "f16", None)]


@pytest.mark.parametrize(("name", "shape", "dtype", "dim"), EXPLAINED)
def test_explain_says_the_kernels_a_call_launches(device: Device, name: str,
                                                  shape: tuple[int, ...], dtype: str,
                                                  dim: Any) -> None:
    """Each kernel reductions.explain lists is one the call launches, in order: the
    source and destination types and the [A, chunks, B] it writes."""
    x = device.array(np.full(shape, 1e-4, np.float32), dtype)
    getattr(ops, name)(x, dim=dim)
    launched = []
    for kernel in device.launches:
        m = re.search(r"tile_mlir.ops reduce \w+: \[[\d, ]+\] (\w+) .*? -> \[([\d, ]+)\] (\w+)",
                      kernel)
        if m is not None:
            launched.append(("stage", m[1], m[3], tuple(int(n) for n in m[2].split(", "))))
        m = re.search(r"<reduce_rows_held: x: (\w+)\[M, \d+\].*?, y: (\w+)\[M\]", kernel)
        if m is not None:
            launched.append(("held", m[1], m[2], ()))  # its rows: M, given at launch
    text = reductions.explain(name, shape, dtype, dim)
    said = [("held" if m[1] else "stage", m[2], m[3],
             () if m[1] else (*(int(n) for n in m[4].split(", ")), 1)[:3])
            for m in re.finditer(r"reduce_\w+?(_held)? (\w+) -> (\w+) \[([\d, ]+)\]", text)]
    assert said == launched and said, text


def test_explain_handles_what_launches_no_reduction() -> None:
    assert reductions.explain("sum", (4, 0), "f32").endswith("a fill, no reduction kernel")
    assert reductions.explain("amax", (4, 0), "f32").endswith("amax has no identity: an error")
    assert reductions.explain("sum", (4, 1), "f32").endswith("(a cast kernel)")
    assert "2-byte loads (a row of 50257 elements is not a multiple of 8" in \
        reductions.explain("prod", (64, 50257), "bf16")
    held = reductions.explain("sum", (64, 50257), "bf16")
    assert "reduce_rows_held bf16 -> bf16 [64]: cluster: " in held and "edges" not in held \
        and "before and after them apart" in held
    cases: list[tuple[tuple[Any, ...], str]] = [
        (("softmax", (4,), "f32"), "'softmax' is not a reduction"),
        (("sum", (4,), "i32"), "sum takes f32, f16, bf16, not 'i32'"),
        (("sum", (-1, 4), "f32"), "negative size"),
        (("sum", (4, 4), "f32", 2), "argument 'dim': 2 is out of range")]
    for args, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)):
            reductions.explain(*args)


def test_the_command_line_explains_a_reduction(capsys: pytest.CaptureFixture[str]) -> None:
    from tile_mlir.ops.__main__ import main

    assert main(["--explain", "amax:8192x8192:bf16:0"]) == 0
    assert capsys.readouterr().out == reductions.explain("amax", (8192, 8192), "bf16", 0) + "\n"
    assert main(["--explain", "sum:64x32x128:f16:0,2"]) == 0
    assert "first (2,), into f32 partials [64, 32]" in capsys.readouterr().out
    assert main(["--explain", "sum:64x64:f32:all"]) == 0
    assert capsys.readouterr().out.startswith("sum f32 64x64 over every dim:")
    for argv, message in [("sum:4x4:f32:x", "DIM is an int, ints joined by commas"),
                          ("add:4x4:f32:0", "a :DIM is a reduction's"),
                          ("sum:4x4:f32:0:1", "OP:MxN:DTYPE[:DIM]"),
                          ("sum:4x4:f32:3", "argument 'dim': 3 is out of range")]:
        with pytest.raises(SystemExit):
            main(["--explain", argv])
        assert message in capsys.readouterr().err


def test_empty_reductions_follow_torch() -> None:
    empty = np.zeros((3, 0), np.float32)
    np.testing.assert_array_equal(reductions.sum(empty, dim=1), np.zeros(3))
    np.testing.assert_array_equal(reductions.prod(empty, dim=1), np.ones(3))
    assert np.isnan(reductions.mean(empty, dim=1)).all()
    with pytest.raises(ValueError, match="amax: argument 'input' of shape \\(3, 0\\)"):
        reductions.amax(empty, dim=1)
    assert reductions.sum(empty, dim=0).shape == (0,)
    # reduced dims that are not empty, no result to write: an empty result, amax too
    assert reductions.amax(empty, dim=0).shape == (0,)
    assert reductions.amin(np.zeros((11, 4, 0, 5), np.float32), dim=1).shape == (11, 0, 5)
    with pytest.raises(ValueError, match="amin: argument 'input' of shape \\(2, 0, 3\\)"):
        reductions.amin(np.zeros((2, 0, 3), np.float32), dim=1, keepdim=True)


# ------------------------------------------------------------ on the pretend device


def _reference(name: str, x: np.ndarray, dims: Any, keepdim: bool) -> np.ndarray:
    functions: dict[str, Any] = {"sum": np.sum, "amax": np.max, "amin": np.min,
                                 "prod": np.prod, "mean": np.mean}
    fn = functions[name]
    return np.asarray(fn(x.astype(np.float64), axis=dims, keepdims=keepdim))


def _close(got: EmuArray, want: np.ndarray, dtype: str) -> None:
    values = got.numpy().astype(np.float64)
    assert values.shape == want.shape
    tol = {"f32": 1e-5, "f16": 2e-3, "bf16": 1.6e-2}[dtype]
    np.testing.assert_allclose(values, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max()))


def _views(device: Device, rng: np.random.Generator, dtype: str
           ) -> list[tuple[str, EmuArray, np.ndarray]]:
    """An array seen as views torch (offset, transposed, sliced, expanded) and NumPy
    (negative strides) make; each with its values."""
    base = rng.standard_normal((33, 40)).astype(np.float32)
    buffer = device.array(base, dtype, offset=1)  # element 0 is 2 or 4 bytes past 16
    host = buffer.numpy()
    flat = device.array(base.reshape(-1)[:1025], dtype)
    made = [
        ("offset", buffer, host),
        ("offset[1:]", flat.view((1024,), (1,), 1), flat.numpy()[1:]),
        ("transposed", buffer.view((40, 33), (1, 40)), host.T),
        ("sliced", buffer.view((33, 17), (40, 2), 3), host[:, 3:37:2]),
        ("reversed", buffer.view((33, 40), (-40, 1), 32 * 40), host[::-1]),
        ("reversed columns", buffer.view((33, 40), (40, -1), 39), host[:, ::-1]),
        ("expanded", buffer.view((5, 33, 40), (0, 40, 1)), np.broadcast_to(host, (5, 33, 40))),
        ("3-d", buffer.view((3, 11, 40), (440, 40, 1)), host.reshape(3, 11, 40)),
    ]
    return made


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("name", reductions.NAMES)
def test_views(device: Device, rng: np.random.Generator, name: str, dtype: str) -> None:
    for label, view, values in _views(device, rng, dtype):
        if name == "prod":
            continue  # products of ~1000 normal values over- and underflow; below
        for dims in [None, -1, 0, (0, -1)] if values.ndim > 1 else [None, 0]:
            got = getattr(ops, name)(view, dim=dims)
            axes = None if dims is None else dims
            print(label, dims)
            _close(got, _reference(name, values, axes, False), dtype)


@pytest.mark.parametrize(("name", "dtype"), [*((n, "f32") for n in reductions.NAMES),
                                           ("sum", "bf16"), ("amax", "bf16")])
def test_the_kernels_themselves(device: Device, rng: np.random.Generator, name: str,
                                dtype: str) -> None:
    """The stage kernels run (not the model) on a few rows (a CTA of 256 threads a row
    takes a third of a second here): rows, columns and the whole, of views offset
    (misaligned), transposed, reversed and strided, against float64."""
    device.reduction_kernels = True
    base = rng.standard_normal((3, 40)).astype(np.float32)
    if name == "prod":  # values near 1: products that neither over- nor underflow
        base = (1 + 0.01 * np.tanh(base)).astype(np.float32)
    buffer = device.array(base, dtype, offset=1)
    host = buffer.numpy()
    views = [("offset", buffer, host, (None, -1, 0)),
             ("transposed", buffer.view((40, 3), (1, 40)), host.T, (None, -1, 0)),
             ("reversed", buffer.view((3, 40), (-40, 1), 80), host[::-1], (-1,)),
             ("strided", buffer.view((3, 17), (40, 2), 3), host[:, 3:37:2], (-1, None))]
    for label, view, values, dims in views:
        for dim in dims:
            print(label, dim)
            _close(getattr(ops, name)(view, dim=dim), _reference(name, values, dim, False),
                   dtype)
    assert len(device.launches) >= 9


@pytest.mark.parametrize("stack", [1, 2, 3])
@pytest.mark.parametrize("dtype", ["f32", "bf16", "f16"])
def test_rows_that_start_unaligned_are_held_with_edges(device: Device,
                                                       rng: np.random.Generator,
                                                       dtype: str, stack: int) -> None:
    """Rows of odd length (each starting at another alignment) and rows at an odd offset
    with a row stride are reduced by programs/rows.py's reduce_rows_held (a CTA a row,
    forced to 64 threads as the row ops' tests emulate it; or a stack of 2 or 3 rows a
    CTA, the row counts no multiple of it): its aligned vectors, head and tail. sum,
    amax, amin and mean (scaled) against float64; NaN in a row propagates through amax
    and amin; rows shorter than a vector; keepdim."""
    from tile_mlir.ops import rows

    with rows.forced("cta", lanes=64, stack=stack):
        for shape in ((5, 1001), (4, 7), (3, 3), (2, 522)):
            x = device.array(rng.standard_normal(shape).astype(np.float32), dtype)
            values = x.numpy()
            for name in ("sum", "amax", "amin", "mean"):
                before = len(device.launches)
                _close(getattr(ops, name)(x, dim=-1), _reference(name, values, -1, False),
                       dtype)
                held = [t for t in device.launches[before:] if "reduce_rows_held" in t]
                assert len(held) == len(device.launches) - before == 1, (shape, name)
        wide = rng.standard_normal((6, 700)).astype(np.float32)
        wide[2, 300] = np.nan
        buffer = device.array(wide, dtype)
        x = buffer.view((6, 601), (700, 1), 3)  # an odd offset, a row stride of 700
        values = buffer.numpy()[:, 3:604]
        for name in ("amax", "amin", "sum"):
            got = getattr(ops, name)(x, dim=1, keepdim=True)
            want = _reference(name, values, 1, True)
            assert np.isnan(got.numpy()[2, 0]) and np.isnan(want[2, 0])
            rest = [0, 1, 3, 4, 5]  # a sum near 0 errs by its terms' rounding: _close's atol
            tol = {"f32": 1e-5, "f16": 2e-3, "bf16": 1.6e-2}[dtype]
            np.testing.assert_allclose(
                got.numpy()[rest].astype(np.float64), want[rest], rtol=tol,
                atol=tol * max(1.0, np.abs(want[rest]).max()) if name == "sum" else 1e-6)


def test_aligned_rows_and_prod_keep_the_reduction_kernels(device: Device,
                                                          rng: np.random.Generator) -> None:
    """Rows that start aligned, products, rows a warp holds (no edges there) and rows
    too few to fill the GPU (one odd row of 300001: the stages cut it into chunks over
    more CTAs than a cluster) take programs/reduction.py's reduce_rows as before."""
    from tile_mlir.ops import rows

    x = device.array(rng.standard_normal((4, 1024)).astype(np.float32), "bf16")
    odd = device.array(1 + 0.01 * rng.standard_normal((4, 1001)).astype(np.float32), "f32")
    with rows.forced("cta", lanes=64):
        calls: list[Callable[[], Any]] = [lambda: ops.sum(x, dim=-1),
                                          lambda: ops.prod(odd, dim=-1)]
        for call in calls:
            before = len(device.launches)
            call()
            assert not any("reduce_rows_held" in t for t in device.launches[before:])
    for shape in ((64, 33), (300001,)):
        few = device.array(rng.standard_normal(shape).astype(np.float32), "f32")
        before = len(device.launches)
        _close(ops.sum(few, dim=-1), _reference("sum", few.numpy(), -1, False), "f32")
        assert not any("reduce_rows_held" in t for t in device.launches[before:])
    assert "reduce_rows f32 -> f32 [1, 19]" in reductions.explain("sum", (300001,), "f32")


@pytest.mark.parametrize(("a", "r", "dtype", "per"), [
    (33554, 1000, "f32", 4), (16777, 2000, "f32", 2), (33554, 2000, "bf16", 4),
    (32768, 1024, "f32", 8), (11184, 3000, "f32", 2), (111848, 300, "f32", 16),
    (87154, 385, "f32", 16), (671088, 100, "bf16", 128)], ids=str)
def test_rows_of_a_length_no_power_of_two_take_fewer_a_cta(a: int, r: int, dtype: str,
                                                           per: int) -> None:
    """reduction.RAGGED_CTA_BYTES: rows whose length is not a power of two take about 16
    KiB a CTA of 512 threads, not 32, where its groups of lanes idle no more for it (not
    3000 f32: 750 vectors over 512 threads) and it held no more rows than groups (not
    rows of 300, 385 or 100); rows of 1024 keep 8 a CTA."""
    stage = stages("sum", (a, r, 1), dtype, dtype, acc="f32")[0]
    assert reduction_programs.row_threads(stage) == 512
    assert reduction_programs.rows_per_cta(stage) == per


@pytest.mark.parametrize(("shape", "dtype"), [((13, 8), "f32"), ((7, 96), "bf16"),
                                            ((9, 3), "f32")], ids=str)
def test_rows_no_multiple_of_a_ctas_share_its_last_ctas(device: Device,
                                                        rng: np.random.Generator,
                                                        shape: tuple[int, int],
                                                        dtype: str) -> None:
    """A row count no multiple of the rows a CTA takes (a power of two): the last CTA
    takes the last rows, some of them its neighbour's too, which both reduce alike (the
    kernels run; every result poisoned first). Rows of 8 f32: 8 a CTA, 2 CTAs, rows 5 to
    7 reduced twice."""
    device.reduction_kernels = True
    view = reduction_view(shape, _row_major(shape), (1,))
    assert view is not None
    stage = stages("sum", view[0], dtype, dtype, acc="f32")[-1]
    per = reduction_programs.rows_per_cta(stage)
    assert shape[0] % per and stage.grid[0] == -(-shape[0] // per), (per, stage.grid)
    x = device.array(rng.standard_normal(shape).astype(np.float32), dtype)
    values = x.numpy()
    for name in ("sum", "amax", "mean"):
        out = device.array(np.full(shape[0], np.nan, np.float32), dtype)
        getattr(ops, name)(x, dim=-1, out=out)
        _close(out, _reference(name, values, -1, False), dtype)


def test_prod_and_keepdim(device: Device, rng: np.random.Generator) -> None:
    x = (1 + 0.01 * rng.standard_normal((7, 300))).astype(np.float32)
    placed = device.array(x, offset=3)
    for dims, keep in [(1, True), (0, False), ((0, 1), True), (None, False)]:
        _close(ops.prod(placed, dim=dims, keepdim=keep), _reference("prod", x, dims, keep),
               "f32")


def test_dtype_casts_before_reducing(device: Device, rng: np.random.Generator) -> None:
    """dtype= as torch: the input cast to it first (a narrower dtype rounds every element),
    the result in it."""
    x = rng.standard_normal((4, 1000)).astype(np.float32) * 100
    placed = device.array(x)
    wide = ops.sum(device.array(x.astype(np.float16), "f16"), dim=1, dtype="float32")
    assert wide.dtype == "f32"
    _close(wide, x.astype(np.float16).astype(np.float64).sum(1), "f32")
    import ml_dtypes

    narrow = ops.sum(placed, dim=1, dtype="bfloat16")
    assert narrow.dtype == "bf16"
    rounded = x.astype(ml_dtypes.bfloat16).astype(np.float64)
    _close(narrow, rounded.sum(1), "bf16")


def test_out(device: Device, rng: np.random.Generator) -> None:
    """out= dense and aligned is written by the last stage; strided, offset or of another
    dtype it gets a copy; overlapping the input is refused, naming out."""
    x = rng.standard_normal((6, 500)).astype(np.float32)
    placed = device.array(x)
    want = x.astype(np.float64).sum(1)
    dense = device.empty((6,), "f32")
    assert ops.sum(placed, dim=1, out=dense) is dense
    _close(dense, want, "f32")
    wide = device.empty((6, 3), "f32")
    column = wide.view((6,), (3,), 1)
    assert ops.sum(placed, dim=1, out=column) is column
    _close(column, want, "f32")
    half = device.empty((6,), "f16")
    ops.sum(placed, dim=1, out=half)
    _close(half, want, "f16")
    with pytest.raises(ValueError, match="argument 'out' has shape"):
        ops.sum(placed, dim=1, out=device.empty((5,), "f32"))
    with pytest.raises(ValueError, match="argument 'out' overlaps argument 'input'"):
        ops.sum(placed, dim=1, out=placed.view((6,), (1,)))


def test_repeated_calls_reuse_the_plan(device: Device, rng: np.random.Generator) -> None:
    x = rng.standard_normal((9, 700)).astype(np.float32)
    for _ in range(3):
        placed = device.array(x, offset=1)
        _close(ops.amax(placed, dim=-1), x.max(1), "f32")
    from tile_mlir.ops import entry

    assert len([k for k in entry.PLANS if k[0] == "amax"]) == 1
