"""The CUDA driver through cuda-python, with errors decoded by name.

Imported lazily: a machine without a GPU (or without cuda-python) can import
tile_mlir and compile; only loading and launching need the driver.
"""

from __future__ import annotations

import os
import threading
from functools import cache
from types import ModuleType
from typing import Any


class CudaError(RuntimeError):
    """A CUDA driver call failed; `name` is the CUresult's name (CUDA_ERROR_...)."""

    def __init__(self, call: str, code: int, name: str, description: str):
        self.call, self.code, self.name, self.description = call, code, name, description
        super().__init__(f"{call} failed: {name} ({description})")


class NoGpuError(RuntimeError):
    """No usable CUDA driver or device on this machine."""


@cache
def cuda() -> ModuleType:
    """The cuda-python driver module (cuda.bindings.driver)."""
    try:
        from cuda.bindings import driver
    except ImportError as e:  # pragma: no cover - depends on the install
        raise NoGpuError("cuda-python is not installed: pip install cuda-python") from e
    module: ModuleType = driver
    return module


@cache
def _extension() -> ModuleType | None:
    try:
        from tile_mlir.runtime import _launch
    except ImportError:  # not built (pip install found no C compiler)
        return None
    module: ModuleType = _launch
    return module


def native_launcher(function: Any) -> type | None:
    """The compiled launcher (runtime/_launch.c: the arguments packed in C, cuLaunchKernel
    called directly) for a cuda-python CUfunction; None where it was not built, where
    TILE_MLIR_NATIVE_LAUNCH=0 turns it off, or for a stand-in driver's function."""
    if os.environ.get("TILE_MLIR_NATIVE_LAUNCH", "1") == "0":
        return None
    module = _extension()
    real = getattr(cuda(), "CUfunction", None)
    if module is None or real is None or not isinstance(function, real):
        return None
    launcher: type = module.Launcher
    return launcher


def result(code: Any) -> Any:
    """A launch's CUresult as cuda-python's enum (the compiled launcher answers an int)."""
    enum = getattr(cuda(), "CUresult", None)
    return enum(code) if type(code) is int and enum is not None else code


CONTEXT_ERRORS = ("CUDA_ERROR_INVALID_CONTEXT", "CUDA_ERROR_CONTEXT_IS_DESTROYED",
                  "CUDA_ERROR_INVALID_HANDLE")


def context_lost(code: Any) -> bool:
    """Whether a launch failed for want of the device's context on this thread (launchers
    do not set it: a thread's first launch, or one after another library switched the
    thread's context); then `context(device)` and one more try."""
    return getattr(result(code), "name", "") in CONTEXT_ERRORS


PORTABLE_CLUSTER = 8
"""CTAs a thread block cluster may have on every GPU that has clusters (sm_90 and later);
an H100 runs clusters of up to 16 once the function allows it."""


def allow_cluster(function: Any) -> None:
    """Let a function compiled for clusters larger than the portable size launch them
    (`.reqnctapercluster` of 9 to 16 CTAs: CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_
    ALLOWED); nothing for other functions."""
    cu = cuda()
    attribute = cu.CUfunction_attribute
    size = 1
    for axis in ("WIDTH", "HEIGHT", "DEPTH"):
        size *= max(1, int(check("cuFuncGetAttribute", cu.cuFuncGetAttribute(
            getattr(attribute, f"CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_{axis}"), function))))
    if size > PORTABLE_CLUSTER:
        check("cuFuncSetAttribute", cu.cuFuncSetAttribute(
            function, attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1))


def _describe(code: Any) -> tuple[str, str]:
    drv = cuda()
    err, name = drv.cuGetErrorName(code)
    err2, text = drv.cuGetErrorString(code)
    name_s = name.decode() if err == drv.CUresult.CUDA_SUCCESS and name else str(code)
    text_s = text.decode() if err2 == drv.CUresult.CUDA_SUCCESS and text else "no description"
    return name_s, text_s


def check(call: str, result: Any) -> Any:
    """Unpack a cuda-python result tuple, raising CudaError unless it is CUDA_SUCCESS."""
    code, *values = result if isinstance(result, tuple) else (result,)
    if code != cuda().CUresult.CUDA_SUCCESS:
        name, text = _describe(code)
        raise CudaError(call, int(code), name, text)
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


_lock = threading.Lock()
_contexts: dict[int, Any] = {}


def context(device: int = 0) -> Any:
    """The device's primary context (the one torch and cupy use), current on this thread."""
    drv = cuda()
    with _lock:
        if device not in _contexts:
            try:
                check("cuInit", drv.cuInit(0))
            except Exception as e:  # CudaError, or the driver library is missing
                raise NoGpuError(f"no usable CUDA driver or GPU: {e}") from e
            handle = check("cuDeviceGet", drv.cuDeviceGet(device))
            _contexts[device] = check("cuDevicePrimaryCtxRetain",
                                      drv.cuDevicePrimaryCtxRetain(handle))
        ctx = _contexts[device]
    check("cuCtxSetCurrent", drv.cuCtxSetCurrent(ctx))
    return ctx


def pointer_device(pointer: int) -> int | None:
    """The ordinal of the device that holds `pointer`; None for memory the driver does not
    know as device memory (a host pointer)."""
    drv = cuda()
    attr = drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
    try:
        err, ordinal = drv.cuPointerGetAttribute(attr, pointer)
    except Exception as e:  # the driver library is missing: no GPU to ask
        raise NoGpuError(f"no usable CUDA driver or GPU: {e}") from e
    if err != drv.CUresult.CUDA_SUCCESS:
        return None
    return int(ordinal)


def gpu_available() -> bool:
    """True when the driver initializes and reports at least one device."""
    try:
        drv = cuda()
        if drv.cuInit(0)[0] != drv.CUresult.CUDA_SUCCESS:
            return False
        err, count = drv.cuDeviceGetCount()
        return bool(err == drv.CUresult.CUDA_SUCCESS and count > 0)
    except Exception:  # noqa: BLE001 - no driver library, no cuda-python: no GPU
        return False


def device_chip(device: int = 0) -> str:
    """The device's architecture as ptxas names it: sm_90 for compute capability 9.0."""
    context(device)
    drv = cuda()
    handle = check("cuDeviceGet", drv.cuDeviceGet(device))
    attr = drv.CUdevice_attribute
    major = check("cuDeviceGetAttribute", drv.cuDeviceGetAttribute(
        attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, handle))
    minor = check("cuDeviceGetAttribute", drv.cuDeviceGetAttribute(
        attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, handle))
    return f"sm_{major}{minor}"


def device_sms(device: int = 0) -> int:
    """The device's streaming multiprocessors (a MIG instance's own)."""
    context(device)
    drv = cuda()
    handle = check("cuDeviceGet", drv.cuDeviceGet(device))
    return int(check("cuDeviceGetAttribute", drv.cuDeviceGetAttribute(
        drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, handle)))


def device_name(device: int = 0) -> str:
    context(device)
    drv = cuda()
    handle = check("cuDeviceGet", drv.cuDeviceGet(device))
    raw = check("cuDeviceGetName", drv.cuDeviceGetName(256, handle))
    return bytes(raw).split(b"\0", 1)[0].decode()


def synchronize() -> None:
    check("cuCtxSynchronize", cuda().cuCtxSynchronize())
