"""Just enough of CuPy for the null tier to drive the library's CuPy path (keys, the
plan's allocations with cupy.empty under cupy.cuda.Device, CuPy's current stream) with
arrays that live on the pretend device."""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from support.emulated import Device, EmuArray
from tile_mlir.dtypes import DTYPES


class _Memory:
    def __init__(self, pointer: int):
        self.ptr = pointer


class ndarray:  # CuPy's name
    """A CuPy array of the pretend device: byte strides, `.data.ptr`, `.device.id`."""

    def __init__(self, array: EmuArray):
        self.array = array
        self.dtype = DTYPES[array.dtype].np_dtype()
        self.shape = array.shape
        self.strides = tuple(s * self.dtype.itemsize for s in array.strides)
        self.data = _Memory(array.pointer)
        self.device = types.SimpleNamespace(id=0)
        dense = tuple(int(np.prod(self.shape[i + 1:], dtype=np.int64))
                      for i in range(len(self.shape)))
        self.flags = types.SimpleNamespace(c_contiguous=array.strides == dense)

    def get(self) -> np.ndarray:
        return self.array.numpy()

    def view_of(self, shape: Sequence[int], strides: Sequence[int], offset: int = 0) -> ndarray:
        return ndarray(self.array.view(shape, strides, offset))


def module(device: Device) -> types.ModuleType:
    """A `cupy` module whose arrays live in `device`; `streams` records the current
    streams read."""
    cupy = types.ModuleType("cupy")
    cupy.ndarray = ndarray  # type: ignore[attr-defined]
    by_numpy = {d.numpy: name for name, d in DTYPES.items()}
    reads: list[int] = []

    class _Stream:
        @property
        def ptr(self) -> int:
            reads.append(0x7000)
            return 0x7000

    @contextlib.contextmanager
    def on_device(index: int) -> Iterator[None]:
        yield

    def empty(shape: Sequence[int], dtype: Any = None) -> ndarray:
        return ndarray(device.empty(tuple(shape), by_numpy[np.dtype(dtype).name]))

    def asarray(values: np.ndarray) -> ndarray:
        return ndarray(device.array(np.asarray(values)))

    cupy.empty = empty  # type: ignore[attr-defined]
    cupy.asarray = asarray  # type: ignore[attr-defined]
    cupy.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        Device=on_device, get_current_stream=_Stream)
    cupy.stream_reads = reads  # type: ignore[attr-defined]
    return cupy
