"""null tier: the fused row ops (issue 12): the planner's choices for a table of (M, N,
dtype), argument errors that name the argument (before anything is launched or
written), and the ops end to end on the pretend device.

The pretend device runs a kernel's threads one after another, or, where they meet
(shuffles, barriers), each CTA's threads together (support/simt.py); it cannot run
clusters. Each strategy but "cluster" runs there against float64 NumPy: "warp" with one
lane a row and with groups of 4 and 32 lanes (several rows a CTA, reductions by
shuffles), "cta" (one row a CTA: shuffles, then the warps' partials through shared
memory), "split" with one lane a chunk (several chunks a row, both passes). The
cluster programs are compiled and their PTX checked (test_rows_ptx.py), and run in the
gpu tier.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from support import rows_check as ref
from support.emulated import Device, EmuArray

from tile_mlir import ops
from tile_mlir.dtypes import DTYPES
from tile_mlir.ops import reductions, rows
from tile_mlir.ops.programs.rows import Geometry

# ------------------------------------------------------------------ the planner

PLANS = [
    # (M, N, dtype, largest cluster) -> strategy, threads per row, rows a CTA, CTAs a row
    ((4096, 1024, "bf16", 16), ("cta", 64, 1, 1)),  # a whole warp's row: a CTA, 32 B a thread
    ((32768, 1024, "f32", 16), ("cta", 128, 1, 1)),
    ((4096, 800, "f16", 16), ("cta", 64, 1, 1)),  # 100 vectors: 2 a thread, some idle
    ((4096, 800, "f32", 16), ("cta", 128, 1, 1)),
    ((32768, 512, "f32", 16), ("warp", 16, 8, 1)),
    ((8, 301, "f32", 16), ("cta", 64, 1, 1)),  # 301 scalars: 5 a thread
    ((131072, 256, "f32", 16), ("warp", 8, 16, 1)),
    ((8, 7, "f32", 16), ("warp", 1, 64, 1)),  # an odd row: scalar accesses, a row a thread
    ((4, 1, "bf16", 16), ("warp", 1, 64, 1)),
    ((16384, 2048, "bf16", 16), ("cta", 64, 1, 1)),
    ((32768, 4096, "bf16", 16), ("cta", 128, 1, 1)),
    ((8192, 4096, "f32", 16), ("cta", 128, 1, 1)),
    ((8192, 16384, "bf16", 16), ("cta", 512, 1, 1)),
    ((2048, 16384, "f32", 16), ("cta", 512, 1, 1)),
    ((1024, 32768, "f32", 16), ("cluster", 512, 1, 4)),  # 128 threads a CTA
    ((1024, 65536, "bf16", 16), ("cluster", 1024, 1, 8)),
    ((512, 65536, "f32", 16), ("cluster", 1024, 1, 8)),
    ((512, 131072, "bf16", 16), ("cluster", 2048, 1, 8)),  # 256 threads a CTA
    ((256, 262144, "bf16", 16), ("cluster", 4096, 1, 16)),
    ((128, 262144, "f32", 16), ("cluster", 4096, 1, 16)),
    ((64, 524288, "f32", 16), ("cluster", 8192, 1, 16)),  # 512 threads a CTA
    ((128, 262144, "f32", 8), ("cluster", 4096, 1, 8)),  # portable clusters only
    ((64, 524288, "f32", 8), ("split", 256, 1, 1)),
    ((32, 1 << 20, "f32", 16), ("split", 256, 1, 1)),
    ((64, 1 << 20, "bf16", 16), ("split", 256, 1, 1)),
    ((1024, 32768, "f32", 0), ("cta", 1024, 1, 1)),  # no clusters (sm_80)
    ((1024, 65536, "bf16", 0), ("split", 256, 1, 1)),
    ((3, 4097, "f32", 16), ("cta", 512, 1, 1)),  # 4097: scalar accesses, 9 a thread
]


@pytest.mark.parametrize(("case", "want"), PLANS, ids=str)
def test_the_planner_chooses_by_row_length_dtype_rows_and_gpu(
        case: tuple[int, int, str, int], want: tuple[str, int, int, int]) -> None:
    m, n, dtype, clusters = case
    vec = rows.vector_width(n, dtype, [])
    plan = rows.choose(m, n, vec, clusters, itemsize=DTYPES[dtype].bytes)
    g = plan.geometry
    assert (g.strategy, g.lanes, g.rows, g.ctas) == want, plan.reason
    assert plan.reason
    # registers: at most HELD f32 values of a row a thread (CLUSTER_HELD in a cluster's
    # CTAs of at most 512 threads), MAX_PARTS tiles
    held = rows.CLUSTER_HELD if g.strategy == "cluster" else rows.HELD
    assert g.row_parts(n) * vec <= held or g.strategy == "split"
    assert g.row_parts(n) <= rows.MAX_PARTS
    assert g.threads <= (rows.MAX_CTA // 2 if g.strategy == "cluster" else rows.MAX_CTA)
    assert g.ctas <= max(clusters, 1)
    assert g.grid(m) * g.threads >= m  # every row has its threads
    if g.strategy == "split":
        assert g.chunks * g.parts * g.lanes * vec >= n
    else:
        assert g.row_parts(n) * g.lanes * vec >= n


@pytest.mark.parametrize(("chip", "sms", "want"), [
    ("sm_80", 108, 0), ("sm_90", 132, 16), ("sm_90", 114, 8), ("sm_90", 16, 8),
    (None, 0, 0)])
def test_the_row_planner_takes_16_ctas_clusters_on_whole_hoppers_only(
        monkeypatch: pytest.MonkeyPatch, chip: str | None, sms: int, want: int) -> None:
    from tile_mlir.ops import kernels
    from tile_mlir.runtime import driver

    monkeypatch.setattr(kernels, "chip", lambda device: chip)
    monkeypatch.setattr(driver, "device_sms", lambda device: sms)
    rows.largest_cluster.cache_clear()
    try:
        assert rows.largest_cluster(0) == want
    finally:
        rows.largest_cluster.cache_clear()


H200 = "sm_90-nvidia-h200"


def test_the_largest_ctas_of_16_bit_rows_prefetch_the_rows_ahead() -> None:
    """CTA_AHEAD_BYTES on an H200, for a CTA of MAX_CTA // 2 threads a row of 16-bit
    elements of an op of one input; not for f32 rows, two inputs, smaller CTAs or a row
    with edges; nor on an H100 (slower with it), a bare chip or no GPU."""
    bytes_ahead = rows.cta_ahead_bytes(H200)

    def ahead(m: int, n: int, vec: int, itemsize: int, inputs: int = 1) -> int:
        return rows.choose(m, n, vec, 16, itemsize=itemsize, inputs=inputs,
                           cta_ahead=bytes_ahead).geometry.ahead

    assert bytes_ahead == 8 << 20
    assert ahead(8192, 16384, 8, 2) == 256  # 8 MiB of rows of 32 KiB
    assert ahead(8192, 12288, 8, 2) == bytes_ahead // (12288 * 2)  # 512 threads too
    assert "each CTA prefetches the row 256 rows on into L2" in \
        rows.explain("layer_norm", (8192, 16384), "f16", target=H200)
    assert ahead(2048, 16384, 4, 4) == 0  # f32: twice the bytes a thread already
    assert ahead(8192, 16384, 8, 2, inputs=2) == 0  # the fused add's two arrays of rows
    assert ahead(32768, 4096, 8, 2) == 0  # 128 threads: more CTAs an SM
    for target in ("sm_90-nvidia-h100-80gb-hbm3", "sm_90", None):
        assert rows.cta_ahead_bytes(target) == 0
        assert "prefetches" not in rows.explain("layer_norm", (8192, 16384), "f16",
                                                target=target)
    assert rows.choose(8192, 16384, 8, 16, itemsize=2).geometry == \
        Geometry("cta", 8, 512)  # the same CTA, no rows ahead
    edges = rows.with_edges(lambda v: rows.choose(8192, 16385, v, 16, itemsize=2,
                                                  cta_ahead=bytes_ahead), 16385,
                            1, 8)  # its CTA halved (EDGE_CTA_SHARE): no prefetch
    assert edges.geometry == Geometry("cta", 8, 256, edges=True), edges.reason
    assert "prefetches" not in edges.reason


def test_many_short_rows_fill_the_gpu_and_few_rows_get_smaller_ctas() -> None:
    many = rows.choose(1 << 17, 256, 4, 16, itemsize=4).geometry
    assert many.grid(1 << 17) >= 4 * rows.SMS
    few = rows.choose(3, 256, 4, 16, itemsize=4).geometry
    assert few.threads <= 64 and few.grid(3) == 1


def test_explain_says_what_and_why() -> None:
    text = rows.explain("softmax", (1024, 65536), "bf16")
    assert text.startswith("softmax bf16 1024x65536: cluster:")
    assert "cluster of 8 CTAs of 128 threads" in text
    assert "without thread block clusters" in rows.explain("rms_norm", (1024, 65536), "bf16",
                                                           clusters=0)
    assert rows.explain("softmax", (0, 4096), "f32").endswith("nothing is launched")
    assert rows.explain("layer_norm", (8, 0), "bf16") == \
        "layer_norm bf16 8x0: an empty input: nothing is launched"
    with pytest.raises(ValueError, match=r"shape \[-3, 4\] has a negative size"):
        rows.explain("softmax", (-3, 4), "f32")


def test_the_norms_weights_come_from_copies_where_they_pay() -> None:
    """Rows with edges of COPY_LENGTH elements or more (layer norm's from 1024, a single
    weight's from 16384) and COPY_BYTES in all read their weights from copies; shorter
    rows, fewer bytes, aligned rows, softmax (no weight) and split rows do not."""
    said = "copies, one per alignment"
    for op, shape, dtype, copies in (
            ("layer_norm", (16380, 4097), "bf16", True), ("layer_norm", (65472, 1025), "bf16", True),
            ("layer_norm", (8190, 4097), "f32", True), ("rms_norm", (2097, 32001), "bf16", True),
            ("fused_add_rms_norm", (1048, 32001), "f32", True),
            ("layer_norm", (1023, 4097), "bf16", False),  # 8 MiB
            ("rms_norm", (16380, 4097), "bf16", False), ("rms_norm", (130561, 257), "f32", False),
            ("layer_norm", (16384, 4096), "bf16", False),  # aligned: no edges
            ("softmax", (16380, 4097), "bf16", False),
            ("layer_norm", (64, 1 << 20), "bf16", False)):  # split: no edges
        text = rows.explain(op, shape, dtype)
        assert (said in text) == copies, text
    assert "rows of 1024 or more, 64 MiB or more" in rows.explain("layer_norm", (16380, 4097),
                                                                  "bf16")


@pytest.mark.parametrize("n", [257, 259, 261, 385])
def test_f32_rows_a_warp_stacks_take_a_warp_a_row(n: int) -> None:
    """rows.SCALAR_WARP: f32 rows of one input that a CTA of one warp would stack with
    edges (257 to 259) take a warp a row, 4-byte loads, 4 rows a CTA of 128 threads,
    without edges, in softmax, log_softmax and the norms; longer ones (261, 385) keep their
    CTA of 64 threads; the fused add (two inputs) and the reductions keep their stacks."""
    warp = n <= 259
    for op in ("softmax", "log_softmax", "rms_norm", "layer_norm"):
        said = rows.explain(op, (130561, n), "f32")
        assert said.startswith(f"{op} f32 130561x{n}: {'warp' if warp else 'cta'}: "), said
        assert ("32 lane(s) holding 9 elements each: 4 rows a CTA of 128 threads" in said) \
            == warp, said
        assert "each row is read 1 element at a time" in said
    fused = rows.explain("fused_add_rms_norm", (130561, n), "f32")
    assert ("one CTA of a warp, 8 elements a thread" in fused) == warp, fused
    held = reductions.explain("sum", (130561, n), "f32", dim=-1)
    assert ("reduce_rows_held" in held) == warp, held
    before = rows.chosen(130561, n, 1, 16, itemsize=4, inputs=1, early=0, f32_ahead=False,
                         wide=4, stacks=rows.STACK_VALUES)  # a family not in SCALAR_WARP
    assert before.geometry.edges == warp and before.geometry.stack == (4 if warp else 1)


def test_vector_width_follows_the_row_the_strides_and_offsets() -> None:
    assert rows.vector_width(4096, "bf16", []) == 8
    assert rows.vector_width(4096, "f32", [4100]) == 4
    assert rows.vector_width(4096, "f32", [4098]) == 2
    assert rows.vector_width(4097, "f32", []) == 1
    assert rows.vector_width(1000, "bf16", [3]) == 1


def test_short_rows_with_edges_stack_where_the_kernel_does() -> None:
    """rows.STACKS: a CTA of at most STACK_THREADS threads holding at most STACK_PARTS
    parts and the family's elements of a row with edges holds STACK_ROWS rows where there
    are STACK_MIN_ROWS; a row a warp may so hold, that a group of lanes would hold without
    edges (and the narrow accesses in a CTA), takes a CTA of a warp with them; where the
    kernel does not stack, as before; the norms at 8 elements a thread; the fused add +
    RMSNorm's rows that a group of lanes would hold: PAIR_STACK_ROWS, with their
    prefetch."""
    def plan(m: int, n: int, dtype: str, stacks: int = rows.STACK_VALUES) -> Any:
        size = DTYPES[dtype].bytes
        return rows.chosen(m, n, 1, 16, itemsize=size, inputs=1, early=0, f32_ahead=False,
                           wide=16 // size, stacks=stacks)

    stacked = plan(65472, 1025, "bf16")
    assert stacked.geometry == Geometry("cta", 8, 64, edges=True, stack=4), stacked.reason
    assert "each CTA holds 4 rows one after another" in stacked.reason
    assert stacked.geometry.grid(65472) == 65472 // 4
    assert plan(65472, 1025, "bf16", stacks=0).geometry == \
        Geometry("cta", 8, 64, edges=True)  # a family whose kernel holds one row
    assert plan(rows.STACK_MIN_ROWS - 1, 1025, "bf16").geometry.stack == 1  # too few rows
    assert plan(43662, 1537, "bf16").geometry.stack == 1  # 3 parts a thread
    assert plan(32736, 1025, "f32").geometry == Geometry("cta", 4, 128, edges=True)  # 128
    for n, dtype in ((257, "bf16"), (385, "bf16"), (513, "bf16"), (257, "f32")):
        wide = 16 // DTYPES[dtype].bytes
        warp = plan(1 << 17, n, dtype)
        assert warp.geometry == Geometry("cta", wide, 32, edges=True, stack=4), warp.reason
        assert warp.reason.startswith(f"a row of {n} fits one CTA of a warp")
        assert plan(1000, n, dtype).geometry == Geometry("cta", wide, 32, edges=True)
        assert not plan(1 << 17, n, dtype, stacks=0).geometry.edges
    for n, dtype in ((129, "bf16"), (77, "bf16"), (513, "f32"), (129, "f32")):
        assert plan(1 << 17, n, dtype) == plan(1 << 17, n, dtype, stacks=0), (n, dtype)
    narrow = rows.explain("softmax", (1 << 17, 129), "bf16")  # says so
    assert narrow.endswith("each row is read 1 element at a time (2-byte accesses: rows of "
                           "129 do not all start 16-byte aligned, and this plan reads them "
                           "without edges)"), narrow
    assert "at a time" not in rows.explain("softmax", (1 << 17, 1025), "bf16")  # edges
    assert "at a time" not in rows.explain("softmax", (1 << 17, 1024), "bf16")  # aligned
    assert "4 elements at a time (8-byte" in rows.explain("softmax", (1 << 17, 132), "bf16")
    aligned = rows.chosen(1 << 17, 1024, 8, 16, itemsize=2, inputs=1, early=0,
                          f32_ahead=False, wide=8, stacks=16)  # aligned rows: as before
    assert aligned.geometry == Geometry("cta", 8, 64)
    assert "4 rows one after another" in rows.explain("log_softmax", (65472, 1025), "bf16")
    for op in ("rms_norm", "layer_norm"):  # the norms stack rows of one part a thread
        assert "one after another" not in rows.explain(op, (65472, 1025), "bf16")
        assert "one after another" not in rows.explain(op, (130816, 513), "bf16")
        assert "4 rows one after another" in rows.explain(op, (261123, 257), "bf16")
    fused = "fused_add_rms_norm"  # rows a group of lanes would hold: PAIR_STACK_ROWS
    for shape, dtype, cta in (((130561, 257), "f32", "a warp, 8"), ((65408, 513), "f32",
                                                                    "64 threads, 8"),
                              ((261123, 257), "bf16", "a warp, 8"),
                              ((130816, 513), "bf16", "a warp, 16")):
        said = rows.explain(fused, shape, dtype)
        assert f"one CTA of {cta} elements a thread" in said, said
        assert "2 rows one after another, every row's loads before the first reduction, " \
            "and prefetches the rows 8 on into L2" in said, said
        assert "one after another" not in rows.explain(fused, (4000, shape[1]), dtype)
    said = rows.explain(fused, (65472, 1025), "bf16")  # 1 part of each: not stacked
    assert "one CTA of 128 threads holding 8 elements of each" in said, said
    assert "one after another" not in said, said


def test_forcing_a_strategy_plans_again() -> None:
    with rows.forced("cluster", ctas=4):
        plan = rows.plan_for(8, 1000, 4, 0, itemsize=4)
        assert plan.geometry.strategy == "cluster" and plan.geometry.ctas == 4
        assert plan.reason == "forced: cluster"
    assert rows.plan_for(8, 1000, 4, 0, itemsize=4).geometry.strategy == "cta"
    with pytest.raises(ValueError, match="strategy 'rows'"):
        rows.force("rows")


def _described(shape: tuple[int, int], strides: tuple[int, int], offset: int = 0,
               dtype: str = "bf16") -> Any:
    """An ops.args.Array of rows for the planner (offset: elements past a 16-byte
    boundary)."""
    from tile_mlir.ops.args import Array

    size = DTYPES[dtype].bytes
    return Array("x", "torch", dtype, shape, strides, (1 << 20) + offset * size, 0)


def test_rows_that_start_unaligned_take_edges_where_every_array_agrees() -> None:
    """softmax's rows of odd length (or at an odd offset) are read with edges (16-byte
    vectors, and the few elements before and after them apart) where x's and the output's
    rows start at the same alignment, one row a CTA or cluster; so are the norms' (their
    weight and bias split as each row is); otherwise as before."""
    odd, out = _described((64, 1025), (1025, 1)), _described((64, 1025), (1025, 1))
    assert rows.edge_width("softmax", 2, [odd, out]) == 8
    assert rows.edge_width("rms_norm", 2, [odd, out]) == 8
    assert rows.edge_width("fused_add_rms_norm", 2, [odd, out]) == 8
    assert rows.edge_width("layer_norm", 2, [odd, out]) == 8
    assert rows.edge_width("softmax", 4) == 4  # one contiguous array (explain)
    shifted = _described((64, 1025), (1025, 1), offset=1)  # x[1:]: one element on
    assert rows.edge_width("softmax", 2, [shifted, out]) == 0
    assert rows.edge_width("softmax", 2, [shifted, _described((64, 1025), (1025, 1), 9)]) \
        == 8  # 9 elements on: the same alignment
    strided = _described((64, 1025), (1032, 1))  # a row stride of 1032: rows aligned alike
    assert rows.edge_width("softmax", 2, [strided, out]) == 0
    one_row = _described((1, 1025), (1032, 1))
    assert rows.edge_width("softmax", 2, [one_row, _described((1, 1025), (1025, 1))]) == 8
    assert rows.edge_width("softmax", 2, [strided, _described((64, 1025), (1040, 1))]) == 8

    def plan(m: int, n: int, dtype: str) -> Any:
        size = DTYPES[dtype].bytes
        return rows.with_edges(lambda v: rows.choose(m, n, v, 16, itemsize=size), n,
                               rows.vector_width(n, dtype, []), 16 // size)

    cta = plan(65536, 1025, "bf16")  # the aligned row's CTA of 64 (SHORT_BYTES), not halved
    assert cta.geometry == Geometry("cta", 8, 64, edges=True), cta.reason
    assert cta.reason.startswith("a row of 1025 would take a whole warp: one CTA of 64 "
                                 "threads holds it, 16 elements each")
    halved = plan(16384, 4097, "bf16")  # the aligned row's 128 threads, half (EDGE_CTA_SHARE)
    assert halved.geometry == Geometry("cta", 8, 64, edges=True), halved.reason
    assert halved.reason.startswith("a row of 4097 fits one CTA of 64 threads holding 64")
    assert "start aligned" in cta.reason
    assert plan(16384, 4097, "f32").geometry == Geometry("cta", 4, 128, edges=True)
    cluster = plan(4096, 50257, "bf16").geometry
    assert (cluster.strategy, cluster.lanes, cluster.ctas, cluster.edges) == \
        ("cluster", 1024, 8, True)
    assert plan(32768, 333, "f32").geometry == rows.choose(32768, 333, 1, 16, itemsize=4).geometry

    def pair(n: int) -> Any:  # the fused add's x and residual: 1 part of each a thread
        return rows.with_edges(lambda v: rows.choose(1024, n, v, 16, itemsize=2, inputs=2),
                               n, 1, 8, inputs=2)

    assert pair(8191).geometry == Geometry("cta", 8, 512, edges=True)  # not 128: halved
    assert pair(8191).reason.startswith("a row of 8191 of each of two inputs fits one CTA "
                                        "of 512 threads holding 16 elements of each")
    assert pair(16383).geometry == Geometry("cta", 8, 512, edges=True)  # MAX_CTA // 2
    assert pair(1025).geometry == Geometry("cta", 8, 128, edges=True)
    assert pair(4097).geometry == Geometry("cta", 8, 512, edges=True)
    for n, lanes, ctas in ((32001, 2048, 8), (50257, 2048, 8), (262145, 4096, 16)):
        g = pair(n).geometry  # up to EDGE_PAIR_LANES, never fewer than one input's
        assert (g.strategy, g.lanes, g.ctas, g.threads, g.early, g.edges) == \
            ("cluster", lanes, ctas, lanes // ctas, 0, True), (n, g)
    assert pair(262145).geometry == replace(
        rows.choose(1024, 262145, 8, 16, itemsize=2, inputs=2).geometry, edges=True)
    def f32(n: int) -> Any:  # 2 parts of each a thread, as far as MAX_CTA
        return rows.with_edges(lambda v: rows.choose(1024, n, v, 16, itemsize=4, inputs=2),
                               n, 1, 4, inputs=2).geometry

    assert f32(8191) == Geometry("cta", 4, 1024, edges=True)  # one input's: 256 threads
    assert f32(4097) == Geometry("cta", 4, 512, edges=True)
    assert f32(16383) == Geometry("cta", 4, 1024, edges=True)  # 4 parts
    g = f32(32001)
    assert (g.strategy, g.lanes, g.ctas, g.edges) == ("cluster", 2048, 8, True)
    assert not plan(4096, 1024, "bf16").geometry.edges  # aligned rows: none
    assert "start aligned" in rows.explain("log_softmax", (4096, 50257), "bf16")
    assert "start aligned" in rows.explain("layer_norm", (4096, 50257), "bf16")
    with rows.forced("cta", lanes=64):  # forced: edges, the threads as forced
        g = rows.plan_for(8, 1025, 1, 0, itemsize=2, wide=8).geometry
        assert (g.strategy, g.lanes, g.edges) == ("cta", 64, True)


# ------------------------------------------------------------------ errors


def _x(device: Device, shape: tuple[int, ...] = (4, 8), dtype: str = "f32") -> EmuArray:
    return device.array(np.arange(np.prod(shape), dtype=np.float32).reshape(shape), dtype)


def test_errors_name_the_argument(device: Device) -> None:
    x = _x(device)
    with pytest.raises(IndexError, match="argument 'dim' is 2, out of range for a 2-d input"):
        ops.softmax(x, dim=2)
    with pytest.raises(TypeError, match="argument 'dim' must be an int"):
        ops.log_softmax(x, dim=1.0)
    with pytest.raises(TypeError, match="argument 'input' has element type int32"):
        ops.softmax(device.array(np.zeros((2, 3), np.int32)))
    with pytest.raises(ValueError, match=r"argument 'normalized_shape' is \[4\], but the input "
                                         r"has shape \[4, 8\]"):
        ops.rms_norm(x, (4,))
    with pytest.raises(ValueError, match=r"argument 'weight' has shape \[4\], expected \[8\]"):
        ops.rms_norm(x, 8, _x(device, (4,)))
    with pytest.raises(TypeError, match="argument 'bias' is bfloat16, the input float32"):
        ops.layer_norm(x, [8], None, _x(device, (8,), "bf16"))
    with pytest.raises(TypeError, match="argument 'eps' must be a number"):
        ops.layer_norm(x, [8], eps="small")
    with pytest.raises(TypeError, match="rms_norm: argument 'input' must be an array, got a "
                                        "number"):
        ops.rms_norm(np.float32(2.0), 1)
    with pytest.raises(TypeError, match="argument 'weight' must be an array or None, got a "
                                        "number"):
        ops.layer_norm(x, [8], 0.5)
    with pytest.raises(ValueError, match=r"argument 'out' has shape \[4, 7\]"):
        ops.softmax(x, out=device.empty((4, 7), "f32"))
    with pytest.raises(TypeError, match="argument 'out' is bfloat16, the result float32"):
        ops.softmax(x, out=device.empty((4, 8), "bf16"))
    with pytest.raises(ValueError, match="argument 'out' overlaps argument 'input'"):
        ops.softmax(x, out=x.view((4, 8), (8, 1), 1))


def test_fused_add_errors_write_nothing(device: Device) -> None:
    x, w = _x(device), _x(device, (8,))
    residual = _x(device)
    before = residual.numpy()
    with pytest.raises(ValueError, match="argument 'residual' is float32 of shape"):
        ops.fused_add_rms_norm(x, _x(device, (4, 9)), w, 1e-6)
    with pytest.raises(ValueError, match="argument 'weight' has shape"):
        ops.fused_add_rms_norm(x, residual, _x(device, (9,)), 1e-6)
    with pytest.raises(TypeError, match="argument 'weight' is bfloat16"):
        ops.fused_add_rms_norm(x, residual, _x(device, (8,), "bf16"), 1e-6)
    with pytest.raises(ValueError, match="argument 'residual' overlaps argument 'input'"):
        ops.fused_add_rms_norm(x, x.view((4, 8), (8, 1), 4), w, 1e-6)
    with pytest.raises(ValueError, match="argument 'weight' overlaps argument 'input'"):
        ops.fused_add_rms_norm(x, residual, x.view((8,), (1,)), 1e-6)
    with pytest.raises(TypeError, match="argument 'eps' must be a number"):
        ops.fused_add_rms_norm(x, residual, w, None)
    assert np.array_equal(residual.numpy(), before)
    assert not device.launches


def test_a_plan_refuses_overlapping_arrays_on_every_call(device: Device) -> None:
    """The plan's key holds no addresses: the overlap is checked each call, before any
    launch, so that a later call with overlapping arrays fails writing nothing."""
    buffer = device.array(np.ones(64, np.float32))
    w = _x(device, (8,))
    x, residual = buffer.view((2, 8), (8, 1)), buffer.view((2, 8), (8, 1), 32)
    ops.fused_add_rms_norm(x, residual, w, 1e-6)  # apart: planned, run
    launched = len(device.launches)
    before = buffer.numpy()
    overlapping = buffer.view((2, 8), (8, 1), 8)  # the same key: layout and alignment
    with pytest.raises(ValueError, match="overlaps argument 'input'"):
        ops.fused_add_rms_norm(x, overlapping, w, 1e-6)
    assert len(device.launches) == launched
    assert np.array_equal(buffer.numpy(), before)


# ------------------------------------------------------------------ on the pretend device

EMULATED = {
    "warp": rows.Forced("warp", lanes=1),  # a row a thread: no shuffles
    "warp4": rows.Forced("warp", lanes=4),  # 4 lanes a row, several rows a CTA
    "warp32": rows.Forced("warp", lanes=32),
    "cta": rows.Forced("cta", lanes=64),  # two warps a row: their partials meet in shared
    "split": rows.Forced("split", lanes=1, parts=2),  # a chunk a thread, several a row
}


def _inputs(rng: np.random.Generator, shape: tuple[int, ...], dtype: str,
            scale: float = 4.0, shift: float = 0.0) -> np.ndarray:
    values = rng.uniform(-scale, scale, shape) + shift
    return values.astype(DTYPES[dtype].np_dtype())


Run = Callable[[Device, np.random.Generator, tuple[int, ...], str], None]


def _softmax(log: bool) -> Run:
    def run(device: Device, rng: np.random.Generator, shape: tuple[int, ...],
            dtype: str) -> None:
        x = _inputs(rng, shape, dtype, 8.0)
        fn = ops.log_softmax if log else ops.softmax
        got = fn(device.array(x, dtype), dim=-1).numpy()
        n = shape[-1]
        if log:
            want = ref.log_softmax(x)
            ref.check(got, want, ref.log_softmax_bound(x, want, n, dtype), "log_softmax")
        else:
            want = ref.softmax(x)
            ref.check(got, want, ref.softmax_bound(want, n, dtype), "softmax")
            ref.sums_to_one(got, n, dtype)
    return run


def _rms(device: Device, rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> None:
    x, w = _inputs(rng, shape, dtype), _inputs(rng, shape[-1:], dtype, 2.0)
    got = ops.rms_norm(device.array(x, dtype), shape[-1:], device.array(w, dtype), 1e-5)
    want = ref.rms_norm(x, 1, w, 1e-5)
    ref.check(got.numpy(), want, ref.norm_bound(want, shape[-1], dtype), "rms_norm")


def _layer(device: Device, rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> None:
    x = _inputs(rng, shape, dtype, 2.0, 3.0)  # a mean to take away
    w, b = _inputs(rng, shape[-1:], dtype, 2.0), _inputs(rng, shape[-1:], dtype, 2.0)
    got = ops.layer_norm(device.array(x, dtype), [shape[-1]], device.array(w, dtype),
                         device.array(b, dtype), 1e-5)
    want = ref.layer_norm(x, 1, w, b, 1e-5)
    bound = ref.norm_bound(want, shape[-1], dtype, ref.f64(b) + 4.0)
    ref.check(got.numpy(), want, bound, "layer_norm")


def _fused_add(device: Device, rng: np.random.Generator, shape: tuple[int, ...],
               dtype: str) -> None:
    x, r = _inputs(rng, shape, dtype), _inputs(rng, shape, dtype)
    w = _inputs(rng, shape[-1:], dtype, 2.0)
    xd, rd = device.array(x, dtype), device.array(r, dtype)
    assert ops.fused_add_rms_norm(xd, rd, device.array(w, dtype), 1e-6) is None
    total = ref.added(x, r, dtype)
    assert np.array_equal(rd.numpy().view(np.uint8), total.view(np.uint8)), "the residual"
    want = ref.rms_norm(total, 1, w, 1e-6)
    ref.check(xd.numpy(), want, ref.norm_bound(want, shape[-1], dtype), "fused_add_rms_norm")


RUNS: dict[str, Run] = {"softmax": _softmax(False), "log_softmax": _softmax(True),
                        "rms_norm": _rms, "layer_norm": _layer, "fused_add_rms_norm": _fused_add}
SHAPES = [(5, 37), (3, 1), (2, 3, 40), (1, 96), (3, 33)]
"""Rows of 37 and 33 f32 end in a part of one vector (4 and 32 lanes): its view is a tail
of one element, which an op beside a register tile once took for a broadcast (layer
norm's multi-row centered squares counted it in every lane)."""


@pytest.mark.parametrize("strategy", sorted(EMULATED))
@pytest.mark.parametrize("dtype", ["f32", "bf16", "f16"])
@pytest.mark.parametrize("op", sorted(RUNS))
def test_every_op_and_strategy_on_the_pretend_device(device: Device, rng: np.random.Generator,
                                                     op: str, dtype: str,
                                                     strategy: str) -> None:
    with rows.forced(EMULATED[strategy]):
        for shape in SHAPES:
            RUNS[op](device, rng, shape, dtype)


@pytest.mark.parametrize(("shape", "dtype"), [((5, 33), "f32"), ((3, 260), "f32"),
                                             ((3, 264), "bf16")], ids=str)
@pytest.mark.parametrize("op", sorted(RUNS))
def test_planned_rows_ending_in_one_vector(device: Device, rng: np.random.Generator, op: str,
                                           shape: tuple[int, int], dtype: str) -> None:
    """The planner's own geometry (a group of 4 or 16 lanes a row, several rows a CTA)
    for rows whose last part is one vector: each op against float64 (layer norm's
    variance once counted that vector in every lane)."""
    m, n = shape
    g = rows.choose(m, n, rows.vector_width(n, dtype, []), 16,
                    itemsize=DTYPES[dtype].bytes, inputs=rows.inputs_of(op)).geometry
    assert g.strategy == "warp" and g.rows > 1 and (n // g.vec) % g.lanes == 1
    RUNS[op](device, rng, shape, dtype)


@pytest.mark.parametrize("op", sorted(RUNS))
def test_a_cta_row_ending_in_one_element(device: Device, rng: np.random.Generator,
                                         op: str) -> None:
    """One row a CTA of 64 threads, rows of 65 and 129: the last part's view is one
    element, a tail of run-time size (the cluster strategy's parts are the same views)."""
    with rows.forced(rows.Forced("cta", lanes=64)):
        for shape in ((2, 65), (3, 129)):
            RUNS[op](device, rng, shape, "f32")


# ------------------------------------------------------------------ layouts and edges


@pytest.fixture
def one_lane() -> Any:
    """Every row op one thread a row (runs on the pretend device)."""
    with rows.forced(EMULATED["warp"]):
        yield


def test_rows_with_a_stride_misaligned_and_in_place(device: Device, rng: np.random.Generator,
                                                    one_lane: None) -> None:
    wide = rng.uniform(-4, 4, (6, 50)).astype(np.float32)
    buffer = device.array(wide)
    x = buffer.view((6, 37), (50, 1), 1)  # a row stride of 50, element 1: misaligned
    got = ops.softmax(x).numpy()
    want = ref.softmax(wide[:, 1:38])
    ref.check(got, want, ref.softmax_bound(want, 37, "f32"), "strided softmax")
    out = device.empty((12, 60), "f32").view((6, 37), (120, 2), 3)  # strided out=
    assert ops.log_softmax(x, out=out) is out
    want = ref.log_softmax(wide[:, 1:38])
    ref.check(out.numpy(), want, ref.log_softmax_bound(wide[:, 1:38], want, 37, "f32"),
              "log_softmax into a strided out=")
    ops.softmax(x, out=x)  # in place: the same view
    ref.check(x.numpy(), ref.softmax(wide[:, 1:38]),
              ref.softmax_bound(ref.softmax(wide[:, 1:38]), 37, "f32"), "in place")
    assert np.array_equal(buffer.numpy()[:, 0], wide[:, 0])  # nothing else written
    assert np.array_equal(buffer.numpy()[:, 38:], wide[:, 38:])


@pytest.mark.parametrize("stack", [1, 2, 3])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_rows_with_edges_on_the_pretend_device(device: Device, rng: np.random.Generator,
                                               op: str, dtype: str, stack: int) -> None:
    """A CTA a row with edges (forced: 64 threads, two warps), or a stack of 2 or 3 rows
    a CTA (Geometry.stack; row counts no multiple of it): contiguous rows of odd length
    (each row at another alignment), rows shorter than a vector, rows at an odd offset
    written into out= at the same alignment and in place; nothing around them written.
    Against float64 NumPy."""
    fn = ops.log_softmax if op == "log_softmax" else ops.softmax
    size = DTYPES[dtype].bytes

    def check(got: np.ndarray, x: np.ndarray, what: str) -> None:
        want = ref.log_softmax(x) if op == "log_softmax" else ref.softmax(x)
        n = x.shape[-1]
        bound = ref.log_softmax_bound(x, want, n, dtype) if op == "log_softmax" else \
            ref.softmax_bound(want, n, dtype)
        ref.check(got, want, bound, f"{op} {dtype} {what}")

    with rows.forced("cta", lanes=64, stack=stack):
        for shape in ((5, 1001), (3, 3), (4, 7), (2, 520), (1, 77)):
            values = _inputs(rng, shape, dtype, 8.0)
            check(fn(device.array(values, dtype)).numpy(), values, f"{shape}")
        wide = _inputs(rng, (6, 700), dtype, 8.0)
        buffer = device.array(wide, dtype)
        x = buffer.view((6, 601), (700, 1), 3)  # odd offset, the row stride a multiple of 4
        poison = np.full((6, 700), np.nan, DTYPES[dtype].np_dtype())
        target = device.array(poison, dtype)
        out = target.view((6, 601), (700, 1), 3)
        plan = rows.plan_for(6, 601, rows.vector_of(601, [x.ref(), out.ref()]), 0,
                             itemsize=size, wide=rows.edge_width("softmax", size,
                                                                 [x.ref(), out.ref()]))
        assert plan.geometry.edges, plan.reason
        assert fn(x, out=out) is out
        check(out.numpy(), wide[:, 3:604], "at an offset into out=")
        around = target.numpy()
        assert np.isnan(around[:, :3].astype(np.float32)).all()
        assert np.isnan(around[:, 604:].astype(np.float32)).all()
        fn(x, out=x)  # in place
        check(x.numpy(), wide[:, 3:604], "in place")
        assert np.array_equal(buffer.numpy()[:, :3], wide[:, :3])
        assert np.array_equal(buffer.numpy()[:, 604:], wide[:, 604:])


@pytest.mark.parametrize("stack", [1, 3])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_norms_with_edges_on_the_pretend_device(device: Device, rng: np.random.Generator,
                                                dtype: str, stack: int, copies: bool) -> None:
    """The norms over rows that start unaligned (a CTA a row of 64 threads, forced; or a
    stack of 3 rows a CTA, whose last CTA's rows past M repeat the last row: the fused
    add's residual must still be x + r, added once):
    contiguous rows of odd length, rows at an odd offset, the weight (and bias) at an
    offset of its own (split as each row is: tl's aligned_as; or read from its copies at
    every alignment, rows.COPY_BYTES, tl's aligned_copy_as), shorter rows than a vector;
    the fused add's residual checked too; layer norm's centered squares over the row's
    elements only (a mean to take away). Against float64."""
    size = DTYPES[dtype].bytes
    with rows.forced("cta", lanes=64, stack=stack):
        for shape in ((5, 1001), (4, 7), (3, 3), (2, 520), (3, 1025)):
            _rms(device, rng, shape, dtype)
            _fused_add(device, rng, shape, dtype)
            _layer(device, rng, shape, dtype)
        wide = _inputs(rng, (6, 700), dtype)
        x = device.array(wide, dtype).view((6, 601), (700, 1), 3)  # rows at an odd offset
        weights = _inputs(rng, (610,), dtype, 2.0)
        w = device.array(weights, dtype).view((601,), (1,), 5)  # at an offset of its own
        plan = rows.plan_for(6, 601, rows.vector_of(601, [x.ref()]), 0, itemsize=size,
                             wide=rows.edge_width("rms_norm", size, [x.ref()]))
        assert plan.geometry.edges, plan.reason
        assert rows.copies_serve("rms_norm", plan.geometry, 6, 601, size) == copies
        got = ops.rms_norm(x, (601,), w, 1e-5).numpy()
        want = ref.rms_norm(wide[:, 3:604], 1, weights[5:606], 1e-5)
        ref.check(got, want, ref.norm_bound(want, 601, dtype), "rms_norm at offsets")
        biases = _inputs(rng, (610,), dtype, 2.0)
        b = device.array(biases, dtype).view((601,), (1,), 2)  # another offset again
        got = ops.layer_norm(x, [601], w, b, 1e-5).numpy()
        want = ref.layer_norm(wide[:, 3:604], 1, weights[5:606], biases[2:603], 1e-5)
        bound = ref.norm_bound(want, 601, dtype, ref.f64(biases[2:603]) + 4.0)
        ref.check(got, want, bound, "layer_norm at offsets")


@pytest.mark.parametrize("stack", [1, 4])
def test_short_rows_with_edges_a_warp_sized_cta(device: Device, rng: np.random.Generator,
                                               stack: int) -> None:
    """Rows of 77 and 257 bf16 (CLIP's and a ViT's tokens), which the planner gives a
    group of lanes without edges, forced onto a CTA of 32 threads a row with edges, one
    or a stack of 4 a CTA (candidates for bench/rows_ab.py): against float64."""
    with rows.forced("cta", lanes=32, stack=stack):
        for shape in ((9, 77), (6, 257)):
            x = _inputs(rng, shape, "bf16", 8.0)
            for log in (False, True):
                fn = ops.log_softmax if log else ops.softmax
                got = fn(device.array(x, "bf16")).numpy()
                want = ref.log_softmax(x) if log else ref.softmax(x)
                bound = ref.log_softmax_bound(x, want, shape[1], "bf16") if log else \
                    ref.softmax_bound(want, shape[1], "bf16")
                ref.check(got, want, bound, f"{shape} stack {stack}")


def test_rows_that_do_not_merge_are_copied(device: Device, rng: np.random.Generator,
                                           one_lane: None) -> None:
    values = rng.uniform(-4, 4, (4, 6, 10)).astype(np.float32)
    x = device.array(values)
    for dim in (0, 1, -1):
        got = ops.softmax(x, dim=dim).numpy()
        want = ref.softmax(values, dim)
        ref.check(got, want, ref.softmax_bound(want, values.shape[dim], "f32"), f"dim {dim}")
    transposed = x.view((10, 6, 4), (1, 10, 60))
    got = ops.log_softmax(transposed, dim=-1).numpy()
    t = values.transpose(2, 1, 0)
    want = ref.log_softmax(t)
    ref.check(got, want, ref.log_softmax_bound(t, want, 4, "f32"), "transposed")
    w = device.array(rng.uniform(-2, 2, (12, 10)).astype(np.float32)).view((6, 10), (20, 1))
    got = ops.layer_norm(x, (6, 10), w, None, 1e-5).numpy()  # two dims; a strided weight
    want = ref.layer_norm(values, 2, w.numpy(), None, 1e-5)
    ref.check(got, want, ref.norm_bound(want, 60, "f32", 4.0), "two normalized dims")


def test_empty_and_zero_dimensional_inputs(device: Device, one_lane: None) -> None:
    for shape in ((0, 8), (4, 0)):
        x = device.empty(shape, "bf16")
        assert ops.softmax(x).numpy().shape == shape
        assert ops.rms_norm(x, shape[-1:]).numpy().shape == shape
        assert ops.layer_norm(x, shape[-1:]).numpy().shape == shape
        assert ops.fused_add_rms_norm(x, device.empty(shape, "bf16"),
                                      device.empty(shape[-1:], "bf16"), 1e-6) is None
    assert not device.launches
    scalar = device.array(np.array(3.5, np.float32))
    assert ops.softmax(scalar, dim=0).numpy() == 1.0
    assert ops.log_softmax(scalar, dim=-1).numpy() == 0.0


def test_softmax_dtype_casts_the_input_first(device: Device, rng: np.random.Generator,
                                             one_lane: None) -> None:
    values = rng.uniform(-4, 4, (3, 20)).astype(np.float32)
    got = ops.softmax(device.array(values), dtype="bfloat16").numpy()
    assert got.dtype == DTYPES["bf16"].np_dtype()
    narrow = values.astype(DTYPES["bf16"].np_dtype())
    want = ref.softmax(narrow)
    ref.check(got, want, ref.softmax_bound(want, 20, "bf16"), "dtype=bfloat16")


def test_special_values(device: Device, one_lane: None) -> None:
    """Large logits (no overflow: the max is taken away), a row with +inf (NaN, as torch),
    a row of -inf (NaN), NaN inputs; the norms of a NaN row are NaN."""
    inf, nan = float("inf"), float("nan")
    values = np.array([[1000.0, 999.0, -1000.0, 0.0], [inf, 1.0, 2.0, 3.0],
                       [-inf, -inf, -inf, -inf], [nan, 1.0, 2.0, 3.0],
                       [-inf, 0.0, 1.0, -inf]], np.float32)
    x = device.array(values)
    with np.errstate(invalid="ignore"):
        want = ref.softmax(values)
        ref.check(ops.softmax(x).numpy(), want, ref.softmax_bound(want, 4, "f32"), "softmax")
        want = ref.log_softmax(values)
        got = ops.log_softmax(x).numpy()
        ref.check(got, want, ref.log_softmax_bound(values, want, 4, "f32"), "log_softmax")
        got = ops.rms_norm(x, 4, eps=1e-5).numpy()
    assert np.isnan(got[3]).all() and np.isfinite(got[0]).all()


def test_the_planner_runs_short_rows_a_row_a_thread(device: Device,
                                                    rng: np.random.Generator) -> None:
    """Unforced: rows of 16 floats are 4 vectors, one thread's (the planner's own choice,
    which the pretend device runs)."""
    values = rng.uniform(-4, 4, (300, 16)).astype(np.float32)
    w = rng.uniform(-2, 2, 16).astype(np.float32)
    got = ops.rms_norm(device.array(values), [16], device.array(w)).numpy()
    eps = float(np.finfo(np.float32).eps)  # torch's default: the dtype's epsilon
    want = ref.rms_norm(values, 1, w, eps)
    ref.check(got, want, ref.norm_bound(want, 16, "f32"), "rms_norm, eps=None")


# ------------------------------------------------------------------ torch.compile


def test_the_custom_ops_schemas() -> None:
    from tile_mlir.ops.torch_library import OPS, variants

    schemas = {v.name: v.schema(e.form.returns) for e in OPS for v in variants(e)
               if e.form.name in ("softmax", "rms_norm", "layer_norm", "fused_add")}
    assert schemas == {
        "softmax": "(Tensor input, int dim=-1, ScalarType? dtype=None) -> Tensor",
        "log_softmax": "(Tensor input, int dim=-1, ScalarType? dtype=None) -> Tensor",
        "rms_norm": "(Tensor input, int[] normalized_shape, Tensor? weight=None, "
                    "float? eps=None) -> Tensor",
        "layer_norm": "(Tensor input, int[] normalized_shape, Tensor? weight=None, "
                      "Tensor? bias=None, float eps=1e-05) -> Tensor",
        "fused_add_rms_norm": "(Tensor(a!) input, Tensor(b!) residual, Tensor weight, "
                              "float eps) -> ()",
    }


def test_the_custom_ops_call_the_library_by_its_signature() -> None:
    from tile_mlir.ops import torch_library as tl_

    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def record(*args: Any, **kwargs: Any) -> None:
        calls.append((args, kwargs))

    entry = next(e for e in tl_.OPS if e.name == "layer_norm")
    tl_._library_call(record, entry, {"input": "x", "normalized_shape": [8], "weight": "w",
                                      "bias": None, "eps": 1e-5}, False)
    entry = next(e for e in tl_.OPS if e.name == "fused_add_rms_norm")
    tl_._library_call(record, entry, {"input": "x", "residual": "r", "weight": "w",
                                      "eps": 1e-6}, False)
    assert calls == [(("x",), {"normalized_shape": [8], "weight": "w", "bias": None,
                               "eps": 1e-5}),
                     (("x", "r", "w"), {"eps": 1e-6})]


def _torch_stand_ins(torch: Any) -> dict[str, Callable[..., Any]]:
    """torch versions of the row ops with the library's signatures (CPU tensors)."""
    F = torch.nn.functional

    def softmax(input: Any, dim: int = -1, *, dtype: Any = None) -> Any:  # noqa: A002
        return torch.softmax(input, dim, dtype=dtype)

    def log_softmax(input: Any, dim: int = -1, *, dtype: Any = None) -> Any:  # noqa: A002
        return torch.log_softmax(input, dim, dtype=dtype)

    def rms_norm(input: Any, normalized_shape: Any, weight: Any = None,  # noqa: A002
                 eps: Any = None) -> Any:
        return F.rms_norm(input, normalized_shape, weight, eps)

    def layer_norm(input: Any, normalized_shape: Any, weight: Any = None,  # noqa: A002
                   bias: Any = None, eps: float = 1e-5) -> Any:
        return F.layer_norm(input, normalized_shape, weight, bias, eps)

    def fused_add_rms_norm(input: Any, residual: Any, weight: Any, eps: float) -> None:  # noqa: A002
        total = input + residual
        residual.copy_(total)
        input.copy_(F.rms_norm(total, (input.shape[-1],), weight, eps))

    return {"softmax": softmax, "log_softmax": log_softmax, "rms_norm": rms_norm,
            "layer_norm": layer_norm, "fused_add_rms_norm": fused_add_rms_norm}


def test_the_custom_ops_pass_opcheck_and_compile_with_torch() -> None:
    """With torch (a CPU build will do): the row ops' custom ops, in a namespace of their
    own over torch stand-ins, pass torch.library.opcheck (the in-place op's mutations
    declared) and torch.compile(fullgraph=True) gives eager's results."""
    torch = pytest.importorskip("torch")
    from tile_mlir.ops import torch_library as tl_

    functions = _torch_stand_ins(torch)
    t = tl_.register([e for e in tl_.OPS if e.name in functions], "tile_mlir_rows_test",
                     functions.get)
    x, w, b, r = torch.randn(4, 8), torch.randn(8), torch.randn(8), torch.randn(4, 8)
    for name, args in (("softmax", [x, 0, None]), ("log_softmax", [x, -1, torch.float64]),
                       ("rms_norm", [x, [8], w, None]), ("layer_norm", [x, [8], w, b, 1e-5]),
                       ("fused_add_rms_norm", [x.clone(), r.clone(), w, 1e-6])):
        torch.library.opcheck(getattr(t.ops, name).default, args, {})

    def block(x: Any, r: Any) -> tuple[Any, ...]:
        z = t.layer_norm(t.softmax(x, dim=-1), [8], w, b, 1e-5)
        t.fused_add_rms_norm(z, r, w, 1e-6)
        return t.log_softmax(z, 0), t.rms_norm(r, (8,), w), z, r

    want = block(x.clone(), r.clone())
    got = torch.compile(block, backend="aot_eager", fullgraph=True)(x.clone(), r.clone())
    for g, v in zip(got, want, strict=True):
        torch.testing.assert_close(g, v)


def test_the_command_line_explains_a_shape(capsys: pytest.CaptureFixture[str]) -> None:
    from tile_mlir.ops.__main__ import main

    assert main(["--explain", "layer_norm:128x262144:f32"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("layer_norm f32 128x262144: cluster: ")
    assert "a cluster of 16 CTAs of 256 threads" in out


def test_numpy_arrays_in_and_out(device: Device, rng: np.random.Generator,
                                 one_lane: None) -> None:
    """NumPy arrays go through device copies; in place means in place on the host too."""
    x = rng.uniform(-2, 2, (3, 24)).astype(np.float32)
    r = rng.uniform(-2, 2, (3, 24)).astype(np.float32)
    w = rng.uniform(-2, 2, 24).astype(np.float32)
    got = ops.layer_norm(x, 24, w, None)
    assert isinstance(got, np.ndarray)
    want = ref.layer_norm(x, 1, w, None, 1e-5)
    ref.check(got, want, ref.norm_bound(want, 24, "f32", 4.0), "layer_norm of NumPy arrays")
    total = ref.added(x, r, "f32")
    ops.fused_add_rms_norm(x, r, w, 1e-6)
    assert np.array_equal(r, total)
    want = ref.rms_norm(total, 1, w, 1e-6)
    ref.check(x, want, ref.norm_bound(want, 24, "f32"), "fused_add_rms_norm on the host")
