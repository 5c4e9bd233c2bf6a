"""python -m tile_mlir.ops --list: the operator library's ops, one a line."""

from __future__ import annotations

import argparse
import os
import sys

from tile_mlir import op_table
from tile_mlir.dtypes import DTYPES


def _line(op: op_table.EwOp | op_table.Composite) -> str:
    dtypes = ",".join(DTYPES[d].numpy for d in op.dtypes)
    if isinstance(op, op_table.Composite):
        return f"{op.name:<17} composite family={op.family:<13} dtypes={dtypes} " \
               f"rows={','.join(op.rows)}"
    return f"{op.name:<17} arity={op.arity} family={op.family:<13} dtypes={dtypes} " \
           f"result={op.out}{' exact' if op.exact else ''}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tile_mlir.ops",
                                     description="the operator library of tile-mlir")
    parser.add_argument("--list", action="store_true", help="print every op, one a line")
    parser.add_argument("--all", action="store_true",
                        help="with --list: the compiler's primitive and internal rows too")
    args = parser.parse_args(argv)
    if not args.list:
        parser.print_help()
        return 0
    listed: list[op_table.EwOp | op_table.Composite] = op_table.library_ops()
    if args.all:
        listed += [row for row in op_table.ELEMENTWISE.values() if not row.public]
    try:
        print("\n".join(_line(op) for op in listed), flush=True)
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
