"""A CTA on the CPU: every thread an OS thread, barriers and warp shuffles between them.

host.py runs a kernel's threads one after another, which computes what the GPU computes
only when threads never meet. Kernels with shared memory, barriers and shuffles (the
reductions, a copy into shared memory read back by other threads) need their threads to
run together: here each thread of a CTA is an OS thread running the kernel's host version
(lowered with host.py's pipeline, one JIT-compiled function for all of them), and what
the GPU does between threads becomes a call into Python:

- `gpu.barrier` (bar.sync 0): every thread of the CTA meets;
- `nvvm.barrier id, count` (a named barrier): `count` threads, counted by warps as the
  hardware counts them (a partial warp counts whole), so a count that no set of warps
  reaches never completes;
- `nvvm.bar.warp.sync mask` and `nvvm.shfl.sync kind mask, value, offset, clamp`: the
  lanes of `mask` meet; a shuffle's source lane is chosen as the PTX ISA says (the
  segment mask and clamp of `clamp`).

What the ISA leaves undefined is an error of the run (EmulationError, with what
happened): a mask naming a lane that the warp does not have (a partial last warp) or that
never arrives, a lane outside its own mask, lanes of one meeting with different masks or
ops, a barrier count that is not whole warps, and any meeting that cannot complete (a
deadlock: some threads wait where others never come). A shuffle that reads a lane outside
the mask gets a NaN, so that a kernel that uses the value shows it. Shared memory
(memref.global in workgroup space) is filled with 0xFF bytes (NaN) before each CTA, so
reading what no thread wrote shows too.

Data races are not detected: a missing barrier shows only when the threads' timing
exposes it.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache
from typing import Any

import numpy as np
from mlir import execution_engine, ir, passmanager

from support import host
from tile_mlir import pipeline
from tile_mlir.context import new_context, parse
from tile_mlir.diagnostics import DiagnosticSink

WARP = 32
POISON = 0x7FC0DEAD
"""What a shuffle reads from a lane it may not read: a quiet NaN as f32."""


class EmulationError(Exception):
    """The kernel did something the PTX ISA leaves undefined (or deadlocked)."""


# ------------------------------------------------------------ the host program

_ID = r"%[\w#$.-]+"
_SHUFFLE = re.compile(rf"({_ID}) = nvvm\.shfl\.sync\s+(\w+) ({_ID}), ({_ID}), ({_ID}), "
                      rf"({_ID}) : (\w+) -> \w+")
_NAMED = re.compile(rf"nvvm\.barrier id = ({_ID}) number_of_threads = ({_ID})")
_WARP_SYNC = re.compile(rf"nvvm\.bar\.warp\.sync ({_ID}) : i32")
_GLOBAL = re.compile(r"memref\.global \"private\" @(\w+) : (memref<([\dx]+)x(\w+)), "
                     r"#gpu\.address_space<workgroup>>")
_KINDS = {"bfly": 0, "up": 1, "down": 2, "idx": 3}
_BYTES = {"f32": 4, "i32": 4, "f16": 2, "bf16": 2, "i64": 8, "f64": 8, "i8": 1, "i1": 1,
          "i16": 2}
_PARAMS = ("%tx_h", "%ty_h", "%tz_h", "%lane_h", "%bx_h", "%by_h", "%bz_h")

_RUNTIME = """
  func.func private @_mlir_ciface_simt_barrier(i32, i32)
  func.func private @_mlir_ciface_simt_warp_sync(i32)
  func.func private @_mlir_ciface_simt_shuffle(i32, i32, i32, i32, i32) -> i32"""


def _shuffle_call(match: re.Match[str]) -> str:
    result, kind, mask, value, offset, clamp, type_ = match.groups()
    if type_ not in ("f32", "i32"):
        raise host.NotEmulated(f"a shuffle of {type_}")
    name = "%simt_" + re.sub(r"\W", "_", result[1:])
    lines = [f"{name}_k = arith.constant {_KINDS[kind]} : i32"]
    bits = value
    if type_ == "f32":
        bits = f"{name}_in"
        lines.append(f"{bits} = arith.bitcast {value} : f32 to i32")
    out = result if type_ == "i32" else f"{name}_out"
    lines.append(f"{out} = func.call @_mlir_ciface_simt_shuffle({name}_k, {mask}, {bits}, "
                 f"{offset}, {clamp}) : (i32, i32, i32, i32, i32) -> i32")
    if type_ == "f32":
        lines.append(f"{result} = arith.bitcast {out} : i32 to f32")
    return "\n".join(lines)


def _thread_ops(body: str) -> str:
    """The ops that meet other threads as calls, the thread's coordinates as parameters."""
    body = _SHUFFLE.sub(_shuffle_call, body)
    body = _NAMED.sub(r"func.call @_mlir_ciface_simt_barrier(\1, \2) : (i32, i32) -> ()", body)
    body = _WARP_SYNC.sub(r"func.call @_mlir_ciface_simt_warp_sync(\1) : (i32) -> ()", body)
    body = re.sub(r"gpu\.barrier\b", "func.call @_mlir_ciface_simt_barrier(%simt_zero, "
                  "%simt_zero) : (i32, i32) -> ()", body)
    for axis, param in zip("xyz", _PARAMS[:3], strict=True):
        body = re.sub(rf"gpu\.thread_id\s+{axis}\b", f"arith.maxui {param}, {param} : index",
                      body)
    for axis, param in zip("xyz", _PARAMS[4:], strict=True):
        body = re.sub(rf"gpu\.block_id\s+{axis}\b", f"arith.maxui {param}, {param} : index",
                      body)
    body = re.sub(r"gpu\.lane_id\b", "arith.maxui %lane_h, %lane_h : index", body)
    stray = re.search(r"\b(gpu|nvvm)[.][\w.]+", body)
    if stray:
        raise host.NotEmulated(f"the kernel uses {stray.group(0)}")
    return body


@dataclass(frozen=True)
class Shared:
    """A shared-memory buffer of the kernel: its symbol, host type and size."""

    name: str
    type: str
    nbytes: int

    def address_function(self) -> str:
        """A host function that returns the buffer's address (the JIT's symbol lookup
        finds functions only)."""
        return f"""
  func.func @address_{self.name}() -> index attributes {{llvm.emit_c_interface}} {{
    %g = memref.get_global @{self.name} : {self.type}>
    %p = memref.extract_aligned_pointer_as_index %g : {self.type}> -> index
    func.return %p : index
  }}"""


@dataclass(frozen=True)
class HostKernel:
    text: str  # the host module
    args: list[tuple[str, str]]
    block: tuple[int, int, int]
    shared: list[Shared]


def host_kernel(text: str, kernel: str | None = None) -> HostKernel:
    """The host module of a tile program's kernel: one function per thread, `@thread`."""
    context = new_context()
    module = parse(text, "kernel.mlir", context)
    sink = DiagnosticSink()
    if not pipeline.run(module, pipeline.Expander().expand("tile-to-gpu"), sink):
        raise RuntimeError("\n".join(str(d) for d in sink.diagnostics))
    gpu_text = host._host_conversions(str(module))
    shared = [Shared(name, type_, math.prod(int(d) for d in dims.split("x")) * _BYTES[elem])
              for name, type_, dims, elem in _GLOBAL.findall(gpu_text)]
    globals_ = [re.sub(r"\"private\" ", "", line.strip()) for line in gpu_text.splitlines()
                if line.strip().startswith("memref.global")]
    gpu_text = re.sub(r", #gpu\.address_space<(private|workgroup)>", "", gpu_text)
    globals_ = [re.sub(r", #gpu\.address_space<(private|workgroup)>", "", g) for g in globals_]
    headers = [m for m in host._HEADER.finditer(gpu_text) if kernel in (None, m.group(1))]
    assert headers, f"no kernel {kernel or ''} in the program"
    match = headers[0]
    _, arg_text, attributes = match.groups()
    dims = re.search(r"known_block_size = array<i32: (\d+), (\d+), (\d+)>", attributes)
    assert dims, "the kernel does not fix its block size"
    block = (int(dims.group(1)), int(dims.group(2)), int(dims.group(3)))
    body = gpu_text[match.end():gpu_text.index("gpu.return", match.end())]
    args = host._split_args(arg_text)
    params = ", ".join([f"{p}: index" for p in _PARAMS] + [f"{n}: {t}" for n, t in args])
    module_text = f"""module {{
{host.FP8_HELPERS}
{host.INTRINSIC_HELPERS}
{_RUNTIME}
  {chr(10).join(globals_)}
{"".join(b.address_function() for b in shared)}
  func.func @thread({params}) attributes {{llvm.emit_c_interface}} {{
    %simt_zero = arith.constant 0 : i32
{_thread_ops(body)}    func.return
  }}
}}
"""
    return HostKernel(module_text, args, block, shared)


# ------------------------------------------------------------ the threads' meetings


@dataclass
class _Meeting:
    """Threads that wait for each other: a barrier's arrivals or a warp op's lanes."""

    what: str
    arrivals: dict[int, tuple[int, ...]] = field(default_factory=dict)  # thread -> payload
    results: dict[int, int] = field(default_factory=dict)
    done: bool = False


class CTA:
    """One CTA's threads and what they wait for. Every wait goes through one condition
    variable; `running` counts the threads neither waiting nor finished, so that a
    state where every thread waits and no meeting can complete is seen at once."""

    def __init__(self, block: tuple[int, int, int]):
        self.block = block
        self.size = math.prod(block)
        self.cond = threading.Condition()
        self.running = self.size
        self.pending: dict[tuple[Any, ...], _Meeting] = {}
        self.errors: list[str] = []
        self.sequence = [0] * self.size  # each thread's warp ops so far

    def present(self, thread: int) -> int:
        """Lanes of the thread's warp that exist (fewer in a partial last warp)."""
        return min(WARP, self.size - thread // WARP * WARP)

    def fail(self, message: str) -> None:
        """Record an error and release every waiting thread (called holding the lock)."""
        if message not in self.errors:
            self.errors.append(message)
        self.cond.notify_all()

    def finished(self) -> None:
        with self.cond:
            self.running -= 1
            self._check_deadlock()

    def _check_deadlock(self) -> None:
        if self.running == 0 and self.pending:
            for meeting in self.pending.values():
                self.fail(f"deadlock: {meeting.what} waits for threads that never come "
                          f"(arrived: {_threads(sorted(meeting.arrivals))})")

    def meet(self, key: tuple[Any, ...], what: str, thread: int, payload: tuple[int, ...], *,
             complete: Callable[[_Meeting], bool],
             results: Callable[[_Meeting], dict[int, int]]) -> int:
        """Arrive at a meeting; return this thread's result once it completes (POISON if
        the run has failed)."""
        with self.cond:
            if self.errors:
                return POISON
            meeting = self.pending.setdefault(key, _Meeting(what))
            meeting.arrivals[thread] = payload
            if complete(meeting):
                del self.pending[key]
                meeting.results = results(meeting) if not self.errors else {}
                meeting.done = True
                self.running += len(meeting.arrivals) - 1
                self.cond.notify_all()
                return meeting.results.get(thread, POISON)
            self.running -= 1
            self._check_deadlock()
            while not (meeting.done or self.errors):
                self.cond.wait()
            return meeting.results.get(thread, POISON)


def _threads(threads: list[int]) -> str:
    shown = ", ".join(map(str, threads[:12]))
    return f"{len(threads)} threads [{shown}{', ...' if len(threads) > 12 else ''}]"


def _lanes(mask: int) -> list[int]:
    return [lane for lane in range(WARP) if mask >> lane & 1]


# ------------------------------------------------------------ barriers


def barrier(cta: CTA, thread: int, ident: int, count: int) -> None:
    """bar.sync ident[, count]: all the CTA's threads, or `count` threads counted by warps
    (each thread of a warp of n lanes weighs 32 / n: the warp arrives as a whole)."""
    if count % WARP:
        with cta.cond:
            cta.fail(f"bar.sync {ident}, {count}: a count that is not whole warps")
        return

    def complete(meeting: _Meeting) -> bool:
        if not count:
            return len(meeting.arrivals) == cta.size
        return sum(Fraction(WARP, cta.present(t)) for t in meeting.arrivals) >= count

    what = f"bar.sync {ident}" + (f", {count}" if count else "")
    cta.meet(("bar", ident), what, thread, (), complete=complete, results=lambda _: {})


# ------------------------------------------------------------ warp ops

_SHFL, _WARP_SYNC_OP = 1, 2


def _source(kind: int, lane: int, offset: int, clamp: int) -> int:
    """The lane a shuffle reads (PTX ISA, shfl.sync): its own when out of the segment."""
    segmask = clamp >> 8 & 0x1F
    low = lane & segmask
    bound = low | (clamp & 0x1F & ~segmask)
    if kind == _KINDS["up"]:
        j = lane - offset
        return j if j >= bound else lane
    j = {_KINDS["bfly"]: lane ^ offset, _KINDS["down"]: lane + offset,
         _KINDS["idx"]: low | (offset & ~segmask)}[kind]
    return j if j <= bound else lane


def _mask_problem(cta: CTA, thread: int, mask: int) -> str:
    warp, lane = divmod(thread, WARP)
    lanes = _lanes(mask)
    if not mask >> lane & 1:
        return f"lane {lane} of warp {warp} is outside its own mask {mask:#010x}"
    if lanes[-1] >= cta.present(thread):
        return (f"mask {mask:#010x} names lanes up to {lanes[-1]}, but warp {warp} has "
                f"{cta.present(thread)} lanes (the others never arrive: undefined)")
    return ""


def warp_op(cta: CTA, thread: int, mask: int, payload: tuple[int, ...]) -> int:
    """A warp-synchronous op of the lanes in `mask`: shfl.sync (payload: kind, value,
    offset, clamp) or bar.warp.sync (no payload). Returns the shuffled value."""
    mask &= 0xFFFFFFFF
    op = "shfl.sync" if payload else "bar.warp.sync"
    problem = _mask_problem(cta, thread, mask)
    if problem:
        with cta.cond:
            cta.fail(f"{op}: {problem}")
        return POISON
    warp = thread // WARP
    key = ("warp", warp, cta.sequence[thread])
    cta.sequence[thread] += 1
    lanes = len(_lanes(mask))

    def results(meeting: _Meeting) -> dict[int, int]:
        ops = {p[0] for p in meeting.arrivals.values()}
        masks = {p[1] for p in meeting.arrivals.values()}
        if len(ops) > 1 or len(masks) > 1:
            cta.fail(f"warp {warp}: lanes meet at different warp ops or masks")
            return {}
        by_lane = {t % WARP: p for t, p in meeting.arrivals.items()}
        return {t: _shuffled(by_lane, t % WARP, mask) for t in meeting.arrivals}

    code = _SHFL if payload else _WARP_SYNC_OP
    return cta.meet(key, f"{op} of warp {warp} (mask {mask:#010x})", thread,
                    (code, mask, *payload), complete=lambda m: len(m.arrivals) == lanes,
                    results=results)


def _shuffled(by_lane: dict[int, tuple[int, ...]], lane: int, mask: int) -> int:
    """A shuffle's value for `lane` (0 for bar.warp.sync); POISON from outside the mask."""
    payload = by_lane[lane]
    if payload[0] != _SHFL:
        return 0
    kind, offset, clamp = payload[2], payload[4], payload[5]
    source = _source(kind, lane, offset, clamp)
    if not mask >> source & 1:
        return POISON
    return by_lane[source][3]


# ------------------------------------------------------------ running


_CURRENT = threading.local()
"""The CTA and linear thread index of the OS thread running a GPU thread."""


def _on_barrier(ident: int, count: int) -> None:
    barrier(_CURRENT.cta, _CURRENT.thread, ident, count)


def _on_warp_sync(mask: int) -> None:
    warp_op(_CURRENT.cta, _CURRENT.thread, mask, ())


def _on_shuffle(kind: int, mask: int, value: int, offset: int, clamp: int) -> int:
    result = warp_op(_CURRENT.cta, _CURRENT.thread, mask,
                     (kind, value & 0xFFFFFFFF, offset, clamp))
    return result - (1 << 32) if result >= 1 << 31 else result


_I32 = ctypes.c_int32
_CALLBACKS = {
    "simt_barrier": ctypes.CFUNCTYPE(None, _I32, _I32)(_on_barrier),
    "simt_warp_sync": ctypes.CFUNCTYPE(None, _I32)(_on_warp_sync),
    "simt_shuffle": ctypes.CFUNCTYPE(_I32, _I32, _I32, _I32, _I32, _I32)(_on_shuffle),
}


@dataclass
class Compiled:
    kernel: HostKernel
    engine: Any
    context: ir.Context
    function: Any  # ctypes callable of the packed arguments


@cache
def compiled(text: str, kernel: str | None = None) -> Compiled:
    """A kernel's host version, lowered and JIT-compiled (once per program)."""
    host_kernel_ = host_kernel(text, kernel)
    context = ir.Context()
    with context:
        module = ir.Module.parse(host_kernel_.text)
        passmanager.PassManager.parse(
            f"builtin.module({host.HOST_PIPELINE})").run(module.operation)
        # Any: the typings' shim of the engine has invoke() only
        engine: Any = execution_engine.ExecutionEngine(module, opt_level=2)
        for name, callback in _CALLBACKS.items():
            engine.register_runtime(name, callback)
        function = engine.lookup("thread")  # materializes the module: callbacks first
    return Compiled(host_kernel_, engine, context, function)


def _packed(program: Compiled, args: Sequence[Any], buffers: Sequence[host.Buffer]
            ) -> list[Any]:
    packed: list[Any] = []
    for (_, type_), value in zip(program.kernel.args, args, strict=True):
        if type_.startswith("memref"):
            buffer = next(b for b in buffers
                          if b.address <= value < b.address + max(b.array.nbytes, 1) + 16)
            packed.append(buffer.at(value))
        else:
            packed.append(ctypes.pointer(host._SCALARS[type_](value)))
    return packed


def _run_thread(program: Compiled, cta: CTA, thread: int, block_id: tuple[int, int, int],
                packed: list[Any]) -> None:
    _CURRENT.cta, _CURRENT.thread = cta, thread
    bx, by, _ = cta.block
    coords = (thread % bx, thread // bx % by, thread // (bx * by), thread % WARP, *block_id)
    values = [ctypes.pointer(ctypes.c_int64(c)) for c in coords] + packed
    array = (ctypes.c_void_p * len(values))()
    for n, value in enumerate(values):
        array[n] = ctypes.cast(value, ctypes.c_void_p)
    try:
        program.function(array)
    finally:
        cta.finished()


def _poison_shared(program: Compiled) -> None:
    for shared in program.kernel.shared:
        address = ctypes.c_int64()
        program.engine.invoke(f"address_{shared.name}", ctypes.pointer(address))
        ctypes.memset(address.value, 0xFF, shared.nbytes)


def run(text: str, args: Sequence[Any], buffers: Sequence[host.Buffer],
        grid: host.Grid = 1, kernel: str | None = None) -> None:
    """Run a kernel over `grid` CTAs (a count, or x and y), one after another, each CTA's
    threads together; `args` as host.run takes them. Raises EmulationError on what the
    ISA leaves undefined."""
    program = compiled(text, kernel)
    packed = _packed(program, args, buffers)
    stack = threading.stack_size(1 << 20)
    try:
        x, y = host.grid_xy(grid)
        for block_id in itertools.product(range(x), range(y), (0,)):
            _poison_shared(program)
            cta = CTA(program.kernel.block)
            threads = [threading.Thread(target=_run_thread,
                                        args=(program, cta, t, block_id, packed))
                       for t in range(cta.size)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            if cta.errors:
                raise EmulationError(f"CTA {block_id[:2]}: " + "; ".join(cta.errors))
    finally:
        threading.stack_size(stack)


GUARD = 1024
"""Elements of 0xFF bytes on both sides of each array emulate() passes: a kernel that
reads past an array reads NaN, one that writes there is caught (not the host's heap)."""


def emulate(text: str, arrays: Sequence[Any], kernel: str | None = None) -> None:
    """Run a one-CTA kernel on NumPy arrays and scalars, its arguments in order (arrays
    are written in place). Raises EmulationError where the kernel wrote past an array."""
    rooms: dict[int, np.ndarray] = {}
    buffers, args = [], []
    for n, value in enumerate(arrays):
        if not isinstance(value, np.ndarray):
            args.append(value)
            continue
        flat = value.reshape(-1)
        room = np.empty(flat.size + 2 * GUARD, flat.dtype)
        room.view(np.uint8)[:] = 0xFF
        room[GUARD:GUARD + flat.size] = flat
        rooms[n] = room
        buffers.append(host.Buffer(room, (n + 1) << 24))
        args.append(((n + 1) << 24) + GUARD * room.itemsize)
    run(text, args, buffers, kernel=kernel)
    for n, room in rooms.items():
        array = arrays[n]
        guards = np.concatenate([room[:GUARD], room[GUARD + array.size:]])
        if (guards.view(np.uint8) != 0xFF).any():
            raise EmulationError(f"argument {n} was written outside its {array.size} elements")
        array[...] = room[GUARD:GUARD + array.size].reshape(array.shape)
