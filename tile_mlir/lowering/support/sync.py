"""Barriers between tile ops that share memory, at the scope that needs them.

Each variant decides which thread touches which element, so two tile ops
that touch the same shared or global buffer may pair different threads with
an element: the second must wait for the first. Walking each block in order,
this keeps the buffers touched since the last barrier; before an op that
writes one of them, or reads one written since, it puts the widest scope's
barrier of the two ops: `barrier.cluster.arrive` and `.wait` for a cluster (its
release and acquire order the CTAs' memory, shared memory read across the cluster
included), `gpu.barrier` (bar.sync 0) for a CTA, a named barrier of 128 threads for
a warpgroup, `bar.warp.sync` for a warp, none for a thread. A `gpu.barrier` (or a
cluster barrier's wait) already in the block counts. Register buffers are private to
their threads and never need one. Around a loop's back edge, two touches of one
iteration's own slice (a subview taken in the body at the induction variable,
one element thick there: the tiles of a row, one per iteration) never meet.
Two touches never meet either where they lie in different pieces of one split of one
source (reinterpret_casts marked PIECE, as tile_mlir.lang's aligned() makes), or in subviews
of one view that are disjoint along some dim (the parts of a row, one op each; two rows
of a tensor), or where they are the very same view and each op's thread for an element
is the one holding it in the same register layout, held once (a row read into
registers, then written back by the same threads). Each touch is inside every subview
on its way to the buffer (through subviews, reshapes and casts), so any two of those,
one from each touch, cut from the same view and apart along a dim, part the touches.
An offset along a dim is a constant, or a base plus a constant (`%b` and `%b + 1`: two
neighbouring rows at a row known at run time), bases compared by how they were built
(`_key`: from constants, a block's arguments and the ids that are one number across a
CTA; a base that depends on a thread's id or on memory is equal to no other). A tile op
is collective: its scope's threads take it with the same operands, so equal bases are
one number in both ops.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from mlir import ir
from mlir.dialects import arith, gpu, nvvm

from tile_mlir.contract import PIECE
from tile_mlir.dialects.tile import SCOPES
from tile_mlir.layout import TileLayout
from tile_mlir.lowering.schedules.threads import decode
from tile_mlir.lowering.support.alignment import (
    defining_op,
    dynamic_operand,
    root_buffer,
    static_index,
)
from tile_mlir.lowering.support.analysis import defining_layout, describe, memory_space
from tile_mlir.lowering.support.emit import const, const_index, linear_thread_id

_TILE_OPS = ("tile.copy", "tile.elementwise", "tile.reduce")

Span = tuple[Any, int, int]
"""A subview's range along one dim: (base, offset, size), the range [base + offset,
base + offset + size), base an SSA index value (its `_key`) or None (0), size static."""
Window = tuple[ir.Value, tuple[Span | None, ...]]
"""A memref.subview's source and, per dim, its Span (None where its size is dynamic or
its stride not 1)."""
CONTAINED = ("memref.subview", "memref.expand_shape", "memref.collapse_shape", "memref.cast")
"""View ops whose result lies inside their source (a reinterpret_cast may reach past
it: the walk to the enclosing subviews stops there)."""


@dataclass
class _Touch:
    buffer: ir.Value
    writes: bool
    scope: str
    slice: tuple[ir.Value, int] | None = None  # (source, dim) of an iteration's own slice
    carried: bool = False  # from the loop's previous iteration
    view: ir.Value | None = None  # the operand itself
    windows: tuple[Window, ...] = ()  # the subviews it lies in, innermost first
    owners: str = ""  # the register layout whose holder of an element touches it ("": none)
    piece: tuple[ir.Value, str, str] | None = None  # (source, split, piece) it lies in


def _iteration_slice(value: ir.Value, block: ir.Block) -> tuple[ir.Value, int] | None:
    """(source, dim) when `value` lies inside (through CONTAINED views) a memref.subview
    made in a loop body `block`, of a source made outside the loop, whose offset on dim
    is the loop's induction variable and whose size there is 1: each iteration touches a
    slice of its own."""
    loop = block.owner
    if loop is None or loop.name != "scf.for":
        return None
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    induction = block.arguments[0]
    for owner in _subviews(value):
        # views made outside the body never lead back into it
        if owner.block != block or not _outside(owner.operands[0], loop):
            continue
        offsets = list(ir.DenseI64ArrayAttr(owner.attributes["static_offsets"]))
        sizes = list(ir.DenseI64ArrayAttr(owner.attributes["static_sizes"]))
        for dim, offset in enumerate(offsets):
            if offset == dynamic and sizes[dim] == 1 and \
                    dynamic_operand(owner, 1, "static_offsets", dim) == induction:
                return owner.operands[0], dim
    return None


def _outside(value: ir.Value, loop: ir.OpView) -> bool:
    """Is `value` made outside `loop` (the same in each of its iterations)?"""
    owner = value.owner
    made = owner.owner if isinstance(owner, ir.Block) else owner
    op: ir.Operation | None = made.operation if made is not None else None
    while op is not None:
        if op == loop.operation:
            return False
        op = op.parent
    return True


UNIFORM = ("gpu.block_id", "gpu.block_dim", "gpu.grid_dim", "gpu.cluster_id",
           "gpu.cluster_block_id", "gpu.cluster_dim_blocks")
"""Ops besides arith's whose result depends on their operands and attributes alone and is
the same in every thread of a CTA (so that two of them with equal operands are equal,
and an offset built of them is one number for the op's threads; a thread's id is not)."""


def _offset(value: ir.Value) -> tuple[Any, int]:
    """`value` as (base, constant), through additions and subtractions of constants; the
    base as `_key` has it (None: the value is a constant)."""
    constant = 0
    for _ in range(16):
        known = static_index(value)
        if known is not None:
            return None, constant + known
        op = defining_op(value)
        if op is None or op.name not in ("arith.addi", "arith.subi"):
            break
        lhs, rhs = (static_index(v) for v in op.operands)
        if rhs is not None:
            constant += rhs if op.name == "arith.addi" else -rhs
            value = op.operands[0]
        elif lhs is not None and op.name == "arith.addi":
            constant += lhs
            value = op.operands[1]
        else:
            break
    return _key(value), constant


def _key(value: ir.Value, budget: list[int] | None = None) -> Any:
    """What a value is, up to how it was built: an op of arith or UNIFORM as its name,
    attributes and operands' keys (two `block_id // 16 * 2` built apart are the same
    number); a block's argument (a kernel's scalar, a loop's induction variable) as
    itself; anything else (a thread's id, a value loaded from memory, a DAG past
    `budget` ops) as a key equal to no other."""
    budget = [64] if budget is None else budget
    if isinstance(value.owner, ir.Block):
        return value
    op = value.owner.operation
    budget[0] -= 1
    if budget[0] < 0 or len(op.regions) or not \
            (op.name.startswith("arith.") or op.name in UNIFORM):
        return object()
    attributes = tuple(sorted((name, str(op.attributes[name])) for name in op.attributes))
    return (op.name, attributes, ir.OpResult(value).result_number,
            tuple(_key(v, budget) for v in op.operands))


def _window(op: ir.Operation, bound: tuple[int, ...] | None = None) -> Window:
    """Where a memref.subview lies in its source, as far as its sizes are static. `bound`:
    the register tile an op walks, which touches a memory operand only on their overlap
    (a dynamic size there touches at most the tile's extent)."""
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    offsets = list(ir.DenseI64ArrayAttr(op.attributes["static_offsets"]))
    sizes = list(ir.DenseI64ArrayAttr(op.attributes["static_sizes"]))
    steps = list(ir.DenseI64ArrayAttr(op.attributes["static_strides"]))
    if bound is not None and len(bound) == len(sizes):
        sizes = [b if s == dynamic else min(s, b) for s, b in zip(sizes, bound, strict=True)]
    dims: list[Span | None] = []
    for dim, (offset, size, step) in enumerate(zip(offsets, sizes, steps, strict=True)):
        base, constant = (None, offset) if offset != dynamic else \
            _offset(dynamic_operand(op, 1, "static_offsets", dim))
        dims.append(None if dynamic in (size, step) or step != 1 else (base, constant, size))
    return op.operands[0], tuple(dims)


def _subviews(value: ir.Value) -> list[ir.Operation]:
    """The memref.subviews a view lies in (through CONTAINED views), from its own
    outwards."""
    found = []
    for _ in range(64):
        op = defining_op(value)
        if op is None or op.name not in CONTAINED:
            break
        if op.name == "memref.subview":
            found.append(op)
        value = op.operands[0]
    return found


def _windows(value: ir.Value, bound: tuple[int, ...] | None = None) -> tuple[Window, ...]:
    """The subviews an operand lies in, from its own outwards (`bound` clips its own)."""
    return tuple(_window(op, bound if not k else None) for k, op in enumerate(_subviews(value)))


def _piece(value: ir.Value) -> tuple[ir.Value, str, str] | None:
    """(source, split, piece) where the view lies inside (through CONTAINED views) a piece
    of a split (PIECE: "<piece>:<split>"): touches in different pieces of one split of one
    source never meet."""
    for _ in range(64):
        op = defining_op(value)
        if op is None:
            return None
        if op.name == "memref.reinterpret_cast" and PIECE in op.attributes:
            piece, _, split = ir.StringAttr(op.attributes[PIECE]).value.partition(":")
            return op.operands[0], split, piece
        if op.name not in CONTAINED:
            return None
        value = op.operands[0]
    return None


def _anchor(op: ir.Operation) -> TileLayout | None:
    """The layout of the register tile the op walks: its largest register operand's."""
    layouts = []
    for value in op.operands:
        if isinstance(value.type, ir.MemRefType) and \
                memory_space(ir.MemRefType(value.type)) == "local":
            layout = defining_layout(value)
            if layout is not None:
                layouts.append(layout)
    return max(layouts, key=lambda layout: layout.size) if layouts else None


def _owners(anchor: TileLayout | None, threads: int | None) -> str:
    """The anchor's layout where it holds each element once: its holder of an element is
    then the thread that touches it in memory ("" otherwise)."""
    if anchor is None or not anchor.is_distributed or anchor.replicas or threads is None:
        return ""
    return str(anchor) if _held_once(anchor, threads) else ""


@cache
def _held_once(layout: TileLayout, threads: int) -> bool:
    """Whether no two of the scope's `threads` hold the same coordinates: a thread axis
    whose extent falls short of the threads that run the op (a laneid extent below the
    warp's lanes) gives the rest copies, which write what the others read."""
    return len({decode(layout, t, threads) for t in range(threads)}) == threads


def _touches(op: ir.Operation) -> list[_Touch]:
    scope = ir.StringAttr(op.attributes["scope"]).value
    anchor = _anchor(op) if op.name != "tile.reduce" else None
    bound = anchor.shape if anchor is not None else None
    owners = _owners(anchor, describe(op.opview).scope_threads) if anchor is not None else ""
    found: list[_Touch] = []
    for n, value in enumerate(op.operands):
        if not isinstance(value.type, ir.MemRefType):
            continue
        if memory_space(ir.MemRefType(value.type)) == "local":
            continue
        found.append(_Touch(root_buffer(value), writes=n == 0, scope=scope,
                            slice=_iteration_slice(value, op.block), view=value,
                            windows=_windows(value, bound), owners=owners,
                            piece=_piece(value)))
    return found


def _apart(a: tuple[Window, ...], b: tuple[Window, ...]) -> bool:
    """Do two touches lie in subviews of one view that are disjoint along some dim?"""
    return any(x[0] == y[0] and _disjoint(x[1], y[1]) for x in a for y in b)


def _split_apart(a: _Touch, b: _Touch) -> bool:
    """Do two touches lie in different pieces of one split of one source (PIECE)?"""
    return a.piece is not None and b.piece is not None and a.piece[:2] == b.piece[:2] and \
        a.piece[2] != b.piece[2]


def _disjoint(a: tuple[Span | None, ...], b: tuple[Span | None, ...]) -> bool:
    for x, y in zip(a, b, strict=True):
        if x is None or y is None or x[0] != y[0]:
            continue
        if x[1] + x[2] <= y[1] or y[1] + y[2] <= x[1]:
            return True
    return False


def _meet(new: _Touch, old: _Touch) -> bool:
    """Can two touches reach one element with a write among them, from different
    threads?"""
    if new.buffer != old.buffer or not (new.writes or old.writes):
        return False
    if old.carried and new.slice is not None and new.slice == old.slice:
        return False
    if not old.carried and (_apart(new.windows, old.windows) or _split_apart(new, old)):
        return False
    same_threads = new.view == old.view and new.owners and new.owners == old.owners and \
        new.scope == old.scope
    return not (same_threads and not old.carried)


def _conflict(touches: list[_Touch], pending: list[_Touch]) -> str | None:
    """The widest scope of any conflicting pair, None when nothing conflicts."""
    widest = None
    for new in touches:
        for old in pending:
            if _meet(new, old):
                for scope in (new.scope, old.scope):
                    if widest is None or SCOPES.index(scope) > \
                            SCOPES.index(widest):
                        widest = scope
    return None if widest == "thread" else widest


CLUSTER_WAIT = "nvvm.cluster.wait"
"""The op that completes a cluster barrier (after nvvm.cluster.arrive)."""


def barrier(scope: str, block: tuple[int, int, int] | None) -> None:
    """The barrier of one scope, at the insertion point."""
    if scope == "cluster":
        nvvm.cluster_arrive()
        nvvm.cluster_wait()
    elif scope == "cta":
        gpu.barrier()
    elif scope == "warpgroup":
        assert block is not None
        i32 = ir.IntegerType.get_signless(32)
        group = arith.divui(linear_thread_id(block), const_index(128))
        ident = arith.addi(arith.index_cast(i32, group), const(i32, 1))  # 0 is bar.sync 0's
        nvvm.BarrierOp(None, barrierId=ident, numberOfThreads=const(i32, 128))
    elif scope == "warp":
        nvvm.bar_warp_sync(const(ir.IntegerType.get_signless(32), -1))


_LOOPS = ("scf.for", "scf.while", "scf.parallel", "scf.forall")


def in_loop(op: ir.Operation) -> bool:
    """Does a loop of its kernel enclose the op (so that it may run again)?"""
    parent = op.parent
    while parent is not None and parent.name != "gpu.func":
        if parent.name in _LOOPS:
            return True
        parent = parent.parent
    return False


def _plan(block: ir.Block, pending: list[_Touch]) -> tuple[list[tuple[ir.OpView, str]],
                                                          list[_Touch]]:
    """Where barriers go in one pass over the block, and what is pending at its end."""
    needed = []
    for op in block.operations:
        name = op.operation.name
        if name == CLUSTER_WAIT:
            pending = []
            continue
        if name == "gpu.barrier":  # the CTA's threads: a cluster's other CTAs still run
            pending = [t for t in pending if t.scope == "cluster"]
            continue
        if name not in _TILE_OPS:
            continue
        touches = _touches(op.operation)
        scope = _conflict(touches, pending)
        if scope is not None:
            needed.append((op, scope))
            pending = [t for t in pending if SCOPES.index(t.scope) > SCOPES.index(scope)]
        pending = pending + touches
    return needed, pending


def insert_barriers(block: ir.Block, kernel_block: tuple[int, int, int] | None) -> None:
    """Put the needed barriers between the tile ops of one block (not nested ones).

    In a loop body the accesses of the previous iteration are pending at the
    top, so a hazard around the back edge gets its barrier too.
    """
    parent = block.owner
    _, carried = _plan(block, []) if parent is not None and \
        parent.operation.name in _LOOPS else ([], [])
    carried = [_Touch(t.buffer, t.writes, t.scope, t.slice, carried=True, view=t.view,
                      windows=t.windows, owners=t.owners, piece=t.piece) for t in carried]
    needed, _ = _plan(block, carried)
    for op, scope in needed:
        with ir.InsertionPoint(op), op.location:
            barrier(scope, kernel_block)
