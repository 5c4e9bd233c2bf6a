"""python -m tile_mlir.ops --list: the operator library's ops, one a line."""

from __future__ import annotations

import argparse

from tile_mlir import op_table
from tile_mlir.dtypes import DTYPES


def _line(row: op_table.EwOp) -> str:
    dtypes = ",".join(DTYPES[d].numpy for d in row.dtypes)
    result = {"bool": "bool", "float": "float", "same": "same", "any": "any"}[row.out]
    return f"{row.name:<14} arity={row.arity} family={row.family:<13} dtypes={dtypes} " \
           f"result={result}{' exact' if row.exact else ''}"


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
    rows = op_table.ELEMENTWISE.values() if args.all else op_table.public_ops()
    for row in rows:
        print(_line(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
