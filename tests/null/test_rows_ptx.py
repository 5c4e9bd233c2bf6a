"""null tier: the fused row ops' programs compile for sm_90 into the PTX that makes them
fast, for the strategies the planner chooses (ops/rows.py) at representative rows.

For each: ptxas takes it with no spill (its -v report) and the PTX has no .local (a
register tile left in memory); the row is read in 16-byte loads (ld.global.nc where
the kernel only reads it) and written in 16-byte stores; and each reduction has the
shape of its strategy: a butterfly of 5 shuffles a value (lanes of a row), plus one bar.sync
(warps of a CTA), plus, in a cluster (.reqnctapercluster C), a post into a peer's
mailbox, an arrive on its mbarrier and a wait on the CTA's own (and, for the kernel, a
cluster barrier at the entry and one after the last posts, waited for at the end; no
read across the cluster). The programs with such
reductions cannot run on the pretend device: the gpu tier runs them.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

import tile_mlir
from tile_mlir import toolchain
from tile_mlir.dtypes import DTYPES
from tile_mlir.lowering.schedules import registers as registers_schedule
from tile_mlir.ops import rows
from tile_mlir.ops.programs import rows as programs
from tile_mlir.ops.programs.lang import LangProgram
from tile_mlir.ops.programs.rows import Geometry

REDUCTIONS = {"softmax": 2, "log_softmax": 2, "rms_norm": 1, "layer_norm": 2,
              "fused_add_rms_norm": 1}
"""Reductions of each op's one-pass kernel (softmax: the max, then the sum of exp)."""


def _rounds_and_values(op: str, g: Geometry) -> tuple[int, int]:
    """(reductions, values of each): layer norm over a cluster's row folds (count, mean,
    M2) triples in one; elsewhere it takes two (the mean, then the variance)."""
    if op == "layer_norm":
        return (1, 3) if g.strategy == "cluster" else (2, 1)
    return REDUCTIONS[op], 1


def _arrays(op: str, m: int, n: int, dtype: str) -> dict[str, Any]:
    from tile_mlir.lang import ArrayDesc

    x = ArrayDesc(dtype, (m, n), None, 1 << 20)
    y = ArrayDesc(dtype, (m, n), None, 1 << 32)
    w = ArrayDesc(dtype, (n,), None, 1 << 34)
    b = ArrayDesc(dtype, (n,), None, 1 << 35)
    r = ArrayDesc(dtype, (m, n), None, 1 << 36)
    return {"x": x, "y": y, "w": w, "b": b, "r": r}


def _program(op: str, g: Geometry, m: int, n: int, dtype: str) -> LangProgram:
    family = "softmax" if op == "log_softmax" else op
    one = programs.KERNELS[family][0]
    return programs.specialize(one, _arrays(op, m, n, dtype), {"G": g.constexpr(), **_flags(op, dtype)})


def _flags(op: str, dtype: str) -> dict[str, Any]:
    """The constexprs besides G the library gives the op's kernels (ops/rows.py)."""
    if op in ("softmax", "log_softmax"):
        return {"LOG": op == "log_softmax", "EXP": rows.SOFTMAX_EXP[dtype]}
    return {}


def _ptxas(ptx: str) -> str:
    """ptxas -v's report on the PTX (sm_90)."""
    return toolchain._ptxas(ptx, "sm_90", 3, verbose=True)[1]


def _compiled(program: LangProgram) -> tuple[str, int]:
    """The program's PTX, and the registers ptxas gives a thread (no spill, checked; but
    the few bytes a kept occupancy request is allowed, layer norm's LAYER_SPILL)."""
    ptx = tile_mlir.compile(program.ir(), chip="sm_90", cache=False).ptx["kernels"]
    report = _ptxas(ptx)
    if program.spec.spill and ".minnctapersm" in ptx:
        assert not toolchain.spills(report, program.spec.spill), report
    else:
        assert "0 bytes spill stores, 0 bytes spill loads" in report, report
    assert ".local" not in ptx, "a register tile is left in local memory"
    found = re.search(r"Used (\d+) registers", report)
    assert found is not None, report
    return ptx, int(found.group(1))


H200_CTA_AHEAD = rows.cta_ahead_bytes("sm_90-nvidia-h200")
"""Bytes of rows an H200's largest CTAs of 16-bit rows prefetch ahead (an H100's none):
the cases take an H200's plans."""

CASES = [
    # op, M, N, dtype: the planner's choice for them (sm_90)
    ("softmax", 4096, 1024, "bf16"),  # cta: 128 threads, a vector each
    ("log_softmax", 32768, 1024, "f32"),
    ("rms_norm", 32768, 512, "f32"),  # warp: 16 lanes a row, 8 rows a CTA
    ("rms_norm", 8192, 4096, "bf16"),  # cta
    ("layer_norm", 2048, 16384, "f32"),
    ("fused_add_rms_norm", 8192, 16384, "bf16"),
    ("softmax", 8192, 16384, "bf16"),  # cta: 512 threads, 256 rows ahead (an H200's)
    ("softmax", 1024, 65536, "bf16"),  # cluster of 8 CTAs of 128 threads
    ("layer_norm", 1024, 32768, "f32"),  # cluster of 4
    ("fused_add_rms_norm", 1024, 65536, "bf16"),
    ("layer_norm", 256, 262144, "bf16"),  # cluster of 16 CTAs of 256 threads
    ("layer_norm", 1024, 65536, "bf16"),  # cluster of 8 CTAs of 128 threads, spill allowed
    ("softmax", 128, 262144, "f32"),
    ("rms_norm", 128, 262144, "f32"),  # cluster of 16, 2 parts of the weight read early
    ("layer_norm", 128, 262144, "f32"),  # cluster of 16, 6 rows ahead (F32_AHEAD)
    ("log_softmax", 256, 262144, "bf16"),  # cluster of 16, 12 rows ahead (LONG_AHEAD_BYTES)
]


@pytest.mark.parametrize(("op", "m", "n", "dtype"), CASES, ids=str)
def test_the_planned_program_compiles_to_fast_ptx(op: str, m: int, n: int, dtype: str) -> None:
    plan = rows.choose(m, n, rows.vector_width(n, dtype, []), clusters=16,
                       itemsize=DTYPES[dtype].bytes, inputs=rows.inputs_of(op),
                       early=rows.EARLY_PARTS.get(op, 0),
                       f32_ahead=op in rows.F32_AHEAD, cta_ahead=H200_CTA_AHEAD)
    g = plan.geometry
    assert g.early == (rows.EARLY_PARTS.get(op, 0) if g.strategy == "cluster" else 0)
    program = _program(op, g, m, n, dtype)
    ptx, registers = _compiled(program)
    assert registers <= 65536 // g.threads  # the CTA fits an SM's registers
    loads = "ld.global.v4.b32" if op == "fused_add_rms_norm" else "ld.global.nc.v4.b32"
    assert loads in ptx, "the row is not read in 16-byte loads"
    assert "st.global.v4.b32" in ptx, "the row is not written in 16-byte stores"
    if op in ("softmax", "log_softmax"):  # e^(x - max): SOFTMAX_EXP
        fast = rows.SOFTMAX_EXP[dtype] == "exp_fast"  # by the MUFU, or libdevice's expf
        mufu = ptx.count("ex2.approx.f32")
        assert mufu >= g.row_parts(n) * g.vec if fast else mufu == 0
        assert ("ex2.approx.ftz.f32" in ptx) == (not fast)
    # a cluster's rows (of ops of one input) prefetch the row `ahead` rows on, each thread
    # its vectors of it (8 of 16 bytes a thread of 2^18 bf16 elements): 16-bit rows of up
    # to AHEAD_ROW_MAX bytes, and the F32_AHEAD families' f32 rows of LONG_ROW to
    # F32_ROW_MAX bytes; AHEAD_BYTES on, LONG_AHEAD_BYTES from LONG_ROW bytes; and a CTA of
    # MAX_CTA // 2 threads a 16-bit row an H200's CTA_AHEAD_BYTES on
    size = DTYPES[dtype].bytes
    row = n * size
    fetches = -(-row // 16 // g.lanes) if g.ahead else 0
    assert ptx.count("prefetch.global.L2") == fetches, g
    one = g.strategy == "cluster" and rows.inputs_of(op) == 1
    wide = op in rows.F32_AHEAD and size == 4 and rows.LONG_ROW <= row <= rows.F32_ROW_MAX
    if one and ((size == 2 and row <= rows.AHEAD_ROW_MAX) or wide):
        distance = rows.LONG_AHEAD_BYTES if row >= rows.LONG_ROW else rows.AHEAD_BYTES
        assert g.ahead == distance // row
    elif g.strategy == "cta" and g.lanes == rows.MAX_CTA // 2 and size == 2 and \
            rows.inputs_of(op) == 1:
        assert g.ahead == H200_CTA_AHEAD // row
    else:
        assert g.ahead == 0
    reductions, values = _rounds_and_values(op, g)
    lanes = min(g.lanes, 32)
    # a tuple kind's partials (the warps', the CTAs') fold over the lanes too, where a
    # power of two of at least SPREAD_MIN: a butterfly, then lane 0's result broadcast
    spread = [k for k in (g.threads // 32, g.ctas) if values > 1 and
              k >= registers_schedule.SPREAD_MIN and k & (k - 1) == 0]
    assert ptx.count("shfl.sync.bfly") == reductions * values * (
        lanes.bit_length() - 1 + sum(k.bit_length() - 1 for k in spread))
    assert ptx.count("shfl.sync.idx") == reductions * values * len(spread)
    cta_wide = g.strategy != "warp" and g.threads > 32
    assert ptx.count("bar.sync") == (reductions if cta_wide else 0)
    clustered = g.strategy == "cluster"
    # mailboxes: a relaxed cluster arrive at the entry, its wait before the first post; per
    # reduction one post to the peer (st.async, completing its bytes on the peer's
    # mbarrier: a tuple of three values padded to four words), a wait on the CTA's own; a
    # relaxed cluster arrive after the last posts, its wait before the kernel returns
    assert ptx.count("barrier.cluster.arrive.relaxed;") == (2 if clustered else 0)
    assert "barrier.cluster.arrive;" not in ptx
    assert ptx.count("barrier.cluster.wait;") == (2 if clustered else 0)
    assert ("barrier.cluster.wait;\n\tret;" in ptx) == clustered
    posts = re.findall(r"st\.async\.shared::cluster\.mbarrier::complete_tx::bytes"
                       r"(?:\.v(\d))?\.b32", ptx)
    assert len(posts) == (reductions if clustered else 0)
    sent = 4 if values == 3 else values
    assert sum(int(v or 1) for v in posts) == reductions * sent * clustered  # 32-bit words
    assert ptx.count("mbarrier.arrive.expect_tx") == (reductions if clustered else 0)
    assert "st.shared::cluster" not in ptx and "mbarrier.arrive.release" not in ptx
    assert ptx.count("mbarrier.test_wait.parity.acquire.cluster") == \
        (reductions if clustered else 0)
    assert "ld.shared::cluster" not in ptx
    assert (f".reqnctapercluster {g.ctas}, 1, 1" in ptx) == clustered
    _check_occupancy(program, ptx, registers)


def _check_occupancy(program: LangProgram, ptx: str, registers: int) -> None:
    """A cluster's kernel asks for the CTAs of CLUSTER_REGISTERS a thread an SM holds
    (layer norm's over 16-bit vectors allowing LAYER_SPILL bytes of spill stores); the
    PTX keeps the request where ptxas fits it within that (the registers then fit that
    many CTAs); where it made ptxas spill more, a lower request that does not and gives
    more CTAs than none, or none (toolchain.settle)."""
    g = Geometry.of(dict(program.spec.constexprs)["G"])
    wanted = toolchain.REGISTERS // (g.threads * programs.CLUSTER_REGISTERS)
    expected = wanted if g.strategy == "cluster" and wanted > 1 else None
    assert program.spec.occupancy == expected
    allowed = programs.LAYER_SPILL if expected and g.vec == 8 and \
        program.kernel is programs.layer_norm_rows else 0
    assert program.spec.spill == allowed
    kept = re.findall(r"\.minnctapersm (\d+)", ptx)
    if expected is None:
        assert not kept
        return
    bare = toolchain.OCCUPANCY.sub("", ptx)
    unasked = toolchain.ctas_an_sm(_ptxas(bare), g.threads)
    ctas = int(kept[0]) if kept else unasked
    assert len(kept) <= 1 and ctas <= expected
    assert registers * g.threads * ctas <= toolchain.REGISTERS
    for higher in range(ctas + 1, expected + 1):  # each higher request spills more
        requested = bare.replace(".maxntid", f".minnctapersm {higher}\n.maxntid", 1)
        assert toolchain.spills(_ptxas(requested), allowed), f"a request of {higher} fits"
    assert ctas == expected or not kept or ctas > unasked  # lowered: more than unasked


@pytest.mark.parametrize("op", ["rms_norm", "fused_add_rms_norm", "layer_norm"])
def test_early_parts_of_the_weight_are_read_before_the_first_reduction(op: str) -> None:
    """Geometry.early: each early part of the weight (and of layer norm's bias) is one
    more 16-byte load of a thread's before its first wait on a cluster mailbox; the
    planner reads EARLY_PARTS of them for the RMSNorm family, none for layer norm."""
    m, n = 128, 262144
    plan = rows.choose(m, n, 4, clusters=16, itemsize=4, inputs=rows.inputs_of(op),
                       early=rows.EARLY_PARTS.get(op, 0))
    assert plan.geometry.early == {"layer_norm": 0}.get(op, 2), plan
    assert ("parts of the weight" in plan.reason) == (op != "layer_norm")

    def loads_before_the_first_wait(early: int) -> int:
        g = dataclasses.replace(plan.geometry, early=early)
        ptx, _ = _compiled(_program(op, g, m, n, "f32"))
        head = ptx[:ptx.index("mbarrier.test_wait")]
        return len(re.findall(r"ld\.global(?:\.nc)?\.v4\.b32", head))

    vectors = 2 if op == "layer_norm" else 1
    assert loads_before_the_first_wait(2) - loads_before_the_first_wait(0) == 2 * vectors


@pytest.mark.parametrize("op", sorted(REDUCTIONS))
def test_both_passes_of_split_compile_to_fast_ptx(op: str) -> None:
    m, n, dtype = 32, 1 << 20, "bf16"
    g = rows.choose(m, n, 8, clusters=16, itemsize=2, inputs=rows.inputs_of(op)).geometry
    assert g.strategy == "split"
    family = "softmax" if op == "log_softmax" else op
    _, first, second = programs.KERNELS[family]
    arrays = _arrays(op, m, n, dtype)
    from tile_mlir.lang import ArrayDesc

    arrays["stats"] = ArrayDesc("f32", (m, rows.STATS[family], g.chunks), None, 1 << 37)
    if family == "fused_add_rms_norm":
        arrays["x"], arrays["y"] = arrays["r"], arrays["x"]  # pass 2 reads the residual
    flags = _flags(op, dtype)
    for function in (first, second):
        given = flags if function is second else {k: v for k, v in flags.items() if k == "EXP"}
        program = programs.specialize(function, arrays, {"G": g.constexpr(), **given})
        ptx, _ = _compiled(program)
        assert "st.global" in ptx
        assert ".reqnctapercluster" not in ptx and "barrier.cluster" not in ptx


def test_the_cluster_strategy_forced_on_a_short_row() -> None:
    """What the gpu tier forces (the cluster lowering on a row the planner would give a
    warp): 2 CTAs of 64 threads (two warps each) over 1000 floats, a partial last part;
    and 2 CTAs of one warp each (no warps to fold within a CTA)."""
    g = rows.Forced("cluster", ctas=2, lanes=128).plan(7, 1000, 4).geometry
    assert (g.ctas, g.threads) == (2, 64)
    ptx, _ = _compiled(_program("softmax", g, 7, 1000, "f32"))
    assert ptx.count("barrier.cluster.arrive.relaxed;") == 2 and ptx.count("bar.sync") == 2
    assert ptx.count("mbarrier.test_wait.parity") == 2
    assert ptx.count("mapa.shared::cluster") == 4  # per reduction: the slot, the mbarrier
    g = rows.Forced("cluster", ctas=2).plan(7, 1000, 4).geometry
    assert (g.ctas, g.threads) == (2, 32)
    ptx, _ = _compiled(_program("rms_norm", g, 7, 1000, "f32"))
    assert ptx.count("barrier.cluster.arrive.relaxed;") == 2 and "bar.sync" not in ptx
    assert ptx.count("mbarrier.test_wait.parity") == 1


@pytest.mark.parametrize(("op", "m", "n", "dtype"), [
    ("softmax", 4096, 50257, "bf16"),  # a cluster of 8 CTAs of 128 threads
    ("log_softmax", 2048, 50257, "f32"),
    ("softmax", 65536, 1025, "bf16"),  # a CTA of 64 threads
    ("log_softmax", 16384, 4097, "f32"),  # a CTA of 128 threads
], ids=str)
def test_rows_with_edges_compile_to_the_aligned_rows_ptx(op: str, m: int, n: int,
                                                          dtype: str) -> None:
    """Rows of odd length with edges: the row's vectors in 16-byte loads and stores, the
    head and the tail in one load and one store each (an element a thread), and the same
    reductions and barriers as a row that starts aligned: no barrier between the writes
    of the row's pieces (tile.piece), no spill, the occupancy the aligned row's gets."""
    size = DTYPES[dtype].bytes
    plan = rows.with_edges(lambda v: rows.choose(m, n, v, 16, itemsize=size), n,
                           rows.vector_width(n, dtype, []), 16 // size)
    g = plan.geometry
    assert g.edges and g.vec == 16 // size, plan.reason
    ptx, registers = _compiled(_program(op, g, m, n, dtype))
    aligned, _ = _compiled(_program(op, dataclasses.replace(g, edges=False), m, n - 1, dtype))
    scalar = "b16" if size == 2 else "b32"
    parts = g.row_parts(n)
    assert ptx.count("ld.global.nc.v4.b32") == parts == aligned.count("ld.global.nc.v4.b32")
    assert ptx.count("st.global.v4.b32") == parts
    assert ptx.count(f"ld.global.nc.{scalar}") == 2 and ptx.count(f"st.global.{scalar}") == 2
    for mark in ("bar.sync", "barrier.cluster.arrive", "barrier.cluster.wait",
                 "mbarrier.test_wait", "shfl.sync.bfly", "prefetch.global.L2"):
        assert ptx.count(mark) == aligned.count(mark), mark
    _check_occupancy(_program(op, g, m, n, dtype), ptx, registers)


@pytest.mark.parametrize(("kind", "m", "n", "dtype"), [
    ("sum", 4096, 50257, "bf16"),  # a cluster of 8 CTAs of 128 threads
    ("max", 2048, 50257, "f32"),
    ("sum", 65536, 1025, "bf16"),  # a CTA of 64 threads
    ("min", 16384, 4097, "f32"),  # a CTA of 128 threads
], ids=str)
def test_held_row_reductions_read_rows_of_odd_length_in_16_byte_loads(
        kind: str, m: int, n: int, dtype: str) -> None:
    """ops/reductions.py's rows that start unaligned (reduce_rows_held): the row's
    vectors in 16-byte loads (a part each), the head and the tail in one load each, one
    reduction (the cluster's through its mailboxes), one store of the row's result; no
    spill, the occupancy a cluster's row kernel asks for."""
    from tile_mlir.lang import ArrayDesc

    size = DTYPES[dtype].bytes
    plan = rows.with_edges(lambda v: rows.choose(m, n, v, 16, itemsize=size), n,
                           rows.vector_width(n, dtype, []), 16 // size)
    g = plan.geometry
    assert g.edges and g.vec == 16 // size, plan.reason
    arrays: dict[str, Any] = {"x": ArrayDesc(dtype, (m, n), None, 1 << 20),
                              "y": ArrayDesc(dtype, (m,), None, 1 << 36)}
    program = programs.specialize(programs.reduce_rows_held, arrays,
                                  {"G": g.constexpr(), "KIND": kind})
    ptx, registers = _compiled(program)
    scalar = "b16" if size == 2 else "b32"
    assert ptx.count("ld.global.nc.v4.b32") == g.row_parts(n)
    assert ptx.count(f"ld.global.nc.{scalar}") == 2
    assert ptx.count("st.global") == 1 and ptx.count(f"st.global.{scalar}") == 1
    if g.strategy == "cluster":
        assert ptx.count("mbarrier.test_wait.parity") == 1  # one reduction's mailbox
    _check_occupancy(program, ptx, registers)


@pytest.mark.parametrize(("op", "m", "n", "dtype"), [
    ("rms_norm", 16386, 8191, "bf16"),  # a CTA of 128 threads
    ("rms_norm", 8190, 4097, "f32"),
    ("fused_add_rms_norm", 1335, 50257, "bf16"),  # a cluster of 8, 2 parts of w early
    ("layer_norm", 16386, 8191, "bf16"),
    ("layer_norm", 1335, 50257, "bf16"),  # a cluster: two rounds of reductions
], ids=str)
def test_norms_with_edges_read_the_row_in_16_byte_loads(op: str, m: int, n: int,
                                                        dtype: str) -> None:
    """The norms over rows of odd length with edges: each row array (x, and the residual)
    read and written in 16-byte accesses a part and one element access each for the head
    and the tail (layer norm's centered squares read its head and tail again, from L1;
    its last part's vectors past the body are zeroed in registers); the weight (and
    bias), split like the row (aligned_as) wherever it starts, in the element's loads (8
    a vector); no spill."""
    size = DTYPES[dtype].bytes
    plan = rows.with_edges(lambda v: rows.choose(
        m, n, v, 16, itemsize=size, inputs=rows.inputs_of(op),
        early=rows.EARLY_PARTS.get(op, 0)), n, rows.vector_width(n, dtype, []), 16 // size)
    g = plan.geometry
    assert g.edges and g.vec == 16 // size, plan.reason
    ptx, registers = _compiled(_program(op, g, m, n, dtype))
    parts, scalar = g.row_parts(n), "b16" if size == 2 else "b32"
    arrays = rows.inputs_of(op)
    nc = "" if op == "fused_add_rms_norm" else ".nc"  # arrays written in place
    assert ptx.count(f"ld.global{nc}.v4.b32") == arrays * parts
    assert ptx.count("st.global.v4.b32") == arrays * parts
    weight = (g.vec * parts + 2) * (2 if op == "layer_norm" else 1)  # w's (and b's)
    if op == "layer_norm":  # x's head and tail read again for the squares
        assert ptx.count(f"ld.global.nc.{scalar}") == 2 * 2 + weight
    elif nc:  # the row and the weight read alike (.nc: only read)
        assert ptx.count(f"ld.global.nc.{scalar}") == 2 * arrays + weight
    else:
        assert ptx.count(f"ld.global.{scalar}") == 2 * arrays
        assert ptx.count(f"ld.global.nc.{scalar}") == weight
    assert ptx.count(f"st.global.{scalar}") == 2 * arrays
    assert registers * g.threads <= toolchain.REGISTERS


@pytest.mark.parametrize("stack", [2, 4])
@pytest.mark.parametrize("held", [False, True], ids=["softmax", "held sum"])
def test_a_stack_of_rows_issues_every_rows_loads_before_the_first_barrier(
        stack: int, held: bool) -> None:
    """Geometry.stack: a CTA of 64 threads holding `stack` rows of 1025 bf16 with edges
    (softmax, or a held sum) reads every row (its 16-byte vectors, head and tail) before
    its first barrier (the first row's reduction), and writes each row's results; no
    spill, no local memory."""
    from tile_mlir.lang import ArrayDesc

    g = Geometry("cta", 8, 64, edges=True, stack=stack)
    m, n = 65472, 1025
    if held:
        arrays: dict[str, Any] = {"x": ArrayDesc("bf16", (m, n), None, 1 << 20),
                                  "y": ArrayDesc("bf16", (m,), None, 1 << 36)}
        program = programs.specialize(programs.reduce_rows_held, arrays,
                                      {"G": g.constexpr(), "KIND": "sum"})
    else:
        program = _program("softmax", g, m, n, "bf16")
    ptx, registers = _compiled(program)
    assert registers * g.threads <= toolchain.REGISTERS
    first = ptx[:ptx.index("bar.sync")]
    assert first.count("ld.global.nc.v4.b32") == ptx.count("ld.global.nc.v4.b32") == \
        stack * g.row_parts(n)
    assert first.count("ld.global.nc.b16") == ptx.count("ld.global.nc.b16") == 2 * stack
    stores = ptx.count("st.global.b16") if held else ptx.count("st.global.v4.b32")
    assert stores == stack * (1 if held else g.row_parts(n))
    assert g.grid(m) == m // stack and g.grid(m + 1) == m // stack + 1


@pytest.mark.parametrize(("op", "n", "lanes"), [("rms_norm", 1025, 64), ("layer_norm", 1025, 64),
                                                ("rms_norm", 257, 32), ("layer_norm", 513, 32)],
                         ids=str)
def test_a_stack_of_norms_reads_every_row_before_the_first_reduction(op: str, n: int,
                                                                     lanes: int) -> None:
    """RMSNorm and layer norm in the planner's stacks (rows.STACKS: 4 rows of bf16 a CTA of
    64 or 32 threads with edges): every row's 16-byte vectors, head and tail read before
    the first reduction (a CTA of a warp has no barrier: before the first shuffle), each
    row written in 16-byte stores; no spill."""
    g = Geometry("cta", 8, lanes, edges=True, stack=rows.STACK_ROWS)
    ptx, registers = _compiled(_program(op, g, 65472, n, "bf16"))
    assert registers * g.threads <= toolchain.REGISTERS
    first = ptx[:ptx.index("bar.sync" if lanes > 32 else "shfl.sync")]
    assert first.count("ld.global.nc.v4.b32") == g.stack * g.row_parts(n)
    assert ptx.count("st.global.v4.b32") == g.stack * g.row_parts(n)


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_a_stack_of_fused_adds_reads_every_row_before_writing_one(dtype: str) -> None:
    """The fused add in a stack (forced: 4 rows of 1025 a CTA of 64 threads): every row's x
    and residual read (their 16-byte vectors, heads and tails) before the first store (of
    the first row's residual), so that the last CTA's copies of the last row all read it
    as it was; each row's residual and x written in 16-byte stores; no spill."""
    size = DTYPES[dtype].bytes
    g = Geometry("cta", 16 // size, 64, edges=True, stack=4)
    ptx, registers = _compiled(_program("fused_add_rms_norm", g, 65472, 1025, dtype))
    assert registers * g.threads <= toolchain.REGISTERS
    first = ptx[:ptx.index("st.global")]
    scalar = "b16" if size == 2 else "b32"
    assert first.count("ld.global.v4.b32") == ptx.count("ld.global.v4.b32") == \
        2 * g.stack * g.row_parts(1025)
    assert first.count(f"ld.global.{scalar}") == ptx.count(f"ld.global.{scalar}") == \
        2 * 2 * g.stack  # x's and r's heads and tails
    assert ptx.count("st.global.v4.b32") == 2 * g.stack * g.row_parts(1025)
