"""Element types by name: their MLIR spelling, size and NumPy counterpart.

Pure Python (no MLIR import): the runtime packs arguments with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np


@dataclass(frozen=True)
class DType:
    name: str  # the library's name: f32, bf16, f8e4m3, i32, bool, ...
    mlir: str  # MLIR spelling of the element type
    bits: int
    kind: str  # "float", "int" or "bool"
    numpy: str  # NumPy / ml_dtypes dtype name

    @property
    def bytes(self) -> int:
        return max(self.bits // 8, 1)

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    def np_dtype(self) -> np.dtype:
        return np_dtype(self.numpy)


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("f64", "f64", 64, "float", "float64"),
        DType("f32", "f32", 32, "float", "float32"),
        DType("f16", "f16", 16, "float", "float16"),
        DType("bf16", "bf16", 16, "float", "bfloat16"),
        DType("f8e4m3", "f8E4M3FN", 8, "float", "float8_e4m3fn"),
        DType("f8e5m2", "f8E5M2", 8, "float", "float8_e5m2"),
        DType("i64", "i64", 64, "int", "int64"),
        DType("i32", "i32", 32, "int", "int32"),
        DType("i16", "i16", 16, "int", "int16"),
        DType("i8", "i8", 8, "int", "int8"),
        DType("bool", "i1", 8, "bool", "bool"),
    )
}

_BY_MLIR = {d.mlir: d for d in DTYPES.values()}
FLOATS = tuple(n for n, d in DTYPES.items() if d.kind == "float")
HALVES = ("f16", "bf16")
FP8 = ("f8e4m3", "f8e5m2")
LIBRARY_FLOATS = ("f32", "f16", "bf16", "f8e4m3", "f8e5m2")
"""The float types of the operator library (f64 is not among them)."""
INTS = ("i32", "i64")
"""The integer types of the operator library."""

KIND_ORDER = ("bool", "int", "float")
"""Kinds in torch's promotion order: a float beats an integer beats a bool."""
_CATEGORY = {kind: n for n, kind in enumerate(KIND_ORDER)}


def promote_types(a: str, b: str) -> str:
    """torch.promote_types on dtype names: bool < integers < floats, the wider within a
    kind; f16 with bf16 gives f32. Mixing two different fp8 formats, which torch
    refuses, gives f32 here (the compute type either would widen to)."""
    if a == b:
        return a
    da, db = DTYPES[a], DTYPES[b]
    if _CATEGORY[da.kind] != _CATEGORY[db.kind]:
        return a if _CATEGORY[da.kind] > _CATEGORY[db.kind] else b
    if da.bits != db.bits:
        return a if da.bits > db.bits else b
    return "f32" if da.kind == "float" else a  # f16 + bf16, e4m3 + e5m2


def opmath(name: str) -> str:
    """The type arithmetic on `name` runs in, as torch's opmath_type: f16, bf16 and the
    fp8 formats compute in f32; every other type in itself."""
    return "f32" if name in HALVES or name in FP8 else name


@cache
def limits(name: str) -> tuple[float | int, float | int]:
    """The most negative and the largest finite values of a dtype (-448 and 448 for
    f8e4m3, -2**31 and 2**31 - 1 for i32, 0 and 1 for bool)."""
    kind, np_type = DTYPES[name].kind, DTYPES[name].np_dtype()
    if kind == "bool":
        return 0, 1
    if kind == "int":
        info = np.iinfo(np_type)
        return int(info.min), int(info.max)
    largest = float(_finfo(np_type).max)
    return -largest, largest


def max_value(name: str) -> float | int:
    """The largest finite value of a dtype."""
    return limits(name)[1]


def lowest(name: str) -> float | int:
    """The most negative finite value of a dtype."""
    return limits(name)[0]


def smallest(name: str) -> float:
    """The smallest positive value of a float dtype (its smallest subnormal); 0 for an
    integer or bool dtype."""
    if not DTYPES[name].is_float:
        return 0.0
    return float(_finfo(DTYPES[name].np_dtype()).smallest_subnormal)


def _finfo(np_type: np.dtype) -> Any:
    if np_type.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        import ml_dtypes

        return ml_dtypes.finfo(np_type)  # type: ignore[no-untyped-call]
    return np.finfo(np_type)


def by_mlir(spelling: str) -> DType:
    """The DType of an MLIR element type spelling ('f32', 'bf16', 'i1', ...)."""
    try:
        return _BY_MLIR[spelling]
    except KeyError:
        raise ValueError(f"element type {spelling} is not supported") from None


@cache
def np_dtype(name: str) -> np.dtype:
    """A NumPy dtype by name, with ml_dtypes supplying bfloat16 and the fp8 formats."""
    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        import ml_dtypes

        extension: np.dtype = np.dtype(getattr(ml_dtypes, name))
        return extension
    return np.dtype(name)
