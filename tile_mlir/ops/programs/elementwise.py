"""The elementwise kernel program: one `tile.elementwise` per CTA piece, a tile program.

A kernel applies one registry row to arrays of any shape that the caller has
coalesced (ops/coalesce.py) into a view of rank r: sizes d0..d(r-1), and per
operand a stride per dimension (0 where the operand is broadcast). The sizes
and the non-zero strides are kernel arguments, so one kernel serves every
shape of its kind; what the kernel is specialized on is in its `Signature`:
the row, the element types, which strides are 0 or 1, what the strides are
divisible by (`tile.divisibility`, which lets the lowering prove its vector
accesses aligned), the index width and the strategy.

The grid is cut into pieces, one per CTA, each a `tile.elementwise` at CTA
scope on memref views of its operands (lowering/elementwise/gmem.py does the
rest):
- flat (r = 1): piece b is elements [b*C, b*C + C) of the run, C = the chunk;
- rows (r >= 2, long rows): piece (1, C) of one row; rows index the grid with
  the outer dimensions, decomposed once per CTA;
- blocks (r >= 2, rows of at most a few chunks, the width W known): piece
  (R, W) of R = C / W whole rows, so narrow rows still fill a CTA.
A piece is full (static shape: static rounds, staged loads) except at the end
of the run, row or block column, where an `scf.if` takes the dynamic-shape
tile op instead; where the signature says every piece is full (`whole`: the
piece divides the run, the row or the block column), neither the branch nor the
dynamic tile op is built. With 32-bit indices (when every index stays under
2^31) the gpu.module says so in its data layout.

A signature may carry a fused expression (op_table/fusion.py, ops/fuse.py) in place of
one row: `op` is then "fused" and `expr` its steps, written as the op's `expr`
attribute; the rest is the same.

An indexed row's (op_table) last input is `INDEX`: not a kernel argument but the
position of the piece's first element in the whole output's row-major order
(flat: its start; rows: line * row length + start; blocks: first row * W), so
that the row sees every element's index in the output whatever the strategy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import tile_mlir.lang as tl
from tile_mlir.dtypes import DTYPES
from tile_mlir.lang.spec import ScalarSpec, Specialization, TensorSpec
from tile_mlir.ops.programs import lang

INDEX = "index"
"""An input slot that takes the piece's position (an indexed row's base), made in the
kernel."""
KERNEL = "kernel"


@dataclass(frozen=True)
class ArraySpec:
    """One array operand: its element type and, per dimension, its stride: "0" (a
    broadcast dimension), "1" (unit, innermost only) or "?n" (given at launch, a
    multiple of n); `offset` when the base pointer is not 16-byte aligned and an
    element offset comes at launch."""

    dtype: str
    strides: tuple[str, ...]
    offset: bool = False

    def static_strides(self) -> list[str]:
        """The strides as a memref type spells them ("?" where given at launch)."""
        return ["?" if s.startswith("?") else s for s in self.strides]


@dataclass(frozen=True)
class Strategy:
    """How a CTA walks its piece (seed 004's strategies, as gmem options)."""

    threads: int = 256
    vector_bytes: int = 16  # 1: one element per access ("direct")
    rounds: int = 4  # vectors per thread per piece
    stage: int = 4  # rounds loaded before the first compute (1: none, "vector")

    def chunk(self, widest_bytes: int) -> int:
        """Elements per piece: every thread `rounds` vectors of the widest operand."""
        return self.threads * self.rounds * max(1, self.vector_bytes // widest_bytes)


@dataclass(frozen=True)
class Signature:
    """Everything a kernel is specialized on (its IR text is a function of it)."""

    op: str
    out: ArraySpec
    inputs: tuple[ArraySpec | str, ...]  # an array, a scalar's dtype name, or INDEX
    rank: int
    mode: str  # "flat", "rows" or "blocks"
    strategy: Strategy
    width: int = 0  # blocks: the static innermost size W
    index_bits: int = 64
    inplace: bool = False  # out is also an input: no noalias promises
    expr: tuple[str, ...] = ()  # op = "fused": its steps, "row(%0, $1) : dtype" each
    whole: bool = False  # the piece divides the extent it runs along: no partial piece

    @property
    def arrays(self) -> list[ArraySpec]:
        return [self.out, *(i for i in self.inputs if isinstance(i, ArraySpec))]

    def chunk(self) -> int:
        widest = max(DTYPES[a.dtype].bytes for a in self.arrays if a.strides[-1] != "0")
        return self.strategy.chunk(widest)

    def piece(self) -> tuple[int, ...]:
        """The static shape of a full piece."""
        chunk = self.chunk()
        if self.mode == "blocks":
            return (max(1, chunk // self.width), self.width)
        return (chunk,)  # flat and rows: a run of one line


def describe(sig: Signature) -> str:
    """A one-line summary of a signature (the first line of its kernel's text)."""
    def array(spec: ArraySpec) -> str:
        offset = "+offset" if spec.offset else ""
        return f"{spec.dtype}[{','.join(spec.strides)}]{offset}"

    ins = ", ".join(i if isinstance(i, str) else array(i) for i in sig.inputs)
    s = sig.strategy
    width = f" W={sig.width}" if sig.mode == "blocks" else ""
    op = f"{sig.op} [{'; '.join(sig.expr)}]" if sig.expr else sig.op
    whole = ", whole pieces" if sig.whole else ""
    return (f"tile_mlir.ops {op}: {array(sig.out)} <- ({ins}); {sig.mode}{width}{whole}, "
            f"i{sig.index_bits}, {s.threads} threads x {s.rounds} rounds of "
            f"{s.vector_bytes} B, stage {s.stage}")


# ------------------------------------------------------------------ the tile program


@tl.kernel(name=KERNEL)
def elementwise(*, OP: tl.constexpr, EXPR: tl.constexpr, MODE: tl.constexpr,
                PIECE: tl.constexpr, OPTIONS: tl.constexpr, INPUTS: tl.constexpr,
                WHOLE: tl.constexpr = False, **operands: Any) -> None:
    """One registry row over a coalesced view, a piece per CTA. `operands`: the view's
    sizes d0.. (integers; in blocks mode the width W is compiled in and its size
    argument goes unused, so every mode takes the same arguments), `out`, and the inputs
    INPUTS names in order (tensors and scalars; INDEX stands for the position of the
    piece's first element, made here). OPTIONS: the tile op's (vector_bytes, stage). EXPR: a
    fused op's steps (OP "fused"), else empty. WHOLE: every piece is full (the extent a
    multiple of PIECE[0])."""
    out = operands["out"]
    bid = tl.block_id()
    if MODE == "flat":
        start = bid * PIECE[0]
        inputs = _inputs(operands, INPUTS, start)
        _branch(_Op(OP, EXPR, OPTIONS, PIECE, out, inputs, WHOLE), [], start, out.shape[0])
        return
    along = out.rank - 1 if MODE == "rows" else out.rank - 2
    extent = out.shape[along]
    per_line = tl.cdiv(extent, PIECE[0])
    line = bid // per_line
    start = (bid % per_line) * PIECE[0]
    first = None
    if INDEX in INPUTS:  # the piece's first element: line * extent + start (rows of W)
        first = line * extent + start
        first = first * PIECE[1] if MODE == "blocks" else first
    inputs = _inputs(operands, INPUTS, first)
    lead = _delinearize(line, list(out.shape[:along]))
    _branch(_Op(OP, EXPR, OPTIONS, PIECE, out, inputs, WHOLE), lead, start, extent)


class _Op(NamedTuple):
    """The tile op a piece runs, short of where."""

    op: str
    expr: tuple[str, ...]  # a fused op's steps
    options: tuple[int, int]  # vector_bytes, stage
    piece: tuple[int, ...]
    out: tl.Tensor
    inputs: list[Any]
    whole: bool  # every piece full: no branch, no dynamic tile op


def _inputs(operands: dict[str, Any], names: tuple[str, ...], first: tl.Index | None
            ) -> list[Any]:
    """The tile op's inputs: the operands INPUTS names, INDEX as the i64 position."""
    base = first.to("i64") if first is not None and INDEX in names else None
    return [base if name == INDEX else operands[name] for name in names]


def _delinearize(index: tl.Index, sizes: list[tl.Index]) -> list[tl.Index]:
    """Row-major indices of `index` over `sizes` (the first unbounded)."""
    indices = []
    for size in reversed(sizes[1:]):
        indices.append(index % size)
        index = index // size
    if sizes:
        indices.append(index)
    return list(reversed(indices))


def _branch(op: _Op, lead: list[tl.Index], start: tl.Index, extent: tl.Index) -> None:
    """If the piece is whole, the static-shape tile op (staged); else the dynamic one.
    Where every piece is whole (op.whole), the static one alone: at 2^16 elements on an
    H100 the kernel of neg f32, add f16 and exp bf16 ran 30-45 ns faster so (of ~1.1 us
    with the L2 warm, ~1.6 flushed; torch.profiler, 2026-12-07); the branch with its two
    sides swapped gained nothing."""
    if op.whole:
        _tile_op(op, lead, start, op.piece[0], op.options[1])
        return
    with tl.if_((start + op.piece[0]).ule(extent)) as whole:
        _tile_op(op, lead, start, op.piece[0], op.options[1])
    with whole.otherwise():
        _tile_op(op, lead, start, extent - start, 1)


def _tile_op(op: _Op, lead: list[tl.Index], start: tl.Index, length: Any, stage: int
             ) -> None:
    """Every array operand's piece (the outer indices picked, `length` from `start` along
    the piece's dim, the whole width in blocks mode) and the tile.elementwise on them."""
    def piece(t: tl.Tensor) -> tl.Tensor:
        return t[(*lead, tl.ds(start, length), *([slice(None)] * (len(op.piece) - 1)))]

    out = piece(op.out)
    inputs = [piece(x) if isinstance(x, tl.Tensor) else x for x in op.inputs]
    if op.expr:
        tl.cta.fused(out, *inputs, expr=op.expr, vector_bytes=op.options[0], stage=stage)
    else:
        tl.cta.elementwise(op.op, out, *inputs, vector_bytes=op.options[0], stage=stage)


def specialization(sig: Signature) -> Specialization:
    """The elementwise kernel's specialization for a signature: the sizes (index-width
    integers), out, the inputs (x1.., INDEX skipped), each array at its stride classes
    over the view (blocks: the width W static); in place, out shares memory with every
    input array."""
    dims: list[str | None] = [f"d{i}" for i in range(sig.rank)]
    shape: list[int | None] = [None] * sig.rank
    if sig.mode == "blocks":
        dims[-1], shape[-1] = None, sig.width

    def array(name: str, spec: ArraySpec) -> TensorSpec:
        return TensorSpec(name, spec.dtype, tuple(shape), tuple(dims), spec.strides,
                          spec.offset)

    params: list[TensorSpec | ScalarSpec] = [
        *(ScalarSpec(f"d{i}", f"i{sig.index_bits}") for i in range(sig.rank)),
        array("out", sig.out)]
    names = []
    for n, given in enumerate(sig.inputs, start=1):
        names.append(INDEX if given == INDEX else f"x{n}")
        if isinstance(given, ArraySpec):
            params.append(array(f"x{n}", given))
        elif given != INDEX:
            params.append(ScalarSpec(f"x{n}", given))
    shared = [("out", p.name) for p in params[sig.rank + 1:] if isinstance(p, TensorSpec)]
    strategy = sig.strategy
    constexprs = (("OP", sig.op), ("EXPR", sig.expr), ("MODE", sig.mode), ("PIECE", sig.piece()),
                  ("OPTIONS", (strategy.vector_bytes, strategy.stage)),
                  ("INPUTS", tuple(names)), ("WHOLE", sig.whole))
    return lang.specialization(elementwise, params, constexprs=constexprs,
                               threads=strategy.threads, index_bits=sig.index_bits,
                               overlaps=shared if sig.inplace else ())


class ElementwiseProgram(lang.LangProgram):
    """The elementwise kernel of a signature, behind programs.KernelProgram."""

    def __init__(self, sig: Signature):
        super().__init__(elementwise, specialization(sig), describe(sig))
        self.sig = sig
