"""Loading cubins (or PTX) and launching their kernels on arrays, cheaply.

No MLIR here: a kernel is a cubin plus its `KernelSpec`, which says how to
pack each argument (see arrays.py for the kinds of argument taken and the
checks made).

A launch from Python is on the op library's hot path, so the work that does
not depend on the argument values is done once per argument-type signature
and kept in a `_Plan`: the binder of each argument, the ctypes storage of
every parameter and the `void*[]` array pointing at it (the kernelParams of
cuLaunchKernel), and where the stream comes from. A call then only reads
each argument's address through its binder (checking it), reads the caller's
current stream and launches, by the compiled launcher (_launch.c: the values
packed in C) where pip install built it, else writing the ctypes storage for
cuda-python's cuLaunchKernel: no hashing, no IR, no allocation beyond the
argument tuple.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tile_mlir.runtime import arrays, driver
from tile_mlir.runtime.arrays import PARAM_LETTERS, SCALAR_CTYPES, ArgumentError, Binder
from tile_mlir.runtime.driver import check
from tile_mlir.runtime.memory import DeviceBuffer
from tile_mlir.runtime.spec import KernelSpec

__all__ = ["ArgumentError", "DeviceBuffer", "Kernel", "LoadedModule"]

Dims = tuple[int, int, int, int, int, int]  # grid x, y, z, block x, y, z

@dataclass
class _Plan:
    """Everything about a launch that depends only on the argument types."""

    binders: tuple[Binder, ...]
    slots: tuple[Any, ...]  # a ctypes value per parameter
    params: Any  # (void* * n): the address of each slot, kept alive here
    address: int  # of `params`: cuLaunchKernel's kernelParams
    stream: Any  # () -> the caller's current stream
    staged: tuple[int, ...]  # positions of NumPy (host) arguments
    launch: Any  # cuda-python's cuLaunchKernel (a ctypes call of libcuda's measured
    # 1.4 us slower per launch on an H200 host: its argument conversion costs more)
    owner: int  # the thread that writes the slots


def _dims(grid: Sequence[int], block: Sequence[int]) -> Dims:
    g, b = (*grid, 1, 1, 1)[:3], (*block, 1, 1, 1)[:3]
    return int(g[0]), int(g[1]), int(g[2]), int(b[0]), int(b[1]), int(b[2])


class Kernel:
    """A loaded kernel: call it with one argument per parameter.

    `kernel(*args, stream=None)` launches on the caller's current stream: torch's
    (torch.cuda.current_stream()) when torch tensors are passed, CuPy's for CuPy
    arrays, else the legacy default stream; `stream=` names one (an int, a
    cuda-python CUstream, a torch or CuPy stream). The launch is asynchronous
    except with NumPy arguments, which are copied in, and out when written.

    Plans belong to the thread that made them; a kernel called from several threads
    stays correct (each call from another thread makes its own plan) but is fast only
    in one thread at a time.
    """

    def __init__(self, spec: KernelSpec, function: Any, device: int = 0, binary: str = "cubin"):
        self.spec = spec
        self.function = function  # the cuda-python CUfunction
        self.device = device
        self.binary = binary  # what was loaded: "cubin", or "ptx" compiled by the driver
        self._plans: dict[tuple[type, ...], _Plan] = {}
        self._fast: Any = None  # the generated launcher of the last signature (see below)
        self._arity = len(spec.params)

    def __repr__(self) -> str:
        params = ", ".join(f"{p.name}: {p.dtype}{list(p.shape) if p.is_memref else ''}"
                           for p in self.spec.params)
        return f"<Kernel {self.spec.name}({params}) on cuda:{self.device} from {self.binary}>"

    @functools.cached_property
    def letters(self) -> str:
        """The compiled launcher's packing letter per parameter (arrays.PARAM_LETTERS)."""
        return "".join(PARAM_LETTERS["ptr" if p.is_memref else p.dtype]
                       for p in self.spec.params)

    def _launch_dims(self, grid: Sequence[int] | None, block: Sequence[int] | None) -> Dims:
        g = tuple(grid) if grid is not None else self.spec.grid
        b = tuple(block) if block is not None else self.spec.block
        if g is None or b is None:
            missing = "grid" if g is None else "block"
            raise ArgumentError(f"{self.spec.name}: the kernel does not fix its {missing} size; "
                                f"pass {missing}=(x, y, z)")
        if self.spec.block is not None and _dims((), b)[3:] != self.spec.block:
            raise ArgumentError(f"{self.spec.name}: compiled for block {self.spec.block}, got {b}")
        return _dims(g, b)

    def _plan(self, args: tuple[Any, ...]) -> _Plan:
        spec = self.spec
        if len(args) != len(spec.params):
            raise ArgumentError(f"{spec.name} takes {len(spec.params)} arguments, got {len(args)}")
        kinds, binders = [], []
        for position, (param, arg) in enumerate(zip(spec.params, args, strict=True)):
            kind, bind = arrays.binder(param, position, arg, self.device)
            kinds.append(kind)
            binders.append(bind)
        slots = tuple(SCALAR_CTYPES[p.dtype]() if not p.is_memref else ctypes.c_uint64()
                      for p in spec.params)
        params = (ctypes.c_void_p * max(len(slots), 1))(*[ctypes.addressof(s) for s in slots])
        plan = _Plan(tuple(binders), slots, params, ctypes.addressof(params),
                     arrays.current_stream(kinds, self.device),
                     tuple(i for i, k in enumerate(kinds) if k == "numpy"),
                     driver.cuda().cuLaunchKernel, threading.get_ident())
        self._plans[tuple(map(type, args))] = plan
        return plan

    def __call__(self, *args: Any, grid: Sequence[int] | None = None,
                 block: Sequence[int] | None = None, stream: Any = None) -> None:
        fast = self._fast
        if fast is not None and len(args) == self._arity and block is None and \
                fast(*args, stream, grid):
            return
        types = tuple(map(type, args))
        plan = self._plans.get(types)
        if plan is None or plan.owner != threading.get_ident():
            plan = self._plan(args)
        dims = self._launch_dims(grid, block)
        if self.spec.block is None or block is not None or plan.staged:
            self._call_slow(plan, args, dims, stream)
            return
        self._fast = _fast_launcher(self, plan, types)
        self._fast(*args, stream, grid)

    def _launch(self, plan: _Plan, dims: Dims, stream: int) -> None:
        def launch() -> Any:
            return plan.launch(self.function, *dims, 0, stream, plan.address, 0)[0]

        err = launch()
        if err:
            self._retry(err, launch)

    def _retry(self, err: Any, launch: Callable[[], Any]) -> None:
        """The fast path does not set our context: a thread's first launch, or one after
        another library switched the thread's context, fails with CUDA_ERROR_INVALID_CONTEXT
        (or _HANDLE). Then set it and `launch` once more; raise any other error."""
        if driver.context_lost(err):
            driver.context(self.device)
            err = launch()
        check("cuLaunchKernel", driver.result(err))

    def _call_slow(self, plan: _Plan, args: tuple[Any, ...], dims: Dims, stream: Any) -> None:
        """Launch dims given per call, or NumPy arguments: check all, copy host arrays in,
        launch, and when there were host arrays wait and copy the written ones out."""
        values = [bind(arg) for bind, arg in zip(plan.binders, args, strict=True)]
        if plan.staged:
            driver.context(self.device)
        staged: dict[int, DeviceBuffer] = {}
        try:
            for i in plan.staged:
                staged[i] = DeviceBuffer.from_array(values[i], self.device)
            for i, (slot, value) in enumerate(zip(plan.slots, values, strict=True)):
                slot.value = staged[i].ptr if i in staged else value
            self._launch(plan, dims, plan.stream() if stream is None
                         else arrays.stream_handle(stream))
            if staged:
                driver.synchronize()
            for i, buffer in staged.items():
                if self.spec.params[i].writes:
                    host: np.ndarray = args[i]
                    host[...] = buffer.numpy()
        finally:
            for buffer in staged.values():
                buffer.close()

    def new_outputs(self, like: Any = None) -> list[Any]:
        """Fresh arrays for the parameters the kernel writes, in order, of the kind and on
        the device of `like` (see arrays.empty)."""
        return [arrays.empty(p.shape, p.dtype, like, self.device)
                for p in self.spec.params if p.is_memref and p.writes]


def _fast_launcher(kernel: Kernel, plan: _Plan, types: tuple[type, ...]) -> Any:
    """A launcher written for one argument-type signature, as Triton writes its
    launchers: the type checks, each argument's binder, the stream, the grid (the
    kernel's own, or the call's) and the launch with the constants bound by name, with
    no loop, tuple or dict per call. The launch is the compiled launcher's
    (runtime/_launch.c: the values packed in C) where it was built, else the plan's
    ctypes slots and cuda-python's cuLaunchKernel, then only from the thread that made
    the plan. It answers False (and launches nothing) when the argument types (or that
    thread) differ, or no grid is known, and the caller takes the general path (which
    raises the errors)."""
    n = len(types)
    names = [f"a{i}" for i in range(n)]
    block = kernel.spec.block
    assert block is not None
    native_type = driver.native_launcher(kernel.function)
    same = [f"type(a{i}) is T{i}" for i in range(n)]
    if native_type is None:
        same.append("get_ident() == OWNER")
    lines = [f"def fast({', '.join([*names, 'stream', 'grid'])}):",
             f"    if not ({' and '.join(same)}):", "        return False",
             "    if grid is None:",
             "        if GRID is None:", "            return False",
             "        gx, gy, gz = GRID",
             "    else:",
             "        gx, gy, gz = (*grid, 1, 1)[:3]",
             "    handle = STREAM() if stream is None else HANDLE(stream)"]
    if native_type is not None:
        values = ", ".join(f"B{i}(a{i})" for i in range(n))
        launch = f"NATIVE(handle, gx, gy, gz{', ' if n else ''}{values})"
    else:
        lines += [f"    S{i}.value = B{i}(a{i})" for i in range(n)]
        launch = "LAUNCH(F, gx, gy, gz, BX, BY, BZ, 0, handle, ADDRESS, 0)[0]"
    lines += [f"    err = {launch}", "    if err:", f"        RETRY(err, lambda: {launch})",
              "    return True"]
    namespace: dict[str, Any] = {
        "get_ident": threading.get_ident, "OWNER": plan.owner, "STREAM": plan.stream,
        "HANDLE": arrays.stream_handle, "LAUNCH": plan.launch, "F": kernel.function,
        "ADDRESS": plan.address, "GRID": kernel.spec.grid, "RETRY": kernel._retry,
        "BX": block[0], "BY": block[1], "BZ": block[2],
        **{f"T{i}": t for i, t in enumerate(types)},
        **{f"B{i}": b for i, b in enumerate(plan.binders)},
        **{f"S{i}": s for i, s in enumerate(plan.slots)},
    }
    if native_type is not None:
        namespace["NATIVE"] = native_type(int(kernel.function), (1, 1, 1), block,
                                          kernel.letters,
                                          (None,) * n).launch_grid
    exec(compile("\n".join(lines) + "\n", f"<launcher of {kernel.spec.name}>", "exec"),
         namespace)
    return namespace["fast"]


class LoadedModule:
    """A cubin, or PTX that the driver compiles for the device, loaded on a device."""

    def __init__(self, image: bytes, specs: Mapping[str, KernelSpec], kind: str = "cubin",
                 device: int = 0):
        driver.context(device)
        data = image + b"\0" if kind == "ptx" else image  # PTX is passed NUL-terminated
        self.handle = check("cuModuleLoadData", driver.cuda().cuModuleLoadData(data))
        self.kind = kind
        self.kernels: dict[str, Kernel] = {}
        for name, spec in specs.items():
            function = check("cuModuleGetFunction",
                             driver.cuda().cuModuleGetFunction(self.handle, name.encode()))
            driver.allow_cluster(function)
            self.kernels[name] = Kernel(spec, function, device, kind)

    def __getitem__(self, name: str) -> Kernel:
        return self.kernels[name]
