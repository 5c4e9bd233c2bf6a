"""Lowering variants: for each tile op, several ways to lower it, tried by priority.

The rooms of lowering/:
- variants/<op>/<variant>.py: one module per variant (tile.copy -> copy/, tile.elementwise
  -> elementwise/, tile.reduce -> reduce/, tile.prefetch -> prefetch/), whose docstring
  says when it applies. It registers a `Variant`: a name, a priority, a predicate that
  answers `(True, "")` or `(False, reason)` (variants/predicates.py holds the questions
  they share), and a lowering that builds the op's replacement at the op (tile-lower sets
  the insertion point and location, and erases the op afterwards).
- schedules/: how the variants divide an op's elements among threads: the partition
  synthesized from the scope (synthesized.py, seed 000), the one induced by a register
  layout (induced.py, seed 003), the reductions (reduction.py: the shared pieces; rows.py,
  columns.py, registers.py).
- support/: IR helpers: decoding an op (analysis.py), addressing operands (access.py),
  alignment facts (alignment.py), loads, stores, conversions and row bodies (compute.py),
  small builders (emit.py), storage of tile.alloc buffers (buffers.py) and barriers
  (sync.py), tails of copies and of memory operands beside a register tile (tails.py).

`tile-dispatch` asks the predicates in priority order and records the first that
accepts on the op (`variant = "<name>"`); `tile-lower` runs that variant's lowering.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from tile_mlir.lowering.support.analysis import OpInfo

Verdict = tuple[bool, str]
ACCEPT: Verdict = (True, "")


def reject(reason: str) -> Verdict:
    return (False, reason)


@dataclass(frozen=True)
class Variant:
    op: str  # tile.copy, tile.elementwise, tile.reduce, tile.prefetch
    name: str
    priority: int
    check: Callable[[OpInfo], Verdict]
    lower: Callable[[OpInfo], object]
    summary: str = ""


# The variant modules, imported on first use; each registers itself.
_MODULES = (
    "tile_mlir.lowering.variants.elementwise.gmem",
    "tile_mlir.lowering.variants.elementwise.lut",
    "tile_mlir.lowering.variants.elementwise.smem",
    "tile_mlir.lowering.variants.elementwise.reg",
    "tile_mlir.lowering.variants.elementwise.reg_mem",
    "tile_mlir.lowering.variants.elementwise.mem",
    "tile_mlir.lowering.variants.copy.gmem_smem",
    "tile_mlir.lowering.variants.copy.reg",
    "tile_mlir.lowering.variants.reduce.shared",
    "tile_mlir.lowering.variants.reduce.gmem",
    "tile_mlir.lowering.variants.reduce.local",
    "tile_mlir.lowering.variants.reduce.columns",
    "tile_mlir.lowering.variants.prefetch.vectors",
)

_REGISTRY: dict[str, list[Variant]] = {}


def register(variant: Variant) -> Variant:
    variants = _REGISTRY.setdefault(variant.op, [])
    if any(v.name == variant.name for v in variants):
        raise ValueError(f"variant {variant.op}/{variant.name} registered twice")
    variants.append(variant)
    variants.sort(key=lambda v: -v.priority)  # stable: registration order breaks ties
    return variant


@cache
def _load_variants() -> None:
    for module in _MODULES:
        importlib.import_module(module)


def variants_for(op_name: str) -> list[Variant]:
    """The variants of an op, highest priority first."""
    _load_variants()
    return list(_REGISTRY.get(op_name, []))


def find(op_name: str, variant: str) -> Variant | None:
    return next((v for v in variants_for(op_name) if v.name == variant), None)


@dataclass(frozen=True)
class Decision:
    """The outcome of dispatching one op: every candidate's verdict and the choice."""

    candidates: list[tuple[Variant, Verdict]]
    chosen: Variant | None
    forced: str | None = None

    def explain(self) -> str:
        lines = []
        for variant, (ok, reason) in self.candidates:
            mark = "chosen" if variant is self.chosen else ("accepts" if ok else "rejected")
            detail = f": {reason}" if reason else ""
            lines.append(f"  {variant.name} (priority {variant.priority}): {mark}{detail}")
        return "\n".join(lines)


def decide(info: OpInfo, forced: str | None = None) -> Decision:
    """Ask every candidate (only `forced` if given); choose the first yes by priority.

    All predicates run, so the explanation can say why each other variant would
    or would not have applied.
    """
    candidates = [
        (variant, variant.check(info))
        for variant in variants_for(info.name)
        if forced is None or variant.name == forced
    ]
    chosen = next((variant for variant, (ok, _) in candidates if ok), None)
    return Decision(candidates, chosen, forced)
