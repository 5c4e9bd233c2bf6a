"""What the verifier, the dispatcher and the variants need to know about a tile op.

`describe(op)` decodes a tile op once into an `OpInfo`: its scope and the
thread count of that scope, the enclosing kernel's block size (and cluster size:
`nvvm.cluster_dim`), and for each operand its memory space, shape, element type,
strides and layout. Predicates
and lowerings read this instead of re-deriving it from the IR.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from mlir import ir

from tile_mlir.contract import SCOPE_THREADS
from tile_mlir.dialects import tile
from tile_mlir.dtypes import DType, by_mlir
from tile_mlir.layout import TileLayout

if TYPE_CHECKING:
    from tile_mlir.lowering.support.buffers import Buffers

MEMORY_SPACES = {None: "global", "global": "global", "workgroup": "shared", "private": "local",
                 1: "global", 3: "shared", 5: "local"}
"""memref memory space -> the tile memory scope (global, shared, local)."""

DYNAMIC = ir.ShapedType.get_dynamic_size()


@dataclass
class Operand:
    """One operand of a tile op: a memref (a tile) or a scalar."""

    value: ir.Value
    index: int
    dtype: DType
    memref: ir.MemRefType | None = None
    space: str = "scalar"  # global, shared, local or scalar
    layout: TileLayout | None = None  # from tile.alloc; None for plain memrefs

    @property
    def is_memref(self) -> bool:
        return self.memref is not None

    @cached_property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.memref.shape) if self.memref else ()

    @cached_property
    def strides_and_offset(self) -> tuple[tuple[int, ...], int]:
        """Static strides and offset; dynamic ones are DYNAMIC_STRIDE."""
        if not self.memref:
            return (), 0
        strides, offset = self.memref.get_strides_and_offset()
        return tuple(strides), offset

    @property
    def strides(self) -> tuple[int, ...]:
        return self.strides_and_offset[0]



DYNAMIC_STRIDE = ir.ShapedType.get_dynamic_stride_or_offset()


@dataclass
class OpInfo:
    """A tile op, decoded."""

    op: ir.OpView
    name: str  # tile.copy, tile.elementwise, tile.reduce
    scope: str
    kernel: ir.OpView | None  # the enclosing gpu.func
    block: tuple[int, int, int] | None  # known_block_size of the kernel
    operands: list[Operand] = field(default_factory=list)
    cluster: tuple[int, int, int] | None = None  # nvvm.cluster_dim of the kernel
    buffers: Buffers | None = None  # tile.alloc storage, set by tile-lower

    @property
    def dst(self) -> Operand:
        return self.operands[0]

    @property
    def sources(self) -> list[Operand]:
        return self.operands[1:]

    @property
    def memrefs(self) -> list[Operand]:
        return [o for o in self.operands if o.is_memref]

    @property
    def block_threads(self) -> int | None:
        return math.prod(self.block) if self.block else None

    @property
    def cluster_ctas(self) -> int | None:
        """CTAs of the kernel's cluster (nvvm.cluster_dim); None without one."""
        return math.prod(self.cluster) if self.cluster else None

    @property
    def scope_threads(self) -> int | None:
        """Threads that execute the op together; None when the kernel does not say (a
        cluster: its CTAs' threads, so the kernel's block and cluster sizes)."""
        if self.scope in SCOPE_THREADS:
            return SCOPE_THREADS[self.scope]
        if self.scope == "cluster":
            ctas, threads = self.cluster_ctas, self.block_threads
            return ctas * threads if ctas and threads else None
        return self.block_threads

    @property
    def location(self) -> ir.Location:
        return self.op.operation.location

    def attr(self, name: str) -> ir.Attribute | None:
        return self.op.operation.attributes.get(name)

    @property
    def padding(self) -> float | int | None:
        """A tile.copy's `padding` (what dst gets past src's extent), None without one."""
        attr = self.attr("padding") if self.name == "tile.copy" else None
        if isinstance(attr, ir.FloatAttr):
            return ir.FloatAttr(attr).value
        if isinstance(attr, ir.IntegerAttr):
            return ir.IntegerAttr(attr).value
        return None

    @property
    def over(self) -> tuple[int, ...]:
        """The shape the op's schedule walks (iteration_shape)."""
        return iteration_shape(self)


def copy_extent(dst: int, src: int, padded: bool) -> int:
    """How far a tile.copy walks one dim: where the extents agree (equal, or both
    dynamic: then taken equal, dst's), that; with padding, dst's (static: tile-verify);
    else the overlap: the static one beside a dynamic one, the smaller of two."""
    if dst == src or padded:
        return dst
    if DYNAMIC in (dst, src):
        return src if dst == DYNAMIC else dst
    return min(dst, src)


def iteration_shape(info: OpInfo) -> tuple[int, ...]:
    """The shape an op's schedule walks.

    - tile.copy: per dim, copy_extent of dst's and src's;
    - tile.elementwise with register operands: the register tile's (each register
      operand's extents, 1s aside for broadcasts; a uniform register operand does not
      count); memory operands may end before it (tails) or broadcast;
    - otherwise dst's (a tile.reduce: its source's)."""
    if info.name == "tile.copy":
        padded = info.padding is not None
        return tuple(copy_extent(d, s, padded)
                     for d, s in zip(info.dst.shape, info.sources[0].shape, strict=True))
    if info.name == "tile.reduce":
        return info.sources[0].shape
    registers = [o.shape for o in info.memrefs if o.space == "local" and not uniform(o)]
    if not registers:
        return info.dst.shape
    return tuple(max(sizes) for sizes in zip(*registers, strict=True))


def uniform(operand: Operand) -> bool:
    """A register tile every thread holds whole: size 1 in every dim and no dim spread
    over threads (its replicas give it to them all), as a reduction's replicated result.
    It is a broadcast scalar: it says nothing of the tile's shape, and the memory
    variants read it from each thread's own registers."""
    layout = operand.layout
    return (operand.space == "local" and layout is not None and operand.index != 0
            and all(d == 1 for d in operand.shape) and not any(it.axis for it in layout.shard))


def enclosing(op: ir.Operation | ir.OpView, name: str) -> ir.OpView | None:
    """The nearest ancestor of `op` named `name` (e.g. gpu.func)."""
    current = op.operation.parent
    while current is not None:
        if current.name == name:
            return current.opview
        current = current.parent
    return None


def known_block_size(kernel: ir.OpView | None) -> tuple[int, int, int] | None:
    if kernel is None or "known_block_size" not in kernel.operation.attributes:
        return None
    x, y, z, *_ = [*ir.DenseI32ArrayAttr(kernel.operation.attributes["known_block_size"]), 1, 1]
    return x, y, z


_INDEX_ENTRY = re.compile(r"\bindex\s*[=,]\s*(-?\d+)")


def index_bits(op: ir.Operation) -> int | None:
    """The index width a dlti.dl_spec on `op` (a gpu.module, a module) gives; None where
    it gives none (MLIR's default then: 64 bits)."""
    spec = op.attributes.get("dlti.dl_spec")
    m = _INDEX_ENTRY.search(str(spec)) if spec is not None else None
    return int(m.group(1)) if m is not None else None


CLUSTER_DIM = "nvvm.cluster_dim"
"""The gpu.func attribute (array<i32: x, y, z>) that makes a kernel run in thread block
clusters of that many CTAs (PTX .reqnctapercluster; sm_90)."""


def cluster_dim(kernel: ir.OpView | None) -> tuple[int, int, int] | None:
    if kernel is None or CLUSTER_DIM not in kernel.operation.attributes:
        return None
    attr = kernel.operation.attributes[CLUSTER_DIM]
    if not isinstance(attr, ir.DenseI32ArrayAttr):
        return None
    x, y, z, *_ = [*ir.DenseI32ArrayAttr(attr), 1, 1]
    return x, y, z


def memory_space(memref: ir.MemRefType) -> str:
    """global, shared or local for a memref type; 'unknown:<attr>' otherwise."""
    space = memref.memory_space
    if space is None:
        return "global"
    key: str | int | None
    if isinstance(space, ir.IntegerAttr):
        key = ir.IntegerAttr(space).value
    else:
        text = str(space)
        key = text.removeprefix("#gpu.address_space<").removesuffix(">") \
            if text.startswith("#gpu.address_space<") else text
    return MEMORY_SPACES.get(key, f"unknown:{space}")


def defining_layout(value: ir.Value) -> TileLayout | None:
    """The layout of a buffer made by tile.alloc, None for any other memref."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    op = owner.opview if isinstance(owner, ir.Operation) else owner
    if isinstance(op, tile.AllocOp):
        return op.layout
    return None


def describe_operand(value: ir.Value, index: int) -> Operand:
    type_ = value.type
    if isinstance(type_, ir.MemRefType):
        memref = ir.MemRefType(type_)
        return Operand(
            value, index, by_mlir(str(memref.element_type)), memref,
            memory_space(memref), defining_layout(value),
        )
    return Operand(value, index, by_mlir(str(type_)))


def describe(op: ir.OpView) -> OpInfo:
    """Decode a tile op (not tile.alloc). Raises ValueError on unsupported element types."""
    kernel = enclosing(op, "gpu.func")
    return OpInfo(
        op=op,
        name=op.operation.name,
        scope=ir.StringAttr(op.operation.attributes["scope"]).value,
        kernel=kernel,
        block=known_block_size(kernel),
        operands=[describe_operand(v, i) for i, v in enumerate(op.operation.operands)],
        cluster=cluster_dim(kernel),
    )
