"""The elementwise op registry: one row per op, read by the verifier, the
lowering variants, the operator library and the tests.

A row says how many inputs the op takes, which element types it accepts, what
it produces, how to build its body in MLIR (on scalars or vectors of the
compute type) and its float64 NumPy reference. `tile.elementwise {op = name}`
names a row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tile_mlir.dtypes import DTYPES, FLOATS, HALVES

if TYPE_CHECKING:
    from mlir import ir

Body = Callable[[list["ir.Value"], "ir.Type"], "ir.Value"]
"""(inputs of the compute type, result type) -> result, built at the insertion point."""
Reference = Callable[..., np.ndarray]


@dataclass(frozen=True)
class EwOp:
    name: str
    arity: int
    body: Body
    ref: Reference
    dtypes: tuple[str, ...] = FLOATS
    out: str = "same"  # "same": the input dtype; "bool": a predicate
    native: tuple[str, ...] = ()  # narrow dtypes the body may run on directly
    scalar_only: tuple[int, ...] = ()  # inputs that must be scalars (fill's value)

    def compute_dtype(self, dtype: str) -> str:
        """The element type the body runs on: narrow floats widen to f32 unless native."""
        if dtype in FLOATS and dtype not in ("f32", "f64") and dtype not in self.native:
            return "f32"
        return dtype


# ----------------------------------------------------------------- bodies
# Each body takes values of the compute type (scalars or vectors, scalar
# inputs already broadcast) and the result type, and builds the result at the
# current insertion point.


def _arith(name: str) -> Body:
    def body(args: list[ir.Value], _: ir.Type) -> ir.Value:
        from mlir.dialects import arith

        fn: Callable[..., ir.Value] = getattr(arith, name)
        return fn(*args)

    return body


def _math(name: str) -> Body:
    def body(args: list[ir.Value], _: ir.Type) -> ir.Value:
        from mlir.dialects import math

        fn: Callable[..., ir.Value] = getattr(math, name)
        return fn(*args)

    return body


def _sqrt(args: list[ir.Value], _: ir.Type) -> ir.Value:
    # llvm.sqrt is the correctly rounded sqrt.rn; math.sqrt would go through
    # libdevice's __nv_sqrtf, which is sqrt.approx unless prec-sqrt is set.
    from tile_mlir.lowering.emit import intrinsic

    return intrinsic("llvm.sqrt", args)


def _reciprocal(args: list[ir.Value], ty: ir.Type) -> ir.Value:
    from mlir.dialects import arith

    from tile_mlir.lowering.emit import const

    return arith.divf(const(ty, 1.0), args[0])


def _zero(_: list[ir.Value], ty: ir.Type) -> ir.Value:
    from tile_mlir.lowering.emit import const

    return const(ty, 0)


def _identity(args: list[ir.Value], _: ir.Type) -> ir.Value:
    return args[0]


def _fma(args: list[ir.Value], _: ir.Type) -> ir.Value:
    from mlir.dialects import math

    return math.fma(*args)


_ROWS = (
    EwOp("add", 2, _arith("addf"), np.add, native=HALVES),
    EwOp("sub", 2, _arith("subf"), np.subtract, native=HALVES),
    EwOp("mul", 2, _arith("mulf"), np.multiply, native=HALVES),
    EwOp("div", 2, _arith("divf"), np.divide),
    EwOp("maximum", 2, _arith("maximumf"), np.maximum, native=HALVES),
    EwOp("minimum", 2, _arith("minimumf"), np.minimum, native=HALVES),
    EwOp("fma", 3, _fma, lambda a, b, c: a * b + c),
    EwOp("neg", 1, _arith("negf"), np.negative, native=HALVES),
    EwOp("abs", 1, _math("absf"), np.abs, native=HALVES),
    EwOp("sqrt", 1, _sqrt, np.sqrt),
    EwOp("exp", 1, _math("exp"), np.exp),
    EwOp("reciprocal", 1, _reciprocal, np.reciprocal),
    EwOp("zero", 0, _zero, lambda: np.zeros(())),
    EwOp("fill", 1, _identity, lambda v: v, scalar_only=(0,)),
    EwOp("copy", 1, _identity, lambda a: a, dtypes=tuple(DTYPES), native=tuple(DTYPES)),
)

ELEMENTWISE: dict[str, EwOp] = {row.name: row for row in _ROWS}

ALIASES: dict[str, str] = {"max": "maximum", "min": "minimum"}
"""The seeds' names for ops whose registry name follows torch."""


def lookup(name: str) -> EwOp | None:
    """The row for an op name or alias, None if there is none."""
    return ELEMENTWISE.get(ALIASES.get(name, name))


# ------------------------------------------------------------- reductions


@dataclass(frozen=True)
class ReduceKind:
    """A `tile.reduce` kind: how two partial results combine, and where they start."""

    name: str
    combine: str  # the elementwise row that combines two partials
    identity: float  # what a lane without elements contributes
    ref: Callable[..., np.ndarray]  # NumPy reduction (array, axis=...) in float64


REDUCE_KINDS: dict[str, ReduceKind] = {
    k.name: k
    for k in (
        ReduceKind("sum", "add", 0.0, np.sum),
        ReduceKind("prod", "mul", 1.0, np.prod),
        # maximum/minimum propagate NaN, as torch.amax / torch.amin do
        ReduceKind("max", "maximum", float("-inf"), np.max),
        ReduceKind("min", "minimum", float("inf"), np.min),
    )
}
