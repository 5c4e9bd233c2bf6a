"""Specializations: what a kernel is compiled for, from its launch arguments. Imports no MLIR.

A kernel is compiled once per `Specialization`, a frozen, hashable value
computed from the arguments with plain arithmetic (a process without MLIR
computes it too, and finds the kernel in the cache by it):

- per Tensor parameter (`TensorSpec`): the dtype, the rank, which dims are
  static (annotated sizes, and dims named in `static=`), each stride's class
  ("0" broadcast or size 1, "1" unit, "?n" given at launch and a multiple of n),
  whether the pointer needs an element offset (not 16-byte aligned), and
  whether the array is passed as a static memref (every dim static, contiguous,
  aligned) instead of a pointer with sizes and strides;
- per scalar parameter its dtype; the constexpr values; the static dims' values;
- the block shape, the cluster shape of a kernel that runs in thread block clusters
  (`cluster=`), the index width (32 bits when every array's furthest element
  fits contract.INDEX_LIMIT with HEADROOM to spare) and which arrays overlap.

`roles(spec)` lists the kernel's arguments in order; the builder makes one
block argument per role and the launch one value per role, so both read the
same list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import astuple, dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np

from tile_mlir.contract import (
    INDEX_LIMIT,
    KERNEL_ARG_ALIGN,
    contiguous,
    divisibility,
    extent,
)
from tile_mlir.dtypes import DTYPES
from tile_mlir.lang.arrays import Described, describe
from tile_mlir.lang.errors import ArgumentError
from tile_mlir.lang.values import TensorType

HEADROOM = 1 << 24
"""Elements past an array's end that a program's index arithmetic may reach (a last
tile's end) and that a 32-bit index must still hold."""

NO_DEFAULT: Any = object()


# ------------------------------------------------------------------ the kernel's side


@dataclass(frozen=True)
class ParamInfo:
    """One parameter of a kernel function, from its annotation."""

    name: str
    kind: str  # "tensor", "scalar" or "constexpr"
    tensor: TensorType = field(default_factory=TensorType)
    dtype: str = ""  # a scalar's
    default: Any = NO_DEFAULT

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT


@dataclass(frozen=True)
class KernelInfo:
    """What the specialization needs to know of a kernel function."""

    name: str  # the gpu.func symbol
    qualname: str  # module.qualname, the kernel's identity
    params: tuple[ParamInfo, ...]
    threads: Any  # int, (x, y, z), or a callable of the constexprs and static dims
    static: tuple[str, ...] = ()
    index_bits: int | None = None  # None: 32 where the arrays allow
    cluster: Any = None  # CTAs per cluster: None, an int, (x, y, z) or a callable like threads
    occupancy: Any = None  # CTAs per SM to fit: None, an int, (int, spill bytes allowed) or
    # a callable like threads giving one
    open: bool = False  # **params: the parameters are its Specializations' (made by a caller)


# ------------------------------------------------------------------ specializations


@dataclass(frozen=True)
class TensorSpec:
    """A Tensor parameter as its kernel is compiled for it."""

    name: str
    dtype: str
    shape: tuple[int | None, ...]  # static sizes; None where given at launch
    dims: tuple[str | None, ...]  # the annotation's name of each dynamic dim
    strides: tuple[str, ...]  # "0", "1" or "?n" per dim (a number: static, where a
    # caller makes the specialization)
    offset: bool = False  # an element offset argument (the pointer is not aligned)
    memref: bool = False  # a static memref argument rather than a pointer
    # Pointer arguments to the array, its sizes, strides and offset shared (where a caller
    # makes the specialization): the body gets a tuple of views, each its own buffer to
    # tile-barriers and each promised noalias, for ops that write disjoint parts of the
    # array (RoPE's pairs' first and second elements) with no barrier between them.
    pointers: int = 1

    def __repr__(self) -> str:
        dims = ", ".join(str(s) if s is not None else (n or "?")
                         for s, n in zip(self.shape, self.dims, strict=True))
        form = "" if self.memref else f" strides({', '.join(self.strides)})"
        copies = f" x{self.pointers}" if self.pointers > 1 else ""
        return (f"{self.name}: {self.dtype}[{dims}]{form}{' +offset' if self.offset else ''}"
                f"{copies}")


@dataclass(frozen=True)
class ScalarSpec:
    name: str
    dtype: str

    def __repr__(self) -> str:
        return f"{self.name}: {self.dtype}"


@dataclass(frozen=True)
class Specialization:
    """Everything a kernel is compiled for (its IR is a function of it)."""

    kernel: str  # module.qualname
    params: tuple[TensorSpec | ScalarSpec, ...]  # the non-constexpr parameters, in order
    constexprs: tuple[tuple[str, Any], ...]
    static: tuple[tuple[str, int], ...]
    block: tuple[int, int, int]
    index_bits: int
    overlaps: tuple[tuple[str, str], ...] = ()  # arrays whose memory overlaps
    cluster: tuple[int, int, int] | None = None  # CTAs per thread block cluster
    occupancy: int | None = None  # CTAs an SM should fit (.minnctapersm), None: no request
    spill: int = 0  # bytes of spill stores the request may cost before it is dropped

    def __repr__(self) -> str:
        parts = [", ".join(map(repr, self.params))]
        if self.constexprs or self.static:
            parts.append(", ".join(f"{n}={v!r}" for n, v in (*self.constexprs, *self.static)))
        cluster = f", cluster {'x'.join(map(str, self.cluster))}" if self.cluster else ""
        fits = f", {self.occupancy} CTAs/SM" if self.occupancy else ""
        fits += f" (spill <= {self.spill} B)" if self.spill else ""
        parts.append(f"block {'x'.join(map(str, self.block))}{cluster}{fits}, "
                     f"i{self.index_bits}")
        if self.overlaps:
            parts.append("overlapping " + ", ".join(f"{a}~{b}" for a, b in self.overlaps))
        return f"<{self.kernel.rsplit('.', 1)[-1]}: {'; '.join(parts)}>"

    def key(self) -> str:
        """A canonical text of every field: the kernel cache's request names it."""
        return repr(astuple(self))

    @cached_property
    def roles(self) -> tuple[Role, ...]:
        return roles(self)

    def tensor(self, name: str) -> TensorSpec:
        for p in self.params:
            if isinstance(p, TensorSpec) and p.name == name:
                return p
        raise KeyError(name)


class Role(NamedTuple):
    """One kernel argument: an array ("array": its pointer or static memref; `dim` is the
    copy for a tensor of several pointers, -1 for the first), a dynamic size, a stride
    given at launch (with its divisibility), an element offset, or a scalar parameter.
    `param` is the position among Specialization.params."""

    kind: str
    param: int
    dim: int = -1
    divisibility: int = 1
    name: str = ""


def sizing(params: Sequence[TensorSpec | ScalarSpec | ParamInfo]) -> frozenset[str]:
    """The integer scalar parameters named like a Tensor parameter's dim: each gives that
    dim's size (the arrays are checked against it), so no size argument is added for it."""
    dims = {d for p in params if isinstance(p, TensorSpec) for d in p.dims if d} | \
        {d for p in params if isinstance(p, ParamInfo) for d in p.tensor.dims or ()
         if isinstance(d, str)}
    return frozenset(p.name for p in params if not isinstance(p, TensorSpec) and
                     p.name in dims and p.dtype and DTYPES[p.dtype].kind == "int")


def roles(spec: Specialization) -> tuple[Role, ...]:
    """The kernel's arguments in order: per tensor its array, the sizes of its dynamic dims
    (one per dim name, at its first use, unless an integer scalar parameter of that name
    gives it), its dynamic strides and its offset; per scalar parameter its value."""
    result: list[Role] = []
    named: set[str] = set(sizing(spec.params))
    for n, p in enumerate(spec.params):
        if isinstance(p, ScalarSpec):
            result.append(Role("scalar", n, name=p.name))
            continue
        result.append(Role("array", n, name=p.name))
        result.extend(Role("array", n, copy, name=f"{p.name}_{copy}")
                      for copy in range(1, p.pointers))
        if p.memref:
            continue
        for dim, (size, dim_name) in enumerate(zip(p.shape, p.dims, strict=True)):
            if size is None and (dim_name is None or dim_name not in named):
                result.append(Role("size", n, dim, name=dim_name or f"{p.name}_d{dim}"))
                named.add(dim_name or "")
        for dim, stride in enumerate(p.strides):
            if stride.startswith("?"):
                result.append(Role("stride", n, dim, int(stride[1:]), f"{p.name}_s{dim}"))
        if p.offset:
            result.append(Role("offset", n, name=f"{p.name}_offset"))
    return tuple(result)


# ------------------------------------------------------------------ from arguments


def stride_class(size: int, stride: int) -> str:
    if stride == 0 or size == 1:
        return "0"
    if stride == 1:
        return "1"
    return f"?{divisibility(stride)}"


def misalignment(d: Described) -> int:
    """Elements between the array's start and the 16-byte boundary below it."""
    if d.pointer is None:
        return 0
    return (d.pointer % KERNEL_ARG_ALIGN) // DTYPES[d.dtype].bytes


class _Binding:
    """The dims and type variables bound so far, and who bound them (for errors)."""

    def __init__(self) -> None:
        self.dims: dict[str, tuple[int, str]] = {}
        self.types: dict[str, tuple[str, str]] = {}

    def dim(self, name: str, size: int, where: str, dim: int) -> None:
        """dim `dim` of an array is `name`; dim -1: a scalar argument gives `name`."""
        if name not in self.dims:
            self.dims[name] = (size, where)
            return
        known, owner = self.dims[name]
        if known != size:
            what = f"{where} is {size}" if dim < 0 else f"{where}: dim {dim} ({name}) is {size}"
            raise ArgumentError(f"{what}, but {name} is {known} from {owner}")

    def dtype(self, variable: str, dtype: str, where: str) -> None:
        known, owner = self.types.setdefault(variable, (dtype, where))
        if known != dtype:
            raise ArgumentError(f"{where}: has dtype {dtype}, but {variable} is {known} "
                                f"from {owner}")


def _check_tensor(p: ParamInfo, d: Described, binding: _Binding, where: str) -> None:
    constraint = p.tensor
    if constraint.type_variable is not None:
        binding.dtype(constraint.type_variable, d.dtype, where)
    elif constraint.dtype is not None and constraint.dtype != d.dtype:
        raise ArgumentError(f"{where}: expected {constraint.dtype} elements, got {d.dtype}")
    if constraint.dims is None:
        return
    if len(constraint.dims) != len(d.shape):
        raise ArgumentError(f"{where}: expected {len(constraint.dims)} dims "
                            f"{constraint.dims}, got shape {d.shape}")
    for dim, (want, size) in enumerate(zip(constraint.dims, d.shape, strict=True)):
        if isinstance(want, int) and want != size:
            raise ArgumentError(f"{where}: dim {dim} must be {want}, got shape {d.shape}")
        if isinstance(want, str):
            binding.dim(want, size, where, dim)
    if d.pointer is not None and d.pointer % DTYPES[d.dtype].bytes:
        raise ArgumentError(f"{where}: the pointer {d.pointer:#x} is not aligned to its "
                            f"{DTYPES[d.dtype].bytes}-byte elements")


def tensor_spec(p: ParamInfo, d: Described, static: Mapping[str, int]) -> TensorSpec:
    """The TensorSpec of a (checked) array for parameter p."""
    dims = p.tensor.dims or (None,) * len(d.shape)
    shape = tuple(size if isinstance(want, int) or want in static else None
                  for want, size in zip(dims, d.shape, strict=True))
    names = tuple(want if isinstance(want, str) and want not in static else None
                  for want in dims)
    strides = tuple(stride_class(size, stride)
                    for size, stride in zip(d.shape, d.strides, strict=True))
    offset = misalignment(d) != 0
    memref = None not in shape and not offset and contiguous(d.shape, d.strides)
    return TensorSpec(p.name, d.dtype, shape, names, strides, offset, memref)


def check_scalar(p: ParamInfo, value: Any, where: str) -> None:
    kind = DTYPES[p.dtype].kind
    is_bool = isinstance(value, bool | np.bool_)
    if kind == "bool":
        ok = is_bool
    elif kind == "int":
        ok = isinstance(value, int | np.integer) and not is_bool
        if ok and not -(1 << (DTYPES[p.dtype].bits - 1)) <= int(value) < \
                (1 << (DTYPES[p.dtype].bits - 1)):
            raise ArgumentError(f"{where}: {value} does not fit {p.dtype}")
    else:
        ok = isinstance(value, int | float | np.integer | np.floating) and not is_bool
    if not ok:
        raise ArgumentError(f"{where}: expected a {p.dtype} scalar, got "
                            f"{type(value).__name__}")


_CONSTANTS = (int, float, bool, str, type(None))


def check_constexpr(value: Any, where: str) -> Any:
    """A constexpr's value, made canonical (lists become tuples); ArgumentError when it is
    not a number, string, None, or a tuple of them."""
    if isinstance(value, list | tuple):
        return tuple(check_constexpr(v, where) for v in value)
    if isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, _CONSTANTS):
        raise ArgumentError(f"{where}: a constexpr is an int, float, bool, str or a tuple of "
                            f"them, got {type(value).__name__}")
    return value


def _dims3(value: Any, what: str, name: str) -> tuple[int, int, int]:
    dims = (value,) if isinstance(value, int) else tuple(value)
    if not 1 <= len(dims) <= 3 or not all(isinstance(t, int) and not isinstance(t, bool)
                                         and t > 0 for t in dims):
        raise ArgumentError(f"{name}: {what} must be a positive int or (x, y, z), "
                            f"got {value!r}")
    x, y, z = (*dims, 1, 1)[:3]
    return x, y, z


def block_of(info: KernelInfo, values: Mapping[str, Any]) -> tuple[int, int, int]:
    threads = info.threads(dict(values)) if callable(info.threads) else info.threads
    return _dims3(threads, "threads", info.name)


def cluster_of(info: KernelInfo, values: Mapping[str, Any]) -> tuple[int, int, int] | None:
    """The CTAs per cluster of a kernel with `cluster=` (None: no clusters, or 1 CTA)."""
    cluster = info.cluster(dict(values)) if callable(info.cluster) else info.cluster
    if cluster is None:
        return None
    dims = _dims3(cluster, "cluster", info.name)
    return None if dims == (1, 1, 1) else dims


def occupancy_of(info: KernelInfo, values: Mapping[str, Any]) -> tuple[int | None, int]:
    """The CTAs per SM a kernel with `occupancy=` asks ptxas to fit (None: no request),
    and the bytes of spill stores the request may cost before it is dropped."""
    wanted = info.occupancy(dict(values)) if callable(info.occupancy) else info.occupancy
    if wanted is None:
        return None, 0
    ctas, spill = wanted if isinstance(wanted, tuple) and len(wanted) == 2 else (wanted, 0)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (ctas, spill)) or \
            not 1 <= ctas <= 32 or spill < 0:
        raise ArgumentError(f"@tl.kernel {info.name}: occupancy is None, the CTAs an SM "
                            "should fit (an int from 1 to 32), or those and the bytes of "
                            f"spill stores they may cost (ctas, bytes >= 0); got {wanted!r}")
    return ctas, spill


def index_bits(arrays: Sequence[Described]) -> int:
    """32 when every index into the arrays (with HEADROOM) fits INDEX_LIMIT and no stride
    is negative (32-bit offsets below a base may be widened unsigned), else 64."""
    for d in arrays:
        if any(s < 0 for s in d.strides):
            return 64
        reach = misalignment(d) + extent(d.shape, d.strides)
        numel = int(np.prod(d.shape, dtype=np.int64)) if d.shape else 1
        if max(reach, numel) + HEADROOM >= INDEX_LIMIT or \
                any(abs(s) >= INDEX_LIMIT for s in d.strides):
            return 64
    return 32


def byte_range(d: Described) -> tuple[int, int] | None:
    """[first, last + 1) bytes of an array's elements; None without an address or elements."""
    if d.pointer is None or 0 in d.shape:
        return None
    low = sum((size - 1) * stride for size, stride in zip(d.shape, d.strides, strict=True)
              if stride < 0)
    high = sum((size - 1) * stride for size, stride in zip(d.shape, d.strides, strict=True)
               if stride > 0)
    size = DTYPES[d.dtype].bytes
    return d.pointer + low * size, d.pointer + (high + 1) * size


def overlaps(arrays: Sequence[tuple[str, Described]]) -> tuple[tuple[str, str], ...]:
    """The pairs of arrays whose memory overlaps."""
    ranges = [(name, byte_range(d)) for name, d in arrays]
    pairs = []
    for i, (a, ra) in enumerate(ranges):
        for b, rb in ranges[i + 1:]:
            if ra is not None and rb is not None and ra[0] < rb[1] and rb[0] < ra[1]:
                pairs.append((a, b))
    return tuple(pairs)


@dataclass
class Bound:
    """A call's arguments checked against the kernel: its specialization, and the arrays and
    scalar values it launches with (by position in Specialization.params)."""

    spec: Specialization
    arrays: dict[int, Described]
    scalars: dict[int, Any]
    dims: dict[str, int]  # the dim names' sizes


def specialize(info: KernelInfo, values: Sequence[Any]) -> Bound:
    """Check the arguments (one per parameter, in order) and specialize the kernel on them.
    Errors name the argument."""
    binding = _Binding()
    arrays: dict[int, Described] = {}
    scalars: dict[int, Any] = {}
    constexprs: list[tuple[str, Any]] = []
    position = 0
    sizes = sizing(info.params)
    for p, value in zip(info.params, values, strict=True):
        where = f"argument '{p.name}'"
        if p.kind == "constexpr":
            constexprs.append((p.name, check_constexpr(value, where)))
            continue
        if p.kind == "scalar":
            check_scalar(p, value, where)
            scalars[position] = value
            if p.name in sizes:
                binding.dim(p.name, int(value), where, -1)
        else:
            found = describe(value, where)
            if found is None:
                raise ArgumentError(f"{where}: expected an array, got {type(value).__name__}")
            _check_tensor(p, found, binding, where)
            arrays[position] = found
        position += 1
    static = {name: binding.dims[name][0] for name in info.static}
    tensors = [p for p in info.params if p.kind != "constexpr"]
    params = tuple(tensor_spec(p, arrays[n], static) if p.kind == "tensor"
                   else ScalarSpec(p.name, p.dtype) for n, p in enumerate(tensors))
    bits = info.index_bits or index_bits(list(arrays.values()))
    known = {**dict(constexprs), **static}
    spec = Specialization(
        info.qualname, params, tuple(constexprs), tuple(static.items()),
        block_of(info, known), bits,
        overlaps([(tensors[n].name, d) for n, d in arrays.items()]), cluster_of(info, known),
        *occupancy_of(info, known))
    return Bound(spec, arrays, scalars, {name: size for name, (size, _) in binding.dims.items()})


def kernel_values(spec: Specialization, arrays: Mapping[int, Described],
                  scalars: Mapping[int, Any], pointers: Mapping[int, int] | None = None
                  ) -> list[Any]:
    """The kernel's argument values, one per role: a pointer (aligned down to 16 bytes, the
    misalignment going to the offset argument), sizes, strides, offsets and scalars.
    `pointers` replaces arrays' addresses (NumPy arrays' device copies)."""
    values: list[Any] = []
    for role in spec.roles:
        if role.kind == "scalar":
            values.append(scalars[role.param])
            continue
        d = arrays[role.param]
        if role.kind == "array":
            pointer = (pointers or {}).get(role.param, d.pointer) or 0
            values.append(pointer - misalignment(d) * DTYPES[d.dtype].bytes)
        elif role.kind == "size":
            values.append(d.shape[role.dim])
        elif role.kind == "stride":
            values.append(d.strides[role.dim])
        else:
            values.append(misalignment(d))
    return values
