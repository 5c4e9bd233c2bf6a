"""`@tl.kernel`: a Python function that builds a tile program, and its three uses. Imports
no MLIR until a program is built.

    @tl.kernel(threads=256)
    def add(a: tl.Tensor, b: tl.Tensor, c: tl.Tensor, TILE: tl.constexpr = 2048): ...

    add[grid](a, b, c)              # specialize, compile (kernel cache), launch
    add.ir(a, b, c)                 # the tile IR of that specialization, as text
    add.build(spec, context=ctx)    # an ir.Module in a host's own Context
    add.emit(spec, into=module)     # the kernel added to a host's module

A kernel is compiled per Specialization (spec.py). Its cache request names the
function (module and qualname), a hash of its file's source and the
specialization, so a process without MLIR finds it in a warm cache; the
compiler's own files are in every key (runtime/cache.py).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import marshal
import pickle
import sys
import typing
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tile_mlir.dtypes import DTYPES
from tile_mlir.lang import launch
from tile_mlir.lang.arrays import Described
from tile_mlir.lang.errors import ArgumentError, ProgramError
from tile_mlir.lang.spec import (
    NO_DEFAULT,
    Bound,
    KernelInfo,
    ParamInfo,
    Specialization,
    kernel_values,
    specialize,
)
from tile_mlir.lang.values import PARAMETER_SCALARS, Scalar, Tensor, TensorType, constexpr

if TYPE_CHECKING:
    from mlir import ir

    from tile_mlir.runtime.kernel import Kernel
    from tile_mlir.runtime.program import Program

F = TypeVar("F", bound=Callable[..., Any])

RESERVED = ("grid", "stream")
"""Keyword arguments of a launch, so no parameter may take these names."""


def _user_error(e: Exception) -> bool:
    """A mistake of the user's, which surfaces without this package's frames."""
    if isinstance(e, ProgramError | ArgumentError):
        return True
    diagnostics = sys.modules.get("tile_mlir.diagnostics")  # loaded if MLIR ran
    return diagnostics is not None and isinstance(e, diagnostics.CompileError)


def _user_facing(method: F) -> F:
    """Re-raise the user's mistakes from the API's own frame (the located message says
    where the mistake is; frames of the builder would only hide it)."""
    @functools.wraps(method)
    def api(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except Exception as e:
            if _user_error(e):
                raise e.with_traceback(None) from None
            raise

    return api  # type: ignore[return-value]


# ------------------------------------------------------------------ annotations


def _annotations(fn: Callable[..., Any]) -> dict[str, Any]:
    """The parameters' annotations, evaluated (strings too: `from __future__ import
    annotations`), in the function's globals and the names it closes over."""
    raw = dict(getattr(fn, "__annotations__", {}))
    scope = dict(fn.__globals__)
    code = fn.__code__
    for name, cell in zip(code.co_freevars, fn.__closure__ or (), strict=True):
        try:
            scope[name] = cell.cell_contents
        except ValueError:  # a cell not filled yet
            continue
    return {name: eval(value, scope) if isinstance(value, str) else value
            for name, value in raw.items()}


def _param(name: str, annotation: Any, default: Any, where: str) -> ParamInfo:
    if typing.get_origin(annotation) is typing.Annotated:
        base, *meta = typing.get_args(annotation)
        if base is Tensor:
            return ParamInfo(name, "tensor", TensorType.parse(tuple(meta)), default=default)
        annotation = base
    if annotation is Tensor:
        return ParamInfo(name, "tensor", TensorType(), default=default)
    if isinstance(annotation, TensorType):
        return ParamInfo(name, "tensor", annotation, default=default)
    if annotation is constexpr:
        return ParamInfo(name, "constexpr", default=default)
    if isinstance(annotation, type) and issubclass(annotation, Scalar) and annotation.dtype:
        if annotation.dtype not in PARAMETER_SCALARS:
            raise TypeError(f"{where}: parameter '{name}': scalar parameters are "
                            f"{', '.join(PARAMETER_SCALARS)}, not {annotation.dtype}")
        return ParamInfo(name, "scalar", dtype=annotation.dtype, default=default)
    raise TypeError(f"{where}: parameter '{name}' needs an annotation: tl.Tensor (or "
                    "tl.Tensor[dtype, dims]), a scalar type (tl.f32, tl.i64...) or "
                    f"tl.constexpr; got {annotation!r}")


def kernel_info(fn: Callable[..., Any], threads: Any, name: str, static: tuple[str, ...],
                index_bits: int | None, *, cluster: Any = None, occupancy: Any = None
                ) -> KernelInfo:
    """What the specialization needs of a kernel function, from its signature."""
    where = f"@tl.kernel {fn.__qualname__}"
    annotations = _annotations(fn)
    params = []
    is_open = False
    for p in inspect.signature(fn).parameters.values():
        if p.kind == p.VAR_KEYWORD:
            is_open = True
            continue
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise TypeError(f"{where}: parameter '{p.name}': no *args")
        if p.name in RESERVED:
            raise TypeError(f"{where}: '{p.name}' is a launch keyword, not a parameter name")
        default = p.default if p.default is not p.empty else NO_DEFAULT
        params.append(_param(p.name, annotations.get(p.name), default, where))
    _check_dims(params, static, where)
    qualname = f"{fn.__module__}.{fn.__qualname__}"
    return KernelInfo(name, qualname, tuple(params), threads, static, index_bits,
                      cluster=cluster, occupancy=occupancy, open=is_open)


def _check_dims(params: Sequence[ParamInfo], static: Sequence[str], where: str) -> None:
    """Static dims name a Tensor dim; a parameter named like a dim is its integer size."""
    named = {d for p in params for d in p.tensor.dims or () if isinstance(d, str)}
    for dim in static:
        if dim not in named:
            raise TypeError(f"{where}: static dim '{dim}' is not a dim name of any "
                            f"tl.Tensor parameter (names: {', '.join(sorted(named)) or 'none'})")
    for p in params:
        if p.kind != "scalar" or p.name not in named:
            continue
        if DTYPES[p.dtype].kind != "int":
            raise TypeError(f"{where}: parameter '{p.name}' is named like a dim, so it gives "
                            f"that dim's size: an integer (tl.i32 or tl.i64), not {p.dtype}")
        if p.name in static:
            raise TypeError(f"{where}: dim '{p.name}' is given by its parameter; it cannot "
                            "also be static")


def source_hash(fn: Callable[..., Any]) -> str:
    """A hash of the file that defines `fn` (its code object's, where there is no file)."""
    path = Path(fn.__code__.co_filename)
    try:
        data = path.read_bytes()
    except OSError:
        try:
            data = inspect.getsource(fn).encode()
        except (OSError, TypeError):
            data = marshal.dumps(fn.__code__)
    return hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------ the kernel


class KernelFunction:
    """A kernel: call it on arrays (`f[grid](...)`), print its IR (`f.ir(...)`), build it
    into a host's module (`f.build`, `f.emit`), compile it (`f.compile`)."""

    def __init__(self, fn: Callable[..., Any], threads: Any = 256, name: str | None = None,
                 static: Sequence[str] = (), index_bits: int | None = None, *,
                 cluster: Any = None, occupancy: Any = None):
        if index_bits not in (None, 64):
            raise ValueError("index_bits is None (32 where the arrays allow) or 64")
        self.fn = fn
        self.threads = threads
        self.name = name or fn.__name__
        self.static = tuple(static)
        self.index_bits = index_bits
        self.cluster = cluster
        self.occupancy = occupancy
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        # the source as it was defined: an edit after the import must not name this code
        self._source_hash = source_hash(fn)
        self._programs: dict[tuple[Specialization, str], Program] = {}
        self._kernels: dict[tuple[Specialization, int], Kernel] = {}
        self._prepared: dict[tuple[Any, ...], launch.Prepared] = {}

    def __repr__(self) -> str:
        return f"<tl.kernel {self.info.qualname}>"

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        """Pickled by reference, as functions are: the name it is defined under (so that
        what holds a kernel, a library program, goes to worker processes)."""
        where = (self.fn.__module__, self.fn.__qualname__)
        try:
            found = _defined(*where)
        except (ImportError, AttributeError, TypeError):
            found = None
        if found is not self:
            raise pickle.PicklingError(f"cannot pickle {self!r}: it is not the kernel "
                                       f"{'.'.join(where)} names")
        return _defined, where

    @cached_property
    def info(self) -> KernelInfo:
        """The parameters, read on first use (annotations may name what is defined later)."""
        return kernel_info(self.fn, self.threads, self.name, self.static, self.index_bits,
                           cluster=self.cluster, occupancy=self.occupancy)

    @cached_property
    def _constants(self) -> tuple[frozenset[int], frozenset[str]]:
        names = [p.name for p in self.info.params]
        const = [n for n, p in enumerate(self.info.params) if p.kind == "constexpr"]
        return frozenset(const), frozenset(names[n] for n in const)

    # ------------------------------------------------------------ arguments

    def _values(self, args: Sequence[Any], kwargs: Mapping[str, Any]
                ) -> tuple[list[Any], list[int]]:
        """One value per parameter (defaults filled in), and where each non-constexpr one
        was among the positional arguments (-1: by keyword)."""
        params = self.info.params
        if self.info.open:
            raise ArgumentError(f"{self.name}() takes the parameters its Specialization names "
                                "(**): it is built from Specializations its caller makes "
                                "(emit, build, ir, compile), not specialized on arguments")
        if len(args) > len(params):
            raise ArgumentError(f"{self.name}() takes {len(params)} arguments "
                                f"({', '.join(p.name for p in params)}), got {len(args)}")
        names = [p.name for p in params]
        unknown = [k for k in kwargs if k not in names]
        if unknown:
            raise ArgumentError(f"{self.name}() has no parameter '{unknown[0]}'")
        values = []
        for n, p in enumerate(params):
            if n < len(args):
                if p.name in kwargs:
                    raise ArgumentError(f"{self.name}(): argument '{p.name}' given twice")
                values.append(args[n])
            elif p.name in kwargs:
                values.append(kwargs[p.name])
            elif p.has_default:
                values.append(p.default)
            else:
                raise ArgumentError(f"{self.name}(): missing argument '{p.name}'")
        positions = [n if n < len(args) else -1 for n, p in enumerate(params)
                     if p.kind != "constexpr"]
        return values, positions

    @_user_facing
    def bind(self, *args: Any, **kwargs: Any) -> Bound:
        """Check the arguments and specialize on them (errors name the argument)."""
        values, _ = self._values(args, kwargs)
        return specialize(self.info, values)

    @_user_facing
    def signature(self, *args: Any, **kwargs: Any) -> Specialization:
        """The specialization these arguments (arrays, tl.ArrayDesc, numbers, constexprs)
        compile the kernel for."""
        return self.bind(*args, **kwargs).spec

    def _spec(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Specialization:
        if len(args) == 1 and not kwargs and isinstance(args[0], Specialization):
            spec = args[0]
            if spec.kernel != self.info.qualname:
                raise ValueError(f"{spec!r} specializes {spec.kernel}, not "
                                 f"{self.info.qualname}")
            return spec
        return self.signature(*args, **kwargs)

    @_user_facing
    def arguments(self, *args: Any, **kwargs: Any) -> list[Any]:
        """The kernel's argument values for a call (pointers, sizes, strides, offsets and
        numbers, in the order of its specialization's roles)."""
        bound = self.bind(*args, **kwargs)
        return kernel_values(bound.spec, bound.arrays, bound.scalars)

    # ------------------------------------------------------------ building

    @_user_facing
    def build(self, spec: Specialization, context: ir.Context | None = None) -> ir.Module:
        """A module holding the kernel for `spec` (gpu.module @kernels), built in `context`
        (a new one by default; a host's own gets the tile dialect registered)."""
        from mlir import ir

        context = context or ir.Context()
        with context, ir.Location.unknown():
            module = ir.Module.create()
            self.emit(spec, into=module)
        return module

    @_user_facing
    def emit(self, spec: Specialization, into: ir.Module, *, name: str | None = None,
             gpu_module: str = "kernels") -> str:
        """Add the kernel for `spec` to a host's module (in its gpu.module `gpu_module`,
        made where missing) and return its symbol: `name`, or the kernel's name with a
        suffix where the module has that symbol already. The module is verified after."""
        from mlir import ir

        from tile_mlir.lang import builder

        spec = self._spec((spec,), {})
        with into.context, ir.Location.unknown():
            func = builder.emit_kernel(self.fn, spec, into, name=name or self.name,
                                       gpu_module_name=gpu_module)
            self._verify(into)
        symbol: str = ir.StringAttr(func.attributes["sym_name"]).value
        return symbol

    def _sources(self) -> dict[str, str]:
        path = self.fn.__code__.co_filename
        try:
            return {path: Path(path).read_text()}
        except OSError:
            return {}

    def _verify(self, module: ir.Module) -> None:
        from mlir import ir

        from tile_mlir.diagnostics import CompileError, from_mlir_error

        try:
            module.operation.verify()
        except ir.MLIRError as e:
            raise CompileError(from_mlir_error(e), self._sources()) from None

    @_user_facing
    def ir(self, *args: Any, **kwargs: Any) -> str:
        """The tile IR of the kernel for these arguments (or a Specialization) as text:
        what `tile-opt <file> -p tile-to-ptx` lowers to the PTX `compile` makes."""
        module = self.build(self._spec(args, kwargs))
        return str(module.operation.get_asm(use_name_loc_as_prefix=True,
                                            assume_verified=True))

    # ------------------------------------------------------------ compiling

    def request(self, spec: Specialization) -> str:
        """The kernel cache's request for `spec`: computed without MLIR."""
        return (f"tile_mlir.lang kernel {self.info.qualname} @{self.name}\n"
                f"source sha256 {self._source_hash}\nspecialization {spec.key()}\n")

    @_user_facing
    def compile(self, spec_or_args: Specialization | Sequence[Any] = (),
                chip: str | None = None) -> Program:
        """The compiled Program for a specialization (or the arguments of a call), from
        this process's table, the kernel cache, or the compiler."""
        from tile_mlir.runtime import binary
        from tile_mlir.runtime import cache as kernel_cache

        spec = spec_or_args if isinstance(spec_or_args, Specialization) else \
            self.signature(*spec_or_args)
        chip = chip or binary.detect_chip()
        program = self._programs.get((spec, chip))
        if program is not None:
            return program
        request = self.request(spec)
        program = kernel_cache.lookup(request, chip, kernel_cache.compile_options(cubin=True))
        if program is None:
            program = self._compile(spec, chip, request)
        self._programs[(spec, chip)] = program
        return program

    def _compile(self, spec: Specialization, chip: str, request: str) -> Program:
        from tile_mlir.runtime import cache as kernel_cache

        try:
            from tile_mlir.compiler import compile as compile_
        except ImportError as e:
            raise kernel_cache.CompilerUnavailableError(e) from e
        module = self.build(spec)
        return compile_(module, chip=chip, name=f"<{self.info.qualname}>", request=request,
                        sources=self._sources())

    def kernel(self, spec: Specialization, device: int = 0) -> Kernel:
        """The runtime Kernel for `spec`, compiled and loaded on `device`."""
        found = self._kernels.get((spec, device))
        if found is None:
            from tile_mlir.runtime import binary

            program = self.compile(spec, binary.detect_chip(device))
            found = program.kernel(self.name, device)
            self._kernels[(spec, device)] = found
        return found

    # ------------------------------------------------------------ launching

    def __getitem__(self, grid: launch.Grid) -> _Launcher:
        """`f[grid](*args)`: a launch on `grid` (a tuple, or a callable of the bound dims
        and constexprs)."""
        return _Launcher(self, grid)

    def __call__(self, *args: Any, grid: launch.Grid = None, stream: Any = None,
                 **kwargs: Any) -> None:
        """Launch on the arrays: `grid` defaults to the one the kernel fixes (tl.grid)."""
        self._launch(args, kwargs, grid, stream)

    def _launch(self, args: tuple[Any, ...], kwargs: dict[str, Any], grid: launch.Grid,
                stream: Any) -> None:
        constants, names = self._constants
        key, pointers = launch.fast_key(args, kwargs, constants, names)
        prepared = self._prepared.get(key) if key is not None else None
        if prepared is not None and prepared(args, pointers, grid, stream):
            return
        try:
            self._launch_checked(args, kwargs, grid=grid, stream=stream, key=key,
                                 pointers=pointers)
        except Exception as e:
            if _user_error(e):
                raise e.with_traceback(None) from None
            raise

    def _launch_checked(self, args: tuple[Any, ...], kwargs: dict[str, Any], *,
                        grid: launch.Grid, stream: Any, key: tuple[Any, ...] | None,
                        pointers: list[Any]) -> None:
        """The general path: check, specialize, compile, launch; remember the launch."""
        from tile_mlir.runtime import arrays

        values, positions = self._values(args, kwargs)
        bound = specialize(self.info, values)
        for n, d in bound.arrays.items():
            if d.pointer is None and d.kind == "desc":
                raise ArgumentError(f"argument '{bound.spec.params[n].name}': a tl.ArrayDesc "
                                    "without a pointer describes an array; a launch needs "
                                    "one in memory")
        device = _device(bound.arrays)
        kernel = self.kernel(bound.spec, device)
        kinds = [d.kind for d in bound.arrays.values()]
        stream_of = arrays.current_stream(kinds, device)
        dims = {**bound.dims, **dict(bound.spec.constexprs)}
        if "numpy" in kinds:
            resolved = launch.resolve_grid(grid, kernel.spec.grid, dims)
            if bound.spec.cluster is not None:
                launch.check_clusters(resolved, bound.spec.cluster)
            _run_staged(kernel, bound, resolved, stream if stream is not None else stream_of())
            return
        if key is not None and -1 not in positions:
            ready = launch.prepare(kernel, bound, positions, grid=kernel.spec.grid, dims=dims,
                                   stream=stream_of)
            self._prepared[key] = ready
        else:  # an argument the key does not take: read by parameter, not remembered
            args = tuple(v for v, p in zip(values, self.info.params, strict=True)
                         if p.kind != "constexpr")
            pointers = [bound.arrays[n].pointer if n in bound.arrays else v
                        for n, v in enumerate(args)]
            ready = launch.prepare(kernel, bound, range(len(args)), grid=kernel.spec.grid,
                                   dims=dims, stream=stream_of)
        if not ready(args, pointers, grid, stream):
            raise ArgumentError(f"{self.name}(): arrays overlap that the kernel was just "
                                "compiled for as disjoint")


def _defined(module: str, qualname: str) -> KernelFunction:
    """The kernel defined as `qualname` in `module` (unpickling)."""
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    if not isinstance(found, KernelFunction):
        raise TypeError(f"{module}.{qualname} is not a tl.kernel")
    return found


def _device(arrays: Mapping[int, Described]) -> int:
    devices = {d.device for d in arrays.values() if d.device is not None}
    if len(devices) > 1:
        raise ArgumentError(f"the arrays are on several devices: cuda:{sorted(devices)}")
    return devices.pop() if devices else 0


def _run_staged(kernel: Kernel, bound: Bound, grid: tuple[int, ...], stream: Any) -> None:
    """A launch with NumPy arrays: copied to device buffers, the written ones back."""
    import numpy as np

    from tile_mlir.runtime import driver
    from tile_mlir.runtime.memory import DeviceBuffer

    staged = {n: DeviceBuffer.from_array(np.ascontiguousarray(d.obj), 0)
              for n, d in bound.arrays.items() if d.kind == "numpy"}
    try:
        values = kernel_values(bound.spec, bound.arrays, bound.scalars,
                               {n: b.ptr for n, b in staged.items()})
        if 0 not in grid:
            kernel(*values, grid=grid, stream=stream)
        driver.synchronize()
        written = {role.param for role, param in zip(bound.spec.roles, kernel.spec.params,
                                                     strict=True)
                   if role.kind == "array" and param.writes}
        for n, buffer in staged.items():
            if n in written:
                bound.arrays[n].obj[...] = buffer.numpy()
    finally:
        for buffer in staged.values():
            buffer.close()


class _Launcher:
    """`f[grid]`: launches f on a grid."""

    __slots__ = ("grid", "kernel")

    def __init__(self, kernel: KernelFunction, grid: launch.Grid):
        self.kernel, self.grid = kernel, grid

    def __call__(self, *args: Any, stream: Any = None, **kwargs: Any) -> None:
        self.kernel._launch(args, kwargs, self.grid, stream)


@typing.overload
def kernel(fn: Callable[..., Any], *, threads: Any = 256, name: str | None = None,
           static: Sequence[str] = (), index_bits: int | None = None,
           cluster: Any = None, occupancy: Any = None) -> KernelFunction: ...


@typing.overload
def kernel(fn: None = None, *, threads: Any = 256, name: str | None = None,
           static: Sequence[str] = (), index_bits: int | None = None, cluster: Any = None,
           occupancy: Any = None) -> Callable[[Callable[..., Any]], KernelFunction]: ...


def kernel(fn: Callable[..., Any] | None = None, *, threads: Any = 256,
           name: str | None = None, static: Sequence[str] = (),
           index_bits: int | None = None, cluster: Any = None, occupancy: Any = None) -> Any:
    """Make a tile kernel of a Python function: `@tl.kernel` or `@tl.kernel(threads=...)`.

    threads: the CTA's threads, an int, (x, y, z), or a callable of the constexprs and
    static dims (a dict) giving one. name: the gpu.func symbol (default: the function's
    name). static: dim names the kernel is compiled per value of (the body sees ints).
    index_bits: 64 to keep 64-bit indices even where 32 bits would do. cluster: the
    CTAs of a thread block cluster (sm_90), as threads is given: the kernel runs in
    clusters (nvvm.cluster_dim), its ops may take scope `tl.cluster`, and its grid must
    be whole clusters. occupancy: the CTAs an SM should fit at once, as threads is given
    (None: no request): ptxas caps the registers of a thread to fit them
    (.minnctapersm); a request that would make it spill gives way to a lower one that
    does not, or none (toolchain.settle); where it is (ctas, bytes), spilling at most
    that many bytes counts as not spilling.

    A function with `**params` is an open kernel: its parameters are those of the
    Specializations its caller makes (the operator library's kernels, whose operands
    vary), and it is built from them (ir, build, emit, compile), not launched on arrays.
    """
    def wrap(f: Callable[..., Any]) -> KernelFunction:
        return KernelFunction(f, threads, name, static, index_bits, cluster=cluster,
                              occupancy=occupancy)

    return wrap(fn) if fn is not None else wrap
