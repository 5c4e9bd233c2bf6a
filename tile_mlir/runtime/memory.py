"""DeviceBuffer: device memory for callers who bring neither torch nor CuPy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from tile_mlir.runtime import driver
from tile_mlir.runtime.driver import check, cuda


class DeviceBuffer:
    """A block of device memory holding a contiguous array (freed on close/GC).

    It exports `__cuda_array_interface__`, so torch.as_tensor(buf, device="cuda") and
    cupy.asarray(buf) view it without a copy.
    """

    def __init__(self, shape: Sequence[int], dtype: npt.DTypeLike, device: int = 0):
        driver.context(device)
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.device = device
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        self.ptr = int(check("cuMemAlloc", cuda().cuMemAlloc(max(self.nbytes, 1))))

    @staticmethod
    def from_array(array: np.ndarray, device: int = 0) -> DeviceBuffer:
        host = np.ascontiguousarray(array)
        buffer = DeviceBuffer(host.shape, host.dtype, device)
        buffer.upload(host)
        return buffer

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "strides": None, "version": 3}

    def upload(self, array: np.ndarray) -> None:
        host = np.ascontiguousarray(array, dtype=self.dtype)
        if host.nbytes != self.nbytes:
            raise ValueError(f"upload of {host.nbytes} bytes into a {self.nbytes}-byte buffer")
        if self.nbytes:
            driver.context(self.device)
            check("cuMemcpyHtoD", cuda().cuMemcpyHtoD(self.ptr, host.ctypes.data, self.nbytes))

    def numpy(self) -> np.ndarray:
        host = np.empty(self.shape, self.dtype)
        if self.nbytes:
            driver.context(self.device)
            check("cuMemcpyDtoH", cuda().cuMemcpyDtoH(host.ctypes.data, self.ptr, self.nbytes))
        return host

    def close(self) -> None:
        if self.ptr:
            check("cuMemFree", cuda().cuMemFree(self.ptr))
            self.ptr = 0

    def __del__(self) -> None:
        try:  # noqa: SIM105 - at interpreter shutdown contextlib may be gone (None)
            self.close()
        except Exception:  # noqa: BLE001 - the driver may be gone too: nobody to tell
            pass

    def __enter__(self) -> DeviceBuffer:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
