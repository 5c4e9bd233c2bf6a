"""Plans: what a call resolves to, written as a Python launcher for every call like it.

An op's semantics (functions.py, reductions.py, rope.py...) describe one call to a
`Builder`: the outputs to allocate (shape, dtype) or to reuse (`out=`, an input for
in place), temporaries (a reduction's partials), and the launches: a loaded kernel, its
grid, and per kernel argument a constant, a pointer (`Ptr`: an argument's, an
output's or a temporary's pointer this call, plus a constant byte offset: minus its
misalignment, plus the offset of a view) or a number (`Num`: a Python expression over
the call's parameters, such as `alpha` or `1.0 / other`). Checks on the values (a
range, min_val <= max_val) and how to form the result are expressions too.

`Builder.finish()` writes the plan as Python source and compiles it once (as
runtime/kernel.py's `_fast_launcher` and Triton's launchers do): for a later call
whose key matched (entry.py), the launcher allocates the outputs (torch: from an input
of the call, `_torch_alloc`; cupy.empty), reads the caller's current stream and passes
the pointers and numbers of each launch to its launcher (the constants packed once),
which packs them and calls cuLaunchKernel; no loop, no dict, no helper per argument.
Given a `Prologue` (entry.py's inline cache), the source has a second function,
`checked(<the op's parameters>)`, whose own checks read the pointers or answer `_MISS`,
followed by the same statements.

Each launch goes through the compiled launcher (runtime/_launch.c, built by pip
install: the values packed in C, cuLaunchKernel called directly) when it was built;
otherwise through ctypes parameter slots, which are shared state: such a launcher
belongs to the thread that made it, and a call from another thread runs a fresh copy
with slots of its own (correct, slower).
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tile_mlir.contract import KERNEL_ARG_ALIGN
from tile_mlir.dtypes import DTYPES
from tile_mlir.ops import args, kernels
from tile_mlir.ops.args import Array
from tile_mlir.ops.kernels import Loaded
from tile_mlir.ops.programs import KernelProgram


@dataclass(frozen=True)
class Ptr:
    """A pointer known per call: the variable `root` holds it, plus `delta` bytes."""

    root: str
    delta: int = 0


@dataclass(frozen=True)
class Num:
    """A number computed per call: a Python expression over the call's parameters and the
    plan's names."""

    expr: str


Value = bool | int | float | Ptr | Num


@dataclass
class _Launch:
    program: KernelProgram
    grid: tuple[int, int, int]
    values: list[Value]
    kernel: Loaded | None = None  # loaded by finish()


@dataclass(frozen=True)
class _Like:
    """A torch tensor parameter of the call, as an output may be allocated from it: what
    the key fixes of it (no reference: a plan must not keep a call's tensors alive)."""

    name: str  # the launcher's parameter
    shape: tuple[int, ...]  # the tensor's own (whatever view of it the semantics placed)
    strides: tuple[int, ...]
    dtype: Any  # the torch dtype
    device: int | None


@dataclass
class _Alloc:
    var: str
    shape: tuple[int, ...]
    dtype: str
    fill: bool | int | float | None = None  # made filled with this value


HELPERS: dict[str, Any] = {}
"""Names every plan's expressions may use (filled by the modules that need them)."""


class Unsupported(Exception):
    """Raised by semantics that cannot make a plan for this call (the caller then runs it
    without one)."""


@dataclass
class Builder:
    """One call's plan, as the op's semantics write it."""

    op: str
    params: tuple[str, ...]  # the launcher's parameters, in order (the op's and pointers)
    kind: str = ""
    device: int = 0
    device_object: Any = None  # torch: the device the outputs are allocated on
    cacheable: bool = True
    allocs: list[_Alloc] = field(default_factory=list)
    launches: list[_Launch] = field(default_factory=list)
    statements: list[str] = field(default_factory=list)  # checks and derived values, in order
    guards: list[str] = field(default_factory=list)
    names: dict[str, Any] = field(default_factory=dict)
    objects: dict[str, str] = field(default_factory=dict)  # pointer var -> object expr
    result: str = "None"
    likes: dict[str, _Like] = field(default_factory=dict)  # inputs an output may be made like

    # --------------------------------------------------------------- placement

    def place(self, arrays: Sequence[Array]) -> tuple[str, int]:
        """The call's kind and device, from its arrays (args.place: errors name them)."""
        kind, device = args.place(arrays)
        self.set_place(kind, device, arrays[0].obj)
        for a in arrays:  # the torch tensor parameters among them (or views of them)
            name = a.root[3:]
            if a.kind == "torch" and a.root.startswith("_p_") and name in self.params and \
                    name not in self.likes and hasattr(a.obj, "new_empty"):
                self.likes[name] = _Like(name, tuple(a.obj.shape), tuple(a.obj.stride()),
                                         a.obj.dtype, a.device)
        return kind, device

    def set_place(self, kind: str, device: int, like: Any = None) -> None:
        self.kind, self.device = kind, device
        if kind == "torch" and self.device_object is None:
            self.device_object = like.device if like is not None else \
                args.torch_module().device("cuda", device)

    # ----------------------------------------------------------------- buffers

    def _buffer(self, prefix: str, shape: Sequence[int], dtype: str, name: str,
                fill: bool | int | float | None = None) -> Array:
        var = f"_{prefix}{sum(1 for a in self.allocs if a.var.startswith('_' + prefix))}"
        self.allocs.append(_Alloc(var, tuple(shape), dtype, fill))
        root = f"_p_{var}"
        self.objects[root] = var
        strides = args.row_major(shape)
        device = None if self.kind == "numpy" else self.device
        return Array(name, self.kind, dtype, tuple(shape), strides, 0, device, None, root)

    def output(self, shape: Sequence[int], dtype: str, name: str = "out") -> Array:
        """A new output of the call's kind (allocated by the launcher, aligned)."""
        return self._buffer("o", shape, dtype, name)

    def filled(self, shape: Sequence[int], dtype: str, value: bool | int | float,
               name: str = "out") -> Array:
        """A new output made with every element `value` (torch.full and the like), for
        the kinds whose allocators fill (torch, CuPy, NumPy); see `fills`."""
        assert self.fills, "fill with a kernel where the allocator cannot"
        return self._buffer("o", shape, dtype, name, value)

    @property
    def fills(self) -> bool:
        return self.kind in ("torch", "cupy", "numpy")

    def temporary(self, shape: Sequence[int], dtype: str) -> Array:
        """A buffer for one call's intermediate values (a reduction's partials)."""
        return self._buffer("t", shape, dtype, "temporary")

    def constant(self, obj: Any, array: Array) -> Array:
        """An array the plan holds (RoPE's cos/sin cache): its pointer is a constant."""
        self.name(obj)  # keeps it alive as long as the plan
        return Array(array.name, array.kind, array.dtype, array.shape, array.strides,
                     array.pointer, array.device, obj, "")

    def object_of(self, array: Array) -> str:
        """The launcher's expression for the object behind an array (for the result)."""
        return self.objects[array.root]

    # ----------------------------------------------------------------- values

    def pointer(self, array: Array) -> Value:
        """An array's kernel pointer: its aligned base (the element offset goes to the
        kernel separately), per call unless the array is a constant."""
        base_delta = array.delta - array.misalignment
        if not array.root:
            return array.pointer - array.misalignment
        return Ptr(array.root, base_delta)

    def name(self, obj: Any, prefix: str = "C") -> str:
        """A name for an object the plan's expressions use."""
        for existing, value in self.names.items():
            if value is obj:
                return existing
        name = f"_{prefix}{len(self.names)}"
        self.names[name] = obj
        return name

    def derive(self, expr: str) -> str:
        """A value computed once per call before the launches; its variable's name."""
        var = f"_d{sum(1 for s in self.statements if s.startswith('_d'))}"
        self.statements.append(f"{var} = {expr}")
        return var

    def check(self, condition: str, raiser: str) -> None:
        """`raiser` (a call that raises) runs when `condition` holds, every call (before
        anything derived after this)."""
        self.statements.append(f"if {condition}:\n        {raiser}")

    def spans_meet(self, out: Array, given: Array) -> str:
        """The per-call condition that the byte ranges of two arrays meet (either's
        pointer read per call, or constant)."""
        def at(array: Array, offset: int) -> str:
            return f"{array.root} + {array.delta + offset}" if array.root else \
                str(array.pointer + offset)

        (out_low, out_high), (low, high) = args.span(out), args.span(given)
        return (f"{at(out, out_low)} < {at(given, high)} and "
                f"{at(given, low)} < {at(out, out_high)}")

    def disjoint(self, out: Array, given: Array, what: str) -> None:
        """Refuse, every call, an output overlapping an input whose pointer comes from
        elsewhere (the key fixes the layouts, not where the arrays lie): their byte
        ranges compared with constants from the plan."""
        if out.root == given.root or not args.dense(out) or not args.dense(given):
            return  # one pointer: the plan checked their places once and for all; or
            # views with gaps, whose overlap torch does not prove either
        made = {f"_p_{alloc.var}" for alloc in self.allocs}
        if out.root in made or given.root in made:
            return  # the plan's own buffers lie apart from everything
        self.check(self.spans_meet(out, given),
                   f"_OVERLAP({what!r}, {out.name!r}, {given.name!r})")

    def guard(self, condition: str) -> None:
        """When `condition` holds the call takes the full path instead of this plan."""
        self.guards.append(condition)

    def launch(self, program: KernelProgram, grid: tuple[int, int, int],
               values: Sequence[Value]) -> None:
        """A kernel launch (loaded when the plan is finished)."""
        if len(values) != len(program.params()):
            raise RuntimeError(f"{program.name}: {len(values)} values for "
                               f"{len(program.params())} arguments")
        self.launches.append(_Launch(program, grid, list(values)))

    # ------------------------------------------------------------------ finish

    def finish(self, prologue: Prologue | None = None) -> Launcher:
        """Load the kernels, write the launcher (with a checked entry after `prologue`)."""
        for launch in self.launches:
            launch.kernel = kernels.get(launch.program, self.device)
        return Launcher(self, prologue)


def _pointer_text(ptr: Ptr) -> str:
    if not ptr.delta:
        return ptr.root
    return f"{ptr.root} {'+' if ptr.delta > 0 else '-'} {abs(ptr.delta)}"


# ------------------------------------------------------------------- source


def _alloc_lines(plan: Builder, names: dict[str, Any]) -> list[str]:
    """Allocate the outputs and temporaries, read their pointers (aligned by the
    allocators: torch's, CuPy's and the driver's give 256 bytes and more)."""
    lines = []
    for n, alloc in enumerate(plan.allocs):
        shape = f"_SHAPE{n}"
        names[shape] = alloc.shape
        if alloc.fill is not None:
            names[f"_FILL{n}"] = alloc.fill
            lines.append(f"    {alloc.var} = _FULL_OF({shape}, _FILL{n}, {alloc.dtype!r}, "
                         f"{plan.kind!r}, {plan.device})")
            pointer = "0" if plan.kind == "numpy" else f"_POINTER({alloc.var})"
            lines.append(f"    _p_{alloc.var} = {pointer}")
            continue
        if plan.kind == "numpy":  # a plan with nothing to launch: no pointer needed
            lines.append(f"    {alloc.var} = _ALLOC(_SHAPE{n}, {alloc.dtype!r}, 'numpy', 0)")
            lines.append(f"    _p_{alloc.var} = 0")
            continue
        if plan.kind == "torch":
            torch = args.torch_module()
            dtype = names[f"_DT{n}"] = getattr(torch, DTYPES[alloc.dtype].numpy)
            lines.append(f"    {alloc.var} = {_torch_alloc(plan, alloc, n, dtype, names)}")
            lines.append(f"    _p_{alloc.var} = {alloc.var}.data_ptr()")
        else:
            lines.append(f"    {alloc.var} = _ALLOC({shape}, {alloc.dtype!r}, {plan.kind!r}, "
                         f"{plan.device})")
            pointer = f"{alloc.var}.data.ptr" if plan.kind == "cupy" else \
                f"_POINTER({alloc.var})"
            lines.append(f"    _p_{alloc.var} = {pointer}")
        lines.append(f"    if _p_{alloc.var} & {KERNEL_ARG_ALIGN - 1}:\n"
                     f"        _MISALIGNED({alloc.var})")
    return lines


def _cuda_empty() -> Any:
    """torch's allocator entry for the code inductor generates,
    `torch._C._dynamo.guards._empty_strided_cuda(shape, strides, dtype)`: no argument
    parser (a few us less than torch.empty_like's on an H100 host), on the current
    device; so only where one GPU is visible (the current device is then the plan's:
    with several, a thread may have made another one current). None where this torch
    has no such function."""
    torch = args.torch_module()
    guards = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
    fast = getattr(guards, "_empty_strided_cuda", None)
    cuda = getattr(torch, "cuda", None)
    if fast is None or cuda is None or cuda.device_count() != 1:
        return None
    return fast


def _torch_alloc(plan: Builder, alloc: _Alloc, n: int, dtype: Any, names: dict[str, Any]
                 ) -> str:
    """A torch output: with one GPU visible, by `_cuda_empty` (row-major). Else made from
    an input parameter where there is one on its device (host us on an H100 host, beside
    torch.empty(shape, dtype=, device=)'s 3.1): torch.empty_like of an input of the
    output's shape that lies row-major (1.7; its shape and strides are in the key, so
    this holds for every call of the plan, and empty_like then gives row-major strides
    too), else the input's new_empty(shape)
    (2.3, 2.8 with a dtype); else torch.empty. A torch subclass passed for that input
    gets torch.empty: its methods would dispatch to the subclass."""
    row_major = args.row_major(alloc.shape)
    fast = _cuda_empty()
    if fast is not None:
        names["_EMPTY_CUDA"], names[f"_STRIDES{n}"] = fast, tuple(row_major)
        return f"_EMPTY_CUDA(_SHAPE{n}, _STRIDES{n}, _DT{n})"
    empty = f"_EMPTY(_SHAPE{n}, dtype=_DT{n}, device=_DEV)"
    alike: list[tuple[str, str]] = []  # (the input's name, how to allocate from it)
    others: list[tuple[str, str]] = []
    for like in plan.likes.values():
        if like.device != plan.device:
            continue
        given = "" if like.dtype is dtype else f", dtype=_DT{n}"
        if like.shape == alloc.shape and like.strides == row_major:
            alike.append((like.name, f"_EMPTY_LIKE({like.name}{given})"))
        else:
            others.append((like.name, f"{like.name}.new_empty(_SHAPE{n}{given})"))
    if not alike + others:
        return empty
    name, made = (alike + others)[0]
    return f"{made} if type({name}) is _TENSOR else {empty}"


def _stream_line(plan: Builder, names: dict[str, Any]) -> str:
    if plan.kind == "torch":
        names["_STREAM"] = args.torch_module()._C._cuda_getCurrentRawStream
        return f"    _h = _STREAM({plan.device})"
    if plan.kind == "cupy":
        cupy = sys.modules["cupy"]
        names["_CUPY"] = cupy
        return "    _h = _CUPY.cuda.get_current_stream().ptr"
    return "    _h = 0"


def _per_call(launch: _Launch) -> list[str]:
    """The expressions of a launch's per-call values (pointers and numbers), in order."""
    return [_pointer_text(v) if isinstance(v, Ptr) else v.expr
            for v in launch.values if isinstance(v, Ptr | Num)]


def _launch_lines(n: int, launch: _Launch) -> list[str]:
    call = f"_L{n}({', '.join(['_h', *_per_call(launch)])})"
    return [f"    _e = {call}", f"    if _e and _RETRY{n}(_e):\n        _FAIL({n}, {call})"]


@dataclass(frozen=True)
class Prologue:
    """A second entry into a launcher, for calls like the one that made it (entry.py's
    inline cache): `checked(<params>)` runs `lines` first, which answer `_MISS` for a
    call the plan may not serve and otherwise set every pointer variable the launcher
    takes; `names` holds the constants they use."""

    params: tuple[str, ...]
    lines: tuple[str, ...]
    names: dict[str, Any]


def source(plan: Builder, names: dict[str, Any], prologue: Prologue | None = None) -> str:
    """The launcher's Python source (with `checked` after `launch` where a prologue is
    given); `names` receives the constants it refers to."""
    body = _body(plan, names)
    text = "\n".join([f"def launch({', '.join(plan.params)}):", *body]) + "\n"
    if prologue is None:
        return text
    names.update(prologue.names)
    return text + "\n".join([f"def checked({', '.join(prologue.params)}):",
                             *(f"    {line}" for line in prologue.lines), *body]) + "\n"


def _body(plan: Builder, names: dict[str, Any]) -> list[str]:
    """The launcher's statements after its signature."""
    params = ", ".join(plan.params)
    lines: list[str] = []
    if any(launch.kernel is None or launch.kernel.native is None for launch in plan.launches):
        # ctypes parameter slots: this thread's own (the compiled launcher packs per call)
        lines += ["    if not _LOCAL.mine:", f"        return _OTHER_THREAD({params})"]
    for condition in plan.guards:
        lines.append(f"    if {condition}:\n        return _FULL({params})")
    lines.extend(f"    {line}" for line in plan.statements)
    lines.extend(_alloc_lines(plan, names))
    if plan.launches:
        lines.append(_stream_line(plan, names))
    for n, launch in enumerate(plan.launches):
        lines.extend(_launch_lines(n, launch))
    lines.append(f"    return {plan.result}")
    return lines


class _Mine(threading.local):
    """True in the thread that made the launcher's parameter buffers."""

    mine = False


def _overlap(what: str, out: str, given: str) -> None:
    prefix = f"{what}: " if what else ""
    raise ValueError(f"{prefix}argument '{out}' overlaps argument '{given}' without being "
                     "the same view of it: some elements would be read after they were "
                     "written")


HELPERS["_OVERLAP"] = _overlap


def _misaligned(obj: Any) -> None:
    raise RuntimeError(f"tile_mlir.ops: an allocator returned a pointer not aligned to "
                       f"{KERNEL_ARG_ALIGN} bytes ({type(obj).__name__})")


def _fail(n: int, error: Any) -> None:
    if error:
        from tile_mlir.runtime import driver

        error = driver.result(error)
        driver.check(f"cuLaunchKernel (launch {n} of a tile_mlir.ops plan)", (error,))


class Launcher:
    """A plan as a compiled Python function; call it with the launcher's parameters."""

    def __init__(self, plan: Builder, prologue: Prologue | None = None):
        self.plan = plan
        names: dict[str, Any] = {}
        text = source(plan, names, prologue)
        self.text = text
        self.code = compile(text, f"<tile_mlir.ops plan of {plan.op}>", "exec")
        self.constants = names
        self.full: Callable[..., Any] | None = None  # the op's full path (set by entry.py)
        self.checked: Callable[..., Any] | None = None  # with a prologue: its entry
        self.function = self._instance()

    def _instance(self) -> Callable[..., Any]:
        """The launcher with parameter buffers of its own, owned by the calling thread
        (and `checked`, the prologue's entry, set from the first)."""
        plan = self.plan
        mine = _Mine()
        mine.mine = True
        namespace: dict[str, Any] = {
            **HELPERS, **plan.names, **self.constants, "_LOCAL": mine,
            "_OTHER_THREAD": self._other_thread, "_FULL": self._full,
            "_EMPTY": getattr(args.torch_module(), "empty", None) if plan.kind == "torch"
            else None,
            "_EMPTY_LIKE": getattr(args.torch_module(), "empty_like", None)
            if plan.kind == "torch" else None,
            "_TENSOR": getattr(args.torch_module(), "Tensor", None) if plan.kind == "torch"
            else None,
            "_DEV": plan.device_object, "_ALLOC": args.allocate, "_POINTER": args.pointer_of,
            "_FULL_OF": args.full,
            "_MISALIGNED": _misaligned, "_FAIL": _fail,
        }
        for n, launch in enumerate(plan.launches):
            assert launch.kernel is not None
            namespace[f"_L{n}"] = _launcher(launch)
            namespace[f"_RETRY{n}"] = _retrier(launch.kernel)
        exec(self.code, namespace)
        function: Callable[..., Any] = namespace["launch"]
        if self.checked is None:
            self.checked = namespace.get("checked")
        return function

    def _other_thread(self, *values: Any) -> Any:
        return self._instance()(*values)

    def _full(self, *values: Any) -> Any:
        assert self.full is not None, "a guarded plan needs its op's full path"
        return self.full(*values)

    def __call__(self, *values: Any) -> Any:
        return self.function(*values)


def _launcher(launch: _Launch) -> Callable[..., Any]:
    """`launch(stream, *per-call values) -> CUresult`: the compiled launcher's when it was
    built (runtime/_launch.c), else ctypes slots written by a generated function and
    cuda-python's cuLaunchKernel."""
    kernel = launch.kernel
    assert kernel is not None
    constants = tuple(None if isinstance(v, Ptr | Num) else v for v in launch.values)
    if kernel.native is not None:
        native = kernel.native(int(kernel.function), launch.grid, kernel.block,
                               kernel.letters, constants)
        bound: Callable[..., Any] = native.launch
        return bound
    slots = [ctype() for ctype in kernel.ctypes]
    for slot, value in zip(slots, constants, strict=True):
        if value is not None:
            slot.value = value
    params = (ctypes.c_void_p * max(len(slots), 1))(*[ctypes.addressof(s) for s in slots])
    per_call = [j for j, value in enumerate(constants) if value is None]
    values = "".join(f", v{j}" for j in per_call)
    dims = ", ".join(map(str, (*launch.grid, *kernel.block)))
    text = (f"def launch(h{values}):\n"
            + "".join(f"    S{j}.value = v{j}\n" for j in per_call)
            + f"    return LAUNCH(F, {dims}, 0, h, ADDRESS, 0)[0]\n")
    namespace: dict[str, Any] = {
        "LAUNCH": kernel.launch, "F": kernel.function, "ADDRESS": ctypes.addressof(params),
        "KEEP": (slots, params), **{f"S{j}": slots[j] for j in per_call}}
    exec(compile(text, f"<launch of {kernel.name}>", "exec"), namespace)
    function: Callable[..., Any] = namespace["launch"]
    return function


def _retrier(kernel: Loaded) -> Callable[[Any], bool]:
    return lambda error: kernels.retry(kernel, error)

