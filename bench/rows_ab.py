"""A/B of the row ops' geometries: the planner's plan against forced ones (ops/rows.py's
Forced), beside torch eager and torch.compile, every variant's result checked against
torch's first, all timed by the one DeviceTimer in one process (TB/s of bench/fused.py's
traffic). The experiments behind ops/rows.py's constants are of this shape.

    python3 bench/rows_ab.py layer_norm:f32:65536 softmax:bf16:16384 \\
        --variant cluster:ctas=8,ahead=16 --variant cluster:ctas=16,lanes=4096

A case is OP:DTYPE:N (M rows of N at bench/fused.py's 128 MiB); OP one of the row ops or
a reduction a row held in registers serves (sum, amax, amin, mean over the last dim). A
variant is STRATEGY[:KEY=VALUE,...] with Forced's keys (lanes, ctas, parts, early,
ahead, stack); every case runs every variant; --without-edges adds the planner's plan
with rows that start unaligned read narrow (no Geometry.edges: ops/rows.py's EDGES),
--precise-exp the planner's plan with softmax's e^x by libdevice's expf for every dtype
(ops/rows.py's SOFTMAX_EXP), as in

    python3 bench/rows_ab.py softmax:f32:257 log_softmax:f32:257 softmax:bf16:4096 \\
        softmax:f32:32001 --precise-exp

and --setting NAME=VALUE the planner's plan with ops/rows.py's constant NAME set to the
Python literal VALUE (the norms' weights read without their copies, for one;
reduction.NAME one of ops/programs/reduction.py's, the reductions' stages; schedule.NAME
one of lowering/schedules/reduction.py's, how their kernels are lowered, each such variant
compiled afresh; --mib the input's size, 128 by default):

    python3 bench/rows_ab.py layer_norm:bf16:4097 rms_norm:bf16:32001 \\
        --setting COPY_BYTES=1099511627776

Whether the stages' lanes should read their common rounds as a loop of a static trip count
(lowering/schedules/reduction.py's ROUND_VALUES, 0 for none), for one:

    python3 bench/rows_ab.py sum:f32:513 amax:f32:513 sum:f32:257 sum:f32:1024 \\
        sum:bf16:8192 sum:f32:128 --mib 256 --setting schedule.ROUND_VALUES=0

Whether a CTA should hold a stack of short rows of odd length (Geometry.stack), for one:

    python3 bench/rows_ab.py softmax:bf16:1025 log_softmax:bf16:1025 sum:bf16:1025 \\
        softmax:bf16:999 softmax:bf16:2049 sum:bf16:2049 --variant cta:lanes=64 \\
        --variant cta:lanes=64,stack=2 --variant cta:lanes=64,stack=4
    python3 bench/rows_ab.py softmax:bf16:513 softmax:bf16:257 softmax:bf16:77 \\
        softmax:f32:257 --variant cta:lanes=32 --variant cta:lanes=32,stack=4 \\
        --variant cta:lanes=32,stack=8

and how the fused add's rows of two inputs should be held (ops/rows.py's EDGE_PAIR_PARTS
and STACKS have the figures):

    python3 bench/rows_ab.py fused_add_rms_norm:f32:513 fused_add_rms_norm:f32:257 \\
        fused_add_rms_norm:bf16:257 fused_add_rms_norm:bf16:513 --variant cta:lanes=32 \\
        --variant cta:lanes=32,stack=4 --variant cta:lanes=64,stack=4
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import fused
import harness

REDUCTIONS = ("sum", "amax", "amin", "mean")
FORCED_KEYS = ("lanes", "ctas", "parts", "early", "ahead", "stack")


def parse_case(text: str) -> tuple[str, str, int]:
    """OP:DTYPE:N, checked."""
    parts = text.split(":")
    if len(parts) != 3 or parts[0] not in (*fused.OPS, *REDUCTIONS) or \
            parts[1] not in fused.DTYPES or not parts[2].isdigit() or int(parts[2]) < 1:
        raise argparse.ArgumentTypeError(
            f"case {text!r}: OP:DTYPE:N with OP one of {', '.join((*fused.OPS, *REDUCTIONS))}, "
            f"DTYPE one of {', '.join(fused.DTYPES)}, N a row length")
    return parts[0], parts[1], int(parts[2])


def _module(name: str) -> tuple[Any, str]:
    """The module of a setting's NAME (ops/rows.py's; reduction.NAME:
    ops/programs/reduction.py's; schedule.NAME: lowering/schedules/reduction.py's) and the
    constant's own name."""
    from tile_mlir.lowering.schedules import reduction as schedule
    from tile_mlir.ops import rows
    from tile_mlir.ops.programs import reduction

    prefix, _, constant = name.rpartition(".")
    return {"": rows, "reduction": reduction, "schedule": schedule}.get(prefix), constant


def _lowering(name: str) -> bool:
    """Whether a setting changes how the lowering builds a kernel of the same tile IR (its
    variants then need kernels of their own: no cache may hand one the other's)."""
    return name.startswith("schedule.")


def parse_setting(text: str) -> tuple[str, Any]:
    """NAME=VALUE: one of ops/rows.py's constants (or reduction.NAME, one of
    ops/programs/reduction.py's; schedule.NAME, one of lowering/schedules/reduction.py's)
    and a Python literal, checked."""
    import ast

    name, _, value = text.partition("=")
    module, constant = _module(name)
    if module is None or not constant.isupper() or not hasattr(module, constant):
        raise argparse.ArgumentTypeError(f"setting {text!r}: NAME is one of ops/rows.py's "
                                         "constants (COPY_BYTES, EDGES, ...), "
                                         "reduction.NAME, one of ops/programs/reduction.py's, "
                                         "or schedule.NAME, one of "
                                         "lowering/schedules/reduction.py's")
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        raise argparse.ArgumentTypeError(f"setting {text!r}: VALUE is a Python literal") \
            from None


def parse_variant(text: str) -> tuple[str, dict[str, int]]:
    """STRATEGY[:KEY=VALUE,...] as Forced's arguments, checked."""
    strategy, _, rest = text.partition(":")
    options: dict[str, int] = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        if key not in FORCED_KEYS or not value.isdigit():
            raise argparse.ArgumentTypeError(
                f"variant {text!r}: {item!r} is not KEY=NUMBER with KEY one of "
                f"{', '.join(FORCED_KEYS)}")
        options[key] = int(value)
    if strategy not in ("warp", "cta", "cluster", "split"):
        raise argparse.ArgumentTypeError(
            f"variant {text!r}: the strategy is one of warp, cta, cluster, split")
    return strategy, options


@dataclass(frozen=True)
class Calls:
    """A case's calls on one set of inputs (the fused add updates its own in place on
    every call): ours, torch's; and, for the check, ours and torch's on fresh copies of
    the inputs (for the fused add, the updated x)."""

    ours: Callable[[], Any]
    eager: Callable[[], Any]
    ours_checked: Callable[[], Any]
    want: Callable[[], Any]


def _calls(op: str, dtype: str, m: int, n: int) -> Calls:
    import torch

    from tile_mlir import ops

    t = harness.torch_dtype(dtype)
    x = torch.randn(m, n, device="cuda", dtype=t)
    if op in REDUCTIONS:
        mine, theirs = getattr(ops, op), getattr(torch, op)
        return Calls(lambda: mine(x, -1), lambda: theirs(x, dim=-1), lambda: mine(x, -1),
                     lambda: theirs(x, dim=-1))
    weight, bias, residual = (torch.randn(n, device="cuda", dtype=t),
                              torch.randn(n, device="cuda", dtype=t), torch.randn_like(x))
    eager, ours = fused.formulas(op, n)
    assert ours is not None
    extra = {"rms_norm": (weight,), "layer_norm": (weight, bias),
             "fused_add_rms_norm": (residual, weight)}.get(op, ())
    args = (x, *extra)

    def on_copies(fn: Callable[..., Any]) -> Callable[[], Any]:
        def run() -> Any:
            copies = tuple(a.clone() if a is x or a is residual else a for a in args)
            result = fn(*copies)
            return copies[0] if op == "fused_add_rms_norm" else result
        return run

    return Calls(lambda: ours(*args), lambda: eager(*args), on_copies(ours),
                 on_copies(eager))


def time_case(timer: Any, case: tuple[str, str, int],
              variants: Sequence[tuple[str, dict[str, int]]], *, without_edges: bool = False,
              precise_exp: bool = False, settings: Sequence[tuple[str, Any]] = (),
              total: int = 0) -> str:
    """One case's line: TB/s of torch eager, torch.compile, the planner's plan, each
    variant (and the planner's without edges: `without_edges`; with expf: `precise_exp`;
    under each of `settings`); each variant's result first checked against torch's.
    `total`: the input's bytes (bench/fused.py's by default)."""
    import torch

    from tile_mlir.ops import rows

    op, dtype, n = case
    size = harness.ITEMSIZE[dtype]
    m = max(1, (total or fused.TOTAL_BYTES) // (n * size))
    made = _calls(op, dtype, m, n)
    torch._dynamo.reset()  # past its recompile limit dynamo would quietly run eagerly
    compiled = torch.compile(made.eager, dynamic=False)
    calls: dict[str, Callable[[], Any]] = {"eager": made.eager, "compile": compiled}
    want = made.want()
    rtol, atol = fused.TOLERANCE[dtype]
    loose = 4 if op in REDUCTIONS else 1  # sums of a row in another order
    named: list[tuple[str, AbstractContextManager[Any]]] = [
        ("planned", nullcontext()),
        *((f"{s}:{o}", rows.forced(s, **o)) for s, o in variants),
        *([("no edges", _without_edges())] if without_edges else []),
        *([("expf", _setting("SOFTMAX_EXP", dict.fromkeys(rows.SOFTMAX_EXP, "exp")))]
          if precise_exp else []),
        *((f"{name}={value!r}", _setting(name, value)) for name, value in settings)]
    for name, planning in named:
        got, calls[name] = harness.variant(planning, made.ours_checked, made.ours)
        harness.assert_close(got, want, rtol=rtol * loose, atol=atol * loose)
    compiled()
    times = timer.time(calls)
    bytes_ = (m * n + m) * size if op in REDUCTIONS else fused.traffic(op, m, n, dtype)
    return f"{op} {dtype} {m}x{n}: " + ", ".join(
        f"{k} {bytes_ / t.median_s / 1e12:.3f}" for k, t in times.items()) + " TB/s"


def _without_edges() -> AbstractContextManager[None]:
    """The planner's plans with rows that start unaligned read narrow (no family takes
    edges: ops/rows.py's EDGES)."""
    return _setting("EDGES", ())


@contextmanager
def _setting(name: str, value: Any) -> Iterator[None]:
    """ops/rows.py's constant `name` (or reduction.NAME, schedule.NAME) set to `value` for
    a variant's plans; a lowering's setting compiles the variant's kernels afresh (the
    loaded ones forgotten; main turns the kernel cache off)."""
    from tile_mlir.ops import kernels

    module, constant = _module(name)
    before = getattr(module, constant)
    setattr(module, constant, value)
    if _lowering(name):
        kernels.clear()
    try:
        yield
    finally:
        setattr(module, constant, before)
        if _lowering(name):
            kernels.clear()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cases", nargs="+", type=parse_case, metavar="OP:DTYPE:N")
    parser.add_argument("--variant", action="append", type=parse_variant, default=[],
                        metavar="STRATEGY[:KEY=VALUE,...]")
    parser.add_argument("--without-edges", action="store_true",
                        help="the planner's plan with no row read with edges, beside")
    parser.add_argument("--precise-exp", action="store_true",
                        help="the planner's plan with softmax's e^x by expf, beside")
    parser.add_argument("--setting", action="append", type=parse_setting, default=[],
                        metavar="NAME=VALUE", help="the planner's plan with ops/rows.py's "
                        "NAME (or reduction.NAME: ops/programs/reduction.py's; schedule.NAME: "
                        "lowering/schedules/reduction.py's) set to VALUE, beside")
    parser.add_argument("--mib", type=int, default=fused.TOTAL_BYTES >> 20,
                        help="the input's size in MiB")
    parser.add_argument("--reps", type=int, default=150)
    args = parser.parse_args(argv)
    if any(_lowering(name) for name, _ in args.setting):
        os.environ["TILE_MLIR_CACHE"] = "0"  # a kernel's request is its tile IR: the same
    import torch

    from tile_mlir.ops.timing import DeviceTimer

    timer = DeviceTimer(args.reps)
    print(f"device: {torch.cuda.get_device_name()}; {args.reps} repetitions")
    for case in args.cases:
        print(time_case(timer, case, args.variant, without_edges=args.without_edges,
                        precise_exp=args.precise_exp, settings=args.setting,
                        total=args.mib << 20), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
