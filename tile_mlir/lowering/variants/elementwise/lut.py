"""elementwise/lut: an op whose one array input is fp8, by a table of its 256 results.

Applies where gmem does, at CTA scope, to a registry row (not a fused op, not an
indexed row) whose inputs are one fp8 (f8e4m3, f8e5m2) memory tile and scalars, with
a destination of any type but bool. Such an input takes 256 values: the CTA's
threads first compute the row on each of them (the same conversions, body and
rounding as gmem's Compute, so the table holds exactly what gmem would store) into
a shared table of dst's type, and after one barrier every element is a lookup of
its byte (support/compute.py's access walk, the synthesized partition, with the
widening, the arithmetic and the narrowing replaced by one shared-memory load).
fp8 arithmetic through f32 is bound by its conversions and special-function
units (sqrt 1.3-1.5 TB/s at 2^28 on an H100); a lookup is not. Where the op may
run again (a loop encloses it), a barrier also comes before the table is
written, so that no thread still reads the previous run's.

As for every cta-scope op whose threads meet in shared memory, all threads of the
CTA reach the op (tile-verify's scopes).

Options: gmem's (vector_bytes, stage) for the walk.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, memref, scf, vector

from tile_mlir.dtypes import FP8
from tile_mlir.lowering import ACCEPT, Variant, Verdict, register, reject
from tile_mlir.lowering.schedules import synthesized
from tile_mlir.lowering.support import sync
from tile_mlir.lowering.support.access import Access
from tile_mlir.lowering.support.analysis import OpInfo
from tile_mlir.lowering.support.buffers import shared_scratch
from tile_mlir.lowering.support.compute import Address, Compute, is_fused, load, row_of, store
from tile_mlir.lowering.support.emit import const_index, scope_thread_index
from tile_mlir.lowering.variants.elementwise import gmem
from tile_mlir.lowering.variants.predicates import first_failure

ENTRIES = 256
"""Values of a one-byte input: the table's length."""


def _byte_input(info: OpInfo) -> Verdict:
    """One fp8 memory input, scalars beside it; a plain row; dst not bool."""
    if is_fused(info):
        return reject("a fused op (its steps' inputs are not one byte tile)")
    row = row_of(info)
    if row.indexed:
        return reject(f"'{row.name}' reads each element's position")
    arrays = [o for o in info.sources if o.is_memref]
    if len(arrays) != 1 or arrays[0].dtype.name not in FP8:
        return reject("the table takes one fp8 tile input (and scalars)")
    if info.dst.dtype.kind == "bool":
        return reject("dst is bool (packed bytes)")
    if row.name == "copy" or (row.name == "cast" and info.dst.dtype == arrays[0].dtype):
        return reject("a copy: nothing to compute")
    return ACCEPT


def check(info: OpInfo) -> Verdict:
    scope = ACCEPT if info.scope == "cta" else reject(f"scope {info.scope}: the table is "
                                                       "a CTA's")
    return first_failure(scope, gmem.check(info), _byte_input(info))


class _Lookup(Compute):
    """dst[at] = table[the input's byte at `at`], lane by lane."""

    def __init__(self, info: OpInfo, table: ir.Value):
        super().__init__(info)
        self.table = table
        self.source = next(o for o in info.sources if o.is_memref)

    def load(self, at: dict[int, Address], vec: int, splat: frozenset[int] = frozenset(),
             index: ir.Value | None = None) -> list[ir.Value]:
        """The input's bytes (one for an input broadcast along the access)."""
        source = self.source
        return [load(at[source.index], source.dtype, 1 if source.index in splat else vec)]

    def finish(self, args: list[ir.Value], at: dict[int, Address], vec: int) -> None:
        dst = self.info.dst
        value = self._lookup(args[0])
        if vec > 1 and not isinstance(value.type, ir.VectorType):  # a broadcast input
            value = vector.broadcast(ir.VectorType.get([vec], value.type), value)
        store(value, at[dst.index], dst.dtype, vec)

    def _entry(self, byte: ir.Value) -> ir.Value:
        return memref.load(self.table, [arith.index_castui(ir.IndexType.get(), byte)])

    def _lookup(self, raw: ir.Value) -> ir.Value:
        """Each lane's entry, its byte zero-extended as the index."""
        i8 = ir.IntegerType.get_signless(8)
        if not isinstance(raw.type, ir.VectorType):
            return self._entry(arith.bitcast(i8, raw))
        lanes = ir.VectorType(raw.type).shape[0]
        ints = arith.bitcast(ir.VectorType.get([lanes], i8), raw)
        entries = [self._entry(vector.extract(ints, [], [lane])) for lane in range(lanes)]
        element = ir.MemRefType(self.table.type).element_type
        return vector.from_elements(ir.VectorType.get([lanes], element), entries)


def _fill(info: OpInfo, table: ir.Value) -> None:
    """table[b] = the row on the fp8 value of byte b, for b = tid, tid + T, ... < 256."""
    compute = Compute(info)
    threads = info.scope_threads
    assert threads is not None
    tid = scope_thread_index(info.scope, info.block)
    i8 = ir.IntegerType.get_signless(8)

    def entry(byte: ir.Value) -> None:
        args = [compute.widen(n, operand, arith.bitcast(ir.Type.parse(operand.dtype.mlir),
                                                        arith.index_cast(i8, byte)), 1)
                if operand.is_memref else compute.scalar(n, operand, 1)
                for n, operand in enumerate(info.sources)]
        compute.finish(args, {info.dst.index: (table, [byte])}, 1)

    for first in range(0, ENTRIES, threads):
        byte = arith.addi(tid, const_index(first)) if first else tid
        if first + threads <= ENTRIES:
            entry(byte)
            continue
        branch = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ult, byte, const_index(ENTRIES)))
        with ir.InsertionPoint(branch.then_block):
            entry(byte)
            scf.YieldOp([])


def lower(info: OpInfo) -> None:
    table = shared_scratch(info.op, "__tile_lut", ir.Type.parse(info.dst.dtype.mlir), ENTRIES)
    if sync.in_loop(info.op.operation):
        sync.barrier("cta", info.block)
    _fill(info, table)
    sync.barrier("cta", info.block)
    accesses = [Access.of(o, info.buffers, info.over, True) for o in info.memrefs]
    synthesized.emit(info, accesses, _Lookup(info, table), gmem.option(info, "vector_bytes"),
                     gmem.option(info, "stage"))


register(Variant("tile.elementwise", "lut", 12, check, lower,
                 "one fp8 tile input: its 256 results in a shared table, then a lookup "
                 "per element"))
