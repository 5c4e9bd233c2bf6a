"""Applying an op-registry row to one access of `vec` elements: load, convert, compute, store.

Shared by every elementwise and copy variant (a copy is the registry's `copy`
row). Inputs are loaded from their (buffer, indices), converted to the row's
compute type (op_table: torch's promotion, narrow floats in f32), scalars and
broadcast ("splat") inputs repeated across the vector, the row's body applied,
and the result converted to dst's type and stored.

Mixed types are rounded as torch's TensorIterator rounds them: every tensor
operand is cast to the common dtype before the op computes in its opmath
type. So a memref input whose type differs from the type the memref inputs
and dst promote to goes through that type when it is narrower than the
compute type (`add` of a bf16 and an i64 tile rounds the i64 values to bf16,
then computes in f32; an integer through f32 first, as c10's conversions to
f16 and bf16 go). Scalars (torch's Python numbers, which its kernels take as
they are) are not rounded so, nor do they take part in choosing that type. `load` and `finish` are
separate so that a planner can issue several accesses' loads before the first
use (register staging).

Two element types need care in memory:
- bool is one byte per element (as torch.bool), while LLVM packs vectors of
  i1 into bits (and cannot store a lone i1 to memory at all): `vec` bools are
  accessed as `8 * vec` i1 lanes, exactly `vec` bytes, bitcast to `vec` bytes
  and compared with zero (one bool is a vector of one byte);
- the fp8 formats widen with the packed `cvt.rn.f16x2.e4m3x2` (`.e5m2x2`);
  f32 narrows with `cvt.rn.satfinite.e4m3x2.f32` (`.e5m2x2`), which saturates:
  right for e4m3fn (no Inf: overflow gives +-448, NaN stays NaN), while e5m2
  keeps Inf (as torch's `.to(float8_e5m2)`): its saturated results move up
  one step, to Inf.

Indexed rows (op_table: the generators) take, in place of their last input
(the index base, an i64 scalar), each element's position: base + the element's
linear index in dst's row-major order. The variant says where an access
starts, as `index` (dst's row-major index of the access's first element); lane
l of a vector access is at index + l.

A fused op (`op = "fused"`, op_table/fusion.py) gets a `FusedCompute` from
`Compute(info)`, with the same interface: the variants lower it unchanged. Each
step rounds its arguments as its unfused op would (an earlier step's result is
a tile of the step's dtype there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce

from mlir import ir
from mlir.dialects import arith, math, memref, nvvm, vector

from tile_mlir import op_table
from tile_mlir.contract import ACCESS_BYTES
from tile_mlir.dtypes import DTYPES, FP8, DType, promote_types
from tile_mlir.lowering.support.analysis import Operand, OpInfo
from tile_mlir.lowering.support.emit import const
from tile_mlir.op_table import fusion

Address = tuple[ir.Value, list[ir.Value]]
"""A (memref, indices) pair: where one access reads or writes."""


def value_type(dtype: DType, vec: int) -> ir.Type:
    elem = ir.Type.parse(dtype.mlir)
    return ir.VectorType.get([vec], elem) if vec > 1 else elem


def broadcast(value: ir.Value, dtype: DType, vec: int) -> ir.Value:
    return vector.broadcast(value_type(dtype, vec), value) if vec > 1 else value


# ------------------------------------------------------------- conversions

_F16, _F32, _I8 = DTYPES["f16"], DTYPES["f32"], DTYPES["i8"]


def convert(value: ir.Value, src: DType, dst: DType, vec: int) -> ir.Value:
    """`value` (scalar or vector of `vec`) from type src to type dst, as torch converts:
    an integer becomes a 16-bit float through f32, rounded twice (c10's Half and
    BFloat16 are made from a float), where sm_90's cvt.rn.bf16.s32 would round once
    (i32 2^30 + 2^22 + 1 is bf16 2^30 through f32, 2^30 + 2^23 directly)."""
    if src.name == dst.name:
        return value
    if src.name in FP8:
        return convert(_from_fp8(value, src, vec), _F16, dst, vec)
    if dst.name in FP8:
        return _to_fp8(convert(value, src, _F32, vec), dst, vec)
    target = value_type(dst, vec)
    if dst.is_float and not src.is_float:
        return _int_to_float(value, src, dst, vec)
    if dst.kind == "bool":  # C's conversion to bool: nonzero (and NaN) is true
        zero = const(value.type, 0)
        if src.is_float:
            return arith.cmpf(arith.CmpFPredicate.UNE, value, zero)
        return arith.cmpi(arith.CmpIPredicate.ne, value, zero)
    if src.is_float and dst.is_float:
        return arith.extf(target, value) if dst.bits > src.bits else arith.truncf(target, value)
    if src.is_float:
        return arith.fptosi(target, value)
    if src.kind == "bool" or dst.bits > src.bits:
        return arith.extui(target, value) if src.kind == "bool" else arith.extsi(target, value)
    return arith.trunci(target, value)


def _int_to_float(value: ir.Value, src: DType, dst: DType, vec: int) -> ir.Value:
    """An integer or bool to a float type: to a 16-bit one through f32 (see convert)."""
    target = value_type(dst, vec)
    if dst.bits < 32:
        # the rounding mode spelled out keeps canonicalize from folding the pair into
        # one sitofp (arith's TruncFSIToFPToSIToFP skips a truncf that names its mode)
        return arith.truncf(target, _int_to_float(value, src, _F32, vec),
                            roundingmode=arith.RoundingMode.to_nearest_even)
    return arith.uitofp(target, value) if src.kind == "bool" else arith.sitofp(target, value)


def _pairs(bytes_: ir.Value, vec: int) -> list[ir.Value]:
    """The vector<2xi8> pairs of `vec` bytes (one byte is padded with a zero)."""
    if vec == 1:
        return [vector.from_elements(ir.VectorType.get([2], bytes_.type),
                                     [bytes_, const(bytes_.type, 0)])]
    pair = ir.VectorType.get([2], ir.IntegerType.get_signless(8))
    return [vector.extract_strided_slice(pair, bytes_, [2 * i], [2], [1])
            for i in range(vec // 2)]


def concat(parts: list[ir.Value]) -> ir.Value:
    """Vectors of one type joined end to end (a tree of shuffles)."""
    while len(parts) > 1:
        joined = []
        for left, right in zip(parts[::2], parts[1::2], strict=True):
            width = ir.VectorType(left.type).shape[0]
            joined.append(vector.shuffle(left, right, list(range(2 * width))))
        parts = joined
    return parts[0]


def _from_fp8(value: ir.Value, src: DType, vec: int) -> ir.Value:
    """fp8 -> f16, exactly: cvt.rn.f16x2.e4m3x2 / .e5m2x2, a pair of bytes at a time."""
    bytes_ = arith.bitcast(value_type(_I8, vec), value)
    fp8 = ir.TypeAttr.get(ir.Type.parse(src.mlir))
    halves = ir.VectorType.get([2], ir.F16Type.get())
    parts = [nvvm.convert_f8x2_to_f16x2(halves, pair, fp8) for pair in _pairs(bytes_, vec)]
    return vector.extract(parts[0], [], [0]) if vec == 1 else concat(parts)


def _to_fp8(value: ir.Value, dst: DType, vec: int) -> ir.Value:
    """f32 -> fp8, rounded to nearest even by cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32, a
    pair at a time. That saturates: right for e4m3fn (no Inf: +-448); for e5m2, which
    keeps Inf, what must become Inf (Inf, and |x| >= 61440, halfway past the largest
    finite 57344) comes out as the largest finite byte, one below Inf's: it gets +1."""
    wide, lanes = _pair_lanes(value, vec)
    pair_type = ir.VectorType.get([2], ir.IntegerType.get_signless(8))
    fp8 = ir.TypeAttr.get(ir.Type.parse(dst.mlir))
    rnd = ir.Attribute.parse("#nvvm.fp_rnd_mode<rn>")
    sat = ir.Attribute.parse("#nvvm.sat_mode<satfinite>")
    # cvt d, a, b puts a in d's upper byte: the pair (x0, x1) goes as (a, b) = (x1, x0)
    bytes_ = concat([nvvm.convert_f32x2_to_f8x2(pair_type, high, low, fp8, rnd=rnd, sat=sat)
                     for low, high in zip(lanes[::2], lanes[1::2], strict=True)])
    if dst.name == "f8e5m2":
        big = arith.cmpf(arith.CmpFPredicate.OGE, math.absf(wide), const(wide.type, 61440.0))
        bytes_ = _to_infinity(bytes_, big)
    if vec == 1:
        bytes_ = vector.extract(bytes_, [], [0])
    return arith.bitcast(value_type(dst, vec), bytes_)


def _to_infinity(bytes_: ir.Value, big: ir.Value) -> ir.Value:
    """e5m2 bytes (a vector) with +1 where `big`: the largest finite byte, 0x7b or
    0xfb, becomes Inf's, 0x7c or 0xfc. Added a word (four bytes, or two) at a time: a
    bumped byte never carries into its neighbour, and a byte-wise add took a shift out,
    an add and a repacking per byte (some 40 of the ~95 SASS instructions an access of
    8 had for add f8e5m2)."""
    vec = ir.VectorType(bytes_.type).shape[0]
    width = next(w for w in (4, 2, 1) if vec % w == 0)
    word = ir.IntegerType.get_signless(8 * width)
    words = vector.bitcast(ir.VectorType.get([vec // width], word), bytes_)
    steps = []
    for first in range(0, vec, width):
        step = None
        for j in range(width):
            one = arith.select(vector.extract(big, [], [first + j]), const(word, 1 << 8 * j),
                               const(word, 0))
            step = one if step is None else arith.ori(step, one)
        steps.append(step)
    bumped = arith.addi(words, vector.from_elements(words.type, steps))
    return vector.bitcast(bytes_.type, bumped)


def _pair_lanes(value: ir.Value, vec: int) -> tuple[ir.Value, list[ir.Value]]:
    """A scalar or vector as an even-length vector and its lanes (one lane: zero-padded)."""
    if vec == 1:
        lanes = [value, const(value.type, 0.0)]
        return vector.from_elements(ir.VectorType.get([2], value.type), lanes), lanes
    return value, [vector.extract(value, [], [i]) for i in range(vec)]


# ---------------------------------------------------------------- memory


def _packed_bools(vec: int) -> ir.Type:
    return ir.VectorType.get([8 * vec], ir.IntegerType.get_signless(1))


def _bytes(vec: int) -> ir.VectorType:
    return ir.VectorType.get([vec], ir.IntegerType.get_signless(8))


_DYNAMIC = ir.ShapedType.get_dynamic_stride_or_offset()


def _byte_address(address: Address) -> Address:
    """A bool's address in a form a vector access takes: a memref whose innermost stride
    is not 1 (a broadcast or strided view) is re-viewed as one unit-stride element."""
    buffer, indices = address
    strides, _ = ir.MemRefType(buffer.type).get_strides_and_offset()
    if not strides or strides[-1] == 1:
        return address
    meta = memref.ExtractStridedMetadataOp(buffer)
    rank = len(indices)
    base, offset = meta.results[0], meta.results[1]
    linear = offset
    for index, stride in zip(indices, list(meta.results)[2 + rank:], strict=True):
        linear = arith.addi(linear, arith.muli(index, stride))
    memref_type = ir.MemRefType(buffer.type)
    one = ir.MemRefType.get([1], memref_type.element_type,
                            ir.StridedLayoutAttr.get(_DYNAMIC, [1]), memref_type.memory_space)
    view = memref.reinterpret_cast(one, base, [linear], [], [], [_DYNAMIC], [1], [1])
    return view, [const(ir.IndexType.get(), 0)]


def _aligned(vec: int, dtype: DType) -> int:
    """The alignment a vector access of `vec` elements may claim: its size, up to the
    access width (a wider vector, such as the f32 accumulators of 16-byte bf16 loads, is
    accessed in 16-byte pieces, each of which is aligned)."""
    return min(vec * dtype.bytes, ACCESS_BYTES)


def load(address: Address, dtype: DType, vec: int) -> ir.Value:
    buffer, indices = address
    if dtype.kind == "bool":
        buffer, indices = _byte_address(address)
        packed = vector.load(_packed_bools(vec), buffer, indices, alignment=vec)
        bytes_ = vector.bitcast(_bytes(vec), packed)
        if vec == 1:
            bytes_ = vector.extract(bytes_, [], [0])
        return arith.cmpi(arith.CmpIPredicate.ne, bytes_, const(bytes_.type, 0))
    if vec == 1:
        return memref.load(buffer, indices)
    return vector.load(value_type(dtype, vec), buffer, indices, alignment=_aligned(vec, dtype))


def store(value: ir.Value, address: Address, dtype: DType, vec: int) -> None:
    buffer, indices = address
    if dtype.kind == "bool":
        buffer, indices = _byte_address(address)
        if vec == 1:
            value = vector.broadcast(ir.VectorType.get([1], value.type), value)
        bytes_ = arith.extui(_bytes(vec), value)
        vector.store(vector.bitcast(_packed_bools(vec), bytes_), buffer, indices, alignment=vec)
    elif vec == 1:
        memref.store(value, buffer, indices)
    else:
        vector.store(value, buffer, indices, alignment=_aligned(vec, dtype))


def row_of(info: OpInfo) -> op_table.EwOp:
    """The registry row a tile op applies: its `op` for elementwise, `copy` for copies."""
    attrs = info.op.operation.attributes
    name = ir.StringAttr(attrs["op"]).value if "op" in attrs else "copy"
    row = op_table.lookup(name)
    assert row is not None, f"tile-verify lets only registry ops through, got {name}"
    return row


def row_major(indices: list[ir.Value], sizes: list[ir.Value]) -> ir.Value:
    """The row-major linear index of `indices` over dims of `sizes` (the first size is
    not needed): ((i0 * s1 + i1) * s2 + i2)...; 0 for a 0-d tile."""
    if not indices:
        return const(ir.IndexType.get(), 0)
    linear = indices[0]
    for index, size in zip(indices[1:], sizes[1:], strict=True):
        linear = arith.addi(arith.muli(linear, size), index)
    return linear


def tensor_common(row: op_table.EwOp, types: Sequence[str], tensors: Sequence[bool],
                  dst: str) -> str | None:
    """The type torch casts a row's tensor operands to before computing (its common
    dtype): what the tensors (memref inputs, not kept ones) promote to with dst (not for
    a predicate's bool dst), as op_table promotes; None without a tensor operand."""
    data = [t for n, (t, tensor) in enumerate(zip(types, tensors, strict=True))
            if tensor and n not in row.keep]
    if not data:
        return None
    if row.out in ("same", "float"):
        data.append(dst)
    common = reduce(promote_types, data)
    return "f32" if row.out == "float" and not DTYPES[common].is_float else common


def rounding(row: op_table.EwOp, types: Sequence[str], tensors: Sequence[bool], dst: str,
             compute: str) -> list[DType | None]:
    """Per input, the type it is rounded to on its way to the compute type (None: none):
    the tensor common type, for the tensor operands of another type, where that type is
    narrower than the compute type (module docstring)."""
    common = tensor_common(row, types, tensors, dst)
    if common is None or common == compute:
        return [None] * len(types)
    return [DTYPES[common] if tensor and n not in row.keep and t != common else None
            for n, (t, tensor) in enumerate(zip(types, tensors, strict=True))]


def to_compute(value: ir.Value, src: DType, compute: DType, vec: int,
               through: DType | None) -> ir.Value:
    """`value` in the compute type, rounded to `through` on the way (src to the compute
    type first: an integer reaches f16 or bf16 through f32, as in c10)."""
    value = convert(value, src, compute, vec)
    if through is None:
        return value
    return convert(convert(value, compute, through, vec), through, compute, vec)


class Compute:
    """Builds dst[at] = row(inputs[at]) for one access."""

    def __new__(cls, info: OpInfo, row: op_table.EwOp | None = None) -> Compute:
        # the variants build every elementwise op's accesses through Compute(info): a
        # fused op's steps take the place of one row there
        if cls is Compute and row is None and is_fused(info):
            return super().__new__(FusedCompute)
        return super().__new__(cls)

    def __init__(self, info: OpInfo, row: op_table.EwOp | None = None):
        self.info = info
        self.row = row or row_of(info)
        inputs = [operand.dtype.name for operand in info.sources]
        self.compute = DTYPES[self.row.compute_dtype(inputs, info.dst.dtype.name)]
        self.result = DTYPES["bool"] if self.row.out == "bool" else self.compute
        self.through = rounding(self.row, inputs, [o.is_memref for o in info.sources],
                                info.dst.dtype.name, self.compute.name)
        self.body = self.row.body_for(inputs, info.dst.dtype.name)

    @property
    def indexed(self) -> bool:
        """Whether the row needs each access's position (`index` of load and apply)."""
        return self.row.indexed

    def load(self, at: dict[int, Address], vec: int, splat: frozenset[int] = frozenset(),
             index: ir.Value | None = None) -> list[ir.Value]:
        """Every input at `at`, in the compute type (kept inputs in their own); for an
        indexed row, the last is the position of each lane (`index`: the access's first)."""
        if self.row.indexed:
            assert index is not None, "an indexed row needs the access's index from its variant"
            *inputs, _ = self.info.sources
            return [*(self._input(n, operand, at, vec, splat) for n, operand in enumerate(inputs)),
                    self._position(index, vec)]
        return [self._input(n, operand, at, vec, splat)
                for n, operand in enumerate(self.info.sources)]

    def finish(self, args: list[ir.Value], at: dict[int, Address], vec: int) -> None:
        """The body on loaded inputs, converted to dst's type and stored at `at`."""
        dst = self.info.dst
        ty = value_type(self.compute, vec)
        storage = self.row.storage_type(dst.dtype.name)
        body = self.body
        result = body(args, ty, storage=storage) if self.row.storage else body(args, ty)
        store(convert(result, self.result, dst.dtype, vec), at[dst.index], dst.dtype, vec)

    def apply(self, at: dict[int, Address], vec: int, splat: frozenset[int] = frozenset(),
              index: ir.Value | None = None) -> None:
        self.finish(self.load(at, vec, splat, index), at, vec)

    def _position(self, index: ir.Value, vec: int) -> ir.Value:
        """The last input is the base, an i64 scalar (tile-verify)."""
        return position(self.info.sources[-1].value, index, vec)

    def _input(self, n: int, operand: Operand, at: dict[int, Address], vec: int,
               splat: frozenset[int]) -> ir.Value:
        if not operand.is_memref:
            return self.scalar(n, operand, vec)
        if operand.index in splat:  # one element, the same for every lane
            value = self.widen(n, operand, load(at[operand.index], operand.dtype, 1), 1)
            return broadcast(value, self.input_type(n, operand), vec)
        return self.widen(n, operand, load(at[operand.index], operand.dtype, vec), vec)

    def scalar(self, n: int, operand: Operand, vec: int) -> ir.Value:
        """Scalar input n as the body takes it, on every lane."""
        target = self.input_type(n, operand)
        return broadcast(convert(operand.value, operand.dtype, target, 1), target, vec)

    def input_type(self, n: int, operand: Operand) -> DType:
        """The type input n reaches the body in: the compute type, or its own if kept."""
        return operand.dtype if n in self.row.keep else self.compute

    def widen(self, n: int, operand: Operand, value: ir.Value, vec: int) -> ir.Value:
        """Memory input n's loaded `value` as the body takes it."""
        return to_compute(value, operand.dtype, self.input_type(n, operand), vec,
                          self.through[n])


def position(base: ir.Value, index: ir.Value, vec: int) -> ir.Value:
    """An indexed row's position: base + index (+ lane for a vector access), i64."""
    i64 = ir.IntegerType.get_signless(64)
    first = arith.addi(base, arith.index_cast(i64, index))
    if vec == 1:
        return first
    lanes_type = ir.VectorType.get([vec], i64)
    lanes = arith.constant(lanes_type, ir.DenseElementsAttr.get(
        [ir.IntegerAttr.get(i64, lane) for lane in range(vec)], type=lanes_type))
    return arith.addi(vector.broadcast(lanes_type, first), lanes)


# ------------------------------------------------------------- fused ops


def is_fused(info: OpInfo) -> bool:
    """Whether the op is a fused tile.elementwise (op = "fused")."""
    attr = info.attr("op")
    return attr is not None and ir.StringAttr(attr).value == fusion.FUSED


@dataclass(frozen=True)
class StepPlan:
    """One step of a fused expression with the types its unfused op would use."""

    step: fusion.Step
    row: op_table.EwOp
    types: tuple[DType, ...]  # the arguments' own types
    compute: DType  # what the body runs on
    result: DType  # what the body returns (bool for the predicates)
    dtype: DType  # what the result is rounded to
    through: tuple[DType | None, ...]  # per argument, as Compute.through

    @classmethod
    def of(cls, expr: fusion.Expr, k: int, inputs: list[str], memrefs: list[bool]
           ) -> StepPlan:
        """Step k of `expr` on inputs of these types (memrefs: which inputs are tiles;
        an earlier step's result is one, as the unfused op's temporary was)."""
        step = expr.steps[k]
        row = op_table.lookup(step.row)
        assert row is not None, "tile-verify lets only registry rows through"
        types = expr.arg_dtypes(k, inputs)
        compute = DTYPES[row.compute_dtype(types, step.dtype)]
        tensors = [a.step or memrefs[a.index] for a in step.args]
        through = rounding(row, types, tensors, step.dtype, compute.name)
        return cls(step, row, tuple(DTYPES[t] for t in types), compute,
                   DTYPES["bool"] if row.out == "bool" else compute, DTYPES[step.dtype],
                   tuple(through))


class FusedCompute(Compute):
    """Builds dst[at] = a fused expression of the inputs at `at`: every input loaded
    once, in its own type (a scalar or splat input as one element); each step run as its
    unfused op runs (arguments converted to its compute type, kept ones to their own
    type), its result rounded to the step's dtype; the last converted to dst's type and
    stored."""

    def __init__(self, info: OpInfo, row: op_table.EwOp | None = None):
        self.info = info
        attr = info.attr(fusion.EXPR)
        assert isinstance(attr, ir.ArrayAttr), "tile-verify checks the expression"
        expr = fusion.Expr.parse([ir.StringAttr(text).value for text in attr])
        inputs = [operand.dtype.name for operand in info.sources]
        memrefs = [operand.is_memref for operand in info.sources]
        self.steps = [StepPlan.of(expr, k, inputs, memrefs) for k in range(len(expr.steps))]
        # what a Compute says about its row, here the last step's (the one dst gets)
        last = self.steps[-1]
        self.row, self.compute, self.result = last.row, last.compute, last.result

    @property
    def indexed(self) -> bool:
        return any(plan.row.indexed for plan in self.steps)

    def load(self, at: dict[int, Address], vec: int, splat: frozenset[int] = frozenset(),
             index: ir.Value | None = None) -> list[ir.Value]:
        """Every input at `at` as it is in memory (scalars as they are), and, last, the
        access's index when a step is indexed."""
        loaded = [operand.value if not operand.is_memref else
                  load(at[operand.index], operand.dtype, 1 if operand.index in splat else vec)
                  for operand in self.info.sources]
        if self.indexed:
            assert index is not None, "an indexed row needs the access's index from its variant"
            loaded.append(index)
        return loaded

    def finish(self, args: list[ir.Value], at: dict[int, Address], vec: int) -> None:
        """The steps in order on the loaded inputs; the last one stored at `at`."""
        uses = _Uses(args, vec)
        for plan in self.steps:
            operands = [uses.argument(plan, n) for n in range(len(plan.step.args))]
            ty = value_type(plan.compute, vec)
            storage = plan.row.storage_type(plan.dtype.name)
            body = plan.row.body_for([t.name for t in plan.types], plan.dtype.name)
            value = body(operands, ty, storage=storage) if plan.row.storage else \
                body(operands, ty)
            uses.results.append(convert(value, plan.result, plan.dtype, vec))
        dst, last = self.info.dst, self.steps[-1]
        store(convert(uses.results[-1], last.dtype, dst.dtype, vec), at[dst.index], dst.dtype,
              vec)


class _Uses:
    """The values a fused op's steps read: loaded inputs and earlier results, converted
    once per target type."""

    def __init__(self, loaded: list[ir.Value], vec: int):
        self.loaded, self.vec = loaded, vec
        self.results: list[ir.Value] = []
        self._converted: dict[tuple[fusion.Arg, str, str], ir.Value] = {}

    def argument(self, plan: StepPlan, n: int) -> ir.Value:
        """Argument n of a step, as its body takes it."""
        arg, own = plan.step.args[n], plan.types[n]
        if plan.row.indexed and n == len(plan.step.args) - 1:  # the base: an i64 input
            return position(self.loaded[arg.index], self.loaded[-1], self.vec)
        target = own if n in plan.row.keep else plan.compute
        through = plan.through[n]
        key = (arg, target.name, through.name if through is not None else "")
        if key not in self._converted:
            value = self.results[arg.index] if arg.step else self.loaded[arg.index]
            lanes = ir.VectorType(value.type).shape[0] \
                if isinstance(value.type, ir.VectorType) else 1
            converted = to_compute(value, own, target, lanes, through)
            self._converted[key] = broadcast(converted, target, self.vec) \
                if lanes != self.vec else converted
        return self._converted[key]
