"""tile-verify: the semantic rules of the tile dialect, reported at each op.

IRDL has already checked structure (operand kinds, required attributes);
this pass checks meaning: known attribute names and values, a scope the
enclosing kernel can run (a cluster: a kernel with nvvm.cluster_dim, whole warps,
no shared operands, a fixed grid of whole clusters), op names and arities from the
op registry, shapes (elementwise inputs equal to the tile or broadcast from 1,
memory operands beside a register tile possibly ending before it; copies of one
rank, the overlap copied, padding only into a static dst at least as large as src),
element types the op accepts, reductions' axes, and allocations' layouts; and, for
every memref in the module (tile ops or not), a size MLIR can compute and a memory
space LLVM has an address space for (both abort the process downstream). A
fused elementwise op (op = "fused") has each step of its `expr` checked as its
unfused op would be (op_table/fusion.py). Every broken rule is one error at the
op's location; the pass fails if there is any.
"""

from __future__ import annotations

import difflib
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mlir import ir

from tile_mlir import lowering, op_table
from tile_mlir.contract import SCOPE_THREADS, WARP
from tile_mlir.dialects import tile
from tile_mlir.dtypes import DTYPES, KIND_ORDER, promote_types
from tile_mlir.layout import LayoutError
from tile_mlir.lowering.support.analysis import (
    CLUSTER_DIM,
    DYNAMIC,
    Operand,
    OpInfo,
    cluster_dim,
    describe,
    describe_operand,
    enclosing,
    index_bits,
    iteration_shape,
    known_block_size,
    memory_space,
)
from tile_mlir.lowering.support.buffers import layout_type
from tile_mlir.op_table import fusion
from tile_mlir.passes import TilePass, op_error, tile_ops

ATTRIBUTES = {
    "tile.copy": ("scope", "variant", "padding"),
    "tile.elementwise": ("op", "scope", "variant", "operandSegmentSizes", "vector_bytes",
                         "stage", "expr"),
    "tile.reduce": ("kind", "scope", "axes", "accum", "scale", "variant"),
    "tile.prefetch": ("scope", "variant"),
    "tile.alloc": ("layout",),
}


def _shape(shape: tuple[int, ...]) -> str:
    return "x".join("?" if d == DYNAMIC else str(d) for d in shape) or "scalar"


def _suggest(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def check_attributes(op: ir.OpView) -> list[str]:
    allowed = ATTRIBUTES[op.operation.name]
    errors = []
    for name in op.operation.attributes:
        if "." not in name and name not in allowed:
            errors.append(f"has unknown attribute '{name}'{_suggest(name, list(allowed))}")
    return errors


MAX_BLOCK = (1024, 1024, 64)
MAX_BLOCK_THREADS = 1024
"""The largest CTA (every GPU since compute capability 2.0): per dimension, and in all."""


def check_block(block: tuple[int, int, int] | None) -> list[str]:
    """A known_block_size CUDA can launch: what the lowering divides by and what NVVM
    turns into .maxntid (which aborts compilation on a negative value)."""
    if block is None:
        return []
    if min(block) < 1:
        return [f"is in a kernel with known_block_size = array<i32: "
                f"{', '.join(map(str, block))}>, but a block has at least 1 thread in "
                f"each dimension"]
    if math.prod(block) > MAX_BLOCK_THREADS or \
            any(d > top for d, top in zip(block, MAX_BLOCK, strict=True)):
        return [f"is in a kernel whose block ({'x'.join(map(str, block))}) is larger than "
                f"a CTA can be (at most {MAX_BLOCK[0]}x{MAX_BLOCK[1]}x{MAX_BLOCK[2]}, "
                f"{MAX_BLOCK_THREADS} threads): it could not be launched"]
    return []


def check_scope(info: OpInfo) -> list[str]:
    """A scope the kernel can run: known, inside a gpu.func, and for warp and warpgroup
    scope a block of whole warps or warpgroups. A partial warp or warpgroup is refused,
    not shrunk: its op would be another op (the tile's elements over fewer threads, its
    named barrier a count the hardware reaches with other warps), and scope 'cta' already
    spreads an op over whatever threads the block has (dialect/tile.irdl.mlir)."""
    scope = info.scope
    if scope not in tile.SCOPES:
        return [f"has scope '{scope}', expected one of {', '.join(tile.SCOPES)}"]
    if info.kernel is None:
        return ["must be inside a gpu.func"]
    errors = check_block(info.block)
    if errors:
        return errors
    if scope == "thread":
        return []
    if info.block is None:
        why = " (launched with a partial warp, the lanes it lacks would leave their part " \
            "of the op undone)" if scope == "warp" else ""
        return [f"at scope '{scope}' needs the kernel's thread count: give the enclosing "
                f"gpu.func known_block_size = array<i32: x, y, z>{why}"]
    threads = math.prod(info.block)
    if scope == "cluster":
        if threads % WARP:
            return [f"at scope 'cluster' needs whole warps, but the block has {threads} "
                    f"threads: its last warp would have {threads % WARP} of {WARP} threads"]
        return check_cluster(info)
    width = SCOPE_THREADS.get(scope)
    if width and threads % width:
        return [f"at scope '{scope}' needs whole {scope}s, but the block has {threads} "
                f"threads: its last {scope} would have {threads % width} of {width} threads "
                "(scope 'cta' spreads the op over the block's threads)"]
    return []


MAX_CLUSTER = 16
"""CTAs of the largest cluster an sm_90 GPU runs. More than 8 are not portable: the
runtime allows them per function when it loads one (driver.allow_cluster)."""


def check_cluster_dims(cluster: tuple[int, int, int] | None) -> list[str]:
    """A kernel's nvvm.cluster_dim NVVM can translate (it refuses a size under 1 with an
    error that has no location): reported at the kernel (`_check_kernels`)."""
    if cluster is None or min(cluster) >= 1:
        return []
    return [f"has {CLUSTER_DIM} = array<i32: {', '.join(map(str, cluster))}>, but a cluster "
            "has at least 1 CTA in each dimension"]


def check_cluster(info: OpInfo) -> list[str]:
    """A cluster-scope op: its kernel runs in clusters (nvvm.cluster_dim) of at most
    MAX_CLUSTER CTAs, on a grid (where the kernel fixes one) of whole clusters, and its
    operands are in global memory or registers (each CTA has shared memory of its own)."""
    kernel = info.kernel
    assert kernel is not None
    if info.cluster is None:
        return [f"at scope 'cluster' needs the kernel's cluster: give the enclosing gpu.func "
                f"{CLUSTER_DIM} = array<i32: x, y, z>"]
    if check_cluster_dims(info.cluster):
        return []  # the kernel's error says it (_check_kernels)
    if info.cluster_ctas and info.cluster_ctas > MAX_CLUSTER:
        return [f"runs in clusters of {info.cluster_ctas} CTAs ({CLUSTER_DIM}); at most "
                f"{MAX_CLUSTER} (sm_90's largest cluster)"]
    errors = []
    grid = kernel.operation.attributes.get("known_grid_size")
    if grid is not None:
        sizes = [*ir.DenseI32ArrayAttr(grid), 1, 1][:3]
        if any(g % c for g, c in zip(sizes, info.cluster, strict=True)):
            errors.append(f"runs on a grid of {tuple(sizes)} CTAs, which is not whole "
                          f"clusters of {info.cluster}")
    for operand in info.memrefs:
        if operand.space == "shared":
            errors.append(f"operand {operand.index} is in shared memory, which each CTA of "
                          "a cluster has its own of: at scope 'cluster' operands are in "
                          "global memory or registers")
    return errors


_SCOPE_AXES = {"thread": (), "warp": ("laneid", "tid"), "warpgroup": ("laneid", "warpid", "tid"),
               "cta": ("laneid", "warpid", "wgid", "tid"),
               "cluster": ("laneid", "warpid", "wgid", "tid")}


def check_registers(info: OpInfo) -> list[str]:
    """Register operands: a layout whose threads are exactly the scope's."""
    errors = []
    threads = info.scope_threads
    seen: set[ir.Value] = set()
    for operand in info.memrefs:
        if operand.space != "local" or operand.value in seen:
            continue
        seen.add(operand.value)
        layout = operand.layout
        if layout is None:
            if info.scope != "thread":
                errors.append(f"operand {operand.index} is a register buffer without a layout, "
                              f"which only scope 'thread' can use: allocate it with tile.alloc")
            continue
        stray = [a for a in layout.thread_axes if a not in _SCOPE_AXES[info.scope]]
        if stray:
            errors.append(f"operand {operand.index} has layout {layout} over {', '.join(stray)}, "
                          f"which scope '{info.scope}' does not have")
        elif layout.is_distributed and threads is not None and layout.thread_count != threads:
            errors.append(f"operand {operand.index} has layout {layout} over "
                          f"{layout.thread_count} threads, but scope '{info.scope}' has {threads}")
    return errors


def check_variant(info: OpInfo) -> list[str]:
    forced = info.attr("variant")
    if forced is None:
        return []
    if not isinstance(forced, ir.StringAttr):
        return ["has a non-string 'variant' attribute"]
    name = ir.StringAttr(forced).value
    known = [v.name for v in lowering.variants_for(info.name)]
    if name not in known:
        return [f"names unknown variant '{name}' (variants: {', '.join(known)})"]
    return []


def check_elementwise(info: OpInfo) -> list[str]:
    op = info.op
    assert isinstance(op, tile.ElementwiseOp)
    if op.op_name == fusion.FUSED:
        return check_fused(info)
    if fusion.EXPR in op.operation.attributes:
        return [f"has '{fusion.EXPR}', which only op = \"{fusion.FUSED}\" takes"]
    row = op_table.lookup(op.op_name)
    if row is None:
        known = sorted([*op_table.ELEMENTWISE, *op_table.ALIASES, fusion.FUSED])
        return [f"has unknown op '{op.op_name}'{_suggest(op.op_name, known)}"]
    errors = _check_segments(op)
    if errors:
        return errors
    inputs = info.sources
    if len(inputs) != row.arity:
        return [f"'{row.name}' takes {row.arity} input(s), got {len(inputs)}"]
    errors = _check_options(info)
    for n, operand in enumerate(inputs):
        error = _check_input(row, n, operand)
        if error:
            errors.append(error)
    return errors or _check_shapes(info) or _check_types(row, info.dst.dtype.name, info.sources)


def _check_segments(op: ir.OpView) -> list[str]:
    segments = list(ir.DenseI32ArrayAttr(op.operation.attributes["operandSegmentSizes"]))
    if any(later and not earlier for earlier, later in itertools.pairwise(segments[1:])):
        return ["must fill its input slots in order (a, then b, then c and any more)"]
    return []


def check_fused(info: OpInfo) -> list[str]:
    """op = "fused" (op_table/fusion.py): the expression is well formed, its last step
    produces dst's type, and every step passes the checks its unfused op would have
    (scalar-only arguments, index bases, the row's types and promotion), a step's
    result counting as a tile of its dtype and dst's shape."""
    expr, errors = _fused_expr(info)
    if expr is None:
        return errors
    errors = _check_options(info) + _check_shapes(info)
    if errors:  # the steps would repeat a bad shape once per use
        return errors
    if expr.dtype != info.dst.dtype.name:
        errors.append(f"computes {expr.dtype} in its last step, but dst is "
                      f"{info.dst.dtype.name}")
    for k, step in enumerate(expr.steps):
        errors += [f"step {k} '{step}': {e}" for e in _check_step(expr, k, info)]
    return errors


def _fused_expr(info: OpInfo) -> tuple[fusion.Expr | None, list[str]]:
    """The fused op's expression, or None and what is wrong with it."""
    errors = _check_segments(info.op)
    attr = info.attr(fusion.EXPR)
    if attr is None or not isinstance(attr, ir.ArrayAttr) or \
            not all(isinstance(a, ir.StringAttr) for a in attr):
        return None, [*errors, f"needs '{fusion.EXPR}', its steps as an array of strings "
                      '(["add(%0, %1) : f32", "exp($0) : f32"])']
    try:
        expr = fusion.Expr.parse([ir.StringAttr(a).value for a in attr])
    except fusion.FusionError as e:
        return None, [*errors, f"has a malformed '{fusion.EXPR}': {e}"]
    errors += expr.problems(len(info.sources))
    return (None, errors) if errors else (expr, [])


def _check_step(expr: fusion.Expr, k: int, info: OpInfo) -> list[str]:
    """The unfused op's checks for step k: its arguments as that op's inputs (a step's
    result as a tile of the step's dtype), its dtype as that op's dst."""
    step = expr.steps[k]
    row = op_table.lookup(step.row)
    assert row is not None, "Expr.problems has checked the rows"
    dst = info.dst
    operands = [Operand(dst.value, dst.index, DTYPES[expr.steps[a.index].dtype], dst.memref,
                        dst.space, dst.layout) if a.step else info.sources[a.index]
                for a in step.args]
    errors = [e for n, operand in enumerate(operands)
              if (e := _check_input(row, n, operand))]
    return errors or _check_types(row, step.dtype, operands)


_OPTION_RANGES = {"vector_bytes": (1, 64), "stage": (1, 64)}


def _check_options(info: OpInfo) -> list[str]:
    """The lowering options (elementwise/gmem): small positive integers."""
    errors = []
    for name, (low, high) in _OPTION_RANGES.items():
        attr = info.attr(name)
        if attr is None:
            continue
        value = ir.IntegerAttr(attr).value if isinstance(attr, ir.IntegerAttr) else None
        if value is None or not low <= value <= high:
            errors.append(f"needs '{name}' as an integer in [{low}, {high}], got {attr}")
    return errors


def _check_types(row: op_table.EwOp, dst: str, sources: Sequence[Operand]) -> list[str]:
    """dst's type fits the row's output rule, and the inputs promote to a type the op
    is defined on (op_table's promotion: integers into floats, narrow into wide; a
    scalar, like torch's Python numbers, only needs a kind no higher than dst's)."""
    inputs = [o.dtype.name for o in sources]
    if row.out == "bool":
        if dst != "bool":
            return [f"'{row.name}' produces bool, not {dst}"]
        promoted = row.promoted(inputs, dst)
        if promoted not in row.dtypes:
            return [f"'{row.name}' is not defined on {promoted} (element types: "
                    f"{', '.join(row.dtypes)})"]
        return []
    if row.out in ("same", "float") and dst not in row.dtypes:
        return [f"'{row.name}' cannot produce {dst} (element types: {', '.join(row.dtypes)})"]
    return [e for n, operand in enumerate(sources)
            if n not in row.keep and row.out != "any" and (e := _promotes(n, operand, dst))]


def _promotes(n: int, operand: Operand, dst: str) -> str:
    """Why input n cannot go into dst ("" when it can): the inputs promote together with
    dst, and the result is stored as torch's out= stores it, narrowing within a kind
    (f32 into bf16, i64 into i32) but never into a lower kind (a float into an integer
    or bool tile)."""
    name = operand.dtype.name
    if not operand.is_memref:
        if KIND_ORDER.index(operand.dtype.kind) > KIND_ORDER.index(DTYPES[dst].kind):
            return f"scalar input {n} of type {name} does not match the {dst} tile"
        return ""
    promoted = promote_types(name, dst)
    if KIND_ORDER.index(DTYPES[promoted].kind) > KIND_ORDER.index(DTYPES[dst].kind):
        return (f"input {n} has element type {name}, whose {DTYPES[promoted].kind} results "
                f"cannot be stored into dst's {dst}")
    return ""


def _check_input(row: op_table.EwOp, n: int, operand: Operand) -> str:
    """What is wrong with input n of an elementwise op ("" when nothing)."""
    if row.indexed and n == row.arity - 1 and \
            (operand.is_memref or operand.dtype.name != "i64"):
        return (f"input {n} of '{row.name}' is its index base: an i64 scalar, not "
                f"{'a tile' if operand.is_memref else operand.dtype.name}")
    if operand.is_memref and n in row.scalar_only:
        return f"input {n} of '{row.name}' must be a scalar"
    want = row.kept_type(n)
    if want is not None and operand.dtype.name != want:
        return f"input {n} of '{row.name}' is an {want} scalar, not {operand.dtype.name}"
    return ""


def _check_shapes(info: OpInfo) -> list[str]:
    """Every tile operand against the op's tile: dst's shape, or with register operands
    the register tile's (iteration_shape). An input may have size 1 where the tile has
    more (a broadcast: read at index 0); beside a register tile, a memory operand may
    be dynamic or smaller on a dim (a tail: the op applies on the overlap)."""
    dst = info.dst
    for operand in info.sources:
        if operand.is_memref and len(operand.shape) != len(dst.shape):
            return [f"input {operand.index - 1} has shape {_shape(operand.shape)}, but dst "
                    f"has shape {_shape(dst.shape)} (a rank of its own)"]
    over = iteration_shape(info)
    registers = any(o.space == "local" for o in info.memrefs)
    for operand in info.memrefs:
        problem = _shape_problem(operand, over, registers)
        if problem:
            return [problem]
    return []


def _shape_problem(operand: Operand, over: tuple[int, ...], registers: bool) -> str:
    """Why one operand's shape does not fit the tile `over` ("" when it does)."""
    tail_ok = registers and operand.space != "local"
    for own, full in zip(operand.shape, over, strict=True):
        if own == full or (operand.index and own == 1):
            continue
        if tail_ok and (own == DYNAMIC or own < full):
            continue
        what = "dst" if not operand.index else f"input {operand.index - 1}"
        tile = "the register tile" if registers else "dst"
        rules = ("equal, 1 for an input (a broadcast) or, for a memory operand, dynamic or "
                 "smaller (the overlap)") if registers else "equal, or 1 (a broadcast)"
        return (f"{what} has shape {_shape(operand.shape)}, but {tile} has shape "
                f"{_shape(over)} (each extent must be {rules})")
    return ""


def check_copy(info: OpInfo) -> list[str]:
    """Equal ranks and element types; extents may differ (the overlap is copied), but
    not between two register tiles; `padding` (checked by _check_padding) fills a
    static dst past src's extent."""
    dst, src = info.dst, info.sources[0]
    errors = []
    if len(src.shape) != len(dst.shape):
        errors.append(f"copies shape {_shape(src.shape)} into {_shape(dst.shape)}, "
                      "a tile of another rank")
    elif src.shape != dst.shape and src.space == dst.space == "local":
        errors.append(f"copies shape {_shape(src.shape)} into {_shape(dst.shape)}: register "
                      "tiles copy whole (only a memory side may end before the tile)")
    if src.dtype.name != dst.dtype.name:
        errors.append(f"copies {src.dtype.name} into {dst.dtype.name}")
    return errors or _check_padding(info)


def _check_padding(info: OpInfo) -> list[str]:
    attr = info.attr("padding")
    if attr is None:
        return []
    dst, src = info.dst, info.sources[0]
    if not isinstance(attr, ir.FloatAttr | ir.IntegerAttr) or isinstance(attr, ir.BoolAttr):
        return [f"needs 'padding' as a number (a float or integer attribute), got {attr}"]
    if isinstance(attr, ir.FloatAttr) and not dst.dtype.is_float:
        return [f"pads a {dst.dtype.name} tile with the float {attr}"]
    for d, (to, from_) in enumerate(zip(dst.shape, src.shape, strict=True)):
        if to == DYNAMIC and from_ != DYNAMIC:
            return [f"pads dst past src's extent, but dst's dim {d} is dynamic: padding "
                    "fills a static dst"]
        if from_ not in (DYNAMIC, to) and to != DYNAMIC and to < from_:
            return [f"pads dst ({_shape(dst.shape)}), which is smaller than src "
                    f"({_shape(src.shape)}) in dim {d}: padding fills a dst at least as "
                    "large as src"]
    return []


def check_reduce(info: OpInfo) -> list[str]:
    op = info.op
    assert isinstance(op, tile.ReduceOp)
    errors = []
    kind = op_table.REDUCE_KINDS.get(op.kind)
    if kind is None:
        errors.append(f"has unknown kind '{op.kind}' (kinds: {', '.join(op_table.REDUCE_KINDS)})")
    accum = info.attr("accum")
    if accum is not None and not isinstance(accum, ir.BoolAttr):
        errors.append("has a non-boolean 'accum' attribute")
    scale = info.attr("scale")
    if scale is not None and not isinstance(scale, ir.FloatAttr):
        errors.append("has a non-float 'scale' attribute")
    axes_attr = info.attr("axes")
    if axes_attr is not None and not isinstance(axes_attr, ir.DenseI64ArrayAttr):
        return [*errors, "needs 'axes' as array<i64: ...>"]
    arity = kind.arity if kind is not None else 1
    if len(info.operands) != 2 * arity:
        pairs = "one (dst, src) pair" if arity == 1 else f"{arity} (dst, src) pairs"
        return [*errors, f"of kind '{op.kind}' takes {pairs} of operands, got "
                         f"{len(info.operands)} operands"]
    src, dst = info.sources[0], info.dst
    rank = len(src.shape)
    axes = op.axes if op.axes is not None else list(range(rank))
    normalized = [a + rank if a < 0 else a for a in axes]
    if any(not 0 <= a < rank for a in normalized) or len(set(normalized)) != len(normalized):
        return [*errors, f"has axes {axes}, not distinct axes of a rank-{rank} tile"]
    if arity > 1:
        return errors + _tuple_problems(info, op.kind, accum is not None or scale is not None)
    return errors + _reduce_shape_problems(src, dst, axes, normalized)


def _reduce_shape_problems(src: Operand, dst: Operand, axes: list[int],
                           normalized: list[int]) -> list[str]:
    """A one-value reduction's extents and element types against its dst's."""
    if DYNAMIC in src.shape or DYNAMIC in dst.shape:
        # its reducers walk the shapes: a dynamic extent left no loop (an empty kernel),
        # or an index past it
        return [f"reduces {_shape(src.shape)} into {_shape(dst.shape)}, but a reduction's "
                "tiles need static extents: take a static subview (memref.subview) or a "
                "tile of static shape first"]
    errors = []
    kept = tuple(d for i, d in enumerate(src.shape) if i not in normalized)
    with_ones = tuple(1 if i in normalized else d for i, d in enumerate(src.shape))
    if dst.shape not in (kept, with_ones) and not (kept == () and dst.shape == (1,)):
        errors.append(f"reduces {_shape(src.shape)} over axes {axes} to {_shape(kept)}, "
                      f"but dst has shape {_shape(dst.shape)}")
    # Floats reduce into any float type (the accumulation type is f32 for halves and the
    # result rounds once at the store); other types into their own.
    if dst.dtype.name != src.dtype.name and not (dst.dtype.is_float and src.dtype.is_float):
        errors.append(f"reduces {src.dtype.name} into {dst.dtype.name}")
    return errors


def _tuple_problems(info: OpInfo, kind: str, accum_or_scale: bool) -> list[str]:
    """A tuple kind's operands: register tiles of floats of one shape and layout (each
    element of a dst takes the result of its position's reduced axes; the i-th elements
    of the sources make a tuple); no accum or scale (a tuple has no one old value to
    combine with, nor one to scale)."""
    errors = []
    if accum_or_scale:
        errors.append(f"of kind '{kind}' takes no 'accum' or 'scale'")
    first = info.operands[1]
    for operand in info.operands:
        role = "dst" if operand.index % 2 == 0 else "src"
        if operand.space != "local":
            errors.append(f"of kind '{kind}' reduces register tiles: {role} (operand "
                          f"{operand.index}) is in {operand.space} memory")
        elif not operand.dtype.is_float:
            errors.append(f"of kind '{kind}' reduces floats: {role} (operand "
                          f"{operand.index}) is {operand.dtype.name}")
        elif operand.shape != first.shape or str(operand.layout) != str(first.layout):
            errors.append(f"of kind '{kind}' takes operands of one shape and layout: "
                          f"{role} (operand {operand.index}) is {_shape(operand.shape)} "
                          f"{operand.layout}, src {_shape(first.shape)} {first.layout}")
    return errors


def check_alloc(op: ir.OpView) -> list[str]:
    assert isinstance(op, tile.AllocOp)
    type_ = ir.MemRefType(op.buffer.type)
    space = memory_space(type_)
    if space not in ("shared", "local"):
        return ["makes shared (#gpu.address_space<workgroup>) or register "
                "(#gpu.address_space<private>) buffers, not " + space]
    if enclosing(op, "gpu.func") is None:
        return ["must be inside a gpu.func"]
    try:
        layout = op.layout
    except LayoutError as e:
        return [f"has an invalid layout: {e}"]
    shape = tuple(type_.shape)
    if DYNAMIC in shape:
        return ["needs a static shape"]
    if layout.shape != shape:
        return [f"has layout of shape {_shape(layout.shape)} for a {_shape(shape)} buffer"]
    if space == "shared" and layout.is_distributed:
        return [f"puts a thread-distributed layout ({layout}) on shared memory"]
    kernel = enclosing(op, "gpu.func")
    block = known_block_size(kernel)
    cluster = cluster_dim(kernel)
    most = math.prod(block) * (math.prod(cluster) if cluster else 1) if block else 0
    if block and layout.thread_count > most:
        where = f"the cluster has {most}" if cluster else f"the block has {most}"
        return [f"layout spans {layout.thread_count} threads, {where}"]
    users = sorted({use.owner.operation.name for use in op.buffer.uses} - set(tile.OP_NAMES))
    if users and space == "local":
        return [f"is used by {', '.join(users)}: only tile ops understand a register layout"]
    if users and type_ != layout_type(layout, type_):
        return [f"is used by {', '.join(users)}, so its type must spell its layout: "
                f"{layout_type(layout, type_)}"]
    return []


def check_prefetch(info: OpInfo) -> list[str]:
    """A view of global memory (the L2 holds nothing else a prefetch could bring)."""
    src = info.operands[0]
    if src.space != "global":
        return [f"prefetches a tile in {src.space} memory: only global memory goes through "
                "the L2 cache"]
    return []


_CHECKS: dict[str, Callable[[OpInfo], list[str]]] = {
    "tile.elementwise": check_elementwise,
    "tile.copy": check_copy,
    "tile.reduce": check_reduce,
    "tile.prefetch": check_prefetch,
}


_MAX_ELEMENTS = (1 << 63) - 1


def oversized(type_: ir.Type) -> str:
    """Why a memref type is too large for MLIR ("" when it is not): MLIR asserts (and
    aborts) when it computes the strides of a shape whose size overflows 64 bits."""
    if not isinstance(type_, ir.MemRefType):
        return ""
    size = math.prod(d for d in ir.MemRefType(type_).shape if d > 0)
    if size <= _MAX_ELEMENTS:
        return ""
    return f"has type {type_}, whose {size} elements overflow a 64-bit size"


ADDRESS_SPACES = 1 << 24
"""LLVM's address spaces are 24-bit numbers."""


def foreign_space(type_: ir.Type) -> str:
    """Why a memref type's memory space is no LLVM address space ("" when it is one or is
    not a number): lowering to LLVM aborts on a number past 24 bits or below 0 (-1 and -2,
    `true` among them, are its address-space maps' reserved keys) and wraps 2^32 to 0."""
    if not isinstance(type_, ir.MemRefType):
        return ""
    space = ir.MemRefType(type_).memory_space
    if isinstance(space, ir.BoolAttr):  # an i1: true is -1 to LLVM
        value, text = (-1, "true (-1)") if ir.BoolAttr(space).value else (0, "false")
    elif isinstance(space, ir.IntegerAttr):
        value = ir.IntegerAttr(space).value
        text = str(value)
    else:
        return ""
    if 0 <= value < ADDRESS_SPACES:
        return ""
    return f"has type {type_}, whose memory space {text} is no address space (0 to " \
        f"{ADDRESS_SPACES - 1})"


def _type_problem(type_: ir.Type) -> str:
    return oversized(type_) or foreign_space(type_)


def _element_types(op: ir.OpView) -> list[str]:
    """Operands the analysis can describe: known element types, strided memrefs."""
    errors = []
    for i, value in enumerate(op.operation.operands):
        if oversized(value.type):
            errors.append(f"operand {i} {oversized(value.type)}")
            continue
        try:
            operand = describe_operand(value, i)
        except ValueError as e:
            errors.append(f"operand {i}: {e}")
            continue
        try:
            operand.strides_and_offset  # noqa: B018 - the analysis reads it later
        except (RuntimeError, ValueError):
            errors.append(f"operand {i} has type {value.type}, whose layout is not strided")
    return errors


def verify_op(op: ir.OpView) -> list[str]:
    """Every rule `op` breaks, as messages (empty when it is valid)."""
    errors = check_attributes(op)
    if op.operation.name == "tile.alloc":
        too_large = oversized(op.operation.results[0].type)
        return errors + ([f"result {too_large}"] if too_large else check_alloc(op))
    errors += _element_types(op)
    if errors:
        return errors
    info = describe(op)
    errors = check_scope(info)
    if errors:
        return errors
    return check_variant(info) + check_registers(info) + _CHECKS[info.name](info)


@dataclass(frozen=True)
class Pass(TilePass):
    NAME = "tile-verify"
    SUMMARY = "check the semantic rules of tile ops"

    def run(self, root: ir.Operation) -> bool:
        if not _check_sizes(root):  # before anything asks MLIR for strides
            return False
        ok = True
        for op in tile_ops(root, tile.OP_NAMES):
            for message in verify_op(op):
                op_error(op, message)
                ok = False
        return _check_kernels(root) and ok


def _check_sizes(root: ir.Operation) -> bool:
    """Every memref value (block arguments, results, a bodiless function's signature) has
    a size MLIR can compute and a memory space LLVM can take, and every data layout an
    index width the NVVM lowering can take."""
    ok = True

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal ok
        errors = [(arg.location, f"argument {arg.arg_number} {problem}")
                  for region in op.regions for block in region.blocks
                  for arg in block.arguments if (problem := _type_problem(arg.type))]
        errors += [(op.location, f"'{op.name}' op result {i} {problem}")
                   for i, result in enumerate(op.results)
                   if (problem := _type_problem(result.type))]
        errors += [(op.location, f"'{op.name}' op {e}") for e in _signature(op)]
        errors += [(op.location, f"'{op.name}' op {e}") for e in index_width(op)]
        for location, message in errors:
            location.emit_error(message)
        ok = ok and not errors
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return ok


def _signature(op: ir.Operation) -> list[str]:
    """A function's argument and result types (its function_type), for one without a
    body (a declaration: no block arguments to check)."""
    if "function_type" not in op.attributes or any(r.blocks for r in op.regions):
        return []
    attr = op.attributes["function_type"]
    if not isinstance(attr, ir.TypeAttr) or not isinstance(attr.value, ir.FunctionType):
        return []
    signature = ir.FunctionType(attr.value)
    return [f"{role} {i} {problem}"
            for role, types in (("argument", signature.inputs), ("result", signature.results))
            for i, t in enumerate(types) if (problem := _type_problem(t))]


def index_width(op: ir.Operation) -> list[str]:
    """A dlti.dl_spec index width other than 32 or 64 bits: LLVM asserts (and aborts) on
    0, negative and huge ones, and no other width makes sense for a GPU kernel."""
    bits = index_bits(op)
    if bits is None or bits in (32, 64):
        return []
    return [f"has an index width of {bits} bits in dlti.dl_spec; kernels index with "
            "32 or 64 bits"]


def _check_kernels(root: ir.Operation) -> bool:
    """Kernels without tile ops need a valid known_block_size too (one with tile ops
    is reported at each op): NVVM aborts on a negative one. Every kernel needs a valid
    nvvm.cluster_dim (reported at the kernel, whose attribute it is)."""
    ok = True
    for func in tile_ops(root, ("gpu.func",)):
        errors = check_block(known_block_size(func))
        if errors and not tile_ops(func.operation):
            op_error(func, errors[0].replace("is in a kernel with", "has")
                     .replace("is in a kernel whose block", "has a block")
                     .replace(") is larger than", ") larger than"))
            ok = False
        for message in check_cluster_dims(cluster_dim(func)):
            op_error(func, message)
            ok = False
    return ok
