"""The fused row programs (issue 12), written with tile_mlir.lang: softmax and
log_softmax, RMSNorm, layer norm and vLLM's fused add + RMSNorm over the rows of an
[M, N] view (a row stride of any size given at launch, the elements of a row
contiguous), each row read once into registers, reduced, and written once.

A row of N elements is N / V vectors of V elements (16 bytes where N, the strides and
the alignment allow). P threads hold a row (`Geometry`: the strategy the planner,
ops/rows.py, chose), each one vector of every *part*: part k is a register tile [P, V]
(layout `S[(P, V):(1@tid, 1)]`) of vectors k*P ... k*P + P - 1, read from a view of
the row with one tile.copy; the last part may be short (the copy pads it) and every
store takes the part's overlap with the row. The parts are separate tiles, so that
every op over them is straight-line code (no loop over registers for LLVM to keep in
local memory). The strategies differ in who the P threads are:

- "warp": a group of P lanes (1..32) per row, R = threads / P rows per CTA: tiles [R,
  P, V] (`S[(R, P, V):(P@tid, 1@tid, 1)]`), reductions a butterfly within the group;
- "cta": the CTA's threads, one row per CTA: reductions across its warps (shuffles,
  then the warps' partials through shared memory after one barrier);
- "cluster": the threads of a thread block cluster of C CTAs (`tl.cluster`, sm_90),
  one row per cluster: the CTAs' partials meet through mailboxes in each CTA's
  shared memory (registers.py; no cluster barrier but one at the entry); ops of one
  input over rows of 16-bit elements (and the normalizations over long rows of f32 ones)
  also prefetch into L2 the row a later cluster reads (`ahead`, tl.cluster.prefetch:
  ops/rows.py's AHEAD_BYTES, LONG_AHEAD_BYTES and F32_AHEAD);
- "split": two kernels per op for rows longer than a cluster holds (or a GPU without
  clusters): pass 1 reduces each chunk of a row (one CTA per chunk) into partial
  statistics in a temporary [M, S, chunks] f32 array (softmax: the chunk's max and sum
  of exp; RMSNorm: its sum of squares; layer norm: count, mean and M2, combined with
  Chan's formula); pass 2 (one CTA per chunk again) combines the row's partials and
  normalizes its chunk.

Every value is computed in f32 (16-bit inputs converted as they are loaded) and
rounded once into the output's type.

Layer norm over a cluster's row takes its statistics in one reduction (one round of
mailboxes): each thread's (count, mean, M2), merged as Welford's tuples (tile.reduce
kind "welford"). Measured on an H100 (bench/fused.py, against the mean and then the
centered squares, two rounds): f32 rows of 2^18 2.44 -> 2.64 TB/s, of 2^16 2.90 -> 2.94,
bf16 2.62 -> 2.64 and 2.30 -> 2.34; but under one CTA (rows of 1024, many CTAs each
waiting on its merges) bf16 3.08 -> 2.95, so there it keeps the two rounds. Softmax keeps
its two reductions everywhere: the one-round form (online softmax's (max, sum) pairs)
measured 2-5% slower on bf16 rows of 2^16 and 2^18 and within 1-3% on f32 rows.

Layer norm's w and b over a cluster's long rows (the CTA's slice read from L2 for every
row: bench/fused.py's 2^18 rows run 2.75-2.77 TB/s, 2.98 without w and b) were tried
these ways and left out, each measured on an H100 in one process beside the kernel as
built. With torch eager alone interleaved: w and b prefetched into L1 right after x's
loads (prefetch.global.L1 per thread) ran bf16 2^18 2.75 -> 2.71, f32 2^18 2.54 -> 2.38,
f32 2^16 2.94 -> 2.80; the carveout preferring L1 (0% shared) cost layer norm 10-33%
(RMSNorm unchanged). With torch.compile interleaved too, as bench/fused.py times (without
it the same f32 2^18 kernel times 2.55 rather than 2.72-2.75, and there a PTX patch
loading x L1::no_allocate seemed to gain 6%): that patch ran 2.72 -> 2.69; persistent
clusters (a loop over rows, so that a CTA keeps its slice of w and b in its SM's L1) took
128 registers a thread (40 bytes of spill at 80) and ran bf16 2^18 2.77 -> 2.0-2.16, 2^16
2.96 -> 2.13-2.54; built again on the loop's mailboxes, 8 to 32 clusters striding over
the rows: layer norm bf16 2^18 2.76 -> 1.79-2.14 (80 registers and 20 bytes of spill: 3
CTAs an SM, as the one-row kernel; 2.02-2.42 prefetching the cluster's next row into L2),
f32 2.69 -> 2.07-2.55, and RMSNorm bf16 2^18 2.90 -> 2.13-2.33, so the loop costs more
than any reuse of w and b gains; L2 eviction priorities (createpolicy: x's loads and y's
stores evict_first, w's and b's loads evict_last, each and both) left every case within
1.5% (bf16 2^18 2.77 -> 2.73-2.78, f32 2^18 2.73 -> 2.71-2.72): w and b do stay in L2;
their first parts read into registers with the row (Geometry.early) took 128 registers a
thread and ran slower (ops/rows.py's EARLY_PARTS), where RMSNorm's weight, read so, gains
up to 3%. Part of what the two vectors cost is their bytes from L2: the same kernels
given w as both w and b (each thread's second load of an address served by its SM's L1)
ran bf16 2^18 2.76 -> 2.84 TB/s, f32 2.67 -> 2.80, bf16 2^16 2.94 -> 3.00 (w alone 2.93,
2.73, 3.08; neither 3.03, 3.01, 3.08): at bf16 2^18 half of what b adds to w alone. Two
rows a cluster, each thread holding both rows' elements of the same columns (w and b read
once for the two: half their bytes), took 1.98 and 1.73 TB/s (bf16 2^18, clusters of 16
CTAs of 512 and of 1024 threads): a CTA an SM, and half as many clusters in flight.
Nor is it the apply phase's wait on w and b for want of registers to read them ahead in
(PTX patches of the kernel as built, each result bit-identical to it, beside
torch.compile in one process): the first S parts of w and of b copied into shared memory
by cp.async right after the row's loads, no register held, and read from there, ran bf16
2^18 2.755 -> 2.60 (S = 2), 2.38 (3), 2.30 (5); f32 2^18 2.70 -> 2.67, 2.65, 2.58, each
with a request for 3 CTAs an SM (108 registers without it), which alone ran 2.67: the
copies' L2 reads compete with the row's own. And the SM's CTAs do not share their
slices of w and b through L1: w's and b's loads marked L1::evict_last left every case
within 0.7% (bf16 2^18 2.768 -> 2.767, f32 2.689 -> 2.689, bf16 2^16 2.940 -> 2.938,
f32 2^16 3.015 -> 3.031), x's loads L1::no_allocate (or evict_first) besides them cost
1-2%. Nor can the SM's CTAs be made to share them by giving each CTA the slice numbered by
its SM's place among its cluster's SMs (so that CTAs of different clusters on one SM take
the same columns): the smids' exchange through shared memory needs a cluster barrier
before the row's loads, and that alone costs more than the sharing could gain (PTX
patches on an H100, one process a variant, a device copy of the row bytes beside:
softmax bf16 2^18, which reads no weight, 3.02 -> 2.81 TB/s; layer norm bf16 2^18 2.76
-> 2.48, f32 2.45 -> 2.23; RMSNorm bf16 2.95 -> 2.46)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, Protocol

import tile_mlir.lang as tl
from tile_mlir.dtypes import DTYPES
from tile_mlir.lang.kernel import KernelFunction
from tile_mlir.ops.programs.lang import LangProgram
from tile_mlir.toolchain import REGISTERS

NEG_INF = float("-inf")
FLOOR = -3.4028234663852886e38
"""The most negative f32: a chunk's max where all of it is -inf (so that the chunk's sum
of exp is 0, not exp(-inf + inf) = NaN, and the row's combined sum stays right)."""

STRATEGIES = ("warp", "cta", "cluster", "split")
COMBINE = {"max": "maximum", "min": "minimum", "sum": "add"}
"""The elementwise op that folds two parts of a row for each reduction kind used."""
IDENTITY = {"max": NEG_INF, "min": float("inf"), "sum": 0.0}
"""What pads a part past the row for each reduction kind (reduce_rows_held)."""


@dataclass(frozen=True)
class Geometry:
    """How rows map onto threads: P threads (`lanes`) hold a row, one vector of `vec`
    elements of each part; `rows` rows per CTA (strategy "warp"), `ctas` CTAs per row
    (a cluster), `parts` parts per chunk and `chunks` chunks per row (strategy
    "split"; one chunk, the whole row, otherwise); `ahead`: the row that many rows on
    is prefetched into L2 as a row is loaded (0: none; ops/rows.py's AHEAD_BYTES,
    LONG_AHEAD_BYTES and F32_AHEAD);
    `early`: parts of the weight (and bias) read into registers right after the row,
    before the reductions (0: each read where the apply phase uses it); `edges`: a row
    (one a CTA or cluster) is read as its `vec`-aligned whole vectors, the parts, and the
    elements before and after them, two parts more (the head and the tail: Rows), so that
    a row that starts unaligned (of odd length, at an odd offset) keeps 16-byte accesses;
    `stack`: rows a CTA of strategy "cta" holds one after another (each with the CTA's
    threads, each read with its own edges), every row's loads issued before the first
    row's reductions, so that a CTA of a short row keeps `stack` rows in flight (rows past
    the last: the last again, its values written twice)."""

    strategy: str
    vec: int
    lanes: int
    rows: int = 1
    ctas: int = 1
    parts: int = 0  # per chunk ("split"); 0: as many as the row needs
    chunks: int = 1
    ahead: int = 0
    early: int = 0
    edges: bool = False
    stack: int = 1

    @staticmethod
    def of(value: Any) -> Geometry:
        """The Geometry of a kernel's constexpr G (a tuple: constexprs are plain values)."""
        return value if isinstance(value, Geometry) else Geometry(*value)

    def constexpr(self) -> tuple[Any, ...]:
        return (self.strategy, self.vec, self.lanes, self.rows, self.ctas, self.parts,
                self.chunks, self.ahead, self.early, self.edges, self.stack)

    @property
    def threads(self) -> int:
        """Threads per CTA."""
        return self.lanes * self.rows // self.ctas

    def row_parts(self, n: int) -> int:
        """Parts per chunk of a row of n elements (never one past the row's end), the
        head and the tail of `edges` not counted."""
        need = -(-(n // self.vec) // self.lanes)
        return min(self.parts, need) if self.parts else need

    def tiles(self, n: int) -> int:
        """Register tiles a thread holds of a row of n elements: its parts, and the head
        and the tail of `edges`."""
        return self.row_parts(n) + (2 if self.edges else 0)

    def grid(self, m: int) -> int:
        """CTAs for m rows."""
        if self.strategy == "warp":
            return -(-m // self.rows)
        return -(-m // self.stack) * self.ctas * self.chunks


def _threads(constexprs: dict[str, Any]) -> int:
    return Geometry.of(constexprs["G"]).threads


def _cluster(constexprs: dict[str, Any]) -> int | None:
    g = Geometry.of(constexprs["G"])
    return g.ctas if g.ctas > 1 else None


CLUSTER_REGISTERS = 80
"""Registers a thread of a cluster's row kernel is asked to make do with (its 64 values
of the row, ops/rows.py's CLUSTER_HELD, and 16 more), through tl.kernel's occupancy: the
CTAs of that many registers a thread an SM holds (3 of 256 threads, 6 of 128). ptxas
left alone gave some of these kernels 96-112 registers, and so an SM one CTA fewer.
Measured on an H100 (rows of 2^16 and 2^18, bench/fused.py's sizes, each op with and
without the request in one run, every request honoured): softmax f32 2^18 2.53 -> 2.70
TB/s, RMSNorm f32 2^18 2.68 -> 2.72, layer norm bf16 2^18 1.96 -> 2.28 (with a spill of a
few bytes), the rest within 1%; layer norm f32 spilled tens of bytes and ran 6-10% slower.
The toolchain drops a request that spills more than the kernel allows (none, but for
LAYER_SPILL; or lowers it, below), so with CUDA 13.0's ptxas layer norm f32 keeps its
95-96 registers (bench/results/fused: softmax f32 2^18 2.52 -> 2.67, the rest
unchanged); where a
kernel's request spills, the toolchain asks for fewer CTAs (toolchain.settle), so that
log_softmax bf16 over rows of 32001 takes 5 CTAs of 128 threads (96 registers), not
4."""
LAYER_SPILL = 32
"""Bytes of spill stores layer norm's cluster kernel over rows of 16-bit vectors may pay
for its CLUSTER_REGISTERS (tl.kernel's occupancy=(ctas, bytes)). Measured on an H100 with
CUDA 13.0's ptxas, bf16 at bench/fused.py's sizes, the request dropped against kept in
one run: rows of 2^16 spill 16 bytes (95 registers free: 5 CTAs of 128 threads an SM, 6
capped) and ran 2.49 -> 2.60 TB/s, rows of 2^18 24 bytes (89 free: 2 CTAs of 256, 3
capped) 1.95 -> 2.28. Not a rule for every kernel: layer norm f32 spills 60-64 bytes and
ran 8-11% slower kept; RMSNorm f32 and the fused add + RMSNorm bf16 spill 16 bytes and
ran 2-4% slower kept (their requests give way: toolchain.settle)."""


def _occupancy(constexprs: dict[str, Any]) -> int | None:
    g = Geometry.of(constexprs["G"])
    if g.strategy != "cluster":
        return None
    ctas = REGISTERS // (g.threads * CLUSTER_REGISTERS)
    return ctas if ctas > 1 else None


def _layer_occupancy(constexprs: dict[str, Any]) -> int | tuple[int, int] | None:
    """Layer norm's request: with LAYER_SPILL bytes allowed over 16-bit vectors."""
    ctas = _occupancy(constexprs)
    return (ctas, LAYER_SPILL) if ctas and Geometry.of(constexprs["G"]).vec == 8 else ctas


# ------------------------------------------------------------------ row tiles


class Rows:
    """The rows (or the chunk of a row) one CTA or cluster holds, as register tiles:
    made while a kernel is built (the body API), one per part."""

    def __init__(self, g: Geometry, n: int, index: int = 0, m: Any = None):
        """The rows of geometry g; with a `stack`, its row `index` of the CTA's (of `m`
        rows: stacked)."""
        self.g, self.n = g, n
        self.scope = tl.cluster if g.ctas > 1 else tl.cta
        self.nv = n // g.vec  # vectors per row (at most, with edges)
        self.parts = g.tiles(n)
        block = tl.block_id()
        self.row: Any = block  # an Index, or a slice of rows (strategy "warp")
        self.first: Any = 0  # the chunk's first vector in the row
        self.chunk: Any = 0
        if g.rows > 1:
            self.row = slice(block * g.rows, block * g.rows + g.rows)  # clamped to M
        elif g.ctas * g.chunks > 1:
            self.row = block // (g.ctas * g.chunks)
        elif g.stack > 1:
            assert g.strategy == "cta" and m is not None, "a stack of a CTA's rows: stacked()"
            self.row = tl.minimum(block * g.stack + index, m - 1)
        if g.chunks > 1:
            self.chunk = block % g.chunks
            self.first = self.chunk * (self.parts * g.lanes)
        self._views: dict[int, tuple[tl.Tensor, list[tl.Tensor]]] = {}
        self._edged: tl.Tensor | None = None  # with edges: the row a weight lines up with

    # -------------------------------------------------------------- layouts

    @property
    def multi(self) -> bool:
        return self.g.rows > 1

    @cached_property
    def shape(self) -> tuple[int, ...]:
        g = self.g
        return (g.rows, g.lanes, g.vec) if self.multi else (g.lanes, g.vec)

    @cached_property
    def layout(self) -> str:
        g = self.g
        if self.multi:
            return f"S[({g.rows}, {g.lanes}, {g.vec}):({g.lanes}@tid, 1@tid, 1)]"
        return f"S[({g.lanes}, {g.vec}):(1@tid, 1)]"

    @cached_property
    def held(self) -> str:
        """A value per row, held by every thread of the row."""
        g = self.g
        if self.multi:
            return f"S[({g.rows}, 1, 1):({g.lanes}@tid, 1, 1)], R[{g.lanes}:1@tid]"
        return f"S[(1, 1)], R[{g.lanes}:1@tid]"

    @property
    def axes(self) -> tuple[int, ...] | None:
        return (1, 2) if self.multi else None

    def tile(self, dtype: Any = tl.f32) -> tl.Tensor:
        return tl.alloc_reg(self.shape, dtype, self.layout)

    def tiles(self, dtype: Any = tl.f32) -> list[tl.Tensor]:
        return [self.tile(dtype) for _ in range(self.parts)]

    def scalar(self) -> tl.Tensor:
        ones = (self.g.rows, 1, 1) if self.multi else (1, 1)
        return tl.alloc_reg(ones, tl.f32, self.held)

    def own(self, dtype: Any = tl.f32) -> tl.Tensor:
        """A value per thread of a row held by one CTA or cluster (the thread's statistics
        of the elements it holds)."""
        assert not self.multi
        return tl.alloc_reg((self.g.lanes, 1), dtype, f"S[({self.g.lanes}, 1):(1@tid, 1)]")

    # -------------------------------------------------------------- views

    def views(self, t: tl.Tensor) -> list[tl.Tensor]:
        """The part views of this CTA's rows of an [M, N] tensor: made once per tensor, so
        that reading a part and writing it back touch the very same view (tile-barriers
        then knows the same threads touch each element: no barrier between)."""
        made = self._views.get(id(t))
        if made is None:
            made = self._views[id(t)] = (t, self._make_views(t))
        return made[1]

    def _make_views(self, t: tl.Tensor) -> list[tl.Tensor]:
        g = self.g
        if g.edges:
            assert not self.multi and isinstance(self.first, int), "a whole row a CTA"
            row = t[self.row]
            if self._edged is None:
                self._edged = row
            head, body, tail = row.aligned(g.vec)
            return [*self._parts(body), head, tail]
        if self.multi:
            rows = t[self.row]
            whole = rows.reshape((rows.shape[0], self.nv, g.vec))
            return [whole[:, k * g.lanes:(k + 1) * g.lanes] for k in range(self.parts)]
        return self._parts(t[self.row].reshape((self.nv, g.vec)))

    def _parts(self, whole: tl.Tensor) -> list[tl.Tensor]:
        """A row's [N / V, V] view cut into parts: a chunk's of it (static when the
        chunks divide the row, so that the parts are static subviews of one view)."""
        g = self.g
        span = g.row_parts(self.n) * g.lanes
        if isinstance(self.first, int):
            chunk = whole
        elif self.nv % span == 0:
            chunk = whole[tl.ds(self.first, span)]
        else:
            chunk = whole[self.first:self.first + span]  # the last chunk is short
        return [chunk[k * g.lanes:(k + 1) * g.lanes] for k in range(g.row_parts(self.n))]

    def vector_views(self, w: tl.Tensor, copies: int = 0) -> list[tl.Tensor]:
        """The part views of an [N] tensor (a weight), broadcast over the rows; with edges,
        split as the row (the first whose views were made) is, element for element: from
        the one of w's V copies (`copies`: their period P, ops/rows.py's weight_copies)
        whose body starts aligned where the row's does, or from w itself (0: its body's
        vectors as aligned as the row's offset lets them be)."""
        g = self.g
        if g.edges:
            assert self._edged is not None, "a weight's parts follow a row's: read it first"
            head, body, tail = w.aligned_copy_as(g.vec, self._edged, copies) if copies \
                else w.aligned_as(g.vec, self._edged)
            return [*self._parts(body), head, tail]
        assert not copies, "copies of a weight serve rows with edges"
        if not self.multi:
            return self._parts(w.reshape((self.nv, g.vec)))
        whole = w.reshape((1, self.nv, g.vec))  # one row, broadcast over the CTA's rows
        return [whole[:, k * g.lanes:(k + 1) * g.lanes] for k in range(self.parts)]

    def weights(self, w: tl.Tensor | None, copies: int = 0) -> list[tl.Tensor | None]:
        """The parts of an [N] vector (a weight or bias; or its `copies`, vector_views) as
        the apply phase takes them: views of it, but for the geometry's first `early`
        parts, read into registers now (a tile each, padded past the row); Nones where
        there is no vector."""
        if w is None:
            return [None] * self.parts
        assert not (self.g.early and self.multi), "early parts: a row per CTA or cluster"
        views = self.vector_views(w, copies)
        early = min(self.g.early, self.parts)
        held = [self.tile(w.dtype) for _ in range(early)]
        for tile, view in zip(held, views, strict=False):
            self.scope.copy(tile, view, padding=0.0)
        return [*held, *views[early:]]

    def load(self, t: tl.Tensor, padding: float) -> list[tl.Tensor]:
        """The CTA's parts of t in registers (in t's dtype), padded past the row; then,
        with the geometry's `ahead`, the row that many rows on prefetched into L2 (the
        scope's threads sharing its lines)."""
        tiles = self.tiles(t.dtype)
        for tile, view in zip(tiles, self.views(t), strict=True):
            self.scope.copy(tile, view, padding=padding)
        if self.g.ahead:
            assert not self.multi and isinstance(self.first, int), "a whole row per cluster"
            # past the last row, the last row again (its own cluster reads it anyway): a
            # row of static length, so that each thread's prefetches are straight-line
            later = tl.minimum(self.row + self.g.ahead, t.shape[0] - 1)
            self.scope.prefetch(t[later])
        return tiles

    def surely_whole(self, k: int) -> bool:
        """With edges: whether part k of the body is whole for every alignment of the row
        (its vectors, k * lanes to (k + 1) * lanes, before the fewest the body can have:
        a head of vec - 1 elements)."""
        g = self.g
        fewest = max(self.n - (g.vec - 1), 0) // g.vec
        return k < g.row_parts(self.n) and (k + 1) * g.lanes <= fewest

    def valid(self, k: int) -> Any:
        """Elements of part k that lie in the row (an int, or an i64 scalar for a chunk)."""
        g = self.g
        assert not g.edges, "with edges a part's elements in the row are known at run time"
        start = k * g.lanes * g.vec
        if not isinstance(self.first, int):
            left = self.n - (self.first * g.vec + start)
            return tl.maximum(tl.minimum(left, g.lanes * g.vec), 0).to(tl.i64)
        return max(min(self.n - start, g.lanes * g.vec), 0)

    # -------------------------------------------------------------- reductions

    def fold(self, op: str, tiles: Sequence[tl.Tensor]) -> tl.Tensor:
        """The parts combined elementwise (`op`: maximum, add) into one f32 tile."""
        if len(tiles) == 1:
            return tiles[0]
        acc = self.tile()
        self.scope.elementwise(op, acc, tiles[0], tiles[1])
        for t in tiles[2:]:
            self.scope.elementwise(op, acc, acc, t)
        return acc

    def reduce(self, kind: str, tiles: Sequence[tl.Tensor]) -> tl.Tensor:
        """A row's max or sum over its parts: held by every thread of the row."""
        return self._reduce(kind, tiles, self.scalar(), self.axes)

    def own_reduce(self, kind: str, tiles: Sequence[tl.Tensor]) -> tl.Tensor:
        """Each thread's max or sum over the elements it holds (registers only: no
        thread meets another)."""
        return self._reduce(kind, tiles, self.own(), -1)

    def _reduce(self, kind: str, tiles: Sequence[tl.Tensor], dst: tl.Tensor,
                axes: tuple[int, ...] | int | None) -> tl.Tensor:
        """The parts folded elementwise, then reduced into dst over `axes`."""
        self.scope.reduce(kind, dst, self.fold(COMBINE[kind], tiles), axes=axes)
        return dst

    def sum_of_squares(self, tiles: Sequence[tl.Tensor]) -> tl.Tensor:
        acc = self.tile()
        self.scope.mul(acc, tiles[0], tiles[0])
        for t in tiles[1:]:
            self.scope.fma(acc, t, t, acc)
        dst = self.scalar()
        self.scope.sum(dst, acc, axes=self.axes)
        return dst


# ------------------------------------------------------------------ the op bodies


def softmax_apply(rows: Rows, raw: list[tl.Tensor], m: tl.Tensor, s: tl.Tensor,
                  y: tl.Tensor, *, log: bool, exp: str,
                  exps: list[tl.Tensor] | None = None) -> None:
    """y = exp(x - m) / s, or (x - m) - log(s) (torch's order of operations); `exp` the
    elementwise op that takes e^x (ops/rows.py's SOFTMAX_EXP)."""
    scope = rows.scope
    if log:
        scope.log(s, s)
    else:
        scope.reciprocal(s, s)
    for k, (x, out) in enumerate(zip(raw, rows.views(y), strict=True)):
        t = exps[k] if exps is not None else rows.tile()
        if log:
            scope.sub(t, x, m)
            scope.sub(out, t, s)
            continue
        if exps is None:
            scope.sub(t, x, m)
            scope.elementwise(exp, t, t)
        scope.mul(out, t, s)


def stacked(g: Geometry, x: tl.Tensor) -> list[Rows]:
    """The rows a CTA or cluster of g holds of x [M, N]: one, or its `stack` of them."""
    if g.stack == 1:
        return [Rows(g, x.shape[1])]
    return [Rows(g, x.shape[1], index, x.shape[0]) for index in range(g.stack)]


def loaded(each: Sequence[Rows], x: tl.Tensor, padding: float) -> list[list[tl.Tensor]]:
    """Each of the rows' parts of x in registers, every row's loads before any reduction."""
    return [rows.load(x, padding) for rows in each]


def softmax_rows_body(rows: Rows, raw: list[tl.Tensor], x: tl.Tensor, y: tl.Tensor, *,
                      log: bool, exp: str) -> None:
    m = rows.reduce("max", raw)
    # softmax keeps exp(x - m) (in place for f32); log_softmax only sums it
    keep = not log
    exps = [t if keep and x.dtype == "f32" else rows.tile() for t in raw]
    for x_k, e in zip(raw, exps, strict=True):
        rows.scope.sub(e, x_k, m)
        rows.scope.elementwise(exp, e, e)
    s = rows.reduce("sum", exps)
    softmax_apply(rows, raw, m, s, y, log=log, exp=exp, exps=exps if keep else None)


Parts = list[tl.Tensor | None]
"""A vector's parts as Rows.weights gives them (views or register tiles; Nones: none)."""


def rms_apply(rows: Rows, raw: list[tl.Tensor], ss: tl.Tensor, *, eps: Any,
              w: Parts, y: tl.Tensor) -> None:
    """y = x * rsqrt(ss / N + eps) (* w), rounded once."""
    scope = rows.scope
    scope.fma(ss, ss, 1.0 / rows.n, eps)
    scope.rsqrt(ss, ss)
    for x, out, wk in zip(raw, rows.views(y), w, strict=True):
        if wk is None:
            scope.mul(out, x, ss)
            continue
        t = rows.tile()
        scope.mul(t, x, ss)
        if rows.g.edges:  # the weight's part may not be aligned as the output's is: its
            scope.mul(t, t, wk)  # narrower loads apart from the output's 16-byte stores
            scope.elementwise("copy", out, t)
            continue
        scope.mul(out, t, wk)


def layer_apply(rows: Rows, raw: list[tl.Tensor], mean: tl.Tensor, var: tl.Tensor, *,
                eps: Any, wb: tuple[Parts, Parts], y: tl.Tensor) -> None:
    """y = (x - mean) * rsqrt(var + eps) (* w) (+ b), rounded once."""
    scope = rows.scope
    scope.add(var, var, eps)
    scope.rsqrt(var, var)
    weights, biases = wb
    for x, out, wk, bk in zip(raw, rows.views(y), weights, biases, strict=True):
        t = rows.tile()
        scope.sub(t, x, mean)
        last = wk is None and bk is None
        scope.mul(out if last else t, t, var)
        if rows.g.edges and not last:  # w's and b's parts may not be aligned as y's
            if wk is not None:
                scope.mul(t, t, wk)
            if bk is not None:
                scope.add(t, t, bk)
            scope.elementwise("copy", out, t)
            continue
        if wk is not None:
            scope.mul(out if bk is None else t, t, wk)
        if bk is not None:
            scope.add(out, t, bk)


def squared_deviations(rows: Rows, raw: list[tl.Tensor], x: tl.Tensor, mean: tl.Tensor
                       ) -> tl.Tensor:
    """Each thread's (x - mean)^2 summed over the parts, over the row's elements only:
    past the row, a part's padding (0) would add mean^2 each. A tile of one row per CTA
    is zeroed there by tail_fill (its positions are the row's; with edges, by the part's
    vectors in the body at run time, where it is not whole at every alignment); tiles of
    several rows take x - mean from memory into zeros (the part's overlap, just read: the
    L1 cache has it). With edges the parts not surely whole were read again from L1
    before (layer norm bf16 rows of 1025 then took 40 registers a thread, 32 now; 4097
    96, now 80). Measured on an H200 (bench/rows_ab.py at 128 MiB, TB/s, read again ->
    zeroed in registers): bf16 rows of 257 2.25 -> 2.34, 1025 3.40 -> 3.39, 4097 3.25 ->
    3.32, 8191 2.99 -> 3.01, 32001 2.91 -> 2.93; f32 257 3.62 -> 3.75, 4097 3.81 -> 3.82
    (torch.compile 2.09, 0.88, 1.15, 1.68, 1.22; 3.58, 2.40)."""
    scope = rows.scope
    views = rows.views(x)
    acc = rows.tile()
    if rows.g.edges:  # the body's parts (the head and tail: edge_squares)
        raw = raw[:rows.g.row_parts(rows.n)]
        if not raw:  # a row shorter than a vector: all head and tail
            scope.fill(acc, 0.0)
    for k, x_k in enumerate(raw):
        d = rows.tile()
        limit = None if rows.g.edges else rows.valid(k)
        if rows.g.edges:
            scope.sub(d, x_k, mean)
            if not rows.surely_whole(k):  # its vectors past the body's (dynamic) end
                valid = tl.maximum(views[k].shape[0], 0) * rows.g.vec
                scope.tail_fill(d, d, 0.0, valid.to(tl.i64), 0)
        elif isinstance(limit, int) and limit == rows.g.lanes * rows.g.vec:
            scope.sub(d, x_k, mean)
        elif not rows.multi:
            scope.sub(d, x_k, mean)
            scope.tail_fill(d, d, 0.0, limit, 0)
        else:
            scope.fill(d, 0.0)
            scope.sub(d, views[k], mean)
        if k == 0:
            scope.mul(acc, d, d)
        else:
            scope.fma(acc, d, d, acc)
    return acc


def edge_squares(rows: Rows, x: tl.Tensor, mean: tl.Tensor) -> tl.Tensor:
    """Each thread's (x - mean)^2 of the row's head and tail elements (with edges: a
    column each, an element a thread): read again from memory into a value a thread
    (Rows.own), past the piece's length back to 0."""
    scope = rows.scope
    total = rows.own()
    scope.fill(total, 0.0)
    for piece in rows.views(x)[-2:]:
        value, d = rows.own(x.dtype), rows.own()
        scope.copy(value, piece, padding=0.0)
        scope.sub(d, value, mean)
        scope.tail_fill(d, d, 0.0, tl.maximum(piece.shape[0], 0).to(tl.i64), 0)
        scope.fma(total, d, d, total)
    return total


def centered_squares(rows: Rows, raw: list[tl.Tensor], x: tl.Tensor, mean: tl.Tensor
                     ) -> tl.Tensor:
    """The row's sum of (x - mean)^2 (squared_deviations, across its threads; with edges,
    edge_squares too)."""
    dst = rows.scalar()
    squares = squared_deviations(rows, raw, x, mean)
    if rows.g.edges:
        own = rows.own_reduce("sum", [squares])
        rows.scope.add(own, own, edge_squares(rows, x, mean))
        rows.scope.sum(dst, own, axes=0)
        return dst
    rows.scope.sum(dst, squares, axes=rows.axes)
    return dst


def layer_stats_of(rows: Rows, raw: list[tl.Tensor], x: tl.Tensor, count: Any
                   ) -> tuple[tl.Tensor, tl.Tensor]:
    """(mean, M2) of the elements held: count of them (an int or an f32 scalar)."""
    mean = rows.reduce("sum", raw)
    rows.scope.mul(mean, mean, 1.0 / count)
    return mean, centered_squares(rows, raw, x, mean)


def welford_stats_of(rows: Rows, raw: list[tl.Tensor], x: tl.Tensor
                     ) -> tuple[tl.Tensor, tl.Tensor]:
    """The row's mean and M2 (the sum of squared deviations from it) in one reduction,
    for a row held whole by one CTA or cluster: each thread takes the count, mean and
    M2 of the elements it holds (two passes over its registers; a part's elements past
    the row's end zeroed by tail_fill), and the threads' triples meet as Welford's
    (Chan's merge)."""
    scope, g = rows.scope, rows.g
    full = g.lanes * g.vec
    limits = [rows.valid(k) for k in range(rows.parts)]
    whole = g.vec * sum(limit == full for limit in limits)  # in the thread's whole parts
    count = rows.own()
    scope.fill(count, float(whole))
    for limit in limits:
        if limit == full:
            continue
        ones = rows.tile()
        scope.fill(ones, 1.0)
        scope.tail_fill(ones, ones, 0.0, limit, 0)
        scope.add(count, count, rows.own_reduce("sum", [ones]))
    mean = rows.own_reduce("sum", raw)
    if whole == g.vec * len(limits) and whole & (whole - 1) == 0:  # every part whole
        scope.mul(mean, mean, 1.0 / whole)  # exact: a power of two, and no division
    else:
        held = rows.own()
        scope.maximum(held, count, 1.0)  # a thread past the row's end: 0 / 1
        scope.div(mean, mean, held)
    m2 = rows.own_reduce("sum", [squared_deviations(rows, raw, x, mean)])
    row_mean, row_m2 = rows.own(), rows.own()
    scope.welford((count, row_mean, row_m2), (count, mean, m2), axes=0)
    return row_mean, row_m2


Pair = tuple[list[tl.Tensor], list[tl.Tensor]]
"""A row's parts of x and of r in registers (the fused add's operands)."""


def load_pair(rows: Rows, x: tl.Tensor, r: tl.Tensor) -> Pair:
    """The row's parts of x and of r in registers (add_residual's operands)."""
    return rows.load(x, 0.0), rows.load(r, 0.0)


def add_residual(rows: Rows, x: tl.Tensor, r: tl.Tensor, pair: Pair | None = None
                 ) -> list[tl.Tensor]:
    """s = x + r rounded to their dtype, written into r (vLLM's residual); s's parts. The
    row's parts of x and r loaded before (`pair`: load_pair's), or now."""
    xs, rs = pair or load_pair(rows, x, r)
    total = rows.tiles(x.dtype)
    for a, b, s in zip(xs, rs, total, strict=True):
        rows.scope.add(s, a, b)
    for s, view in zip(total, rows.views(r), strict=True):
        rows.scope.copy(view, s)
    return total


# ------------------------------------------------------------------ two passes


class Partials:
    """A row's chunk statistics in pass 2 of "split": stats[row, i, :] (one value per
    chunk) as register tiles [P, 1] over the CTA's threads, padded past the chunks."""

    def __init__(self, rows: Rows, stats: tl.Tensor):
        self.rows, self.stats = rows, stats
        self.chunks = rows.g.chunks
        self.lanes = rows.g.lanes
        self.parts = -(-self.chunks // self.lanes)
        self.layout = f"S[({self.lanes}, 1):(1@tid, 1)]"

    def load(self, i: int, padding: float) -> list[tl.Tensor]:
        column = self.stats[self.rows.row, i].reshape((self.chunks, 1))
        tiles = []
        for k in range(self.parts):
            tile = tl.alloc_reg((self.lanes, 1), tl.f32, self.layout)
            self.rows.scope.copy(tile, column[k * self.lanes:(k + 1) * self.lanes],
                                 padding=padding)
            tiles.append(tile)
        return tiles

    def tile(self) -> tl.Tensor:
        return tl.alloc_reg((self.lanes, 1), tl.f32, self.layout)

    def total(self, kind: str, tiles: Sequence[tl.Tensor]) -> tl.Tensor:
        dst = self.rows.scalar()
        acc = tiles[0]
        if len(tiles) > 1:
            acc = self.tile()
            self.rows.scope.elementwise(COMBINE[kind], acc, tiles[0], tiles[1])
            for t in tiles[2:]:
                self.rows.scope.elementwise(COMBINE[kind], acc, acc, t)
        self.rows.scope.reduce(kind, dst, acc)
        return dst


def put(rows: Rows, stats: tl.Tensor, values: Sequence[tl.Tensor]) -> None:
    """Pass 1's statistics of this chunk into stats[row, i, chunk] (one writer each)."""
    for i, value in enumerate(values):
        rows.scope.copy(stats[tl.ds(rows.row, 1), i, tl.ds(rows.chunk, 1)], value)


def softmax_totals(p: Partials, exp: str) -> tuple[tl.Tensor, tl.Tensor]:
    """The row's max M and sum of exp(x - M), from the chunks' (m, s)."""
    ms, ss = p.load(0, NEG_INF), p.load(1, 0.0)
    top = p.total("max", ms)
    for m, s in zip(ms, ss, strict=True):
        p.rows.scope.sub(m, m, top)
        p.rows.scope.elementwise(exp, m, m)
        p.rows.scope.mul(m, m, s)
    return top, p.total("sum", ms)


def layer_totals(p: Partials, n: int) -> tuple[tl.Tensor, tl.Tensor]:
    """The row's mean and variance from the chunks' (count, mean, M2) (Chan et al.)."""
    scope = p.rows.scope
    counts, means, m2s = p.load(0, 0.0), p.load(1, 0.0), p.load(2, 0.0)
    weighted = [p.tile() for _ in counts]
    for w, c, m in zip(weighted, counts, means, strict=True):
        scope.mul(w, c, m)
    mean = p.total("sum", weighted)
    scope.mul(mean, mean, 1.0 / n)
    for c, m, m2 in zip(counts, means, m2s, strict=True):
        scope.sub(m, m, mean)
        scope.mul(c, c, m)
        scope.fma(m2, c, m, m2)  # M2_k + n_k (mean_k - mean)^2
    var = p.total("sum", m2s)
    scope.mul(var, var, 1.0 / n)
    return mean, var


def chunk_count(rows: Rows) -> Any:
    """The elements of this chunk of the row (the last one may be short), as f32."""
    g = rows.g
    size = rows.parts * g.lanes * g.vec
    if not isinstance(rows.first, int):
        left = rows.n - rows.first * g.vec
        return tl.minimum(left, size).to(tl.f32)
    return min(rows.n, size)


# ------------------------------------------------------------------ kernels

Row = Annotated[tl.Tensor, "D", ("M", "N")]
Vector = Annotated[tl.Tensor, "D", ("N",)]
Weight = Annotated[tl.Tensor, "D", ("K",)]
"""A weight or bias of the one-kernel strategies: [N], or (COPIES = P) V copies of it at
every alignment, [V * P] (Rows.vector_views)."""
Stats = Annotated[tl.Tensor, "f32", ("M", "S", "CH")]


@tl.kernel(threads=_threads, cluster=_cluster, occupancy=_occupancy, static=("N",))
def softmax_rows(x: Row, y: Row, *, G: tl.constexpr, LOG: tl.constexpr = False,
                 EXP: tl.constexpr = "exp") -> None:
    each = stacked(Geometry.of(G), x)
    for rows, raw in zip(each, loaded(each, x, NEG_INF), strict=True):
        softmax_rows_body(rows, raw, x, y, log=LOG, exp=EXP)


@tl.kernel(threads=_threads, cluster=_cluster, occupancy=_occupancy, static=("N", "K"))
def rms_norm_rows(x: Row, w: Weight, y: Row, eps: tl.f32, *, G: tl.constexpr,
                  HAS_W: tl.constexpr = True, COPIES: tl.constexpr = 0) -> None:
    each = stacked(Geometry.of(G), x)
    for rows, raw in zip(each, loaded(each, x, 0.0), strict=True):
        weights = rows.weights(w if HAS_W else None, COPIES)  # split as this row is
        rms_apply(rows, raw, rows.sum_of_squares(raw), eps=eps, w=weights, y=y)


@tl.kernel(threads=_threads, cluster=_cluster, occupancy=_layer_occupancy,
           static=("N", "K"))
def layer_norm_rows(x: Row, w: Weight, b: Weight, y: Row, eps: tl.f32, *, G: tl.constexpr,
                    HAS_W: tl.constexpr = True, HAS_B: tl.constexpr = True,
                    COPIES: tl.constexpr = 0) -> None:
    each = stacked(Geometry.of(G), x)
    for rows, raw in zip(each, loaded(each, x, 0.0), strict=True):
        wb = (rows.weights(w if HAS_W else None, COPIES),
              rows.weights(b if HAS_B else None, COPIES))
        # a cluster's row: one mailbox round (the module's docstring); else the mean,
        # then the centered squares (shorter merges: bench/fused.py's rows of 1024 under
        # a CTA ran 3.08 -> 2.95 TB/s with Welford's) (with edges too: Welford's counts
        # would need each part's elements in the row)
        mean, var = welford_stats_of(rows, raw, x) \
            if rows.g.ctas > 1 and not rows.g.edges else layer_stats_of(rows, raw, x, rows.n)
        rows.scope.mul(var, var, 1.0 / rows.n)
        layer_apply(rows, raw, mean, var, eps=eps, wb=wb, y=y)


@tl.kernel(threads=_threads, cluster=_cluster, occupancy=_occupancy, static=("N", "K"))
def add_rms_norm_rows(x: Row, r: Row, w: Weight, eps: tl.f32, *, G: tl.constexpr,
                      COPIES: tl.constexpr = 0) -> None:
    each = stacked(Geometry.of(G), x)
    # every row's x and r loaded before any row's r is written: a stack's rows past M
    # repeat the last row, each copy of which must read it as it was (one thread loads
    # and stores each element, in this order)
    pairs = [load_pair(rows, x, r) for rows in each]
    for rows, pair in zip(each, pairs, strict=True):
        total = add_residual(rows, x, r, pair)
        weights = rows.weights(w, COPIES)
        rms_apply(rows, total, rows.sum_of_squares(total), eps=eps, w=weights, y=x)


@tl.kernel(threads=_threads, cluster=_cluster, occupancy=_occupancy,
           static=("N", "S", "CH"))
def softmax_stats(x: Row, stats: Stats, *, G: tl.constexpr, EXP: tl.constexpr = "exp"
                  ) -> None:
    rows = Rows(Geometry.of(G), x.shape[1])
    raw = rows.load(x, NEG_INF)
    m = rows.reduce("max", raw)
    rows.scope.maximum(m, m, FLOOR)
    exps = [rows.tile() for _ in raw]
    for x_k, e in zip(raw, exps, strict=True):
        rows.scope.sub(e, x_k, m)
        rows.scope.elementwise(EXP, e, e)
    put(rows, stats, [m, rows.reduce("sum", exps)])


@tl.kernel(threads=_threads, cluster=_cluster, occupancy=_occupancy,
           static=("N", "S", "CH"))
def softmax_split(x: Row, stats: Stats, y: Row, *, G: tl.constexpr,
                  LOG: tl.constexpr = False, EXP: tl.constexpr = "exp") -> None:
    rows = Rows(Geometry.of(G), x.shape[1])
    m, s = softmax_totals(Partials(rows, stats), EXP)
    softmax_apply(rows, rows.load(x, NEG_INF), m, s, y, log=LOG, exp=EXP)


@tl.kernel(threads=_threads, cluster=_cluster, occupancy=_occupancy,
           static=("N", "S", "CH"))
def rms_stats(x: Row, stats: Stats, *, G: tl.constexpr) -> None:
    rows = Rows(Geometry.of(G), x.shape[1])
    put(rows, stats, [rows.sum_of_squares(rows.load(x, 0.0))])


@tl.kernel(threads=_threads, cluster=_cluster, occupancy=_occupancy,
           static=("N", "S", "CH"))
def add_rms_stats(x: Row, r: Row, stats: Stats, *, G: tl.constexpr) -> None:
    rows = Rows(Geometry.of(G), x.shape[1])
    put(rows, stats, [rows.sum_of_squares(add_residual(rows, x, r))])


@tl.kernel(threads=_threads, cluster=_cluster, occupancy=_occupancy,
           static=("N", "S", "CH"))
def rms_split(x: Row, w: Vector, stats: Stats, y: Row, eps: tl.f32, *, G: tl.constexpr,
              HAS_W: tl.constexpr = True) -> None:
    """Pass 2 of RMSNorm (x the input) and of the fused add (x the residual, y the input
    it overwrites)."""
    rows = Rows(Geometry.of(G), x.shape[1])
    p = Partials(rows, stats)
    ss = p.total("sum", p.load(0, 0.0))
    rms_apply(rows, rows.load(x, 0.0), ss, eps=eps, w=rows.weights(w if HAS_W else None), y=y)


@tl.kernel(threads=_threads, cluster=_cluster, occupancy=_occupancy,
           static=("N", "S", "CH"))
def layer_stats(x: Row, stats: Stats, *, G: tl.constexpr) -> None:
    rows = Rows(Geometry.of(G), x.shape[1])
    raw = rows.load(x, 0.0)
    count = chunk_count(rows)
    held = rows.scalar()
    rows.scope.fill(held, count)
    mean, m2 = layer_stats_of(rows, raw, x, count)
    put(rows, stats, [held, mean, m2])


@tl.kernel(threads=_threads, cluster=_cluster, occupancy=_occupancy,
           static=("N", "S", "CH"))
def layer_split(x: Row, w: Vector, b: Vector, stats: Stats, y: Row,  # noqa: PLR0917 - the kernel's arguments
                eps: tl.f32, *, G: tl.constexpr, HAS_W: tl.constexpr = True,
                HAS_B: tl.constexpr = True) -> None:
    rows = Rows(Geometry.of(G), x.shape[1])
    mean, var = layer_totals(Partials(rows, stats), rows.n)
    wb = (rows.weights(w if HAS_W else None), rows.weights(b if HAS_B else None))
    layer_apply(rows, rows.load(x, 0.0), mean, var, eps=eps, wb=wb, y=y)


# ------------------------------------------------------------------ the spine's protocol


class Described(Protocol):
    """What specializing needs of an array (ops.args.Array has it)."""

    @property
    def dtype(self) -> str: ...

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def strides(self) -> tuple[int, ...]: ...

    @property
    def pointer(self) -> int: ...


def specialize(function: KernelFunction, arrays: Mapping[str, Described],
               constexprs: Mapping[str, Any]) -> LangProgram:
    """The program of `function` for these arrays (by parameter name; their addresses
    decide the alignment classes and which of them overlap) and constexprs."""
    given: dict[str, Any] = {}
    for p in function.info.params:
        if p.kind == "tensor":
            a = arrays[p.name]
            given[p.name] = tl.ArrayDesc(a.dtype, a.shape, a.strides, a.pointer or None)
        elif p.kind == "scalar":
            given[p.name] = 0.0 if DTYPES[p.dtype].is_float else 0
        elif p.name in constexprs:
            given[p.name] = constexprs[p.name]
    spec = function.signature(**given)
    return LangProgram(function, spec, f"tile_mlir.ops rows: {spec!r}")


Result = Annotated[tl.Tensor, "D", ("M",)]


@tl.kernel(threads=_threads, cluster=_cluster, occupancy=_occupancy, static=("N",))
def reduce_rows_held(x: Row, y: Result, *, G: tl.constexpr, KIND: tl.constexpr,
                     SCALE: tl.constexpr = 1.0) -> None:
    """A row's sum, max or min (KIND), times SCALE (a mean's 1/N), into y[row]: the row
    held by one CTA or cluster in registers, as the row ops hold theirs, so that a row
    that starts unaligned (of odd length) is read with edges (16-byte accesses), where
    reduction.py's reduce_rows takes the element's width (ops/reductions.py's _held)."""
    each = stacked(Geometry.of(G), x)
    for rows, raw in zip(each, loaded(each, x, IDENTITY[KIND]), strict=True):
        total = rows.reduce(KIND, raw)
        rows.scope.mul(y.reshape((y.shape[0], 1))[tl.ds(rows.row, 1)], total, SCALE)


KERNELS: dict[str, tuple[KernelFunction, ...]] = {
    "softmax": (softmax_rows, softmax_stats, softmax_split),
    "rms_norm": (rms_norm_rows, rms_stats, rms_split),
    "layer_norm": (layer_norm_rows, layer_stats, layer_split),
    "fused_add_rms_norm": (add_rms_norm_rows, add_rms_stats, rms_split),
}
"""Per op family: the one-pass kernel, then pass 1 and pass 2 of "split"."""
