"""The register reduction: each thread folds its registers, lanes butterfly, warps meet in
shared memory.

A tile.reduce of a register tile (reduce/local), into a register tile or into a
shared or global dst. For each kept register coordinate of its bundle (a slot),
a thread folds the reduced register dims sequentially, then xor-shuffles across
the reduced axes' lane fields (threads.py: a butterfly, after which every lane
of the group holds the group's value). Where reduced axes are spread over warps
too (warp fields), every thread leaves its value in a shared scratch at [slot,
its thread index]; after one barrier of the scope every thread reads the
partials of the warps that share its elements, in the same order everywhere (so
every thread holds the same bits), and folds them (a sum's or max's as a balanced tree:
`_fold`). The result then goes into
every holder's registers (dst's layout replicates over the reduced thread axes)
or, for a memory dst, is written by one thread per output. A second barrier
after the reads frees the scratch for the op's next run, only where it can run
again (a loop) with no other barrier between (reused_without_barrier).

At cluster scope, reduced axes spread over the cluster's CTAs (CTA fields) take one more
step, after each CTA's partial is made (its lanes and warps folded as above). Where
every such reduction of the kernel runs in step on every thread (it stands in the
kernel's entry block, or in the body of a loop that does: a persistent kernel's loop over
rows) and folds the whole cluster with one partial per CTA, the partials go through
mailboxes (support/mailbox.py): thread r of each CTA posts the CTA's partial into CTA r's
shared memory (st.async, completing its bytes on CTA r's mbarrier); each CTA waits for
its own and folds the C posts in rank order, so every thread of the cluster holds the
same bits. No cluster barrier per reduction (a relaxed one at the entry, another after
the last posts whose wait stands at the kernel's end), no read across the cluster; in a
loop, two mailboxes taken in turn and a barrier of the CTA between an iteration's reads
and the next one's posts. Otherwise (a reduction in a nested loop or a branch, kept
axes over a CTA's threads, a kernel with a cluster barrier of its own) they go through
barriers: each CTA's partial goes into a shared scratch of its own, written by one
thread per kept coordinate; after a cluster barrier
(barrier.cluster.arrive/wait: release and acquire across the cluster) every thread reads
the partial of every CTA it folds with from that CTA's shared memory
(mapa.shared::cluster, ld.shared::cluster) and folds them in rank order. A second
cluster barrier follows the reads: a CTA's shared memory must outlive its readers (no
CTA may exit, or reuse the scratch, before the others have read it), unless a later op
of the block has a cluster barrier of its own (another such reduction: softmax's sum
after its max), which does the same. The CTA step's scratch needs no second barrier: the
first cluster barrier already stands between its reads and any later write. On an H100
the mailboxes made rows of 2^16-2^18 elements from 3% slower (softmax f32 2^18, whose
kernel takes more registers) to 21% faster than the barriers (bench/fused.py's long
rows): the barriers' cost was most of what a cluster costs there.

A tuple kind's partials (Welford's triples, online softmax's pairs), a power of two of 4
to 32 of them that every thread of a warp folds alike, are folded over the warp's lanes
instead (`_over_lanes`): lane l reads partial l, a butterfly, lane 0's result to every
lane. Every thread still ends with the same bits; the fold's critical path, which stands
between the last partial's arrival and everything after the reduction, is log2(k)
merges, not k - 1 (a merge is a reciprocal and some ten dependent operations). Measured
on an H100 (layer norm's cluster rows, 150 repetitions, the two folds in one process):
bf16 rows of 2^18 2.68 -> 2.75 TB/s, f16 2^18 2.73 -> 2.75, bf16 2^16 2.89 -> 2.92, f32
2^18 2.54 -> 2.55, f32 2^16 2.96 -> 2.95, bf16 2^15 2.94 both; a merge of the cost of an
add (wrong output: the bound) ran bf16 2^18 at 2.76. A sum or max folds its partials in every
thread (a balanced tree: `_fold`): an add is shorter than a shuffle.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, llvm, memref, scf

from tile_mlir.contract import WARP
from tile_mlir.dialects.tile import SCOPES
from tile_mlir.layout import TileLayout
from tile_mlir.lowering.schedules import induced
from tile_mlir.lowering.schedules.reduction import (
    Reduction,
    broadcast,
    butterfly,
    scratch,
    shuffle_xor,
    warp_mask,
)
from tile_mlir.lowering.schedules.threads import Field, ThreadPlan, thread_plan
from tile_mlir.lowering.support import mailbox, sync, tails
from tile_mlir.lowering.support.access import Access, linearize
from tile_mlir.lowering.support.analysis import OpInfo, describe, enclosing
from tile_mlir.lowering.support.compute import convert, load, row_major
from tile_mlir.lowering.support.emit import (
    cluster_address,
    const,
    const_index,
    cta_rank,
    linear_thread_id,
    scope_thread_index,
    shared_pointer,
)


def _register_dims(layout: TileLayout, dims: tuple[int, ...]) -> list[int]:
    return [a for a in dims if layout.shard[a].axis is None]


def _offset(layout: TileLayout, coords: dict[int, ir.Value]) -> ir.Value:
    """A register offset: memory dims only (thread dims have no memory stride)."""
    dims = [a for a in range(layout.rank) if layout.shard[a].axis is None]
    return linearize([coords[a] for a in dims], [layout.shard[a].stride for a in dims],
                     layout.offset)


def _i32(value: int) -> ir.Value:
    return const(ir.IntegerType.get_signless(32), value)


@dataclass(frozen=True)
class _Local:
    info: OpInfo
    red: Reduction
    srcs: tuple[Access, ...]  # one per value of the kind's tuples (one, mostly)
    dsts: tuple[Access, ...]
    plan: ThreadPlan
    tid: ir.Value  # the thread's index in the scope
    mask: ir.Value  # the warp's existing lanes, for the shuffles

    @property
    def src(self) -> Access:
        return self.srcs[0]

    @property
    def dst(self) -> Access:
        return self.dsts[0]

    @property
    def layout(self) -> TileLayout:
        assert self.src.layout is not None
        return self.src.layout


def cluster_block(info: OpInfo) -> int:
    """Threads per CTA where the op's scope is a cluster (thread_plan's `block`), else 0."""
    return info.block_threads or 0 if info.scope == "cluster" else 0


def reduce(info: OpInfo, red: Reduction, srcs: tuple[Access, ...], dsts: tuple[Access, ...]
           ) -> None:
    """Lower the register reduction at the insertion point (srcs and dsts: one each, or
    a tuple kind's k; tile-verify gave them one layout)."""
    src = srcs[0]
    assert src.layout is not None
    threads = info.scope_threads
    assert threads is not None
    plan, why = thread_plan(src.layout, red.axes, threads, cluster_block(info))
    assert plan is not None, why
    tid = scope_thread_index(info.scope, info.block)
    op = _Local(info, red, srcs, dsts, plan, tid, warp_mask(tid, threads))
    if plan.ctas:
        _across_ctas(op)
    elif plan.warps:
        _across_warps(op)
    else:
        _store_all(op, lambda coords, _: _partial(op, coords))


def _store_all(op: _Local, value_at: Callable[[dict[int, ir.Value], ir.Value], ir.Value]
               ) -> None:
    """Each kept coordinate's result into dst: every holder's registers, or one writer
    per output for a memory dst."""
    writer = None if op.dst.operand.space == "local" else _writer(op)

    def body(coords: dict[int, ir.Value], slot: ir.Value) -> None:
        value = value_at(coords, slot)  # shuffles: every lane runs them
        tails.when(writer, lambda: _store(op, coords, value))

    _kept_loops(op, body)


def _kept_loops(op: _Local, body: Callable[[dict[int, ir.Value], ir.Value], None],
                coords: dict[int, ir.Value] | None = None, depth: int = 0) -> None:
    """body(coords, slot) for each kept coordinate of the thread (the kept dims over
    threads fixed by it, the kept register dims looped over; slot: the row-major index
    over the kept register dims)."""
    coords = _thread_coords(op) if coords is None else coords
    kept = _register_dims(op.layout, op.red.kept)
    if depth == len(kept):
        extents = [const_index(op.layout.shape[a]) for a in kept]
        body(coords, row_major([coords[a] for a in kept], extents))
        return
    axis = kept[depth]
    loop = scf.ForOp(const_index(0), const_index(op.layout.shape[axis]), const_index(1))
    with ir.InsertionPoint(loop.body):
        _kept_loops(op, body, {**coords, axis: loop.induction_variable}, depth + 1)
        scf.YieldOp([])


def _partial(op: _Local, coords: dict[int, ir.Value]) -> ir.Value:
    """The thread's registers folded, then the butterflies over the lane fields."""
    dims = _register_dims(op.layout, op.red.axes)
    value = _fold_registers(op.red, op.srcs, coords, dims)
    for field in op.plan.lanes:
        value = _butterfly(op, value, field)
    return value


def _butterfly(op: _Local, value: ir.Value, field: Field) -> ir.Value:
    """Fold lanes differing in one lane field. In a scope whose last warp is partial the
    lanes past its end contribute the identity (shfl.sync reads them as undefined)."""
    width = field.stride * field.extent
    if not op.plan.partial_warp:
        return butterfly(op.red, value, op.mask, width, field.stride)
    lane = arith.remui(op.tid, const_index(WARP))
    first = arith.subi(op.tid, lane)
    present = arith.subi(const_index(op.plan.threads), first)  # lanes of this warp, capped
    offset = field.stride
    while offset < width:
        other = shuffle_xor(value, op.mask, offset, _i32(WARP - 1))
        partner = arith.xori(lane, const_index(offset))
        valid = arith.cmpi(arith.CmpIPredicate.ult, partner, present)
        value = op.red.combine(value, arith.select(valid, other, op.red.identity()))
        offset *= 2
    return value


def _fold_registers(red: Reduction, srcs: tuple[Access, ...], coords: dict[int, ir.Value],
                    dims: list[int]) -> ir.Value:
    """Fold the thread's registers over the reduced register dims (nested loops, each
    starting from its first element rather than the identity)."""
    layout = srcs[0].layout
    assert layout is not None
    if not dims:
        values = []
        for src in srcs:
            assert src.storage is not None
            value = load((src.storage, [_offset(layout, coords)]), src.operand.dtype, 1)
            values.append(convert(value, src.operand.dtype, red.acc, 1))
        return red.pack(values)
    first = _fold_registers(red, srcs, {**coords, dims[0]: const_index(0)}, dims[1:])
    if layout.shape[dims[0]] == 1:
        return first
    loop = scf.ForOp(const_index(1), const_index(layout.shape[dims[0]]), const_index(1),
                     [first])
    with ir.InsertionPoint(loop.body):
        inner = _fold_registers(red, srcs, {**coords, dims[0]: loop.induction_variable},
                                dims[1:])
        scf.YieldOp([red.combine(loop.inner_iter_args[0], inner)])
    result: ir.Value = loop.results[0]
    return result


# ------------------------------------------------------------ across warps


def _across_warps(op: _Local) -> None:
    """Partials through the shared scratch: write, one barrier, every thread reads and
    folds its warps' partials (a second barrier only where the op may run again)."""
    info = op.info
    again = reused_without_barrier(info.op.operation, info.scope)  # before ours stands
    _store_all(op, _cta_partial(op))
    if again:
        sync.barrier(info.scope, info.block)


def _slots(op: _Local) -> int:
    """Kept register coordinates of a thread: one scratch row each."""
    return math.prod(op.layout.shape[a] for a in _register_dims(op.layout, op.red.kept))


def _cta_tid(op: _Local) -> ir.Value:
    """The thread's index in its CTA (the scratch is the CTA's)."""
    block = op.info.block
    assert block is not None
    return op.tid if op.info.scope == "cta" else linear_thread_id(block)


Partial = Callable[[dict[int, ir.Value], ir.Value], ir.Value]
"""A thread's partial at a kept coordinate (coords, slot)."""


def _cta_partial(op: _Local) -> Partial:
    """The CTA's partial at each kept coordinate: the lanes butterflied and, with warp
    fields, every thread's value left in the shared scratch (here, then one barrier of
    the CTA or warpgroup) for the returned function to read and fold."""
    if not op.plan.warps:
        return lambda coords, _: _partial(op, coords)
    info = op.info
    block = info.block
    assert block is not None
    cta_threads = math.prod(block)
    partials = scratch(info, op.red, _slots(op) * cta_threads, per_instance=False)
    # the scratch is the CTA's: an op of a narrower or wider scope indexes by the thread
    # in the CTA
    cta_tid = _cta_tid(op)
    scope_base = arith.subi(cta_tid, op.tid) if info.scope != "cta" else None

    def at(slot: ir.Value, thread: ir.Value) -> ir.Value:
        index = arith.addi(arith.muli(slot, const_index(cta_threads)), thread)
        return index if scope_base is None else arith.addi(index, scope_base)

    _kept_loops(op, lambda coords, slot: memref.store(_partial(op, coords), partials,
                                                      [at(slot, op.tid)]))
    sync.barrier("cta" if info.scope == "cluster" else info.scope, block)
    base = _base(op)

    def gather(coords: dict[int, ir.Value], slot: ir.Value) -> ir.Value:
        return _gather(op, lambda thread: memref.load(partials, [at(slot, thread)]), base)

    return gather


def _across_ctas(op: _Local) -> None:
    if _mailboxes(op.info.op.operation):
        _through_mailboxes(op)
    else:
        _through_barriers(op)


def _through_mailboxes(op: _Local) -> None:
    """The cluster's CTA partials posted into every CTA's mailbox (support/mailbox.py):
    thread r of each CTA posts the CTA's partial of each kept coordinate to CTA r (each
    post completing its bytes on CTA r's mbarrier); every CTA waits for its own and
    folds the posts in rank order, so every thread of the cluster holds the same bits."""
    info = op.info
    block, ctas = info.block, info.cluster_ctas
    assert block is not None and ctas is not None
    slots = _slots(op)
    box = mailbox.Mailbox(info.op.operation, op.red.acc_type, slots, ctas, block)
    partial = _cta_partial(op)
    rank = cta_rank()
    peer = _cta_tid(op)  # the CTA this thread posts to
    posts = arith.cmpi(arith.CmpIPredicate.ult, peer, const_index(ctas))
    mailbox.open_mailboxes(info.op.operation)

    def post(coords: dict[int, ir.Value], slot: ir.Value) -> None:
        value = partial(coords, slot)  # shuffles: every lane runs them
        index = arith.addi(arith.muli(slot, const_index(ctas)), rank)
        tails.when(posts, lambda: box.post(value, index, peer))

    _kept_loops(op, post)
    if not _cluster_reduction_follows(info.op.operation):
        mailbox.close_mailboxes(info.op.operation)
    box.wait()

    def gather(coords: dict[int, ir.Value], slot: ir.Value) -> ir.Value:
        first = arith.muli(slot, const_index(ctas))
        if _spread(op, ctas):
            return _over_lanes(op, ctas, lambda r: box.read(arith.addi(first, r)))
        return _fold(op.red, [box.read(arith.addi(first, const_index(r)) if r else first)
                              for r in range(ctas)])

    _store_all(op, gather)
    if _trailing_cta_barrier(info.op.operation):
        sync.barrier("cta", block)


def _trailing_cta_barrier(op: ir.Operation) -> bool:
    """Does a reduction through mailboxes end with a barrier of the CTA? In a loop, one
    must stand between this iteration's reads of its scratch and its mailbox's half and
    the next iteration's writes and posts (support/mailbox.py): its own, unless a later op
    of the loop's body is or has such a barrier."""
    return mailbox.entry_loop(op) is not None and \
        not any(_barrier_scope(other) in ("cta", "cluster") for other in _later(op))


def _mailboxes(op: ir.Operation) -> bool:
    """Do the kernel's reductions across CTAs meet through mailboxes? Where each runs in
    step on every thread (it stands in the kernel's entry block, or in the body of a loop
    that does: mailbox.runs_in_step), folds the whole cluster with one partial per CTA
    (every thread of a CTA in it, a thread per CTA to post it) and the kernel has no
    cluster barrier of its own (the mailboxes' relaxed arrive at the entry pairs with
    their first wait); else all meet through barriers."""
    kernel = enclosing(op, "gpu.func")
    assert kernel is not None

    def refuses(other: ir.Operation) -> bool:
        if other.name == "nvvm.cluster.arrive":  # the mailboxes' own arrives are relaxed
            return True
        found = _plan_of(other) if other.name == "tile.reduce" else None
        return found is not None and bool(found[1].ctas) and not _posts(other, *found)

    return not _contains(kernel.operation, refuses)


def _posts(op: ir.Operation, info: OpInfo, plan: ThreadPlan) -> bool:
    """Can this reduction across CTAs use a mailbox (_mailboxes)?"""
    ctas, threads = info.cluster_ctas, info.block_threads
    return ctas is not None and threads is not None and threads >= ctas and \
        mailbox.runs_in_step(op) and \
        math.prod(f.extent for f in plan.ctas) == ctas and \
        math.prod(f.extent for f in (*plan.lanes, *plan.warps)) == threads


def _through_barriers(op: _Local) -> None:
    """The cluster's CTA partials through distributed shared memory (module docstring):
    one writer per kept coordinate and CTA, a cluster barrier, every thread folds every
    CTA's partial in rank order, a second cluster barrier."""
    info = op.info
    block = info.block
    assert block is not None
    trailing = not _cluster_barrier_follows(info.op.operation)  # before ours stand
    cta_threads = math.prod(block)
    partial = _cta_partial(op)
    shared = scratch(info, op.red, _slots(op) * cta_threads)
    leader = _cleared(_cta_tid(op), (*op.plan.lanes, *op.plan.warps))
    writes = arith.cmpi(arith.CmpIPredicate.eq, _cta_tid(op), leader)

    def write(coords: dict[int, ir.Value], slot: ir.Value) -> None:
        value = partial(coords, slot)  # shuffles: every lane runs them
        index = arith.addi(arith.muli(slot, const_index(cta_threads)), leader)
        tails.when(writes, lambda: memref.store(value, shared, [index]))

    _kept_loops(op, write)
    sync.barrier("cluster", block)
    root = _root_rank(op, cta_threads)
    pointer, element = shared_pointer(shared), op.red.acc_type

    def gather(coords: dict[int, ir.Value], slot: ir.Value) -> ir.Value:
        index = arith.addi(arith.muli(slot, const_index(cta_threads)), leader)

        def read(rank: ir.Value) -> ir.Value:
            # through the cluster's shared window (ld.shared::cluster)
            return llvm.load(element, cluster_address(pointer, rank, element, index))

        offsets = op.plan.cta_offsets()
        if _spread(op, len(offsets)):
            return _over_lanes(op, len(offsets), lambda k: read(arith.addi(root, arith.divui(
                _field_offset(op.plan.ctas, k), const_index(cta_threads)))))
        return _fold(op.red, [read(arith.addi(root, const_index(offset // cta_threads))
                                   if offset else root) for offset in offsets])

    _store_all(op, gather)
    if trailing:
        sync.barrier("cluster", block)


def _cluster_reduction_follows(op: ir.Operation) -> bool:
    """Does a reduction across CTAs follow this one in its block, or in an op after it
    there (a loop's body), or, for one in a loop of the entry block, after that loop?"""
    def across(other: ir.Operation) -> bool:
        found = _plan_of(other) if other.name == "tile.reduce" else None
        return found is not None and bool(found[1].ctas)

    def follows(at: ir.Operation) -> bool:
        return any(_contains(other, across) for other in _later(at))

    loop = mailbox.entry_loop(op)
    return follows(op) or (loop is not None and follows(loop))


def _later(op: ir.Operation) -> list[ir.Operation]:
    """The ops after `op` in its block."""
    ops = [other.operation for other in op.block.operations]
    return ops[ops.index(op) + 1:]


def _contains(op: ir.Operation, test: Callable[[ir.Operation], bool]) -> bool:
    """Does `test` hold for the op or an op nested in it?"""
    found = False

    def visit(other: ir.Operation) -> ir.WalkResult:
        nonlocal found
        found = test(other)
        return ir.WalkResult.INTERRUPT if found else ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def _cluster_barrier_follows(op: ir.Operation) -> bool:
    """Does an op after this one in its block stand for a cluster barrier (one, or a
    reduction across the cluster's CTAs, which has one before it reads)? Then that
    barrier keeps every CTA's scratch alive until its readers are done (no CTA passes
    it before all have read, none exits before it) and this op needs no trailing one."""
    return any(_barrier_scope(other) == "cluster" for other in _later(op))


def _root_rank(op: _Local, cta_threads: int) -> ir.Value:
    """The rank of the first CTA this one folds with: its CTA fields' digits cleared (0
    where the fields span the whole cluster)."""
    if math.prod(f.extent for f in op.plan.ctas) == op.info.cluster_ctas:
        return const_index(0)
    rank = cta_rank()
    root = rank
    for field in op.plan.ctas:
        stride = field.stride // cta_threads
        digit = arith.divui(rank, const_index(stride)) if stride > 1 else rank
        digit = arith.remui(digit, const_index(field.extent))
        root = arith.subi(root, arith.muli(digit, const_index(stride)))
    return root


def _cleared(tid: ir.Value, fields: tuple[Field, ...]) -> ir.Value:
    """A thread index with the digits of `fields` cleared."""
    base = tid
    for field in fields:
        digit = arith.divui(tid, const_index(field.stride)) if field.stride > 1 else tid
        digit = arith.remui(digit, const_index(field.extent))
        base = arith.subi(base, arith.muli(digit, const_index(field.stride)))
    return base


def _base(op: _Local) -> ir.Value:
    """This thread's index with its lane and warp fields cleared: partial k is at base + k."""
    return _cleared(op.tid, (*op.plan.lanes, *op.plan.warps))


def _gather(op: _Local, load_at: Callable[[ir.Value], ir.Value], base: ir.Value) -> ir.Value:
    """The warps' partials folded in one order (the same bits in every thread); a partial
    past the scope's last thread (a partial warp's missing group) is the identity."""
    if _spread(op, op.plan.partials):
        return _over_lanes(op, op.plan.partials, lambda k: load_at(
            arith.addi(base, _field_offset(op.plan.warps, k))))
    values = []
    for offset in op.plan.offsets():
        thread = arith.addi(base, const_index(offset)) if offset else base
        if op.plan.beyond:
            exists = arith.cmpi(arith.CmpIPredicate.ult, thread, const_index(op.plan.threads))
            values.append(arith.select(exists, load_at(arith.select(exists, thread, base)),
                                       op.red.identity()))
        else:
            values.append(load_at(thread))
    return _fold(op.red, values)


def _fold(red: Reduction, values: list[ir.Value]) -> ir.Value:
    """Partials (the warps' or the CTAs') folded in one order, the same in every thread: a
    single value's kind (sum, max...) as a balanced tree, so that the partial holding a
    row's largest terms meets log2(k) roundings rather than up to k - 1 (and the critical
    path is log2(k) combines); a tuple kind as a chain (its merge is long, and a tree in
    every thread keeps more of its values live: `_over_lanes` spreads it instead).
    Measured on an H100 (softmax f32, rows of 4097 under a cluster of 16 CTAs of 256
    threads, 255744 random rows of randn * 8, the error of each row's largest element):
    with the chains, median 0.80 ulp, 99th percentile 4.22, max 8.8, and a CTA of 1024
    threads (its 32 warps' partials a chain) 0.96, 5.42, 11.2; with the trees 0.67, 3.28,
    6.9 and 0.66, 3.27, 7.2; torch's 0.67, 3.27, 7.2 (a chain's worst rows failed the gpu
    tier's "no worse than 4x torch's error" now and then). Device time in the same run
    (100 repetitions, tree against chain): softmax and RMSNorm over rows of 1024 to 2^18
    within +-0.2%, but RMSNorm bf16 rows of 2^16 3.029 -> 3.051 TB/s and sum bf16
    8192x8192 over dim -1 2.895 -> 2.872."""
    if red.arity > 1 or len(values) <= 2:
        total = values[0]
        for value in values[1:]:
            total = red.combine(total, value)
        return total
    half = len(values) // 2
    return red.combine(_fold(red, values[:half]), _fold(red, values[half:]))


def _writer(op: _Local) -> ir.Value:
    """The one holder of each output that writes a memory dst: reduced fields (of the
    cluster's CTAs too) and replicas at 0."""
    first = arith.cmpi(arith.CmpIPredicate.eq, op.tid,
                       _cleared(op.tid, (*op.plan.lanes, *op.plan.warps, *op.plan.ctas)))
    threads = op.plan.threads
    axes = induced.axis_values(op.layout, op.tid, threads)
    replica = induced.first_replica(op.layout, axes)
    return first if replica is None else arith.andi(first, replica)


def _store(op: _Local, coords: dict[int, ir.Value], value: ir.Value) -> None:
    """dst at the kept coordinates: dst has the kept axes, or all of them with 1s (or is
    (1,) for a reduction of everything); a tuple kind's values each into its dst of the
    source's shape (_store_spread)."""
    info, red = op.info, op.red
    rank = len(info.sources[0].shape)
    zero = const_index(0)
    if red.arity > 1:
        _store_spread(op, coords, value)
        return
    dst = op.dst
    if len(dst.operand.shape) == rank:
        indices = [coords[a] if a in red.kept else zero for a in range(rank)]
    else:
        indices = [coords[a] for a in red.kept] or [zero]
    if dst.layout is not None:
        assert dst.storage is not None
        dims = {i: index for i, index in enumerate(indices)}
        red.store(value, (dst.storage, [_offset(dst.layout, dims)]), dst.operand.dtype)
        return
    red.store(value, (dst.operand.value, indices), dst.operand.dtype)


def _store_spread(op: _Local, coords: dict[int, ir.Value], value: ir.Value) -> None:
    """A tuple kind's values into its dsts, each of the source's shape and layout: at
    every position the thread holds along the reduced axes (its own coordinate of a
    reduced axis over threads, each of a reduced register dim)."""
    layout = op.layout
    axes = induced.axis_values(layout, op.tid, op.plan.threads)
    at = dict(coords)
    for a in op.red.axes:
        it = layout.shard[a]
        if it.axis is not None:
            at[a] = induced.digit(axes[it.axis], it.stride, it.extent)
    parts = op.red.unpack(value)

    def store(position: dict[int, ir.Value], dims: list[int]) -> None:
        if dims:
            loop = scf.ForOp(const_index(0), const_index(layout.shape[dims[0]]),
                             const_index(1))
            with ir.InsertionPoint(loop.body):
                store({**position, dims[0]: loop.induction_variable}, dims[1:])
                scf.YieldOp([])
            return
        for dst, part in zip(op.dsts, parts, strict=True):
            assert dst.storage is not None
            op.red.store(part, (dst.storage, [_offset(layout, position)]), dst.operand.dtype)

    store(at, _register_dims(layout, op.red.axes))


def _thread_coords(op: _Local) -> dict[int, ir.Value]:
    """The kept source dims spread over threads: their coordinate from the thread index."""
    layout = op.layout
    axes = induced.axis_values(layout, op.tid, op.plan.threads)
    coords = {}
    for a in op.red.kept:
        it = layout.shard[a]
        if it.axis is not None:
            coords[a] = induced.digit(axes[it.axis], it.stride, it.extent)
    return coords


# ------------------------------------------------------------ folds over the lanes

SPREAD_MIN = 4
"""Partials of a tuple kind folded over a warp's lanes from this many on (fewer: a chain
of merges is as short)."""


def _spread(op: _Local, count: int) -> bool:
    """Whether the `count` partials that every thread of a warp folds alike (the same
    base) go over the warp's lanes (`_over_lanes`) rather than a chain of combines in
    every thread: for a tuple kind, whose merge is long (Welford's: a reciprocal and some
    ten dependent operations; online softmax's: an exp), a power of two of them from
    SPREAD_MIN to a warp's worth, in a scope of whole warps, none past its last thread."""
    plan = op.plan
    return (op.red.arity > 1 and SPREAD_MIN <= count <= WARP and count & (count - 1) == 0
            and not plan.partial_warp and not plan.beyond
            and len({plan.base(t) for t in range(WARP)}) == 1)


def _over_lanes(op: _Local, count: int, read: Callable[[ir.Value], ir.Value]) -> ir.Value:
    """`count` partials folded over the lanes: lane l reads partial l % count
    (read(index)), an xor butterfly folds each `count` lanes, and lane 0's result goes to
    the whole warp (the butterfly's lanes hold the same fold in other orders, so other
    bits for a merge that rounds differently with its operands swapped). The critical
    path is log2(count) merges and shuffles where a chain is count - 1 merges; each
    thread holds one partial, not count (a balanced tree in every thread took 128
    registers where layer norm's cluster kernel keeps 80). Measured: the module
    docstring."""
    lane = arith.remui(op.tid, const_index(WARP))
    value = read(arith.remui(lane, const_index(count)))
    return broadcast(butterfly(op.red, value, op.mask, count), op.mask)


def _field_offset(fields: tuple[Field, ...], index: ir.Value) -> ir.Value:
    """The offset (in threads) of partial `index` in the order of threads._offsets: the
    digits of index over the fields' extents, the last field fastest."""
    offset: ir.Value | None = None
    for f in reversed(fields):
        digit = arith.remui(index, const_index(f.extent))
        index = arith.divui(index, const_index(f.extent))
        term = arith.muli(digit, const_index(f.stride))
        offset = term if offset is None else arith.addi(offset, term)
    return offset if offset is not None else const_index(0)


# ------------------------------------------------------------ the scratch's reuse


def _barrier_scope(other: ir.Operation) -> str | None:
    """The scope of the barrier an op is or will lower to (None: none known)."""
    name = other.name
    if name == "gpu.barrier":
        return "cta"
    if name == "nvvm.barrier":
        return "warpgroup"
    if name == sync.CLUSTER_WAIT:
        return "cluster"
    found = _plan_of(other) if name == "tile.reduce" else None
    if found is None:
        return None
    info, plan = found
    if plan.ctas and not _mailboxes(other):
        return "cluster"  # its last barrier
    if plan.ctas and _trailing_cta_barrier(other):
        return "cta"
    if not plan.warps:
        return None
    return "cta" if info.scope == "cluster" else info.scope


def _plan_of(op: ir.Operation) -> tuple[OpInfo, ThreadPlan] | None:
    """A tile.reduce's thread plan where it lowers to the register reduction."""
    if "variant" not in op.attributes or \
            ir.StringAttr(op.attributes["variant"]).value != "local":
        return None
    info = describe(op.opview)
    layout, threads = info.sources[0].layout, info.scope_threads
    if layout is None or threads is None:
        return None
    plan, _ = thread_plan(layout, Reduction.of(info).axes, threads, cluster_block(info))
    return None if plan is None else (info, plan)


def reused_without_barrier(op: ir.Operation, scope: str) -> bool:
    """Can the op run again (a loop encloses it) with no barrier of its scope (or wider)
    between one run's reads of its scratch and the next run's writes? Another op of its
    block that is or lowers to such a barrier runs between any two of its runs."""
    if not sync.in_loop(op):
        return False
    for other in op.block.operations:
        if other.operation == op:
            continue
        found = _barrier_scope(other.operation)
        if found is not None and SCOPES.index(found) >= SCOPES.index(scope):
            return False
    return True
