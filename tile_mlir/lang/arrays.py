"""What a launch argument is, as the specialization needs it. Imports no MLIR.

A kernel takes arrays of any strides and alignment (they become a pointer and
integer arguments, see spec.py), so unlike the runtime's binders this reads
every array's strides: torch tensors, CuPy arrays, anything with
`__cuda_array_interface__` or DLPack, NumPy arrays (host memory: copied in,
and out when written) and `ArrayDesc`, a description with no memory behind it
(for `signature`, `ir` and tests). torch and CuPy are never imported: they are
looked up in sys.modules, where they are if the caller could have made such an
array.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from tile_mlir.dtypes import DTYPES
from tile_mlir.lang.errors import ArgumentError

_BY_NUMPY = {d.numpy: name for name, d in DTYPES.items()}


@dataclass(frozen=True)
class ArrayDesc:
    """An array described by its dtype name, shape, strides in elements (None: row-major)
    and, optionally, its address. Without an address it specializes and prints kernels
    (16-byte aligned, overlapping nothing); with one, on `device`, it is also a launch
    argument: a view of device memory that no array object needs to exist for (the
    operator library's coalesced views)."""

    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None = None
    pointer: int | None = None
    device: int = 0

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"ArrayDesc: unknown dtype {self.dtype!r} "
                             f"(dtypes: {', '.join(DTYPES)})")
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))
        if self.strides is not None:
            if len(self.strides) != len(self.shape):
                raise ValueError(f"ArrayDesc: {len(self.strides)} strides for a "
                                 f"{len(self.shape)}-d shape")
            object.__setattr__(self, "strides", tuple(int(s) for s in self.strides))

    @staticmethod
    def of(array: Any) -> ArrayDesc:
        """The description of a real array (its dtype, shape, strides and address)."""
        found = describe(array, "array")
        if found is None:
            raise TypeError(f"not an array: {type(array).__name__}")
        return ArrayDesc(found.dtype, found.shape, found.strides, found.pointer)


@dataclass(frozen=True)
class Described:
    """A launch argument that is an array."""

    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    pointer: int | None  # the address of element 0 (None: a description without one)
    device: int | None  # CUDA ordinal; None for host memory and descriptions
    kind: str  # torch, cupy, cai, dlpack, numpy, desc
    obj: Any


def row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _dtype(numpy_name: str, where: str) -> str:
    name = _BY_NUMPY.get(numpy_name)
    if name is None:
        raise ArgumentError(f"{where}: element type {numpy_name} is not supported "
                            f"(dtypes: {', '.join(d.numpy for d in DTYPES.values())})")
    return name


def _elements(byte_strides: Any, itemsize: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    if byte_strides is None:
        return row_major(shape)
    return tuple(int(s) // itemsize for s in byte_strides)


def _torch(t: Any, where: str) -> Described:
    if not t.is_cuda:
        raise ArgumentError(f"{where}: a {t.device} tensor; kernels take CUDA tensors "
                            "(move it with .cuda()), or NumPy arrays to be copied")
    return Described(_dtype(str(t.dtype).removeprefix("torch."), where), tuple(t.shape),
                     tuple(t.stride()), int(t.data_ptr()), int(t.get_device()), "torch", t)


def _cupy(a: Any, where: str) -> Described:
    shape = tuple(a.shape)
    return Described(_dtype(a.dtype.name, where), shape,
                     _elements(a.strides, a.dtype.itemsize, shape), int(a.data.ptr),
                     int(a.device.id), "cupy", a)


def _numpy(a: np.ndarray, where: str) -> Described:
    # copied to a contiguous device buffer for the launch: described as that copy
    return Described(_dtype(a.dtype.name, where), a.shape, row_major(a.shape), None, None,
                     "numpy", a)


def _cai(obj: Any, where: str) -> Described:
    from tile_mlir.runtime import driver

    interface = obj.__cuda_array_interface__
    dtype = np.dtype(interface["typestr"])
    shape = tuple(int(s) for s in interface["shape"])
    pointer = int(interface["data"][0])
    device = driver.pointer_device(pointer) if pointer else 0
    if device is None:
        raise ArgumentError(f"{where}: its __cuda_array_interface__ points at host memory")
    return Described(_dtype(dtype.name, where), shape,
                     _elements(interface.get("strides"), dtype.itemsize, shape), pointer,
                     device, "cai", obj)


def _dlpack(obj: Any, where: str) -> Described:
    from tile_mlir.runtime import arrays as runtime_arrays

    device_type, device_id = obj.__dlpack_device__()
    if int(device_type) not in runtime_arrays._DL_CUDA_DEVICES:
        raise ArgumentError(f"{where}: a DLPack array on device type {int(device_type)}; "
                            "kernels take CUDA memory")
    capsule = obj.__dlpack__()
    tensor = runtime_arrays._DLTensor.from_address(
        runtime_arrays._capsule_pointer()(capsule, b"dltensor"))
    shape = tuple(int(tensor.shape[i]) for i in range(tensor.ndim))
    strides = tuple(int(tensor.strides[i]) for i in range(tensor.ndim)) \
        if tensor.strides else row_major(shape)
    code, bits = int(tensor.dtype.code), int(tensor.dtype.bits)
    numpy_name = runtime_arrays._DL_DTYPES.get((code, bits), f"dlpack type {code}/{bits}")
    pointer = int(tensor.data or 0) + int(tensor.byte_offset)
    return Described(_dtype(numpy_name, where), shape, strides, pointer, int(device_id),
                     "dlpack", obj)


def _desc(d: ArrayDesc, where: str) -> Described:
    return Described(d.dtype, d.shape, d.strides if d.strides is not None else
                     row_major(d.shape), d.pointer, d.device if d.pointer is not None
                     else None, "desc", d)


def describe(arg: Any, where: str) -> Described | None:
    """The array behind a launch argument, or None when it is not an array."""
    if isinstance(arg, ArrayDesc):
        return _desc(arg, where)
    if isinstance(arg, np.ndarray):
        return _numpy(arg, where)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(arg, torch.Tensor):
        return _torch(arg, where)
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(arg, cupy.ndarray):
        return _cupy(arg, where)
    if hasattr(arg, "__cuda_array_interface__"):
        return _cai(arg, where)
    if hasattr(arg, "__dlpack__") and hasattr(arg, "__dlpack_device__"):
        return _dlpack(arg, where)
    return None
