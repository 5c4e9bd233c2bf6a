"""null tier: mistakes in tile programs are reported at the Python line that made them:
ProgramError for what the builder sees, CompileError (from tile-verify, through the
pipeline) for what only the passes know, both as `file:line:col: error:` with the line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import pytest

import tile_mlir.lang as tl
from tile_mlir.diagnostics import CompileError

HERE = Path(__file__).resolve()
SOURCE = HERE.read_text().splitlines()
D = tl.ArrayDesc


def line_of(marker: str) -> int:
    """The line of this file that holds `marker` (a comment at the mistake)."""
    found = [n for n, text in enumerate(SOURCE, start=1) if f"# {marker}" in text]
    assert len(found) == 1, marker
    return found[0]


Vec = Annotated[tl.Tensor, "f32", ("N",)]
Mat = Annotated[tl.Tensor, "f32", ("M", "N")]


def _build(body: Callable[..., None], *args: Any, threads: int = 64) -> None:
    tl.kernel(threads=threads)(body).ir(*args)


def unknown_op(x: Vec) -> None:
    tl.cta.sqr(x, x)  # unknown-op


def wrong_arity(x: Vec) -> None:
    tl.cta.add(x, x)  # wrong-arity


def out_of_bounds(x: Annotated[tl.Tensor, "f32", (8,)]) -> None:
    tl.cta.sqrt(x[tl.ds(4, 8)], x[tl.ds(4, 8)])  # out-of-bounds


def python_if(x: Vec) -> None:
    if tl.block_id() < 4:  # python-if
        tl.cta.sqrt(x, x)


def dynamic_alloc(x: Vec) -> None:
    tl.alloc_shared((x.shape[0],), tl.f32)  # dynamic-alloc


def bad_layout(x: Vec) -> None:
    tl.alloc_reg((32, 8), tl.f32, "S[(32, 8):(1@lane, 1)]")  # bad-layout


def shared_distributed(x: Vec) -> None:
    tl.alloc_shared((32, 8), tl.f32, "S[(32, 8):(1@laneid, 1)]")  # shared-distributed


def register_view(x: Vec) -> None:
    r = tl.alloc_reg((32, 8), tl.f32, "S[(32, 8):(1@laneid, 1)]")
    tl.warp.sqrt(r[0], r[0])  # register-view


def rank_mismatch(x: Mat, v: Vec) -> None:
    tl.cta.add(x, x, v)  # rank-mismatch


def copy_dtypes(x: Vec, h: Annotated[tl.Tensor, "f16", ("N",)]) -> None:
    tl.cta.copy(h, x)  # copy-dtypes


def prefetch_shared(x: Vec) -> None:
    tl.cta.prefetch(tl.alloc_shared((8,), tl.f32))  # prefetch-shared


def too_many_indices(x: Vec) -> None:
    tl.cta.sqrt(x[0, 1], x)  # too-many-indices


def float_for_int(x: Annotated[tl.Tensor, "i32", ("N",)]) -> None:
    tl.cta.add(x, x, 0.5)  # float-for-int


def aligned_2d(x: Mat) -> None:
    x[0:2].aligned(4)  # aligned-2d


def aligned_odd(x: Vec) -> None:
    x[1:7].aligned(3)  # aligned-odd


def aligned_as_longer(x: Vec) -> None:
    x[0:6].aligned_as(4, x[0:7])  # aligned-as-longer


CASES = [
    (unknown_op, "unknown-op", "unknown elementwise op 'sqr' (did you mean 'sqrt'?)"),
    (wrong_arity, "wrong-arity", "'add' takes 2 input(s), got 1"),
    (out_of_bounds, "out-of-bounds", "dim 0: tl.ds(4, 8) is out of bounds for size 8"),
    (python_if, "python-if", "a tl.Bool is known only when the kernel runs"),
    (dynamic_alloc, "dynamic-alloc", "a buffer needs a static shape: dim 0 is a tl.Index"),
    (bad_layout, "bad-layout", "invalid layout: unknown thread axis 'lane' (expected one of "
                               "laneid, warpid, wgid, tid) ('S[(32, 8):(1@lane, 1)]' at "
                               "character 13)"),
    (shared_distributed, "shared-distributed", "shared memory takes a memory layout"),
    (register_view, "register-view", "a register tile is used whole"),
    (rank_mismatch, "rank-mismatch", "input 1 is 1-d, dst 2-d"),
    (copy_dtypes, "copy-dtypes", "copy from f32 into f16: convert with "
                                 "tl.cta.elementwise('copy', dst, src)"),
    (prefetch_shared, "prefetch-shared", "prefetch of a tensor in shared memory: only "
                                         "global memory goes through the L2 cache"),
    (too_many_indices, "too-many-indices", "2 indices for a 1-d tensor"),
    (float_for_int, "float-for-int", "the float 0.5 does not fit a i32 op"),
    (aligned_2d, "aligned-2d", "aligned() takes a 1-d view of global memory, got a 2-d "
                               "global tensor"),
    (aligned_odd, "aligned-odd", "aligned(): vec is a power of two, got 3"),
    (aligned_as_longer, "aligned-as-longer",
     "aligned_as() splits a 1-d view like another as long"),
]


@pytest.mark.parametrize(("body", "marker", "message"), CASES, ids=[c[1] for c in CASES])
def test_program_errors_are_located(body: Callable[..., None], marker: str,
                                    message: str) -> None:
    args = [D("f32", (16, 8)), D("f32", (8,))] if body is rank_mismatch else \
        [D("f32", (16, 8))] if body is aligned_2d else \
        [D("f32", (8,)), D("f16", (8,))] if body is copy_dtypes else \
        [D("i32", (8,))] if body is float_for_int else [D("f32", (8,))]
    with pytest.raises(tl.ProgramError) as info:
        _build(body, *args)
    text = str(info.value)
    line = line_of(marker)
    head, quoted, caret = text.splitlines()[:3]
    assert head.startswith(f"{HERE}:{line}:"), text
    assert head.split(": error: ", 1)[1].startswith(message), text
    assert quoted == SOURCE[line - 1] and caret.strip() == "^"
    column = int(head.split(":")[2])
    assert caret.index("^") == column - 1 and quoted[column - 1:].startswith(("tl.", "if", "x[", "r["))


def test_body_api_outside_a_kernel_is_located_too() -> None:
    with pytest.raises(tl.ProgramError) as info:
        tl.block_id()  # outside
    assert str(info.value).startswith(f"{HERE}:{line_of('outside')}:")


def bad_variant(x: Vec) -> None:
    tl.cta.sqrt(x, x, variant="fastest")  # bad-variant


def test_verifier_errors_are_located_at_the_python_line() -> None:
    """tile-verify runs in the pipeline: its diagnostics carry the ops' Python locations,
    and the CompileError quotes the Python line."""
    kernel = tl.kernel(threads=64)(bad_variant)
    with pytest.raises(CompileError) as info:
        kernel.compile([D("f32", (8,))])
    text = str(info.value)
    line = line_of("bad-variant")
    assert text.startswith(f"{HERE}:{line}:")
    assert "names unknown variant 'fastest'" in text
    assert SOURCE[line - 1] in text.splitlines()
    assert "reproduce with: tile-opt" in text


def test_errors_in_a_loop_body_leave_no_state_behind() -> None:
    def failing(x: Vec) -> None:
        for i in tl.range(4):
            tl.cta.sqr(x[i], x[i])

    def fine(x: Vec) -> None:
        tl.cta.sqrt(x, x)

    with pytest.raises(tl.ProgramError):
        _build(failing, D("f32", (8,)))
    assert "tile.elementwise" in tl.kernel(threads=64)(fine).ir(D("f32", (8,)))
