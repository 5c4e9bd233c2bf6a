"""What a kernel body computes with: tensors, indices, predicates and scalars. Imports no
MLIR.

These classes are both the annotations of a kernel's parameters (`x: tl.Tensor`,
`s: tl.f32`) and the values the body receives while it is built: a `Tensor` is a
memref (a kernel argument, a view of one, or a tile.alloc buffer), an `Index` an
SSA value of type index, a `Bool` an i1, a `Scalar` a number of one element type.
Their operators build IR at the current insertion point; the building lives in
tile_mlir.lang.builder and views.py, imported only when a program is built, so a
process without MLIR can still import kernels and launch them from a warm cache.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Union, overload

from tile_mlir.dtypes import DTYPES
from tile_mlir.lang.errors import program_error

if TYPE_CHECKING:
    from mlir import ir

IndexLike = Union[int, "Index"]


@cache
def _builder() -> ModuleType:
    return importlib.import_module("tile_mlir.lang.builder")


@cache
def _views() -> ModuleType:
    return importlib.import_module("tile_mlir.lang.views")


# ------------------------------------------------------------------ tensors

_TYPE_VARIABLE = re.compile(r"^[A-Z]\w*$")


@dataclass(frozen=True)
class TensorType:
    """A Tensor parameter's constraints: `tl.Tensor["f32", ("M", "N")]`.

    dtype: a dtype name, a type variable (an identifier starting with a capital, "T":
    equal names must get equal dtypes) or None (any). dims: None (any rank), or per
    dim an int (that size, checked) or a name (symbolic: equal names agree at launch,
    and share one size argument in the kernel)."""

    dtype: str | None = None
    dims: tuple[str | int, ...] | None = None

    @staticmethod
    def parse(item: Any) -> TensorType:
        """The constraints of a subscript or of Annotated's metadata."""
        items = item if isinstance(item, tuple) else (item,)
        dtype: str | None = None
        dims: tuple[str | int, ...] | None = None
        for part in items:
            if part is None or (isinstance(part, str) and dtype is None and dims is None):
                dtype = part
            elif isinstance(part, tuple | list) and dims is None:
                dims = tuple(part)
            else:
                raise TypeError(f"tl.Tensor[...] takes a dtype and a tuple of dims, got "
                                f"{item!r}")
        if dtype is not None and dtype not in DTYPES and not _TYPE_VARIABLE.match(dtype):
            raise TypeError(f"tl.Tensor: unknown dtype {dtype!r} (dtypes: "
                            f"{', '.join(DTYPES)}; or a type variable such as 'T')")
        for dim in dims or ():
            if isinstance(dim, bool) or not isinstance(dim, int | str) or \
                    (isinstance(dim, int) and dim < 0) or \
                    (isinstance(dim, str) and not dim.isidentifier()):
                raise TypeError(f"tl.Tensor: a dim is a size or a name, got {dim!r}")
        return TensorType(dtype, dims)

    @property
    def type_variable(self) -> str | None:
        return self.dtype if self.dtype is not None and self.dtype not in DTYPES else None

    def __repr__(self) -> str:
        dims = "" if self.dims is None else f", {self.dims!r}"
        return f"tl.Tensor[{self.dtype!r}{dims}]"


class _TensorMeta(type):
    def __getitem__(cls, item: Any) -> TensorType:
        return TensorType.parse(item)


class Tensor(metaclass=_TensorMeta):
    """A tile of memory in a kernel body: global (a kernel argument or a view of one),
    shared or registers (tile.alloc). As an annotation, a global-memory array parameter;
    `tl.Tensor["f32", ("M", "N")]` constrains its dtype and dims (see TensorType)."""

    __slots__ = ("dtype", "layout", "root", "sizes", "space", "value")

    def __init__(self, value: ir.Value, sizes: tuple[IndexLike, ...], dtype: str, space: str,
                 *, layout: str | None = None, root: int | None = None):
        self.value = value
        self.sizes = sizes
        self.dtype = dtype
        self.space = space  # "global", "shared" or "local" (registers)
        self.layout = layout  # the tile.alloc layout's text
        self.root = root  # the kernel parameter it views (None for buffers)

    @property
    def shape(self) -> tuple[Any, ...]:
        """Per dim an int (static) or an Index (known at run time). Typed Any: which one a
        dim is depends on the specialization, and both take part in index arithmetic."""
        return self.sizes

    @property
    def rank(self) -> int:
        return len(self.sizes)

    def __getitem__(self, index: Any) -> Tensor:
        """A view: ints and Index values pick (the dim goes), slices `a:b:s` and
        `tl.ds(start, size)` keep the dim; `...` stands for the dims not named."""
        result: Tensor = _views().subscript(self, index)
        return result

    def reshape(self, *shape: IndexLike | tuple[IndexLike, ...]) -> Tensor:
        """The same elements in another shape (contiguous dims only)."""
        result: Tensor = _views().reshape(self, shape)
        return result

    def aligned(self, vec: int) -> tuple[Tensor, Tensor, Tensor]:
        """A contiguous 1-d view as (head, body, tail): body [?, vec] its whole vectors of
        `vec` elements that start aligned in memory, head and tail [?, 1] the elements
        before and after them, as columns (views.aligned)."""
        result: tuple[Tensor, Tensor, Tensor] = _views().aligned(self, vec)
        return result

    def aligned_as(self, vec: int, like: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """A contiguous 1-d view split as `like.aligned(vec)` splits `like` (as long): the
        same pieces' sizes, element for element; the body aligned only where this view
        starts as `like` does (views.aligned_as)."""
        result: tuple[Tensor, Tensor, Tensor] = _views().aligned_as(self, vec, like)
        return result

    def aligned_copy_as(self, vec: int, like: Tensor, period: int
                        ) -> tuple[Tensor, Tensor, Tensor]:
        """Split as `like.aligned(vec)` splits `like`, from the one of the `vec` copies of
        a vector this view holds (copy c at c * (period + 1)) whose body starts aligned
        where like's does (views.aligned_copy_as): a weight beside rows of odd length read
        in whole vectors."""
        result: tuple[Tensor, Tensor, Tensor] = _views().aligned_copy_as(self, vec, like,
                                                                         period)
        return result

    def broadcast_to(self, shape: tuple[IndexLike, ...]) -> Tensor:
        """A view of `shape` that repeats this one along new leading dims and its size-1
        dims (stride 0: nothing is copied)."""
        result: Tensor = _views().broadcast_to(self, shape)
        return result

    def load(self, *indices: IndexLike) -> Scalar:
        """The element at `indices` (memref.load), in every thread that runs it."""
        result: Scalar = _views().load(self, indices)
        return result

    def store(self, value: Scalar | float | int | bool, *indices: IndexLike) -> None:
        """Write one element (memref.store), in every thread that runs it."""
        _views().store(self, value, indices)

    def __repr__(self) -> str:
        dims = ", ".join(str(d) if isinstance(d, int) else "?" for d in self.sizes)
        return f"<tl.Tensor {self.space} {self.dtype}[{dims}]>"


@dataclass(frozen=True)
class ds:
    """A slice of `size` elements from `start` (every `step`-th), which the program
    promises stays inside the dim: its size is static when `size` is an int, where
    `x[a:b]` clamps b to the extent and has a dynamic size unless both are known."""

    start: IndexLike
    size: IndexLike
    step: int = 1


# ------------------------------------------------------------------ numbers


class Index:
    """An index value (type `index`): a block id, a size, an offset. Arithmetic with
    ints and other Index values builds arith ops; `//` and `%` take non-negative
    operands (as ids and sizes are); comparisons give a Bool."""

    __slots__ = ("value",)

    def __init__(self, value: ir.Value):
        self.value = value

    def _op(self, name: str, other: IndexLike, swap: bool = False) -> Index:
        result: Index = _builder().index_op(name, self, other, swap)
        return result

    def __add__(self, other: IndexLike) -> Index:
        return self._op("add", other)

    def __radd__(self, other: IndexLike) -> Index:
        return self._op("add", other, True)

    def __sub__(self, other: IndexLike) -> Index:
        return self._op("sub", other)

    def __rsub__(self, other: IndexLike) -> Index:
        return self._op("sub", other, True)

    def __mul__(self, other: IndexLike) -> Index:
        return self._op("mul", other)

    def __rmul__(self, other: IndexLike) -> Index:
        return self._op("mul", other, True)

    def __floordiv__(self, other: IndexLike) -> Index:
        return self._op("div", other)

    def __rfloordiv__(self, other: IndexLike) -> Index:
        return self._op("div", other, True)

    def __mod__(self, other: IndexLike) -> Index:
        return self._op("rem", other)

    def __rmod__(self, other: IndexLike) -> Index:
        return self._op("rem", other, True)

    def _cmp(self, predicate: str, other: IndexLike) -> Bool:
        result: Bool = _builder().index_compare(predicate, self, other)
        return result

    def __lt__(self, other: IndexLike) -> Bool:
        return self._cmp("slt", other)

    def __le__(self, other: IndexLike) -> Bool:
        return self._cmp("sle", other)

    def __gt__(self, other: IndexLike) -> Bool:
        return self._cmp("sgt", other)

    def __ge__(self, other: IndexLike) -> Bool:
        return self._cmp("sge", other)

    def ult(self, other: IndexLike) -> Bool:
        """Unsigned less-than (a negative index compares as huge: one compare tests
        0 <= self < other)."""
        return self._cmp("ult", other)

    def ule(self, other: IndexLike) -> Bool:
        """Unsigned less-or-equal."""
        return self._cmp("ule", other)

    def __eq__(self, other: object) -> Bool:  # type: ignore[override]
        return self._cmp("eq", _index_like(other))

    def __ne__(self, other: object) -> Bool:  # type: ignore[override]
        return self._cmp("ne", _index_like(other))

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        raise program_error("an Index is known only when the kernel runs: branch on it "
                            "with `with tl.if_(cond):`, not a Python `if`")

    def to(self, dtype: str | type[Scalar]) -> Scalar:
        """The index as a number of `dtype` (an integer, or a float through i64)."""
        result: Scalar = _builder().index_to(self, dtype_name(dtype))
        return result

    def __repr__(self) -> str:
        return "<tl.Index>"


def _index_like(other: object) -> IndexLike:
    if isinstance(other, Index) or (isinstance(other, int) and not isinstance(other, bool)):
        return other
    raise program_error(f"cannot compare an Index with {type(other).__name__}")


class Bool:
    """A predicate (i1) computed in the kernel: `&`, `|`, `^` and `~` combine them."""

    __slots__ = ("value",)

    def __init__(self, value: ir.Value):
        self.value = value

    def _op(self, name: str, other: Bool | Scalar | bool) -> Bool:
        result: Bool = _builder().bool_op(name, self, other)
        return result

    def __and__(self, other: Bool | Scalar | bool) -> Bool:
        return self._op("and", other)

    __rand__ = __and__

    def __or__(self, other: Bool | Scalar | bool) -> Bool:
        return self._op("or", other)

    __ror__ = __or__

    def __xor__(self, other: Bool | Scalar | bool) -> Bool:
        return self._op("xor", other)

    __rxor__ = __xor__

    def __invert__(self) -> Bool:
        return self._op("xor", True)

    def __bool__(self) -> bool:
        raise program_error("a tl.Bool is known only when the kernel runs: branch on it "
                            "with `with tl.if_(cond):`, not a Python `if`")

    def __repr__(self) -> str:
        return "<tl.Bool>"


Number = Union[int, float, bool, "Scalar"]


class Scalar:
    """A number of one element type computed in the kernel (a scalar parameter, a loaded
    element). As annotations, the subclasses tl.f32, tl.f64, tl.i32, tl.i64 and tl.bool_
    declare scalar kernel parameters."""

    __slots__ = ("value",)
    dtype: ClassVar[str] = ""

    def __init__(self, value: ir.Value):
        self.value = value

    def _op(self, name: str, other: Number, swap: bool = False) -> Scalar:
        result: Scalar = _builder().scalar_op(name, self, other, swap)
        return result

    def __add__(self, other: Number) -> Scalar:
        return self._op("add", other)

    def __radd__(self, other: Number) -> Scalar:
        return self._op("add", other, True)

    def __sub__(self, other: Number) -> Scalar:
        return self._op("sub", other)

    def __rsub__(self, other: Number) -> Scalar:
        return self._op("sub", other, True)

    def __mul__(self, other: Number) -> Scalar:
        return self._op("mul", other)

    def __rmul__(self, other: Number) -> Scalar:
        return self._op("mul", other, True)

    def __truediv__(self, other: Number) -> Scalar:
        return self._op("div", other)

    def __rtruediv__(self, other: Number) -> Scalar:
        return self._op("div", other, True)

    def __neg__(self) -> Scalar:
        return self._op("sub", 0, True)

    def _cmp(self, predicate: str, other: Number) -> Bool:
        result: Bool = _builder().scalar_compare(predicate, self, other)
        return result

    def __lt__(self, other: Number) -> Bool:
        return self._cmp("lt", other)

    def __le__(self, other: Number) -> Bool:
        return self._cmp("le", other)

    def __gt__(self, other: Number) -> Bool:
        return self._cmp("gt", other)

    def __ge__(self, other: Number) -> Bool:
        return self._cmp("ge", other)

    def __eq__(self, other: object) -> Bool:  # type: ignore[override]
        return self._cmp("eq", _number(other))

    def __ne__(self, other: object) -> Bool:  # type: ignore[override]
        return self._cmp("ne", _number(other))

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        raise program_error("a tl scalar is known only when the kernel runs: branch on it "
                            "with `with tl.if_(cond):`, not a Python `if`")

    def ult(self, other: Number) -> Bool:
        """Unsigned less-than of integers (a negative value compares as huge)."""
        return self._cmp("ult", other)

    def to(self, dtype: str | type[Scalar]) -> Scalar:
        """The value converted to another element type (as C converts)."""
        result: Scalar = _builder().scalar_to(self, dtype_name(dtype))
        return result

    def index(self) -> Index:
        """An integer scalar as an Index (sign-extended or truncated)."""
        result: Index = _builder().scalar_index(self)
        return result

    def __repr__(self) -> str:
        return f"<tl.{type(self).__name__}>"


def _number(other: object) -> Number:
    if isinstance(other, Scalar | int | float | bool):
        return other
    raise program_error(f"cannot compare a scalar with {type(other).__name__}")


def _scalar_class(name: str) -> type[Scalar]:
    return type(name if name != "bool" else "bool_", (Scalar,),
                {"__slots__": (), "dtype": name,
                 "__doc__": f"A {name} scalar: a kernel parameter's annotation, a value."})


SCALARS: dict[str, type[Scalar]] = {name: _scalar_class(name) for name in DTYPES}
"""The Scalar subclass of each dtype."""

if TYPE_CHECKING:
    # mypy sees classes, so that `s: tl.f32` is a valid annotation
    class f32(Scalar): ...
    class f64(Scalar): ...
    class f16(Scalar): ...
    class bf16(Scalar): ...
    class i64(Scalar): ...
    class i32(Scalar): ...
    class i16(Scalar): ...
    class i8(Scalar): ...
    class bool_(Scalar): ...
else:
    f32, f64, f16, bf16 = (SCALARS[n] for n in ("f32", "f64", "f16", "bf16"))
    i64, i32, i16, i8 = (SCALARS[n] for n in ("i64", "i32", "i16", "i8"))
    bool_ = SCALARS["bool"]

PARAMETER_SCALARS = ("f32", "f64", "i32", "i64", "bool")
"""The element types a scalar kernel parameter may have (what launches can pass)."""


class _Constexpr:
    """Annotation of a compile-time parameter: a Python int, float, bool, str or tuple of
    them, seen by the body as it is; each value is a specialization of its own."""


if TYPE_CHECKING:
    constexpr = Any  # a constexpr parameter holds a plain Python value (`T: tl.constexpr = 4`)
else:
    constexpr = _Constexpr


def dtype_name(dtype: Any) -> str:
    """A dtype given as a name ("f32") or a scalar class (tl.f32)."""
    if isinstance(dtype, type) and issubclass(dtype, Scalar) and dtype.dtype:
        return dtype.dtype
    if isinstance(dtype, str) and dtype in DTYPES:
        return dtype
    raise program_error(f"unknown dtype {dtype!r} (dtypes: {', '.join(DTYPES)})")


# --------------------------------------------------------- index helpers


@overload
def cdiv(a: int, b: int) -> int: ...


@overload
def cdiv(a: IndexLike, b: IndexLike) -> Any: ...


def cdiv(a: IndexLike, b: IndexLike) -> Any:
    """Ceiling division: ints in Python (a grid size at launch), Index values in the kernel."""
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    result: Index = _builder().index_op("ceildiv", _as_index(a), b, False)
    return result


@overload
def minimum(a: int, b: int) -> int: ...


@overload
def minimum(a: IndexLike, b: IndexLike) -> Any: ...


def minimum(a: IndexLike, b: IndexLike) -> Any:
    """The smaller of two indices (signed)."""
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b)
    result: Index = _builder().index_op("min", _as_index(a), b, False)
    return result


@overload
def maximum(a: int, b: int) -> int: ...


@overload
def maximum(a: IndexLike, b: IndexLike) -> Any: ...


def maximum(a: IndexLike, b: IndexLike) -> Any:
    """The larger of two indices (signed)."""
    if isinstance(a, int) and isinstance(b, int):
        return max(a, b)
    result: Index = _builder().index_op("max", _as_index(a), b, False)
    return result


def _as_index(value: IndexLike) -> Index:
    if isinstance(value, Index):
        return value
    result: Index = _builder().index_constant(value)
    return result
