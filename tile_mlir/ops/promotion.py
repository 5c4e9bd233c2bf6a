"""Type promotion as torch.result_type does it, on the library's dtype names.

Operands come in three priorities: tensors with dimensions, zero-dimensional
tensors, and Python numbers ("wrapped numbers"). Within each, dtypes promote
as dtypes.promote_types; a lower priority only counts when it is of a higher
kind (a float scalar makes an integer tensor's result float, a float scalar
leaves an f16 tensor's result f16). A Python float counts as torch's default
dtype, float32; a Python int as int64; a bool as bool.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tile_mlir.dtypes import DTYPES, KIND_ORDER, promote_types

TENSOR, ZERO_DIM, SCALAR = 0, 1, 2


@dataclass(frozen=True)
class Typed:
    """An operand as promotion sees it."""

    dtype: str
    priority: int  # TENSOR, ZERO_DIM or SCALAR


def scalar_dtype(value: object) -> str:
    """The dtype a Python number counts as."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "i64"
    return "f32"


def _combine(higher: str | None, lower: str | None) -> str | None:
    """torch's combine_categories: the higher priority's dtype unless the lower one is
    of a higher kind (or the higher one is bool), then the two promoted."""
    if higher is None:
        return lower
    if lower is None or DTYPES[higher].is_float:
        return higher
    if higher == "bool" or _rank(lower) > _rank(higher):
        return promote_types(higher, lower)
    return higher


def _rank(dtype: str) -> int:
    return KIND_ORDER.index(DTYPES[dtype].kind)


def result_type(operands: Sequence[Typed]) -> str:
    """The dtype torch.result_type gives these operands."""
    by_priority: list[str | None] = [None, None, None]
    for operand in operands:
        current = by_priority[operand.priority]
        by_priority[operand.priority] = operand.dtype if current is None else \
            promote_types(current, operand.dtype)
    result = _combine(by_priority[TENSOR], _combine(by_priority[ZERO_DIM], by_priority[SCALAR]))
    if result is None:
        raise ValueError("result_type needs at least one operand")
    return result
