"""The operator library's only contact with the runtime: arrays, kernels, launches.

Everything the library needs from tile_mlir.runtime (and from torch, CuPy and
NumPy arrays) goes through here, so that the runtime can change behind one
small module:
- `describe(obj)`: what an argument is: a device array (torch, CuPy, any
  `__cuda_array_interface__`), a host array (NumPy), or not an array;
- `empty(...)`: an output of the kind and on the device of an input
  (tile_mlir.runtime.arrays.empty where the runtime has it); `from_host(...)`:
  a host array copied there (RoPE's cos/sin cache);
- `kernel(text, device)`: compile (tile_mlir.compile, which answers from the
  runtime's kernel cache where it has one) and load;
- `launch(...)`: on the caller's current stream (torch's or CuPy's), with
  kernel arguments given as device pointers and numbers;
- `cache_directory()`: where the autotuner keeps its choices (the kernel
  cache's directory).
Kernels take raw device pointers, because their array parameters are
pointers to views whose sizes and strides come as arguments (program.py).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from tile_mlir.dtypes import DTYPES, np_dtype

_BY_NUMPY_NAME = {d.numpy: name for name, d in DTYPES.items()}


class UnsupportedArrayError(TypeError):
    """An argument that is an array the library cannot take (a CPU tensor, a dtype)."""


@dataclass(frozen=True)
class ArrayRef:
    """A device or host array, as the library sees it."""

    obj: Any
    kind: str  # torch, cupy, cai (any __cuda_array_interface__), numpy
    dtype: str  # a tile_mlir.dtypes name
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    pointer: int  # device address of element 0 (0 for host arrays)
    device: int | None  # CUDA ordinal; None for host (NumPy) arrays

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


def _dtype_name(numpy_name: str, where: str) -> str:
    name = _BY_NUMPY_NAME.get(numpy_name)
    if name is None:
        raise UnsupportedArrayError(f"{where}: element type {numpy_name} is not supported")
    return name


def describe(obj: Any, where: str) -> ArrayRef | None:
    """The array behind an argument, or None when it is not an array (a number)."""
    if isinstance(obj, np.ndarray):
        return _numpy(obj, where)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return _torch(obj, where)
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(obj, cupy.ndarray):
        return _cupy(obj, where)
    if hasattr(obj, "__cuda_array_interface__"):
        return _cai(obj, where)
    return None


def _numpy(a: np.ndarray, where: str) -> ArrayRef:
    size = a.dtype.itemsize
    return ArrayRef(a, "numpy", _dtype_name(a.dtype.name, where), a.shape,
                    tuple(s // size for s in a.strides), 0, None)


def _torch(t: Any, where: str) -> ArrayRef | None:
    if not t.is_cuda and t.dim() == 0:
        return None  # a 0-d host tensor is a number, as torch takes it beside CUDA tensors
    if not t.is_cuda:
        raise UnsupportedArrayError(f"{where}: a {t.device} tensor; the operator library runs "
                                    "on CUDA tensors (move it with .cuda())")
    dtype = _dtype_name(str(t.dtype).removeprefix("torch."), where)
    return ArrayRef(t, "torch", dtype, tuple(t.shape), tuple(t.stride()), t.data_ptr(),
                    t.get_device())


def _cupy(a: Any, where: str) -> ArrayRef:
    size = a.dtype.itemsize
    return ArrayRef(a, "cupy", _dtype_name(a.dtype.name, where), tuple(a.shape),
                    tuple(s // size for s in a.strides), int(a.data.ptr), int(a.device.id))


def _cai(obj: Any, where: str) -> ArrayRef:
    interface = obj.__cuda_array_interface__
    dtype = np.dtype(interface["typestr"])
    shape = tuple(int(s) for s in interface["shape"])
    strides = interface.get("strides")
    elements = tuple(s // dtype.itemsize for s in strides) if strides else \
        tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape)))
    pointer = int(interface["data"][0])
    return ArrayRef(obj, "cai", _dtype_name(dtype.name, where), shape, elements, pointer,
                    _pointer_device(pointer))


def _pointer_device(pointer: int) -> int:
    """The device of a bare CUDA pointer (the interface does not say)."""
    from tile_mlir.runtime import driver

    query = getattr(driver, "pointer_device", None)
    return int(query(pointer)) if query is not None and pointer else 0


@cache
def _runtime_arrays() -> Any:
    """The runtime's array module where it has output allocation and streams (branch
    `runtime`), else None."""
    try:
        module = importlib.import_module("tile_mlir.runtime.arrays")
    except ImportError:
        return None
    return module if hasattr(module, "empty") and hasattr(module, "current_stream") else None


def empty(shape: Sequence[int], dtype: str, like: ArrayRef) -> Any:
    """An uninitialized output of the kind and on the device of `like` (the runtime's
    tile_mlir.runtime.arrays.empty where there is one)."""
    arrays = _runtime_arrays()
    if arrays is not None and like.kind in ("torch", "cupy", "numpy"):
        return arrays.empty(tuple(shape), dtype, like.obj, like.device or 0)
    if like.kind == "numpy":
        return np.empty(tuple(shape), np_dtype(DTYPES[dtype].numpy))
    if like.kind == "torch":
        torch = sys.modules["torch"]
        return torch.empty(tuple(shape), dtype=getattr(torch, DTYPES[dtype].numpy),
                           device=like.obj.device)
    if like.kind == "cupy":
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(like.device):
            return cupy.empty(tuple(shape), dtype=np_dtype(DTYPES[dtype].numpy))
    from tile_mlir.runtime import DeviceBuffer

    return DeviceBuffer(tuple(shape), np_dtype(DTYPES[dtype].numpy))


def empty_torch(shape: Sequence[int], dtype: str, device: Any) -> Any:
    """An uninitialized torch tensor on a CUDA device (the generators' default output)."""
    torch = importlib.import_module("torch")
    return torch.empty(tuple(shape), dtype=getattr(torch, DTYPES[dtype].numpy), device=device)


_CARRIERS = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}


def from_host(array: np.ndarray, like: ArrayRef) -> Any:
    """A copy of a host array of the kind and on the device of `like` (a NumPy array
    stays as it is); bit for bit, whatever the element type (bf16 too)."""
    if like.kind == "numpy":
        return array
    array = np.ascontiguousarray(array)
    if like.kind == "torch":
        torch = sys.modules["torch"]
        carrier = torch.from_numpy(array.view(_CARRIERS[array.dtype.itemsize]))
        return carrier.to(like.obj.device).view(getattr(torch, array.dtype.name))
    if like.kind == "cupy":
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(like.device):
            return cupy.asarray(array)
    from tile_mlir.runtime import DeviceBuffer

    return DeviceBuffer.from_array(array, like.device or 0)


# ------------------------------------------------------------------ kernels


@cache
def _kernel(text: str, device: int) -> Any:
    import tile_mlir
    from tile_mlir.ops.program import KERNEL

    return tile_mlir.compile(text).kernel(KERNEL, device)


def kernel(text: str, device: int) -> Any:
    """The kernel of a tile program, compiled (or from the kernel cache) and loaded."""
    return _kernel(text, device)


def stream(kind: str, device: int) -> int:
    """The caller's current stream: torch's or CuPy's for their arrays, else the legacy
    default stream (as the runtime's arrays.current_stream decides, where there is one)."""
    arrays = _runtime_arrays()
    if arrays is not None:
        return int(arrays.current_stream([kind], device)())
    if kind == "torch":
        torch = sys.modules["torch"]
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        return int(raw(device)) if raw is not None else \
            int(torch.cuda.current_stream(device).cuda_stream)
    if kind == "cupy":
        return int(sys.modules["cupy"].cuda.get_current_stream().ptr)
    return 0


def launch(kernel_: Any, args: Sequence[Any], grid: int, threads: int, stream_: int) -> None:
    kernel_(*args, grid=(grid, 1, 1), block=(threads, 1, 1), stream=stream_)


class HostStaging:
    """NumPy arguments: copied to device buffers for the launch, the output back."""

    def __init__(self) -> None:
        self.buffers: list[Any] = []

    def upload(self, array: np.ndarray) -> int:
        from tile_mlir.runtime import DeviceBuffer

        buffer = DeviceBuffer.from_array(np.ascontiguousarray(array))
        self.buffers.append(buffer)
        return int(buffer.ptr)

    def allocate(self, shape: Sequence[int], dtype: str) -> Any:
        from tile_mlir.runtime import DeviceBuffer

        buffer = DeviceBuffer(tuple(shape), np_dtype(DTYPES[dtype].numpy))
        self.buffers.append(buffer)
        return buffer

    def close(self) -> None:
        for buffer in self.buffers:
            buffer.close()
        self.buffers.clear()


def cache_directory() -> Path:
    """The kernel cache's directory (the runtime's, where it has one; else the same
    default: $TILE_MLIR_CACHE_DIR, or $XDG_CACHE_HOME/tile-mlir, or ~/.cache/tile-mlir)."""
    try:
        kernel_cache = importlib.import_module("tile_mlir.runtime.cache")
        return Path(kernel_cache.directory())
    except ImportError:
        explicit = os.environ.get("TILE_MLIR_CACHE_DIR")
        if explicit:
            return Path(explicit)
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base) / "tile-mlir"
