"""elementwise/reg_mem: a register tile with memory operands beside it, as in
`y_global = x_reg * w_global` (the last step of an RMSNorm).

Applies, below elementwise/reg, when at least one operand is a register tile
(tile.alloc in #gpu.address_space<private>) and the others are global or shared
memrefs or scalars. The register layout induces the partition as for reg
(lowering/schedules/induced.py): each thread walks the elements it holds and
reads or writes the memory operands at those elements' coordinates, in vectors
of up to 16 bytes along the innermost dimension where the register run and the
memory side are contiguous and aligned (a float4 of `w` per four registers of
`x`). A memory dst replicated by the register tile is written by its first
replica only. A memory operand may end before the register tile (dynamic or
smaller extents: a row's tail): the op applies on the overlap, with the vector
that straddles the end taken element by element (lowering/support/tails.py).
"""

from __future__ import annotations

from tile_mlir.lowering import ACCEPT, Variant, Verdict, register, reject
from tile_mlir.lowering.schedules import induced
from tile_mlir.lowering.schedules.synthesized import MAX_ACCESS_BYTES
from tile_mlir.lowering.support.analysis import OpInfo
from tile_mlir.lowering.variants.predicates import (
    FLOAT_COMPUTE,
    all_in,
    anchored,
    element_types,
    first_failure,
    register_anchor,
    scope_known,
)


def _some_memory(info: OpInfo) -> Verdict:
    if all(o.space == "local" for o in info.memrefs):
        return reject("every operand is in registers (elementwise/reg)")
    return ACCEPT


def check(info: OpInfo) -> Verdict:
    return first_failure(all_in(info, ("global", "shared", "local")), _some_memory(info),
                         scope_known(info), element_types(info, FLOAT_COMPUTE),
                         anchored(info))


def lower(info: OpInfo) -> None:
    anchor, _ = register_anchor(info)
    assert anchor is not None
    induced.lower_induced(info, anchor, MAX_ACCESS_BYTES)


register(Variant("tile.elementwise", "reg_mem", 8, check, lower,
                 "a register tile with memory operands; partition induced by its layout"))
