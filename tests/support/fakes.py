"""Stand-ins for the CUDA driver and torch, so the null tier runs everything short of a
real launch: argument binding and packing, stream choice, context handling.

FakeDriver records each cuLaunchKernel with the parameter values read back from the
kernelParams array, as the driver would read them. FakeTorch mimics the few torch
attributes the runtime reads (dtype, shape, is_contiguous, get_device, data_ptr, the
current raw stream).
"""

from __future__ import annotations

import ctypes
import math
import types
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from cuda.bindings.driver import CUresult

from tile_mlir.runtime.arrays import SCALAR_CTYPES
from tile_mlir.runtime.spec import KernelSpec


@dataclass
class Launch:
    function: Any
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    stream: int
    values: list[Any]


@dataclass
class FakeDriver:
    spec: KernelSpec
    CUresult: Any = CUresult
    launches: list[Launch] = field(default_factory=list)
    fail_next: list[Any] = field(default_factory=list)  # results to return before success

    def cuLaunchKernel(self, f: Any, gx: int, gy: int, gz: int, bx: int, by: int,  # noqa: PLR0917 - the driver's signature
                       bz: int, shared: int, stream: int, params: int, extra: int
                       ) -> tuple[Any]:
        if self.fail_next:
            return (self.fail_next.pop(0),)
        n = len(self.spec.params)
        pointers = (ctypes.c_void_p * max(n, 1)).from_address(params)
        values = []
        for i, param in enumerate(self.spec.params):
            ctype = ctypes.c_uint64 if param.is_memref else SCALAR_CTYPES[param.dtype]
            values.append(ctype.from_address(pointers[i] or 0).value)
        self.launches.append(Launch(f, (gx, gy, gz), (bx, by, bz), int(stream), values))
        return (0,)


class FakeDtype:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"torch.{self.name}"


class FakeTensor:
    def __init__(self, shape: tuple[int, ...], dtype: FakeDtype, pointer: int,
                 device: int = 0, contiguous: bool = True):
        self.shape, self.dtype, self._pointer = shape, dtype, pointer
        self._device, self._contiguous = device, contiguous
        self.device = f"cuda:{device}" if device >= 0 else "cpu"

    @property
    def is_cuda(self) -> bool:
        return self._device >= 0

    def get_device(self) -> int:
        return self._device

    def is_contiguous(self) -> bool:
        return self._contiguous

    def stride(self) -> tuple[int, ...]:
        dense = _row_major(self.shape)
        return dense if self._contiguous else tuple(2 * s for s in dense)

    def data_ptr(self) -> int:
        return self._pointer


def fake_torch() -> types.ModuleType:
    """A module that passes for torch where the runtime looks (sys.modules['torch'])."""
    torch = types.ModuleType("torch")
    torch.Tensor = FakeTensor  # type: ignore[attr-defined]
    for name in ("float32", "float16", "bfloat16", "float64", "int32", "float8_e4m3fn"):
        setattr(torch, name, FakeDtype(name))
    torch.current = {0: 0x5000, 1: 0x5001}  # type: ignore[attr-defined]
    torch._C = types.SimpleNamespace(  # type: ignore[attr-defined]
        _cuda_getCurrentRawStream=lambda device: torch.current[device])

    def empty(shape: tuple[int, ...], dtype: FakeDtype, device: str) -> FakeTensor:
        return FakeTensor(tuple(shape), dtype, 0x9000, int(device.split(":")[1]))

    torch.empty = empty  # type: ignore[attr-defined]
    return torch


def _row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))


class LeanDevice(NamedTuple):
    """torch.device: hashed and compared by value in C (no Python call), as torch's."""

    type: str
    index: int  # type: ignore[assignment] # torch.device's name (tuple has a method of it)


class LeanTensor:
    """A CUDA tensor as the library's fast path sees torch's: dtype, shape, device are
    plain attributes (torch's are C getters, which no profiler counts as calls),
    data_ptr(), stride() and get_device() methods (one call each, as torch's C methods)."""

    is_cuda = True

    def __init__(self, shape: tuple[int, ...], dtype: FakeDtype, pointer: int,
                 strides: tuple[int, ...] | None = None, device: Any = None):
        self.shape, self.dtype, self.pointer = shape, dtype, pointer
        self.strides = strides if strides is not None else _row_major(shape)
        self.device = device

    def data_ptr(self) -> int:
        return self.pointer

    def stride(self) -> tuple[int, ...]:
        return self.strides

    def get_device(self) -> int:
        return 0

    def new_empty(self, shape: tuple[int, ...], dtype: FakeDtype | None = None) -> LeanTensor:
        return LeanTensor(tuple(shape), self.dtype if dtype is None else dtype,
                          self.pointer + (1 << 30), None, self.device)

    def is_contiguous(self) -> bool:
        return self.strides == _row_major(self.shape)

    def dim(self) -> int:
        return len(self.shape)


class FakeTensorGuards:
    """torch._C._dynamo.guards.TensorGuards as the library's inline cache uses it (made
    from tensors, with dynamo's keywords), over what torch's compares: `check(*tensors)`
    is true where each has the Python type, dtype, device index, shape, strides and
    layout (torch: the dispatch keys) of the tensor in its place, and none is passed
    twice; a count other than the tensors' is a TypeError, as torch's."""

    def __init__(self, *tensors: Any, dynamic_dims_sizes: Any = None,
                 dynamic_dims_strides: Any = None):
        assert dynamic_dims_sizes is None and dynamic_dims_strides is None
        self.tensors = [self._of(t) for t in tensors]

    @staticmethod
    def _of(tensor: Any) -> tuple[Any, ...]:
        return (type(tensor), tensor.dtype, tuple(tensor.shape), tuple(tensor.stride()),
                tensor.get_device(), getattr(tensor, "layout", None),
                getattr(tensor, "is_nested", False))

    def check(self, *tensors: Any) -> bool:
        if len(tensors) != len(self.tensors):
            raise TypeError("wrong length")
        if len({id(t) for t in tensors}) != len(tensors):
            return False
        for tensor, want in zip(tensors, self.tensors, strict=True):  # (no generator: the
            if type(tensor) is not want[0] or self._of(tensor) != want:  # profiler would
                return False  # count its steps as calls of the library's)
        return True


def guards_module() -> types.SimpleNamespace:
    """torch._C._dynamo with the guards the library's inline cache asks for."""
    return types.SimpleNamespace(guards=types.SimpleNamespace(TensorGuards=FakeTensorGuards))


def lean_torch() -> types.ModuleType:
    """A `torch` of LeanTensors: empty() hands out a fresh tensor at a new 256-byte aligned
    address (one call, as torch.empty's), the current raw stream is 0x5000."""
    torch = types.ModuleType("torch")
    torch.Tensor = LeanTensor  # type: ignore[attr-defined]
    for name in ("float32", "float16", "bfloat16", "int32", "int64", "bool", "float8_e4m3fn",
                 "float8_e5m2"):
        setattr(torch, name, FakeDtype(name))
    device = LeanDevice("cuda", 0)
    addresses = iter(range(1 << 40, 1 << 48, 1 << 20))

    def empty(shape: tuple[int, ...], dtype: FakeDtype, device: Any = device) -> LeanTensor:
        return LeanTensor(tuple(shape), dtype, next(addresses), None, device)

    def empty_like(like: LeanTensor, dtype: FakeDtype | None = None) -> LeanTensor:
        return empty(like.shape, like.dtype if dtype is None else dtype)

    torch.empty = empty  # type: ignore[attr-defined]
    torch.empty_like = empty_like  # type: ignore[attr-defined]
    torch.lean_device = device  # type: ignore[attr-defined]
    torch._C = types.SimpleNamespace(  # type: ignore[attr-defined]
        _cuda_getCurrentRawStream=lambda index: 0x5000, _dynamo=guards_module())
    return torch
