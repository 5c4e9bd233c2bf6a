"""Benchmark: part 2's ops (seed 004) against torch eager and torch.compile, TB/s of
essential traffic.

- silu_and_mul bf16 8192x14336 (the bar: >= 3.0 TB/s on an H100; torch eager
  F.silu(x[..., :N]) * x[..., N:] 1.06, inductor 2.98), and the other gated ops;
- the 14 activations at 2^24, 2^26, 2^28 elements, f32/f16/bf16;
- dropout, alibi and sinusoidal.
RoPE has its own benchmark, bench/rope.py (against vLLM's forward_native).

Timing is bench/elementwise.py's: CUDA events around CUDA-graph replays of calls
on input sets rotated past L2 (a plain loop where a call does not capture), the
median of many replays. Traffic is what an op must move: each input read once,
each output written once (dropout: x read, y written; alibi/sinusoidal: the output).
An op that tile_mlir.ops does not have yet, or that fails, reports "n/a" with the
reason, so this runs before and after part 2's ops are merged.

    python3 bench/part2.py                  # everything (several minutes)
    python3 bench/part2.py --quick          # the bars: silu_and_mul, a few activations
    python3 bench/part2.py --only gated,dropout
    python3 bench/part2.py --dry-run        # no GPU: the case list and an empty table

It writes bench/results/part2-<device>.md, .json and .png (one bar per case: the
ratio to the better peer), and prints the table; `--plot <json>` re-plots a saved run.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"

ACTIVATIONS = ("relu", "gelu", "silu", "sigmoid", "tanh", "leaky_relu", "elu", "selu",
               "hardswish", "hardsigmoid", "hardtanh", "softplus", "mish", "prelu")
GATED = ("silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul")
DTYPES = ("f32", "f16", "bf16")
BAR_TBPS = 3.0  # silu_and_mul bf16 8192x14336, H100


@dataclass(frozen=True)
class Case:
    """One measurement: an op on inputs of a shape and dtype."""

    group: str  # activation, gated, dropout, generative
    op: str
    dtype: str
    shape: tuple[int, ...]  # activations: (n,); gated: (M, 2N); others: their own

    def label(self) -> str:
        if len(self.shape) == 1:
            return f"2^{self.shape[0].bit_length() - 1}"
        return "x".join(map(str, self.shape))


@dataclass
class Result:
    case: Case
    bytes: int = 0
    seconds: dict[str, float] = field(default_factory=dict)  # implementation -> s per call
    how: dict[str, str] = field(default_factory=dict)  # graph or loop
    errors: dict[str, str] = field(default_factory=dict)  # implementation -> why n/a

    def tbps(self, impl: str) -> float | None:
        s = self.seconds.get(impl)
        return self.bytes / s / 1e12 if s and self.bytes else None

    def ratio(self) -> float | None:
        """tile_mlir's speed over the better peer's."""
        ours = self.tbps("tile_mlir")
        peers = [v for v in (self.tbps("torch"), self.tbps("inductor")) if v]
        return ours / max(peers) if ours and peers else None


# ------------------------------------------------------------------- cases


def plan(args: argparse.Namespace) -> list[Case]:
    """The cases to run, in the table's order."""
    only = set(args.only.split(",")) if args.only else None
    cases: list[Case] = []

    def want(group: str) -> bool:
        return only is None or group in only

    if want("gated"):
        cases += [Case("gated", op, "bf16", (8192, 2 * 14336)) for op in GATED]
        if not args.quick:
            cases += [Case("gated", op, dtype, (8192, 2 * 14336)) for op in GATED
                      for dtype in ("f32", "f16")]
    if want("activation"):
        ops = ("silu", "gelu", "relu") if args.quick else ACTIVATIONS
        sizes = (26,) if args.quick else tuple(int(s) for s in args.sizes.split(","))
        dtypes = ("bf16",) if args.quick else DTYPES
        cases += [Case("activation", op, dtype, (1 << size,)) for op in ops
                  for dtype in dtypes for size in sizes]
    if want("dropout") and not args.quick:
        cases += [Case("dropout", "dropout", dtype, (1 << 26,)) for dtype in ("f32", "bf16")]
    if want("generative") and not args.quick:
        cases += [Case("generative", "alibi", "f32", (32, 2048)),
                  Case("generative", "sinusoidal", "f32", (16384, 4096))]
    return cases


# ------------------------------------------------------------------ output


def _cell(result: Result, impl: str) -> str:
    value = result.tbps(impl)
    if value is None:
        return "n/a"
    return f"{value:.2f}" + ("" if result.how.get(impl) == "graph" else "*")


IMPLS = ("tile_mlir", "torch", "inductor")


def table(results: list[Result]) -> list[str]:
    """Markdown rows: one per case, TB/s per implementation and tile_mlir over the best."""
    lines = ["| group | op | dtype | shape | MB | " +
             " | ".join(f"{i} TB/s" for i in IMPLS) + " | vs better peer |",
             "|---|---|---|---|---|" + "---|" * (len(IMPLS) + 1)]
    for r in results:
        ratio = r.ratio()
        c = r.case
        lines.append(f"| {c.group} | {c.op} | {c.dtype} | {c.label()} | {r.bytes / 1e6:.0f} | " +
                     " | ".join(_cell(r, i) for i in IMPLS) +
                     f" | {'n/a' if ratio is None else f'{ratio:.2f}x'} |")
    return lines


def notes(results: list[Result]) -> list[str]:
    """Why cells are n/a (first reason per op and implementation), and the bar."""
    lines = []
    seen = set()
    for r in results:
        for impl, why in r.errors.items():
            if (r.case.op, impl) not in seen:
                seen.add((r.case.op, impl))
                lines.append(f"- {r.case.op} ({impl}): {why}")
    bar = [r for r in results if r.case.op == "silu_and_mul" and r.case.dtype == "bf16"
           and r.case.shape == (8192, 2 * 14336)]
    for r in bar:
        ours = r.tbps("tile_mlir")
        verdict = "n/a" if ours is None else \
            f"{ours:.2f} TB/s: {'met' if ours >= BAR_TBPS else 'NOT met'}"
        lines.append(f"- bar: silu_and_mul bf16 8192x14336 >= {BAR_TBPS} TB/s (H100): {verdict}")
    return lines


def report(results: list[Result], device: str, command: str, torch_version: str,
           seconds: float) -> str:
    header = [f"# Part 2 ops on {device}", "",
              f"`python3 bench/part2.py {command}`, torch {torch_version}, "
              f"{time.strftime('%Y-%m-%d')}, {seconds:.0f} s. TB/s of essential traffic "
              "(inputs read once, outputs written once), median of CUDA-graph replays over input "
              "sets rotated past L2 (*: a plain loop, the implementation did not capture). "
              "torch: eager formulas (silu_and_mul as F.silu(x[..., :N]) * x[..., N:]); "
              "inductor: torch.compile of the same. Gated shapes are the input's (M, 2N).", ""]
    return "\n".join([*header, *table(results), "", "Notes:", *(notes(results) or ["- none"])]
                     ) + "\n"


def device_slug(device: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in device.lower()).strip("-").replace("--", "-")


def write(results: list[Result], text: str, device: str) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = RESULTS / f"part2-{device_slug(device)}"
    stem.with_suffix(".md").write_text(text)
    stem.with_suffix(".json").write_text(json.dumps(
        [{**asdict(r), "tbps": {i: r.tbps(i) for i in IMPLS}} for r in results], indent=1))
    return stem


def plot(records: list[dict[str, Any]], path: Path, device: str) -> None:
    """One bar per case: tile_mlir's TB/s over the better peer's (1.0: parity), the cases
    in the table's order, from the records write() saves (so a saved run re-plots)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, ratios = [], []
    for record in records:
        case, tbps = record["case"], record["tbps"]
        peers = [tbps[i] for i in ("torch", "inductor") if tbps.get(i)]
        if tbps.get("tile_mlir") and peers:
            shape = "x".join(map(str, case["shape"]))
            labels.append(f"{case['op']} {case['dtype']} {shape}")
            ratios.append(tbps["tile_mlir"] / max(peers))
    fig, ax = plt.subplots(figsize=(8, 0.16 * len(labels) + 1.2))
    ax.barh(range(len(labels)), ratios, color=["C2" if r >= 1 else "C3" for r in ratios])
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(labels)), labels, fontsize=5)
    ax.invert_yaxis()
    ax.set_xlabel("tile_mlir TB/s / better of torch eager and inductor")
    ax.set_title(f"Part 2 ops on {device}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


# ---------------------------------------------------------------- measuring


Setup = tuple[Any, Callable[..., Any], Callable[[], tuple[list[Any], list[Any]]]]
"""(tile_mlir's function or None, torch's formula, a maker of (our args, torch's args))."""


class Bench:
    """Inputs, torch formulas and timing on the GPU (torch imported here, not above)."""

    def __init__(self, replays: int) -> None:
        import torch

        sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
        from elementwise import time_call  # the same timing as bench/elementwise.py

        from tile_mlir import ops

        self.torch, self.ops, self.time_call, self.replays = torch, ops, time_call, replays
        self.F = torch.nn.functional
        self.dtypes = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}

    # -- per group: tile_mlir's function, torch's formula, and inputs for both

    def activation(self, case: Case, ours: Any, dtype: Any) -> Setup:
        F, torch = self.F, self.torch
        formulas: dict[str, Callable[..., Any]] = {
            "gelu": lambda t: F.gelu(t, approximate="none"),
            "sigmoid": torch.sigmoid, "tanh": torch.tanh, "prelu": F.prelu}
        formula = formulas.get(case.op) or getattr(F, case.op)

        def make() -> tuple[list[Any], list[Any]]:
            x = torch.randn(case.shape, device="cuda", dtype=dtype) * 4
            if case.op == "prelu":  # one slope for every channel
                args = [x, torch.full((1,), 0.25, device="cuda", dtype=dtype)]
                return args, args
            return [x], [x]

        return ours, formula, make

    def gated(self, case: Case, ours: Any, dtype: Any) -> Setup:
        F, torch = self.F, self.torch
        act = {"silu_and_mul": F.silu, "gelu_and_mul": F.gelu,
               "gelu_tanh_and_mul": lambda t: F.gelu(t, approximate="tanh")}[case.op]

        def formula(x: Any) -> Any:
            n = x.shape[-1] // 2
            return act(x[..., :n]) * x[..., n:]

        def make() -> tuple[list[Any], list[Any]]:
            x = torch.randn(case.shape, device="cuda", dtype=dtype)
            return [x], [x]

        return ours, formula, make

    def dropout(self, case: Case, ours: Any, dtype: Any) -> Setup:
        torch = self.torch

        def make() -> tuple[list[Any], list[Any]]:
            x = torch.randn(case.shape, device="cuda", dtype=dtype)
            return [x], [x]

        mine = None if ours is None else (lambda x: ours(x, 0.1, True, seed=1234))
        return mine, (lambda x: self.F.dropout(x, 0.1, training=True)), make

    def generative(self, case: Case, ours: Any, dtype: Any) -> Setup:
        """alibi: (heads, n) of slope_h * j; sinusoidal: (positions, dim) of sin/cos
        interleaved."""
        torch = self.torch
        a, b = case.shape

        def alibi() -> Any:
            slopes = 2.0 ** (-8.0 * torch.arange(1, a + 1, device="cuda") / a)
            return (slopes[:, None] * torch.arange(b, device="cuda")).to(dtype)

        def sinusoidal() -> Any:
            position = torch.arange(a, device="cuda", dtype=torch.float32)[:, None]
            inverse = torch.exp(torch.arange(0, b, 2, device="cuda").float() *
                                (-math.log(10000.0) / b))
            table = torch.empty(a, b, device="cuda")
            table[:, 0::2] = torch.sin(position * inverse)
            table[:, 1::2] = torch.cos(position * inverse)
            return table.to(dtype)

        mine = None if ours is None else (lambda: ours(a, b, dtype=dtype, device="cuda"))
        return mine, (alibi if case.op == "alibi" else sinusoidal), lambda: ([], [])

    # -- one case

    def measure(self, case: Case) -> Result:
        result = Result(case)
        dtype = self.dtypes[case.dtype]
        # a fresh dynamo per case: formulas share code objects, and past its recompile
        # limit dynamo would quietly run one eagerly
        self.torch._dynamo.reset()
        ours = getattr(self.ops, case.op, None)
        mine, formula, make = getattr(self, case.group)(case, ours, dtype)
        our_args, torch_args = make()
        reference = formula(*torch_args)
        result.bytes = self._traffic(case, our_args, reference)
        count = min(64, max(1, math.ceil(4 * _l2_bytes(self.torch) / max(result.bytes, 1))))
        sets = [(our_args, torch_args)] + [make() for _ in range(count - 1)]
        impls = {"tile_mlir": (mine, 0), "torch": (formula, 1),
                 "inductor": (self.torch.compile(formula, dynamic=False), 1)}
        for name, (fn, which) in impls.items():
            if fn is None:
                result.errors[name] = f"tile_mlir.ops has no {case.op}"
                continue
            try:
                if name == "tile_mlir" and case.group != "dropout":
                    self._check(fn(*our_args), reference, case.op)
                seconds, how = self.time_call(fn, [s[which] for s in sets], self.replays)
                result.seconds[name], result.how[name] = seconds, how
            except Exception as e:  # noqa: BLE001 - an implementation that cannot run this
                result.errors[name] = _why(e)
        del sets
        self.torch.cuda.empty_cache()
        return result

    def _check(self, ours: Any, want: Any, op: str) -> None:
        """The benchmark counts only results that agree with torch's formula (sinusoidal's
        f32 formula, whose angles p * w lose up to p * 2^-24, within that: ours are the
        float64 angles rounded once)."""
        torch = self.torch
        pairs = zip(ours, want, strict=True) if isinstance(want, tuple) else [(ours, want)]
        for got, expected in pairs:
            if got.shape != expected.shape or got.dtype != expected.dtype:
                raise AssertionError(f"result {got.dtype}{tuple(got.shape)}, torch's formula "
                                     f"gives {expected.dtype}{tuple(expected.shape)}")
            wide = expected.dtype != torch.float32
            angles = got.shape[0] * 2.0 ** -24 if op == "sinusoidal" else 0.0
            close = torch.isclose(got.float(), expected.float(), rtol=2e-2 if wide else 1e-4,
                                  atol=max(5e-2 if wide else 1e-4, 2 * angles), equal_nan=True)
            if not bool(close.all()):
                raise AssertionError(f"{int((~close).sum())} elements differ from torch's")

    def _traffic(self, case: Case, our_args: list[Any], reference: Any) -> int:
        outputs = reference if isinstance(reference, tuple) else (reference,)
        written = sum(o.numel() * o.element_size() for o in outputs)
        read = sum(t.numel() * t.element_size() for t in our_args
                   if isinstance(t, self.torch.Tensor))
        return read + written


def _why(e: Exception) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"


def _l2_bytes(torch: Any) -> int:
    return int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="part 2 ops vs torch eager and inductor")
    parser.add_argument("--quick", action="store_true", help="the bars only")
    parser.add_argument("--only", help="groups: gated,activation,dropout,generative")
    parser.add_argument("--sizes", default="24,26,28", help="log2 sizes of the activations")
    parser.add_argument("--replays", type=int, default=30, help="timed replays per case")
    parser.add_argument("--dry-run", action="store_true",
                        help="list the cases and print an empty table (no GPU)")
    parser.add_argument("--plot", type=Path, metavar="JSON",
                        help="only plot a saved run (its .json) to the .png beside it")
    args = parser.parse_args(argv)
    if args.plot is not None:
        device = args.plot.stem.removeprefix("part2-")
        plot(json.loads(args.plot.read_text()), args.plot.with_suffix(".png"), device)
        return 0
    cases = plan(args)
    if args.dry_run:
        print("\n".join(table([Result(c) for c in cases])))
        print(f"{len(cases)} cases")
        return 0
    bench = Bench(args.replays)
    device = bench.torch.cuda.get_device_name(0)
    started = time.time()
    results = []
    for case in cases:
        result = bench.measure(case)
        results.append(result)
        print(table([result])[-1], *[f"  ({k}: {v})" for k, v in result.errors.items()],
              flush=True)
    text = report(results, device, " ".join(sys.argv[1:] if argv is None else argv),
                  bench.torch.__version__, time.time() - started)
    stem = write(results, text, device)
    plot(json.loads(stem.with_suffix(".json").read_text()), stem.with_suffix(".png"), device)
    print(text)
    print(f"wrote {stem}.md, .json, .png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
