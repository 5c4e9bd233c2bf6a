"""TileLayout: the seeds' notation parses, prints back, validates with pointed errors,
and answers offsets, owners and contiguous runs."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tile_mlir.layout import THREAD_AXES, Iter, LayoutError, TileLayout


def test_seed_register_layout() -> None:
    layout = TileLayout.parse("S[(32, 8):(1@laneid, 1)]")  # seed 003: lane i owns row i
    assert layout.shape == (32, 8) and layout.size == 256
    assert layout.thread_axis == "laneid" and layout.thread_count == 32
    assert layout.threads_of((5, 3)) == (5,) and layout.offset_of((5, 3)) == 3
    assert layout.contiguous_run == 8 and layout.storage_size == 8
    assert layout.vector_width(4) == 4 and layout.vector_width(2) == 8


def test_seed_shared_layouts_default_to_row_major() -> None:
    layout = TileLayout.parse("S[(4, 8)]")  # seed 001
    assert layout.memory_strides == (8, 1) and not layout.is_distributed
    assert layout.offset_of((2, 5)) == 21 and layout.contiguous_run == 32
    assert TileLayout.parse("S[(32, 32)]").vector_width(4) == 4  # seed 000: float4


def test_strided_layout_limits_the_run() -> None:
    column_major = TileLayout.parse("S[(4, 8):(1, 4)]")
    assert column_major.contiguous_run == 1 and column_major.vector_width(4) == 1
    padded = TileLayout.parse("S[(8, 6):(8, 1)]")  # rows padded to 8
    assert padded.contiguous_run == 6 and padded.vector_width(4) == 2


def test_replication_and_offset() -> None:
    layout = TileLayout.parse("S[(32, 8):(1@laneid, 1)], R[4:1@warpid], O[16]")
    assert layout.threads_of((3, 0)) == (3, 35, 67, 99)
    assert layout.offset_of((3, 2)) == 18 and layout.storage_size == 24
    assert layout.thread_axes == ("laneid", "warpid")
    with pytest.raises(ValueError, match="several thread axes"):
        _ = layout.thread_axis


def test_offset_breaks_vector_alignment() -> None:
    assert TileLayout.parse("S[16], O[2]").vector_width(4) == 2


@pytest.mark.parametrize(("text", "message", "column"), [
    ("S[(32, 8):(1@lane, 1)]", "unknown thread axis 'lane'", 13),
    ("S[(32, 8):(1)]", "2 extents but 1 strides", 10),
    ("S[(32, 8):(1, 1)]", "map to the same thread and offset", None),
    ("X[4]", "expected a layout part", 0),
    ("S[4", "expected ']'", 3),
    ("S[(64):(1@laneid)]", "past the 32 lanes", None),
    ("S[4], S[4]", "given twice", 6),
    ("S[(4, 8):(1@laneid, 1!)]", "unexpected character '!'", 21),
    ("S[4], R[2]", "replication needs strides", 9),
    ("S[(4, 0)]", "must be positive", None),
    ("O[3]", "needs a shard part", 0),
])
def test_errors_point_at_the_offending_character(text: str, message: str,
                                                 column: int | None) -> None:
    with pytest.raises(LayoutError) as info:
        TileLayout.parse(text)
    assert message in info.value.message
    assert info.value.position == column
    if column is not None:  # the caret line points at that character
        caret = str(info.value).splitlines()[-1]
        assert caret.index("^") - 2 == column


# ------------------------------------------------------------- properties

extents = st.integers(1, 6)


@st.composite
def layouts(draw: st.DrawFn) -> TileLayout:
    """Valid layouts: some dims over threads, the rest packed in memory."""
    rank = draw(st.integers(1, 4))
    shape = [draw(extents) for _ in range(rank)]
    on_threads = [draw(st.booleans()) for _ in range(rank)]
    axis = draw(st.sampled_from(["laneid", "tid", "warpid"]))
    iters, mem_stride, thread_stride = [], 1 + draw(st.integers(0, 2)), 1
    for extent, threaded in reversed(list(zip(shape, on_threads, strict=True))):
        if threaded and (axis != "laneid" or thread_stride * extent <= 32):
            iters.append(Iter(extent, thread_stride, axis))
            thread_stride *= extent
        else:
            iters.append(Iter(extent, mem_stride))
            mem_stride *= extent
    replicas = (Iter(draw(st.integers(1, 3)), 1, "wgid"),) if draw(st.booleans()) else ()
    return TileLayout(tuple(reversed(iters)), replicas, draw(st.integers(0, 5)))


@given(layouts())
def test_print_parse_round_trip(layout: TileLayout) -> None:
    layout.validate()
    again = TileLayout.parse(str(layout))
    assert again == layout
    assert str(again) == str(layout)


@given(layouts())
def test_each_element_has_its_own_place(layout: TileLayout) -> None:
    places = {(layout.threads_of(c)[0], layout.offset_of(c)) for c in layout.coords()}
    assert len(places) == layout.size
    assert all(layout.offset_of(c) < layout.storage_size for c in layout.coords())
    assert max(max(layout.threads_of(c)) for c in layout.coords()) < layout.thread_count


@given(st.lists(st.integers(1, 7), min_size=1, max_size=4))
def test_row_major_offsets_match_numpy(shape: list[int]) -> None:
    layout = TileLayout.parse("S[(" + ", ".join(map(str, shape)) + ",)]")
    assert layout == TileLayout.row_major(shape)
    for coord in itertools.product(*(range(e) for e in shape)):
        assert layout.offset_of(coord) == np.ravel_multi_index(coord, shape)
    assert layout.contiguous_run == math.prod(shape)


@given(layouts())
def test_contiguous_run_is_contiguous(layout: TileLayout) -> None:
    """Consecutive row-major coordinates within a run sit at consecutive offsets."""
    run = layout.contiguous_run
    coords = list(layout.coords())
    for start in range(0, len(coords), run):
        chunk = coords[start:start + run]
        offsets = [layout.offset_of(c) for c in chunk]
        owners = {layout.threads_of(c) for c in chunk}
        assert offsets == list(range(offsets[0], offsets[0] + len(chunk)))
        assert len(owners) == 1


def test_thread_axes_are_the_documented_ones() -> None:
    assert THREAD_AXES == ("laneid", "warpid", "wgid", "tid")
