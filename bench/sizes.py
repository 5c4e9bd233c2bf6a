"""Benchmark (issue 14): the GPU time of small and mid-sized calls, where a model's decode
step spends its elementwise time, against torch eager and torch.compile (bench/harness.py
times and reports; the device time only: a spin kernel hides the host's issue time).

Cases: add (two tensors, out=) and exp (out=) as bench/elementwise.py builds them, silu
(fresh outputs: F.silu has no out=) as bench/part2.py does, and sum over the last dim
of [n / 1024, 1024] (fresh) as bench/reductions.py does; bf16 and f32; n = 2^16, 2^18,
2^20 and 2^22 elements (128 KiB to 16 MiB of f32: from well inside the L2, which the
flush empties before every repetition, to a few waves of the GPU). Traffic: inputs read
once, outputs written once.

    python3 bench/sizes.py [--cases '^add'] [--dry-run]
"""

from __future__ import annotations

from collections.abc import Sequence

import elementwise
import harness
import part2
import reductions
from harness import Benchmark, Built, Case

OPS = ("add", "exp", "silu", "sum")
DTYPES = ("bf16", "f32")
SIZES = (16, 18, 20, 22)
ROW = 1024  # sum: rows of this many elements

REPS = 500
"""Repetitions by default: a call takes 4-10 us, and a median of 100 moved by up to 6%
between runs on an H100 (torch eager's add f32 2^18: 5.55 us, then 5.22), more than the
differences between the systems."""

BENCH = Benchmark(
    "sizes", "Small and mid sizes: add, exp, silu and sum from 2^16 to 2^22 elements",
    notes=("outputs: out= for add and exp (every system), fresh for silu and sum",
           f"sum: over the last dim of [n / {ROW}, {ROW}]"), reps=REPS)


def traffic(op: str, dtype: str, n: int) -> int:
    size = harness.ITEMSIZE[dtype]
    if op == "sum":
        return (n + n // ROW) * size
    if op == "silu":
        return part2.traffic("activation", op, dtype, (n,))
    return elementwise.traffic(op, dtype, (n,))


def build(op: str, dtype: str, n: int) -> Built:
    if op == "sum":
        return reductions.build("sum", dtype, (n // ROW, ROW), -1)
    if op == "silu":
        return part2.build("activation", "silu", dtype, (n,))
    return elementwise.build(op, dtype, (n,))


def case(op: str, dtype: str, size: int) -> Case:
    n = 1 << size
    return Case(f"{op} {dtype} 2^{size}", traffic(op, dtype, n), lambda: build(op, dtype, n),
                "out=" if op in ("add", "exp") else "fresh",
                {"op": op, "dtype": dtype, "numel": n})


def plan(quick: bool) -> list[Case]:
    sizes = (16, 20) if quick else SIZES
    return [case(op, dtype, size) for op in OPS for dtype in DTYPES for size in sizes]


def main(argv: Sequence[str] | None = None) -> int:
    return harness.main(BENCH, plan, argv)


if __name__ == "__main__":
    raise SystemExit(main())
