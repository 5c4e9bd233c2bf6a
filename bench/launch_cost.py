"""Host time per call (issue 14): the library's ops beside the same torch eager op, in
one process; and the floor, a bare cuLaunchKernel.

Per op (add of a tensor and of a Python scalar, exp, silu_and_mul, sum(dim=-1),
amax(dim=-1), rope_neox, dropout), at 2^10 and 2^16 elements, without and (where the
library's op has it) with out=; and add(out=) over two and three shapes in turn (the
library's inline cache holds an op's two latest plans; each side's call then goes
through one more Python lambda, counted):
- host microseconds per call: the median over batches of back-to-back calls (100 a
  batch, 100 batches: 10000 calls), the device synchronized between batches, the
  batches of tile-mlir, torch eager and the floor interleaved (a drift of the host's
  speed falls on all three alike); at these
  sizes the GPU finishes a call sooner than the host issues the next, so this is the
  host's time (device time is bench/harness.py's business);
- the same for torch eager's op (its formula where torch has no such op: silu_and_mul
  as F.silu(x[..., :N]) * x[..., N:], rope as vLLM's forward_native);
- Python function calls per call (sys.setprofile's "call" events over 300 calls, the
  benchmark's own lambda not counted) for both;
- the floor: the launch a plan makes, by the compiled launcher (runtime/_launch.c: the
  values packed in C, cuLaunchKernel called directly; cuda-python's cuLaunchKernel
  where it was not built), of an empty kernel taking as many 64-bit parameters as the
  op's launch passes (its arrays, scalars and sizes: an estimate, the library's kernels
  are its own), each passed per call.
A second table keeps the launchers of one 4096-element add kernel compiled by
tile_mlir.compile: the Kernel on torch tensors, on int pointers, on CuPy arrays, a
bare cuLaunchKernel of that kernel (cuda-python's, and the compiled launcher's),
torch.add(out=), cupy.add(out=), Triton.

    python3 bench/launch_cost.py [--calls 100] [--batches 100] [--dry-run]

Writes bench/results/launch_cost-<device>.md (and .json).
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from common import RESULTS, environment, environment_line, save, slug, table
from timing import per_call_us, per_call_us_together, percentiles

SIZES = (10, 16)
ADD_N = 4096
BLOCK = 256


Figures = tuple[float, float, float]  # median, p10, p90


@dataclass(frozen=True)
class Row:
    op: str
    elements: int
    out: bool
    ours_us: Figures | str  # or why there is none
    torch_us: Figures | str
    ours_calls: float | None  # Python function calls per call
    torch_calls: float | None
    params: int  # the floor kernel's
    floor_us: float

    def cells(self) -> list[str]:
        ours, theirs = self.ours_us, self.torch_us
        ratio = f"{ours[0] / theirs[0]:.2f}x" if isinstance(ours, tuple) and \
            isinstance(theirs, tuple) else "n/a"
        return [self.op, f"2^{self.elements.bit_length() - 1}", "yes" if self.out else "no",
                _us(ours), _us(theirs), ratio, _count(self.ours_calls),
                _count(self.torch_calls), f"{self.floor_us:.2f} ({self.params})"]


def _us(figures: Figures | str) -> str:
    if isinstance(figures, str):
        return f"n/a: {figures}"[:80].replace("|", "/")
    return f"{figures[0]:.2f} ({figures[1]:.2f}-{figures[2]:.2f})"


def _count(calls: float | None) -> str:
    return "n/a" if calls is None else f"{calls:.0f}"


HEADER = ["op", "elements", "out=", "tile-mlir us/call (p10-p90)", "torch eager us/call",
          "tile-mlir / torch", "tile-mlir Python calls/call", "torch Python calls/call",
          "floor us (params)"]


# ------------------------------------------------------------------ the ops

Pair = tuple[Callable[[], object], Callable[[], object], int]
"""(tile-mlir's call, torch eager's call, parameters of the floor's kernel)."""


def elementwise_pairs(torch: Any, ops: Any, n: int) -> dict[tuple[str, bool], Pair]:
    x, y, o = (torch.randn(n, device="cuda") for _ in range(3))
    return {
        ("add", False): (lambda: ops.add(x, y), lambda: torch.add(x, y), 4),
        ("add", True): (lambda: ops.add(x, y, out=o), lambda: torch.add(x, y, out=o), 4),
        ("add scalar", False): (lambda: ops.add(x, 2.0), lambda: torch.add(x, 2.0), 4),
        ("add scalar", True): (lambda: ops.add(x, 2.0, out=o),
                               lambda: torch.add(x, 2.0, out=o), 4),
        ("exp", False): (lambda: ops.exp(x), lambda: torch.exp(x), 3),
        ("exp", True): (lambda: ops.exp(x, out=o), lambda: torch.exp(x, out=o), 3),
        ("dropout", False): (lambda: ops.dropout(x, 0.1),
                             lambda: torch.nn.functional.dropout(x, 0.1, training=True), 8),
    }


def turn_pairs(torch: Any, ops: Any, n: int) -> dict[tuple[str, bool], Pair]:
    """add(out=) on two or three shapes in turn (n, n + 16, n + 32 elements), a call of
    one per call: the library's inline cache holds an op's two latest plans, and stops
    probing an op that keeps missing it (entry.py). Both sides pick the shape alike."""
    shapes = [[torch.randn(n + 16 * k, device="cuda") for _ in range(3)] for k in range(3)]
    pairs: dict[tuple[str, bool], Pair] = {}
    for count in (2, 3):
        def cycle(add: Callable[..., object], count: int = count) -> Callable[[], object]:
            turn = itertools.cycle(shapes[:count])
            return lambda: add(*next(turn))

        pairs[(f"add, {count} shapes in turn", True)] = (
            cycle(lambda a, b, o: ops.add(a, b, out=o)),
            cycle(lambda a, b, o: torch.add(a, b, out=o)), 4)
    return pairs


def row_pairs(torch: Any, ops: Any, n: int) -> dict[tuple[str, bool], Pair]:
    """Ops on rows of 1024: silu_and_mul (its input's rows), sum and amax over dim=-1."""
    x = torch.randn(max(n // 1024, 1), 1024, device="cuda")
    half = x.shape[-1] // 2
    out = torch.empty(x.shape[0], half, device="cuda")
    silu = torch.nn.functional.silu
    return {
        ("silu_and_mul", False): (lambda: ops.silu_and_mul(x),
                                  lambda: silu(x[..., :half]) * x[..., half:], 5),
        ("silu_and_mul", True): (lambda: ops.silu_and_mul(x, out=out),
                                 lambda: torch.mul(silu(x[..., :half]), x[..., half:], out=out),
                                 5),
        ("sum(dim=-1)", False): (lambda: ops.sum(x, -1), lambda: torch.sum(x, dim=-1), 4),
        ("amax(dim=-1)", False): (lambda: ops.amax(x, -1), lambda: torch.amax(x, dim=-1), 4),
    }


def rope_pairs(torch: Any, ops: Any, n: int) -> dict[tuple[str, bool], Pair]:
    """rope_neox on n elements of query (8 heads of 128), as many of key."""
    from rope import forward_native

    tokens = max(n // 1024, 1)
    q, k, qo, ko = (torch.randn(tokens, 8, 128, device="cuda") for _ in range(4))
    positions = torch.randint(0, 4096, (tokens,), device="cuda")
    cache = ops.rope_cache("neox", rotary_dim=128, max_position=4096, base=10000.0, like=q)

    def eager() -> object:
        return forward_native(q, k, positions, cache, rotary_dim=128, neox=True)

    return {
        ("rope_neox", False): (lambda: ops.rope_neox(q, k, positions, cos_sin_cache=cache),
                               eager, 10),
        ("rope_neox", True): (lambda: ops.rope_neox(q, k, positions, cos_sin_cache=cache,
                                                    out=(qo, ko)), eager, 10),
    }


ORDER = ("add", "add scalar", "exp", "silu_and_mul", "sum(dim=-1)", "amax(dim=-1)",
         "rope_neox", "dropout", "add, 2 shapes in turn", "add, 3 shapes in turn")
"""The rows' order; the shapes in turn last (they leave add's inline cache emptied for
a while: entry.RETRY)."""


# ------------------------------------------------------------------ measuring


def python_calls(fn: Callable[[], object], calls: int = 300) -> float:
    """Python function calls made per call of fn (fn's own frame not counted)."""
    count = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal count
        if event == "call":
            count += 1

    sys.setprofile(profile)
    try:
        for _ in range(calls):
            fn()
    finally:
        sys.setprofile(None)
    return max(count / calls - 1, 0.0)


EMPTY_PTX = """.version 7.0
.target sm_70
.address_size 64
.visible .entry empty({params})
{{
    ret;
}}
"""


FLOOR_BY = ("the compiled launcher (runtime/_launch.c), each value passed per call; "
            "cuda-python's cuLaunchKernel where that was not built")


class Floor:
    """A plan's launch of an empty kernel with k 64-bit parameters: the compiled
    launcher's (the k values passed per call), else cuda-python's cuLaunchKernel with
    the array of their addresses built once."""

    def __init__(self) -> None:
        from cuda.bindings import driver

        self.driver = driver
        self.kernels: dict[int, Any] = {}

    def launcher(self, k: int) -> Callable[[], object]:
        from tile_mlir.runtime import driver as runtime_driver

        driver = self.driver
        if k not in self.kernels:
            params = ", ".join(f".param .u64 p{i}" for i in range(k))
            err, module = driver.cuModuleLoadData(EMPTY_PTX.format(params=params).encode() + b"\0")
            assert not err, f"cuModuleLoadData: {err}"
            err, function = driver.cuModuleGetFunction(module, b"empty")
            assert not err, f"cuModuleGetFunction: {err}"
            self.kernels[k] = (module, function)
        function = self.kernels[k][1]
        native = runtime_driver.native_launcher(function)
        if native is not None:
            return _compiled(native, function, (1, 1, 1), (32, 1, 1), (0,) * k)
        return _bare_cuda_python(function, (1, 1, 1), (32, 1, 1), (0,) * k)


def _bare_cuda_python(function: Any, grid: tuple[int, int, int], block: tuple[int, int, int],
                      pointers: tuple[int, ...]) -> Callable[[], object]:
    """cuda-python's cuLaunchKernel, the kernelParams array built once."""
    from cuda.bindings import driver

    slots = [ctypes.c_uint64(p) for p in pointers]
    params = (ctypes.c_void_p * len(slots))(*[ctypes.addressof(s) for s in slots])
    address, launch = ctypes.addressof(params), driver.cuLaunchKernel

    def bare(_keep: object = (slots, params)) -> object:  # the default keeps them alive
        return launch(function, *grid, *block, 0, 0, address, 0)

    return bare


def _compiled(native: Any, function: Any, grid: tuple[int, int, int],
              block: tuple[int, int, int], pointers: tuple[int, ...]) -> Callable[[], object]:
    """The compiled launcher's launch, every pointer passed per call (as a plan's)."""
    launch = native(int(function), grid, block, "P" * len(pointers),
                    (None,) * len(pointers)).launch
    return lambda: launch(0, *pointers)


def host_us(torch: Any, fn: Callable[[], object], calls: int, batches: int) -> Figures:
    for _ in range(20):
        fn()  # warm: compiles, plans, lazy loading
    return percentiles(per_call_us(fn, calls, batches, torch.cuda.synchronize))


def _why(e: Exception) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"


def host_us_together(torch: Any, fns: Sequence[Callable[[], object]],
                     args: argparse.Namespace) -> list[Figures | str]:
    """Host us per call of each function, their batches interleaved (per_call_us_together);
    why, for one whose warm-up call fails."""
    results: list[Figures | str] = []
    live: list[int] = []
    for i, fn in enumerate(fns):
        try:
            for _ in range(20):
                fn()  # warm: compiles, plans, lazy loading
            results.append("")
            live.append(i)
        except Exception as e:  # noqa: BLE001 - a call that fails is reported in its row
            torch.cuda.synchronize()
            results.append(_why(e))
    samples = per_call_us_together([fns[i] for i in live], args.calls, args.batches,
                                   torch.cuda.synchronize)
    for i, got in zip(live, samples, strict=True):
        results[i] = percentiles(got)
    return results


def measure(torch: Any, args: argparse.Namespace) -> list[Row]:
    from tile_mlir import ops

    floor = Floor()
    rows = []
    for size in SIZES:
        n = 1 << size
        pairs = elementwise_pairs(torch, ops, n) | turn_pairs(torch, ops, n) | \
            row_pairs(torch, ops, n) | rope_pairs(torch, ops, n)
        for (op, out), (ours, eager, params) in sorted(
                pairs.items(), key=lambda kv: (ORDER.index(kv[0][0]), kv[0][1])):
            ours_us, torch_us, floor_us = host_us_together(
                torch, [ours, eager, floor.launcher(params)], args)
            assert isinstance(floor_us, tuple), floor_us
            ours_calls = python_calls(ours) if isinstance(ours_us, tuple) else None
            torch_calls = python_calls(eager) if isinstance(torch_us, tuple) else None
            rows.append(Row(op, n, out, ours_us, torch_us, ours_calls, torch_calls, params,
                            floor_us[0]))
            print(" | ".join(rows[-1].cells()), flush=True)
    return rows


# ------------------------------------------------------ one kernel, many launchers


def kernel_launchers(torch: Any) -> dict[str, Callable[[], object]]:
    """The launchers of one 4096-element f32 add kernel (tile_mlir.compile's)."""
    from support.cases import Case

    import tile_mlir
    from tile_mlir.runtime import driver

    kernel = tile_mlir.compile(Case("add", (ADD_N,), block=BLOCK).mlir()).kernel("kernel")
    x, y, out = (torch.randn(ADD_N, device="cuda") for _ in range(3))
    pointers = (x.data_ptr(), y.data_ptr(), out.data_ptr())
    grid, block = kernel.spec.grid or (1, 1, 1), kernel.spec.block or (1, 1, 1)
    found: dict[str, Callable[[], object]] = {
        "tile-mlir Kernel, torch tensors": lambda: kernel(x, y, out),
        "tile-mlir Kernel, int pointers": lambda: kernel(*pointers),
        "bare cuLaunchKernel of the same kernel (cuda-python)": _bare_cuda_python(
            kernel.function, grid, block, pointers),
        "torch eager torch.add(out=)": lambda: torch.add(x, y, out=out),
    }
    native = driver.native_launcher(kernel.function)
    if native is not None:
        found["compiled launcher of the same kernel (tile_mlir.runtime._launch)"] = \
            _compiled(native, kernel.function, grid, block, pointers)
    return found | _cupy(kernel) | _triton(torch)


def _cupy(kernel: Any) -> dict[str, Callable[[], object]]:
    try:
        import cupy
    except ImportError:
        return {}
    x, y, out = (cupy.random.standard_normal(ADD_N, dtype=cupy.float32) for _ in range(3))
    return {"tile-mlir Kernel, CuPy arrays": lambda: kernel(x, y, out),
            "cupy.add(out=)": lambda: cupy.add(x, y, out=out)}


def _triton(torch: Any) -> dict[str, Callable[[], object]]:
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return {}

    @triton.jit  # type: ignore[untyped-decorator]
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):  # type: ignore[no-untyped-def]
        offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask)
                 + tl.load(y_ptr + offsets, mask=mask), mask=mask)

    x, y, out = (torch.randn(ADD_N, device="cuda") for _ in range(3))
    grid = (triton.cdiv(ADD_N, 1024),)
    return {"Triton kernel launch": lambda: add[grid](x, y, out, ADD_N, BLOCK_SIZE=1024)}


def launchers(torch: Any, args: argparse.Namespace) -> list[list[str]]:
    rows = []
    for name, fn in kernel_launchers(torch).items():
        median, low, high = host_us(torch, fn, args.calls, args.batches)
        rows.append([name, f"{median:.2f}", f"{low:.2f}", f"{high:.2f}"])
    return rows


# ------------------------------------------------------------------ the report


def fake_rows() -> list[Row]:
    """--dry-run: every row with made-up figures (no GPU)."""
    rows = []
    for size in SIZES:
        for op in ORDER:
            outs = (False,) if op in ("sum(dim=-1)", "amax(dim=-1)", "dropout") else \
                (True,) if "in turn" in op else (False, True)
            rows += [Row(op, 1 << size, out, (6.0, 5.8, 6.5), (5.0, 4.9, 5.4), 12.0, 1.0, 4, 3.9)
                     for out in outs]
    return rows


def report(env: dict[str, str], rows: Sequence[Row], launcher_rows: Sequence[Sequence[str]],
           args: argparse.Namespace, command: str) -> str:
    return "\n".join([
        f"# Launch cost on {env['device']}: host time per call", "",
        f"`{command}`", "", environment_line(env), "",
        f"Host microseconds per call: median (p10-p90) over {args.batches} batches of "
        f"{args.calls} back-to-back calls ({args.calls * args.batches} calls), the device "
        "synchronized between batches, the batches of tile-mlir, torch eager and the floor "
        "interleaved. Python calls per call: sys.setprofile's 'call' "
        "events over 300 calls. Floor: a plan's launch of an empty kernel with as many 64-bit "
        "parameters as the op's launch (an estimate), by " + FLOOR_BY + "."
        + (" FAKE figures (--dry-run)." if args.dry_run else ""), "",
        table(HEADER, [r.cells() for r in rows]), "",
        f"## Launchers of one {ADD_N}-element f32 add kernel", "",
        table(["launcher", "median us/call", "p10", "p90"], launcher_rows), ""])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--calls", type=int, default=100, help="calls per batch")
    parser.add_argument("--batches", type=int, default=100, help="batches (samples)")
    parser.add_argument("--dry-run", action="store_true", help="no GPU: fake figures")
    parser.add_argument("--results", type=Path, help="the folder for the files")
    args = parser.parse_args(argv)
    if args.calls * args.batches < 3000:
        parser.error("at least 3000 calls per figure (--calls x --batches)")
    command = "python3 bench/launch_cost.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.dry_run:
        env, rows, launcher_rows = environment(None), fake_rows(), [["(dry run)", "-", "-", "-"]]
    else:
        import torch

        env = environment(torch)
        rows, launcher_rows = measure(torch, args), launchers(torch, args)
    text = report(env, rows, launcher_rows, args, command.strip())
    folder = args.results or (Path(tempfile.mkdtemp()) if args.dry_run else RESULTS)
    path = save("launch_cost", "dry-run" if args.dry_run else env["device"], text, folder)
    path.with_suffix(".json").write_text(json.dumps(
        {"env": env, "rows": [asdict(r) for r in rows], "launchers": launcher_rows}, indent=1))
    print(text)
    print(f"saved to {path} (and .json); device slug {slug(env['device'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
