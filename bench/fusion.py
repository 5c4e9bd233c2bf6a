"""Benchmark: a chain of elementwise ops, unfused and fused, TB/s of essential traffic
(bench/harness.py times and reports).

The chain is mul(gelu(add(x, b)), 0.5) with x and b of the same shape. Systems:
tile-mlir unfused (three library calls, two intermediates through memory),
tile-mlir fused (`tile_mlir.ops.fuse(chain)`: one kernel; "n/a" while the build
has no ops.fuse), torch eager (three kernels) and torch.compile (which fuses).
Traffic is the fused chain's: x and b read once, the result written once, so the
unfused systems show what their extra passes cost. Outputs: fresh.

    python3 bench/fusion.py [--dry-run]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import harness
from harness import (
    COMPILE,
    EAGER,
    Benchmark,
    Built,
    Call,
    Case,
    System,
    torch_dtype,
    torch_module,
)

UNFUSED = System("unfused", "tile-mlir unfused", peer=False)
FUSED = System("tile-mlir", "tile-mlir fused", peer=False)
CASES = (("bf16", (1 << 26,)),)  # (dtype, shape): one line per case to add

BENCH = Benchmark("fusion", "A fused elementwise chain: mul(gelu(add(x, b)), 0.5)",
                  systems=(UNFUSED, FUSED, EAGER, COMPILE),
                  notes=("traffic: x and b read once, the result written once (what a "
                         "fused kernel moves); the ratio is tile-mlir fused over the best "
                         "peer",))


def case(dtype: str, shape: tuple[int, ...]) -> Case:
    n = math.prod(shape)
    label = f"2^{n.bit_length() - 1}" if len(shape) == 1 else "x".join(map(str, shape))
    gaps = {} if harness.library_has("fuse") else {"tile-mlir": "ops.fuse not in this build"}
    return Case(f"add-gelu-mul {dtype} {label}", 3 * n * harness.ITEMSIZE[dtype],
                lambda: build(dtype, shape), "fresh",
                {"dtype": dtype, "shape": list(shape)}, gaps)


def plan(quick: bool) -> list[Case]:
    return [case(dtype, shape) for dtype, shape in CASES]


def build(dtype: str, shape: tuple[int, ...]) -> Built:
    from tile_mlir import ops

    torch = torch_module()
    F = torch.nn.functional
    x, b = (torch.randn(shape, device="cuda", dtype=torch_dtype(dtype)) for _ in range(2))

    def chain(x: Any, b: Any) -> Any:
        return ops.mul(ops.gelu(ops.add(x, b)), 0.5)

    def formula(x: Any, b: Any) -> Any:
        return torch.mul(F.gelu(torch.add(x, b)), 0.5)

    want = formula(x, b)

    def check(system: str, got: Any) -> None:
        if system != "eager":
            harness.assert_close(got, want, rtol=2e-2, atol=2e-2)

    return Built({"unfused": Call(chain, (x, b)), "tile-mlir": _fused(ops, chain, (x, b)),
                  "eager": Call(formula, (x, b)),
                  "compile": Call(formula, (x, b), compiled=True)}, check)


def _fused(ops: Any, chain: Any, args: tuple[Any, ...]) -> Call | str:
    """The fused system's call, or why there is none (fusing is untimed, like a compile)."""
    if not hasattr(ops, "fuse"):
        return "ops.fuse not in this build"
    try:
        return Call(ops.fuse(chain), args)
    except Exception as e:  # noqa: BLE001 - a fuse that fails is the system's gap
        return f"ops.fuse failed: {harness.reason_of(e)}"


def main(argv: Sequence[str] | None = None) -> int:
    return harness.main(BENCH, plan, argv)


if __name__ == "__main__":
    raise SystemExit(main())
