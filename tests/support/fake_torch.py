"""Just enough of torch for the null tier to drive the library's torch paths (the fast
path, output allocation, streams) with tensors that live on the pretend device."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from support.emulated import Device, EmuArray
from support.fakes import FakeDtype as Dtype
from support.fakes import guards_module
from tile_mlir.dtypes import DTYPES


class CudaDevice:
    type = "cuda"
    index = 0


class Tensor:
    """A CUDA tensor of the pretend device."""

    is_cuda = True
    device = CudaDevice()

    def __init__(self, array: EmuArray, dtypes: dict[str, Dtype]):
        self.array = array
        self.dtype = dtypes[DTYPES[array.dtype].numpy]

    @property
    def shape(self) -> tuple[int, ...]:
        return self.array.shape

    def stride(self) -> tuple[int, ...]:
        return self.array.strides

    def data_ptr(self) -> int:
        return self.array.pointer

    def get_device(self) -> int:
        return 0

    def element_size(self) -> int:
        return DTYPES[self.array.dtype].bytes

    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def is_contiguous(self) -> bool:
        expected = tuple(int(np.prod(self.shape[i + 1:], dtype=np.int64))
                         for i in range(len(self.shape)))
        return all(s == e for s, e, d in zip(self.stride(), expected, self.shape, strict=True)
                   if d != 1)

    def dim(self) -> int:
        return len(self.shape)

    def numpy(self) -> np.ndarray:
        return self.array.numpy()


class HostScalar(Tensor):
    """A 0-d CPU tensor: torch takes it as a number next to CUDA tensors."""

    is_cuda = False
    ndim = 0

    def __init__(self, value: float, dtype: Dtype):  # no array behind it: no super()
        self.value, self.dtype = value, dtype

    def dim(self) -> int:
        return 0

    def item(self) -> float:
        return self.value

    def cpu(self) -> HostScalar:
        return self

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self.value, self.dtype.name)


def module(device: Device) -> types.ModuleType:
    """A `torch` module whose tensors live in `device`."""
    torch = types.ModuleType("torch")
    dtypes = {d.numpy: Dtype(d.numpy) for d in DTYPES.values()}
    by_dtype = {id(v): k for k, v in dtypes.items()}
    for name, dtype in dtypes.items():
        setattr(torch, name, dtype)
    torch.Tensor = Tensor  # type: ignore[attr-defined]

    def empty(shape: Sequence[int], dtype: Dtype, device: Any = None) -> Tensor:
        name = next(n for n, d in DTYPES.items() if d.numpy == by_dtype[id(dtype)])
        return Tensor(device_.empty(tuple(shape), name), dtypes)

    def full(shape: Sequence[int], value: bool | int | float, dtype: Dtype,
             device: Any = None) -> Tensor:
        made = empty(shape, dtype)
        made.array.buffer.array[:] = value
        return made

    def empty_like(like: Tensor, dtype: Dtype | None = None) -> Tensor:
        return empty(like.shape, like.dtype if dtype is None else dtype)

    def tensor(values: np.ndarray, dtype: str | None = None, offset: int = 0) -> Tensor:
        return Tensor(device_.array(values, dtype, offset), dtypes)

    device_ = device
    torch.empty = empty  # type: ignore[attr-defined]
    torch.empty_like = empty_like  # type: ignore[attr-defined]
    torch.full = full  # type: ignore[attr-defined]
    torch.device = lambda kind, index=0: CudaDevice()  # type: ignore[attr-defined]
    torch.tensor = tensor  # type: ignore[attr-defined]
    torch._C = types.SimpleNamespace(  # type: ignore[attr-defined]
        _cuda_getCurrentRawStream=lambda device: 0, _dynamo=guards_module())
    return torch


def installed(device: Device, monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    """The stand-in torch as `sys.modules["torch"]` for one test (a fixture's body): the
    plans' launchers allocate a torch call's outputs with its `empty`, so results of
    calls on its tensors are its tensors. The plan cache is cleared on both sides: a
    plan's kernels are bound to one test's pretend device."""
    from tile_mlir.ops import entry

    stand_in = module(device)
    monkeypatch.setitem(sys.modules, "torch", stand_in)
    empty = stand_in.empty  # torch's Tensor.new_empty: the dtype and device of `self`
    monkeypatch.setattr(Tensor, "new_empty", lambda self, shape, dtype=None: empty(
        shape, self.dtype if dtype is None else dtype), raising=False)
    entry.clear()
    yield stand_in
    entry.clear()
