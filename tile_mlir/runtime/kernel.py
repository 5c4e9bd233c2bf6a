"""Loading cubins (or PTX) and launching their kernels on arrays.

No MLIR here: a kernel is a cubin plus its `KernelSpec`, which says how to
pack each argument. Memref arguments take NumPy arrays (copied to the device
and, when the kernel writes them, back), `DeviceBuffer`s, objects with
`__cuda_array_interface__` (CuPy, torch CUDA tensors) or raw device pointers
(ints); scalar arguments take Python numbers. Every argument is checked
against the spec before the launch, and a mismatch names the argument.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tile_mlir.dtypes import DTYPES
from tile_mlir.runtime import driver
from tile_mlir.runtime.driver import check, cuda
from tile_mlir.runtime.spec import KernelSpec, Param

_SCALAR_CTYPES: dict[str, type[Any]] = {
    "f64": ctypes.c_double, "f32": ctypes.c_float, "i64": ctypes.c_int64,
    "i32": ctypes.c_int32, "i16": ctypes.c_int16, "i8": ctypes.c_int8, "bool": ctypes.c_bool,
}


class ArgumentError(TypeError):
    """A kernel argument that does not fit the kernel's parameter."""


class DeviceBuffer:
    """A block of device memory holding a contiguous array (freed on close/GC)."""

    def __init__(self, shape: Sequence[int], dtype: np.dtype | str):
        driver.context()
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        self.ptr = int(check("cuMemAlloc", cuda().cuMemAlloc(max(self.nbytes, 1))))

    @staticmethod
    def from_array(array: np.ndarray) -> DeviceBuffer:
        host = np.ascontiguousarray(array)
        buffer = DeviceBuffer(host.shape, host.dtype)
        buffer.upload(host)
        return buffer

    def upload(self, array: np.ndarray) -> None:
        host = np.ascontiguousarray(array, dtype=self.dtype)
        if host.nbytes != self.nbytes:
            raise ValueError(f"upload of {host.nbytes} bytes into a {self.nbytes}-byte buffer")
        if self.nbytes:
            check("cuMemcpyHtoD", cuda().cuMemcpyHtoD(self.ptr, host.ctypes.data, self.nbytes))

    def numpy(self) -> np.ndarray:
        host = np.empty(self.shape, self.dtype)
        if self.nbytes:
            check("cuMemcpyDtoH", cuda().cuMemcpyDtoH(host.ctypes.data, self.ptr, self.nbytes))
        return host

    def close(self) -> None:
        if self.ptr:
            check("cuMemFree", cuda().cuMemFree(self.ptr))
            self.ptr = 0

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # at interpreter shutdown the driver may be gone
            self.close()

    def __enter__(self) -> DeviceBuffer:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


@dataclass
class _Packed:
    """ctypes storage for one launch's arguments and the void* array pointing at them."""

    values: list[Any]
    pointers: Any

    @staticmethod
    def of(values: list[Any]) -> _Packed:
        pointers = (ctypes.c_void_p * max(len(values), 1))(
            *[ctypes.addressof(v) for v in values]
        )
        return _Packed(values, pointers)

    @property
    def address(self) -> int:
        return ctypes.addressof(self.pointers)


def _validate(param: Param, arg: Any, position: int) -> None:
    """Check an argument against its parameter before anything touches the device."""
    where = f"argument {position} ({param.name})"
    if not param.is_memref:
        if param.dtype not in _SCALAR_CTYPES:
            raise ArgumentError(f"{where}: scalar type {param.dtype} is not supported")
        if not isinstance(arg, int | float | np.number) or isinstance(arg, bool) != (
                param.dtype == "bool"):
            raise ArgumentError(f"{where}: expected a {param.dtype} scalar, "
                                f"got {type(arg).__name__}")
        return
    if isinstance(arg, DeviceBuffer):
        _check_array(param, arg.shape, arg.dtype, where)
    elif (interface := getattr(arg, "__cuda_array_interface__", None)) is not None:
        dtype = np.dtype(interface["typestr"])
        _check_array(param, tuple(interface["shape"]), dtype, where)
        if interface.get("strides") not in (None, _contiguous_strides(interface, dtype)):
            raise ArgumentError(f"{where}: the kernel needs a contiguous array")
    elif isinstance(arg, np.ndarray):
        _check_array(param, arg.shape, arg.dtype, where)
    elif not isinstance(arg, int) or isinstance(arg, bool):
        raise ArgumentError(f"{where}: expected an array or a device pointer, "
                            f"got {type(arg).__name__}")


def _device_pointer(arg: Any) -> int | None:
    """The device address behind a validated memref argument, None for a host array."""
    if isinstance(arg, DeviceBuffer):
        return arg.ptr
    interface = getattr(arg, "__cuda_array_interface__", None)
    if interface is not None:
        return int(interface["data"][0])
    if isinstance(arg, np.ndarray):
        return None
    return int(arg)


def _contiguous_strides(interface: Mapping[str, Any], dtype: np.dtype) -> tuple[int, ...]:
    strides, running = [], dtype.itemsize
    for extent in reversed(interface["shape"]):
        strides.append(running)
        running *= extent
    return tuple(reversed(strides))


def _check_array(param: Param, shape: tuple[int, ...], dtype: np.dtype, where: str) -> None:
    expected = DTYPES[param.dtype].np_dtype()
    if dtype != expected:
        raise ArgumentError(f"{where}: expected {param.dtype} elements, got {dtype}")
    if tuple(shape) != param.shape:
        raise ArgumentError(f"{where}: expected shape {param.shape}, got {tuple(shape)}")


class Kernel:
    """A loaded kernel: call it with one argument per parameter."""

    def __init__(self, spec: KernelSpec, function: Any):
        self.spec = spec
        self.function = function

    def __repr__(self) -> str:
        params = ", ".join(f"{p.name}: {p.dtype}{list(p.shape) if p.is_memref else ''}"
                           for p in self.spec.params)
        return f"<Kernel {self.spec.name}({params})>"

    def _launch_dims(self, grid: Sequence[int] | None, block: Sequence[int] | None
                     ) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        g = tuple(grid) if grid is not None else self.spec.grid
        b = tuple(block) if block is not None else self.spec.block
        if g is None or b is None:
            missing = "grid" if g is None else "block"
            raise ArgumentError(f"{self.spec.name}: the kernel does not fix its {missing} size; "
                                f"pass {missing}=(x, y, z)")
        if self.spec.block is not None and b != self.spec.block:
            raise ArgumentError(f"{self.spec.name}: compiled for block {self.spec.block}, got {b}")
        g3, b3 = (*g, 1, 1)[:3], (*b, 1, 1)[:3]
        return (g3[0], g3[1], g3[2]), (b3[0], b3[1], b3[2])

    def __call__(self, *args: Any, grid: Sequence[int] | None = None,
                 block: Sequence[int] | None = None, stream: int = 0) -> None:
        spec = self.spec
        if len(args) != len(spec.params):
            raise ArgumentError(f"{spec.name} takes {len(spec.params)} arguments, got {len(args)}")
        dims = self._launch_dims(grid, block)
        for position, (param, arg) in enumerate(zip(spec.params, args, strict=True)):
            _validate(param, arg, position)
        driver.context()
        staged: list[tuple[np.ndarray, DeviceBuffer, Param]] = []
        try:
            values = [self._pack(p, a, i, staged)
                      for i, (p, a) in enumerate(zip(spec.params, args, strict=True))]
            packed = _Packed.of(values)
            (gx, gy, gz), (bx, by, bz) = dims
            check("cuLaunchKernel", cuda().cuLaunchKernel(
                self.function, gx, gy, gz, bx, by, bz, 0, stream, packed.address, 0))
            if staged:
                driver.synchronize()
                for host, buffer, param in staged:
                    if param.writes:
                        host[...] = buffer.numpy()
        finally:
            for _, buffer, _ in staged:
                buffer.close()

    @staticmethod
    def _pack(param: Param, arg: Any, position: int,
              staged: list[tuple[np.ndarray, DeviceBuffer, Param]]) -> Any:
        if not param.is_memref:
            return _SCALAR_CTYPES[param.dtype](arg)
        pointer = _device_pointer(arg)
        if pointer is None:
            buffer = DeviceBuffer.from_array(arg)
            staged.append((arg, buffer, param))
            pointer = buffer.ptr
        if pointer % param.align:
            raise ArgumentError(f"argument {position} ({param.name}): the pointer must be "
                                f"aligned to {param.align} bytes")
        return ctypes.c_uint64(pointer)


class LoadedModule:
    """A cubin, or PTX that the driver compiles for the device, loaded on the current device."""

    def __init__(self, image: bytes, specs: Mapping[str, KernelSpec], kind: str = "cubin"):
        driver.context()
        data = image + b"\0" if kind == "ptx" else image  # PTX is passed NUL-terminated
        self.handle = check("cuModuleLoadData", cuda().cuModuleLoadData(data))
        self.kernels: dict[str, Kernel] = {}
        for name, spec in specs.items():
            function = check("cuModuleGetFunction",
                             cuda().cuModuleGetFunction(self.handle, name.encode()))
            self.kernels[name] = Kernel(spec, function)

    def __getitem__(self, name: str) -> Kernel:
        return self.kernels[name]
