"""null tier: launching tile_mlir.lang kernels on (fake) torch and CuPy arrays through a
fake CUDA driver: the argument values each launch passes (base pointers aligned down with
an element offset, sizes, strides, scalars), the grid, the stream, and the prepared
launch that repeated calls take."""

from __future__ import annotations

import ctypes
import importlib
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

import numpy as np
import pytest
from cuda.bindings.driver import CUresult

import tile_mlir.lang as tl
from tile_mlir.runtime import driver
from tile_mlir.runtime.arrays import SCALAR_CTYPES
from tile_mlir.runtime.kernel import Kernel
from tile_mlir.runtime.spec import KernelSpec


@dataclass
class Launch:
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    stream: int
    values: list[Any]


@dataclass
class Driver:
    """cuLaunchKernel reading the parameters back as the driver would; the function handle
    is the kernel's spec (see `loaded`)."""

    CUresult: Any = CUresult
    launches: list[Launch] = field(default_factory=list)

    def cuLaunchKernel(self, f: KernelSpec, gx: int, gy: int, gz: int, bx: int, by: int,  # noqa: PLR0917 - the driver's signature
                       bz: int, shared: int, stream: int, params: int, extra: int
                       ) -> tuple[Any]:
        pointers = (ctypes.c_void_p * max(len(f.params), 1)).from_address(params)
        values = [(ctypes.c_uint64 if p.is_memref else SCALAR_CTYPES[p.dtype])
                  .from_address(pointers[i] or 0).value for i, p in enumerate(f.params)]
        self.launches.append(Launch(f.name, (gx, gy, gz), (bx, by, bz), int(stream), values))
        return (0,)


class Dtype:
    def __init__(self, name: str):
        self.name = name

    def __str__(self) -> str:
        return f"torch.{self.name}"


F32, F16 = Dtype("float32"), Dtype("float16")


class Tensor:
    """What the launch reads of a torch tensor."""

    def __init__(self, shape: tuple[int, ...], pointer: int, dtype: Dtype = F32,
                 strides: tuple[int, ...] | None = None, device: int = 0):
        self.shape, self.dtype, self._pointer, self._device = shape, dtype, pointer, device
        self._strides = strides or tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))
        self.is_cuda = device >= 0
        self.device = f"cuda:{device}" if device >= 0 else "cpu"

    def stride(self) -> tuple[int, ...]:
        return self._strides

    def data_ptr(self) -> int:
        return self._pointer

    def get_device(self) -> int:
        return self._device


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[Driver]:
    fake_driver = Driver()
    torch = types.ModuleType("torch")
    torch.Tensor = Tensor  # type: ignore[attr-defined]
    torch.float32, torch.float16 = F32, F16  # type: ignore[attr-defined]
    torch._C = types.SimpleNamespace(  # type: ignore[attr-defined]
        _cuda_getCurrentRawStream=lambda device: 0x5000 + device)
    monkeypatch.setitem(__import__("sys").modules, "torch", torch)
    monkeypatch.setattr(driver, "cuda", lambda: fake_driver)
    monkeypatch.setattr(driver, "context", lambda device=0: None)
    yield fake_driver


def loaded(monkeypatch: pytest.MonkeyPatch, kernel: tl.KernelFunction) -> list[tl.Specialization]:
    """Load the kernel's compiled specializations into the fake driver; the list of
    specializations asked for."""
    asked: list[tl.Specialization] = []
    kernels: dict[tl.Specialization, Kernel] = {}

    def load(spec: tl.Specialization, device: int = 0) -> Kernel:
        if spec not in kernels:
            asked.append(spec)
            compiled = kernel.compile(spec, chip="sm_90").kernels[kernel.name]
            kernels[spec] = Kernel(compiled, function=compiled)
        return kernels[spec]

    monkeypatch.setattr(kernel, "kernel", load)
    monkeypatch.setattr(kernel, "_prepared", {})  # launches prepared with another driver
    return asked


Vec = Annotated[tl.Tensor, "T", ("N",)]


@tl.kernel(threads=128)
def add(a: Vec, b: Vec, c: Vec, TILE: tl.constexpr = 512) -> None:
    piece = slice(tl.block_id() * TILE, (tl.block_id() + 1) * TILE)
    tl.cta.add(c[piece], a[piece], b[piece])


@tl.kernel(threads=64)
def scale(x: Annotated[tl.Tensor, "f32", ("M", "N")], y: Annotated[tl.Tensor, "f32", ("M", "N")],
          s: tl.f32) -> None:
    tl.grid(4)
    tl.cta.mul(y, x, s)


def GRID(d: Mapping[str, Any]) -> tuple[int]:
    return (tl.cdiv(d["N"], d["TILE"]),)


def test_contiguous_tensors(fake: Driver, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = loaded(monkeypatch, add)
    a, b, c = (Tensor((1000,), 0x10000 * k) for k in (1, 2, 3))
    add[GRID](a, b, c)
    (launch,) = fake.launches
    assert launch.values == [0x10000, 1000, 0x20000, 0x30000]  # one size: N, shared
    assert launch.grid == (2, 1, 1) and launch.block == (128, 1, 1)
    assert launch.stream == 0x5000  # torch's current stream
    assert len(asked) == 1 and asked[0].index_bits == 32


def test_the_prepared_launch_of_a_repeated_call(fake: Driver,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    asked = loaded(monkeypatch, add)
    specialized: list[int] = []
    kernel_module = importlib.import_module("tile_mlir.lang.kernel")
    real = kernel_module.specialize

    def counted(*args: Any) -> Any:
        specialized.append(1)
        return real(*args)

    monkeypatch.setattr(kernel_module, "specialize", counted)
    add[GRID](Tensor((1000,), 0x10000), Tensor((1000,), 0x20000), Tensor((1000,), 0x30000))
    add[GRID](Tensor((1000,), 0x40000), Tensor((1000,), 0x50000), Tensor((1000,), 0x60000),
              stream=7)
    add(Tensor((1000,), 0x70000), Tensor((1000,), 0x80000), Tensor((1000,), 0x90000),
        grid=(3,))
    assert len(specialized) == 1 and len(asked) == 1
    assert [launch.values[0] for launch in fake.launches] == [0x10000, 0x40000, 0x70000]
    assert [launch.stream for launch in fake.launches] == [0x5000, 7, 0x5000]
    assert fake.launches[2].grid == (3, 1, 1)
    add[GRID](Tensor((1001,), 0x10000), Tensor((1001,), 0x20000), Tensor((1001,), 0x30000))
    assert len(specialized) == 2 and len(asked) == 1  # another size, the same kernel


def test_misaligned_and_strided_tensors(fake: Driver, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = loaded(monkeypatch, add)
    a = Tensor((100,), 0x10000 + 12)  # x[3:] of an aligned array
    b = Tensor((100,), 0x20000, strides=(6,))  # x[::6]
    c = Tensor((100,), 0x30000)
    add[GRID](a, b, c)
    spec = asked[-1]
    assert repr(spec) == ("<add: a: f32[N] strides(1) +offset, b: f32[N] strides(?2), "
                          "c: f32[N] strides(1); TILE=512; block 128x1x1, i32>")
    assert fake.launches[-1].values == [0x10000, 100, 3, 0x20000, 6, 0x30000]
    add[GRID](Tensor((100,), 0x40000 + 8), b, c)  # another misalignment, the same kernel
    assert fake.launches[-1].values == [0x40000, 100, 2, 0x20000, 6, 0x30000]
    assert len(asked) == 1


def test_overlapping_tensors_lose_noalias(fake: Driver, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = loaded(monkeypatch, add)
    a, b = Tensor((1000,), 0x10000), Tensor((1000,), 0x20000)
    add[GRID](a, b, Tensor((1000,), 0x30000))
    add[GRID](a, b, Tensor((1000,), 0x10000 + 2048))  # c overlaps a's second half
    assert asked[-1].overlaps == (("a", "c"),) and len(asked) == 2
    assert "llvm.noalias" not in add.ir(asked[-1]).split("%b:")[0]
    add[GRID](a, b, a)  # in place: the overlapping kernel again
    assert len(asked) == 2
    add[GRID](a, b, Tensor((1000,), 0x30000))
    assert fake.launches[-1].values[-1] == 0x30000


def test_scalars_known_grids_and_errors(fake: Driver, monkeypatch: pytest.MonkeyPatch) -> None:
    loaded(monkeypatch, scale)
    loaded(monkeypatch, add)
    x, y = Tensor((4, 6), 0x10000), Tensor((4, 6), 0x20000)
    scale(x, y, 0.25)
    assert fake.launches[-1].grid == (4, 1, 1) and fake.launches[-1].values[-1] == 0.25
    with pytest.raises(tl.ArgumentError, match="argument 'y': expected f32 elements, got f16"):
        scale(x, Tensor((4, 6), 0x20000, F16), 0.25)
    with pytest.raises(tl.ArgumentError, match=r"argument 'y': dim 1 \(N\) is 7"):
        scale(x, Tensor((4, 7), 0x20000), 0.25)
    with pytest.raises(tl.ArgumentError, match="argument 's': expected a f32 scalar"):
        scale(x, y, "0.25")
    with pytest.raises(tl.ArgumentError, match="argument 'x': a cpu tensor"):
        scale(Tensor((4, 6), 0x10000, device=-1), y, 0.25)
    with pytest.raises(tl.ArgumentError, match="the kernel does not fix its grid"):
        add(Tensor((8,), 0x10000), Tensor((8,), 0x20000), Tensor((8,), 0x30000))
    with pytest.raises(tl.ArgumentError, match=r"argument 'x': a tl\.ArrayDesc without a "
                                                "pointer describes an array"):
        scale(tl.ArrayDesc("f32", (4, 6)), y, 0.25)


def test_constexprs_and_empty_grids(fake: Driver, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = loaded(monkeypatch, add)
    a, b, c = (Tensor((1000,), 0x10000 * k) for k in (1, 2, 3))
    add[GRID](a, b, c, 256)
    add[GRID](a, b, c, TILE=128)
    add[GRID](a, b, c, 256)
    assert [s.constexprs for s in asked] == [(("TILE", 256),), (("TILE", 128),)]
    assert [launch.grid[0] for launch in fake.launches] == [4, 8, 4]
    add[GRID](*(Tensor((0,), 0x10000 * k) for k in (1, 2, 3)))
    assert len(fake.launches) == 3  # nothing to do: no launch
    fast_key = importlib.import_module("tile_mlir.lang.launch").fast_key
    assert fast_key((a,), {"TILE": [1024]}, frozenset(), frozenset({"TILE"})) == (None, [])


def test_views_by_address(fake: Driver, monkeypatch: pytest.MonkeyPatch) -> None:
    """ArrayDescs with pointers launch like arrays (the operator library's coalesced views,
    which no array object stands for), on `stream=` or the default stream."""
    asked = loaded(monkeypatch, add)
    a = tl.ArrayDesc("f32", (500,), (2,), pointer=0x10004)
    b = tl.ArrayDesc("f32", (500,), pointer=0x20000)
    c = tl.ArrayDesc("f32", (500,), pointer=0x30000)
    add[GRID](a, b, c)
    add[GRID](tl.ArrayDesc("f32", (500,), (2,), pointer=0x40004), b, c, stream=9)
    assert [launch.values for launch in fake.launches] == [
        [0x10000, 500, 2, 1, 0x20000, 0x30000], [0x40000, 500, 2, 1, 0x20000, 0x30000]]
    assert [launch.stream for launch in fake.launches] == [0, 9] and len(asked) == 1
    assert len(add._prepared) == 1
