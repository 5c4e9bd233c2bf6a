"""Benchmark: tile_mlir.ops' reductions against torch eager and torch.compile, TB/s of
essential traffic (bench/harness.py times and reports).

Cases: sum, amax and amin of [2^26 / N, N] for N in 128, 1024, 8192, 65536, along
the last dim (row reductions) and along dim 0 (column reductions), in f32, f16 and
bf16: 72 cases; and rows of odd length (each starting at another alignment: N of 257,
513, 1025, 4097 and 50257, GPT-2's vocabulary), sum and amax along the last dim in f32
and bf16, [2^26 // N, N]: 20 more; and as many columns of those odd widths along dim 0,
the rows [2^26 // N] rounded down to a multiple of 8 (a batch of tokens): 20 more; and rows
of widths no power of two (768, 1000 and 5120: hidden sizes and a class count, [2^26 // N,
N], rows counts odd or of few factors of two), sum and amax along the last dim in f32 and
bf16: 12 more. Traffic: the
input read once plus the output written once. Outputs: fresh (the library's reductions
take no out=). Each system's result is checked against torch eager's (to 16-bit
accumulation's rounding).

    python3 bench/reductions.py [--quick] [--cases '^amax bf16'] [--dry-run]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import harness
from harness import Benchmark, Built, Call, Case, torch_dtype, torch_module

OPS = ("sum", "amax", "amin")
DTYPES = ("f32", "f16", "bf16")
SIZES = (128, 1024, 8192, 65536)
DIMS = (-1, 0)
TOTAL = 1 << 26
QUICK_OPS, QUICK_DTYPES, QUICK_SIZES = ("sum", "amax"), ("f32", "bf16"), (1024, 65536)
ODD_OPS, ODD_DTYPES, ODD_SIZES = ("sum", "amax"), ("f32", "bf16"), (257, 513, 1025, 4097, 50257)
WIDE_SIZES = (768, 1000, 5120)  # rows of widths no power of two (ODD_OPS, ODD_DTYPES)

BENCH = Benchmark("reductions", "Reductions (sum, amax, amin over rows and columns)",
                  notes=("shape [M, N]; dim=-1 reduces each row (M results), dim=0 each "
                         "column (N results)",))


def case(op: str, dtype: str, n: int, dim: int, rows: int = 0) -> Case:
    rows = rows or TOTAL // n
    size = harness.ITEMSIZE[dtype]
    out = rows if dim == -1 else n
    return Case(f"{op} {dtype} {rows}x{n} dim={dim}", (rows * n + out) * size,
                lambda: build(op, dtype, (rows, n), dim), "fresh",
                {"op": op, "dtype": dtype, "shape": [rows, n], "dim": dim})


def plan(quick: bool) -> list[Case]:
    ops, dtypes, sizes = (QUICK_OPS, QUICK_DTYPES, QUICK_SIZES) if quick else \
        (OPS, DTYPES, SIZES)
    odd = [] if quick else [case(op, dtype, n, dim, rows=TOTAL // n // 8 * 8 if dim == 0
                                 else 0)
                            for dim in (-1, 0) for op in ODD_OPS for dtype in ODD_DTYPES
                            for n in ODD_SIZES]
    wide = [] if quick else [case(op, dtype, n, -1) for op in ODD_OPS for dtype in ODD_DTYPES
                             for n in WIDE_SIZES]
    return [*(case(op, dtype, n, dim) for op in ops for dtype in dtypes for n in sizes
              for dim in DIMS), *odd, *wide]


def check_against(want: Any, dtype: str) -> Any:
    """A result is right within the rounding of its sum: 16-bit results to 2e-2 of the
    largest magnitude (scaled by 8 for the order of the additions), f32 to 1e-4."""
    tolerance = 1e-4 if dtype == "f32" else 2e-2

    def check(system: str, got: Any) -> None:
        if system == "eager":
            return
        if got.dtype != want.dtype or tuple(got.shape) != tuple(want.shape):
            raise AssertionError(f"got {got.dtype}{tuple(got.shape)}, torch gives "
                                 f"{want.dtype}{tuple(want.shape)}")
        scale = max(float(want.double().abs().max()), 1.0)
        error = float((got.double() - want.double()).abs().max())
        if not error <= tolerance * scale * 8:
            raise AssertionError(f"max |error| {error:.3g} (scale {scale:.3g})")

    return check


def build(op: str, dtype: str, shape: Sequence[int], dim: int) -> Built:
    from tile_mlir import ops

    torch = torch_module()
    x = torch.randn(*shape, device="cuda", dtype=torch_dtype(dtype))
    eager = getattr(torch, op)
    ours = getattr(ops, op, None)

    def formula(t: Any) -> Any:
        return eager(t, dim=dim)

    return Built({
        "tile-mlir": Call(ours, (x, dim)) if ours is not None else f"tile_mlir.ops has no {op}",
        "eager": Call(formula, (x,)),
        "compile": Call(formula, (x,), compiled=True),
    }, check_against(formula(x), dtype))


def main(argv: Sequence[str] | None = None) -> int:
    return harness.main(BENCH, plan, argv)


if __name__ == "__main__":
    raise SystemExit(main())
