"""The runtime: load compiled kernels and launch them. Imports no MLIR."""

from tile_mlir.runtime.driver import CudaError, NoGpuError, gpu_available
from tile_mlir.runtime.kernel import ArgumentError, DeviceBuffer, Kernel, LoadedModule
from tile_mlir.runtime.program import Program
from tile_mlir.runtime.spec import KernelSpec, Param

__all__ = [
    "ArgumentError",
    "CudaError",
    "DeviceBuffer",
    "Kernel",
    "KernelSpec",
    "LoadedModule",
    "NoGpuError",
    "Param",
    "Program",
    "gpu_available",
]
