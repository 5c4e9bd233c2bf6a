"""Mailboxes: a cluster's CTAs hand each other their partials without a cluster barrier.

A reduction across the CTAs of a cluster (sm_90) can meet in two ways. Through
barriers (registers.py's `_through_barriers`): each CTA leaves its partial in its own
shared memory, a cluster barrier, every thread reads every CTA's partial remotely, and
a second cluster barrier keeps each CTA's shared memory alive until its readers are
done. Or through mailboxes (this module): every CTA owns, per reduction, a mailbox in
its shared memory (a slot per CTA of the cluster and kept coordinate) and an mbarrier
that expects one arrival per CTA. Thread r of each CTA writes the CTA's partial into
slot [its rank] of CTA r's mailbox (st.shared::cluster) and then arrives on CTA r's
mbarrier (mbarrier.arrive.release.cluster); each CTA's threads wait for their own
mbarrier's first phase (mbarrier.test_wait.parity.acquire.cluster) and read the slots
from their own shared memory. Nothing waits for the slowest thread of every CTA and no
thread reads across the cluster. A CTA's mailbox is written only before its own wait
completes, so no CTA can exit before the posts into it; one cluster barrier whose wait
stands at the kernel's end says so for compute-sanitizer (`close_mailboxes`).

An mbarrier must be initialized before a peer arrives on it: thread 0 of each CTA
initializes the kernel's mbarriers at its entry, then a fence (fence.mbarrier_init)
and a relaxed cluster arrive; a cluster wait before the first mailbox write makes every
CTA's initialization visible to the others. The CTAs of a cluster start together, so
that wait is short; it stands after the loads the kernel issues first.

The wait spins on mbarrier.test_wait (try_wait's suspension, through inline PTX, measured
no faster on an H100). compute-sanitizer: memcheck and synccheck are clean; racecheck
reports each post and the read of its slot as a possible race (a warning, not an
error): it does not follow an ordering made through an mbarrier across CTAs.

Each mbarrier is used for one phase, so a mailbox serves a reduction that runs once per
launch: registers.py uses mailboxes where every reduction across CTAs of the kernel
stands in the kernel's entry block (no loop, no branch around it) and the kernel has no
other cluster barrier (the relaxed arrive at the entry must be the only one before the
wait).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, llvm, memref, nvvm, scf

from tile_mlir.lowering.support import tails
from tile_mlir.lowering.support.analysis import enclosing
from tile_mlir.lowering.support.buffers import shared_scratch
from tile_mlir.lowering.support.emit import (
    cluster_address,
    const,
    const_index,
    linear_thread_id,
    shared_pointer,
)
from tile_mlir.lowering.support.sync import CLUSTER_WAIT

ARRIVE_RELAXED = "nvvm.cluster.arrive.relaxed"
MARK = "tile.mailbox"
"""A unit attribute on the cluster arrive `close_mailboxes` makes (not another barrier)."""


def _i32() -> ir.Type:
    return ir.IntegerType.get_signless(32)


def _cluster_scope() -> ir.Attribute:
    return ir.Attribute.parse("#nvvm.mem_scope<cluster>")


def entry_block(op: ir.Operation) -> ir.Block:
    kernel = enclosing(op, "gpu.func")
    assert kernel is not None
    return kernel.operation.regions[0].blocks[0]


def in_entry_block(op: ir.Operation) -> bool:
    """Does the op stand in its kernel's entry block (run once by every thread)?"""
    return enclosing(op, "gpu.func") is not None and op.block == entry_block(op)


class Mailbox:
    """One reduction's mailbox: `slots` accumulators of type `element` per CTA of a
    cluster of `ctas`, and its mbarrier, initialized at the kernel's entry."""

    def __init__(self, op: ir.Operation, element: ir.Type, slots: int, ctas: int,
                 block: tuple[int, int, int]):
        self.element, self.ctas = element, ctas
        self.buffer = shared_scratch(op, "__tile_mailbox", element, slots * ctas)
        self.slots = shared_pointer(self.buffer)
        self.barrier = self._initialize(op, block)

    def _initialize(self, op: ir.Operation, block: tuple[int, int, int]) -> ir.Value:
        """The mbarrier, made at the entry after the allocas (which must stay in LLVM's
        entry block, which the branch here splits, to be promoted to registers): thread 0
        initializes it, before the fence and the relaxed cluster arrive that the first
        mailbox of the kernel puts there. Returns its pointer (the entry dominates the
        op, which stands in the entry block too)."""
        entry = entry_block(op)
        first = next((o for o in entry.operations if o.operation.name == ARRIVE_RELAXED), None)
        at = next(o for o in entry.operations if o.operation.name != "memref.alloca")
        with ir.InsertionPoint(at):
            i64 = ir.IntegerType.get_signless(64)
            pointer = shared_pointer(shared_scratch(op, "__tile_mailbox_barrier", i64, 1))
            leader = arith.cmpi(arith.CmpIPredicate.eq, linear_thread_id(block),
                                const_index(0))
            # a branch, not the op's predicate (which the translation to LLVM IR drops
            # unless convert-nvvm-to-llvm has run)
            tails.when(leader, lambda: nvvm.mbarrier_init(pointer, const(_i32(), self.ctas)))
            if first is None:
                nvvm.fence_mbarrier_init()
                nvvm.cluster_arrive_relaxed()
        return pointer

    def post(self, value: ir.Value, index: ir.Value, rank: ir.Value) -> None:
        """Write `value` into slot `index` of the mailbox of the CTA of `rank`."""
        llvm.store(value, cluster_address(self.slots, rank, self.element, index))

    def arrive(self, rank: ir.Value) -> None:
        """Arrive on the mbarrier of the CTA of `rank`, releasing this thread's posts."""
        nvvm.mbarrier_arrive(None, cluster_address(self.barrier, rank),
                             scope=_cluster_scope())

    def wait(self) -> None:
        """Until every CTA has arrived on this CTA's mbarrier (its first phase), acquiring
        their posts."""
        loop = scf.WhileOp([], [])
        before = loop.before.blocks.append()
        with ir.InsertionPoint(before):
            done = nvvm.mbarrier_test_wait(ir.IntegerType.get_signless(1), self.barrier,
                                           const(_i32(), 0), scope=_cluster_scope())
            pending = arith.xori(done, const(ir.IntegerType.get_signless(1), 1))
            scf.ConditionOp(pending, [])
        after = loop.after.blocks.append()
        with ir.InsertionPoint(after):
            scf.YieldOp([])

    def read(self, index: ir.Value) -> ir.Value:
        """Slot `index` of this CTA's own mailbox."""
        return memref.load(self.buffer, [index])


def open_mailboxes(op: ir.Operation) -> None:
    """Before the first mailbox write of the kernel: the cluster wait that pairs with the
    entry's relaxed arrive (every CTA's mbarriers are initialized past it). Put before the
    op unless a wait already stands in the entry block before it."""
    entry = entry_block(op)
    for other in entry.operations:
        if other.operation == op:
            break
        if other.operation.name == CLUSTER_WAIT:
            return
    nvvm.cluster_wait()


def close_mailboxes(op: ir.Operation) -> None:
    """After the kernel's last posts: a cluster arrive (release), and its wait before the
    kernel returns, so that no CTA exits before every post into its shared memory is
    performed. The mbarriers order that already (a CTA passes its last wait only after
    every post into it); the barrier says it in the form compute-sanitizer's racecheck
    checks (without it, a write into a CTA that "might have already exited"). It cost
    2-5% on bench/fused.py's rows of 2^16 and 2^18 elements on an H100."""
    arrive = nvvm.cluster_arrive()
    arrive.operation.attributes[MARK] = ir.UnitAttr.get()
    entry = entry_block(op)
    terminator = list(entry.operations)[-1]
    with ir.InsertionPoint(terminator), terminator.location:
        nvvm.cluster_wait()
