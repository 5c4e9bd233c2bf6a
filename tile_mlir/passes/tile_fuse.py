"""tile-fuse: chains of elementwise ops through temporaries become one fused op.

A producer -> consumer pair fuses when the producer (a `tile.elementwise`, or a
`tile.copy`: the registry's copy row) writes a temporary that the consumer (the
same kinds) reads and that nothing else touches:
- the temporary is a fresh allocation (tile.alloc, memref.alloca, memref.alloc),
  not a kernel argument, a global or a view, which outlive the kernel or alias
  other buffers: observable;
- its only uses are the producer's dst and the consumer's inputs (no other
  reader or writer, before, between or after, in any block);
- the producer is no copy with `padding` (the fused op would apply on the source's
  overlap only, leaving the padded elements unwritten);
- both ops are in one block at the same scope, force no different lowering
  variant or options, no op between them writes what the producer reads (the
  fused op reads it at the consumer's place), and the consumer's dst is what
  the producer reads (in place) or cannot overlap it (kernel arguments overlap
  unless one is llvm.noalias);
- the fused op has a lowering variant (its operands' memories mix as one op's
  may), walks the consumer's elements (a register temporary that set the walk may not
  leave only broadcast register operands behind) and fits the dialect's operand
  slots (op_table/fusion.py).
Each fusion replaces the pair by one `tile.elementwise {op = "fused"}` at the
consumer, writing the consumer's dst, with the union of both ops' inputs (an
input both read is read once) and the producer's steps before the consumer's,
each rounded to its buffer's type as before (op_table/fusion.py says what the
form means); the dead allocation goes. Ops are visited in order, and each
consumer takes producers until none is left, so a chain of any length becomes
one op. With `explain` (tile-opt --tile-explain) every fusion and every refused
candidate (a tile op writing what a consumer reads, just before it in its
block) is a remark at the consumer, with the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mlir import ir

from tile_mlir import lowering
from tile_mlir.dialects import tile
from tile_mlir.dtypes import by_mlir
from tile_mlir.lowering.support.alignment import defining_op, root_buffer
from tile_mlir.lowering.support.analysis import describe, memory_space
from tile_mlir.op_table import fusion
from tile_mlir.passes import TilePass, tile_ops

FUSIBLE = ("tile.elementwise", "tile.copy")
ALLOCATIONS = ("tile.alloc", "memref.alloca", "memref.alloc")
OPTIONS = ("variant", "vector_bytes", "stage")
"""Attributes the fused op takes over from the pair; they must not disagree."""
_READ_ONLY = ("memref.load", "vector.load", "memref.dim", "memref.extract_strided_metadata",
              "memref.subview", "memref.cast", "memref.reinterpret_cast",
              "memref.collapse_shape", "memref.expand_shape", "memref.get_global",
              "memref.extract_aligned_pointer_as_index")
"""Ops with memref operands that write none of them."""


def where(op: ir.OpView | ir.Operation) -> str:
    """An op's line:col for a remark (its location text when it has none)."""
    text = str(op.operation.location)
    m = re.search(r":(\d+):(\d+)\)", text)
    return f"{m.group(1)}:{m.group(2)}" if m else text


def subject(op: ir.OpView | ir.Operation) -> str:
    """`tile.elementwise add`, `tile.elementwise fused(add, gelu)`, `tile.copy`: what a
    remark calls an op."""
    attrs = op.operation.attributes
    if op.operation.name != "tile.elementwise" or "op" not in attrs:
        return op.operation.name
    name = ir.StringAttr(attrs["op"]).value
    if name == fusion.FUSED and fusion.EXPR in attrs:
        rows = [fusion.parse_step(ir.StringAttr(a).value).row
                for a in ir.ArrayAttr(attrs[fusion.EXPR])]
        name += f"({', '.join(rows)})"
    return f"{op.operation.name} {name}"


def links(op: ir.OpView) -> list[fusion.Link[ir.Value]]:
    """The chain a fusible op computes (one link unless it is fused already)."""
    operation = op.operation
    inputs = list(operation.operands)[1:]
    dtype = by_mlir(str(ir.MemRefType(operation.operands[0].type).element_type)).name
    if operation.name == "tile.copy":
        return [fusion.Link("copy", tuple(inputs), dtype)]
    name = ir.StringAttr(operation.attributes["op"]).value
    if name != fusion.FUSED:
        return [fusion.Link(name, tuple(inputs), dtype)]
    texts = [ir.StringAttr(a).value for a in ir.ArrayAttr(operation.attributes[fusion.EXPR])]
    return fusion.Expr.parse(texts).chain(inputs)


def splice(producer: ir.OpView, consumer: ir.OpView, temporary: ir.Value
           ) -> list[fusion.Link[ir.Value]]:
    """The producer's chain, then the consumer's reading the producer's result where it
    read the temporary."""
    first = links(producer)
    shift = len(first)
    result = fusion.Result(shift - 1)

    def moved(arg: ir.Value | fusion.Result) -> ir.Value | fusion.Result:
        if isinstance(arg, fusion.Result):
            return fusion.Result(arg.link + shift)
        return result if arg == temporary else arg

    second: list[fusion.Link[ir.Value]] = [
        fusion.Link(link.row, tuple(moved(a) for a in link.args), link.dtype)
        for link in links(consumer)]
    return first + second


# ------------------------------------------------------------------ aliasing


def _is_kernel_argument(value: ir.Value) -> bool:
    owner = value.owner
    return isinstance(owner, ir.Block) and owner.owner is not None and \
        owner.owner.operation.name in ("gpu.func", "func.func")


def _noalias(value: ir.Value) -> bool:
    """A kernel argument marked llvm.noalias: no other argument reaches its memory."""
    block = value.owner
    assert isinstance(block, ir.Block) and block.owner is not None
    attrs = block.owner.operation.attributes
    if "arg_attrs" not in attrs:
        return False
    number = ir.BlockArgument(value).arg_number
    arg_attrs = ir.ArrayAttr(attrs["arg_attrs"])
    return number < len(arg_attrs) and "llvm.noalias" in ir.DictAttr(arg_attrs[number])


def _global_name(value: ir.Value) -> str | None:
    op = defining_op(value)
    if op is None or op.name != "memref.get_global":
        return None
    return ir.FlatSymbolRefAttr(op.attributes["name"]).value


def may_alias(a: ir.Value, b: ir.Value) -> bool:
    """Whether two memrefs may reach the same memory: the same root buffer, the same
    global, or two kernel arguments neither of which is noalias; distinct allocations and
    different memory spaces never do; anything else may."""
    if memory_space(ir.MemRefType(a.type)) != memory_space(ir.MemRefType(b.type)):
        return False
    ra, rb = root_buffer(a), root_buffer(b)
    if ra == rb:
        return True
    if _is_kernel_argument(ra) and _is_kernel_argument(rb):
        return not (_noalias(ra) or _noalias(rb))
    names = _global_name(ra), _global_name(rb)
    if None not in names:
        return names[0] == names[1]
    fresh = [(op := defining_op(r)) is not None and op.name in ALLOCATIONS for r in (ra, rb)]
    return not any(fresh)


def written(op: ir.Operation) -> list[ir.Value]:
    """The memrefs an op (with the ops nested in it) may write: a tile op's dst, every
    memref operand of an op not known to only read."""
    found: list[ir.Value] = []

    def visit(inner: ir.Operation) -> ir.WalkResult:
        name = inner.name
        if name in tile.OP_NAMES:
            found.extend(list(inner.operands)[:1] if name in tile.WRITERS else [])
        elif name not in _READ_ONLY:
            found.extend(v for v in inner.operands if isinstance(v.type, ir.MemRefType))
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


# ------------------------------------------------------------------ the checks


def _temporary(value: ir.Value) -> str:
    """Why the intermediate is not a temporary ("" when it is one)."""
    op = defining_op(value)
    if op is None:
        if _is_kernel_argument(value):
            return "the intermediate is a kernel argument, observable after the kernel"
        return "the intermediate is a block argument, not a temporary"
    if op.name in ALLOCATIONS:
        return ""
    root = root_buffer(value)
    if root != value:
        what = "a kernel argument" if _is_kernel_argument(root) else "another buffer"
        return f"the intermediate is a view of {what}, observable through it"
    if op.name == "memref.get_global":
        return "the intermediate is a global (memref.get_global), observable outside the op"
    return f"the intermediate is made by {op.name}, not an allocation"


def _other_use(value: ir.Value, producer: ir.OpView, consumer: ir.OpView) -> str:
    """Why the intermediate is used elsewhere ("" when only the pair uses it, the producer
    writing it and the consumer reading it)."""
    if value in list(producer.operation.operands)[1:]:
        return "the producer reads its own dst (the intermediate's old value)"
    if consumer.operation.operands[0] == value:
        return "the consumer writes the intermediate too"
    for use in value.uses:
        owner = use.owner.operation
        if owner in (producer.operation, consumer.operation):
            continue
        how = "written" if use.operand_number == 0 and owner.name in tile.WRITERS else \
            "read" if owner.name in tile.OP_NAMES else "used"
        return f"the intermediate is {how} elsewhere (by {subject(owner)} at {where(owner)})"
    return ""


def _options(producer: ir.OpView, consumer: ir.OpView) -> str:
    """Why the pair's lowering choices disagree ("" when they do not)."""
    for name in OPTIONS:
        mine = producer.operation.attributes.get(name)
        theirs = consumer.operation.attributes.get(name)
        if mine is not None and theirs is not None and mine != theirs:
            what = "lowering variant" if name == "variant" else f"'{name}'"
            return f"they force a different {what} ({mine} and {theirs})"
    return ""


def _between(producer: ir.OpView, consumer: ir.OpView, between: list[ir.OpView]) -> str:
    """Why the producer's reads cannot move to the consumer ("" when they can): an op
    between them writes what it reads, or the consumer's dst may overlap it."""
    reads = [v for v in list(producer.operation.operands)[1:]
             if isinstance(v.type, ir.MemRefType)]
    for op in between:
        for target in written(op.operation):
            if any(may_alias(target, read) for read in reads):
                return (f"the {subject(op)} at {where(op)} between them writes memory the "
                        "producer reads")
    dst = consumer.operation.operands[0]
    if any(dst != read and may_alias(dst, read) for read in reads):
        # unfused, the producer had read everything before the consumer wrote; fused,
        # each element is read where it is written, which is the same only for the same
        # view (in place)
        return ("the consumer's dst may overlap what the producer reads (the same buffer "
                "through another view, or kernel arguments not marked llvm.noalias)")
    return ""


def refusal(producer: ir.OpView, consumer: ir.OpView, temporary: ir.Value,
            between: list[ir.OpView]) -> str:
    """Why the pair does not fuse before it is built ("" when nothing says so)."""
    if producer.operation.name not in FUSIBLE:
        return f"its producer is a {producer.operation.name}, which does not fuse"
    if producer.operation.name == consumer.operation.name == "tile.copy":
        return "both are copies: nothing to compute"
    if "padding" in producer.operation.attributes:
        return ("the producer pads its dst past its source's end, which a fused op (applied "
                "on the overlap) would leave unwritten")
    scopes = [ir.StringAttr(op.operation.attributes["scope"]).value
              for op in (producer, consumer)]
    if scopes[0] != scopes[1]:
        return f"their scopes differ ({scopes[0]} and {scopes[1]})"
    return _temporary(temporary) or _other_use(temporary, producer, consumer) or \
        _options(producer, consumer) or _between(producer, consumer, between)


def _build(producer: ir.OpView, consumer: ir.OpView, temporary: ir.Value
           ) -> tuple[ir.OpView | None, str]:
    """The fused op, built before the consumer, or None and why it cannot be."""
    try:
        fused = fusion.build(splice(producer, consumer, temporary), lambda v: str(v.type))
    except fusion.FusionError as e:
        return None, f"the fused op cannot be written: {e}"
    attrs = {name: a for op in (producer, consumer) for name in OPTIONS
             if (a := op.operation.attributes.get(name)) is not None}
    scope = ir.StringAttr(consumer.operation.attributes["scope"]).value
    with ir.InsertionPoint(consumer.operation), consumer.operation.location:
        op = tile.ElementwiseOp(fusion.FUSED, consumer.operation.operands[0],
                                list(fused.inputs), scope=scope)
    op.operation.attributes[fusion.EXPR] = ir.ArrayAttr.get(
        [ir.StringAttr.get(text) for text in fused.expr.texts()])
    for name, attr in attrs.items():
        op.operation.attributes[name] = attr
    forced = attrs.get("variant")
    info = describe(op)
    walked = describe(consumer).over
    if info.over != walked:  # the temporary was the register tile that set the walk
        op.operation.erase()
        return None, (f"the fused op would walk {'x'.join(map(str, info.over))} elements, "
                      f"the consumer walks {'x'.join(map(str, walked))} (its register "
                      "operands would be broadcasts only)")
    decision = lowering.decide(info, ir.StringAttr(forced).value if forced else None)
    if decision.chosen is None:
        op.operation.erase()
        return None, f"no lowering variant takes the fused op:\n{decision.explain()}"
    return op, ""


# ------------------------------------------------------------------ the pass


@dataclass
class _Refusal:
    """A pair that did not fuse (so far), and the remark that says why."""

    producer: ir.Operation
    value: ir.Value
    location: ir.Location
    message: str


@dataclass
class _Block:
    """One block's fusions: its ops in order, kept current as pairs fuse."""

    ops: list[ir.OpView]
    explain: TilePass | None
    # the refused pairs, each with why, reported once the block is done: a pair refused
    # is asked again whenever its consumer has grown (the temporary's other reader may
    # have fused into it), and leaves the list before its producer is erased
    refused: list[_Refusal] = field(default_factory=list)

    def run(self) -> None:
        i = 0
        while i < len(self.ops):
            if self.ops[i].operation.name in FUSIBLE:
                while (fused := self._absorb(i)) is not None:
                    i = fused
            i += 1
        if self.explain is not None:
            for refusal in self.refused:
                self.explain.remark(refusal.message, refusal.location)

    def _forget(self, producer: ir.Operation, value: ir.Value) -> _Refusal | None:
        """Take the pair's refusal out of the list (None when it has none)."""
        for k, refusal in enumerate(self.refused):
            if refusal.producer == producer and refusal.value == value:
                return self.refused.pop(k)
        return None

    def _absorb(self, i: int) -> int | None:
        """Fuse one producer into the consumer at i: the fused op's index, or None when
        none fuses."""
        consumer = self.ops[i]
        seen: list[ir.Value] = []
        for n, value in enumerate(list(consumer.operation.operands)[1:]):
            if not isinstance(value.type, ir.MemRefType) or value in seen:
                continue
            seen.append(value)
            j = self._producer(i, value)
            if j is None:
                continue
            fused = self._fuse(j, i, value, n)
            if fused is not None:
                return fused
        return None

    def _producer(self, i: int, value: ir.Value) -> int | None:
        """The last tile op before i that writes `value` (its dst)."""
        for j in range(i - 1, -1, -1):
            operation = self.ops[j].operation
            if operation.name in tile.WRITERS and operation.operands[0] == value:
                return j
        return None

    def _fuse(self, j: int, i: int, temporary: ir.Value, n: int) -> int | None:
        """Fuse the producer at j into the consumer at i, which reads `temporary` as its
        input n: the fused op's index, or None (and a remark why)."""
        producer, consumer = self.ops[j], self.ops[i]
        why = refusal(producer, consumer, temporary, self.ops[j + 1:i])
        fused = None
        if not why:
            fused, why = _build(producer, consumer, temporary)
        self._forget(producer.operation, temporary)  # the latest answer is the one kept
        if fused is None:
            message = (f"{subject(consumer)}: not fused with the {subject(producer)} at "
                       f"{where(producer)} that writes its input {n}: {why}")
            self.refused.append(_Refusal(producer.operation, temporary,
                                         consumer.operation.location, message))
            return None
        self._remark(fused, f"{subject(consumer)}: fused the {subject(producer)} at "
                     f"{where(producer)} into it: expr {_expr_text(fused)}")
        self.ops[i] = fused
        consumer.operation.erase()
        producer.operation.erase()
        del self.ops[j]
        return i - 1 - self._drop_dead(temporary, i - 1)

    def _drop_dead(self, temporary: ir.Value, i: int) -> int:
        """Erase the temporary's allocation once nothing uses it: 1 if it was among the
        block's ops before i (which moves the fused op up one), else 0."""
        alloc = defining_op(temporary)
        if alloc is None or alloc.name not in ALLOCATIONS or list(temporary.uses):
            return 0
        k = next((k for k, op in enumerate(self.ops) if op.operation == alloc), None)
        alloc.erase()
        if k is None:
            return 0
        del self.ops[k]
        return 1 if k < i else 0

    def _remark(self, op: ir.OpView, message: str) -> None:
        if self.explain is not None:
            self.explain.remark(message, op.operation.location)


def _expr_text(op: ir.OpView) -> str:
    return fusion.Expr.parse([ir.StringAttr(a).value for a in
                              ir.ArrayAttr(op.operation.attributes[fusion.EXPR])]).attribute()


@dataclass(frozen=True)
class Pass(TilePass):
    NAME = "tile-fuse"
    SUMMARY = "fuse chains of elementwise ops through temporaries into one op"
    REQUIRES = ("tile-verify",)

    explain: bool = False

    def run(self, root: ir.Operation) -> bool:
        blocks = []
        for op in tile_ops(root, FUSIBLE):
            if op.operation.block not in blocks:
                blocks.append(op.operation.block)
        for block in blocks:
            ops = [op.opview if isinstance(op, ir.Operation) else op for op in block.operations]
            _Block(ops, self if self.explain else None).run()
        return True
