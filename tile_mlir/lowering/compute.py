"""Applying an op-registry row to one access of `vec` elements: load, convert, compute, store.

Shared by every elementwise and copy variant (a copy is the registry's `copy`
row). Inputs are loaded from their (buffer, indices), widened to the row's
compute type (narrow floats compute in f32 unless the row is exact in them),
scalars broadcast, the row's body applied, and the result narrowed and stored.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, memref, vector

from tile_mlir import op_table
from tile_mlir.dtypes import DTYPES, DType
from tile_mlir.lowering.analysis import Operand, OpInfo

Address = tuple[ir.Value, list[ir.Value]]
"""A (memref, indices) pair: where one access reads or writes."""


def value_type(dtype: DType, vec: int) -> ir.Type:
    elem = ir.Type.parse(dtype.mlir)
    return ir.VectorType.get([vec], elem) if vec > 1 else elem


def convert(value: ir.Value, src: DType, dst: DType, vec: int) -> ir.Value:
    if src.name == dst.name:
        return value
    target = value_type(dst, vec)
    return arith.extf(target, value) if dst.bits > src.bits else arith.truncf(target, value)


def load(address: Address, dtype: DType, vec: int) -> ir.Value:
    buffer, indices = address
    if vec > 1:
        return vector.load(value_type(dtype, vec), buffer, indices, alignment=vec * dtype.bytes)
    return memref.load(buffer, indices)


def store(value: ir.Value, address: Address, dtype: DType, vec: int) -> None:
    buffer, indices = address
    if vec > 1:
        vector.store(value, buffer, indices, alignment=vec * dtype.bytes)
    else:
        memref.store(value, buffer, indices)


def row_of(info: OpInfo) -> op_table.EwOp:
    """The registry row a tile op applies: its `op` for elementwise, `copy` for copies."""
    attrs = info.op.operation.attributes
    name = ir.StringAttr(attrs["op"]).value if "op" in attrs else "copy"
    row = op_table.lookup(name)
    assert row is not None, f"tile-verify lets only registry ops through, got {name}"
    return row


class Compute:
    """Builds dst[at] = row(inputs[at]) for one access."""

    def __init__(self, info: OpInfo, row: op_table.EwOp | None = None):
        self.info = info
        self.row = row or row_of(info)
        compute = DTYPES[self.row.compute_dtype(info.dst.dtype.name)]
        # A scalar wider than the tile (an f32 scale of an f16 tile) keeps its
        # precision: the op runs in the scalar's type, as torch computes it.
        for operand in info.sources:
            if not operand.is_memref and operand.dtype.bits > compute.bits:
                compute = operand.dtype
        self.compute = compute

    def apply(self, at: dict[int, Address], vec: int) -> None:
        args = [self._input(operand, at, vec) for operand in self.info.sources]
        result = self.row.body(args, value_type(self.compute, vec))
        dst = self.info.dst
        store(convert(result, self.compute, dst.dtype, vec), at[dst.index], dst.dtype, vec)

    def _input(self, operand: Operand, at: dict[int, Address], vec: int) -> ir.Value:
        if not operand.is_memref:
            scalar = convert(operand.value, operand.dtype, self.compute, 1)
            return vector.broadcast(value_type(self.compute, vec), scalar) if vec > 1 else scalar
        return convert(load(at[operand.index], operand.dtype, vec), operand.dtype,
                       self.compute, vec)
