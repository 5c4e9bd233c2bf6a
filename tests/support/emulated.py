"""A pretend GPU for the null tier: tile_mlir.ops calls run end to end on the CPU.

`Device` stands in for device memory: `EmuArray`s are NumPy buffers at made-up
device addresses, with any shape, strides and offset (so broadcast,
transposed, sliced and misaligned views are all expressible). The `device`
fixture points the operator library's runtime glue (ops/_runtime.py) at it:
arrays are described from it, outputs allocated in it (host arrays copied
there too), and kernels, still
compiled from the library's tile programs by the compiler's passes, run in
the host emulator (host.py) instead of being launched.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from support.host import CARRIERS, Buffer, dtype_of, run
from tile_mlir.dtypes import DTYPES
from tile_mlir.ops import _runtime, dispatch
from tile_mlir.ops._runtime import ArrayRef

_BY_NUMPY = {d.numpy: name for name, d in DTYPES.items()}


class EmuArray:
    """A strided view of a buffer of the pretend device."""

    def __init__(self, buffer: Buffer, dtype: str, shape: Sequence[int],
                 strides: Sequence[int], offset: int = 0):
        self.buffer, self.dtype = buffer, dtype
        self.shape, self.strides, self.offset = tuple(shape), tuple(strides), offset

    @property
    def pointer(self) -> int:
        return self.buffer.address + self.offset * self.buffer.array.dtype.itemsize

    def numpy(self) -> np.ndarray:
        """A copy of the view's elements."""
        base = self.buffer.array[self.offset:]
        size = base.dtype.itemsize
        carrier = base.view(CARRIERS[size])  # as_strided takes no ml_dtypes types
        view = np.lib.stride_tricks.as_strided(
            carrier, self.shape, tuple(s * size for s in self.strides))
        return np.array(view).view(base.dtype)

    def view(self, shape: Sequence[int], strides: Sequence[int], offset: int = 0) -> EmuArray:
        """Another view of the same memory (offset counts from this view's start)."""
        return EmuArray(self.buffer, self.dtype, shape, strides, self.offset + offset)

    def ref(self) -> ArrayRef:
        return ArrayRef(self, "cai", self.dtype, self.shape, self.strides, self.pointer, 0)


class Device:
    """Pretend device memory: buffers at 256-byte aligned made-up addresses."""

    def __init__(self) -> None:
        self.buffers: list[Buffer] = []
        self.next_address = 1 << 32
        self.launches: list[str] = []  # the text of every kernel launched

    def alloc(self, elements: int, dtype: str) -> Buffer:
        array = np.zeros(max(elements, 1), dtype_of(dtype))
        buffer = Buffer(array, self.next_address)
        self.next_address += (array.nbytes + 511) // 256 * 256
        self.buffers.append(buffer)
        return buffer

    def array(self, values: np.ndarray, dtype: str | None = None, offset: int = 0) -> EmuArray:
        """A contiguous copy of `values` on the device, `offset` elements into its buffer."""
        dtype = dtype or _BY_NUMPY[values.dtype.name]
        values = np.asarray(values, dtype_of(dtype))
        buffer = self.alloc(values.size + offset, dtype)
        buffer.array[offset:offset + values.size] = values.reshape(-1)
        strides = tuple(int(np.prod(values.shape[i + 1:])) for i in range(values.ndim))
        return EmuArray(buffer, dtype, values.shape, strides, offset)

    def empty(self, shape: Sequence[int], dtype: str) -> EmuArray:
        """An output, poisoned (NaN, or 0x5A bytes) so that unwritten elements show."""
        count = int(np.prod(shape, dtype=np.int64))
        buffer = self.alloc(count, dtype)
        buffer.array.view(np.uint8)[:] = 0x5A
        if DTYPES[dtype].is_float:
            buffer.array[:] = np.nan
        strides = tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))
        return EmuArray(buffer, dtype, shape, strides)


class _Kernel:
    def __init__(self, device: Device, text: str):
        self.device, self.text = device, text

    def __call__(self, *args: Any, grid: Sequence[int], block: Sequence[int],
                 stream: int) -> None:
        self.device.launches.append(self.text)
        run(self.text, grid[0], args, self.device.buffers)


@pytest.fixture
def device(monkeypatch: pytest.MonkeyPatch) -> Iterator[Device]:
    """The operator library, running on the pretend device."""
    emu = Device()
    describe = _runtime.describe

    def describe_emu(obj: Any, where: str) -> ArrayRef | None:
        return obj.ref() if isinstance(obj, EmuArray) else describe(obj, where)

    def empty(shape: Sequence[int], dtype: str, like: ArrayRef) -> Any:
        return emu.empty(shape, dtype)

    monkeypatch.setattr(_runtime, "describe", describe_emu)
    monkeypatch.setattr(_runtime, "empty", empty)
    monkeypatch.setattr(_runtime, "from_host", lambda values, like: emu.array(values))
    monkeypatch.setattr(_runtime, "kernel", lambda text, device: _Kernel(emu, text))
    monkeypatch.setattr(dispatch, "_chip", lambda device: None)
    yield emu
