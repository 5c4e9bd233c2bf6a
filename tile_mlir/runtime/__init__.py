"""The runtime: load compiled kernels and launch them. Imports no MLIR.

    program = tile_mlir.runtime.load_bundle("kernels.bundle")   # from Program.save()
    kernel = program.kernel("vector_add")
    c = kernel.new_outputs(like=a)[0]                          # torch in, torch out
    kernel(a, b, c)                                            # on torch's current stream

Kernels come from compile() (through the kernel cache, runtime/cache.py) or
from a bundle (runtime/bundle.py); runtime/arrays.py says which arrays they take.
"""

from tile_mlir.runtime.arrays import ArgumentError, empty, stream_handle
from tile_mlir.runtime.binary import IncompatibleBinaryError, detect_chip
from tile_mlir.runtime.bundle import BundleError
from tile_mlir.runtime.bundle import load as load_bundle
from tile_mlir.runtime.driver import CudaError, NoGpuError, gpu_available
from tile_mlir.runtime.kernel import Kernel, LoadedModule
from tile_mlir.runtime.memory import DeviceBuffer
from tile_mlir.runtime.program import Program
from tile_mlir.runtime.spec import KernelSpec, Param

__all__ = [
    "ArgumentError",
    "BundleError",
    "CudaError",
    "DeviceBuffer",
    "IncompatibleBinaryError",
    "Kernel",
    "KernelSpec",
    "LoadedModule",
    "NoGpuError",
    "Param",
    "Program",
    "detect_chip",
    "empty",
    "gpu_available",
    "load_bundle",
    "stream_handle",
]
