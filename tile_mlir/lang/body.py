"""The body API: ids, control flow, buffers and the tile ops, in the seeds' spelling.

    tl.cta.sqrt(dst, src)            # tile.elementwise {op = "sqrt", scope = "cta"}
    tl.warp.copy(r, smem)            # tile.copy at warp scope
    tl.cta.sum(row_sums, x, axes=(-1,))

Each call builds at the current insertion point, located at the caller's line.
Mistakes the builder can see raise ProgramError there; the rules only the
passes know (tile-verify) are reported later at the same line. Ops take
options through as attributes (variant=, vector_bytes=, stage=, padding=...).
"""

from __future__ import annotations

import difflib
import functools
import linecache
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from mlir import ir
from mlir.dialects import arith, gpu, scf

from tile_mlir import op_table
from tile_mlir.contract import WARP
from tile_mlir.dialects import tile
from tile_mlir.dtypes import DTYPES, KIND_ORDER, promote_types
from tile_mlir.lang import builder, errors
from tile_mlir.lang.builder import as_value, at, current
from tile_mlir.lang.values import Bool, Index, IndexLike, Scalar, Tensor, dtype_name
from tile_mlir.layout import LayoutError, TileLayout
from tile_mlir.op_table import fusion

_AXES = {0: gpu.Dimension.x, 1: gpu.Dimension.y, 2: gpu.Dimension.z}


def _axis(axis: int) -> Any:
    if axis not in _AXES:
        raise errors.program_error(f"axis is 0, 1 or 2, got {axis!r}")
    return _AXES[axis]


# ------------------------------------------------------------------ ids


def block_id(axis: int = 0) -> Index:
    """This CTA's index along a grid axis."""
    with at():
        return Index(gpu.block_id(_axis(axis)))


def num_blocks(axis: int = 0) -> IndexLike:
    """The grid's size along an axis: an int when the program fixes it (tl.grid)."""
    build = current()
    _axis(axis)
    if build.grid is not None:
        return build.grid[axis]
    with at():
        return Index(gpu.grid_dim(_axis(axis)))


def thread_id() -> Index:
    """This thread's linear index in its CTA (x + bx * (y + by * z))."""
    bx, by, bz = current().block
    with at():
        tid = gpu.thread_id(gpu.Dimension.x)
        if by > 1 or bz > 1:
            y = arith.muli(gpu.thread_id(gpu.Dimension.y), as_value(bx))
            tid = arith.addi(tid, y)
        if bz > 1:
            z = arith.muli(gpu.thread_id(gpu.Dimension.z), as_value(bx * by))
            tid = arith.addi(tid, z)
        return Index(tid)


def warp_id() -> Index:
    """This thread's warp in its CTA."""
    return thread_id() // WARP


def lane_id() -> Index:
    """This thread's lane in its warp."""
    return thread_id() % WARP


def grid(x: int, y: int = 1, z: int = 1) -> None:
    """Fix the kernel's grid (known_grid_size): launches default to it, and
    tl.num_blocks() answers it as ints."""
    build = current()
    dims = (x, y, z)
    if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims):
        raise errors.program_error(f"tl.grid takes positive ints, got {dims}")
    if build.grid is not None and build.grid != dims:
        raise errors.program_error(f"the grid is already fixed to {build.grid}")
    build.grid = dims


def static_assert(condition: bool, message: str = "static assertion failed") -> None:
    """Check something the program knows while it is built (a static size); a located
    error when it does not hold."""
    if not isinstance(condition, bool):
        raise errors.program_error("tl.static_assert takes a Python bool (a tl.Bool is known "
                                   "only when the kernel runs)")
    if not condition:
        raise errors.program_error(message)


# ------------------------------------------------------------------ control flow


def range(start: IndexLike, stop: IndexLike | None = None,  # noqa: A001 - as Python's
          step: IndexLike = 1) -> Iterator[Index]:
    """`for i in tl.range(start, stop, step):` an scf.for that the GPU runs: the body is
    built once, `i` an Index (Python's `break` and `continue` do not reach the GPU);
    `tl.range(n)` counts from 0. Python's own range unrolls instead."""
    if stop is None:
        start, stop = 0, start
    with at() as build:
        loop = scf.ForOp(as_value(start), as_value(stop), as_value(step))
    build.blocks.append(loop.body)
    try:
        yield Index(loop.induction_variable)
    finally:
        # also when the loop is left early (a Python `break` closes this generator)
        build.blocks.remove(loop.body)
        scf.YieldOp([], loc=loop.location, ip=ir.InsertionPoint(loop.body))


class _If:
    """The `with tl.if_(cond) as branch:` statement's scf.if; `branch.otherwise()` opens
    its else region (once, after the then branch)."""

    def __init__(self, op: Any):
        self.op = op
        self.closed = False

    @contextmanager
    def otherwise(self) -> Iterator[None]:
        if not self.closed or len(self.op.regions[1].blocks):
            raise errors.program_error("branch.otherwise() follows its `with tl.if_(...)` "
                                       "block, once")
        yield from _inside(self.op, self.op.regions[1].blocks.append())


def _inside(op: Any, block: ir.Block) -> Iterator[None]:
    """Build in `block` (a branch of `op`), then close it with scf.yield."""
    build = current()
    build.blocks.append(block)
    try:
        yield
    finally:
        build.blocks.remove(block)
    scf.YieldOp([], loc=op.location, ip=ir.InsertionPoint(block))


@contextmanager
def if_(condition: Bool | Scalar | bool) -> Iterator[_If]:
    """`with tl.if_(cond) as branch:` builds an scf.if; `with branch.otherwise():` its
    else branch."""
    with at():
        op = scf.IfOp(builder.bool_value(condition))
    branch = _If(op)
    build = current()
    build.blocks.append(op.then_block)
    try:
        yield branch
    finally:
        build.blocks.remove(op.then_block)
    scf.YieldOp([], loc=op.location, ip=ir.InsertionPoint(op.then_block))
    branch.closed = True


def barrier() -> None:
    """gpu.barrier: every thread of the CTA waits (tile-barriers adds those the tile ops
    imply by themselves)."""
    with at():
        gpu.barrier()


# ------------------------------------------------------------------ buffers


_SPACES = {"shared": "#gpu.address_space<workgroup>", "local": "#gpu.address_space<private>"}


def _static_shape(shape: Any) -> tuple[int, ...]:
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    for dim, d in enumerate(dims):
        if isinstance(d, bool) or not isinstance(d, int) or d <= 0:
            what = "a tl.Index" if isinstance(d, Index) else repr(d)
            raise errors.program_error(f"a buffer needs a static shape: dim {dim} is {what}")
    return dims


@functools.lru_cache(maxsize=1024)
def _checked(layout: TileLayout | str) -> TileLayout:
    """A layout parsed and validated, once per text (validating enumerates its elements: a
    cluster's register tile has tens of thousands, and a program allocates many)."""
    if isinstance(layout, str):
        return TileLayout.parse(layout)  # validated as it is parsed
    layout.validate()
    return layout


def _layout(text: TileLayout | str, shape: tuple[int, ...]) -> TileLayout:
    try:
        layout = _checked(text)
    except LayoutError as e:
        at_char = f" at character {e.position}" if e.position is not None else ""
        spec = f" ({e.spec!r}{at_char})" if e.spec else ""
        raise errors.program_error(f"invalid layout: {e.message}{spec}") from None
    if layout.shape != shape:
        raise errors.program_error(f"layout {layout} has shape {layout.shape}, the buffer "
                                   f"{shape}")
    return layout


_ASSIGNED = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]*)?=[^=]")


def _assigned_name() -> str | None:
    """The variable the user's line assigns (`A_smem = tl.alloc_shared(...)`): the buffer's
    name in the printed IR."""
    where = errors.place()
    found = _ASSIGNED.match(linecache.getline(where.file, where.line))
    return found.group(1) if found else None


def _alloc(shape: tuple[int, ...], dtype: str, layout: TileLayout, space: str) -> Tensor:
    from tile_mlir.lowering.support.buffers import layout_type

    name = _assigned_name()
    with at():
        memory = ir.Attribute.parse(_SPACES[space])
        plain = ir.MemRefType.get(list(shape), builder.element_type(dtype),
                                  memory_space=memory)
        type_ = layout_type(layout, plain) if space == "shared" else plain
        where = ir.Location.current if name is None else \
            ir.Location.name(name, ir.Location.current)
        op = tile.AllocOp(type_, layout, loc=where)
    return Tensor(op.buffer, shape, dtype, space, layout=str(layout))


def alloc_shared(shape: int | Sequence[Any], dtype: Any,
                 layout: TileLayout | str | None = None) -> Tensor:
    """A shared-memory tile (tile.alloc), row-major `S[shape]` unless a layout says."""
    dims = _static_shape(shape)
    chosen = _layout(layout if layout is not None else TileLayout.row_major(dims), dims)
    if chosen.is_distributed:
        raise errors.program_error(f"shared memory takes a memory layout; {chosen} spreads "
                                   "over threads (that is a register tile: tl.alloc_reg)")
    return _alloc(dims, dtype_name(dtype), chosen, "shared")


def alloc_reg(shape: int | Sequence[Any], dtype: Any, layout: TileLayout | str) -> Tensor:
    """A register tile (tile.alloc) spread over threads as the layout says
    (`S[(32, 8):(1@laneid, 1)]`: lane i holds row i)."""
    dims = _static_shape(shape)
    return _alloc(dims, dtype_name(dtype), _layout(layout, dims), "local")


# ------------------------------------------------------------------ tile ops


def _attribute(value: Any) -> ir.Attribute:
    if isinstance(value, bool):
        return ir.BoolAttr.get(value)
    if isinstance(value, int):
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
    if isinstance(value, float):
        return ir.FloatAttr.get_f64(value)
    if isinstance(value, str):
        return ir.StringAttr.get(value)
    raise errors.program_error(f"an op option is an int, float, bool or str, got {value!r}")


def _options(op: ir.OpView, options: dict[str, Any]) -> None:
    for name, value in options.items():
        op.operation.attributes[name] = _attribute(value)


def _tensor(value: Any, what: str) -> Tensor:
    if not isinstance(value, Tensor):
        raise errors.program_error(f"{what} must be a tl.Tensor, got {type(value).__name__}")
    return value


def _check_shapes(dst: Tensor, src: Tensor, what: str, tails: bool = False) -> None:
    """Same rank; static dims equal, or 1 in the source (broadcast). With `tails` (a
    register tile among the operands) the extents are tile-verify's to check: a memory
    operand may end before the register tile (dst too: the op applies on the overlap)."""
    if src.rank != dst.rank:
        raise errors.program_error(f"{what} is {src.rank}-d, dst {dst.rank}-d")
    if tails:
        return
    for dim, (s, d) in enumerate(zip(src.sizes, dst.sizes, strict=True)):
        if isinstance(s, int) and isinstance(d, int) and s not in (d, 1):
            raise errors.program_error(f"{what} has size {s} at dim {dim}, dst {d}")


def _suggest(name: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _row(op: str) -> op_table.EwOp:
    row = op_table.lookup(op)
    if row is None:
        known = sorted([*op_table.ELEMENTWISE, *op_table.ALIASES])
        raise errors.program_error(f"unknown elementwise op '{op}'{_suggest(op, known)}")
    return row


def _reference(row: op_table.EwOp, n: int, dst: Tensor, inputs: Sequence[Any]) -> str:
    """The dtype a number's type follows: its own kind for kept inputs, the other inputs'
    for predicates, dst's otherwise (tile-verify's _promotes: a number's kind may not
    exceed it)."""
    if n in row.keep:
        return ""
    if row.out == "bool":
        others = [x.dtype for i, x in enumerate(inputs)
                  if isinstance(x, Tensor | Scalar) and i not in row.keep]
        return promote(others) if others else "f32"
    return dst.dtype


def promote(dtypes: Sequence[str]) -> str:
    result = dtypes[0]
    for d in dtypes[1:]:
        result = promote_types(result, d)
    return result


def _number_type(value: float | int | bool, reference: str) -> str:
    """The element type of a number input: kept inputs by the number's own kind (bool i1,
    int i64, float f64); others no higher in kind than the reference (dst's type)."""
    kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "float"
    if not reference:
        return {"bool": "bool", "int": "i64", "float": "f64"}[kind]
    ref = DTYPES[reference]
    if kind == "bool":
        return "bool"
    if KIND_ORDER.index(kind) > KIND_ORDER.index(ref.kind):
        raise errors.program_error(f"the {kind} {value!r} does not fit a {reference} op")
    if ref.kind == "float":
        return "f64" if reference == "f64" else "f32"
    return reference if ref.kind == "int" else "i64"


def _input(row: op_table.EwOp, n: int, x: Any, dst: Tensor, inputs: Sequence[Any]
           ) -> ir.Value:
    if isinstance(x, Tensor):
        registers = any(isinstance(t, Tensor) and t.space == "local" for t in (dst, *inputs))
        _check_shapes(dst, x, f"input {n}", tails=registers)
        return x.value
    if isinstance(x, Scalar):
        return x.value
    if isinstance(x, Index):
        raise errors.program_error(f"input {n} is a tl.Index: convert it to a number type "
                                   "with .to('i64')")
    if isinstance(x, int | float | bool):
        return builder.scalar_constant(_number_type(x, _reference(row, n, dst, inputs)), x)
    raise errors.program_error(f"input {n} must be a tl.Tensor, a scalar or a number, got "
                               f"{type(x).__name__}")


def elementwise(scope: str, op: str, dst: Any, inputs: Sequence[Any],
                options: dict[str, Any]) -> None:
    if op == fusion.FUSED:
        fused(scope, dst, inputs, options)
        return
    row = _row(op)
    if len(inputs) != row.arity:
        raise errors.program_error(f"'{row.name}' takes {row.arity} input(s), got "
                                   f"{len(inputs)}")
    target = _tensor(dst, "dst")
    variant = options.pop("variant", None)
    with at():
        values = [_input(row, n, x, target, inputs) for n, x in enumerate(inputs)]
        built = tile.ElementwiseOp(row.name, target.value, values, scope=scope,
                                   variant=variant)
        _options(built, options)
    builder.mark_written(target)


def _fused_input(n: int, x: Any, dst: Tensor) -> ir.Value:
    if isinstance(x, Tensor):
        _check_shapes(dst, x, f"input {n}")
        return x.value
    if isinstance(x, Scalar):
        return x.value
    raise errors.program_error(f"input {n} of a fused op is a tl.Tensor or a typed scalar "
                               f"(its steps take their types), got {type(x).__name__}")


def fused(scope: str, dst: Any, inputs: Sequence[Any], options: dict[str, Any]) -> None:
    """tile.elementwise {op = "fused"}: the steps of `expr` (op_table/fusion.py: strings
    `row(%0, $1) : dtype`) over the inputs; tile-verify checks them."""
    expr = options.pop("expr", None)
    if not isinstance(expr, list | tuple) or not expr or \
            not all(isinstance(step, str) for step in expr):
        raise errors.program_error("a fused op takes expr=[step, ...], each step a string "
                                   "'row(%0, $1) : dtype' (op_table/fusion.py)")
    target = _tensor(dst, "dst")
    variant = options.pop("variant", None)
    with at():
        values = [_fused_input(n, x, target) for n, x in enumerate(inputs)]
        built = tile.ElementwiseOp(fusion.FUSED, target.value, values, scope=scope,
                                   variant=variant)
        built.operation.attributes["expr"] = ir.ArrayAttr.get(
            [ir.StringAttr.get(step) for step in expr])
        _options(built, options)
    builder.mark_written(target)


def copy(scope: str, dst: Any, src: Any, options: dict[str, Any]) -> None:
    target, source = _tensor(dst, "dst"), _tensor(src, "src")
    if target.rank != source.rank:
        raise errors.program_error(f"copy from a {source.rank}-d tensor into a "
                                   f"{target.rank}-d one")
    if target.dtype != source.dtype:
        raise errors.program_error(f"copy from {source.dtype} into {target.dtype}: convert "
                                   f"with tl.{scope}.elementwise('copy', dst, src)")
    variant = options.pop("variant", None)
    with at():
        built = tile.CopyOp(target.value, source.value, scope=scope, variant=variant)
        _options(built, options)
    builder.mark_written(target)


def prefetch(scope: str, src: Any, options: dict[str, Any]) -> None:
    source = _tensor(src, "src")
    if source.space != "global":
        raise errors.program_error(f"prefetch of a tensor in {source.space} memory: only "
                                   "global memory goes through the L2 cache")
    variant = options.pop("variant", None)
    with at():
        built = tile.PrefetchOp(source.value, scope=scope, variant=variant)
        _options(built, options)


REDUCTIONS = {"sum": "sum", "prod": "prod", "amax": "max", "amin": "min", "max": "max",
              "min": "min", "online_softmax": "online_softmax", "welford": "welford"}


def _tensors(value: Any, name: str, kind: str, arity: int) -> list[Tensor]:
    """One tensor, or a tuple kind's k of them."""
    if arity == 1:
        return [_tensor(value, name)]
    if not isinstance(value, list | tuple) or len(value) != arity:
        raise errors.program_error(f"a '{kind}' reduction takes {name} as a tuple of "
                                   f"{arity} tensors, got {type(value).__name__}")
    tensors = [_tensor(v, f"{name}[{i}]") for i, v in enumerate(value)]
    for i, t in enumerate(tensors):
        if t.space != "local":
            raise errors.program_error(f"a '{kind}' reduction folds register tiles "
                                       f"(tl.alloc_reg): {name}[{i}] is in {t.space} memory")
    return tensors


def reduce(scope: str, kind: str, dst: Any, src: Any, *, axes: Sequence[int] | int | None,
           accum: bool, scale: float | None, options: dict[str, Any]) -> None:
    if kind not in REDUCTIONS:
        raise errors.program_error(f"unknown reduction '{kind}'{_suggest(kind, list(REDUCTIONS))}")
    arity = op_table.REDUCE_KINDS[REDUCTIONS[kind]].arity
    targets, sources = _tensors(dst, "dst", kind, arity), _tensors(src, "src", kind, arity)
    source = sources[0]
    for name, t in [*(("dst", t) for t in targets), *(("src", t) for t in sources[1:])]:
        if arity > 1 and (t.shape != source.shape or t.layout != source.layout):
            raise errors.program_error(
                f"a '{kind}' reduction takes tiles of one shape and layout (each element of "
                f"a dst the result at its position): {name} {list(t.shape)} {t.layout}, "
                f"src[0] {list(source.shape)} {source.layout}")
    chosen = None if axes is None else (axes,) if isinstance(axes, int) else tuple(axes)
    for axis in chosen or ():
        if not isinstance(axis, int) or not -source.rank <= axis < source.rank:
            raise errors.program_error(f"axis {axis!r} is not an axis of a {source.rank}-d "
                                       "tensor")
    variant = options.pop("variant", None)
    more = [t.value for pair in zip(targets[1:], sources[1:], strict=True) for t in pair]
    with at():
        built = tile.ReduceOp(REDUCTIONS[kind], targets[0].value, source.value, axes=chosen,
                              accum=accum, scale=scale, scope=scope, variant=variant,
                              more=more)
        _options(built, options)
    for target in targets:
        builder.mark_written(target)


class Scope:
    """The tile ops at one execution scope: `tl.cta.add(dst, a, b)`, `tl.warp.copy(d, s)`.
    Every elementwise row of tile_mlir.op_table is a method by its name (and the aliases
    max, min); `elementwise(op, ...)` names one by a string."""

    def __init__(self, name: str):
        self.name = name

    def copy(self, dst: Tensor, src: Tensor, **options: Any) -> None:
        """tile.copy: dst <- src (same dtype; shapes may differ where the lowering allows)."""
        copy(self.name, dst, src, options)

    def prefetch(self, src: Tensor, **options: Any) -> None:
        """tile.prefetch: bring the cache lines of src (a view of global memory) into L2,
        the scope's threads sharing them: a hint that src is read soon (a row a later
        CTA reads, fetched while this one reduces). It writes nothing and waits for
        nothing; an empty view (a slice past the end) fetches nothing."""
        prefetch(self.name, src, options)

    def elementwise(self, op: str, dst: Tensor, *inputs: Any, **options: Any) -> None:
        """tile.elementwise: dst <- op(inputs...): tensors, scalars or numbers."""
        elementwise(self.name, op, dst, inputs, options)

    def fused(self, dst: Tensor, *inputs: Any, expr: Sequence[str], **options: Any) -> None:
        """tile.elementwise {op = "fused"}: dst <- the last of `expr`'s steps
        (op_table/fusion.py: `"add(%0, %1) : bf16"`, `"gelu($0) : bf16"`) over the inputs,
        tensors or typed scalars; `elementwise("fused", ..., expr=...)` is the same."""
        fused(self.name, dst, inputs, {**options, "expr": expr})

    def reduce(self, kind: str, dst: Tensor, src: Tensor, *,
               axes: Sequence[int] | int | None = None, accum: bool = False,
               scale: float | None = None, **options: Any) -> None:
        """tile.reduce of `kind` (sum, prod, max, min) over `axes` (None: all), into dst
        (the kept dims, or with the reduced ones as 1); accum combines with dst's old value,
        scale multiplies the result (1/n makes a mean)."""
        reduce(self.name, kind, dst, src, axes=axes, accum=accum, scale=scale,
               options=options)

    def sum(self, dst: Tensor, src: Tensor, axes: Sequence[int] | int | None = None, *,
            accum: bool = False, scale: float | None = None, **options: Any) -> None:
        reduce(self.name, "sum", dst, src, axes=axes, accum=accum, scale=scale,
               options=options)

    def prod(self, dst: Tensor, src: Tensor, axes: Sequence[int] | int | None = None, *,
            accum: bool = False, scale: float | None = None, **options: Any) -> None:
        reduce(self.name, "prod", dst, src, axes=axes, accum=accum, scale=scale,
               options=options)

    def amax(self, dst: Tensor, src: Tensor, axes: Sequence[int] | int | None = None, *,
            accum: bool = False, scale: float | None = None, **options: Any) -> None:
        reduce(self.name, "max", dst, src, axes=axes, accum=accum, scale=scale,
               options=options)

    def amin(self, dst: Tensor, src: Tensor, axes: Sequence[int] | int | None = None, *,
            accum: bool = False, scale: float | None = None, **options: Any) -> None:
        reduce(self.name, "min", dst, src, axes=axes, accum=accum, scale=scale,
               options=options)

    def online_softmax(self, dst: Sequence[Tensor], src: Sequence[Tensor],
                       axes: Sequence[int] | int | None = None, **options: Any) -> None:
        """dst = (M, S) from the pairs src = (m, s) over `axes`: M the max of m, S the sum
        of s * exp(m - M) (a term whose m is M counts s itself). Softmax's statistics of
        parts, each (its max, its sum of exp(x - that max)), meet in one reduction. The
        four register tiles have one shape and layout: each element of M and S takes
        the result over the reduced axes of its position."""
        reduce(self.name, "online_softmax", dst, src, axes=axes, accum=False, scale=None,
               options=options)

    def welford(self, dst: Sequence[Tensor], src: Sequence[Tensor],
                axes: Sequence[int] | int | None = None, **options: Any) -> None:
        """dst = (n, mean, M2) of the union of disjoint parts, src = their (n, mean, M2)
        (M2: the sum of squared deviations from the part's mean), over `axes`; shapes
        and layouts as online_softmax's."""
        reduce(self.name, "welford", dst, src, axes=axes, accum=False, scale=None,
               options=options)

    def __getattr__(self, op: str) -> Any:
        if op.startswith("_"):
            raise AttributeError(op)
        _row(op)

        def apply(dst: Tensor, *inputs: Any, **options: Any) -> None:
            elementwise(self.name, op, dst, inputs, options)

        apply.__name__ = op
        return apply

    def __repr__(self) -> str:
        return f"tl.{self.name}"


thread = Scope("thread")
warp = Scope("warp")
warpgroup = Scope("warpgroup")
cta = Scope("cta")
cluster = Scope("cluster")
"""The threads of a thread block cluster (a kernel with `cluster=`), numbered CTA by CTA:
a register layout over `tid` spreads a tile over the cluster's CTAs."""
