"""Reductions, as torch has them: sum, amax, amin, prod and mean.

    tile_mlir.ops.sum(input, dim=None, keepdim=False, *, dtype=None, out=None)

`input` is a CUDA torch tensor, a CuPy array, any device array, or a NumPy array
(copied to the GPU and the result back), with any strides: offset (misaligned),
transposed, sliced, reversed (negative strides) and expanded (zero strides) views
are reduced where they lie. fp32, fp16 and bf16; halves accumulate in f32 and the
result has the input's type, as in torch, or `dtype` (the input is cast to it before
reducing, as torch does). `dim` is an int, a tuple of ints, or None for every
dimension; negative dims count from the end.

How a call becomes kernels: the reduced dims (flipped where their strides are
negative: the order of a reduction's terms is free) are sorted and merged into one
run R, the kept dims split into an outer run A and an inner run B (each merged in
memory, kept in order: the result is row-major over them), choosing the split whose
innermost stride is 1. The view [A, R, B] is one of programs/reduction.py's two
shapes, rows (B = 1) or columns, its strides and element offset kernel arguments.
A layout no split merges is first copied to a contiguous temporary (the elementwise
cast kernel), then reduced. Rows whose starts are not 16-byte aligned are reduced by a
row op's kernel instead, each row held in registers and read with edges (`_held`).
Partials are kept in f32 for 16-bit inputs; a mean scales by 1/count in the last
kernel, before rounding. out= that the last kernel cannot write directly (strided,
misaligned, another dtype) receives a copy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tile_mlir.contract import ACCESS_BYTES, contiguous
from tile_mlir.dtypes import DTYPES
from tile_mlir.ops import args, coalesce, entry, rows
from tile_mlir.ops.args import Array, Scalar, torch_name
from tile_mlir.ops.elementwise import In, apply, check_out
from tile_mlir.ops.plan import Builder
from tile_mlir.ops.programs.reduction import (
    COLUMN_BLOCK,
    ReductionProgram,
    Stage,
    columns_per_cta,
    cut_rows,
    row_threads,
    rows_per_cta,
    stages,
)
from tile_mlir.ops.programs.rows import reduce_rows_held

SUPPORTED = ("f32", "f16", "bf16")
NAMES = ("sum", "amax", "amin", "prod", "mean")
# library name -> (tile.reduce kind, whether it is a mean)
KINDS = {"sum": ("sum", False), "amax": ("max", False), "amin": ("min", False),
         "prod": ("prod", False), "mean": ("sum", True)}
IDENTITY = {"sum": 0.0, "prod": 1.0, "mean": math.nan}
"""The result of reducing nothing (amax and amin have none: an error, as in torch)."""


def normalize_dims(dim: int | Sequence[int] | None, rank: int) -> tuple[int, ...]:
    """Sorted non-negative dims; errors name `dim` when one is out of range or repeated.
    None (or an empty tuple) means every dimension."""
    if dim is None:
        return tuple(range(rank))
    if isinstance(dim, int | np.integer) and not isinstance(dim, bool):
        dims: tuple[Any, ...] = (dim,)
    elif isinstance(dim, Sequence) and not isinstance(dim, str):
        dims = tuple(dim)
    else:
        raise TypeError(f"argument 'dim' must be an int or a tuple of ints, got {dim!r}")
    if not dims:
        return tuple(range(rank))
    out = []
    for d in dims:
        if not isinstance(d, int | np.integer) or isinstance(d, bool):
            raise TypeError(f"argument 'dim' must be an int or a tuple of ints, got {d!r}")
        if not -max(rank, 1) <= d < max(rank, 1):
            raise ValueError(f"argument 'dim': {d} is out of range for a {rank}-d tensor")
        out.append(int(d) % max(rank, 1))
    if len(set(out)) != len(out):
        raise ValueError(f"argument 'dim' {tuple(dims)} names a dimension twice")
    return tuple(sorted(out))


# ----------------------------------------------------------------- the view


View = tuple[tuple[int, int, int], tuple[int, int, int], int]
"""(A, R, B) sizes, their strides, and the elements element 0 moves by (flips)."""


def reduction_view(shape: Sequence[int], strides: Sequence[int], dims: Sequence[int]
                   ) -> View | None:
    """The [A, R, B] view of a strided array reduced over `dims`, or None when no split of
    the kept dims merges in memory (the caller copies the array first)."""
    present = [d for d in range(len(shape)) if shape[d] != 1]
    flip, reduced = 0, []
    for d in (d for d in present if d in dims):
        stride = strides[d]
        if stride < 0:  # walked the other way: the terms' order is free
            flip += (shape[d] - 1) * stride
            stride = -stride
        reduced.append((shape[d], stride))
    run = coalesce.merge_run(sorted(reduced, key=lambda s: -s[1]))
    if run is None:
        return None
    kept = [(shape[d], strides[d]) for d in present if d not in dims]
    best: View | None = None
    for split in range(len(kept) + 1):
        outer, inner = coalesce.merge_run(kept[:split]), coalesce.merge_run(kept[split:])
        if outer is None or inner is None:
            continue
        view = ((outer[0], run[0], inner[0]), (outer[1], run[1], inner[1]), flip)
        if best is None or _score(view) < _score(best):
            best = view
    return best


def _score(view: View) -> tuple[int, int]:
    """Smaller is better: a unit innermost stride (coalesced loads), then rows."""
    (_, r, b), (_, s_r, s_b), _ = view
    inner = abs(s_b) if b > 1 else abs(s_r) if r > 1 else 1
    return (0 if inner == 1 else 1, 0 if b == 1 else 1)


def _classes(strides: tuple[int, ...]) -> tuple[str, ...]:
    """How a stage is specialized on its source's strides: 0 and the innermost 1 built in,
    the others given at launch with their divisibility."""
    from tile_mlir.contract import divisibility

    last = len(strides) - 1
    return tuple(str(s) if s == 0 or (s == 1 and d == last) else f"?{divisibility(s)}"
                 for d, s in enumerate(strides))


# --------------------------------------------------------------- the planning


def _stage_values(b: Builder, program: ReductionProgram, src: Array, dst: Array
                  ) -> list[Any]:
    """A stage's kernel arguments, by the program's roles."""
    values: list[Any] = []
    for role, dim in program.roles():
        if role == "x":
            values.append(b.pointer(src))
        elif role == "stride":
            values.append(src.strides[dim])
        elif role == "offset":
            values.append(src.offset)
        else:
            values.append(b.pointer(dst))
    return values


def _accumulator(dtype: str) -> str:
    """The type partials of `dtype` are kept in: f32 for 16-bit inputs, else their own."""
    return "f32" if DTYPES[dtype].bits < 32 else dtype


HELD_KINDS = ("sum", "max", "min")
"""The kinds a row held in registers reduces (programs/rows.py's reduce_rows_held)."""


def _held(kind: str, src: str, dst: str, shape: tuple[int, int], vec: int, *,
          plan: Callable[[int], rows.Plan]) -> rows.Plan | None:
    """How rows of `src` elements that start unaligned (accessed `vec` at a time: an odd
    length, an odd row stride or offset) are reduced as the row ops read such rows: each
    held by one CTA or cluster (the row planner's `plan` at 16-byte accesses) and read as
    its aligned 16-byte vectors and the few elements before and after them (edges),
    where programs/reduction.py's reduce_rows narrows every access to the element's
    width. None where that does not apply: a prod, a result in another dtype (a first
    pass into f32 partials), aligned rows, rows too few to fill the GPU by themselves
    (the stages cut those into chunks over more CTAs than a CTA or cluster a row
    gives), or rows the planner gives no edges (a group of lanes' rows of under 32
    vectors, the split of rows longer than a cluster holds). The planner stacks short
    rows (rows.STACKS: 4 a CTA). Measured on an H200 (bench/held_rows_ab.py, [2^26 / N,
    N], held against the stages, TB/s): sum bf16 N = 4097 3.02 -> 3.95, 16385 3.38 ->
    3.95, 50257 3.15 -> 3.58, 262145 3.11 -> 3.88, 999 2.82 -> 2.97; sum f32 1025 3.84 ->
    4.25, 4097 3.87 -> 4.25, 50257 3.87 -> 4.27; amax bf16 50257 3.15 -> 3.61, f32 4097
    3.84 -> 4.25; sum bf16 1025 3.07 -> 3.04 unstacked, 4.01 in stacks of 2 and 3.93 of 4
    (bench/rows_ab.py; rows of 257, which took a CTA of 512 threads each in the stages:
    0.32 -> 3.03 in stacks of 4 on 32 threads)."""
    a, r = shape
    wide = ACCESS_BYTES // DTYPES[src].bytes
    if kind not in HELD_KINDS or dst != src or vec >= wide or \
            cut_rows(a, r, DTYPES[src].bytes).chunks > 1:
        return None
    chosen = plan(wide)
    return chosen if chosen.geometry.edges else None


Kernels = rows.Plan | list[Stage]
"""A pass's kernels: one of a row held in registers (its plan), or the stages."""


def _kernels(kind: str, view: tuple[int, int, int], src: str, dst: str, *,
             scale_count: int | None, vec: int | None, plan: Callable[[int], rows.Plan],
             strides: tuple[str, ...] = (), offset: bool = False) -> Kernels:
    """The kernels that reduce an [A, R] (B = 1) or [A, R, B] view of `src` elements into
    `dst`: rows that start unaligned (read `vec` at a time; None: rows not contiguous)
    by one kernel of a row held in registers where `_held` gives `plan`'s, else the
    stages (programs/reduction.py's `stages`, for the source's stride classes and
    element offset)."""
    a, r, b = view
    held = None if b > 1 or vec is None else _held(kind, src, dst, (a, r), vec, plan=plan)
    if held is not None:
        return held
    return stages(kind, view, src, dst, acc=_accumulator(src), scale_count=scale_count,
                  strides=strides, offset=offset)


def _run_stages(b: Builder, kind: str, src: Array, final: Array, *,
                scale_count: int | None) -> None:
    """The kernels of one reduction of `src`, viewed as [A, R] (rows) or [A, R, B]
    (`_kernels`), launched."""
    a, r, bb = (*src.shape, 1)[:3]
    dense = contiguous(src.shape, src.strides)  # size-1 dims' strides aside
    vec = rows.vector_of(r, [src]) if bb == 1 and src.strides[1] == 1 else None
    planned = _kernels(kind, (a, r, bb), src.dtype, final.dtype, scale_count=scale_count,
                       vec=vec, plan=lambda wide: rows.plan_for(
                           a, r, vec or 1, b.device, itemsize=src.itemsize, wide=wide,
                           stacks=rows.STACK_VALUES),
                       strides=() if dense else _classes(src.strides),
                       offset=bool(src.offset))
    if isinstance(planned, rows.Plan):
        rows.launch(b, reduce_rows_held, planned.geometry, a,
                    {"x": src, "y": final.view((a,), (1,))}, scalars={}, KIND=kind,
                    SCALE=1.0 / scale_count if scale_count else 1.0)
        return
    source = src if planned[0].fold == 1 else _source_view(src, planned[0])
    n = 0
    while n < len(planned):
        stage = planned[n]
        if n + 1 < len(planned) and planned[n + 1].start:  # a fold and its remainder
            dst = _remainder(b, stage, planned[n + 1], src, source)
            n += 2
        else:
            dst = final if n == len(planned) - 1 else b.temporary(stage.out_shape, stage.dst)
            program = ReductionProgram(stage)
            b.launch(program, stage.grid, _stage_values(b, program, source, dst))
            n += 1
        if n < len(planned):
            source = _source_view(dst, planned[n])


def _remainder(b: Builder, fold: Stage, rest: Stage, src: Array, folded: Array) -> Array:
    """Launch a folded stage (reading `folded`, src's first rows) and the stage of the
    rows past them (`rest`, reading src from its row `start`) into one buffer of partials
    [1, fold's chunks * G + 1, B], which it returns (A = 1: fold_of)."""
    chunks = fold.chunks * fold.fold
    partials = b.temporary((1, chunks + 1, rest.b), rest.dst)
    first = partials.view(fold.out_shape, args.row_major(fold.out_shape))
    program = ReductionProgram(fold)
    b.launch(program, fold.grid, _stage_values(b, program, folded, first))
    shape = (1, rest.r, rest.b)
    tail = src.view(shape, args.row_major(shape), elements=rest.start * rest.b)
    last = partials.view(rest.out_shape, args.row_major(rest.out_shape),
                         elements=chunks * rest.b)
    program = ReductionProgram(rest)
    b.launch(program, rest.grid, _stage_values(b, program, tail, last))
    return partials


def _source_view(a: Array, stage: Stage) -> Array:
    """A contiguous array as the [A, R] or [A, R, B] a stage reads (partials: the last
    stage's [A, chunks, B], or a folded stage's [A, chunks, G * B] as [A, chunks * G, B];
    a folded source's [A, R, B] as [A, R / G, G * B])."""
    shape = (stage.a, stage.r, stage.b) if stage.b > 1 else (stage.a, stage.r)
    return a.view(shape, args.row_major(shape))


def _final(b: Builder, out: Array | None, shape: tuple[int, ...], *, result: str, x: Array,
           name: str) -> tuple[Array, Array | None]:
    """Where the last stage writes, and the out= to copy that into (None: written)."""
    if out is None:
        return b.output(shape, result), None
    check_out(out, shape, result, [x], name)
    args.check_overlap(out, [x], name)
    b.disjoint(out, x, name)
    # written by the last stage only where it cannot be read by the others (else a copy)
    apart = not args.overlaps(out, x) and not _spans_meet(out, x)
    direct = out.dtype == result and not out.misalignment and \
        contiguous(out.shape, out.strides) and apart
    if direct:
        if out.root != x.root:
            b.guard(b.spans_meet(out, x))  # a later call of this key, with out among x
        return out, None
    return b.temporary(shape, result), out


def _spans_meet(a: Array, b: Array) -> bool:
    a_low, a_high = args.span(a)
    b_low, b_high = args.span(b)
    return a.pointer + a_low < b.pointer + b_high and b.pointer + b_low < a.pointer + a_high


def _empty(b: Builder, name: str, x: Array, shape: tuple[int, ...], *, result: str,
           out: Array | None, count: int) -> str:
    """Nothing to reduce (`count`, the elements reduced into each result, is 0) or no
    result to write (an empty shape: then count may be > 0, and amax/amin are fine too,
    as torch's): the identity everywhere (NaN for a mean)."""
    if name in ("amax", "amin") and count == 0:
        raise ValueError(f"{name}: argument 'input' of shape {x.shape} has no elements along "
                         "the reduced dims ('dim'), and amax/amin have no identity")
    if not math.prod(shape):
        return b.object_of(out if out is not None else b.output(shape, result))
    value = IDENTITY[name]
    if out is None and b.fills:
        return b.object_of(b.filled(shape, result, value))
    fill = Scalar("fill", value, "f32", 2, repr(value) if not math.isnan(value)
                  else "float('nan')")
    target = out if out is not None else b.output(shape, result)
    return b.object_of(apply(b, "fill", [In(fill, promotes=False)], target, result=result,
                             shape=shape, what=name))


def reduce(b: Builder, name: str, input: Any, dim: Any, *, keepdim: bool,  # noqa: A002
           dtype: Any, out: Array | None) -> str:
    """`name` of input over dim, as torch computes it (see the module docstring)."""
    if not isinstance(input, Array):
        raise TypeError(f"{name}: argument 'input' must be an array, got a number")
    if input.dtype not in SUPPORTED:
        raise TypeError(f"{name}: argument 'input' has element type {torch_name(input.dtype)}; "
                        f"reductions take {', '.join(torch_name(d) for d in SUPPORTED)}")
    result = input.dtype if dtype is None else args.dtype_of(dtype, "dtype", name, SUPPORTED)
    b.place([input] if out is None else [input, out])
    x = input
    if DTYPES[result].bits < DTYPES[x.dtype].bits or (result != x.dtype and
                                                      DTYPES[result].bits == 16):
        x = apply(b, "cast", [In(x)], b.temporary(x.shape, result), result=result, what=name)
    # a 0-d array takes dim 0 or -1, as torch does, and has nothing to reduce
    dims = tuple(d for d in normalize_dims(dim, len(x.shape)) if d < len(x.shape))
    shape = tuple(1 if i in dims else s for i, s in enumerate(x.shape)) if keepdim else \
        tuple(s for i, s in enumerate(x.shape) if i not in dims)
    count = math.prod(x.shape[d] for d in dims)
    if count == 0 or not math.prod(shape):
        return _empty(b, name, x, shape, result=result, out=out, count=count)
    final, copy_to = _final(b, out, shape, result=result, x=x, name=name)
    if count == 1:  # nothing reduced: the values themselves (a mean divides by one)
        kept = x.view(shape, _kept_strides(x, dims, keepdim))
        apply(b, "cast", [In(kept)], final, result=result, what=name)
    else:
        _reduce_into(b, name, x, dims, final=final, count=count)
    if copy_to is not None:
        apply(b, "cast", [In(final)], copy_to, result=copy_to.dtype, what=name)
        return b.object_of(copy_to)
    return b.object_of(final)


def _kept_strides(x: Array, dims: Sequence[int], keepdim: bool) -> tuple[int, ...]:
    return tuple(0 if i in dims else s for i, s in enumerate(x.strides)) if keepdim else \
        tuple(s for i, s in enumerate(x.strides) if i not in dims)


@dataclass(frozen=True)
class Pass:
    """One pass of a reduction: `dims` of an array of `shape` and `strides` (the input's,
    a contiguous copy of it made first, or the partials of the pass before: `source`)
    reduced in one `view`, into `dst` (the result where `last`, else partials over the
    other dims); `remaining`: the dims of the array still to reduce, `dims` among them."""

    source: str  # "input", "copy" or "partials"
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dims: tuple[int, ...]
    remaining: tuple[int, ...]
    view: View
    src: str
    dst: str
    last: bool

    @property
    def kept(self) -> tuple[int, ...]:
        """The shape of what the pass writes: the dims it does not reduce."""
        return tuple(n for d, n in enumerate(self.shape) if d not in self.dims)


def passes(shape: Sequence[int], strides: Sequence[int], dims: Sequence[int], src: str,
           dst: str) -> list[Pass]:
    """The passes that reduce an array over `dims`: one where the reduced dims merge into
    one run (reduction_view), else first the ones that do (into partials in the
    accumulator's type over the others), then the rest; a layout nothing merges in is
    copied to a contiguous temporary first."""
    out: list[Pass] = []
    shape, strides, dims, source = tuple(shape), tuple(strides), tuple(dims), "input"
    while True:
        view = reduction_view(shape, strides, dims)
        if view is not None:
            out.append(Pass(source, shape, strides, dims, dims, view, src, dst, True))
            return out
        first = tuple(_mergeable_subset(shape, strides, dims))
        if not first:  # the kept dims merge no way: a contiguous copy
            strides, source = tuple(args.row_major(shape)), "copy"
            continue
        view = reduction_view(shape, strides, first)
        assert view is not None
        acc = _accumulator(src)
        out.append(Pass(source, shape, strides, first, dims, view, src, acc, False))
        rest = [d for d in range(len(shape)) if d not in first]
        dims = tuple(rest.index(d) for d in dims if d not in first)
        shape = out[-1].kept
        strides, src, source = tuple(args.row_major(shape)), acc, "partials"


def _mergeable_subset(shape: Sequence[int], strides: Sequence[int], dims: Sequence[int]
                      ) -> list[int]:
    """Reduced dims, smallest stride first, as many as still make a view."""
    chosen: list[int] = []
    for d in sorted(dims, key=lambda d: abs(strides[d])):
        if reduction_view(shape, strides, [*chosen, d]) is not None:
            chosen.append(d)
    return chosen


def _reduce_into(b: Builder, name: str, x: Array, dims: Sequence[int], *, final: Array,
                 count: int) -> None:
    """Launch the passes (`passes`) that reduce x over dims into final."""
    kind, mean = KINDS[name]
    source = x
    for step in passes(x.shape, x.strides, dims, x.dtype, final.dtype):
        if step.source == "copy":
            source = apply(b, "cast", [In(source)], b.temporary(source.shape, source.dtype),
                           result=source.dtype, what=name)
        into = final if step.last else b.temporary(step.kept, step.dst)
        _run_view(b, kind, source, step.view, into,
                  scale_count=count if mean and step.last else None)
        source = into


def _run_view(b: Builder, kind: str, x: Array, view: View, final: Array, *,
              scale_count: int | None) -> None:
    sizes, strides, flip = view
    source = x.view(sizes, strides, flip)
    if sizes[2] == 1:  # rows
        source = source.view(sizes[:2], strides[:2])
    _run_stages(b, kind, source, final, scale_count=scale_count)


# ------------------------------------------------------------------ explain


def explain(name: str, shape: Sequence[int], dtype: str,
            dim: int | Sequence[int] | None = -1) -> str:
    """How `name` reduces a contiguous array of `shape` and `dtype` over `dim` (torch's:
    an int, a tuple, None for every dim): the kernels the planner launches (this module's
    planning, the same rules as a call's), each stage's grid and accesses, and why."""
    if name not in NAMES:
        raise ValueError(f"explain: {name!r} is not a reduction ({', '.join(NAMES)})")
    if dtype not in SUPPORTED:
        raise ValueError(f"explain: {name} takes {', '.join(SUPPORTED)}, not {dtype!r}")
    if any(d < 0 for d in shape):
        raise ValueError(f"explain: shape {list(shape)} has a negative size")
    dims = tuple(d for d in normalize_dims(dim, len(shape)) if d < len(shape))
    kept = math.prod(s for i, s in enumerate(shape) if i not in dims)
    count = math.prod(shape[d] for d in dims)
    over = "every dim" if dim is None else f"dim {dim}"
    what = f"{name} {dtype} {'x'.join(map(str, shape)) or 'scalar'} over {over}"
    if not kept or not count:
        if name in ("amax", "amin") and not count:
            return f"{what}: nothing to reduce, and {name} has no identity: an error"
        return f"{what}: an empty result or nothing to reduce: a fill, no reduction kernel"
    if count == 1:
        return f"{what}: one element a result: the values copied (a cast kernel)"
    kind, mean = KINDS[name]
    lines = [f"{what}:"]
    _explain_into(lines, kind, tuple(shape), args.row_major(shape), dims, src=dtype,
                  dst=dtype, scale_count=count if mean else None)
    return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _planner(a: int, r: int, vec: int, itemsize: int) -> Callable[[int], rows.Plan]:
    """The row planner's plan of [a, r] at an access width, on a GPU of the largest
    clusters (what explain assumes)."""
    def plan(wide: int) -> rows.Plan:
        return rows.chosen(a, r, vec, rows.LARGEST_CLUSTER, itemsize=itemsize, inputs=1,
                           early=0, f32_ahead=False, wide=wide,
                           stacks=rows.STACK_VALUES)
    return plan


def _explain_into(lines: list[str], kind: str, shape: tuple[int, ...],
                  strides: tuple[int, ...], dims: Sequence[int], *, src: str, dst: str,
                  scale_count: int | None) -> None:
    """The passes (`passes`) and each one's kernels (`_kernels`), said line by line."""
    for step in passes(shape, strides, dims, src, dst):
        if step.source == "copy":
            lines.append("  no split of the kept dims merges: a contiguous copy first")
        if not step.last:
            lines.append(f"  the reduced dims {step.remaining} do not merge into one run: "
                         f"first {step.dims}, into {step.dst} partials {list(step.kept)}, "
                         "then the rest")
        (a, r, b), _, _ = step.view
        vec = rows.vector_width(r, step.src, [])
        planned = _kernels(kind, (a, r, b), step.src, step.dst,
                           scale_count=scale_count if step.last else None, vec=vec,
                           plan=_planner(a, r, vec, DTYPES[step.src].bytes))
        if isinstance(planned, rows.Plan):
            scale = f"; scaled by 1/{scale_count}" if scale_count and step.last else ""
            lines.append(f"  rows [{a}, {r}]: 1 kernel, a row held in registers")
            lines.append(f"  - reduce_rows_held {step.src} -> {step.dst} [{a}]: "
                         f"{planned.geometry.strategy}: {planned.reason}{scale}")
            continue
        shape_text = f"rows [{a}, {r}]" if b == 1 else f"columns [{a}, {r}, {b}]"
        lines.append(f"  {shape_text}: {_count(len(planned), 'kernel')}"
                     + (f", {_accumulator(step.src)} partials between them"
                        if len(planned) > 1 else ""))
        lines += [f"  - {_stage_line(stage)}" for stage in planned]


def _stage_line(stage: Stage) -> str:
    """One stage: what it reduces, its grid and accesses, and why."""
    nbytes = DTYPES[stage.src].bytes
    vec = stage.vec()
    width = ACCESS_BYTES // nbytes
    run = stage.length if stage.rows else stage.b
    loads = f"{vec * nbytes}-byte loads"
    if vec < width:
        what = ("a row" if stage.chunks == 1 else "a chunk") if stage.rows else "a row's run"
        loads += f" ({what} of {run} elements is not a multiple of {width}: narrower " \
                 "loads keep every one aligned)"
    if stage.fold > 1:
        loads += (f" ({stage.fold} rows of {stage.b // stage.fold} read as one of "
                  f"{stage.b}: each row of {stage.b // stage.fold} starts unaligned)")
    if stage.start:
        loads += (f"; rows {stage.start} on, the {stage.r} past the folded ones, into one "
                  "partial row after theirs")
    cut = ""
    if stage.chunks > 1:
        cut = (f"; R cut into {stage.chunks} chunks of {stage.length}"
               + (f" (the last {', '.join(map(str, stage.tail))})" if stage.tail else "")
               + " so that the grid fills the GPU")
    scale = f"; scaled by 1/{round(1 / stage.scale)}" if stage.scale else ""
    grid = stage.grid
    if stage.rows:
        per = rows_per_cta(stage)
        line = 'chunk' if stage.chunks > 1 else 'row'
        return (f"reduce_rows {stage.src} -> {stage.dst} [{stage.a}, {stage.chunks}]: "
                f"{_count(grid[0], 'CTA')} of {row_threads(stage)} threads, "
                f"{_count(per, line)} of {stage.length} a CTA, {loads}{cut}{scale}")
    columns = columns_per_cta(stage)
    return (f"reduce_columns {stage.src} -> {stage.dst} [{stage.a}, {stage.chunks}, "
            f"{stage.b}]: {grid[0]} x {grid[1]} CTAs of {COLUMN_BLOCK} threads, "
            f"{_count(columns, 'column')} by {_count(stage.length, 'row')} a CTA, "
            f"{loads}{cut}{scale}")


def _reduction(name: str) -> Callable[..., Any]:
    def semantics(b: Builder, input: Any, dim: Any = None, keepdim: bool = False, *,  # noqa: A002
                  dtype: Any = None, out: Array | None = None) -> str:
        return reduce(b, name, input, dim, keepdim=keepdim, dtype=dtype, out=out)

    semantics.__doc__ = (
        f"{name}(input, dim=None, keepdim=False, *, dtype=None, out=None) -> Tensor\n\n"
        f"torch.{name} on a CUDA torch tensor, CuPy array or NumPy array (float32, float16, "
        "bfloat16), any strides; `dtype`: the input cast to it before reducing.")
    return entry.op({"input": "operand", "out": "out"}, name=name)(semantics)


sum = _reduction("sum")  # noqa: A001 - torch's name
amax = _reduction("amax")
amin = _reduction("amin")
prod = _reduction("prod")
mean = _reduction("mean")
