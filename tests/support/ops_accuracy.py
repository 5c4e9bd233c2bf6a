"""The max observed error of every op x dtype of tile_mlir.ops, as a markdown table.

Runs the gpu tier's cases (ops_torch.cases: special values, every kernel shape)
on the GPU against torch (NumPy where torch is missing) and prints, per op and
dtype, the largest relative error over finite results and the largest
distance in ulps of the result's format; "exact" where every result equals the
reference bit for bit. Run on the GPU machine from the repository root:

    source .stage/mlir/env.sh && PYTHONPATH=tests:$PYTHONPATH \
        python3 tests/support/ops_accuracy.py --out docs/ops-accuracy.md
"""

from __future__ import annotations

import argparse
import datetime
import secrets
import sys
from pathlib import Path

import numpy as np

from support.ops_check import Report
from support.ops_torch import HAVE_TORCH, cases, run, torch_module, warm_cache
from tile_mlir import op_table
from tile_mlir.dtypes import DTYPES

COLUMNS = ("f32", "f16", "bf16", "f8e4m3", "f8e5m2", "i32", "i64", "bool")


def measure(op: str, dtype: str, rng: np.random.Generator) -> tuple[bool, float, int]:
    """(all within bounds, max relative error, max ulp) over the op's cases."""
    reports: list[Report] = [run(case, rng) for case in cases(op, dtype)]
    return (all(r.ok for r in reports), max(r.max_rel for r in reports),
            max(r.max_ulp for r in reports))


def cell(ok: bool, rel: float, ulp: int) -> str:
    text = "exact" if ulp == 0 else f"{rel:.2g} ({ulp} ulp)"
    return text if ok else f"**{text} FAIL**"


def device_name() -> str:
    from tile_mlir.runtime.driver import device_name as name

    return name()


def table(ops: list[op_table.EwOp], columns: list[str], rng: np.random.Generator
          ) -> tuple[list[str], int]:
    lines = ["| op | " + " | ".join(DTYPES[c].numpy for c in columns) + " |",
             "|---|" + "---|" * len(columns)]
    failures = 0
    for row in ops:
        cells = []
        for dtype in columns:
            if dtype not in row.dtypes:
                cells.append("")
                continue
            ok, rel, ulp = measure(row.name, dtype, rng)
            failures += not ok
            cells.append(cell(ok, rel, ulp))
        lines.append(f"| {row.name} | " + " | ".join(cells) + " |")
        print(lines[-1], file=sys.stderr)
    return lines, failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="max observed error per op and dtype")
    parser.add_argument("--out", type=Path, help="write the table (with a header) here too")
    parser.add_argument("--ops", help="comma-separated ops (default: all of them)")
    parser.add_argument("--dtypes", default=",".join(COLUMNS),
                        help=f"comma-separated columns (default: {','.join(COLUMNS)})")
    parser.add_argument("--seed", type=int, default=secrets.randbits(32))
    args = parser.parse_args(argv)
    chosen = [r for r in op_table.public_ops() if not args.ops or r.name in args.ops.split(",")]
    rng = np.random.default_rng(args.seed)
    columns = args.dtypes.split(",")
    warm_cache([case for row in chosen for dtype in columns if dtype in row.dtypes
                for case in cases(row.name, dtype)])
    lines, failures = table(chosen, columns, rng)
    against = f"torch {torch_module().__version__}" if HAVE_TORCH else "NumPy references"
    header = [
        "# tile_mlir.ops: max observed error per op and dtype", "",
        f"Measured on {device_name()} against {against}, "
        f"{datetime.date.today().isoformat()}, seed {args.seed}, by "
        "`PYTHONPATH=tests python3 tests/support/ops_accuracy.py`. Each cell: the largest "
        "relative error over finite results and the largest distance in ulps of the "
        "result's format, over the gpu tier's cases (special values included); *exact*: "
        "every result equal bit for bit (NaN for NaN). Bounds: exact ops bitwise; fp32 "
        "1e-5, fp16 1e-3, bf16 1.6e-2 relative, or one ulp.", ""]
    text = "\n".join(header + lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
