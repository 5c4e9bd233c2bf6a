"""Arrays as kernel arguments: what each kind of array is, checked against a parameter.

A memref parameter takes a torch tensor, a CuPy array, a DeviceBuffer, any
object with `__cuda_array_interface__` or DLPack (`__dlpack__` and
`__dlpack_device__`), a device pointer (an int or a cuda-python CUdeviceptr),
or a NumPy array (host memory, which the kernel copies in and out). Every
array is checked up front: device, element type, shape, contiguity and the
alignment the kernel's vector loads need; a mismatch raises ArgumentError
naming the argument, so a strided or misaligned view never runs (the kernels
index memory as dense row-major arrays and would read the wrong elements).

A *binder* is made once per parameter and argument type (see Kernel): a
function from an argument to its device address that checks it on the way.
The torch binder is the hot path of the op library and does its checks with
a handful of attribute reads; the others build an ArrayInfo and check that.

torch and CuPy are never imported here: they are looked up in sys.modules,
where they are if and only if the caller could have made such an array.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tile_mlir.contract import contiguous
from tile_mlir.dtypes import DTYPES, np_dtype
from tile_mlir.runtime import driver
from tile_mlir.runtime.memory import DeviceBuffer
from tile_mlir.runtime.spec import Param

Binder = Callable[[Any], Any]

SCALAR_CTYPES: dict[str, type[Any]] = {
    "f64": ctypes.c_double, "f32": ctypes.c_float, "i64": ctypes.c_int64,
    "i32": ctypes.c_int32, "i16": ctypes.c_int16, "i8": ctypes.c_int8, "bool": ctypes.c_bool,
}


PARAM_LETTERS: dict[str, str] = {
    "ptr": "P", "f64": "d", "f32": "f", "i64": "q", "i32": "i", "i16": "h", "i8": "b", "bool": "?",
}
"""How the compiled launcher (_launch.c) packs each kind of kernel parameter."""


class ArgumentError(TypeError):
    """A kernel argument that does not fit the kernel's parameter."""


@dataclass(frozen=True)
class ArrayInfo:
    """What the checks need to know about a device array."""

    dtype: str  # NumPy's name for the element type (float32, bfloat16, float8_e4m3fn...)
    shape: tuple[int, ...]
    contiguous: bool  # dense row-major
    device: int | None  # CUDA device ordinal; None for host memory
    pointer: int
    # in elements; None where the producer gives none (row-major). The operator library
    # takes any strides (its kernels index views); the checks above only need `contiguous`
    strides: tuple[int, ...] | None = field(default=None, compare=False)


def check(param: Param, info: ArrayInfo, where: str, device: int) -> int:
    """The array's device address, or ArgumentError saying what does not fit."""
    if info.device is None:
        raise ArgumentError(f"{where}: the array is in host memory; the kernel needs device "
                            "memory (move it to the GPU, or pass a NumPy array to have it "
                            "copied in and out)")
    if info.device != device:
        raise ArgumentError(f"{where}: the array is on cuda:{info.device}, the kernel is "
                            f"loaded on cuda:{device}")
    if info.dtype != DTYPES[param.dtype].numpy:
        raise ArgumentError(f"{where}: expected {param.dtype} elements, got {info.dtype}")
    if info.shape != param.shape:
        raise ArgumentError(f"{where}: expected shape {param.shape}, got {info.shape}")
    if not info.contiguous:
        raise ArgumentError(f"{where}: the kernel needs a contiguous (dense row-major) array, "
                            "got a strided view; pass a contiguous copy")
    if info.pointer % param.align:
        raise ArgumentError(f"{where}: the data pointer {info.pointer:#x} is not aligned to "
                            f"{param.align} bytes, as the kernel's vector accesses need "
                            "(a view at an offset?); pass an aligned copy")
    return info.pointer


def _row_major(shape: Sequence[int], strides: Sequence[int], itemsize: int) -> bool:
    """Whether byte `strides` describe a dense row-major array (extent-1 axes aside)."""
    if 0 in shape:
        return True
    if any(extent != 1 and stride % itemsize for extent, stride in zip(shape, strides,
                                                                        strict=True)):
        return False
    return contiguous(shape, [stride // itemsize for stride in strides])


# ------------------------------------------------------------ array kinds


def kind_of(arg: Any) -> str:
    """torch, cupy, numpy, buffer, cai, dlpack, pointer, or unknown."""
    if isinstance(arg, np.ndarray):
        return "numpy"
    torch, cupy = sys.modules.get("torch"), sys.modules.get("cupy")
    if torch is not None and isinstance(arg, torch.Tensor):
        return "torch"
    if cupy is not None and isinstance(arg, cupy.ndarray):
        return "cupy"
    if isinstance(arg, DeviceBuffer):
        return "buffer"
    if hasattr(arg, "__cuda_array_interface__"):
        return "cai"
    if hasattr(arg, "__dlpack__") and hasattr(arg, "__dlpack_device__"):
        return "dlpack"
    if (isinstance(arg, int) and not isinstance(arg, bool)) or \
            type(arg).__name__ == "CUdeviceptr":
        return "pointer"
    return "unknown"


def torch_info(t: Any) -> ArrayInfo:
    return ArrayInfo(str(t.dtype).removeprefix("torch."), tuple(t.shape), t.is_contiguous(),
                     t.get_device() if t.is_cuda else None, t.data_ptr(), tuple(t.stride()))


def cupy_info(a: Any) -> ArrayInfo:
    return ArrayInfo(a.dtype.name, tuple(a.shape), bool(a.flags.c_contiguous), a.device.id,
                     a.data.ptr, tuple(s // a.dtype.itemsize for s in a.strides))


def buffer_info(b: DeviceBuffer) -> ArrayInfo:
    return ArrayInfo(b.dtype.name, b.shape, True, b.device, b.ptr)


class InterfaceError(ValueError):
    """An array's `__cuda_array_interface__` or DLPack export that does not describe one
    the library can read (the message reads after "argument 'x' ")."""


def _ints(value: Any) -> tuple[int, ...] | None:
    """A tuple of Python or NumPy ints (not bools), or None."""
    if not isinstance(value, tuple | list) or any(
            isinstance(v, bool | np.bool_) or not isinstance(v, int | np.integer) for v in value):
        return None
    return tuple(int(v) for v in value)


def _interface(arg: Any) -> tuple[np.dtype[Any], tuple[int, ...], tuple[int, ...] | None, int]:
    """(dtype, shape, byte strides or None, pointer) of a `__cuda_array_interface__`,
    every field checked (a producer's mistake or a hostile object is an InterfaceError,
    not a KeyError from inside, nor a silently wrong view)."""
    cai = arg.__cuda_array_interface__
    where = "has a __cuda_array_interface__"
    if not isinstance(cai, dict):
        raise InterfaceError(f"{where} that is not a dict ({type(cai).__name__})")
    missing = [k for k in ("shape", "typestr", "data") if k not in cai]
    if missing:
        raise InterfaceError(f"{where} without {', '.join(repr(k) for k in missing)}")
    try:
        dtype = np.dtype(cai["typestr"])
    except (TypeError, ValueError):
        raise InterfaceError(f"{where} whose typestr {cai['typestr']!r} is not a type") from None
    if dtype.byteorder == ">" or (dtype.byteorder == "=" and sys.byteorder == "big"):
        raise InterfaceError(f"{where} of big-endian elements ({cai['typestr']!r})")
    shape = _ints(cai["shape"])
    if shape is None or any(s < 0 for s in shape):
        raise InterfaceError(f"{where} whose shape {cai['shape']!r} is not a tuple of sizes")
    data = cai["data"]
    pointer = _ints(data[:1]) if isinstance(data, tuple | list) and len(data) == 2 else None
    if not pointer or pointer[0] < 0:
        raise InterfaceError(f"{where} whose data {data!r} is not (pointer, read_only)")
    if cai.get("mask") is not None:
        raise InterfaceError(f"{where} with a mask: masked arrays are not supported")
    return dtype, shape, _byte_strides(cai.get("strides"), shape, dtype.itemsize), pointer[0]


def _byte_strides(given: Any, shape: tuple[int, ...], itemsize: int
                  ) -> tuple[int, ...] | None:
    """An interface's strides: None (row-major), or one byte stride per dim, each whole
    elements (where the dim has more than one)."""
    where = "has a __cuda_array_interface__ whose strides"
    if given is None:
        return None
    strides = _ints(given)
    if strides is None or len(strides) != len(shape):
        raise InterfaceError(f"{where} {given!r} are not one byte stride per dim of shape "
                             f"{shape}")
    if any(extent != 1 and stride % itemsize
           for extent, stride in zip(shape, strides, strict=True)):
        raise InterfaceError(f"{where} {strides} are not multiples of its {itemsize}-byte "
                             "elements")
    return strides


def cai_info(arg: Any) -> ArrayInfo:
    """From `__cuda_array_interface__` (which has no device: the driver is asked)."""
    dtype, shape, strides, pointer = _interface(arg)
    contiguous = strides is None or _row_major(shape, strides, dtype.itemsize)
    elements = tuple(s // dtype.itemsize for s in strides) if strides else None
    return ArrayInfo(dtype.name, shape, contiguous, driver.pointer_device(pointer), pointer,
                     elements)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    """DLPack's DLTensor, the head of the DLManagedTensor a "dltensor" capsule holds."""

    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DL_CUDA_DEVICES = (2, 13)  # kDLCUDA, kDLCUDAManaged
_DL_DTYPES = {  # (type code, bits) -> NumPy's name
    (2, 64): "float64", (2, 32): "float32", (2, 16): "float16", (4, 16): "bfloat16",
    (10, 8): "float8_e4m3fn", (12, 8): "float8_e5m2", (0, 64): "int64", (0, 32): "int32",
    (0, 16): "int16", (0, 8): "int8", (6, 8): "bool", (1, 8): "uint8",
}


@functools.cache
def _capsule_pointer() -> Any:
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get


def dlpack_info(arg: Any) -> ArrayInfo:
    """From a DLPack export. The capsule is read, not consumed: its destructor gives the
    tensor back to the producer, while the caller's `arg` keeps the memory alive."""
    device = arg.__dlpack_device__()
    pair = _ints(device)
    if pair is None or len(pair) != 2:
        raise InterfaceError(f"has a __dlpack_device__() of {device!r}, not (device_type, "
                             "device_id)")
    device_type, device_id = pair
    capsule = arg.__dlpack__()
    try:
        address = _capsule_pointer()(capsule, b"dltensor")
    except (ValueError, TypeError):
        raise InterfaceError(f"has a __dlpack__() that returned {type(capsule).__name__!r}, "
                             "not an unconsumed 'dltensor' capsule") from None
    tensor = _DLTensor.from_address(address)
    shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    if any(s < 0 for s in shape):
        raise InterfaceError(f"has a DLPack tensor of shape {shape}")
    code, bits = tensor.dtype.code, tensor.dtype.bits
    itemsize = max(bits // 8, 1)
    contiguous = not tensor.strides or _row_major(
        shape, [tensor.strides[i] * itemsize for i in range(tensor.ndim)], itemsize)
    dtype = _DL_DTYPES.get((code, bits), f"dlpack type {code}/{bits}x{tensor.dtype.lanes}")
    on_gpu = int(device_type) in _DL_CUDA_DEVICES
    pointer = (tensor.data or 0) + tensor.byte_offset
    strides = tuple(int(tensor.strides[i]) for i in range(tensor.ndim)) if tensor.strides \
        else None
    return ArrayInfo(dtype, shape, contiguous, int(device_id) if on_gpu else None, pointer,
                     strides)


# ------------------------------------------------------------------ binders


def _torch_binder(param: Param, where: str, device: int) -> Binder:
    """The op library's hot path: six attribute reads and a comparison or two."""
    dtype = getattr(sys.modules["torch"], DTYPES[param.dtype].numpy)
    shape, align = param.shape, param.align

    def bind(t: Any) -> int:
        if t.dtype is dtype and t.get_device() == device and t.shape == shape and \
                t.is_contiguous():
            pointer: int = t.data_ptr()
            if not pointer % align:
                return pointer
        return check(param, torch_info(t), where, device)

    return bind


def _cupy_binder(param: Param, where: str, device: int) -> Binder:
    """CuPy's fast path, as torch's: attribute reads, the full check only on a mismatch."""
    dtype = np_dtype(DTYPES[param.dtype].numpy)
    shape, align = param.shape, param.align

    def bind(a: Any) -> int:
        if a.dtype == dtype and a.shape == shape and a.flags.c_contiguous and \
                a.device.id == device:
            pointer: int = a.data.ptr
            if not pointer % align:
                return pointer
        return check(param, cupy_info(a), where, device)

    return bind


def _info_binder(info: Callable[[Any], ArrayInfo]) -> Callable[[Param, str, int], Binder]:
    def factory(param: Param, where: str, device: int) -> Binder:
        def bind(arg: Any) -> int:
            try:
                described = info(arg)
            except InterfaceError as e:
                raise ArgumentError(f"{where}: the array {e}") from None
            return check(param, described, where, device)

        return bind

    return factory


def _pointer_binder(param: Param, where: str, device: int) -> Binder:
    """A bare address says nothing about its type or shape; only alignment is checked."""
    def bind(arg: Any) -> int:
        pointer = int(arg)
        if pointer % param.align:
            raise ArgumentError(f"{where}: the pointer {pointer:#x} must be aligned to "
                                f"{param.align} bytes")
        return pointer

    return bind


def _host_binder(param: Param, where: str, device: int) -> Binder:
    """Checks a NumPy array; the kernel stages it through device memory."""
    expected = DTYPES[param.dtype].np_dtype()

    def bind(arg: np.ndarray) -> np.ndarray:
        if arg.dtype != expected:
            raise ArgumentError(f"{where}: expected {param.dtype} elements, got {arg.dtype}")
        if arg.shape != param.shape:
            raise ArgumentError(f"{where}: expected shape {param.shape}, got {arg.shape}")
        return arg

    return bind


_FACTORIES: dict[str, Callable[[Param, str, int], Binder]] = {
    "torch": _torch_binder,
    "cupy": _cupy_binder,
    "buffer": _info_binder(buffer_info),
    "cai": _info_binder(cai_info),
    "dlpack": _info_binder(dlpack_info),
    "pointer": _pointer_binder,
    "numpy": _host_binder,
}


def _scalar_binder(param: Param, where: str) -> Binder:
    if param.dtype not in SCALAR_CTYPES:
        raise ArgumentError(f"{where}: scalar type {param.dtype} is not supported")
    kind = DTYPES[param.dtype].kind
    accepted: tuple[type, ...] = {"bool": (bool, np.bool_), "int": (int, np.integer)}.get(
        kind, (int, float, np.number))

    def bind(value: Any) -> Any:
        if isinstance(value, accepted) and (kind == "bool") == isinstance(value, bool | np.bool_):
            return value
        raise ArgumentError(f"{where}: expected a {param.dtype} scalar, "
                            f"got {type(value).__name__}")

    return bind


def binder(param: Param, position: int, sample: Any, device: int) -> tuple[str, Binder]:
    """(kind, binder) for arguments of `sample`'s type passed for `param`."""
    where = f"argument {position} ({param.name})"
    if not param.is_memref:
        return "scalar", _scalar_binder(param, where)
    kind = kind_of(sample)
    factory = _FACTORIES.get(kind)
    if factory is None:
        raise ArgumentError(f"{where}: expected an array or a device pointer, "
                            f"got {type(sample).__name__}")
    return kind, factory(param, where, device)


# ------------------------------------------------------------------ streams


def stream_handle(stream: Any) -> int:
    """The CUstream address of a stream given as an int, a cuda-python CUstream, a torch
    or CuPy stream, or any object with `__cuda_stream__`."""
    if isinstance(stream, int):
        return stream
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    for attribute in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        if hasattr(stream, attribute):
            return int(getattr(stream, attribute))
    return int(stream)


def _zero() -> int:
    return 0


def current_stream(kinds: Iterable[str], device: int) -> Callable[[], int]:
    """The caller's current stream, read at each launch: torch's for torch tensors, CuPy's
    for CuPy arrays, else the legacy default stream (0)."""
    kinds = set(kinds)
    if "torch" in kinds:
        torch = sys.modules["torch"]
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # a bare int, no Stream
        if raw is not None:
            return functools.partial(raw, device)
        return lambda: int(torch.cuda.current_stream(device).cuda_stream)
    if "cupy" in kinds:
        cupy = sys.modules["cupy"]
        return lambda: int(cupy.cuda.get_current_stream().ptr)
    return _zero


# ------------------------------------------------------------------ outputs


def empty(shape: Sequence[int], dtype: str, like: Any = None, device: int = 0) -> Any:
    """An uninitialized array for a kernel output, of the same kind and on the same device
    as `like`: a torch tensor for torch, CuPy for CuPy, NumPy for NumPy (or no `like`),
    else a DeviceBuffer."""
    kind = "numpy" if like is None else kind_of(like)
    name = DTYPES[dtype].numpy
    shape = tuple(shape)
    if kind == "torch":
        torch = sys.modules["torch"]
        return torch.empty(shape, dtype=getattr(torch, name), device=like.device)
    if kind == "cupy":
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(like.device.id):
            return cupy.empty(shape, dtype=np_dtype(name))
    if kind == "numpy":
        return np.empty(shape, np_dtype(name))
    if kind == "buffer":
        device = like.device
    return DeviceBuffer(shape, np_dtype(name), device)
