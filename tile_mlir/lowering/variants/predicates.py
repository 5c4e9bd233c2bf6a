"""Questions the variants' predicates share, each answering (ok, reason)."""

from __future__ import annotations

from tile_mlir.dtypes import INTS, LIBRARY_FLOATS
from tile_mlir.layout import TileLayout
from tile_mlir.lowering import ACCEPT, Verdict, reject
from tile_mlir.lowering.schedules.induced import same_distribution
from tile_mlir.lowering.support.analysis import OpInfo

FLOAT_COMPUTE = ("f32", "f16", "bf16")
"""Element types the register variants compute in."""

MEMORY_DTYPES = (*LIBRARY_FLOATS, *INTS, "bool")
"""Element types the memory variants (lowering/schedules/synthesized.py) load, compute and store:
the operator library's, fp8 and bools (a byte each) included."""


def scope_known(info: OpInfo) -> Verdict:
    if info.scope_threads is None:
        return reject(f"scope {info.scope} needs the kernel's known_block_size")
    return ACCEPT


def all_in(info: OpInfo, spaces: tuple[str, ...]) -> Verdict:
    """Every memref operand is in one of `spaces` (global, shared, local)."""
    for operand in info.memrefs:
        if operand.space not in spaces:
            return reject(f"operand {operand.index} scope {operand.space} != "
                          f"{' or '.join(spaces)}")
    return ACCEPT


SCALAR_EXTRAS = ("i64", "f64")
"""Scalar operands' types every variant takes beside its element types: a scalar is
never loaded or stored, only converted (or kept: the generators' i64 numbers and index
base, sinusoidal's f64 log2(base))."""


def element_types(info: OpInfo, supported: tuple[str, ...]) -> Verdict:
    for operand in info.operands:
        allowed = supported if operand.is_memref else (*supported, *SCALAR_EXTRAS)
        if operand.dtype.name not in allowed:
            return reject(f"element type {operand.dtype.name} is not one of "
                          f"{', '.join(supported)}")
    return ACCEPT


def register_anchor(info: OpInfo) -> tuple[TileLayout | None, str]:
    """The layout that induces the partition: the first register operand's, dst first.

    Every other register operand must give each thread the same coordinates.
    Returns (None, reason) when there is no usable anchor.
    """
    registers = [o for o in info.memrefs if o.space == "local"]
    if not registers:
        return None, "no operand is in registers"
    for operand in registers:
        if operand.layout is None:
            return None, (f"register operand {operand.index} has no layout "
                          "(allocate it with tile.alloc)")
    anchor = registers[0].layout
    assert anchor is not None
    for operand in registers[1:]:
        assert operand.layout is not None
        if not same_distribution(anchor, operand.layout):
            return None, (f"register operand {operand.index} ({operand.layout}) is distributed "
                          f"unlike operand {registers[0].index} ({anchor})")
    return anchor, ""


def anchored(info: OpInfo) -> Verdict:
    """Accept when the register operands have an anchor layout (register_anchor)."""
    anchor, reason = register_anchor(info)
    return ACCEPT if anchor is not None else reject(reason)


def first_failure(*verdicts: Verdict) -> Verdict:
    return next((v for v in verdicts if not v[0]), ACCEPT)
