"""The reduction kernel programs: one `tile.reduce` per CTA over a strided view (tl.kernel).

A stage reduces a view of one of two shapes (the caller merged the tensor's dims so):
- rows [A, R] (the reduced run innermost): CTA b takes a block of rows and reduces
  them at CTA scope (reduce/gmem: groups of lanes per row, 16-byte loads when the
  reduced run is contiguous and aligned, xor shuffles). A few very long rows are cut
  into `chunks` pieces over more CTAs, and the pieces' partials reduced by a further
  stage;
- columns [A, R, B] (a kept run innermost): a CTA takes a block of columns of one
  batch and a chunk of the reduced rows (reduce/columns: a thread per output vector,
  coalesced loads). Columns whose rows start unaligned (B not a multiple of a 16-byte
  vector) are first folded: G rows of B read as one of G * B (aligned), into partials
  [A, chunks, G * B] that the next stage reduces as [A, chunks * G, B] (fold_of); where
  R is no multiple of G (A = 1), a stage of its own reduces the last R % G rows into one
  partial row after those.
Chunks are equal where a divisor of R that fills the GPU allows, else equal but for a
tail (Stage.spans), and column blocks likewise (column_blocks): each length a static
tile of its own, the CTA branching to its one.
The source is a base pointer re-viewed with `memref.reinterpret_cast` as the strided
view (rows of equal chunks: [A, R] reshaped to [A, chunks, R / chunks]): the sizes are
compiled in (the lowering's reducers walk static shapes; the launch geometry depends on
them anyway), the strides are kernel arguments promising their divisibility (`tile.divisibility`)
unless they are 0 or the innermost 1, and a base that is not 16-byte aligned comes as
an aligned pointer and an element offset, so offset views, negative and zero strides
need no copy. Where the lowering cannot prove a vector access aligned (a misaligned
base, an odd stride) it takes narrower ones. The destination is a contiguous buffer of
partials, [A, chunks, B], or the result.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tile_mlir.lang as tl
from tile_mlir.contract import ACCESS_BYTES
from tile_mlir.dtypes import DTYPES
from tile_mlir.lang.spec import Specialization, TensorSpec
from tile_mlir.ops.programs import lang

ROW_BLOCK = 512  # threads per CTA of a rows stage of many waves of CTAs (row_threads)
SMALL_ROW_BLOCK = 256  # ... of one of a few waves
ROW_WAVES = 2
"""Waves of TARGET_CTAS CTAs (at ROW_CTA_BYTES each) from which rows take ROW_BLOCK
threads a CTA (34 MB of rows and more): at 2^20-2^22 elements (a wave or two) CTAs of
512 threads were 3-17% slower than the 256-thread geometry (bench/sizes.py's sums,
H100)."""
COLUMN_BLOCK = 256  # threads per CTA of a columns stage
TARGET_CTAS = 4 * 132  # enough CTAs to fill an H100/H200 several times over
CHUNK_BYTES = 1 << 16  # what one CTA of a split row or column block reads, about
ROW_CTA_BYTES = 1 << 15
"""What one CTA of ROW_BLOCK threads reads of whole rows, about (64 bytes a thread): several
rows of at most this, a row over all its warps where the row is this long or longer.
Measured on an H100 (sums of 2^26 elements, each rule beside torch.compile in one run),
against at least 4 rows a CTA (at most 4 warps a row) as before: f32 rows of 4096 3.03
-> 3.05 TB/s, of 8192 3.01 -> 3.05 (torch.compile 3.06), of 16384 2.97 -> 3.05, of 32768
3.00 -> 3.04; bf16 rows of 8192 2.86 -> 2.88 (torch.compile 2.92), of 16384 2.84 ->
2.88, of 32768 2.84 -> 2.88; amax f16 and amin f32 over rows of 8192 2.86 -> 2.90 and
3.01 -> 3.05. Neither 256 nor 1024 threads a CTA, nor 2 or 8 loads a lane, did better
at 8192 and 16384 (bf16) or 4096 (f32). Two more tried on 8192 x 8192 and 65536 x 1024
(one process, torch.compile interleaved, 300 repetitions), neither kept: each CTA
prefetching into L2 the rows of the CTA 32 to 192 on (tile.prefetch, as the row ops'
clusters do) ran every case 0-1% slower (sum bf16 8192 2.877 -> 2.84-2.87 TB/s; amax bf16
8192 2.90 -> 2.86-2.88; f32 unchanged at 3.05); and a PTX patch without the 32 first
steps x + 0.0 of a thread's partial sums (kept for the signed zero of an all -0.0 sum)
ran bf16 8192 2.88 -> 2.89, the rest within 0.2%: where bf16 sums trail torch.compile
(2.88 against 2.91-2.93) is not their arithmetic either."""
COLUMN_WIDTH = 128
"""Columns a CTA of a columns stage takes, about (column_width: the divisor of B nearest
it, wider where the rows are few).

Measured on an H100 (sums of 2^26 bf16 and f32 elements, reductions over rows of 128 to
65536, columns of 1024 to 65536; forced geometries beside torch.compile in one run):
rows read fastest by CTAs of 512 threads, several warps a row (bf16 2.70-2.83 ->
2.77-2.88 TB/s, f32 2.92-2.99 -> 2.96-3.04, against CTAs of 256 threads and at least a
row per warp), taking 64 bytes a thread (32 KiB a CTA, ROW_CTA_BYTES; a later sweep of
256, 512 and 1024 threads by 8 to 64 KiB a CTA, then bench/reductions.py's rows, against 16 KiB:
16-bit rows of 1024 2.80-2.82 -> 2.86-2.89 TB/s, 0.97-0.98x -> 0.99-1.00x torch.compile;
16-bit amax/amin over rows of 128 2.76-2.79 -> 2.72-2.73, the rest within 1%; 256
threads at 16 KiB measured the same but 1-2% under it on rows of 65536); columns by
blocks of 128 columns (16 or 32 threads across, the rest down the rows), the rows cut
only as far as needed to give the GPU about TARGET_CTAS CTAs (1024 x 65536 bf16 2.52 ->
2.77, f32 2.82 -> 3.00; 8192 x 8192 bf16 2.36 -> 2.66, f32 2.74 -> 2.87), against wider
blocks and the rows cut first (blocks of up to 256 vectors). Blocks of 64 columns read
the wider batches 1% slower, but a batch of 128 faster: NARROW_WIDTH."""
NARROW_WIDTH = 64
"""A batch of at most COLUMN_WIDTH columns but more than this is read in two halves (a CTA
a half), where the halves divide into vectors and the rows give every thread one.
Measured on an H100 (524288 x 128, sum and amax, beside torch.compile in one run): f32
2.74 -> 2.82 and 2.78 -> 2.88 TB/s, f16 2.48 -> 2.55 and 2.45 -> 2.52, bf16 2.51 -> 2.59
and 2.47 -> 2.54 (torch.compile 2.45-2.82); quarters (32 columns) were slower than
halves in every one, and than the whole in the 16-bit ones."""
SMALL_STAGE = 1 << 20
"""Bytes under which a stage of partials runs whole: cutting it costs a launch more."""


@dataclass(frozen=True)
class Stage:
    """One kernel: reduce the [A, R] rows or [A, R, B] columns of a strided source into a
    contiguous [A, chunks, B] destination."""

    kind: str  # tile.reduce kind
    a: int
    r: int
    b: int  # 1 for rows
    src: str  # element type names (tile_mlir.dtypes)
    dst: str
    chunks: int  # how many pieces R is cut into (the output keeps them: [A, chunks, B])
    scale: float | None = None
    # the source's strides over (A, R) or (A, R, B): a number (static) or "?n" (given at
    # launch, a multiple of n); `offset`: an element offset comes at launch
    strides: tuple[str, ...] = ()
    offset: bool = False
    # the chunks' lengths: `piece` each but the last len(tail), which take `tail` (0 and
    # (): R / chunks each)
    piece: int = 0
    tail: tuple[int, ...] = ()
    fold: int = 1  # rows of the source's [A, R * fold, B / fold] each row here holds
    # the source's row this stage's row 0 is (a fold's remainder: the R % G rows past the
    # folded ones, whose partial follows theirs: stages)
    start: int = 0

    @property
    def rows(self) -> bool:
        return self.b == 1

    @property
    def length(self) -> int:
        """Rows (columns) or elements (rows) of R each chunk but the tail's takes."""
        return self.piece or self.r // self.chunks

    def spans(self) -> list[tuple[int, int]]:
        """Each chunk's (start, length) in R, in order."""
        full = self.chunks - len(self.tail)
        out = [(k * self.length, self.length) for k in range(full)]
        start = full * self.length
        for n in self.tail:
            out.append((start, n))
            start += n
        return out

    @property
    def out_shape(self) -> tuple[int, ...]:
        return (self.a, self.chunks, self.b)

    def source_strides(self) -> tuple[str, ...]:
        """The given strides, or the contiguous ones of a dense source."""
        if self.strides:
            return self.strides
        return (str(self.r), "1") if self.rows else (str(self.r * self.b), str(self.b), "1")

    def vec(self) -> int:
        """Elements a 16-byte load covers, if the reduced (rows) or kept (columns)
        innermost run is a multiple of it; else 1."""
        return vector_elements(self.length if self.rows else self.b, DTYPES[self.src].bytes)

    @property
    def grid(self) -> tuple[int, int, int]:
        if self.rows:
            return (-(-self.a * self.chunks // rows_per_cta(self)), 1, 1)
        return (self.a * column_blocks(self.b, columns_per_cta(self)), self.chunks, 1)


def vector_elements(run: int, nbytes: int) -> int:
    """Elements of `nbytes` each a 16-byte load covers, halved until they divide `run`."""
    width = ACCESS_BYTES // nbytes
    while width > 1 and run % width:
        width //= 2
    return width


def pow2_divisor_at_most(n: int, cap: int) -> int:
    """The largest power of two that divides n and is at most cap (at least 1)."""
    best = 1
    while best * 2 <= cap and n % (best * 2) == 0:
        best *= 2
    return best


def pow2_at_most(n: int) -> int:
    """The largest power of two that is at most n (1 for n under 2)."""
    return 1 << max(n.bit_length() - 1, 0)


def divisor_at_most(n: int, cap: int) -> int:
    """The largest divisor of n that is at most cap (1 where there is none: n or cap
    under 1)."""
    return next((d for d in range(min(n, cap), 0, -1) if n % d == 0), 1)


def row_threads(stage: Stage) -> int:
    """Threads per CTA of a rows stage: ROW_BLOCK where its rows make ROW_WAVES waves of
    CTAs or more, else SMALL_ROW_BLOCK."""
    nbytes = stage.a * stage.r * DTYPES[stage.src].bytes
    return ROW_BLOCK if nbytes >= ROW_WAVES * TARGET_CTAS * ROW_CTA_BYTES else SMALL_ROW_BLOCK


RAGGED_CTA_BYTES = 1 << 14
"""What one CTA of ROW_BLOCK threads reads of whole rows whose length is not a power of two,
about, where its groups of lanes then idle no more (`_busy`) and it took no more rows than
it has groups (rows_per_cta). Measured on an H200 (bench/rows_ab.py, [2^27 / N, N], TB/s,
ROW_CTA_BYTES's rows a CTA -> these; 64 / 128 KiB beside): sum f32 [33554, 1000] 3.58 ->
3.98 (8 rows a CTA -> 4; 3.82, 3.82), [16777, 2000] 3.61 -> 3.96 (4 -> 2; 3.84, 3.85),
bf16 [33554, 2000] 3.52 -> 3.99 (8 -> 4), [16777, 4000] 3.59 -> 3.94 (4 -> 2); torch.compile
3.96, 3.93, 3.02, 3.15. Where it would idle a row's threads (amax f32 [11184, 3000]: 2
rows a CTA -> 1, 750 vectors over 512 threads) 3.96 -> 3.79, and rows of a power of two
keep ROW_CTA_BYTES's (sum f32 [32768, 1024] 3.98, 3.94 at 16 KiB)."""


def _busy(vectors: int, threads: int, rows: int) -> float:
    """The share of its threads' loads that a CTA of `threads` holding `rows` rows of
    `vectors` vectors each (spread over its threads) does not leave idle in the last
    round of a row."""
    lanes = max(1, threads // rows)
    return vectors / (-(-vectors // lanes) * lanes)


def rows_per_cta(stage: Stage) -> int:
    """Rows of [A * chunks, R / chunks] a CTA takes (a power of two), fewer while the grid
    would not fill the GPU. CTAs of ROW_BLOCK threads take about ROW_CTA_BYTES (groups of
    lanes share longer rows: a row of ROW_CTA_BYTES or more takes them all), down to one
    row (RAGGED_CTA_BYTES where a row's length is not a power of two); smaller ones about
    CHUNK_BYTES, at least a row per group, down to a row per 8. Chunks of unequal lengths
    (a tail) take a CTA each. Whole rows need not divide A: the last CTA takes the last
    rows, some of them its neighbour's too (reduce_rows), each reduced alike by both.
    Measured on an H200 (bench/rows_ab.py, [2^27 / N, N], TB/s, a power of two dividing A
    as before -> past it, both before RAGGED_CTA_BYTES; torch eager and torch.compile
    beside): amax f32 [87154, 385] 1.53 -> 3.91 (2 rows a CTA -> 16; 2.57, 3.82), sum bf16 [87381,
    768] 0.82 -> 4.03 (1 -> 16; 2.91, 2.35), mean bf16 [22369, 3000] 2.57 -> 4.02 (1 -> 4;
    3.32, 2.58), amax bf16 [671088, 100] 1.77 -> 3.60 (16 -> 128; 0.49, 2.55), [67108,
    1000] 3.13 -> 3.81 (4 -> 16; 2.24, 2.89), sum f32 [111848, 300] 3.59 -> 3.97 (8 -> 16;
    2.47, 3.49), [16777, 2000] 3.31 -> 3.64 (1 -> 4; 3.51, 4.01)."""
    if stage.tail:
        return 1
    threads = row_threads(stage)
    length = stage.length
    lanes = min(32, 1 << max(length // stage.vec() - 1, 0).bit_length())
    groups = threads // lanes
    row_bytes = length * DTYPES[stage.src].bytes
    if threads == ROW_BLOCK:
        want, least = pow2_at_most(max(ROW_CTA_BYTES // max(row_bytes, 1), 1)), 1
        ragged = pow2_at_most(max(RAGGED_CTA_BYTES // max(row_bytes, 1), 1))
        vectors = length // stage.vec()
        if length & (length - 1) and ragged < want <= groups and \
                _busy(vectors, threads, ragged) >= _busy(vectors, threads, want):
            want = ragged
    else:
        want, least = max(groups, CHUNK_BYTES // max(row_bytes, 1)), max(1, groups // 8)
    rows = stage.a * stage.chunks
    per_cta = pow2_at_most(min(want, 1024, rows))
    if per_cta < stage.chunks:  # chunks of one row: a power of two dividing theirs
        per_cta = pow2_divisor_at_most(stage.chunks, per_cta)
    while per_cta > least and -(-rows // per_cta) < TARGET_CTAS:
        per_cta //= 2
    return per_cta


def column_width(b: int, r: int, vec: int) -> int:
    """Columns of a batch a CTA takes, a multiple of `vec`: B when it is at most
    COLUMN_WIDTH (half of it when it is wider than NARROW_WIDTH, even, the half a multiple
    of `vec` and the R rows enough for the CTA's threads down it), else the divisor of B
    nearest COLUMN_WIDTH (by ratio; a vector a thread at most), widened while the CTA's
    threads down the columns would outnumber the R rows; where no divisor is within a
    factor of 2 of it (an odd B of few factors), COLUMN_WIDTH itself, the last block of a
    batch narrower (column_blocks). Measured on an H100 (sums over dim 0, beside torch
    eager and torch.compile in one process), against the divisor: [8192, 8191] (a prime:
    a column a CTA) 0.26 -> 2.32 TB/s bf16 (torch.compile 2.23), 0.50 -> 2.74 f32 (2.62);
    [1024, 50257] (29 * 1733: 29 columns a CTA) f32 2.43 -> 2.74 (2.52), bf16 2.16 both
    (2.33; SCALAR_FOLDS then 2.34)."""
    if b <= COLUMN_WIDTH:
        half = b // 2
        if b > NARROW_WIDTH and b % 2 == 0 and half % vec == 0 and \
                r * half >= COLUMN_BLOCK * vec:
            return half
        return b
    cap = COLUMN_BLOCK * vec
    fits = [d for d in range(vec, min(b, cap) + 1, vec) if b % d == 0]
    width = min(fits, key=lambda d: max(d, COLUMN_WIDTH) / min(d, COLUMN_WIDTH))
    if max(width, COLUMN_WIDTH) > 2 * min(width, COLUMN_WIDTH):
        return COLUMN_WIDTH
    while r < cap // width and width * 2 <= cap and b % (width * 2) == 0:
        width *= 2
    return width


def columns_per_cta(stage: Stage) -> int:
    """Columns of a batch a CTA takes (column_width); the CTA's threads split the rows."""
    return column_width(stage.b, stage.length, stage.vec())


def column_blocks(b: int, width: int) -> int:
    """Blocks of `width` columns a batch of B takes, the last narrower where B is not a
    multiple of it."""
    return -(-b // width)


# ---------------------------------------------------------------- planning


@dataclass(frozen=True)
class Cut:
    """How a stage cuts R into chunks: `chunks` of `piece` each, the last len(tail) of
    `tail` instead (piece 0: R / chunks each)."""

    chunks: int
    piece: int = 0
    tail: tuple[int, ...] = ()


def _uneven(r: int, want: int, width: int) -> Cut:
    """About `want` chunks of R: pieces of ceil(R / want) rounded up to whole vectors of
    `width`, then what is left: its whole vectors, then the rest (fewer than `width`),
    each a chunk (so that every chunk but the last reads whole vectors)."""
    piece = -(-r // (want * width)) * width
    full = r // piece
    left = r - full * piece
    tail = tuple(n for n in (left - left % width, left % width) if n)
    return Cut(full + len(tail), piece, tail)


def cut_rows(a: int, r: int, nbytes: int) -> Cut:
    """How to cut each of A rows so that the grid fills the GPU: into the largest power of
    two of chunks that divides R (keeping every chunk's vectors aligned) up to what fills
    it, if that is at least half of it; else into chunks of a length of whole 16-byte
    vectors and a tail (_uneven). A row of 100000007 f32 (a whole tensor's sum) took one
    CTA before the tail: 2^0 is the only power of two dividing it."""
    if a >= TARGET_CTAS or r * nbytes <= CHUNK_BYTES:
        return Cut(1)
    want = min(TARGET_CTAS // max(a, 1), r * nbytes // CHUNK_BYTES)
    even = pow2_divisor_at_most(r, max(want, 1))
    return Cut(even) if 2 * even >= want else _uneven(r, want, ACCESS_BYTES // nbytes)


def _cut_columns(a: int, r: int, b: int, nbytes: int) -> Cut:
    """How to cut the reduced rows so that the grid fills the GPU: into the largest
    divisor of R up to what fills it (any divisor: a chunk's rows start a whole row apart,
    so every one keeps the columns' vectors aligned) if that is at least half of it, else
    into chunks of ceil(R / wanted) rows and a shorter last one. Measured on an H100 against
    the largest power of two as before (sums over dim 0, beside torch eager and
    torch.compile in one process), where R has few factors of 2: [21845, 3072] bf16 0.24
    -> 2.62 TB/s (24 CTAs, a chunk each, to 17 chunks of 1285 rows; torch.compile 2.39),
    f32 0.67 -> 2.85 (2.84); [500000, 100] bf16 0.52 -> 2.20, f32 0.85 -> 2.57 (32
    chunks to 500; torch.compile 1.84 and 2.29). A prime R took one chunk before the
    tail: [21841, 3072] ran 0.24 (bf16) and 0.67 (f32) TB/s, torch.compile 2.39 and
    2.85."""
    blocks = a * column_blocks(b, column_width(b, r, vector_elements(b, nbytes)))
    if blocks >= TARGET_CTAS or r * b * nbytes // blocks <= CHUNK_BYTES:
        return Cut(1)
    want = min(TARGET_CTAS // blocks, r * b * nbytes // (blocks * CHUNK_BYTES))
    even = divisor_at_most(r, want)
    return Cut(even) if 2 * even >= want else _uneven(r, want, 1)


def _cut(a: int, r: int, b: int, nbytes: int, first: bool) -> Cut:
    """The cut of a stage: the source tensor's, and partials' when there are many."""
    if not first and a * r * b * nbytes < SMALL_STAGE:
        return Cut(1)
    return cut_rows(a, r, nbytes) if b == 1 else _cut_columns(a, r, b, nbytes)


FOLD_COLUMNS = True
"""Whether stages() folds the rows of columns that start unaligned (fold_of). Measured on
an H200 (bench/folded_columns_ab.py, over dim 0, folded against narrow, TB/s; torch eager
and torch.compile beside): sum bf16 [65536, 1031] 2.38 -> 3.50 (2.73, 2.67), f32 [32768,
1031] 3.37 -> 3.57 (3.19, 3.46), bf16 [16376, 4097] 2.86 -> 3.51, [65536, 1030] 2.82 ->
3.48, [262144, 263] 2.19 -> 3.41 (1.74, 2.02), [1024, 1031] (2 MiB) 0.13 -> 0.25 (0.16,
0.24); amax bf16 [1328, 50257] 3.30 -> 3.26 and f32 [4096, 4097] 2.85 -> 2.85 (ties).
Rows no multiple of G (A = 1), their last R % G reduced apart (`stages`; the same run):
sum bf16 [65539, 1031] 2.65 -> 3.25 (1.79, 2.46), [262147, 263] 2.15 -> 3.17 (1.77, 2.03);
amax f32 [32771, 1031] 3.30 -> 3.22 (3.19, 3.17), the remainder's kernel (about a
microsecond) costing more than f32's folding wins there; kept for one rule."""


def fold_of(view: tuple[int, int, int], nbytes: int, *, strides: tuple[str, ...] = (),
            offset: bool = False) -> int:
    """Rows G of a contiguous [A, R, B] columns view (at no element offset) that one
    folded row of G * B holds, so that every folded row starts 16-byte aligned where B's
    rows do not (16-byte loads where B allows 2- or 4-byte ones); 1 where that does not
    apply: rows, B aligned, a strided or offset source, R under G, or no multiple of it
    where A > 1 (A = 1: the R % G rows past the folded ones are reduced apart, `stages`),
    or a source under SMALL_STAGE bytes (a kernel more costs more than the narrow loads)."""
    a, r, b = view
    width = ACCESS_BYTES // nbytes
    g = width // math.gcd(b, width)
    if not FOLD_COLUMNS or b == 1 or g == 1 or strides or offset or r < g or \
            (r % g and a > 1) or a * r * b * nbytes < SMALL_STAGE:
        return 1
    return g


def stages(kind: str, view: tuple[int, int, int], src: str, dst: str, *, acc: str,
           scale_count: int | None = None, strides: tuple[str, ...] = (),
           offset: bool = False) -> list[Stage]:
    """The kernels that reduce the R run of an [A, R, B] view (B = 1: rows), in order: the
    first reads the source (its strides and offset), each next one the partials of the
    one before, until one writes [A, B] in `dst`. `scale_count`: a mean's count, whose
    reciprocal the last stage scales by. Columns whose rows start unaligned are folded
    first (fold_of): that stage's partials are never the last; the R % G rows past the
    folded ones (A = 1) are then reduced by a stage of their own (`start`) into one
    partial row after the folded stage's, which the next stage reduces with them."""
    a, r, b = view
    out: list[Stage] = []
    fold = fold_of(view, DTYPES[src].bytes, strides=strides, offset=offset)
    if fold > 1:
        rest = r % fold
        r, b = r // fold, b * fold
        cut = _cut(a, r, b, DTYPES[src].bytes, first=True)
        out.append(Stage(kind, a, r, b, src, acc, cut.chunks, None, (), False, cut.piece,
                         cut.tail, fold))
        b //= fold
        if rest:
            # rows that start where the folded ones end: 16-byte aligned as they do
            out.append(Stage(kind, a, rest, b, src, acc, 1, start=r * fold))
        r, src, offset = cut.chunks * fold + (1 if rest else 0), acc, False
    current, first_strides, first_offset = src, strides, offset
    while True:
        cut = _cut(a, r, b, DTYPES[current].bytes, first=not out)
        last = cut.chunks == 1
        scale = 1.0 / scale_count if scale_count and last else None
        out.append(Stage(kind, a, r, b, current, dst if last else acc, cut.chunks, scale,
                         first_strides, first_offset, cut.piece, cut.tail))
        if last:
            return out
        current, r, first_strides, first_offset = acc, cut.chunks, (), False


# ------------------------------------------------------------------ the tile programs


def _reduce_spans(reduce_span: Callable[[Any, int], None], chunk: Any, piece: int,
                  full: int, tail: tuple[int, ...]) -> None:
    """Chunk `chunk` of `full` chunks of `piece`, then one of each `tail` length:
    reduce_span(start, length) under a branch per length (static: the reducers walk
    them)."""
    with tl.if_(chunk.ult(full)) as whole:
        reduce_span(chunk * piece, piece)
    with whole.otherwise():
        _reduce_tail(reduce_span, chunk, full, full * piece, tail)


def _reduce_tail(reduce_span: Callable[[Any, int], None], chunk: Any, index: int,
                 start: int, tail: tuple[int, ...]) -> None:
    """The tail's chunks, `index` the first's, at `start`."""
    if len(tail) == 1:
        reduce_span(start, tail[0])
        return
    with tl.if_(chunk.ult(index + 1)) as first:
        reduce_span(start, tail[0])
    with first.otherwise():
        _reduce_tail(reduce_span, chunk, index + 1, start + tail[0], tail[1:])


@tl.kernel(name="reduce_rows", index_bits=64)
def reduce_rows(x: tl.Tensor, y: tl.Tensor, *, KIND: tl.constexpr, SCALE: tl.constexpr,
                CHUNKS: tl.constexpr, PER_CTA: tl.constexpr, PIECE: tl.constexpr,
                TAIL: tl.constexpr, GRID: tl.constexpr) -> None:
    """Rows [A, R] seen as [A, CHUNKS, L]: a CTA reduces PER_CTA consecutive (row, chunk)
    lines into y [A, CHUNKS] (whole rows that do not divide A: the last CTA the last ones,
    the first of them its neighbour's too, which both write alike). Tiles keep every dim
    (a unit one included): the reduce's destination is its kept dims. With a TAIL, a CTA
    reduces one chunk: PIECE elements of the row, or for the last len(TAIL) chunks the
    TAIL's lengths."""
    tl.grid(*GRID)
    a, r = x.shape
    bid = tl.block_id()
    if TAIL:
        # one row: its index a constant (0), so that its stride is not in the alignment
        row, chunk = (bid // CHUNKS, bid % CHUNKS) if a > 1 else (0, bid)
        at = (tl.ds(row, 1), tl.ds(chunk, 1))

        def span(start: Any, length: int) -> None:
            tl.cta.reduce(KIND, y[at], x[tl.ds(row, 1), tl.ds(start, length)], axes=1,
                          scale=SCALE)

        _reduce_spans(span, chunk, PIECE, CHUNKS - len(TAIL), TAIL)
        return
    length = r // CHUNKS
    rows = x.reshape(a, CHUNKS, length)
    if PER_CTA <= CHUNKS:  # PER_CTA chunks of one row
        blocks = CHUNKS // PER_CTA
        at = (tl.ds(bid // blocks, 1), tl.ds((bid % blocks) * PER_CTA, PER_CTA))
    else:  # whole rows, every chunk of each; the last CTA ends at the last row
        per = PER_CTA // CHUNKS
        first = bid * per if a % per == 0 else tl.minimum(bid * per, a - per)
        at = (tl.ds(first, per), tl.ds(0, CHUNKS))
    tile_x = rows[(*at, tl.ds(0, length))]
    tl.cta.reduce(KIND, y[at], tile_x, axes=2, scale=SCALE)


@tl.kernel(name="reduce_columns", index_bits=64)
def reduce_columns(x: tl.Tensor, y: tl.Tensor, *, KIND: tl.constexpr, SCALE: tl.constexpr,
                   COLUMNS: tl.constexpr, ROWS: tl.constexpr, TAIL: tl.constexpr,
                   GRID: tl.constexpr) -> None:
    """[A, R, B]: a CTA reduces COLUMNS columns of one batch (the batch's last block the
    rest, where B is not a multiple of COLUMNS) over one chunk of ROWS rows (grid y: the
    chunk; with a TAIL, the last chunk has TAIL's rows) into y [A, chunks, B]."""
    tl.grid(*GRID)
    b = x.shape[2]
    blocks = column_blocks(b, COLUMNS)
    bx = tl.block_id(0)
    chunk = tl.block_id(1)
    batch, block = bx // blocks, bx % blocks

    def block_of(start: Any, width: int) -> None:
        columns = tl.ds(start, width)
        out = y[tl.ds(batch, 1), tl.ds(chunk, 1), columns]

        def span(first: Any, rows: int) -> None:
            tl.cta.reduce(KIND, out, x[tl.ds(batch, 1), tl.ds(first, rows), columns],
                          axes=1, scale=SCALE)

        if TAIL:
            _reduce_spans(span, chunk, ROWS, GRID[1] - len(TAIL), TAIL)
        else:
            span(chunk * ROWS, ROWS)

    if b % COLUMNS:
        _reduce_spans(block_of, block, COLUMNS, blocks - 1, (b % COLUMNS,))
    else:
        block_of(block * COLUMNS, COLUMNS)


def describe(stage: Stage) -> str:
    """A one-line summary of a stage (the first line of its kernel's text)."""
    return (f"tile_mlir.ops reduce {stage.kind}: [{stage.a}, {stage.r}, {stage.b}] "
            f"{stage.src} strides [{', '.join(stage.source_strides())}]"
            f"{' +offset' if stage.offset else ''} -> [{stage.a}, {stage.chunks}, "
            f"{stage.b}] {stage.dst}"
            + (f" (chunks of {stage.piece}, the last {', '.join(map(str, stage.tail))})"
               if stage.tail else "")
            + (f" ({stage.fold} rows folded into one)" if stage.fold > 1 else "")
            + (f" (rows {stage.start} on, past the folded ones)" if stage.start else ""))


def _contiguous(shape: tuple[int, ...]) -> tuple[str, ...]:
    return tuple(str(math.prod(shape[d + 1:])) for d in range(len(shape)))


def specialization(stage: Stage) -> Specialization:
    """A stage's kernel specialization: the source at its sizes (compiled in) and strides
    (numbers, or "?n" given at launch), the destination contiguous."""
    source = (stage.a, stage.r) if stage.rows else (stage.a, stage.r, stage.b)
    out = stage.out_shape[:2] if stage.rows else stage.out_shape
    x = TensorSpec("x", stage.src, source, (None,) * len(source), stage.source_strides(),
                   stage.offset)
    y = TensorSpec("y", stage.dst, out, (None,) * len(out), _contiguous(out))
    layout: tuple[tuple[str, Any], ...]
    if stage.rows:
        kernel, layout = reduce_rows, (("CHUNKS", stage.chunks),
                                       ("PER_CTA", rows_per_cta(stage)),
                                       ("PIECE", stage.length), ("TAIL", stage.tail))
    else:
        kernel, layout = reduce_columns, (("COLUMNS", columns_per_cta(stage)),
                                          ("ROWS", stage.length), ("TAIL", stage.tail))
    constexprs = (("KIND", stage.kind), ("SCALE", stage.scale), *layout, ("GRID", stage.grid))
    return lang.specialization(kernel, (x, y), constexprs=constexprs,
                               threads=row_threads(stage) if stage.rows else COLUMN_BLOCK,
                               index_bits=64)


class ReductionProgram(lang.LangProgram):
    """A reduction stage's kernel, behind programs.KernelProgram."""

    def __init__(self, stage: Stage):
        spec = specialization(stage)
        super().__init__(reduce_rows if stage.rows else reduce_columns, spec, describe(stage))
        self.stage = stage

    def roles(self) -> tuple[tuple[str, int], ...]:
        """Per argument: ("x", 0), ("stride", dim), ("offset", 0) or ("y", 0)."""
        return tuple(("stride", role.dim) if role.kind == "stride" else
                     ("offset", 0) if role.kind == "offset" else (role.name, 0)
                     for role in self.spec.roles)
