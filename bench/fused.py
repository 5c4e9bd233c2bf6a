"""Benchmark (issue 12): row-wise fused ops, softmax and the norms, against torch eager
and torch.compile, TB/s of essential traffic (bench/harness.py times and reports).

Cases: softmax, log_softmax, rms_norm, fused add + rms_norm and layer_norm over the
last dim of an [M, N] input, bf16 and f32, N in 1024, 4096, 16384, 65536, 262144 with
M * N * itemsize = 128 MiB; and each of them over rows of odd length (ODD_ROWS: 257
to 50257, GPT-2's vocabulary), each row at another alignment, M * N * itemsize just
under 128 MiB. tile-mlir: ops.softmax(x, dim=-1),
ops.log_softmax(x, dim=-1), ops.rms_norm(x, (N,), weight, eps),
ops.fused_add_rms_norm(x, residual, weight, eps), ops.layer_norm(x, (N,), weight, bias,
eps), "n/a: not in this build" while the library lacks one. torch eager:
torch.softmax, torch.log_softmax, F.rms_norm, F.layer_norm, and for the fused add the
formula below; torch.compile: the same functions.

fused_add_rms_norm follows vLLM: residual becomes x + residual (in place) and x the
rms_norm of that sum (in place); every system does it in place, each on its own copy
of the inputs. Traffic: x (and residual) read once, the weight (and bias) read once,
the outputs written once: softmax 2MN, rms_norm 2MN + N, fused add 4MN + N,
layer_norm 2MN + 2N elements. Outputs: fresh, in place for the fused add.

Besides the ratio plot, fused-<device>-rows.png plots TB/s against the row length,
one panel per op, a line per system and dtype.

    python3 bench/fused.py [--quick] [--cases '^softmax'] [--dry-run]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import harness
from harness import Benchmark, Built, Call, Case, CaseResult, torch_dtype, torch_module

OPS = ("softmax", "log_softmax", "rms_norm", "fused_add_rms_norm", "layer_norm")
DTYPES = ("bf16", "f32")
ROWS = (1024, 4096, 16384, 65536, 262144)
TOTAL_BYTES = 128 << 20
EPS = {"rms_norm": 1e-6, "fused_add_rms_norm": 1e-6, "layer_norm": 1e-5}
QUICK_ROWS = (4096, 65536)
ODD_ROWS = (257, 513, 1025, 4097, 8191, 32001, 50257)
ODD_OPS = OPS


def traffic(op: str, m: int, n: int, dtype: str) -> int:
    size = harness.ITEMSIZE[dtype]
    body = {"fused_add_rms_norm": 4}.get(op, 2) * m * n * size
    params = {"rms_norm": 1, "fused_add_rms_norm": 1, "layer_norm": 2}.get(op, 0)
    return body + params * n * size


def case(op: str, dtype: str, n: int) -> Case:
    m = TOTAL_BYTES // (n * harness.ITEMSIZE[dtype])
    gaps = {} if harness.library_has(op) else {"tile-mlir": "not in this build"}
    return Case(f"{op} {dtype} {m}x{n}", traffic(op, m, n, dtype),
                lambda: build(op, dtype, (m, n)),
                "in place" if op == "fused_add_rms_norm" else "fresh",
                {"op": op, "dtype": dtype, "shape": [m, n], "row": n, "odd": n % 2 == 1},
                gaps)


def plan(quick: bool) -> list[Case]:
    rows = QUICK_ROWS if quick else ROWS
    odd = () if quick else ODD_ROWS
    return [case(op, dtype, n) for op in OPS for dtype in DTYPES
            for n in (*rows, *(odd if op in ODD_OPS else ()))]


# ------------------------------------------------------------------ on the GPU


def formulas(op: str, n: int) -> tuple[Callable[..., Any], Callable[..., Any] | None]:
    """(torch's function, tile_mlir's or None), both on the same arguments."""
    from tile_mlir import ops

    F = torch_module().nn.functional
    eps = EPS.get(op, 0.0)
    ours = getattr(ops, op, None)
    table: dict[str, tuple[Callable[..., Any], Callable[..., Any] | None]] = {
        "softmax": (lambda x: F.softmax(x, dim=-1),
                    ours and (lambda x: ours(x, dim=-1))),
        "log_softmax": (lambda x: F.log_softmax(x, dim=-1),
                        ours and (lambda x: ours(x, dim=-1))),
        "rms_norm": (lambda x, w: F.rms_norm(x, (n,), w, eps),
                     ours and (lambda x, w: ours(x, (n,), w, eps))),
        "fused_add_rms_norm": (lambda x, r, w: add_rms_norm(x, r, w, eps),
                               ours and (lambda x, r, w: ours(x, r, w, eps))),
        "layer_norm": (lambda x, w, b: F.layer_norm(x, (n,), w, b, eps),
                       ours and (lambda x, w, b: ours(x, (n,), w, b, eps))),
    }
    return table[op]


def add_rms_norm(x: Any, residual: Any, weight: Any, eps: float) -> tuple[Any, Any]:
    """vLLM's fused_add_rms_norm in torch: residual += x; x = rms_norm(residual)."""
    F = torch_module().nn.functional
    total = x + residual
    residual.copy_(total)
    x.copy_(F.rms_norm(total, (x.shape[-1],), weight, eps))
    return x, residual


TOLERANCE = {"bf16": (2e-2, 2e-2), "f32": (1e-4, 1e-5)}


def build(op: str, dtype: str, shape: tuple[int, int]) -> Built:
    torch = torch_module()
    t = torch_dtype(dtype)
    m, n = shape
    x = torch.randn(m, n, device="cuda", dtype=t)
    weight, bias = (torch.randn(n, device="cuda", dtype=t) for _ in range(2))
    eager, ours = formulas(op, n)
    rtol, atol = TOLERANCE[dtype]
    if op == "fused_add_rms_norm":
        return _build_in_place(x, weight, eager, ours, (rtol, atol))
    args = (x, *{"rms_norm": (weight,), "layer_norm": (weight, bias)}.get(op, ()))
    want = eager(*args)

    def check(system: str, got: Any) -> None:
        if system != "eager":
            harness.assert_close(got, want, rtol=rtol, atol=atol)

    return Built({"tile-mlir": Call(ours, args) if ours else "not in this build",
                  "eager": Call(eager, args), "compile": Call(eager, args, compiled=True)},
                 check)


def _build_in_place(x: Any, weight: Any, eager: Callable[..., Any],
                    ours: Callable[..., Any] | None, tolerance: tuple[float, float]) -> Built:
    """Each system its own x and residual (they are overwritten); checked after the
    first call against the formula run on another copy."""
    torch = torch_module()
    residual = torch.randn_like(x)
    copies = {key: (x.clone(), residual.clone()) for key in ("tile-mlir", "eager", "compile")}
    want = eager(x.clone(), residual.clone(), weight)

    def check(system: str, _: Any) -> None:
        if system != "eager":
            for got, expected in zip(copies[system], want, strict=True):
                harness.assert_close(got, expected, rtol=tolerance[0], atol=tolerance[1])

    def args(key: str) -> tuple[Any, ...]:
        return (*copies[key], weight)

    return Built({"tile-mlir": Call(ours, args("tile-mlir")) if ours else "not in this build",
                  "eager": Call(eager, args("eager")),
                  "compile": Call(eager, args("compile"), compiled=True)}, check)


# ------------------------------------------------------------------ the rows plot


def plot_rows(bench: Benchmark, results: list[CaseResult], stem: Path, device: str) -> None:
    """TB/s against the row length: a panel per op, a line per system and dtype."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = [op for op in OPS if any(r.params.get("op") == op for r in results)]
    fig, axes = plt.subplots(len(ops), 1, figsize=(7, 2.8 * len(ops)), squeeze=False)
    styles = {("bf16", False): "-", ("f32", False): "--", ("bf16", True): ":",
              ("f32", True): "-."}
    for ax, op in zip(axes[:, 0], ops, strict=True):
        for index, system in enumerate(bench.systems):
            for (dtype, odd), style in styles.items():
                rows = sorted((r for r in results if r.params.get("op") == op
                               and r.params.get("dtype") == dtype
                               and bool(r.params.get("odd")) == odd),
                              key=lambda r: r.params["row"])
                points = [(r.params["row"], r.tbps(system.key)) for r in rows]
                xs = [x for x, y in points if y is not None]
                ys = [y for _, y in points if y is not None]
                if xs:
                    ax.plot(xs, ys, style, color=f"C{index}", marker="o", markersize=3,
                            label=f"{system.label} {dtype}{' odd N' if odd else ''}")
        ax.set_xscale("log", base=2)
        ax.set_title(f"{op} on {device}", fontsize=9)
        ax.set_xlabel("row length N")
        ax.set_ylabel("TB/s")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, ncol=3)
    fig.tight_layout()
    fig.savefig(stem.with_name(stem.name + "-rows.png"), dpi=110)
    plt.close(fig)


BENCH = Benchmark("fused", "Row-wise fused ops: softmax, log_softmax and the norms",
                  notes=("rows of N elements, M * N * itemsize = 128 MiB (just under "
                         "for rows of odd length)",
                         "fused_add_rms_norm (vLLM's semantics) is in place for every system, "
                         "each on its own copy of x and residual"),
                  extra_plot=plot_rows)


def main(argv: Sequence[str] | None = None) -> int:
    return harness.main(BENCH, plan, argv)


if __name__ == "__main__":
    raise SystemExit(main())
