"""Issue 11's lowering features in the null tier: broadcast inputs, register and memory
operands mixed, register reductions across warps, tails, loops carrying register
accumulators.

Composed programs (a row softmax, an RMSNorm, an online softmax) compile, ptxas accepts
them, their register tiles stay in registers, and their PTX has the shape that makes
them fast: 16-byte global loads and stores, a butterfly of shuffles per reduction and
one bar.sync for each reduction's cross-warp part. Programs without shuffles or barriers
also run on the host emulator against float64 NumPy.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from support import host
from support.cases import ulp_distance
from support.composed_programs import PROGRAMS, Composed
from support.primitive_programs import EMULATED
from support.primitive_programs import PROGRAMS as PRIMITIVES

import tile_mlir
from tile_mlir.dtypes import DTYPES
from tile_mlir.layout import TileLayout
from tile_mlir.lowering.schedules.induced import coverage
from tile_mlir.lowering.schedules.threads import Field, thread_plan


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_composed_program_compiles_to_fast_ptx(program: Composed) -> None:
    ptx = tile_mlir.compile(program.mlir, name=program.name).ptx["kernels"]
    assert ".local" not in ptx, "a register tile spilled to local memory"
    assert re.search(r"ld\.global\.nc\.v4\.b32", ptx), "the row is not read in 16-byte loads"
    assert re.search(r"st\.global\.v4\.b32", ptx), "the row is not written in 16-byte stores"
    reductions = 1 if program.kind == "rmsnorm" else 2
    assert ptx.count("shfl.sync.bfly") == 5 * reductions  # a 32-lane butterfly each
    assert ptx.count("bar.sync") == program.bars  # one per reduction across warps
    assert "ld.shared" in ptx and "st.shared" in ptx  # the warps' partials


def _emulate(program_text: str, inputs: list[np.ndarray | float], out: np.ndarray) -> None:
    arrays = [a for a in inputs if isinstance(a, np.ndarray)] + [out]
    buffers = {id(a): host.Buffer(a.reshape(-1), (n + 1) << 24) for n, a in enumerate(arrays)}
    args = [buffers[id(a)].address if isinstance(a, np.ndarray) else a for a in inputs]
    host.run(program_text, 1, [*args, buffers[id(out)].address], list(buffers.values()))


@pytest.mark.parametrize("name", EMULATED)
def test_feature_program_on_the_host(name: str, rng: np.random.Generator) -> None:
    program = next(p for p in PRIMITIVES if p.name == name)
    inputs = program.inputs(rng)
    out = np.full(program.out_shape, np.nan, DTYPES[program.dtype].np_dtype())
    _emulate(program.mlir, inputs, out)
    expected = program.expected(*(np.asarray(a, np.float64) for a in inputs))
    assert not np.isnan(out).any(), "elements never written"
    assert ulp_distance(out, expected, program.dtype).max() <= program.ulps


def test_the_tail_writes_nothing_past_the_view(rng: np.random.Generator) -> None:
    """A register tile written back into a dynamic view leaves the rest untouched."""
    text = """gpu.module @kernels {
  gpu.func @k(%a: memref<32x32xf32>, %n: i32, %out: memref<30x40xf32>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %cols = arith.index_cast %n : i32 to index
    %v = memref.subview %out[0, 0] [30, %cols] [1, 1] : memref<30x40xf32> to memref<30x?xf32, strided<[40, 1]>>
    %x = "tile.alloc"() {layout = #tile.layout<"S[(32, 32):(1@laneid, 1)]">} : () -> memref<32x32xf32, #gpu.address_space<private>>
    "tile.copy"(%x, %a) {scope = "warp"} : (memref<32x32xf32, #gpu.address_space<private>>, memref<32x32xf32>) -> ()
    "tile.copy"(%v, %x) {scope = "warp"} : (memref<30x?xf32, strided<[40, 1]>>, memref<32x32xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}
"""
    for cols in (0, 1, 3, 29, 32, 37):
        a = rng.uniform(-4, 4, (32, 32)).astype(np.float32)
        out = np.full((30, 40), np.nan, np.float32)
        _emulate(text, [a, cols], out)
        kept = min(cols, 32)
        assert np.array_equal(out[:, :kept], a[:30, :kept])
        assert np.isnan(out[:, kept:]).all(), f"written past column {kept}"


# ------------------------------------------------------------ the reductions' fields


def test_a_cta_wide_row_butterflies_then_meets_in_shared_memory() -> None:
    plan, why = thread_plan(TileLayout.parse("S[(256, 4):(1@tid, 1)]"), (0, 1), 256)
    assert plan is not None, why
    assert plan.lanes == (Field(1, 32),) and plan.warps == (Field(32, 8),)
    assert plan.offsets() == [32 * k for k in range(8)]
    assert not plan.partial_warp


def test_kept_warps_read_only_their_own_partials() -> None:
    """Rows over warpid 4 apart: warp w reads the partials of w, w + 1, w + 2, w + 3 of
    its row group, from its own base."""
    layout = TileLayout.parse("S[(2, 4, 32, 3):(4@warpid, 1@warpid, 1@laneid, 1)]")
    plan, why = thread_plan(layout, (1, 2, 3), 256)
    assert plan is not None, why
    assert plan.warps == (Field(32, 4),)
    assert plan.base(5 * 32 + 7) == 4 * 32 and plan.base(3 * 32 + 31) == 0


def test_a_partial_last_warp_is_planned() -> None:
    plan, why = thread_plan(TileLayout.parse("S[(48, 4):(1@tid, 1)]"), (0, 1), 48)
    assert plan is not None, why
    assert plan.partial_warp and plan.warps == (Field(32, 2),)


@pytest.mark.parametrize(("layout", "axes", "threads", "reason"), [
    ("S[(24, 2):(1@tid, 24@tid)]", (0,), 48, "spans 24 lanes, not a power of two"),
    ("S[(10, 10):(1@tid, 10@tid)]", (1,), 100, "steps 10 threads, not a power of two"),
    ("S[(2, 48):(48@tid, 1@tid)]", (1,), 96, "do not split into lane and warp fields"),
])
def test_fields_that_do_not_fold_are_refused(layout: str, axes: tuple[int, ...], threads: int,
                                             reason: str) -> None:
    plan, why = thread_plan(TileLayout.parse(layout), axes, threads)
    assert plan is None and reason in why


# ------------------------------------------------------------ register broadcasts


@pytest.mark.parametrize(("anchor", "other", "ok"), [
    ("S[(256, 4):(1@tid, 1)]", "S[(1, 1)], R[256:1@tid]", True),
    ("S[(32, 8):(1@laneid, 1)]", "S[(32, 1):(1@laneid, 1)]", True),
    ("S[(32, 8):(1@laneid, 1)]", "S[(1, 8)], R[32:1@laneid]", True),
    ("S[(32, 8):(1@laneid, 1)]", "S[(1, 8)]", True),  # every thread holds all of it
    ("S[(8, 32):(1@warpid, 1@laneid)]", "S[(8, 1):(1@warpid, 1)]", False),
    ("S[(256, 4):(1@tid, 1)]", "S[(1, 1)], R[128:1@tid]", False),
])
def test_a_broadcast_register_operand_must_be_where_it_is_read(anchor: str, other: str,
                                                               ok: bool) -> None:
    problem = coverage(TileLayout.parse(anchor), TileLayout.parse(other))
    assert (problem == "") == ok, problem
