"""Kernel strategies, and which one an op runs with: the autotuner's choice or a default.

A strategy (programs/elementwise.py's Strategy) is seed 004's three, as options of the
elementwise/gmem variant plus the piece size:
- direct:  one element per access (vector_bytes = 1), one round per thread;
- vector:  16-byte (or 8-byte) vectors, `rounds` per thread, each loaded, computed and
           stored in turn (explicit_parallel);
- staged:  16-byte (or 8- or 32-byte) vectors, all `rounds` loads issued before the
           first compute (register_copy; the Hopper habit of several
           independent loads in flight).
Threads per CTA and rounds per thread are the tunables. The default, without
tuning: staged 16-byte vectors, 256 threads and 4 rounds from 2^24 elements,
2 rounds from 2^19, 128 threads and 1 round below (small arrays still spread
over the SMs). At 2^22 elements 4 rounds were 2-12% slower than 2 on an H100 (add,
exp and silu, bf16 and f32: bench/sizes.py's cases), so 2 rounds reach to 2^24.

The autotuner (tune.py) measures candidates per (op family, dtype, size class), or per
(op, dtype, size class) for an op tuned on its own (`op_key`, read first), or per family
for the launches over rows (`ROWS`: a bias add's, read before the family's), on the GPU
and writes its choices to `ops-tuning-<target>.json` in the kernel cache's directory;
a target (`target`) names the chip and the device model, `sm_90-nvidia-h200`: two
devices of one chip differ in what suits them (an H200 moves 4.2-4.8 TB/s where an
H100 moves 3.0-3.35, so more bytes are in flight a thread). `choose` reads the user's
file for the target first, then the user's `ops-tuning-<chip>.json` (which the tuner
wrote before the files named the model: made on this machine, and kept); then the
package's for the target (ops/tuned/<target>.json, written by `python -m
tile_mlir.ops.tune --ship` on the project's machines); then the package's for the chip
(ops/tuned/<chip>.json, a base for every device of the chip); then the default.
sm_90.json ships an H100's choices: at the 2^16, 2^18, 2^20, 2^22, 2^24 and 2^26 classes
for every family in every dtype its representative op takes (timed on the representative
and tune.SAMPLES), and at 2^24 and 2^26 bool's binary_arith and the integers' unary_math
too (on maximum and neg, before the 8-byte candidates); at the other classes below 2^24
for the unary_math, binary_arith and activation families in f32, bf16 and f16, and from
2^14 for i32's families and fp8's unary_math, binary_arith, comparison, logical and
special families; and for the ops whose cost is not their family's (gelu and
gelu_tanh_and_mul in bf16 and f16, softplus in bf16, mish in f16; isnan, which of an
integer or bool is a store of zeros; at the 2^26 class the representatives' own in f32,
bf16 and f16 and the heavier f32 ops': sigmoid, tanh, erf, sin, cos, log1p, expm1, pow);
and binary_arith's rows keys (`ROWS`) at 2^26 in f32, bf16 and f16; its meta lists the
runs that made it, each timed as the benchmarks time.
sm_90-nvidia-h200.json ships an H200's choices where they are its own (its meta lists
the runs), among them a key of its own for every op sm_90.json keys on its own: an op's
key in the chip's file is read before the device's family key, so the device must say
what the op runs there (tune --per-op keeps such a key even where it is the family's).
A rows key is not: an H200 keeps its own family keys for bias adds until tune --rows
--ship gives it rows keys of its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

from tile_mlir.ops.programs.elementwise import Strategy

STRATEGIES: dict[str, Strategy] = {
    "direct": Strategy(threads=256, vector_bytes=1, rounds=1, stage=1),
    "vector": Strategy(threads=256, vector_bytes=16, rounds=4, stage=1),
    "staged": Strategy(threads=256, vector_bytes=16, rounds=4, stage=4),
}

SIZE_CLASSES = ((14, "<2^14"), *((bits + 1, f"2^{bits}") for bits in range(14, 24)),
                (26, "2^24"), (999, "2^26"))
"""(log2 bound, name): a size class holds the sizes below its bound and at or above the
previous one; each is named after its smallest size. Every power of two from 2^14 to
2^23 is a class of its own: there a kernel is a few waves or less, and the best
geometry moves from one power to the next (wave quantization on 132 SMs, latency
against bytes in flight); from 2^24 a call is many waves and two classes hold: 2^24 and
2^25, and from 2^26 on. Measured on an H100 (every candidate beside torch eager and
torch.compile, at 2^26 and 2^28), the choices tuned at 2^24 ran the light ops 0.5-1.5%
under one round a thread from 2^26 (exp bf16 2^28 3.03 against 3.05 TB/s, sigmoid f16
3.03 against 3.05, sqrt f32 3.01 against 3.05, where f16 3.06 against 3.11), while the
heavier ones kept their 2 rounds (gelu bf16 2.99 against 2.87, mish f32 3.03 against
3.02). The default stays staged 4 rounds there: the families tuned at 2^26 (all but
RoPE's, dropout's and the generators') have their choices shipped, and those left to the
default ran slower on one round (bench/part2.py: sinusoidal f32 16384x4096 2.47 -> 2.16
TB/s, dropout bf16 2^26 3.02 -> 2.89)."""


listeners: list[Callable[[], None]] = []
"""Called when the tuned choices change (the plan cache, entry.PLANS, starts over)."""


def size_class(numel: int) -> str:
    bits = max(numel, 1).bit_length() - 1  # floor(log2(numel))
    return next(name for bound, name in SIZE_CLASSES if bits < bound)


def default(numel: int) -> Strategy:
    """Staged 16-byte vectors; fewer rounds and threads per CTA as arrays shrink, so that
    there are still a CTA or two per SM (an H100 has 132)."""
    if numel >= 1 << 24:
        return Strategy(threads=256, vector_bytes=16, rounds=4, stage=4)
    if numel >= 1 << 19:
        return Strategy(threads=256, vector_bytes=16, rounds=2, stage=2)
    return Strategy(threads=128, vector_bytes=16, rounds=1, stage=1)


def target(chip: str, device_name: str) -> str:
    """What tuned choices are made for: the chip and the device model's name as a slug,
    `sm_90-nvidia-h200` for an NVIDIA H200."""
    model = re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-")
    return f"{chip}-{model}" if model else chip


TARGET_FORM = re.compile(r"sm_[0-9]+[a-z]?(-[a-z0-9]+(-[a-z0-9]+)*)?")


def checked_target(text: str, what: str = "target") -> str:
    """A target as given by a user (`sm_90-nvidia-h200`, or a chip: `sm_90`); ValueError
    naming `what` for anything else."""
    if not TARGET_FORM.fullmatch(text):
        raise ValueError(f"{what}: {text!r} is not a chip (sm_90) or a chip and a device "
                         "model in lower case (sm_90-nvidia-h200)")
    return text


def chip_of(target: str) -> str:
    """The chip of a target (`sm_90` of `sm_90-nvidia-h200`, and of `sm_90`)."""
    return target.split("-", 1)[0]


def tuning_file(target: str) -> Path:
    """The user's tuned choices for the target (tune.py writes them)."""
    from tile_mlir.runtime import cache

    return cache.directory() / f"ops-tuning-{target}.json"


def shipped_file(target: str) -> Path:
    """The package's tuned choices for a target or a chip."""
    return SHIPPED / f"{target}.json"


def key(family: str, dtype: str, numel: int) -> str:
    """The key of a family's choice: `binary_arith/bf16/2^20`."""
    return f"{family}/{dtype}/{size_class(numel)}"


ROWS = "@rows"
"""A family's name with this suffix keys its choices for launches over rows
(`binary_arith@rows/bf16/2^26`): a view of rank 2 or more after coalescing (an operand
broadcast over the rows, as a bias add's; a strided view), whose kernel runs pieces of
rows or blocks of rows (programs/elementwise.py) rather than of one flat run. Read
before the family's key for such a launch (from the same file or a later one: `find`),
which serves it where there is none; tuned on bias adds (tune --rows). Measured on an
H100 (one process, torch.compile beside): binary_arith/bf16/2^26's 128x1 of 8 B ran add
bf16 2^28 at 3.137 TB/s and the bias add bf16 65536x4096 at 2.91, where one choice tuned
on both (512x2 of 8 B) ran them at 3.126 and 3.07 (torch.compile 3.124 and 3.07); with
the rows key tuned apart (512x1 of 16 B, 1.08x on the tuner's bias adds) the flat add
keeps its 8-byte vectors and the bias add ran 3.05 (torch.compile 3.05, another H100
whose copies ran 1% slower)."""


OP_PREFIX = "op:"


def op_key(op: str, dtype: str, numel: int) -> str:
    """The key of one op's own choice (`op:softplus/bf16/2^24`), read before its family's:
    for an op whose cost is not its family's (softplus's exp and log1p against silu's one
    exp: a compute-bound op wants more loads in flight a thread)."""
    return f"{OP_PREFIX}{op}/{dtype}/{size_class(numel)}"


SHIPPED = Path(__file__).resolve().parent / "tuned"
"""The choices shipped with the package: one file per chip (tuned/<chip>.json) and one
per device model whose choices differ from its chip's (tuned/<target>.json)."""


def _read(path: Path) -> dict[str, Strategy]:
    """The choices of a tuning file, but those of a size class that no longer is one (a
    file written before the classes changed)."""
    classes = {name for _, name in SIZE_CLASSES}
    try:
        data = json.loads(path.read_text())
        return {k: Strategy(**v) for k, v in data.get("choices", {}).items()
                if k.rsplit("/", 1)[-1] in classes}
    except (OSError, ValueError, TypeError, AttributeError):  # none, or not a tuning file
        return {}


def shipped(name: str) -> dict[str, Strategy]:
    """The package's own tuned choices for a target or a chip: its file alone."""
    return _read(shipped_file(name))


def _layers(target: str) -> list[Path]:
    """The target's tuning files, the first read last: the package's for its chip, the
    package's for the target, the user's for its chip alone (a tuning made on this
    machine before the files named the model), the user's for the target."""
    chip = chip_of(target)
    return list(dict.fromkeys([shipped_file(chip), shipped_file(target), tuning_file(chip),
                               tuning_file(target)]))  # a chip's own: two files


@cache
def _choices(target: str) -> dict[str, tuple[Strategy, Path]]:
    """The tuned choices for the target, each with the file it comes from (`_layers`: a
    later file's key over an earlier's)."""
    return {k: (v, path) for path in _layers(target) for k, v in _read(path).items()}


def elsewhere(target: str, name: str, path: Path) -> Strategy | None:
    """The choice for the key `name` in the target's files but `path`: what would be read
    for it were it left out of `path`."""
    found = None
    for layer in _layers(target):
        if layer != path:
            found = _read(layer).get(name, found)
    return found


_forced: list[Strategy] = []


def force(choice: Strategy | None) -> None:
    """Make every op run with `choice` (the autotuner's candidates); None: choose again."""
    _forced[:] = [choice] if choice is not None else []
    for listener in listeners:
        listener()


@dataclass(frozen=True)
class Found:
    """A strategy and where `find` found it: the tuned key and its file, or neither (forced
    or the default)."""

    strategy: Strategy
    key: str | None = None
    path: Path | None = None
    forced: bool = False

    def why(self) -> str:
        if self.forced:
            return "forced (strategy.force: the autotuner's candidates)"
        if self.key is None or self.path is None:
            return "the default for its size (no tuned choice)"
        where = f"the package's {self.path.parent.name}/{self.path.name}" \
            if self.path.parent == SHIPPED else str(self.path)
        return f"tuned: {self.key} in {where}"


def find(family: str, dtype: str, numel: int, target: str | None,
         op: str | None = None, *, rows: bool = False) -> Found:
    """The forced strategy, else the tuned one for `target` (`target()`'s, or a chip) for
    the op itself (`op_key`), else (for a launch over `rows`) for its family's rows
    (`ROWS`), else for its family, dtype and size, else the default. An op's own key in
    any of the target's files is read before its family's in any: it says the op's cost
    is not its family's (softplus's exp and log1p), which holds across the devices of a
    chip. A rows key is read before its family's only from the same file or a later one
    (`_layers`): a geometry for the rows scheme measured on one device (sm_90.json's, an
    H100's) does not override another device's own tuning of the family."""
    if _forced:
        return Found(_forced[0], forced=True)
    if target is not None:
        choices = _choices(target)
        tried = [op_key(op, dtype, numel)] if op is not None else []
        family_key = key(family, dtype, numel)
        rows_key = key(family + ROWS, dtype, numel)
        if rows and rows_key in choices and (
                family_key not in choices or _layer(target, choices[rows_key][1]) >=
                _layer(target, choices[family_key][1])):
            tried.append(rows_key)
        for tuned in [*tried, family_key]:
            if tuned in choices:
                choice, path = choices[tuned]
                return Found(choice, tuned, path)
    return Found(default(numel))


def _layer(target: str, path: Path) -> int:
    """The place of one of the target's files among `_layers` (later: more its own)."""
    return _layers(target).index(path)


def choose(family: str, dtype: str, numel: int, target: str | None,
           op: str | None = None, *, rows: bool = False) -> Strategy:
    """`find`'s strategy."""
    return find(family, dtype, numel, target, op, rows=rows).strategy


def name(choice: Strategy) -> str:
    """A strategy in a few words: `staged 256x4 of 16 B` (threads x rounds, vector bytes)."""
    kind = "direct" if choice.vector_bytes == 1 else \
        "staged" if choice.stage > 1 else "vector"
    return f"{kind} {choice.threads}x{choice.rounds} of {choice.vector_bytes} B"


def _earlier(path: Path, meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The runs a file records before `meta`'s: its "earlier" list, then its own run
    (unless that is `meta`'s command again: a run saves key by key)."""
    try:
        old = json.loads(path.read_text()).get("meta", {})
        runs = [r for r in old.get("earlier", []) if isinstance(r, dict)]
    except (OSError, ValueError, TypeError, AttributeError):  # none, or not a tuning file
        return []
    if old.get("command") and old.get("command") != meta.get("command"):
        runs.append({k: old[k] for k in ("command", "date", "device") if k in old})
    return runs


def save(target: str, choices: dict[str, Strategy], meta: dict[str, Any],
         shipped: bool = False, dropped: Sequence[str] = ()) -> Path:
    """Write (merge into) the user's tuning file for the target, or with `shipped` the
    package's file for it, atomically, the keys `dropped` left out; returns its path.
    `meta` (device, command, date) becomes the file's; the earlier runs' commands and
    dates stay listed under "earlier"."""
    path = shipped_file(target) if shipped else tuning_file(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    merged = {k: asdict(v) for k, v in _read(path).items() if k not in dropped}
    merged.update({k: asdict(v) for k, v in choices.items()})
    meta = {**meta, "earlier": _earlier(path, meta)}
    temporary = path.with_suffix(f".tmp{id(choices)}")
    temporary.write_text(json.dumps({"meta": meta, "choices": merged}, indent=1,
                                    sort_keys=True))
    temporary.replace(path)
    _choices.cache_clear()
    for listener in listeners:
        listener()
    return path
