"""Fused row ops, as torch (and vLLM) have them: softmax, log_softmax, rms_norm,
layer_norm and fused_add_rms_norm.

    tile_mlir.ops.softmax(input, dim=-1, *, dtype=None, out=None)
    tile_mlir.ops.log_softmax(input, dim=-1, *, dtype=None, out=None)
    tile_mlir.ops.rms_norm(input, normalized_shape, weight=None, eps=None)
    tile_mlir.ops.layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5)
    tile_mlir.ops.fused_add_rms_norm(input, residual, weight, eps)   # in place, vLLM's

f32, f16 and bf16, computed in f32 and rounded once into the input's type. A call
views its input as [M, N] rows (N: the size along `dim`, or the normalized dims; M:
every other dim merged, with any row stride), reads each row once and writes it once;
a layout whose rows do not merge so (softmax over an inner dim, a transposed input) is
first copied into a contiguous temporary with the row dims last. The kernels are the
tile programs of programs/rows.py, and the planner below chooses one of their four
strategies by the row length, the dtype, the rows and the GPU, and says why (`explain`).

Errors name the argument and come before any launch: a dim out of range, a
normalized_shape that is not the input's trailing dims, a weight or bias of another
shape or dtype, a residual of another shape or dtype, arrays that overlap where the op
writes (so a failed call writes nothing, `residual` included).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

import numpy as np

from tile_mlir.contract import ACCESS_BYTES
from tile_mlir.dtypes import DTYPES
from tile_mlir.ops import args, coalesce, entry, kernels
from tile_mlir.ops.args import Array, Scalar, torch_name
from tile_mlir.ops.elementwise import In, apply
from tile_mlir.ops.plan import Builder, Num, Value
from tile_mlir.ops.programs import rows as programs
from tile_mlir.ops.programs.rows import Geometry
from tile_mlir.runtime import driver

SUPPORTED = ("f32", "f16", "bf16")
MACHINE_EPS = {"f32": 2.0 ** -23, "f16": 2.0 ** -10, "bf16": 2.0 ** -7}
"""torch.finfo(dtype).eps: rms_norm's default eps."""
NAMES = ("softmax", "log_softmax", "rms_norm", "layer_norm", "fused_add_rms_norm")

SMS = 132
"""Streaming multiprocessors of an H100 SXM: the grid should give each several CTAs."""
BLOCK = 128
"""Threads of a CTA of short rows (strategy "warp"). Measured on an H100 (rows of 128, 512
and 1024 elements at bench/fused.py's 128 MiB, the five ops in bf16 and f32, 200
repetitions, the CTA sizes interleaved): CTAs of 128 threads were as fast as 256 or up
to 2% faster in 29 of 30 cases (layer norm bf16 1024: 2.99 -> 3.04 TB/s; 512: 2.98 ->
3.03), 1% slower in one (fused add + RMSNorm f32 of 128: 2.84 -> 2.81); 512 threads were
slower, 64 as fast as 128."""
HELD = 32
"""f32 values of a row a thread holds at most (its registers: 32 of data keep a
1024-thread CTA under its 64 registers a thread without spilling)."""
MAX_PARTS = 16
"""Parts (register tiles) a row's program holds at most (narrow accesses make many): the
straight-line code grows with them."""
MAX_CTA = 1024
SHORT_BYTES = 32
"""Bytes of a row a thread holds where a group of lanes would be a whole warp (rows of
513 to 1024 16-byte-vectorized elements, 257 to 512 scalar ones): a CTA a row holds it,
max(64, N * itemsize / 32) threads, two 16-byte vectors each. Measured on an H100 (rows of
1024 at bench/fused.py's 128 MiB, each geometry beside torch.compile in one run, 300
repetitions; 8 values a thread then, whatever the dtype): a CTA of 128 threads against a
warp a row, 4 rows a CTA: RMSNorm f32 0.989x -> 0.999x torch.compile, layer norm f32
0.993x -> 1.003x, bf16 0.998x -> 1.005x, fused add + RMSNorm f32 0.981x -> 0.999x, bf16
0.996x -> 0.998x, softmax f32 0.999x both (warps a row of 64 or 256 threads a CTA, 16
lanes a row: 0.98-1.00x). On an H200 (the two CTA sizes forced, rows of 1024 and 800 at 128
MiB, 150 repetitions, torch.compile beside), 16-bit rows at 8 values a thread (one
16-byte vector) fell behind torch.compile, and 64 threads of two vectors each passed it:
softmax bf16 1024 3.86 -> 4.18 TB/s (torch.compile 4.13), 800 3.11 -> 3.86 (3.13),
log_softmax 1024 3.78 -> 4.18 (4.14), 800 2.95 -> 3.72 (3.03), layer norm 1024 3.92 ->
4.14 (4.15), 800 3.28 -> 4.11 (4.08), RMSNorm 800 3.85 -> 4.17 (4.13), fused add +
RMSNorm 800 3.90 -> 4.01 (4.15), 1024 4.19 and 4.18 (4.22); f32 rows, whose 8 values
are already two vectors, ran as fast at 128 threads as at 64 or faster (RMSNorm 800 4.19
against 4.16, fused add + RMSNorm 800 4.14 against 4.09)."""
CLUSTER_HELD = 64
"""f32 values of a row a thread of a cluster holds at most: a cluster's CTAs have at most
512 threads, which leaves a thread 128 registers."""
CLUSTERS = ((128, 2), (128, 4), (128, 8), (256, 8), (256, 16), (512, 8), (512, 16))
"""(threads per CTA, CTAs) of the cluster shapes, in the order tried. Measured on an
H100 (rows of 2^16 and 2^18 elements, bf16 and f32, softmax, RMSNorm and layer norm,
bench/fused.py's sizes): 64 values a thread were as fast as 32 or up to 26% faster at
the same cluster size; at 64 a thread, CTAs of 128 threads in clusters of up to 8 and
of 256 threads in clusters of 16 were the fastest (16 CTAs of 64 threads 5-20% slower
than 8 of 128, 8 of 512 up to 18% slower than 16 of 256). Clusters of 16 CTAs are
not portable (driver.allow_cluster lets a function run them): largest_cluster says
where the planner uses them. Measured again for rows of 2^18 after the mailbox and
lane-fold changes (one process, torch.compile interleaved): 16 CTAs of 512 threads, 32
values a thread, 2 CTAs an SM (64 registers), against 256 threads, 64 values, 3 CTAs:
layer norm bf16 2.77 -> 2.43 TB/s, f32 2.72 -> 2.65, RMSNorm bf16 3.01 -> 2.98, f32 2.83
-> 2.88."""
SPLIT_THREADS = 256
AHEAD_BYTES = 4 << 20
"""Bytes of input rows ahead that a cluster's CTAs prefetch into L2 (tile.prefetch, each
CTA its slice of the row that many bytes on) right after loading their own. While a
cluster reduces and writes, nothing of its own is in flight, and a few CTAs an SM leave
DRAM idle then; the prefetches keep it busy, and the clusters that take those rows later
find them in L2. Measured on an H100 (DeviceTimer, bench/fused.py's 128 MiB, with and
without in one run): layer norm bf16 rows of 2^15 2.76 -> 2.92 TB/s, 2^16 2.67 -> 2.84, 2^17 2.64 ->
2.82, 2^18 2.47 -> 2.68, f16 2^18 2.51 -> 2.71; RMSNorm bf16 2^18 2.86 -> 2.99, f16 2^18
2.62 -> 2.96; softmax within -0.5% (3.01 -> 3.00 at 2^16). 4 MiB was the best distance
of those tried in a PTX experiment (layer norm bf16 2^16: 1 MiB on 2.77, 2 MiB 2.88, 3
MiB 2.91, 4 MiB 2.92, 5 MiB 2.92; 2^18: 1 MiB 2.60, 2 MiB 2.71, 4 MiB 2.77, 6 MiB 2.74,
8 MiB 2.68, 12 MiB 2.26; a later kernel's rows of 2^18 take 6 MiB: LONG_AHEAD_BYTES).
Rows of 4-byte elements prefetch nothing but the normalizations' long ones (F32_AHEAD):
f32 rows of 2^16 ran slower with it (layer norm 2.95 -> 2.91, softmax 3.08
-> 3.01, the fused add 2.94 -> 2.90). Nor does the fused add + RMSNorm (two inputs):
bench/fused.py's bf16 rows of 2^16 ran 3.01 -> 2.88 TB/s with both rows prefetched 16
rows on (a separate timing of the same call, without the benchmark's fresh copies of x
and the residual, had it 3.00 -> 3.01)."""
AHEAD_ROW_MAX = 512 << 10
"""16-bit rows of more bytes than this prefetch nothing (rows of at most 2^18 elements)."""
LONG_ROW = 512 << 10
LONG_AHEAD_BYTES = 6 << 20
"""Bytes of input rows ahead for rows of LONG_ROW bytes or more (in place of AHEAD_BYTES).
Measured on an H100 (one process, torch.compile interleaved, 300 repetitions;
bit-identical results), TB/s against the planner before (4 MiB on for 16-bit rows, none
for f32 ones): RMSNorm bf16 rows of 2^18 2.90 -> 2.975 at 6 MiB on (8 MiB 2.92), f32
2^18 2.87 -> 2.95 (5 MiB 2.93, 7 MiB 2.95, 8 MiB 2.94, 10 MiB 2.86, 12 MiB 2.70), f32
2^17 2.965 -> 2.985 (4 MiB 2.97); layer norm bf16 2^18 2.75 -> 2.77 (8 MiB 2.71), f32
2^18 2.70 -> 2.74 (5-8 MiB 2.73-2.75, 10 MiB 2.56), f32 2^17 2.855 -> 2.895 (4 MiB
2.905); softmax bf16 2^18 2.935 -> 2.975 (5 MiB 2.96, 8 MiB 2.96), log_softmax 2.87 ->
2.92. Shorter rows keep AHEAD_BYTES (16-bit rows of 2^16 at 6 MiB: RMSNorm 3.10 -> 3.05,
layer norm 2.93 -> 2.86)."""
F32_AHEAD = ("rms_norm", "layer_norm")
F32_ROW_MAX = 1 << 20
"""The families whose rows of 4-byte elements prefetch too, LONG_AHEAD_BYTES on, where the
rows are LONG_ROW to F32_ROW_MAX bytes (f32 rows of 2^17 and 2^18: LONG_AHEAD_BYTES's
figures). Not softmax's: its f32 rows of 2^18 ran 3.00 TB/s without, 2.94-2.98 at 4-8
MiB (the last PTX experiment's layer norm at 4 MiB, 2.52 -> 2.44, predated the
mailboxes). The fused add + RMSNorm reads two arrays of rows and prefetches neither (f32
2^18 2.84 -> 2.48-2.64 at 5-7 MiB of both; 6 MiB of x's alone 2.895 -> 2.72, of r's
2.79; bf16 2^18 at 6 MiB 2.92 -> 2.89 and 2.88, bf16 2^16 at 4 MiB 3.12 -> 2.87 and
2.93)."""
CTA_AHEAD_BYTES: dict[str, int] = {"sm_90-nvidia-h200": 8 << 20}
"""Bytes of input rows ahead that the largest planned CTAs of a row prefetch into L2
(`_cta_ahead`: MAX_CTA // 2 threads, 16-bit elements, ops of one input: rows of 8193 to
16384 elements, two CTAs an SM), as a cluster's do, on the device models where that was
measured faster (by strategy.target: `cta_ahead_bytes`): with only two CTAs an SM,
both often reduce at once, with nothing of their own in flight. Measured on an H200
(rows of 16384 at 256 MiB, one process, the distances and torch interleaved, 150
repetitions, TB/s; none, 4, 8, 12, 16 MiB on): softmax bf16 3.75, 3.86, 3.94, 3.79, 3.18;
log_softmax 3.77, 3.86, 3.91, 3.76, 3.17; layer norm 3.97, 4.03, 4.14, 3.61, 3.20;
RMSNorm 4.14, 4.25, 4.17, 3.70, 3.28 (torch.compile 1.85, 2.39, 4.09, 4.17). Smaller
CTAs, whose SMs hold more of them, lose by it: softmax bf16 rows of 4096 (128 threads)
4.21 -> 4.18 at 4 MiB, 4.14 at 8; rows of 1025 (64 threads, edges) 3.60 -> 3.42 and
3.21; a held sum of rows of 1025 3.21 -> 2.90; f32 rows of 16384 (512 threads, twice the
bytes a thread) 4.21 -> 4.14 and 4.15; layer norm bf16 rows of 8191 (edges) 2.99 ->
3.00 and 2.99. bench/fused.py's bf16 rows of 16384 (128 MiB, another process): softmax
3.70 -> 3.84, log_softmax 3.70 -> 3.76, layer norm 3.89 -> 3.96, RMSNorm 4.09 -> 4.05
(torch.compile 4.07 -> 4.03 beside it). On an H100 the same CTAs lost by it:
bench/fused.py's bf16 rows of 16384 ran 3.10-3.14 TB/s without it (softmax 3.10,
log_softmax 3.10, RMSNorm 3.14, layer norm 3.10; 2026-11-26) and 2.90-2.97 with it
(2.92, 2.91, 2.97, 2.90; 2026-12-07), while between the two runs every other case of
the 50 the two tables share (the fused add's rows of 16384 among them: two inputs, no
prefetch) moved within -0.6% and +1.8%, torch.compile's within -1.5% and +2.2%. In one
process (bench/rows_ab.py --setting, H100, 2026-12-07): without it 3.10-3.18, with 8 MiB
2.90-2.98 (softmax 3.145 -> 2.920, log_softmax 3.151 -> 2.935, RMSNorm 3.179 -> 2.976,
layer norm 3.102 -> 2.903)."""


def cta_ahead_bytes(target: str | None) -> int:
    """CTA_AHEAD_BYTES of the device a target names (`sm_90-nvidia-h200`): 0 for another
    model, a bare chip (`sm_90`) or no GPU (None)."""
    return CTA_AHEAD_BYTES.get(target or "", 0)


EARLY_PARTS = {"rms_norm": 2, "fused_add_rms_norm": 2}
"""Parts of the weight each thread of a cluster reads into registers right after its row,
before the reductions (Geometry.early), per op family that has a weight; the other parts
are read in the apply phase, after the reductions, where the first loads' L2 latency is
waited for with nothing else in flight. Measured on an H100 (one process, torch.compile
interleaved, 300 repetitions, L2 flushed; TB/s of the rows' traffic), 0 -> 2 parts:
RMSNorm f32 rows of 2^16 3.113 -> 3.116, 2^17 2.952 -> 2.963, 2^18 2.807 -> 2.850 (2.809
-> 2.856 in another run), bf16 2^16 3.077 -> 3.109, 2^18 2.871 -> 2.903; the fused add +
RMSNorm f32 2^16 3.045 -> 3.060, 2^17 2.930 -> 2.948, 2^18 2.756 -> 2.831 (2.752 ->
2.846), bf16 2^16 3.102 -> 3.112, 2^18 2.885 -> 2.910. 1 part gained less (the fused add
f32 2^18 2.778), 4 parts were within 1.3% of 2 either way (RMSNorm bf16 2^16 3.149); 8
ran RMSNorm f32 2^18 at 2.525 (136 registers: one CTA an SM). Layer norm (w and b) reads
none early: 2 parts ran f32 2^18 2.706 -> 2.654 and bf16 2^18 2.754 -> 2.628 (128
registers a thread, so its request for 3 CTAs an SM is dropped), 4 parts bf16 2^18 2.687
(though bf16 2^16 2.94 -> 3.04-3.06 in two runs); w alone early, 1 and 2 parts: f32 2^18
2.712 -> 2.577 and 2.662, bf16 2^18 2.751 -> 2.726 and 2.661. Rows a CTA holds (1024 to
16384 elements, RMSNorm and the fused add) ran the same with 0, 1 or 2 (within 0.6%):
there the other CTAs of an SM hide the latency."""


# ------------------------------------------------------------------ the planner


@dataclass(frozen=True)
class Plan:
    """A strategy for rows of one length, and why it was chosen."""

    geometry: Geometry
    reason: str


def _pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def parts_limit(vec: int, held: int = HELD) -> int:
    """Parts a thread may hold: `held` values, MAX_PARTS tiles at most."""
    return max(1, min(MAX_PARTS, held // vec))


def _holders(nv: int, vec: int) -> int:
    """Threads a row of nv vectors takes at parts_limit(vec) vectors each (a power of two)."""
    return _pow2(-(-nv // parts_limit(vec)))


def _warp(m: int, nv: int, vec: int) -> Plan | None:
    """A group of lanes per row, several rows a CTA; fewer rows a CTA where the grid
    would not give every SM two CTAs."""
    lanes = min(32, _holders(nv, vec))
    if -(-nv // lanes) > parts_limit(vec):
        return None
    rows = BLOCK // lanes
    while rows > 1 and rows * lanes > 64 and -(-m // rows) < 2 * SMS:
        rows //= 2
    g = Geometry("warp", vec, lanes, rows)
    return Plan(g, f"a row of {nv * vec} fits {lanes} lane(s) holding "
                   f"{g.row_parts(nv * vec) * vec} elements each: {rows} rows a CTA of "
                   f"{g.threads} threads, reductions within the lanes (no barrier)")


def _whole_warp(nv: int, vec: int, itemsize: int) -> Plan | None:
    """A row a group of lanes would hold only as a whole warp: a CTA of SHORT_BYTES a
    thread instead."""
    if _holders(nv, vec) != 32:
        return None
    threads = max(64, _pow2(-(-nv * vec * itemsize // SHORT_BYTES)))
    g = Geometry("cta", vec, threads)
    return Plan(g, f"a row of {nv * vec} would take a whole warp: one CTA of {threads} "
                   f"threads holds it, {g.row_parts(nv * vec) * vec} elements each; "
                   "reductions across its warps through shared memory (one barrier each)")


def _cta(nv: int, vec: int, most: int) -> Plan | None:
    threads = max(64, _holders(nv, vec))
    if threads > most:
        return None
    g = Geometry("cta", vec, threads)
    return Plan(g, f"a row of {nv * vec} fits one CTA of {threads} threads holding "
                   f"{g.row_parts(nv * vec) * vec} elements each; reductions across its "
                   "warps through shared memory (one barrier each)")


def _cta_ahead(plan: Plan, n: int, itemsize: int, inputs: int, bytes_ahead: int) -> Plan:
    """`plan` prefetching `bytes_ahead` of rows on (the device's CTA_AHEAD_BYTES), where it
    is a CTA of MAX_CTA // 2 threads a row of 16-bit elements of an op of one input."""
    g = plan.geometry
    if not bytes_ahead or g.strategy != "cta" or g.lanes != MAX_CTA // 2 or \
            itemsize != 2 or inputs != 1:
        return plan
    ahead = max(1, bytes_ahead // (n * itemsize))
    return Plan(replace(g, ahead=ahead),
                f"{plan.reason}; each CTA prefetches the row {ahead} rows on into L2")


def _ahead(n: int, itemsize: int, inputs: int, f32: bool = False) -> int:
    """Rows ahead whose input a cluster prefetches into L2 (0: none), for ops of one input
    (`inputs` arrays of rows): rows of 16-bit elements of at most AHEAD_ROW_MAX bytes, and
    (where `f32`: the op's family is one of F32_AHEAD) rows of 4-byte ones of LONG_ROW to
    F32_ROW_MAX bytes; AHEAD_BYTES of them, LONG_AHEAD_BYTES from LONG_ROW bytes."""
    row = n * itemsize
    if inputs != 1 or row <= 0:
        return 0
    long_f32 = f32 and itemsize == 4 and LONG_ROW <= row <= F32_ROW_MAX
    if (itemsize == 2 and row <= AHEAD_ROW_MAX) or long_f32:
        return max(1, (LONG_AHEAD_BYTES if row >= LONG_ROW else AHEAD_BYTES) // row)
    return 0


def _cluster(nv: int, vec: int, clusters: int, ahead: int, early: int) -> Plan | None:
    """The first cluster shape of CLUSTERS (of at most `clusters` CTAs) that holds the
    row, CLUSTER_HELD values a thread; prefetching the input `ahead` rows on, reading
    `early` parts of the weight with the row."""
    lanes = _pow2(-(-nv // parts_limit(vec, CLUSTER_HELD)))
    for threads, ctas in CLUSTERS:
        if ctas <= clusters and threads * ctas >= lanes:
            g = Geometry("cluster", vec, threads * ctas, 1, ctas, ahead=ahead, early=early)
            fetch = f"; each cluster prefetches the row {ahead} rows on into L2" \
                if ahead else ""
            weight = f"; each thread reads its first {early} parts of the weight with " \
                "the row, before the reductions" if early else ""
            return Plan(g, f"a row of {nv * vec} is too long for one CTA's registers: "
                           f"a cluster of {ctas} CTAs of {threads} threads holds it "
                           f"({g.row_parts(nv * vec) * vec} elements a thread); their "
                           f"partials meet in distributed shared memory{fetch}{weight}")
    return None


def _split(nv: int, vec: int, clusters: int) -> Plan:
    parts = parts_limit(vec)
    span = SPLIT_THREADS * parts
    chunks = -(-nv // span)
    g = Geometry("split", vec, SPLIT_THREADS, 1, 1, parts, chunks)
    why = "longer than a cluster holds" if clusters else "too long for one CTA on a GPU " \
        "without thread block clusters"
    return Plan(g, f"a row of {nv * vec} is {why}: two passes over {chunks} chunks of "
                   f"{span * vec} (partial statistics, then their combination and the "
                   "normalization; the row is read twice)")


def choose(m: int, n: int, vec: int, clusters: int, *, itemsize: int, inputs: int = 1,
           early: int = 0, f32_ahead: bool = False, cta_ahead: int = 0) -> Plan:
    """The strategy for m rows of n elements accessed `vec` at a time (see the module
    docstring of programs/rows.py): a group of lanes (of at most 16: a row a whole
    warp would hold takes a CTA, `_whole_warp`), a CTA, a cluster (of at most
    `clusters` CTAs: the GPU's largest_cluster, 0 where it has none) or two passes, the
    first that holds the row in registers. A cluster prefetches the rows ahead that
    `_ahead` gives for `inputs` arrays of rows of `itemsize`-byte elements (of 4-byte ones
    too where `f32_ahead`: F32_AHEAD), and reads `early` parts of the weight with the row
    (EARLY_PARTS); the largest CTAs of 16-bit rows prefetch `cta_ahead` bytes of rows on
    (the device's CTA_AHEAD_BYTES: cta_ahead_bytes)."""
    nv = n // vec
    found = _whole_warp(nv, vec, itemsize) or _warp(m, nv, vec) or \
        _cta(nv, vec, MAX_CTA // 2) or \
        _cluster(nv, vec, clusters, _ahead(n, itemsize, inputs, f32_ahead), early) or \
        _cta(nv, vec, MAX_CTA)
    plan = _cta_ahead(found, n, itemsize, inputs, cta_ahead) if found else \
        _split(nv, vec, clusters)
    if nv * vec != n:  # rows with edges: the strategies count the whole vectors
        return Plan(plan.geometry, plan.reason.replace(f"a row of {nv * vec} ",
                                                       f"a row of {n} ", 1))
    return plan


@dataclass(frozen=True)
class Forced:
    """A strategy to use whatever the planner would choose (tests, benchmarks): its
    threads per row (lanes; per chunk for "split"), CTAs per cluster, parts per chunk,
    parts of the weight read early ("cta" and "cluster"), rows ahead prefetched into L2
    ("cta" and "cluster": Geometry.ahead), rows a CTA stacks ("cta": Geometry.stack; every
    one-pass kernel of a row and the held reductions)."""

    strategy: str
    lanes: int | None = None
    ctas: int = 2
    parts: int | None = None
    early: int = 0  # parts of the weight read with the row (a CTA's or a cluster's)
    ahead: int = 0
    stack: int = 1

    def plan(self, m: int, n: int, vec: int) -> Plan:
        nv = n // vec
        lanes = self.lanes
        if self.strategy == "warp":
            lanes = lanes or min(32, _pow2(nv))
            g = Geometry("warp", vec, lanes, max(1, min(BLOCK // lanes, _pow2(m))))
        elif self.strategy in ("cta", "cluster"):
            ctas = self.ctas if self.strategy == "cluster" else 1
            lanes = lanes or ctas * max(32, _pow2(-(-nv // (parts_limit(vec) * ctas))))
            g = Geometry(self.strategy, vec, lanes, 1, ctas, ahead=self.ahead,
                         early=self.early,
                         stack=self.stack if self.strategy == "cta" else 1)
        else:
            lanes = lanes or SPLIT_THREADS
            parts = self.parts or parts_limit(vec)
            g = Geometry("split", vec, lanes, 1, 1, parts, -(-nv // (lanes * parts)))
        return Plan(g, f"forced: {self.strategy}")


_forced: list[Forced] = []


def force(choice: Forced | str | None, **options: Any) -> None:
    """Make every row op use a strategy (`force("cluster", ctas=4)`; None: plan again)."""
    if isinstance(choice, str):
        choice = Forced(choice, **options)
    if choice is not None and choice.strategy not in programs.STRATEGIES:
        raise ValueError(f"strategy {choice.strategy!r}: one of "
                         f"{', '.join(programs.STRATEGIES)}")
    _forced[:] = [choice] if choice is not None else []
    entry.clear()


@contextmanager
def forced(choice: Forced | str, **options: Any) -> Iterator[None]:
    force(choice, **options)
    try:
        yield
    finally:
        force(None)


LARGEST_CLUSTER = 16
"""CTAs of sm_90's largest (not portable) thread block cluster."""


@cache
def largest_cluster(device: int) -> int:
    """CTAs of the largest cluster the planner gives the device: 0 before sm_90 (no
    thread block clusters); 16 on a whole sm_90-or-later GPU of SMS or more SMs (an H100
    SXM, an H200: each graphics processing cluster has the 16 SMs such a cluster of CTAs
    of 256 threads or more needs); else the portable 8 (a MIG instance, a smaller part)."""
    chip = kernels.chip(device)
    digits = "".join(c for c in chip or "" if c.isdigit())
    if not digits or int(digits) < 90:
        return 0
    return LARGEST_CLUSTER if driver.device_sms(device) >= SMS else driver.PORTABLE_CLUSTER


def plan_for(m: int, n: int, vec: int, device: int, *, itemsize: int, inputs: int = 1,
             early: int = 0, f32_ahead: bool = False, wide: int = 0,
             stacks: int = 0, scalar_warp: bool = False) -> Plan:
    """The plan of m rows of n elements accessed `vec` at a time, or `wide` at a time with
    edges (with_edges; a CTA's stack of rows where the planner stacks the family's:
    `stacks` the elements of a row a thread then holds at most, STACKS, 0 where it does
    not; `scalar_warp`: the family is one of SCALAR_WARP)."""
    if _forced:
        forced = _forced[0]
        return with_edges(lambda width: forced.plan(m, n, width), n, vec, wide, planned=False)
    return chosen(m, n, vec, largest_cluster(device), itemsize=itemsize, inputs=inputs,
                  early=early, f32_ahead=f32_ahead, wide=wide, stacks=stacks,
                  scalar_warp=scalar_warp, cta_ahead=device_cta_ahead(device))


def device_cta_ahead(device: int) -> int:
    """The device's CTA_AHEAD_BYTES (by its tuning target: the chip and the model), read
    at each plan (bench/rows_ab.py's --setting CTA_AHEAD_BYTES={} takes it away)."""
    return cta_ahead_bytes(kernels.tuning_target(device))


def chosen(m: int, n: int, vec: int, clusters: int, *, itemsize: int, inputs: int,
           early: int, f32_ahead: bool, wide: int, stacks: int = 0,
           scalar_warp: bool = False, cta_ahead: int = 0) -> Plan:
    """The planner's plan (`choose`, `with_edges`) for a GPU of `clusters` whose largest
    CTAs of 16-bit rows prefetch `cta_ahead` bytes on (plan_for's and explain's)."""
    return with_edges(
        lambda width: choose(m, n, width, clusters, itemsize=itemsize, inputs=inputs,
                             early=early, f32_ahead=f32_ahead, cta_ahead=cta_ahead),
        n, vec, wide, inputs=inputs,
        stack=(m, stacks) if stacks else None, scalar_warp=scalar_warp)


EDGES = ("softmax", "rms_norm", "fused_add_rms_norm", "layer_norm")
"""The families whose rows may take edges (Geometry.edges): softmax and log_softmax, whose
parts are the row's alone, and the norms, whose weight (and bias) is split as each row is
(tl's aligned_as: its vectors then as aligned as the row's offset lets them be, narrower
loads from L1 where not); layer norm's centered squares zero the vectors of the parts not
whole at every alignment past the body's end in registers (tail_fill, by the part's
length at run time), take the head and the tail from memory again, and a cluster's row
its two rounds of reductions (Welford's counts would need each part's elements).
Measured on an H200 (bench/rows_ab.py at bench/fused.py's 128 MiB, TB/s, the narrow
plan's -> with edges): RMSNorm bf16 rows of 8191 3.07 -> 3.94, 16383 2.78 -> 3.83, 50257
2.30 -> 3.28, f32 4097 3.87 -> 4.03; layer norm bf16 4097 2.22 -> 2.77, 16383 2.13 ->
2.47, 32001 1.65 -> 1.97, 50257 1.44 -> 1.98, f32 8191 3.51 -> 3.81, 4097 3.72 -> 3.74;
one loss, layer norm bf16 8191 2.90 -> 2.77 (the narrow plan's 512 threads prefetch the
rows ahead, _cta_ahead; with edges 128, or 256 at 2.67). Torch eager and torch.compile
ran 0.8-1.5 and 1.1-2.8 beside them."""
EDGE_STRATEGIES = ("cta", "cluster")
"""The strategies of a whole row a CTA or cluster, whose rows may take edges (a CTA of
several rows holds them in one tile, which one alignment would have to serve)."""


EDGE_CTA_SHARE = 2
"""A CTA's row of 16-bit elements with edges takes 1/EDGE_CTA_SHARE of the threads `choose`
gives the row (each thread twice the parts), not fewer than EDGE_CTA_MIN: its head and
tail cost every thread about what more parts would. Measured on an H200 (softmax bf16, 2^28
bytes, the geometries interleaved with torch beside): rows of 1025 at 128 threads 2.81
TB/s, at 64 3.57 (without edges 3.41, rows of 1024 3.80); 2049 at 64 threads 4.02, at 32
4.11 (4.19); 4097 at 128 4.00, at 64 4.15 (4.10). f32 rows ran alike either way (1025:
4.22 and 4.19, 2049: 4.17 and 4.14)."""
EDGE_CTA_MIN = 64
"""The planner's smallest CTA of a row (`_cta`, `_whole_warp`): rows of 2049 stay at 64
threads (32 measured 2% faster once, on that one length: not taken)."""
EDGE_PAIR_PARTS = {2: 1, 4: 2}
EDGE_PAIR_CTA = {2: MAX_CTA // 2, 4: MAX_CTA}
"""Parts of each input a thread holds, by element size, where a row of two inputs (the
fused add + RMSNorm: x and the residual) takes edges (`_pair_threads`): a CTA of as many
threads as hold them, at most EDGE_PAIR_CTA's, or a cluster of at most EDGE_PAIR_LANES
threads (never fewer than the planner's plan has); a thread of a row with edges holds each
part of both inputs, their head and tail too. Measured on an H200 (bench/rows_ab.py,
fused_add_rms_norm at bench/fused.py's 128 MiB, TB/s, at 32 / 64 / 128 / 256 / 512 /
1024 threads; the planner's before in brackets; rows of 257 and 513 now take
PAIR_STACK_ROWS). bf16 (1 part of each): rows of 257
3.31 / 3.21 (3.18: 64 threads reading 2 bytes), 1025 - / 3.30 / 4.03 / 3.44 (3.22),
2049 - / 3.27 / 3.67 / 4.12 (3.67), 4097 256 threads on: 3.78 / 4.04 / 2.64 (3.77);
8191 3.36 / 3.86 / 3.69 and 16383 2.76 / 3.29 / 3.08 (the 512 threads' 2 and 4 parts
held); clusters: 8191 at 128 / 256 / 512 threads 3.00 / 3.36 / 3.87; 32001 on 4 CTAs of
128 threads 2.49, 8 of 256 3.02, 16 of 128 3.15, 16 of 256 2.85; 50257 on 8 of 128 2.62,
8 of 256 2.76, 16 of 128 2.73, 16 of 256 2.48. f32 (2 parts of each): 257 on 32 threads
stacked 3.94 (3.46), 513 on 64 stacked 3.93 (2.72), 1025 3.62 / 3.82 / 4.16
(3.82: 2 parts taken over 1, untried then), 4097 256 threads on: 3.53 / 3.95 / 3.67
(3.27), 8191 3.12 / 3.38 / 3.90 (3.12), 16383 2.78 / 3.42 / 3.59 (3.42); 32001 on 8 CTAs
of 256 threads 3.34, 4 of 256 3.03, 8 of 128 3.01, 16 of 128 3.28 (3.01); 50257 on 8 of
256 2.94 (2.83). One input holds its 6 to 8 parts a thread best (RMSNorm bf16 rows of
50257 on 8 CTAs of 128 threads 3.28, of 256 2.69)."""
EDGE_PAIR_LANES = 2048
"""A cluster's threads that EDGE_PAIR_PARTS stop at (bf16 rows of 50257: 4096 ran
slower)."""


STACK_ROWS = 4
STACK_PARTS = 2
STACK_VALUES = 16
STACK_THREADS = 64
STACK_MIN_ROWS = 8192
"""A CTA of a row with edges of at most STACK_THREADS threads, each holding at most
STACK_PARTS parts and STACK_VALUES elements of it (less for some families: STACKS), holds
STACK_ROWS rows, every row's loads before the first reduction (`_stacked`), where there are
STACK_MIN_ROWS rows or more (a quarter of the CTAs still fill the GPU): an SM runs at most
32 CTAs, 2048 threads only in CTAs of 64, and a short row a CTA leaves few bytes in
flight. A row that a warp's threads would hold so (of 32 vectors or more), which a group
of lanes would hold without edges where the narrow accesses would take a CTA, takes a CTA
of one warp with them. Measured on an H200 (bench/rows_ab.py at bench/fused.py's 128 MiB, TB/s,
one row a CTA -> stacks of 2 / 4; torch eager and torch.compile in brackets). bf16 rows
on 64 threads: softmax 1025 3.55 -> 3.52 / 3.65 (1.58, 0.73), 999 3.47 -> 3.40 / 3.56;
log_softmax 1025 3.38 -> 3.35 / 3.59, 999 3.33 -> 3.26 / 3.54; sum 1025 3.03 -> 4.01 /
3.93 (2.85, 1.49), amax 3.04 -> 3.94 / 3.87, mean 3.04 -> 3.87 / 3.87; 3 parts a thread
(1537) softmax 3.83 -> 3.99 / 3.69, sum 3.96 -> 3.93 / 3.81; 4 (2049) softmax 4.01 ->
4.02 / 3.46, sum 4.04 -> 3.93 / 3.96. On 32 threads (the planner's before: a CTA of 64
threads reading 2-byte elements, or the reductions' stages): softmax bf16 513 3.16 -> 3.65
(stack of 4), 385 2.45 -> 2.97, 257 1.66 -> 2.80 (1.73, 2.47), f32 257 3.21 -> 3.94 (3.39,
4.08); log_softmax bf16 513 3.19 -> 3.40, f32 257 3.22 -> 3.94; sum bf16 513 3.13 -> 3.86,
257 0.32 -> 3.03 (1.56, 1.62), f32 257 0.63 -> 3.90. Stacks lost where a thread held 4
parts: f32 513 on 32 threads 4.08 -> 3.99 / 3.95 (the planner keeps its 64 threads reading
4-byte elements, 4.07), f32 1025 on 64 4.25 -> 4.15 / 4.08 (the planner's 128 threads hold
2 parts, stacked: 4.24 -> 4.11, hence STACK_THREADS). Rows of 77 and 129 bf16 keep their
group of lanes (3.05 against 1.48 stacked on 32 threads), and so do f32 rows of 129 (3.98
against 3.58)."""
STACKS = {"softmax": STACK_VALUES, "rms_norm": 8, "layer_norm": 8,
          "fused_add_rms_norm": STACK_VALUES}
"""The row op families whose kernel holds a stack of rows a CTA (Geometry.stack), and the
elements of a row a thread holds at most for it to: softmax and log_softmax
(reductions.py's rows held in registers too) STACK_VALUES, RMSNorm and layer norm 8 (each
row's weight and bias split as the row is). Measured on an H200 (bench/fused.py, one row
a CTA -> stacks of 4, TB/s; torch.compile in brackets): RMSNorm bf16 rows of 257 on 32
threads 1.66 -> 3.35 (3.16), f32 257 3.22 -> 3.88 (4.07), layer norm bf16 257 1.66 ->
2.24 (2.08), f32 257 3.20 -> 3.40 (3.56); at 16 elements a thread they lost: RMSNorm bf16
1025 on 64 threads 4.07 -> 3.63, layer norm bf16 1025 2.51 -> 2.37, 513 on 32 threads
3.11 -> 2.41 (RMSNorm bf16 513 3.19 -> 3.58). The fused add + RMSNorm STACK_VALUES
elements of each input: PAIR_STACK_ROWS. Softmax's stacks take no prefetch of the rows
ahead (PAIR_AHEAD's): on an H200, f32 rows of 257 (4 rows a CTA of 32 threads, 3.94
TB/s; torch.compile 4.07) ran 3.82 with the rows 8 on prefetched, 3.81 16 on, 3.88 in
stacks of 2 with it, 3.69 on 64 threads in stacks of 2 (log_softmax alike)."""
SCALAR_WARP = ("softmax", "rms_norm", "layer_norm")
"""The families whose row of one input of 4-byte elements read one at a time (an odd
length), that a CTA of one warp would stack with edges (rows of 257 to 259:
`_warp_cta`), takes a warp a row instead, 4 rows a CTA of 128 threads, no barrier
(`_warp`): a warp's 4-byte loads are whole 128-byte lines already, and an SM runs 2048
threads in CTAs of 128 where CTAs of 32 stop at 1024. Measured on an H200
(bench/rows_ab.py at 128 MiB, TB/s, stacked with edges -> a warp a row; torch.compile
beside): f32 rows of 257 softmax 3.93 -> 4.05 (4.04), log_softmax 3.89 -> 4.02 (4.00),
layer norm 3.68 -> 3.90 (3.54), RMSNorm 3.99 -> 3.98 (4.04); 259 softmax 3.92 -> 4.03
(4.02). Longer rows keep their CTA of 64 threads reading 4-byte elements: a warp a row
lost there (softmax 385 4.02 -> 4.01, RMSNorm 385 4.02 -> 3.93, layer norm 511 3.91 ->
3.81, log_softmax 511 4.04 -> 4.00). The norms stacked those rows 2 a CTA (the parts a
thread held limited, STACK_HELD, gone with them: RMSNorm f32 257 in stacks of 2 / 3 / 4
4.02 / 3.97 / 3.89, layer norm 3.55 / 3.51 / 3.40). The reductions keep their stack
(reductions.py's _held: sum f32 257 3.90, amax 3.91; a warp a row in reduction.py's
reduce_rows 3.62, 3.62). The fused add + RMSNorm, of two inputs, keeps its pair stack
(PAIR_STACK_ROWS)."""
PAIR_STACK_ROWS = 2
PAIR_AHEAD = 8
"""A row of two inputs (the fused add + RMSNorm) that a group of lanes would hold without
edges takes a CTA of the threads that hold at most STACK_PARTS parts of each (`_warp_cta`:
32, or 64 for f32 rows of 513), with edges, which holds PAIR_STACK_ROWS rows (every row's x
and residual loaded before any row's residual is written: the last CTA's rows past M
repeat the last row) and prefetches the rows PAIR_AHEAD on into L2, where there are
STACK_MIN_ROWS rows. Measured on an H200 (bench/rows_ab.py, bench/fused.py's 128 MiB,
TB/s; torch.compile in brackets): bf16 rows of 257 on 32 threads 3.74 (3.42; 64 threads
reading 2 bytes 3.18, 32 with edges alone 3.31, stacks of 4 without the prefetch 2.85,
with it 3.72), 385 3.85 (3.49; before 3.47), 513 3.92 (2.91; 3.74 on 64 threads of 1 part
each, EDGE_PAIR_PARTS), f32 257 4.00 (3.96; 3.46 before, 3.94 in 4 rows without the
prefetch); stacks of 4 with it 3.67-3.81 for bf16, on 64 threads 2.89 (257) to 3.84."""

def _stackable(parts: int, vec: int, values: int) -> bool:
    """Whether a thread holding `parts` parts of `vec` elements of a row may hold a stack of
    rows (at most STACK_PARTS parts and `values` elements: STACKS)."""
    return parts <= STACK_PARTS and parts * vec <= values


def _stacked(g: Geometry, n: int, stack: tuple[int, int], reason: str
             ) -> tuple[Geometry, str]:
    """A CTA's geometry `g` of a row with edges holding STACK_ROWS rows where it has at
    most STACK_THREADS threads that may (`_stackable`) and there are STACK_MIN_ROWS rows
    (`stack`: the rows M and `values`), and why."""
    m, values = stack
    parts = g.row_parts(n)
    if g.strategy != "cta" or g.threads > STACK_THREADS or m < STACK_MIN_ROWS or \
            not _stackable(parts, g.vec, values):
        return g, reason
    return replace(g, stack=STACK_ROWS), (
        f"{reason}; each CTA holds {STACK_ROWS} rows one after another, every row's loads "
        f"before the first reduction ({parts * g.vec} elements of a row a thread)")


def _pair_lanes(n: int, vec: int) -> int:
    """The threads that hold EDGE_PAIR_PARTS parts of each of two inputs' rows of `n`
    elements a thread, `vec` an access (a power of two)."""
    return _pow2(max(1, n // vec // EDGE_PAIR_PARTS[ACCESS_BYTES // vec]))


def _warp_cta(n: int, wide: int, inputs: int) -> int:
    """The threads of the CTA that a row of n elements (`wide` an access), which a group
    of lanes would hold without edges, takes with them where its family stacks: a warp's;
    a row of two inputs as many as hold STACK_PARTS parts of each, as far as STACK_THREADS
    go."""
    if inputs == 1:
        return 32
    return min(STACK_THREADS, max(32, _pow2(n // wide // STACK_PARTS)))


def _threads_said(threads: int) -> str:
    return "a warp" if threads == 32 else f"{threads} threads"


def _pair_threads(g: Geometry, n: int) -> tuple[Geometry, str]:
    """A CTA's or cluster's geometry `g` of a row of two inputs with edges, given the
    threads for EDGE_PAIR_PARTS parts of each a thread, as far as a CTA of EDGE_PAIR_CTA's
    threads or EDGE_PAIR_LANES of a cluster go (never fewer than `g`'s), and why."""
    lanes = max(g.lanes, _pair_lanes(n, g.vec))
    size = ACCESS_BYTES // g.vec
    parts, largest = EDGE_PAIR_PARTS[size], EDGE_PAIR_CTA[size]
    if g.strategy == "cta":
        g = replace(g, lanes=min(lanes, largest), ahead=0)
        return g, (f"a row of {n} of each of two inputs fits one CTA of {g.threads} threads "
                   f"holding {g.row_parts(n) * g.vec} elements of each (a row of two "
                   f"inputs with edges: {parts} part{'s' if parts > 1 else ''} of each a "
                   f"thread, as far as {largest} threads go); reductions across its warps "
                   "through shared memory (one barrier each)")
    if min(lanes, EDGE_PAIR_LANES) > g.lanes:  # the first shape of 8 CTAs at most with them
        g = next(replace(g, lanes=t * c, ctas=c) for t, c in CLUSTERS
                 if c <= 8 and t * c >= min(lanes, EDGE_PAIR_LANES))
    threads, ctas = g.threads, g.ctas
    weight = f"; each thread reads its first {g.early} parts of the weight with the row, " \
        "before the reductions" if g.early else ""
    return g, (f"a row of {n} of each of two inputs: a cluster of {ctas} CTAs of {threads} "
               f"threads holds it ({g.row_parts(n) * g.vec} elements of each a thread: a "
               f"row of two inputs with edges, {parts} part{'s' if parts > 1 else ''} of "
               f"each as far as {EDGE_PAIR_LANES} threads go); their partials meet in "
               f"distributed shared memory{weight}")


def with_edges(pick: Callable[[int], Plan], n: int, vec: int, wide: int, *,
               planned: bool = True, inputs: int = 1,
               stack: tuple[int, int] | None = None, scalar_warp: bool = False) -> Plan:
    """The plan `pick` makes at `wide` elements an access, with edges, where there is a
    wider access than `vec` (rows of odd length or at odd offsets take vec = 1) and its
    strategy holds a whole row a CTA or cluster (a `planned` 16-bit row then takes
    EDGE_CTA_SHARE's share of a CTA's threads where it has one input, and any row of two
    inputs EDGE_PAIR_PARTS parts of each a thread: `_pair_threads`); else at `vec`. Where
    the kernel stacks rows (`stack`: the rows M and the elements of a row a thread holds
    at most, STACKS), a planned group of lanes of a row that a CTA's threads may stack
    takes that CTA with edges (`_warp_cta`; where `scalar_warp`, a row of one input of
    4-byte elements a warp a row instead: SCALAR_WARP), and a CTA of a short row a stack
    (STACK_ROWS; a row of two inputs so taken PAIR_STACK_ROWS, with their prefetch)."""
    if wide <= vec:
        return pick(vec)
    plan = pick(wide)
    taken = _warp_cta_plan(pick, plan, n, vec, wide, inputs=inputs, stack=stack,
                           scalar_warp=scalar_warp) if planned and stack else None
    if taken is not None and taken.geometry.strategy == "warp":  # SCALAR_WARP
        return taken
    warp_cta = taken is not None
    base = taken or plan
    g, reason = base.geometry, base.reason
    if g.strategy not in EDGE_STRATEGIES:
        return pick(vec)
    if warp_cta and inputs > 1:  # its threads as taken; a stack of them where M allows
        if stack and stack[0] >= STACK_MIN_ROWS:
            g = replace(g, stack=PAIR_STACK_ROWS, ahead=PAIR_AHEAD)
            reason += (f"; each CTA holds {PAIR_STACK_ROWS} rows one after another, every "
                       f"row's loads before the first reduction, and prefetches the rows "
                       f"{PAIR_AHEAD} on into L2 (a row of two inputs)")
    elif planned and inputs > 1:
        g, reason = _pair_threads(g, n)
    elif planned and g.strategy == "cta" and wide == ACCESS_BYTES // 2 and \
            g.lanes // EDGE_CTA_SHARE >= EDGE_CTA_MIN:
        g = replace(g, lanes=g.lanes // EDGE_CTA_SHARE, ahead=0)
        reason = (f"a row of {n} fits one CTA of {g.threads} threads holding "
                  f"{g.row_parts(n) * wide} elements each (a row with edges: half the "
                  "threads of an aligned one); reductions across its warps through shared "
                  "memory (one barrier each)")
    if planned and stack and inputs == 1:
        g, reason = _stacked(g, n, stack, reason)
    return Plan(replace(g, edges=True), f"{reason}; each row is read as its {wide}-element "
                "vectors that start aligned, and the elements before and after them apart "
                "(its start is not aligned)")


def _warp_cta_plan(pick: Callable[[int], Plan], plan: Plan, n: int, vec: int, wide: int, *,
                   inputs: int, stack: tuple[int, int], scalar_warp: bool) -> Plan | None:
    """The CTA (`_warp_cta`'s threads) that a row to which `pick` gives a group of lanes
    at `wide` elements an access (`plan`, its plan there) and a CTA at `vec` takes with
    edges, where a thread may stack it (`_stackable`: `stack` the rows M and the elements
    a thread holds at most); where `scalar_warp`, a row of one input of 4-byte elements a
    warp a row instead, without edges (SCALAR_WARP); None where neither applies."""
    threads = _warp_cta(n, wide, inputs)
    if plan.geometry.strategy != "warp" or n // wide < 32 or \
            not _stackable(-(-(n // wide) // threads), wide, stack[1]) or \
            pick(vec).geometry.strategy != "cta":
        return None
    if scalar_warp and inputs == 1 and threads == 32 and wide * 4 == ACCESS_BYTES:
        kept = _warp(stack[0], n // vec, vec)
        if kept is not None:
            return Plan(kept.geometry, f"{kept.reason} (4-byte elements read one at a time: "
                        "a warp's loads are whole lines)")
    g = Geometry("cta", wide, threads)
    return Plan(g, f"a row of {n} fits one CTA of {_threads_said(threads)}, "
                   f"{g.row_parts(n) * wide} elements a thread (a row with edges, which a "
                   "group of lanes would hold without them); " + (
                       "reductions across the warp's lanes" if threads == 32 else
                       "reductions across its warps through shared memory (one barrier "
                       "each)"))


def edge_width(family: str, itemsize: int, arrays: Sequence[Array] = ()) -> int:
    """The access width of edges for rows of `itemsize`-byte elements of `arrays` (x, y,
    r: [M, N] views; a weight is split as the rows are, wherever it starts; 0 where they
    cannot take them): 16 bytes, where the family may (EDGES)
    and every row of every array starts at the same offset modulo that width, so that one
    row's head is as long in all of them (the rows of one contiguous array always do)."""
    if family not in EDGES:
        return 0
    width = ACCESS_BYTES // itemsize
    for first, a in itertools.pairwise(arrays):
        if (a.offset - first.offset) % width or \
                (a.shape[0] > 1 and (a.strides[0] - first.strides[0]) % width):
            return 0
    return width


FAMILIES = {"log_softmax": "softmax"}
"""The kernel family (programs.KERNELS) of each op whose name is not its family's."""
ROW_INPUTS = ("x", "r")
"""The arrays whose rows a row op reads (x; the fused add's residual r too)."""


def inputs_of(op: str) -> int:
    """The arrays of rows `op` reads (ROW_INPUTS it has)."""
    return 2 if op == "fused_add_rms_norm" else 1


def explain(op: str, shape: Sequence[int], dtype: str = "f32", *,
            clusters: int = LARGEST_CLUSTER, target: str | None = None) -> str:
    """Why the planner runs `op` over the last dim of a contiguous `shape` as it does
    (rms_norm as called with a weight) on a GPU of `clusters` and of the tuning target
    `target` (`sm_90-nvidia-h200`; None: no model's measured choices, CTA_AHEAD_BYTES)."""
    if op not in NAMES or dtype not in SUPPORTED:
        raise ValueError(f"explain: {op} {dtype}: the row ops are {', '.join(NAMES)}, on "
                         f"{', '.join(SUPPORTED)}")
    if any(d < 0 for d in shape):
        raise ValueError(f"explain: shape {list(shape)} has a negative size")
    n = shape[-1] if shape else 1
    m = math.prod(shape[:-1])
    if not m * n:
        return f"{op} {dtype} {m}x{n}: an empty input: nothing is launched"
    itemsize = DTYPES[dtype].bytes
    family = FAMILIES.get(op, op)
    plan = chosen(m, n, vector_width(n, dtype, []), clusters, itemsize=itemsize,
                  inputs=inputs_of(op), early=EARLY_PARTS.get(op, 0),
                  f32_ahead=op in F32_AHEAD, scalar_warp=family in SCALAR_WARP,
                  wide=edge_width(family, itemsize),
                  stacks=STACKS.get(family, 0), cta_ahead=cta_ahead_bytes(target))
    g, reason = plan.geometry, plan.reason
    if g.vec * itemsize < ACCESS_BYTES:
        reason += (f"; each row is read {g.vec} element{'s' if g.vec > 1 else ''} at a time "
                   f"({g.vec * itemsize}-byte accesses: rows of {n} do not all start "
                   "16-byte aligned, and this plan reads them without edges)")
    if copies_serve(family, g, m, n, itemsize):
        reason += (f"; the weight{' and bias' if 'bias' in WEIGHTS[family] else ''} read from "
                   f"{g.vec} copies, one per alignment a row starts at (rows of "
                   f"{COPY_LENGTH[family]} or more, {COPY_BYTES >> 20} MiB or more: their "
                   "vectors 16-byte loads too)")
    return f"{op} {dtype} {m}x{n}: {g.strategy}: {reason}"


def vector_width(n: int, dtype: str, divisors: Sequence[int]) -> int:
    """Elements per access: 16 bytes, narrowed to divide the row length, the row strides
    and the arrays' element offsets (`divisors`)."""
    vec = ACCESS_BYTES // DTYPES[dtype].bytes
    while vec > 1 and any(d % vec for d in (n, *divisors)):
        vec //= 2
    return vec


# ------------------------------------------------------------------ arguments


def _kind(value: Any) -> str:
    """What a described argument that is not an array is, for an error."""
    return "a number" if isinstance(value, Scalar) else type(value).__name__


def _input(value: Any, name: str, what: str) -> Array:
    if not isinstance(value, Array):
        raise TypeError(f"{what}: argument '{name}' must be an array, got {_kind(value)}")
    if value.dtype not in SUPPORTED:
        raise TypeError(f"{what}: argument '{name}' has element type "
                        f"{torch_name(value.dtype)}; {what} takes "
                        f"{', '.join(torch_name(d) for d in SUPPORTED)}")
    return value


def normalize_dim(dim: Any, rank: int, what: str) -> int:
    """A dim as torch takes it: in [-rank, rank) (a 0-d tensor: 0 or -1)."""
    if not isinstance(dim, int | np.integer) or isinstance(dim, bool):
        raise TypeError(f"{what}: argument 'dim' must be an int, got {dim!r}")
    extent = max(rank, 1)
    if not -extent <= dim < extent:
        raise IndexError(f"{what}: argument 'dim' is {dim}, out of range for a {rank}-d "
                         f"input (expected in [{-extent}, {extent - 1}])")
    return int(dim) % extent


def normalized_dims(normalized_shape: Any, x: Array, what: str) -> int:
    """How many trailing dims normalized_shape names (it must be x's trailing dims)."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int | np.integer) else \
        normalized_shape
    try:
        sizes = tuple(int(s) for s in shape)
    except (TypeError, ValueError):
        raise TypeError(f"{what}: argument 'normalized_shape' must be an int or a sequence "
                        f"of ints, got {normalized_shape!r}") from None
    k = len(sizes)
    if not k or k > len(x.shape) or tuple(x.shape[len(x.shape) - k:]) != sizes:
        raise ValueError(f"{what}: argument 'normalized_shape' is {list(sizes)}, but the "
                         f"input has shape {list(x.shape)}: normalized_shape must be its "
                         f"last {k or 1} dim(s)")
    return k


def _parameter(value: Any, name: str, x: Array, shape: tuple[int, ...], what: str
               ) -> Array | None:
    """A weight or bias: None, or an array of `shape` and x's dtype on x's device."""
    if value is None:
        return None
    if not isinstance(value, Array):
        raise TypeError(f"{what}: argument '{name}' must be an array or None, got "
                        f"{_kind(value)}")
    if value.shape != shape:
        raise ValueError(f"{what}: argument '{name}' has shape {list(value.shape)}, expected "
                         f"{list(shape)}")
    if value.dtype != x.dtype:
        raise TypeError(f"{what}: argument '{name}' is {torch_name(value.dtype)}, the input "
                        f"{torch_name(x.dtype)}: they must be of one dtype")
    return value


def as_rows(a: Array, lead: int) -> Array | None:
    """a as [M, N]: its first `lead` dims merged into M (a row stride of any size, not
    negative), the others into N (contiguous); None where they do not merge so."""
    n = math.prod(a.shape[lead:])
    m = math.prod(a.shape[:lead])
    inner = coalesce.merge_run(list(zip(a.shape[lead:], a.strides[lead:], strict=True)))
    outer = coalesce.merge_run(list(zip(a.shape[:lead], a.strides[:lead], strict=True)))
    if inner is None or outer is None or (n > 1 and inner[1] != 1):
        return None
    stride = outer[1] if m > 1 else n
    if stride < 0:
        return None
    return a.view((m, n), (stride, 1))


def _permuted(a: Array, order: Sequence[int]) -> Array:
    return a.view(tuple(a.shape[i] for i in order), tuple(a.strides[i] for i in order))


def rows_of(b: Builder, a: Array, lead: int, what: str) -> Array:
    """a's rows as [M, N]: a view, or a contiguous copy where a's rows do not merge."""
    view = as_rows(a, lead)
    if view is not None:
        return view
    copy = apply(b, "cast", [In(a)], b.temporary(a.shape, a.dtype), result=a.dtype,
                 what=what)
    found = as_rows(copy, lead)
    assert found is not None
    return found


@dataclass
class Target:
    """Where a row op writes: `rows`, a view of the output, or a temporary copied into
    `out` after (`copy`)."""

    rows: Array
    copy: tuple[Array, Array] | None = None  # (temporary, the output's view it goes to)

    def finish(self, b: Builder, what: str) -> None:
        if self.copy is not None:
            temporary, view = self.copy
            apply(b, "cast", [In(temporary)], view, result=view.dtype, what=what)


def target_of(b: Builder, out: Array, lead: int) -> Target:
    view = as_rows(out, lead)
    if view is not None:
        return Target(view)
    temporary = b.temporary(out.shape, out.dtype)
    found = as_rows(temporary, lead)
    assert found is not None
    return Target(found, (temporary, out))


def vector_of(n: int, arrays: Sequence[Array]) -> int:
    """The access width every array allows: row strides (of arrays of several rows) and
    element offsets."""
    divisors = [a.offset for a in arrays]
    divisors += [a.strides[0] for a in arrays if len(a.shape) == 2 and a.shape[0] > 1]
    return vector_width(n, arrays[0].dtype, divisors)


# ------------------------------------------------------------------ launches


SOFTMAX_EXP = {"f32": "exp", "f16": "exp_fast", "bf16": "exp_fast"}
"""The elementwise op softmax and log_softmax take e^(x - max) with (and their split's
chunk maxima with), by the rows' dtype: where it is narrower than f32, op_table's
exp_fast, ex2.approx((x - max) * log2(e)) as Triton's exp (torch.compile's softmax)
computes it, 3 instructions an element where libdevice's expf ("exp") takes about 10;
its error, 2 ulp of f32 plus |x - max| / 2 (the product rounds to f32 first), stays far
under a 16-bit result's rounding. f32 rows keep expf, within a few ulp of every element
(e^-40 included), for no loss. Measured on an H200 (bench/rows_ab.py --precise-exp,
TB/s, expf -> exp_fast; torch.compile beside): softmax bf16 rows of 257 2.81 -> 3.17
(2.48), 4096 4.22 -> 4.25, log_softmax bf16 65536 3.80 -> 3.96 (2.12); f32 ties (257
3.93 -> 3.92, 513 4.04 -> 4.03, 1024 4.15 -> 4.15, 32001 4.21 -> 4.21, 262144 3.93 ->
3.95), and rows of 7 f32 would take an element's error past (n + 16) ulp + 1 (randn * 8
inputs: e^-50's product error alone 25 ulp)."""


VECTORS = {"weight": ("w", "HAS_W"), "bias": ("b", "HAS_B")}
"""The norms' [N] vectors: the key of each in a call's arrays, and the flag that says the
call has it (the fused add + RMSNorm has no HAS_W: its weight is always given)."""
WEIGHTS = {"rms_norm": ("weight",), "layer_norm": ("weight", "bias"),
           "fused_add_rms_norm": ("weight",)}
"""The families' [N] vectors (VECTORS)."""

COPY_BYTES = 64 << 20
"""Rows with edges (a length no multiple of the vector, or odd strides) of at least this
many bytes in all, and at least COPY_LENGTH elements each, read the norms' weight and
bias from V copies of each, one per alignment a row can start at (`weight_copies`), so
that every row's weight vectors are 16-byte loads; else from the vector itself, whose
body is then read an element at a time on most rows (the PTX of layer norm bf16 over
rows of 8191: 136 ld.global.nc.b16 and 9 v4 loads). Each copy costs a kernel of its own
(V * N elements written; about 1.7 us a call on an H200). Measured there (bench/rows_ab.py
--setting, TB/s, without the copies -> with; torch.compile beside): at 128 MiB layer
norm bf16 rows of 1025 2.50 -> 3.37 (0.88), 4097 2.78 -> 3.22, 8191 2.75 -> 2.99, 32001
1.97 -> 2.85 (1.22), 50257 1.98 -> 2.85, f32 32001 2.78 -> 3.08, 4097 3.74 -> 3.76;
RMSNorm bf16 32001 3.35 -> 3.66, the fused add bf16 32001 3.03 -> 3.34; but RMSNorm bf16
1025 4.06 -> 4.03, 4097 3.98 -> 3.97, 257 3.38 -> 3.03 (f32 4.04 -> 3.93), the fused add
4097 4.03 -> 4.01, layer norm 257 2.23 -> 2.32; at 8 MiB every case lost (layer norm bf16
4097 1.40 -> 1.08, RMSNorm 1025 1.83 -> 1.53), at 2 MiB more."""

COPY_LENGTH = {"layer_norm": 1024, "rms_norm": 16384, "fused_add_rms_norm": 16384}
"""The shortest rows whose weights the copies serve, by family (COPY_BYTES' figures: the
layer norm's two vectors, read beside centered squares, gain from rows of 1025; a single
weight from rows of 32001, not 4097)."""


def copies_serve(family: str, g: Geometry, m: int, n: int, itemsize: int) -> bool:
    """Whether the family's weight and bias are read from copies (weight_copies)."""
    return family in COPY_LENGTH and g.strategy in EDGE_STRATEGIES and g.edges and \
        n >= COPY_LENGTH[family] and m * n * itemsize >= COPY_BYTES


def weight_copies(b: Builder, call: RowCall, g: Geometry) -> None:
    """The call's weight and bias replaced by V copies of each (COPY_BYTES), copy c at
    element c * (P + 1) of a [V * P] buffer (P: N + V - 1 rounded up to V): the kernels
    read the copy whose body starts aligned where their row's does (Rows.vector_views);
    a stand-in for a vector the call does not have becomes one of the copies (the kernels
    bind one length to both). COPIES = P goes to the kernel."""
    given = [VECTORS[name] for name in WEIGHTS.get(call.family, ())]
    present = [key for key, flag in given if call.flags.get(flag, True)]
    itemsize = call.arrays["x"].itemsize
    if not present or not copies_serve(call.family, g, call.m, call.n, itemsize):
        return
    vec, n = g.vec, call.n
    period = -(-(n + vec - 1) // vec) * vec
    made: dict[str, Array] = {}
    for key in present:
        a = call.arrays[key]
        copies = b.temporary((vec * period,), a.dtype)
        apply(b, "cast", [In(a.view((vec, n), (0, 1)))],
              copies.view((vec, n), (period + 1, 1)), result=a.dtype, what=call.family)
        made[key] = copies
    for key, _ in given:
        call.arrays[key] = made.get(key, made[present[0]])
    call.flags["COPIES"] = period


STATS = {"softmax": 2, "rms_norm": 1, "layer_norm": 3, "fused_add_rms_norm": 1}
"""Partial statistics per chunk in "split": softmax (max, sum of exp), RMSNorm (sum of
squares), layer norm (count, mean, M2)."""


def launch(b: Builder, function: Any, g: Geometry, m: int, arrays: dict[str, Array], *,
           scalars: dict[str, Value], **constexprs: Any) -> None:
    """One kernel of programs/rows.py on `m` rows: its arguments by its roles."""
    program = programs.specialize(function, arrays, {"G": g.constexpr(), **constexprs})
    values: list[Value] = []
    for role in program.spec.roles:
        name = program.spec.params[role.param].name
        if role.kind == "scalar":
            values.append(scalars[name])
            continue
        a = arrays[name]
        values.append(b.pointer(a) if role.kind == "array" else a.shape[role.dim]
                      if role.kind == "size" else a.strides[role.dim]
                      if role.kind == "stride" else a.offset)
    b.launch(program, (g.grid(m), 1, 1), values)


@dataclass
class RowCall:
    """One call's rows, as the kernels take them: [M, N] views (x, and y, r), [N]
    vectors (w, b), eps, and the flags of the ones the call has."""

    family: str  # a key of programs.KERNELS
    arrays: dict[str, Array]
    scalars: dict[str, Value]
    flags: dict[str, Any]

    @property
    def m(self) -> int:
        return self.arrays["x"].shape[0]

    @property
    def n(self) -> int:
        return self.arrays["x"].shape[1]


def run(b: Builder, call: RowCall) -> Plan:
    """Plan the call's rows and launch its kernels (one, or the two passes of "split")."""
    rows = [a for a in call.arrays.values() if a.numel]
    read = [a for name, a in call.arrays.items() if name in ROW_INPUTS]
    weighted = call.flags.get("HAS_W", "w" in call.arrays)
    plan = plan_for(call.m, call.n, vector_of(call.n, rows), b.device,
                    itemsize=read[0].itemsize, inputs=len(read),
                    early=EARLY_PARTS.get(call.family, 0) if weighted else 0,
                    f32_ahead=call.family in F32_AHEAD,
                    scalar_warp=call.family in SCALAR_WARP,
                    wide=edge_width(call.family, read[0].itemsize,
                                    [a for a in rows if len(a.shape) == 2]),
                    stacks=STACKS.get(call.family, 0))
    g = plan.geometry
    one, first, second = programs.KERNELS[call.family]
    if g.strategy != "split":
        weight_copies(b, call, g)
        launch(b, one, g, call.m, call.arrays, scalars=call.scalars, **call.flags)
        return plan
    stats = b.temporary((call.m, STATS[call.family], g.chunks), "f32")
    given = {**call.arrays, "stats": stats}
    pass_one = {"x": given["x"], "stats": stats}
    if call.family == "fused_add_rms_norm":
        pass_one["r"] = given["r"]
        # pass 2 reads the sum from the residual and overwrites the input
        pass_two = {"x": given["r"], "w": given["w"], "stats": stats, "y": given["x"]}
    else:
        pass_two = {k: v for k, v in given.items() if k != "r"}
    launch(b, first, g, call.m, pass_one, scalars={},
           **{k: v for k, v in call.flags.items() if k == "EXP"})
    flags = {"HAS_W": True} if call.family == "fused_add_rms_norm" else call.flags
    launch(b, second, g, call.m, pass_two, scalars=call.scalars, **flags)
    return plan


# ------------------------------------------------------------------ the ops


def _softmax(b: Builder, what: str, input: Any, dim: Any, *, dtype: Any,  # noqa: A002
             out: Array | None, log: bool) -> str:
    x = _input(input, "input", what)
    result = x.dtype if dtype is None else args.dtype_of(dtype, "dtype", what, SUPPORTED)
    b.place([x] if out is None else [x, out])
    d = normalize_dim(dim, len(x.shape), what)
    if out is not None:
        _check_out(out, x.shape, result, what)
        args.check_overlap(out, [x], what)
    if result != x.dtype:  # torch casts the input first
        x = apply(b, "cast", [In(x)], b.temporary(x.shape, result), result=result, what=what)
    target = out if out is not None else b.output(x.shape, result)
    if not x.numel:
        return b.object_of(target)
    order = [*(i for i in range(len(x.shape)) if i != d), d] if x.shape else []
    lead = max(len(order) - 1, 0)
    xr = rows_of(b, _permuted(x, order) if x.shape else x.view((1, 1), (1, 1)), lead, what)
    where = target_of(b, _permuted(target, order), lead) if x.shape else \
        Target(target.view((1, 1), (1, 1)))
    flags = {"LOG": log, "EXP": SOFTMAX_EXP[xr.dtype]}
    run(b, RowCall("softmax", {"x": xr, "y": where.rows}, {}, flags))
    where.finish(b, what)
    return b.object_of(target)


def _check_out(out: Array, shape: tuple[int, ...], result: str, what: str) -> None:
    if out.shape != shape:
        raise ValueError(f"{what}: argument 'out' has shape {list(out.shape)}, the result "
                         f"{list(shape)}")
    if out.dtype != result:
        raise TypeError(f"{what}: argument 'out' is {torch_name(out.dtype)}, the result "
                        f"{torch_name(result)}")


def _eps(value: Any, x: Array, what: str) -> float:
    """eps: a number (None: torch's default for rms_norm, the dtype's machine epsilon)."""
    if value is None:
        return MACHINE_EPS[x.dtype]
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(f"{what}: argument 'eps' must be a number, got {type(value).__name__}")
    return float(value)


def _vector(b: Builder, a: Array | None, x: Array, what: str) -> Array:
    """A weight or bias as the kernels take it, [N] contiguous (a copy where it is not);
    a stand-in (x's first row) where there is none."""
    n = x.shape[1]
    if a is None:
        return x.view((n,), (1,))
    flat = as_rows(a, 0)
    if flat is None:
        flat = rows_of(b, a, 0, what)
    return flat.view((n,), (1,))


def _norm(b: Builder, what: str, input: Any, normalized_shape: Any, *,  # noqa: A002
          params: dict[str, Any], eps: float | None) -> str:
    x = _input(input, "input", what)
    k = normalized_dims(normalized_shape, x, what)
    shape = tuple(x.shape[len(x.shape) - k:])
    given = {name: _parameter(value, name, x, shape, what) for name, value in params.items()}
    b.place([x, *(a for a in given.values() if a is not None)])
    epsilon = _eps(eps, x, what)
    target = b.output(x.shape, x.dtype)
    if not x.numel:
        return b.object_of(target)
    lead = len(x.shape) - k
    xr = rows_of(b, x, lead, what)
    where = target_of(b, target, lead)
    arrays = {"x": xr, "y": where.rows}
    flags = {}
    for name, a in given.items():
        key, flag = VECTORS[name]
        arrays[key] = _vector(b, a, xr, what)
        flags[flag] = a is not None
    family = "layer_norm" if "bias" in params else "rms_norm"
    run(b, RowCall(family, arrays, {"eps": epsilon}, flags))
    where.finish(b, what)
    return b.object_of(target)


@entry.op({"input": "array", "out": "out"}, name="softmax")
def softmax(b: Builder, input: Any, dim: int = -1, *, dtype: Any = None,  # noqa: A002
            out: Array | None = None) -> str:
    """softmax(input, dim=-1, *, dtype=None, out=None) -> Tensor

    torch.softmax along `dim`: exp(x - max) / sum(exp(x - max)), in f32, rounded once
    into the result's dtype (the input's, or `dtype`: the input cast to it first)."""
    return _softmax(b, "softmax", input, dim, dtype=dtype, out=out, log=False)


@entry.op({"input": "array", "out": "out"}, name="log_softmax")
def log_softmax(b: Builder, input: Any, dim: int = -1, *, dtype: Any = None,  # noqa: A002
                out: Array | None = None) -> str:
    """log_softmax(input, dim=-1, *, dtype=None, out=None) -> Tensor

    torch.log_softmax along `dim`: (x - max) - log(sum(exp(x - max))), in f32, rounded
    once into the result's dtype."""
    return _softmax(b, "log_softmax", input, dim, dtype=dtype, out=out, log=True)


@entry.op({"input": "array", "weight": "optional"}, name="rms_norm")
def rms_norm(b: Builder, input: Any, normalized_shape: Any, weight: Any = None,  # noqa: A002
             eps: float | None = None) -> str:
    """rms_norm(input, normalized_shape, weight=None, eps=None) -> Tensor

    torch.nn.functional.rms_norm: x / sqrt(mean(x^2) + eps) * weight over the
    normalized (last) dims, in f32, rounded once; eps defaults to the dtype's epsilon."""
    return _norm(b, "rms_norm", input, normalized_shape, params={"weight": weight}, eps=eps)


@entry.op({"input": "array", "weight": "optional", "bias": "optional"}, name="layer_norm")
def layer_norm(b: Builder, input: Any, normalized_shape: Any,  # noqa: A002, PLR0917 - torch's
               weight: Any = None, bias: Any = None, eps: float = 1e-5) -> str:
    """layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05) -> Tensor

    torch.nn.functional.layer_norm: (x - mean) / sqrt(var + eps) * weight + bias over
    the normalized (last) dims, var biased, in f32, rounded once."""
    return _norm(b, "layer_norm", input, normalized_shape,
                 params={"weight": weight, "bias": bias}, eps=eps)


def _overlap_error(message: str) -> None:
    raise ValueError(message)


def _refuse_overlap(b: Builder, a: Array, other: Array, what: str) -> None:
    """ValueError when a and other share memory: now, and in every later call of the plan
    (its key holds no addresses), before anything is launched."""
    message = (f"{what}: argument '{a.name}' overlaps argument '{other.name}': both are "
               "written in place, or one is read while the other is written")
    if args.overlaps(a, other):
        raise ValueError(message)
    if not a.root or not other.root:
        return

    def bounds(x: Array) -> tuple[str, str]:
        low, high = args.span(x)
        return f"{x.root} + {x.delta + low}", f"{x.root} + {x.delta + high}"

    (a_low, a_high), (o_low, o_high) = bounds(a), bounds(other)
    raiser = b.name(_overlap_error, "_ROWS")
    b.check(f"{a_low} < {o_high} and {o_low} < {a_high}", f"{raiser}({message!r})")


def _in_place(b: Builder, a: Array, lead: int, what: str) -> Target:
    """An array a kernel updates in place: its rows, or a contiguous copy of them copied
    back after (`Target.finish`)."""
    view = as_rows(a, lead)
    if view is not None:
        return Target(view)
    copy = rows_of(b, a, lead, what)
    return Target(copy, (copy.view(a.shape, args.row_major(a.shape)), a))


@entry.op({"input": "array", "residual": "array", "weight": "array", "eps": "number"},
          name="fused_add_rms_norm")
def fused_add_rms_norm(b: Builder, input: Any, residual: Any, weight: Any,  # noqa: A002
                       eps: Any) -> str:
    """fused_add_rms_norm(input, residual, weight, eps) -> None

    vLLM's fused residual add and RMSNorm over the last dim, in place: residual becomes
    input + residual (rounded to their dtype) and input becomes rms_norm(input +
    residual) * weight; each array is read once and written once."""
    what = "fused_add_rms_norm"
    x, r = _input(input, "input", what), _input(residual, "residual", what)
    if not x.shape:
        raise ValueError(f"{what}: argument 'input' is 0-d; it needs a last dim to normalize")
    if r.shape != x.shape or r.dtype != x.dtype:
        raise ValueError(f"{what}: argument 'residual' is {torch_name(r.dtype)} of shape "
                         f"{list(r.shape)}, the input {torch_name(x.dtype)} of shape "
                         f"{list(x.shape)}: they must match")
    w = _parameter(weight, "weight", x, (x.shape[-1],), what)
    assert w is not None
    b.place([x, r, w])
    assert isinstance(eps, Scalar)
    for a, other in ((r, x), (w, x), (w, r)):
        _refuse_overlap(b, a, other, what)
    if not x.numel:
        return "None"  # nothing to write back either
    lead = len(x.shape) - 1
    xs, rs = _in_place(b, x, lead, what), _in_place(b, r, lead, what)
    run(b, RowCall("fused_add_rms_norm", {"x": xs.rows, "r": rs.rows,
                                          "w": _vector(b, w, xs.rows, what)},
                   {"eps": Num(eps.expr)}, {}))
    xs.finish(b, what)
    rs.finish(b, what)
    return _written_back(b, [x, r])


def _write_back(pairs: Sequence[tuple[Any, Any]]) -> None:
    for device_copy, original in pairs:
        original[...] = args.to_host(device_copy)


def _written_back(b: Builder, written: Sequence[Array]) -> str:
    """The result of an op that writes arrays in place and returns None: a NumPy array
    (staged through a device copy) gets the copy's values back after the launches."""
    staged = [a for a in written if a.host is not None]
    if not staged:
        return "None"
    back = b.name(_write_back, "_ROWS")
    pairs = ", ".join(f"({b.object_of(a)}, {b.name(a.host)})" for a in staged)
    return f"{back}(({pairs},))"
