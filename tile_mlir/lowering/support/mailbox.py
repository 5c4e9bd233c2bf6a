"""Mailboxes: a cluster's CTAs hand each other their partials without a cluster barrier.

A reduction across the CTAs of a cluster (sm_90) can meet in two ways. Through
barriers (registers.py's `_through_barriers`): each CTA leaves its partial in its own
shared memory, a cluster barrier, every thread reads every CTA's partial remotely, and
a second cluster barrier keeps each CTA's shared memory alive until its readers are
done. Or through mailboxes (this module): every CTA owns, per reduction, a mailbox in
its shared memory (a slot per CTA of the cluster and kept coordinate) and an mbarrier
that expects the bytes of every post into it. Thread r of each CTA writes the CTA's
partial into slot [its rank] of CTA r's mailbox with st.async, a remote store that
completes its bytes on CTA r's mbarrier (one message: the data and its signal); each
CTA's threads wait for their own mbarrier's first phase
(mbarrier.test_wait.parity.acquire.cluster) and read the slots from their own shared
memory. Nothing waits for the slowest thread of every CTA and no thread reads across
the cluster. A CTA's mailbox is written only before its own wait completes, so no CTA
can exit before the posts into it; one relaxed cluster barrier whose wait stands at the
kernel's end says so for compute-sanitizer (`close_mailboxes`).

The posts were first a store (st.shared::cluster) and then an arrive on the peer's
mbarrier (mbarrier.arrive.release.cluster), whose release waits for the store to be
performed across the cluster before the arrive is sent. st.async sends both at once.
Measured on an H100 (bench/fused.py's long rows, the two forms in one process): softmax
bf16 rows of 2^18 2.45 -> 2.76 TB/s and of 2^16 2.64 -> 2.84, f32 2^18 2.67 -> 2.86;
layer norm bf16 2^18 2.32 -> 2.44; RMSNorm bf16 2^18 2.64 -> 2.70; f32 2^16 2.96 ->
3.00; every case as fast or faster. st.async needs PTX 8.1 (the default target's
features; tile-target says so at the tile.reduce for an older one).

An mbarrier must be initialized before a peer posts into it: thread 0 of each CTA
initializes the kernel's mbarriers at its entry (for one arrival, its own, which
expects the posts' bytes), then a fence (fence.mbarrier_init) and a relaxed cluster
arrive; a cluster wait before the first mailbox write makes every CTA's initialization
visible to the others. The CTAs of a cluster start together, so that wait is short; it
stands after the loads the kernel issues first.

The wait spins on mbarrier.test_wait (try_wait's suspension, through inline PTX, measured
no faster on an H100). compute-sanitizer: memcheck and synccheck are clean; racecheck
reports each post and the read of its slot as a possible race (a warning, not an
error): it does not follow the ordering st.async's complete_tx makes through the
mbarrier (the store and arrive.release form had none; an arrive.release after each
st.async, tried for racecheck's sake, cost what that form did, softmax bf16 rows of 2^18
2.79 -> 2.44 TB/s, and left the warnings).

A reduction that runs once per launch (it stands in the kernel's entry block) uses its
mbarrier for one phase. A reduction in the body of a loop that stands in the entry block
(a persistent kernel's loop over rows: every CTA of the cluster runs the same
iterations) takes two mailboxes and two mbarriers, iteration k using half k % 2 and
waiting for the phase of parity (k / 2) % 2 of its mbarrier; after its wait, thread 0
arrives again on that mbarrier, expecting the bytes of the posts of iteration k + 2.
Why two halves: a CTA can finish iteration k (every post into it arrived) and post
iteration k + 1's partials into a peer whose iteration-k posts from a third CTA are still
on their way; with one mbarrier those bytes could complete the peer's phase k early.
Posts for iteration k + 2 into a CTA come only after that CTA's own posts of iteration
k + 1 (its peers wait for them first), which come after its iteration-k reads: the
reduction ends with a barrier of the CTA in a loop (registers.py), so every thread of
the CTA has read its half (and the CTA's scratch) before any of them posts again. Such a
post may reach the mbarrier before thread 0's arrive that expects it: its bytes count
down the phase's tx-count below zero, and the phase cannot complete without that arrive.

registers.py uses mailboxes where every reduction across CTAs of the kernel stands so
(in the entry block, or in such a loop's body; no branch around it) and the kernel has no
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
    shared_element,
    shared_pointer,
)
from tile_mlir.lowering.support.sync import CLUSTER_WAIT

ARRIVE_RELAXED = "nvvm.cluster.arrive.relaxed"
MARK = "tile.mailbox"
"""A unit attribute on the cluster arrive `close_mailboxes` makes (not another barrier)."""


POST = "st.async.shared::cluster.mbarrier::complete_tx::bytes"
"""A post: a remote store of up to four 32-bit words that completes its bytes on the
receiving CTA's mbarrier (one message, no release fence; sm_90, PTX 8.1)."""


def _words(element: ir.Type) -> int:
    """32-bit words of a mailbox slot: an f32, or a vector of them (a tuple kind's)."""
    if isinstance(element, ir.VectorType):
        shape = element.shape
        assert len(shape) == 1, element
        return shape[0]
    return 1


def _sent(words: int) -> int:
    """32-bit words a post of `words` sends: st.async stores one, two or four."""
    return 4 if words == 3 else words


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


def entry_loop(op: ir.Operation) -> ir.Operation | None:
    """The scf.for whose body holds the op, where that loop stands in the kernel's entry
    block (None otherwise)."""
    parent = op.parent
    if parent is None or parent.name != "scf.for":
        return None
    loop = parent.operation if isinstance(parent, ir.OpView) else parent
    return loop if in_entry_block(loop) else None


def runs_in_step(op: ir.Operation) -> bool:
    """Does every thread of the kernel run the op the same number of times, in step: once
    (in the entry block) or once an iteration of a loop of the entry block? (A mailbox
    serves such a reduction.)"""
    return in_entry_block(op) or entry_loop(op) is not None


def outermost(op: ir.Operation) -> ir.Operation:
    """The op, or the loop of the entry block that holds it: what stands in the entry
    block for it."""
    return entry_loop(op) or op


class Mailbox:
    """One reduction's mailbox: `slots` accumulators of type `element` per CTA of a
    cluster of `ctas`, and its mbarrier, initialized at the kernel's entry; two of each
    (halves) for a reduction in a loop of the entry block (the module's docstring)."""

    def __init__(self, op: ir.Operation, element: ir.Type, slots: int, ctas: int,
                 block: tuple[int, int, int]):
        self.element = element
        self.words = _words(element)
        self.size = slots * ctas
        loop = entry_loop(op)
        halves = 1 if loop is None else 2
        self.buffer = shared_scratch(op, "__tile_mailbox", element, self.size * halves)
        self.slots = shared_pointer(self.buffer)
        self.expected = 4 * _sent(self.words) * self.size
        barriers, self.leader = self._initialize(op, block, halves)
        self.half: ir.Value | None = None
        self.parity = const(_i32(), 0)
        self.barrier = barriers
        if loop is not None:
            self.half, self.parity = _iteration(loop)
            self.barrier = shared_element(barriers, ir.IntegerType.get_signless(64), self.half)

    def _initialize(self, op: ir.Operation, block: tuple[int, int, int], halves: int
                    ) -> tuple[ir.Value, ir.Value]:
        """The mbarriers, made at the entry after the allocas (which must stay in LLVM's
        entry block, which the branch here splits, to be promoted to registers): thread 0
        initializes each for one arrival, its own, which says how many bytes the posts
        bring, before the fence and the relaxed cluster arrive that the first mailbox of
        the kernel puts there. Returns the first one's pointer and thread 0's predicate
        (the entry dominates the op)."""
        entry = entry_block(op)
        first = next((o for o in entry.operations if o.operation.name == ARRIVE_RELAXED
                      and MARK not in o.operation.attributes), None)
        at = next(o for o in entry.operations if o.operation.name != "memref.alloca")
        with ir.InsertionPoint(at):
            i64 = ir.IntegerType.get_signless(64)
            pointer = shared_pointer(shared_scratch(op, "__tile_mailbox_barrier", i64, halves))
            leader = arith.cmpi(arith.CmpIPredicate.eq, linear_thread_id(block),
                                const_index(0))

            def initialize() -> None:
                for half in range(halves):
                    barrier = shared_element(pointer, i64, const_index(half)) if half else pointer
                    nvvm.mbarrier_init(barrier, const(_i32(), 1))
                    nvvm.mbarrier_arrive_expect_tx(None, barrier, const(_i32(), self.expected))

            # a branch, not the op's predicate (which the translation to LLVM IR drops
            # unless convert-nvvm-to-llvm has run)
            tails.when(leader, initialize)
            if first is None:
                nvvm.fence_mbarrier_init()
                nvvm.cluster_arrive_relaxed()
        return pointer, leader

    def _slot(self, index: ir.Value) -> ir.Value:
        """A slot's index in this iteration's half."""
        if self.half is None:
            return index
        return arith.addi(arith.muli(self.half, const_index(self.size)), index)

    def post(self, value: ir.Value, index: ir.Value, rank: ir.Value) -> None:
        """Write `value` into slot `index` of the mailbox of the CTA of `rank`: one
        st.async of its words (a tuple of three padded to four), which completes their
        bytes on that CTA's mbarrier."""
        words = [value] if self.words == 1 else \
            [llvm.extractelement(value, const(_i32(), k)) for k in range(self.words)]
        words += [words[-1]] * (_sent(self.words) - self.words)
        address = cluster_address(self.slots, rank, self.element, self._slot(index))
        barrier = cluster_address(self.barrier, rank)
        vec = f".v{len(words)}" if len(words) > 1 else ""
        operands = ", ".join(f"${k + 1}" for k in range(len(words)))
        operands = f"{{{operands}}}" if len(words) > 1 else operands
        llvm.inline_asm(None, [address, *words, barrier],
                        f"{POST}{vec}.b32 [$0], {operands}, [${len(words) + 1}];",
                        ",".join(["l", *"r" * len(words), "l"]), has_side_effects=True)

    def wait(self) -> None:
        """Until every post into this CTA's mailbox has arrived (its mbarrier's phase:
        the posts' bytes all complete), acquiring them; in a loop, thread 0 then arrives
        again, expecting the bytes of this half's next use."""
        loop = scf.WhileOp([], [])
        before = loop.before.blocks.append()
        with ir.InsertionPoint(before):
            done = nvvm.mbarrier_test_wait(ir.IntegerType.get_signless(1), self.barrier,
                                           self.parity, scope=_cluster_scope())
            pending = arith.xori(done, const(ir.IntegerType.get_signless(1), 1))
            scf.ConditionOp(pending, [])
        after = loop.after.blocks.append()
        with ir.InsertionPoint(after):
            scf.YieldOp([])
        if self.half is not None:
            tails.when(self.leader, lambda: nvvm.mbarrier_arrive_expect_tx(
                None, self.barrier, const(_i32(), self.expected)))

    def read(self, index: ir.Value) -> ir.Value:
        """Slot `index` of this CTA's own mailbox."""
        return memref.load(self.buffer, [self._slot(index)])


def _iteration(loop: ir.Operation) -> tuple[ir.Value, ir.Value]:
    """For the iteration k of an scf.for now running: (k % 2, an index: the half) and
    ((k / 2) % 2, an i32: the parity of the phase it waits for)."""
    lower, _, step = loop.operands[:3]
    iv = loop.regions[0].blocks[0].arguments[0]
    k = arith.divui(arith.subi(iv, lower), step)
    half = arith.andi(k, const_index(1))
    parity = arith.andi(arith.shrui(k, const_index(1)), const_index(1))
    return half, arith.index_cast(_i32(), parity)


def open_mailboxes(op: ir.Operation) -> None:
    """Before the first mailbox write of the kernel: the cluster wait that pairs with the
    entry's relaxed arrive (every CTA's mbarriers are initialized past it). Put before the
    op (before its loop, for one in a loop) unless a wait already stands in the entry
    block before it."""
    entry = entry_block(op)
    at = outermost(op)
    for other in entry.operations:
        if other.operation == at:
            break
        if other.operation.name == CLUSTER_WAIT:
            return
    with ir.InsertionPoint(at):
        nvvm.cluster_wait()


def close_mailboxes(op: ir.Operation) -> None:
    """After the kernel's last posts: a relaxed cluster arrive, and its wait before the
    kernel returns, so that no CTA exits before every CTA has made its last posts. The
    mbarriers already order every post into a CTA before the CTA's last wait completes;
    the barrier says that no CTA leaves early in the form compute-sanitizer's racecheck
    checks (without it, a write into a CTA that "might have already exited"). It orders
    execution only: the arrive's default release semantics (a thread's earlier memory
    operations performed before it arrives) cost 2-6% and ordered nothing the mbarriers
    do not. Measured on an H100 (bench/fused.py's long rows, release against relaxed in
    one process, 200 repetitions): softmax bf16 rows of 2^18 2.77 -> 2.92 TB/s, of 2^16
    2.83 -> 3.00, f32 2^18 2.85 -> 3.00; RMSNorm bf16 2^18 2.70 -> 2.85, f32 2^18 2.70 ->
    2.76; the fused add bf16 2^18 2.82 -> 2.89; layer norm within 1% (bf16) or 1-3%
    faster (f32). Dropping the barrier was no faster than the relaxed one."""
    loop = entry_loop(op)
    if loop is None:
        arrive = nvvm.cluster_arrive_relaxed()
    else:
        with ir.InsertionPoint.after(loop), loop.location:
            arrive = nvvm.cluster_arrive_relaxed()
    arrive.operation.attributes[MARK] = ir.UnitAttr.get()
    entry = entry_block(op)
    terminator = list(entry.operations)[-1]
    with ir.InsertionPoint(terminator), terminator.location:
        nvvm.cluster_wait()
