"""Kernels of the library's programs: compiled through the kernel cache by their request,
loaded on a device, and described for a plan's launches (no MLIR here).

`load(program, device)` answers from a dict first, then from the runtime's kernel cache
(tile_mlir.runtime.cache) keyed by the program's `request()` (computed without MLIR, so
a process without the MLIR bindings runs every kernel a warm cache holds), and only
then compiles `program.ir()`. The loaded kernel is what a plan launches: the driver
function, the ctypes type of each argument, cuLaunchKernel, the block.

A first call inside CUDA graph capture must not compile or load (module loads are not
captured, and waiting for a compile would not be either): `capture_guard` makes `load`
raise CaptureError there instead of breaking the capture.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any

from tile_mlir.ops.programs import KernelProgram


class CaptureError(RuntimeError):
    """A library op called for the first time (with these argument types and layouts)
    while a CUDA graph is being captured: it would compile or load a kernel, or copy
    host data, none of which a capture can hold."""


@dataclass(frozen=True)
class Loaded:
    """A kernel ready to launch: what a plan's generated launcher calls."""

    function: Any  # the driver's CUfunction (or a stand-in's handle)
    ctypes: tuple[type[Any], ...]  # per argument
    launch: Callable[..., Any]  # cuLaunchKernel's signature, returning (CUresult,)
    block: tuple[int, int, int]
    device: int
    name: str
    native: type | None = None  # the compiled launcher type (driver.native_launcher)
    letters: str = ""  # its packing letter per argument (the runtime Kernel's letters)


_LOADED: dict[tuple[str, int], Loaded] = {}
_lock = threading.Lock()
_state = threading.local()


@contextmanager
def capture_guard(capturing: bool) -> Iterator[None]:
    """While a capture is running on the caller's stream, loading raises CaptureError."""
    before = getattr(_state, "capturing", False)
    _state.capturing = capturing
    try:
        yield
    finally:
        _state.capturing = before


def check_not_capturing(what: str) -> None:
    """Raise CaptureError when called under capture_guard(True): `what` would break it."""
    if getattr(_state, "capturing", False):
        raise CaptureError(
            f"tile_mlir.ops: {what} during CUDA graph capture. The first call of an op with "
            "given dtypes, shapes, strides and parameters compiles and loads its kernel "
            "(and RoPE places its cos/sin cache); call it once with the same arguments "
            "before capturing (a warm-up, as torch recommends), then capture")


@cache
def _ctypes() -> dict[str, type[Any]]:
    """The ctypes type a launch packs each kind of kernel argument in (the runtime's, read
    on the first plan: importing the library does not import the runtime)."""
    from tile_mlir.runtime.arrays import SCALAR_CTYPES

    return {"ptr": ctypes.c_uint64, **SCALAR_CTYPES}


def ctypes_of(program: KernelProgram) -> tuple[type[Any], ...]:
    types = _ctypes()
    return tuple(types[kind] for kind in program.params())


def get(program: KernelProgram, device: int) -> Loaded:
    """The program's kernel on `device`: loaded once per process (`load`), never under
    capture_guard(True)."""
    key = (program.request(), device)
    found = _LOADED.get(key)
    if found is not None:
        return found
    check_not_capturing(f"the kernel {program.name} would be compiled and loaded")
    loaded = load(program, device)
    with _lock:
        return _LOADED.setdefault(key, loaded)


def load(program: KernelProgram, device: int) -> Loaded:
    """Compile (or find in the kernel cache) and load the program's kernel on `device`."""
    from tile_mlir.runtime import driver

    kernel = compiled(program).kernel(program.name, device)
    types = ctypes_of(program)
    if len(types) != len(kernel.spec.params):
        raise RuntimeError(f"{program.name}: the program says {len(types)} arguments, the "
                           f"compiled kernel has {len(kernel.spec.params)}")
    return Loaded(kernel.function, types, driver.cuda().cuLaunchKernel,
                  (program.threads, 1, 1), device, program.name,
                  driver.native_launcher(kernel.function), kernel.letters)


def compiled(program: KernelProgram, chip: str | None = None) -> Any:
    """The compiled program (a runtime Program): from the kernel cache by its request,
    else compiled from its IR and stored there."""
    import tile_mlir
    from tile_mlir.runtime import binary
    from tile_mlir.runtime import cache as kernel_cache

    chip = chip or binary.detect_chip()
    options = kernel_cache.compile_options(cubin=True)
    request = program.request()
    hit = kernel_cache.lookup(request, chip, options)
    if hit is not None:
        return hit
    fresh = tile_mlir.compile(program.ir(), chip=chip, cache=False,
                              name=f"<tile_mlir.ops {program.name}>")
    return kernel_cache.store(request, chip, options, fresh)


@cache
def chip(device: int) -> str | None:
    """The device's chip (sm_90...), for tuned strategies; None without a GPU."""
    try:
        from tile_mlir.runtime import driver

        return driver.device_chip(device)
    except Exception:  # noqa: BLE001 - no GPU: no tuned choices either
        return None


@cache
def tuning_target(device: int) -> str | None:
    """What the device's tuned strategies are looked up by (strategy.target: the chip and
    the model, `sm_90-nvidia-h200`); None without a GPU."""
    from tile_mlir.ops import strategy

    found = chip(device)
    if found is None:
        return None
    try:
        from tile_mlir.runtime import driver

        return strategy.target(found, driver.device_name(device))
    except Exception:  # noqa: BLE001 - a device without a name: its chip's choices
        return found


def retry(loaded: Loaded, error: Any) -> bool:
    """After a failed launch: a context error (a thread's first launch, or another library
    switched the thread's context) makes the device's context current and says to try
    once more; any other error raises CudaError."""
    from tile_mlir.runtime import driver

    if driver.context_lost(error):
        driver.context(loaded.device)
        return True
    driver.check(f"cuLaunchKernel ({loaded.name})", (driver.result(error),))
    return False


def clear() -> None:
    """Forget the loaded kernels (tests that swap the device)."""
    with _lock:
        _LOADED.clear()
