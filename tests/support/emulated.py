"""A pretend GPU for the null tier: tile_mlir.ops calls run end to end on the CPU.

`Device` stands in for device memory: `EmuArray`s are NumPy buffers at made-up
device addresses, with any shape, strides and offset (so broadcast,
transposed, sliced and misaligned views are all expressible). The `device`
fixture points the operator library's argument layer (ops/args.py) and kernel
loader (ops/kernels.py) at it: arrays are described from it, outputs allocated in
it (host arrays copied there too), and kernels run there instead of being
launched. The plans are the library's own: generated launchers that write the
kernel's parameters into ctypes buffers and call a launch function; here the
launch function reads the parameters back from those buffers, as the driver
would. Elementwise and RoPE kernels, compiled from the library's tile programs by
the compiler's passes, run in the host emulator (host.py), thread after thread; the row
ops' kernels whose threads meet (warp shuffles, barriers, shared memory: strategies
"warp" and "cta") run with each CTA's threads together (simt.py), not those of a
cluster. Reduction kernels run so too where a test asks (`Device.reduction_kernels`);
otherwise their launches run a NumPy model of the program's signature (the view,
strides, offset and stages the plan gave it: quick on the large shapes of the plan
tests), and the gpu tier runs the kernels themselves.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from support import simt
from support.host import CARRIERS, Buffer, NotEmulated, dtype_of, run
from tile_mlir.dtypes import DTYPES
from tile_mlir.ops import args, entry, kernels, rope
from tile_mlir.ops.args import Array
from tile_mlir.ops.programs import KernelProgram
from tile_mlir.ops.programs.reduction import ReductionProgram
from tile_mlir.runtime import driver

_BY_NUMPY = {d.numpy: name for name, d in DTYPES.items()}


class EmuArray:
    """A strided view of a buffer of the pretend device (`device`: the CUDA ordinal it
    claims, for tests of arrays on two devices)."""

    device = 0

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
        view = EmuArray(self.buffer, self.dtype, shape, strides, self.offset + offset)
        view.device = self.device
        return view

    def ref(self, name: str = "array") -> Array:
        return Array(name, "cai", self.dtype, self.shape, self.strides, self.pointer,
                     self.device, self)


class Device:
    """Pretend device memory: buffers at 256-byte aligned made-up addresses."""

    def __init__(self) -> None:
        self.buffers: list[Buffer] = []
        self.next_address = 1 << 32
        self.launches: list[str] = []  # the text of every kernel launched
        # reduction launches: the kernels themselves, threads together (simt.py), or a
        # NumPy model of what they compute (quick on the large shapes of plan tests)
        self.reduction_kernels = False

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


_TOGETHER: set[str] = set()
"""Kernels whose threads meet (host.run refused them): run with a CTA's threads together
(simt.py)."""


class _Kernel:
    """A program's kernel on the pretend device: `launch` has cuLaunchKernel's signature
    and reads the arguments from the parameter buffers the plan wrote."""

    def __init__(self, device: Device, program: KernelProgram):
        self.device, self.program = device, program
        self.text = program.ir()
        self.types = kernels.ctypes_of(program)

    def launch(self, function: Any, gx: int, gy: int, gz: int, bx: int, by: int,  # noqa: PLR0917 - the driver's signature
               bz: int, shared: int, stream: int, params: int, extra: int) -> tuple[int]:
        pointers = (ctypes.c_void_p * max(len(self.types), 1)).from_address(params)
        values = [t.from_address(pointers[i]).value for i, t in enumerate(self.types)]
        self.device.launches.append(self.text)
        if isinstance(self.program, ReductionProgram) and not self.device.reduction_kernels:
            reduce_model(self.program, values, self.device.buffers)
        elif self.text not in _TOGETHER:
            try:
                run(self.text, (gx, gy), values, self.device.buffers)
            except NotEmulated:  # threads that meet: the row ops' shuffles and barriers
                _TOGETHER.add(self.text)
        if self.text in _TOGETHER:
            simt.run(self.text, values, self.device.buffers, grid=(gx, gy))
        return (0,)

    def loaded(self) -> kernels.Loaded:
        return kernels.Loaded(None, self.types, self.launch, (self.program.threads, 1, 1), 0,
                              self.program.name)


def _buffer(buffers: Sequence[Buffer], pointer: int) -> Buffer:
    return next(b for b in buffers
                if b.address <= pointer < b.address + max(b.array.nbytes, 1) + 16)


def reduce_model(program: ReductionProgram, values: Sequence[Any],
                 buffers: Sequence[Buffer]) -> None:
    """What a reduction stage's kernel computes, in float64 NumPy: read the source view
    the arguments describe (pointer, strides, offset), reduce each chunk of R (its
    spans: equal, or with a tail), scale,
    write [A, chunks, B] in dst's type."""
    stage = program.stage
    given = dict(zip(program.roles(), values, strict=True))
    strides = [int(s) if not s.startswith("?") else int(given[("stride", d)])
               for d, s in enumerate(stage.source_strides())]
    sizes = [stage.a, stage.r] + ([stage.b] if not stage.rows else [])
    source = _buffer(buffers, given[("x", 0)])
    itemsize = source.array.dtype.itemsize
    base = (given[("x", 0)] - source.address) // itemsize + int(given.get(("offset", 0), 0))
    index = np.full(sizes, base, np.int64)
    for dim, (size, stride) in enumerate(zip(sizes, strides, strict=True)):
        shape = [1] * len(sizes)
        shape[dim] = size
        index = index + np.arange(size).reshape(shape) * stride
    data = source.array[index].astype(np.float64)
    if stage.rows:
        data = data[..., None]
    reduce: dict[str, Any] = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}
    reduced = np.stack([reduce[stage.kind](data[:, start:start + length], axis=1)
                        for start, length in stage.spans()], axis=1)
    if stage.scale is not None:
        reduced = reduced * stage.scale
    target = _buffer(buffers, given[("y", 0)])
    start = (given[("y", 0)] - target.address) // target.array.dtype.itemsize
    flat = reduced.reshape(-1).astype(dtype_of(stage.dst))
    target.array[start:start + flat.size] = flat


@pytest.fixture
def device(monkeypatch: pytest.MonkeyPatch) -> Iterator[Device]:
    """The operator library, running on the pretend device."""
    emu = Device()
    describe = args.describe

    def describe_emu(obj: Any, name: str) -> Array | None:
        return obj.ref(name) if isinstance(obj, EmuArray) else describe(obj, name)

    def allocate(shape: Sequence[int], dtype: str, kind: str, device: int) -> Any:
        return emu.empty(shape, dtype)

    monkeypatch.setattr(args, "describe", describe_emu)
    monkeypatch.setattr(args, "allocate", allocate)
    monkeypatch.setattr(args, "to_device", lambda values, device=0: emu.array(values))
    monkeypatch.setattr(args, "from_host", lambda values, like: values if like.kind == "numpy"
                        else emu.array(values))
    monkeypatch.setattr(rope, "_on_device", {})  # caches placed on another test's device
    monkeypatch.setattr(kernels, "load", lambda program, device: _Kernel(emu, program).loaded())
    monkeypatch.setattr(kernels, "chip", lambda device: None)
    monkeypatch.setattr(driver, "device_sms", lambda device=0: 132)  # an H100's
    entry.clear()
    kernels.clear()
    yield emu
    entry.clear()
    kernels.clear()
