"""The autotuner: per (op family, dtype, size class), the fastest strategy on this GPU.

For each key (or, with `--per-op`, each op's own: an op whose cost is not its family's;
with `--rows`, the family's for launches over rows: strategy.ROWS) it times every
candidate strategy (threads per CTA, vector width, rounds per thread, staged or not, and
seed 004's direct one) on an op of the family (and the family's SAMPLES: the geometric
mean of their times) at a size of the class, the way the benchmarks time every system
(timing.DeviceTimer: the candidates interleaved repetition by repetition, the L2 flushed
before each, the median of at least 100), keeps the fastest (the key's earlier choice,
the default where it has none, or for an op's own key its family's choice, where that is
within `margin` of it), and merges the choices into `ops-tuning-<target>.json` in the
kernel cache's directory (the target: the chip and the device model,
`sm_90-nvidia-h200`), where strategy.choose finds them in every later process; `--ship`
merges them into the package's file for the target instead. It needs torch (for the
tensors and events). Each power of two below 2^24 is a size class, then 2^24 and 2^25
one, and from 2^26 on one (strategy.SIZE_CLASSES): `--sizes` names one size per class to
tune, by default the smallest of each.

    python -m tile_mlir.ops.tune                      # one op per family, every dtype
    python -m tile_mlir.ops.tune --ops add --dtypes bf16 --sizes 16,18,26
    python -m tile_mlir.ops.tune --ops softplus,mish --dtypes bf16 --per-op
    python -m tile_mlir.ops.tune --ops add --dtypes bf16 --sizes 26 --rows  # bias adds
    python -m tile_mlir.ops.tune --chip-ops --ship   # a device the chip's file was not tuned on
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tile_mlir import op_table, ops
from tile_mlir.dtypes import DTYPES
from tile_mlir.ops import entry, strategy, timing
from tile_mlir.ops.programs.elementwise import Strategy

CANDIDATES = [
    Strategy(256, 1, 1, 1),  # direct
    *(Strategy(threads, 16, rounds, stage)
      for threads in (128, 256, 512) for rounds in (1, 2, 4, 8)
      for stage in sorted({1, rounds})),
    *(Strategy(threads, 8, rounds, stage)  # 8-byte vectors
      for threads in (128, 256, 512) for rounds in (1, 2) for stage in sorted({1, rounds})),
    Strategy(256, 32, 2, 2),  # 32-byte vectors
    Strategy(256, 32, 4, 4),
]
"""The strategies tried for every key. 8-byte vectors are Inductor's pick for add f32 at
2^28 (XBLOCK 512, 8 warps: two f32 a thread). Measured on an H100 beside torch.compile
(one run, 150 repetitions, TB/s): add f32 2^28 3.115 at 512 threads (torch.compile
3.065), bf16 3.110 at 256 (3.084), f32 2^26 3.130 at 256 (3.130); exp f32 2^28 3.041 at
256 threads, 2 rounds (3.032). Against the 16-byte choice it replaced, in the tuner's own
run: add f32 at 2^26 1.01x (256x1 of 8 B, 257.7 us)."""

CLASS_SIZES = (strategy.SIZE_CLASSES[0][0] - 1,
               *(bound for bound, _ in strategy.SIZE_CLASSES[:-1]))
"""A log2 size in each size class, its smallest (below 2^14: 2^13): --sizes' default."""

REPRESENTATIVE = {"unary_math": "exp", "binary_arith": "add", "activation": "silu",
                  "fused_gated": "silu_and_mul", "comparison": "lt",
                  "bitwise": "bitwise_and", "logical": "logical_and", "special": "where"}
"""The op a run without --ops times for each family (the shipped choices were made on
these)."""

ROW_SAMPLE = "@row"
"""A sample's suffix for the rows keys (strategy.ROWS, --rows): the op timed as a bias
add, its last tensor input a row of ROW_WIDTH elements broadcast over (numel /
ROW_WIDTH, ROW_WIDTH), which the kernel runs as pieces of rows."""
ROW_WIDTH = 4096


def base_op(name: str) -> str:
    """The library's op of a sample's name (add of add@row)."""
    return name.removesuffix(ROW_SAMPLE)


def over_rows(op: str) -> bool:
    """Whether the op can be timed as a bias add: two tensor inputs or more, of one shape
    (a gated op's one input holds both halves)."""
    return op_table.ELEMENTWISE[op].family != "fused_gated" and tensor_inputs(op) >= 2


SAMPLES = {"unary_math": ("exp", "sqrt", "neg"), "binary_arith": ("add", "div"),
           "activation": ("silu", "relu"), "special": ("where", "clamp", "isnan")}
"""The ops a family's key is also timed on, besides the one the run names (those of them
with the key's dtype): a family's choice serves ops of other shapes and costs, and the
one that suits one op may not suit another. Measured on an H100 (bench/elementwise.py's
rows of 2^28, against the 16-byte choices before): with the 2^26 class tuned on exp and
where alone, 8-byte vectors won those two and lost sqrt f32 3.04 -> 2.88 TB/s, clamp f16
3.04 -> 2.83 and isnan f32 3.12 -> 2.75. A key's candidates are ranked by the geometric
mean of their times over the ops (each op weighs the same, whatever its length). A rows
key is timed on the same ops of two or more tensor inputs, each as a bias add."""


class MissingTorch(RuntimeError):
    """The autotuner runs where torch is not installed."""


def _torch() -> Any:
    try:
        import torch
    except ImportError as e:
        raise MissingTorch("the autotuner needs torch (tensors and CUDA events)") from e
    return torch


SCALAR_CALLS: dict[str, tuple[float, ...]] = {"clamp": (-1.0, 1.0)}
"""Ops the tuner calls with Python scalars for their last inputs, as they are mostly
called (torch.clamp(x, -1, 1)): their keys serve that call. Tuned with tensor bounds (four
tensors' traffic, not two) clamp's H200 choices at 2^26 ran bench/elementwise.py's
scalar-bound rows of 2^28 at 0.82x (i64), 0.91x (i32) and 0.92x (f32) of the best
peer; tuned with scalars, 0.98-1.01x."""


def tensor_inputs(op: str) -> int:
    """How many leading inputs of the op the tuner passes as tensors: all but its
    scalar-only ones (softplus's beta and threshold), which take their defaults, and
    those SCALAR_CALLS gives; those must come last."""
    row = op_table.ELEMENTWISE[op]
    count = row.arity - len(row.scalar_only)
    if set(row.scalar_only) != set(range(count, row.arity)):
        raise ValueError(f"{op}: the tuner passes tensors for the leading inputs, but its "
                         f"scalar-only inputs {row.scalar_only} are not the last")
    return count - len(SCALAR_CALLS.get(op, ()))


GATED_WIDTH = 14336
"""N of the (M, 2N) input a gated op (silu_and_mul) is tuned on: a model's intermediate
size (Llama-3-8B's, bench/part2.py's). The width matters: on an H100, choices tuned on
rows of 4096 (one 256x2 CTA's piece a row) were 1-2.5% slower on rows of 14336 than the
default, while the fastest there (128x1 for silu_and_mul bf16/f16, 3.11 TB/s) beat
torch.compile."""


def _arguments(torch: Any, op: str, dtype: str, numel: int) -> list[Any]:
    """The op's arguments for a call of `numel` result elements: its tensors, then the
    scalars SCALAR_CALLS gives it. A gated op (family fused_gated: act(x[..., :N]) *
    x[..., N:]) takes one (numel / N, 2N) input."""
    row = op_table.ELEMENTWISE[base_op(op)]

    def make(kind: str, shape: tuple[int, ...] = (numel,)) -> Any:
        if kind == "bool":
            return torch.rand(shape, device="cuda") < 0.5
        if not DTYPES[kind].is_float:
            return torch.randint(-100, 100, shape, device="cuda",
                                 dtype=getattr(torch, DTYPES[kind].numpy))
        return (torch.randn(shape, device="cuda") * 4).to(getattr(torch, DTYPES[kind].numpy))

    if row.family == "fused_gated":
        width = min(GATED_WIDTH, numel)
        return [make(dtype, (max(numel // width, 1), 2 * width))]
    count = tensor_inputs(base_op(op))
    shapes: list[tuple[int, ...]] = [(numel,)] * count
    if op.endswith(ROW_SAMPLE) and over_rows(base_op(op)):  # the last input one row
        width = min(ROW_WIDTH, numel)
        shapes = [(numel // width, width)] * (count - 1) + [(width,)]
    return [*(make("bool" if n in row.keep else dtype, shapes[n]) for n in range(count)),
            *SCALAR_CALLS.get(base_op(op), ())]


def _planned(fn: Callable[..., Any], args: Sequence[Any], choice: Strategy
             ) -> dict[Any, Any]:
    """The library's plans of fn(*args) under `choice` (entry.PLANS after one call)."""
    strategy.force(choice)  # the plans made before are forgotten
    fn(*args)
    return dict(entry.PLANS)


def candidate_calls(op: str, dtype: str, numel: int, candidates: Sequence[Strategy],
                    log: Callable[[str], None]
                    ) -> tuple[list[Any], dict[Strategy, Callable[[], Any]]]:
    """The op's arguments, and per candidate that could be planned (one that fails is
    logged and left out) a call of the op on them under it: the call puts the
    candidate's plans back into the plan cache first, so that it takes the fast path
    as a user's call does. Leaves no strategy forced."""
    torch = _torch()
    fn = getattr(ops, base_op(op))
    args = _arguments(torch, op, dtype, numel)
    calls: dict[Strategy, Callable[[], Any]] = {}
    try:
        for choice in candidates:
            try:
                plans = _planned(fn, args, choice)
            except Exception as e:  # noqa: BLE001 - a candidate that fails is not chosen
                log(f"    {strategy.name(choice)}: failed ({type(e).__name__}: {e})")
                continue

            def call(plans: dict[Any, Any] = plans) -> Any:
                entry.adopt(plans)
                return fn(*args)

            calls[choice] = call
    finally:
        strategy.force(None)
    return args, calls


def time_candidates(op: str, dtype: str, numel: int, candidates: Sequence[Strategy],
                    log: Callable[[str], None], *, reps: int = timing.MIN_REPS
                    ) -> dict[Strategy, float]:
    """Seconds per call of the op under each candidate that could be planned, timed
    together (timing.DeviceTimer: interleaved, L2 flushed, the median)."""
    _, calls = candidate_calls(op, dtype, numel, candidates, log)
    if not calls:
        return {}
    try:
        timings = timing.DeviceTimer(reps).time(calls)
    finally:
        entry.clear()  # the last candidate's plans: the op plans again
    return {choice: t.median_s for choice, t in timings.items()}


MARGIN = 0.02
"""Below LARGE elements a candidate replaces the key's earlier choice (strategy.default
where it has none) only when it is this much faster. There a call takes 4-15 us by the
events, 1.6-10 us of it the kernel, and the candidates differ by less than a median
moves between runs (on an H100, torch eager's add of 2^18 f32 took 5.55 us in one run of
bench/sizes.py and 5.22 in the next): without the margin the choice there follows the
noise (a tuning of add, exp and silu at 2^13..2^23 changed 85 of 99 keys, by 0-11%)."""
LARGE = 1 << 22
LARGE_MARGIN = 0.005
"""From LARGE elements a call is tens of microseconds or more and its median repeats
within a few tenths of a percent (an H100, 2^24 bf16 add: the three fastest candidates
ranked the same, within 0.2%, in two runs), while the margin is what the tables lose:
with 2% the defaults kept there were 1-2% slower than the fastest candidate and than
torch (comparison, logical and where at 2^24 and 2^28 at 0.98-0.99x)."""


def margin(numel: int) -> float:
    """How much faster than the key's choice a candidate must be at this size."""
    return LARGE_MARGIN if numel >= LARGE else MARGIN


def pick(timings: dict[Strategy, float], anchor: Strategy, numel: int = 0) -> Strategy:
    """The fastest candidate, or `anchor` (the choice the key has) where it is within
    `margin(numel)` of it."""
    best = min(timings, key=lambda c: timings[c])
    if anchor in timings and timings[anchor] <= timings[best] * (1 + margin(numel)):
        return anchor
    return best


def sample(op: str, dtype: str, rows: bool = False) -> tuple[str, ...]:
    """The ops a family key of op's is timed on: op, then its family's SAMPLES of dtype;
    for its rows key (`rows`) those of them with two tensor inputs or more, each as a bias
    add (ROW_SAMPLE)."""
    others = SAMPLES.get(op_table.ELEMENTWISE[op].family, ())
    timed = (op, *(o for o in others if o != op and dtype in op_table.ELEMENTWISE[o].dtypes))
    if not rows:
        return timed
    return tuple(o + ROW_SAMPLE for o in timed if over_rows(o))


def tune_key(ops: Sequence[str], dtype: str, numel: int, log: Callable[[str], None], *,
             reps: int = timing.MIN_REPS, anchor: Strategy | None = None
             ) -> tuple[Strategy, dict[Strategy, float]]:
    """The choice for a key of dtype and numel timed on `ops` (`pick`, against `anchor`:
    the default unless given), and per candidate that ran for every op the geometric mean
    of its seconds per call over them."""
    each = [time_candidates(op, dtype, numel, CANDIDATES, log, reps=reps) for op in ops]
    ran = [c for c in CANDIDATES if all(c in t for t in each)]
    timings = {c: math.prod(t[c] for t in each) ** (1 / len(each)) for c in ran}
    if not timings:
        raise RuntimeError(f"no candidate ran for {', '.join(ops)} {dtype} {numel}")
    return pick(timings, anchor or strategy.default(numel), numel), timings


@dataclass(frozen=True)
class Outcome:
    """One key's result: the choice, its time, and what the op ran with before."""

    key: str
    best: Strategy
    seconds: float
    before: Strategy
    before_seconds: float | None  # None when the earlier choice was not a candidate
    fastest: tuple[Strategy, float] | None = None  # where the margin kept another
    ops: tuple[str, ...] = ()  # the ops timed: several, the times their geometric mean

    def line(self) -> str:
        near = ""
        if self.fastest is not None and self.fastest[0] != self.best:
            near = (f"; {strategy.name(self.fastest[0])} {self.fastest[1] * 1e6:.1f} us is "
                    "within the margin")
        on = f" on {', '.join(self.ops)}" if len(self.ops) > 1 else ""
        if self.best == self.before:
            return (f"{self.key}: {strategy.name(self.best)} {self.seconds * 1e6:.1f} us{on} "
                    f"(unchanged{near})")
        gain = f", {self.before_seconds / self.seconds:.2f}x" if self.before_seconds else ""
        return (f"{self.key}: {strategy.name(self.best)} {self.seconds * 1e6:.1f} us{on} (was "
                f"{strategy.name(self.before)}{gain}{near})")


def _keys(cases: Sequence[tuple[str, str, int]], per_op: bool = False, rows: bool = False
          ) -> dict[str, tuple[str, str, int]]:
    """One case per key (the first), for the registry's ops: a key per family (with
    `rows` its rows key), or with `per_op` per op."""
    keys: dict[str, tuple[str, str, int]] = {}
    for op, dtype, numel in cases:
        if op in op_table.ELEMENTWISE:
            family = op_table.ELEMENTWISE[op].family + (strategy.ROWS if rows else "")
            name = strategy.op_key(op, dtype, numel) if per_op else \
                strategy.key(family, dtype, numel)
            keys.setdefault(name, (op, dtype, numel))
    return keys


def run(cases: Sequence[tuple[str, str, int]], log: Callable[[str], None] = print, *,
        ship: bool = False, command: str = "", reps: int = timing.MIN_REPS,
        per_op: bool = False, rows: bool = False) -> list[Outcome]:
    """Tune the keys of the (op, dtype, numel) cases (once each), a line per key with its
    elapsed time as it goes, each choice saved as it is made (an interrupted run keeps
    the keys it finished), and end with a summary of what changed. `command` goes into
    the file's meta with the device and the date. With `per_op` each op gets a key of its
    own, against its family's choice: saved where it differs from that, or where another
    file's key for the op (the chip's) would otherwise still be read. With `rows` the
    families' rows keys (strategy.ROWS), each op timed as a bias add, against the choice
    such a launch takes now."""
    from tile_mlir.runtime import driver

    if per_op and rows:
        raise ValueError("a run tunes an op's own keys or the families' rows keys, not both")
    target = strategy.target(driver.device_chip(0), driver.device_name(0))
    keys = _keys(cases, per_op, rows)
    meta = {"device": driver.device_name(0), "command": command,
            "date": time.strftime("%Y-%m-%d", time.gmtime())}
    outcomes: list[Outcome] = []
    started = time.perf_counter()
    path = strategy.shipped_file(target) if ship else strategy.tuning_file(target)
    for n, (name, (op, dtype, numel)) in enumerate(keys.items(), start=1):
        family = op_table.ELEMENTWISE[op].family
        before = strategy.choose(family, dtype, numel, target, op if per_op else None,
                                 rows=rows)
        # what stays within the margin: an op's key its family's choice; a family key its
        # own earlier choice, so that a run never trades the choice it measured fastest
        # for a default within the margin (binary_arith/f32/2^16 on an H100: 4.8 us kept
        # over the default's 4.9, where anchoring at the default went back 2% slower)
        anchor = strategy.choose(family, dtype, numel, target) if per_op else before
        t0 = time.perf_counter()
        timed = (op,) if per_op else sample(op, dtype, rows)
        best, timings = tune_key(timed, dtype, numel, log, reps=reps, anchor=anchor)
        fastest = min(timings, key=lambda c: timings[c])
        outcome = Outcome(name, best, timings[best], before, timings.get(before),
                          (fastest, timings[fastest]), timed)
        outcomes.append(outcome)
        # an op's key saying what its family's does: none, unless another file's key for
        # the op (the chip's, tuned on another device of it) would then be read before
        # the family's: this file says the family's choice there
        same = per_op and best == anchor and \
            strategy.elsewhere(target, name, path) in (None, best)
        path = strategy.save(target, {} if same else {name: best}, meta, shipped=ship,
                             dropped=[name] if same else [])
        log(f"[{n}/{len(keys)}] {outcome.line()} in {time.perf_counter() - t0:.1f} s")
    log(summary(outcomes, time.perf_counter() - started, path))
    return outcomes


def summary(outcomes: Sequence[Outcome], seconds: float, path: Path) -> str:
    """How many keys changed, by how much, and where the choices went."""
    changed = [o for o in outcomes if o.best != o.before]
    lines = [f"tuned {len(outcomes)} keys in {seconds:.0f} s: {len(changed)} changed, "
             f"{len(outcomes) - len(changed)} kept; saved to {path}"]
    lines += [f"  {o.line()}" for o in changed]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tile_mlir.ops.tune", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", help="comma-separated ops (default: one per family)")
    parser.add_argument("--dtypes", help="comma-separated dtypes (default: each op's)")
    parser.add_argument("--sizes", help="log2 sizes, one per size class (default: every "
                                        "class)")
    parser.add_argument("--ship", action="store_true",
                        help="write the choices into the package's defaults for this device "
                             "(tile_mlir/ops/tuned/<chip>-<model>.json, read over the "
                             "chip's <chip>.json) instead of the user's file")
    parser.add_argument("--per-op", action="store_true",
                        help="a choice per op (read before its family's), saved where it "
                             "differs from the family's")
    parser.add_argument("--chip-ops", action="store_true",
                        help="per op, every op, dtype and size class the chip's own file "
                             "(tuned/<chip>.json) keys on its own, which would otherwise "
                             "decide them on this device too (a device of the chip that is "
                             "not the one the file was tuned on)")
    parser.add_argument("--rows", action="store_true",
                        help="the families' choices for launches over rows (a bias add's: "
                             "an operand broadcast over the rows), each op timed so; ops "
                             "of two tensor inputs or more")
    parser.add_argument("--reps", type=int, default=timing.MIN_REPS,
                        help=f"repetitions per candidate (at least {timing.MIN_REPS})")
    args = parser.parse_args(argv)
    if args.chip_ops and (args.ops or args.dtypes or args.sizes):
        parser.error("--chip-ops: the ops, dtypes and sizes are the chip's file's; give "
                     "--ops, --dtypes and --sizes without it")
    try:
        cases = [] if args.chip_ops else _cases(args.ops, args.dtypes, args.sizes or
                                                ",".join(map(str, CLASS_SIZES)))
    except ValueError as e:
        parser.error(str(e))
    if args.reps < timing.MIN_REPS:
        parser.error(f"--reps: at least {timing.MIN_REPS}, got {args.reps}")
    if args.rows and (args.per_op or args.chip_ops):
        parser.error("--rows: the families' rows keys; give it without --per-op and "
                     "--chip-ops")
    if args.rows:
        single = sorted({op for op, _, _ in cases if not over_rows(op)})
        if single and args.ops:
            parser.error(f"--rows: {', '.join(single)} takes one tensor input (a gated "
                         "op's holds both halves): no bias add to time")
        cases = [case for case in cases if over_rows(case[0])]
    from tile_mlir.runtime import driver

    try:
        if args.chip_ops:
            cases = chip_op_cases(driver.device_chip(0))
        run(cases, ship=args.ship, reps=args.reps, per_op=args.per_op or args.chip_ops,
            rows=args.rows,
            command=" ".join(["python -m tile_mlir.ops.tune", *(argv if argv is not None
                                                                 else sys.argv[1:])]))
    except driver.NoGpuError as e:
        print(f"{parser.prog}: the autotuner times kernels on a GPU: {e}", file=sys.stderr)
        return 1
    except MissingTorch as e:
        print(f"{parser.prog}: {e}", file=sys.stderr)
        return 1
    return 0


def chip_op_cases(chip: str) -> list[tuple[str, str, int]]:
    """(op, dtype, numel) of each op key the package's file for the chip holds (numel the
    smallest of the key's size class): --chip-ops. An op key in the chip's file is read
    before a device's family key (strategy.find), so a device of the chip tunes these
    ops on their own (tune --per-op keeps their keys even where they say the family's)."""
    smallest = dict(zip((name for _, name in strategy.SIZE_CLASSES), CLASS_SIZES, strict=True))
    cases = []
    for key in sorted(strategy.shipped(chip)):
        if not key.startswith(strategy.OP_PREFIX):
            continue
        op, dtype, size_class = key[len(strategy.OP_PREFIX):].split("/")
        if op in op_table.ELEMENTWISE and callable(getattr(ops, op, None)):
            cases.append((op, dtype, 1 << smallest[size_class]))
    return cases


MAX_LOG2 = 34
"""The largest --sizes (2^34 elements: more than a GPU's memory holds of any dtype)."""


def _cases(ops_text: str | None, dtypes_text: str | None, sizes_text: str
           ) -> list[tuple[str, str, int]]:
    """The (op, dtype, numel) cases of the command line; ValueError naming the option for
    an op that is not a library function with a tensor input, a dtype that is not one, a
    size that is not a log2 size, or options that leave nothing to tune."""
    names = _split(ops_text) if ops_text else list(REPRESENTATIVE.values())
    for op in names:
        row = op_table.ELEMENTWISE.get(op)
        if row is None or not callable(getattr(ops, op, None)):
            raise ValueError(f"--ops: {op!r} is not one of the library's elementwise ops "
                             "(python -m tile_mlir.ops --list)")
        if not tensor_inputs(op):
            raise ValueError(f"--ops: {op!r} takes no tensor input to time")
    dtypes = _split(dtypes_text) if dtypes_text else None
    for dtype in dtypes or ():
        if dtype not in DTYPES:
            raise ValueError(f"--dtypes: {dtype!r} is not a dtype ({', '.join(DTYPES)})")
    sizes = []
    for size in _split(sizes_text):
        if not size.isdigit() or int(size) > MAX_LOG2:
            raise ValueError(f"--sizes: {size!r} is not a log2 size (an integer from 0 to "
                             f"{MAX_LOG2})")
        sizes.append(1 << int(size))
    cases = [(op, dtype, numel) for op in names
             for dtype in (dtypes or op_table.ELEMENTWISE[op].dtypes)
             if dtype in op_table.ELEMENTWISE[op].dtypes for numel in sizes]
    if not cases:
        raise ValueError(f"--dtypes: none of {', '.join(dtypes or ())} is a dtype of "
                         f"{', '.join(names)}")
    return cases


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


if __name__ == "__main__":
    raise SystemExit(main())
