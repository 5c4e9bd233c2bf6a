"""Storage for `tile.alloc` buffers, made during tile-lower.

A tile.alloc names a logical tile (its memref type) and a layout saying where
each element lives.

- Shared memory (a layout in memory only): a 16-byte aligned `memref.global`
  of `layout.storage_size` elements in the gpu.module (one `.shared` array
  per allocation), viewed with `memref.reinterpret_cast` as a memref whose
  strided layout is the tile layout. The tile.alloc is replaced by that view
  before anything is lowered, so subviews of shared tiles and the variants all
  see a plain memref.
- Registers (a layout over threads): each thread's `layout.storage_size`
  elements in a `memref.alloca` at the kernel's entry, which LLVM keeps in
  registers when every index into it is a constant after unrolling. Only tile ops can read such a
  buffer: they ask for its storage (made on first use, at the tile.alloc) and
  address it at the layout's offsets. The tile.alloc goes when all are lowered.
"""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import memref

from tile_mlir.contract import STORAGE_ALIGN
from tile_mlir.dialects import tile
from tile_mlir.layout import TileLayout
from tile_mlir.lowering.support.analysis import enclosing, memory_space

PRIVATE = "#gpu.address_space<private>"
"""The memory space of every register tile's storage."""
REGISTER_ALIGN = 2 * STORAGE_ALIGN
"""Bytes of alignment of a register tile's storage: room for 8 f32 registers accessed as
one vector beside 16-byte accesses of a 2-byte type (a bf16 row cast from f32 registers)."""


def layout_type(layout: TileLayout, like: ir.MemRefType) -> ir.MemRefType:
    """The memref type whose strided layout is a memory-only tile layout."""
    strides = list(layout.memory_strides)
    row_major = [math.prod(layout.shape[i + 1:]) for i in range(layout.rank)]
    attr = None if strides == row_major and not layout.offset else \
        ir.StridedLayoutAttr.get(layout.offset, strides)
    return ir.MemRefType.get(list(layout.shape), like.element_type, attr, like.memory_space)


def shared_scratch(op: ir.Operation | ir.OpView, prefix: str, element: ir.Type, count: int
                   ) -> ir.Value:
    """A fresh `.shared` array of `count` elements for one op's own use (a reduction's
    partials, a lookup table): a 16-byte aligned memref.global of the op's gpu.module,
    named `prefix`_n (the first n not taken), and its memref.get_global at the insertion
    point."""
    module = enclosing(op, "gpu.module")
    assert module is not None
    body = module.operation.regions[0].blocks[0]
    taken = {ir.StringAttr(o.operation.attributes["sym_name"]).value
             for o in body.operations if "sym_name" in o.operation.attributes}
    name = next(f"{prefix}_{n}" for n in range(len(taken) + 1) if f"{prefix}_{n}" not in taken)
    workgroup = ir.Attribute.parse("#gpu.address_space<workgroup>")
    flat = ir.MemRefType.get([count], element, memory_space=workgroup)
    with ir.InsertionPoint.at_block_begin(body):
        memref.GlobalOp(name, ir.TypeAttr.get(flat), sym_visibility="private",
                        initial_value=ir.UnitAttr.get(), alignment=STORAGE_ALIGN)
    return memref.get_global(flat, name)


class Buffers:
    """The storage of each tile.alloc under one root op."""

    def __init__(self) -> None:
        self._storage: dict[ir.Value, ir.Value] = {}
        self._globals = 0

    def place_shared(self, root: ir.Operation) -> None:
        """Replace every shared tile.alloc with a view of its memref.global."""
        for op in _allocs(root):
            alloc = op.opview
            assert isinstance(alloc, tile.AllocOp)
            logical = ir.MemRefType(alloc.buffer.type)
            if memory_space(logical) != "shared":
                continue
            flat = ir.MemRefType.get([alloc.layout.storage_size], logical.element_type,
                                     memory_space=logical.memory_space)
            name = self._new_global(alloc, flat)
            layout = alloc.layout
            with ir.InsertionPoint(op), op.location:
                storage = memref.get_global(flat, name)
                view = memref.reinterpret_cast(
                    layout_type(layout, logical), storage, [], [], [],
                    [layout.offset], list(layout.shape), list(layout.memory_strides))
            alloc.buffer.replace_all_uses_with(view)
            op.erase()

    def storage(self, buffer: ir.Value) -> ir.Value:
        """The per-thread storage behind a register tile.alloc result."""
        if buffer not in self._storage:
            alloc = buffer.owner.opview
            assert isinstance(alloc, tile.AllocOp), "storage() takes tile.alloc results"
            logical = ir.MemRefType(alloc.buffer.type)
            # private however the tile spells it (memory space 5 is the same registers): an
            # alloca in LLVM's address space 5 made its loops abort LLVM (hostile seed 4850)
            flat = ir.MemRefType.get([alloc.layout.storage_size], logical.element_type,
                                     memory_space=ir.Attribute.parse(PRIVATE))
            # At the kernel's entry, where LLVM promotes allocas to registers.
            kernel = enclosing(alloc, "gpu.func")
            assert kernel is not None
            entry = kernel.operation.regions[0].blocks[0]
            with ir.InsertionPoint.at_block_begin(entry), alloc.operation.location:
                self._storage[buffer] = memref.alloca(flat, [], [], alignment=REGISTER_ALIGN)
        return self._storage[buffer]

    def _new_global(self, alloc: tile.AllocOp, flat: ir.MemRefType) -> str:
        module = enclosing(alloc, "gpu.module")
        assert module is not None
        body = module.operation.regions[0].blocks[0]
        taken = {ir.StringAttr(op.operation.attributes["sym_name"]).value
                 for op in body.operations if "sym_name" in op.operation.attributes}
        while f"__tile_shared_{self._globals}" in taken:
            self._globals += 1
        name = f"__tile_shared_{self._globals}"
        self._globals += 1
        with ir.InsertionPoint.at_block_begin(body), alloc.operation.location:
            memref.GlobalOp(name, ir.TypeAttr.get(flat), sym_visibility="private",
                            initial_value=ir.UnitAttr.get(), alignment=STORAGE_ALIGN)
        return name

    def finish(self, root: ir.Operation) -> list[tuple[ir.Operation, str]]:
        """Erase the register tile.allocs; return (op, message) for each still in use."""
        problems: list[tuple[ir.Operation, str]] = []
        for op in _allocs(root):
            users = {use.owner.operation.name for use in op.results[0].uses}
            if users:
                problems.append((op, "is used by " + ", ".join(sorted(users)) +
                                 ", which cannot read a register layout: only tile ops may"))
            else:
                op.erase()
        self._storage.clear()
        return problems


def _allocs(root: ir.Operation) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "tile.alloc":
            found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found
