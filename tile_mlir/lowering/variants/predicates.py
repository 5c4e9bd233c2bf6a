"""Questions the variants' predicates share, each answering (ok, reason)."""

from __future__ import annotations

from tile_mlir.dtypes import INTS, LIBRARY_FLOATS
from tile_mlir.layout import TileLayout
from tile_mlir.lowering import ACCEPT, Verdict, reject
from tile_mlir.lowering.schedules.induced import coverage
from tile_mlir.lowering.support.analysis import OpInfo, uniform

FLOAT_COMPUTE = ("f32", "f16", "bf16")
"""Element types the register variants compute in."""

MEMORY_DTYPES = (*LIBRARY_FLOATS, *INTS, "bool")
"""Element types the memory variants (lowering/schedules/synthesized.py) load, compute and store:
the operator library's, fp8 and bools (a byte each) included."""


def scope_known(info: OpInfo) -> Verdict:
    if info.scope_threads is None:
        return reject(f"scope {info.scope} needs the kernel's known_block_size")
    return ACCEPT


def within_cta(info: OpInfo) -> Verdict:
    """Reject cluster scope: a schedule whose threads meet through one CTA's shared
    memory and barriers (only reduce/local folds across a cluster's CTAs)."""
    if info.scope == "cluster":
        return reject("scope cluster: its partials would meet in one CTA's shared memory "
                      "(register reductions, reduce/local, fold across the cluster)")
    return ACCEPT


def all_in(info: OpInfo, spaces: tuple[str, ...], uniform_inputs: bool = False) -> Verdict:
    """Every memref operand is in one of `spaces` (global, shared, local); with
    `uniform_inputs`, an input may also be a uniform register tile (analysis.uniform:
    a scalar every thread holds, read from its own registers)."""
    for operand in info.memrefs:
        if uniform_inputs and uniform(operand):
            continue
        if operand.space not in spaces:
            return reject(f"operand {operand.index} scope {operand.space} != "
                          f"{' or '.join(spaces)}")
    return ACCEPT


SCALAR_EXTRAS = ("i64", "f64")
"""Scalar operands' types every variant takes beside its element types: a scalar is
never loaded or stored, only converted (or kept: the generators' i64 numbers and index
base, sinusoidal's f64 step and ratio)."""


def element_types(info: OpInfo, supported: tuple[str, ...]) -> Verdict:
    for operand in info.operands:
        allowed = supported if operand.is_memref else (*supported, *SCALAR_EXTRAS)
        if operand.dtype.name not in allowed:
            return reject(f"element type {operand.dtype.name} is not one of "
                          f"{', '.join(supported)}")
    return ACCEPT


def register_anchor(info: OpInfo) -> tuple[TileLayout | None, str]:
    """The layout that induces the partition: the first register operand's of the whole
    tile's shape (not a broadcast one), dst first.

    Every other register operand must hold, in each thread, the elements that thread
    reads (induced.coverage: the same distribution, or a broadcast operand replicated
    where the tile is spread). Returns (None, reason) when there is no usable anchor.
    """
    registers = [o for o in info.memrefs if o.space == "local"]
    if not registers:
        return None, "no operand is in registers"
    for operand in registers:
        if operand.layout is None:
            return None, (f"register operand {operand.index} has no layout "
                          "(allocate it with tile.alloc)")
    over = registers[0].shape if info.name == "tile.copy" else info.over
    first = next((o for o in registers if o.shape == over), None)
    if first is None:
        return None, (f"no register operand has the tile's shape {'x'.join(map(str, over))} "
                      "(each broadcasts): make dst or an input a whole register tile")
    anchor = first.layout
    assert anchor is not None
    writers_only = info.dst.space != "local"
    for operand in registers:
        assert operand.layout is not None
        problem = "" if operand is first else \
            coverage(anchor, operand.layout, writers_only) if operand.shape == over or \
            info.name == "tile.elementwise" else "its shape differs"
        if problem:
            return None, (f"register operand {operand.index} ({operand.layout}) is distributed "
                          f"unlike operand {first.index} ({anchor}): {problem}")
    return anchor, ""


def anchored(info: OpInfo) -> Verdict:
    """Accept when the register operands have an anchor layout (register_anchor)."""
    anchor, reason = register_anchor(info)
    return ACCEPT if anchor is not None else reject(reason)


def first_failure(*verdicts: Verdict) -> Verdict:
    return next((v for v in verdicts if not v[0]), ACCEPT)
