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
Two touches never meet either where they are subviews of one view whose static
ranges along some dim are disjoint (the parts of a row, one op each), or where they
are the very same view and each op's thread for an element is the one holding it in
the same register layout, held once (a row read into registers, then written back
by the same threads).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from mlir import ir
from mlir.dialects import arith, gpu, nvvm

from tile_mlir.dialects.tile import SCOPES
from tile_mlir.layout import TileLayout
from tile_mlir.lowering.schedules.threads import decode
from tile_mlir.lowering.support.alignment import defining_op, root_buffer
from tile_mlir.lowering.support.analysis import defining_layout, describe, memory_space
from tile_mlir.lowering.support.emit import const, const_index, linear_thread_id

_TILE_OPS = ("tile.copy", "tile.elementwise", "tile.reduce")

Window = tuple[ir.Value, tuple[tuple[int, int] | None, ...]]
"""A memref.subview's source and, per dim, its static (offset, size) or None."""


@dataclass
class _Touch:
    buffer: ir.Value
    writes: bool
    scope: str
    slice: tuple[ir.Value, int] | None = None  # (source, dim) of an iteration's own slice
    carried: bool = False  # from the loop's previous iteration
    view: ir.Value | None = None  # the operand itself
    window: Window | None = None
    owners: str = ""  # the register layout whose holder of an element touches it ("": none)


def _iteration_slice(value: ir.Value, block: ir.Block) -> tuple[ir.Value, int] | None:
    """(source, dim) when `value` is a memref.subview made in a loop body `block` whose
    offset on dim is the loop's induction variable and whose size there is 1: each
    iteration touches a slice of its own."""
    if isinstance(value.owner, ir.Block):
        return None
    owner, loop = value.owner.operation, block.owner
    if owner.name != "memref.subview" or owner.block != block or loop is None or \
            loop.name != "scf.for":
        return None
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    offsets = list(ir.DenseI64ArrayAttr(owner.attributes["static_offsets"]))
    sizes = list(ir.DenseI64ArrayAttr(owner.attributes["static_sizes"]))
    operands = iter(list(owner.operands)[1:])  # the dynamic offsets come first
    induction = block.arguments[0]
    for dim, offset in enumerate(offsets):
        if offset == dynamic and next(operands) == induction and sizes[dim] == 1:
            return owner.operands[0], dim
    return None


def _window(value: ir.Value, bound: tuple[int, ...] | None = None) -> Window | None:
    """Where a subview lies in its source, as far as it is static. `bound`: the register
    tile an op walks, which touches a memory operand only on their overlap (a dynamic
    size there touches at most the tile's extent)."""
    op = defining_op(value)
    if op is None or op.name != "memref.subview":
        return None
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    offsets = list(ir.DenseI64ArrayAttr(op.attributes["static_offsets"]))
    sizes = list(ir.DenseI64ArrayAttr(op.attributes["static_sizes"]))
    steps = list(ir.DenseI64ArrayAttr(op.attributes["static_strides"]))
    if bound is not None and len(bound) == len(sizes):
        sizes = [b if s == dynamic else min(s, b) for s, b in zip(sizes, bound, strict=True)]
    dims = tuple((o, s) if dynamic not in (o, s) and step == 1 else None
                 for o, s, step in zip(offsets, sizes, steps, strict=True))
    return op.operands[0], dims


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
    found = []
    for n, value in enumerate(op.operands):
        if not isinstance(value.type, ir.MemRefType):
            continue
        if memory_space(ir.MemRefType(value.type)) == "local":
            continue
        found.append(_Touch(root_buffer(value), writes=n == 0, scope=scope,
                            slice=_iteration_slice(value, op.block), view=value,
                            window=_window(value, bound), owners=owners))
    return found


def _apart(a: Window | None, b: Window | None) -> bool:
    """Subviews of one view that are disjoint along some dim."""
    if a is None or b is None or a[0] != b[0]:
        return False
    for x, y in zip(a[1], b[1], strict=True):
        if x is not None and y is not None and (x[0] + x[1] <= y[0] or y[0] + y[1] <= x[0]):
            return True
    return False


def _meet(new: _Touch, old: _Touch) -> bool:
    """Can two touches reach one element with a write among them, from different
    threads?"""
    if new.buffer != old.buffer or not (new.writes or old.writes):
        return False
    if old.carried and new.slice is not None and new.slice == old.slice:
        return False
    if not old.carried and _apart(new.window, old.window):
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
                      window=t.window, owners=t.owners) for t in carried]
    needed, _ = _plan(block, carried)
    for op, scope in needed:
        with ir.InsertionPoint(op), op.location:
            barrier(scope, kernel_block)
