"""Benchmark: tile_mlir.ops against torch eager and torch.compile, TB/s of essential traffic.

For each op (one or more per family of seed 004), dtype and size (2^16 .. 2^28
elements), each implementation is timed with CUDA events around CUDA-graph
replays, so that the time is the device's and not Python's: one graph holds R
calls on R different input sets (R large enough that they do not fit in L2),
and the median over many replays, divided by R, is the time of a call. The
traffic is what the op must move: every input read once and the output
written once (a broadcast bias counts its own size). Every implementation's
result is checked against torch's before it is timed.

    python3 bench/elementwise.py --quick        # the issue's bars: a few minutes
    python3 bench/elementwise.py                # every family, dtype and size
    python3 bench/elementwise.py --ops add,exp --dtypes bf16 --sizes 20,24,28

It writes bench/results/elementwise-<device>.md (a table), .json (every number)
and .png (a plot), and prints the table. `--tune` runs the autotuner first.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tile_mlir import op_table, ops  # noqa: E402 - after the path is set

RESULTS = ROOT / "bench" / "results"

TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
                "f8e4m3": torch.float8_e4m3fn, "f8e5m2": torch.float8_e5m2,
                "i32": torch.int32, "i64": torch.int64, "bool": torch.bool}

FAMILY_OPS = {
    "unary_math": ("exp", "neg", "sqrt"),
    "binary_arith": ("add", "mul", "div", "maximum"),
    "comparison": ("lt",),
    "bitwise": ("bitwise_and",),
    "logical": ("logical_and",),
    "special": ("where", "clamp", "isnan"),
}
QUICK = {  # the bars: one op per family, its main dtypes, at 2^24 and 2^28
    "add": ("f32", "f16", "bf16", "f8e4m3", "f8e5m2"),
    "exp": ("f32", "bf16", "f8e4m3"),
    "lt": ("f32", "bf16"),
    "bitwise_and": ("i32", "bool"),
    "logical_and": ("bool",),
    "where": ("f32", "bf16"),
}
BIAS_ADD = ("bias_add", "bf16", (16 * 4096, 4096))


# ------------------------------------------------------------------- inputs


def _make(shape: tuple[int, ...], dtype: str) -> torch.Tensor:
    if dtype == "bool":
        return torch.rand(shape, device="cuda") < 0.5
    if dtype in ("i32", "i64"):
        return torch.randint(-1000, 1000, shape, device="cuda", dtype=TORCH_DTYPES[dtype])
    values = torch.randn(shape, device="cuda") * 4
    return values.to(TORCH_DTYPES[dtype])


def inputs(op: str, dtype: str, shape: tuple[int, ...]) -> tuple[list[Any], Callable[..., Any]]:
    """(arguments, torch's function) for one call of the op."""
    if op == "bias_add":
        return [_make(shape, dtype), _make(shape[-1:], dtype)], torch.add
    if op == "where":
        return [torch.rand(shape, device="cuda") < 0.5, _make(shape, dtype),
                _make(shape, dtype)], torch.where
    if op == "clamp":
        return [_make(shape, dtype), -1.0, 1.0], torch.clamp
    arity = op_table.ELEMENTWISE[op].arity
    args = [_make(shape, dtype) for _ in range(arity)]
    if op in ("sqrt",):
        args[0] = args[0].abs() if dtype not in ("f8e4m3", "f8e5m2") else args[0]
    return args, getattr(torch, op)


def traffic(args: list[Any], result: torch.Tensor) -> int:
    """Bytes an op must move: each input read once, the result written once."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    return sum(t.numel() * t.element_size() for t in tensors) + \
        result.numel() * result.element_size()


# ------------------------------------------------------------------- timing


def _l2_bytes() -> int:
    return int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20))


def time_call(fn: Callable[..., Any], sets: list[list[Any]], replays: int) -> tuple[float, str]:
    """Median seconds per call of fn over the input sets: CUDA-graph replays when the
    calls capture, else a plain loop (which also times Python between launches)."""
    for args in sets:  # warm up: compile, load, record the fast path's plans
        fn(*args)
    torch.cuda.synchronize()
    try:
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
            for args in sets:
                fn(*args)
        torch.cuda.current_stream().wait_stream(stream)
        run, how = graph.replay, "graph"
    except Exception:  # noqa: BLE001 - some implementations do not capture
        torch.cuda.synchronize()

        def run() -> None:
            for args in sets:
                fn(*args)

        how = "loop"
    return _median(run, replays) / len(sets), how


def _median(run: Callable[[], None], replays: int) -> float:
    run()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


# -------------------------------------------------------------------- cases


@dataclass
class Result:
    op: str
    dtype: str
    shape: tuple[int, ...]
    bytes: int
    seconds: dict[str, float] = field(default_factory=dict)  # implementation -> s per call
    how: dict[str, str] = field(default_factory=dict)  # graph or loop
    errors: dict[str, str] = field(default_factory=dict)  # implementation -> why not

    def tbps(self, impl: str) -> float | None:
        s = self.seconds.get(impl)
        return self.bytes / s / 1e12 if s else None

    def ratio(self) -> float | None:
        """tile_mlir's speed over the better peer's."""
        ours = self.tbps("tile_mlir")
        peers = [v for v in (self.tbps("torch"), self.tbps("inductor")) if v]
        return ours / max(peers) if ours and peers else None


def _check(ours: Any, want: Any, op: str) -> None:
    if ours.dtype != want.dtype or ours.shape != want.shape:
        raise AssertionError(f"{op}: got {ours.dtype}{tuple(ours.shape)}, torch gives "
                             f"{want.dtype}{tuple(want.shape)}")
    if ours.dtype == torch.bool or not ours.is_floating_point():
        assert torch.equal(ours, want), f"{op}: differs from torch"
        return
    a, b = ours.float(), want.float()
    fp8 = ours.dtype in (torch.float8_e4m3fn, torch.float8_e5m2)
    close = torch.isclose(a, b, rtol=0.13 if fp8 else 2e-2, atol=1e-3, equal_nan=True)
    assert bool(close.all()), f"{op}: {int((~close).sum())} elements differ from torch"


def _implementations(op: str, torch_fn: Callable[..., Any], dtype: str
                     ) -> dict[str, Callable[..., Any]]:
    ours = ops.add if op == "bias_add" else getattr(ops, op)
    impls = {"tile_mlir": ours, "torch": torch_fn,
             "inductor": torch.compile(torch_fn, dynamic=False)}
    if dtype in ("f8e4m3", "f8e5m2"):  # torch's kernels take fp8 through float32
        target = TORCH_DTYPES[dtype]

        def via_float(fn: Callable[..., Any]) -> Callable[..., Any]:
            def call(*args: Any) -> Any:
                wide = [a.float() if isinstance(a, torch.Tensor) and a.is_floating_point()
                        else a for a in args]
                result = fn(*wide)
                if not result.is_floating_point():
                    return result
                if target == torch.float8_e4m3fn:  # the library's (saturating) semantics
                    result = result.clamp(-448, 448)
                return result.to(target)

            return call

        impls["torch (f32 path)"] = via_float(torch_fn)
        impls["inductor"] = torch.compile(via_float(torch_fn), dynamic=False)
    return impls


def measure(op: str, dtype: str, shape: tuple[int, ...], replays: int) -> Result:
    args, torch_fn = inputs(op, dtype, shape)
    reference = _reference(torch_fn, args, dtype)
    per_call = traffic(args, reference)
    count = min(64, max(1, math.ceil(4 * _l2_bytes() / per_call)))
    sets = [args] + [inputs(op, dtype, shape)[0] for _ in range(count - 1)]
    result = Result(op, dtype, shape, per_call)
    for name, fn in _implementations(op, torch_fn, dtype).items():
        try:
            _check(fn(*args), reference, op)
            result.seconds[name], result.how[name] = time_call(fn, sets, replays)
        except Exception as e:  # noqa: BLE001 - an implementation that cannot run this case
            result.errors[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    del sets
    torch.cuda.empty_cache()
    return result


def _reference(torch_fn: Callable[..., Any], args: list[Any], dtype: str) -> Any:
    try:
        return torch_fn(*args)
    except Exception:  # noqa: BLE001 - fp8: through float32, e4m3fn saturating
        wide = [a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                for a in args]
        result = torch_fn(*wide)
        if not result.is_floating_point():
            return result
        if dtype == "f8e4m3":
            result = result.clamp(-448, 448)
        return result.to(TORCH_DTYPES[dtype])


# ------------------------------------------------------------------- output


def _cell(result: Result, impl: str) -> str:
    value = result.tbps(impl)
    if value is None:
        return "n/a"
    return f"{value:.2f}" + ("" if result.how.get(impl) == "graph" else "*")


def table(results: list[Result]) -> list[str]:
    impls = ["tile_mlir", "torch", "torch (f32 path)", "inductor"]
    lines = ["| op | dtype | shape | MB | " + " | ".join(f"{i} TB/s" for i in impls) +
             " | vs better peer |", "|---|---|---|---|" + "---|" * (len(impls) + 1)]
    for r in results:
        ratio = r.ratio()
        shape = "x".join(map(str, r.shape)) if len(r.shape) > 1 else \
            f"2^{r.shape[0].bit_length() - 1}"
        lines.append(f"| {r.op} | {r.dtype} | {shape} | {r.bytes / 1e6:.0f} | " +
                     " | ".join(_cell(r, i) for i in impls) +
                     f" | {'n/a' if ratio is None else f'{ratio:.2f}x'} |")
    return lines


def bars(results: list[Result]) -> list[str]:
    """The issue's bars, checked."""
    lines = []
    for r in results:
        ours, ratio = r.tbps("tile_mlir"), r.ratio()
        numel = math.prod(r.shape)
        if numel >= 1 << 24 and ratio is not None and ratio < 1.0:
            lines.append(f"- below the better peer: {r.op} {r.dtype} 2^{numel.bit_length() - 1}"
                         f" ({ratio:.2f}x)")
        big = numel >= 1 << 28 or r.op == "bias_add"
        if big and ours is not None and ours < 3.0:
            lines.append(f"- under 3.0 TB/s: {r.op} {r.dtype} {r.shape} ({ours:.2f} TB/s)")
    return lines or ["- every bar met"]


def plot(results: list[Result], path: Path, device: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = sorted({(r.op, r.dtype) for r in results if len(r.shape) == 1})
    opnames = sorted({op for op, _ in series})
    fig, axes = plt.subplots(len(opnames), 1, figsize=(9, 3.2 * len(opnames)), squeeze=False)
    for ax, op in zip(axes[:, 0], opnames, strict=True):
        for index, (name, dtype) in enumerate(s for s in series if s[0] == op):
            rows = sorted((r for r in results if (r.op, r.dtype) == (name, dtype)
                           and len(r.shape) == 1), key=lambda r: r.shape[0])
            color = f"C{index}"
            for impl, style in (("tile_mlir", "-"), ("torch", ":"), ("inductor", "--")):
                points = [(r.shape[0].bit_length() - 1, r.tbps(impl)) for r in rows]
                xs = [x for x, y in points if y]
                ys = [y for _, y in points if y]
                if xs:
                    ax.plot(xs, ys, style, color=color, marker="o", markersize=3,
                            label=f"{dtype} {impl}")
        ax.set_title(f"{op} on {device}")
        ax.set_xlabel("log2(elements)")
        ax.set_ylabel("TB/s")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plan(args: argparse.Namespace) -> list[tuple[str, str, tuple[int, ...]]]:
    if args.quick:
        cases = [(op, dtype, (1 << size,)) for op, dtypes in QUICK.items()
                 for dtype in dtypes for size in (24, 28)]
        return [*cases, BIAS_ADD]
    chosen = args.ops.split(",") if args.ops else [op for names in FAMILY_OPS.values()
                                                    for op in names]
    sizes = [int(s) for s in args.sizes.split(",")]
    cases = []
    for op in chosen:
        dtypes = op_table.ELEMENTWISE[op].dtypes
        wanted = args.dtypes.split(",") if args.dtypes else dtypes
        cases += [(op, d, (1 << s,)) for d in wanted if d in dtypes for s in sizes]
    return [*cases, BIAS_ADD]


def main() -> int:
    parser = argparse.ArgumentParser(description="tile_mlir.ops vs torch eager and inductor")
    parser.add_argument("--quick", action="store_true",
                        help="the issue's bars only: one op per family, 2^24 and 2^28, bias add")
    parser.add_argument("--ops", help="comma-separated ops (default: some of every family)")
    parser.add_argument("--dtypes", help="comma-separated dtypes (default: all of each op)")
    parser.add_argument("--sizes", default="16,20,24,28", help="log2 of the sizes")
    parser.add_argument("--replays", type=int, default=30, help="timed replays per case")
    parser.add_argument("--tune", action="store_true", help="run the autotuner first")
    args = parser.parse_args()
    device = torch.cuda.get_device_name(0)
    cases = plan(args)
    if args.tune:
        from tile_mlir.ops import tune

        tune.run([(op, dtype, math.prod(shape)) for op, dtype, shape in cases], log=print)
    started = time.time()
    results = []
    for op, dtype, shape in cases:
        result = measure(op, dtype, shape, args.replays)
        results.append(result)
        print(table([result])[-1], *[f"  ({k}: {v})" for k, v in result.errors.items()],
              flush=True)
    slug = re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = RESULTS / f"elementwise-{slug}{'-quick' if args.quick else ''}"
    header = [f"# Elementwise ops on {device}", "",
              f"`python3 bench/elementwise.py {' '.join(sys.argv[1:])}`, torch {torch.__version__}"
              f", {time.strftime('%Y-%m-%d')}, {time.time() - started:.0f} s. TB/s of essential "
              "traffic (inputs read once, output written once), median of CUDA-graph replays "
              "over input sets rotated past L2 (* : a plain loop, the implementation did not "
              "capture). torch (f32 path): torch's op on fp8 inputs widened to float32 and the "
              "result narrowed back (e4m3fn saturating), as torch has no fp8 kernel for most "
              "ops.", ""]
    text = "\n".join([*header, *table(results), "", "Bars:", *bars(results)]) + "\n"
    stem.with_suffix(".md").write_text(text)
    stem.with_suffix(".json").write_text(json.dumps([asdict(r) for r in results], indent=1))
    plot(results, stem.with_suffix(".png"), device)
    print(text)
    print(f"wrote {stem}.md, .json, .png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
