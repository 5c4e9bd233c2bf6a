"""Benchmark: part 2's ops (seed 004) against torch eager and torch.compile, TB/s of
essential traffic (bench/harness.py times and reports).

- gated: silu_and_mul, gelu_and_mul, gelu_tanh_and_mul on an (8192, 2 x 14336) input,
  bf16 (and f32, f16); the bar: silu_and_mul bf16 >= 3.0 TB/s on an H100;
- activation: the 14 activations at 2^24, 2^26, 2^28 elements, f32/f16/bf16;
- dropout (p = 0.1) at 2^26, f32 and bf16; generative: alibi (32, 2048) and
  sinusoidal (16384, 4096), f32.
RoPE has its own benchmark, bench/rope.py.

torch eager runs the formulas a torch user writes (silu_and_mul as
F.silu(x[..., :N]) * x[..., N:]), torch.compile the same formulas. Traffic: each
input read once, each output written once (dropout: x read, y written;
alibi/sinusoidal: the output). Outputs: fresh (the formulas have no out=). An op
that tile_mlir.ops does not have says so in its cell. Results are checked against
torch's formula (dropout: the kept fraction and the scaling).

    python3 bench/part2.py --quick          # the bars: silu_and_mul, a few activations
    python3 bench/part2.py --cases '^(gated|dropout)'
    python3 bench/part2.py --dry-run

The 2^28 f16/bf16 anomaly of the earlier runs (tile-mlir at 2.52-2.56 TB/s, 0.85x of
torch, for every activation, while the same kernel timed alone moved 2.92): that
benchmark captured each system's calls in a CUDA graph, whose outputs came from the
graph's private pool (address ranges cudaMalloc'd during the capture), timed the
systems one after the other in a fixed order (tile-mlir first, right after the case's
1.5 GiB of inputs were made and the previous case's freed), and flushed no L2. This
harness times every system alike: no graphs, the same inputs, outputs from torch's
caching allocator warmed up before timing, the systems interleaved repetition by
repetition, L2 flushed before each. Under it (H100, 2026-11-24) tile-mlir moves
3.00-3.04 TB/s on those cases, 0.98-1.03x of the best peer (softplus was 0.85x,
its IEEE division per element; 0.97-0.98x with the reciprocal taken once, 1.12-1.25x
since its narrow results take the MUFU's approximations); which of the changes removed
the anomaly was not isolated.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import harness
from harness import Benchmark, Built, Call, Case, torch_dtype, torch_module

ACTIVATIONS = ("relu", "gelu", "silu", "sigmoid", "tanh", "leaky_relu", "elu", "selu",
               "hardswish", "hardsigmoid", "hardtanh", "softplus", "mish", "prelu")
GATED = ("silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul")
DTYPES = ("f32", "f16", "bf16")
SIZES = (24, 26, 28)
GATED_SHAPE = (8192, 2 * 14336)
BAR_TBPS = 3.0  # silu_and_mul bf16 8192x14336, H100

BENCH = Benchmark("part2", "Part 2 ops (gated, activations, dropout, position encodings)",
                  notes=("gated shapes are the input's (M, 2N)",
                         f"bar: silu_and_mul bf16 8192x28672 >= {BAR_TBPS} TB/s on an H100"))


def _numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def traffic(group: str, op: str, dtype: str, shape: tuple[int, ...]) -> int:
    size = harness.ITEMSIZE[dtype]
    n = _numel(shape)
    if group == "gated":
        return n * size + n // 2 * size
    if group == "generative":
        return n * size
    return 2 * n * size + (size if op == "prelu" else 0)


def case(group: str, op: str, dtype: str, shape: tuple[int, ...]) -> Case:
    label = f"2^{shape[0].bit_length() - 1}" if len(shape) == 1 else "x".join(map(str, shape))
    return Case(f"{group} {op} {dtype} {label}", traffic(group, op, dtype, shape),
                lambda: build(group, op, dtype, shape), "fresh",
                {"group": group, "op": op, "dtype": dtype, "shape": list(shape)})


def plan(quick: bool) -> list[Case]:
    """The cases in the table's order."""
    cases = [case("gated", op, "bf16", GATED_SHAPE) for op in GATED]
    if quick:
        return cases + [case("activation", op, "bf16", (1 << 26,))
                        for op in ("silu", "gelu", "relu")]
    cases += [case("gated", op, dtype, GATED_SHAPE) for op in GATED for dtype in ("f32", "f16")]
    cases += [case("activation", op, dtype, (1 << size,)) for op in ACTIVATIONS
              for dtype in DTYPES for size in SIZES]
    cases += [case("dropout", "dropout", dtype, (1 << 26,)) for dtype in ("f32", "bf16")]
    return [*cases, case("generative", "alibi", "f32", (32, 2048)),
            case("generative", "sinusoidal", "f32", (16384, 4096))]


# ------------------------------------------------------------------ on the GPU

Setup = tuple[Callable[..., Any] | None, Callable[..., Any], list[Any]]
"""(tile_mlir's call or None, torch's formula, the arguments of both)."""


def activation(op: str, ours: Any, dtype: Any, shape: tuple[int, ...]) -> Setup:
    torch = torch_module()
    F = torch.nn.functional
    formulas: dict[str, Callable[..., Any]] = {
        "gelu": lambda t: F.gelu(t, approximate="none"),
        "sigmoid": torch.sigmoid, "tanh": torch.tanh, "prelu": F.prelu}
    formula = formulas.get(op) or getattr(F, op)
    x = torch.randn(shape, device="cuda", dtype=dtype) * 4
    if op == "prelu":  # one slope for every channel
        return ours, formula, [x, torch.full((1,), 0.25, device="cuda", dtype=dtype)]
    return ours, formula, [x]


def gated(op: str, ours: Any, dtype: Any, shape: tuple[int, ...]) -> Setup:
    F = torch_module().nn.functional
    act = {"silu_and_mul": F.silu, "gelu_and_mul": F.gelu,
           "gelu_tanh_and_mul": lambda t: F.gelu(t, approximate="tanh")}[op]

    def formula(x: Any) -> Any:
        n = x.shape[-1] // 2
        return act(x[..., :n]) * x[..., n:]

    return ours, formula, [torch_module().randn(shape, device="cuda", dtype=dtype)]


def dropout(op: str, ours: Any, dtype: Any, shape: tuple[int, ...]) -> Setup:
    torch = torch_module()
    mine = None if ours is None else (lambda x: ours(x, 0.1, True, seed=1234))
    return mine, (lambda x: torch.nn.functional.dropout(x, 0.1, training=True)), \
        [torch.randn(shape, device="cuda", dtype=dtype)]


def generative(op: str, ours: Any, dtype: Any, shape: tuple[int, ...]) -> Setup:
    """alibi: (heads, n) of slope_h * j; sinusoidal: (positions, dim) of sin/cos
    interleaved."""
    torch = torch_module()
    a, b = shape

    def alibi() -> Any:
        slopes = 2.0 ** (-8.0 * torch.arange(1, a + 1, device="cuda") / a)
        return (slopes[:, None] * torch.arange(b, device="cuda")).to(dtype)

    def sinusoidal() -> Any:
        position = torch.arange(a, device="cuda", dtype=torch.float32)[:, None]
        inverse = torch.exp(torch.arange(0, b, 2, device="cuda").float() *
                            (-math.log(10000.0) / b))
        table = torch.empty(a, b, device="cuda")
        table[:, 0::2] = torch.sin(position * inverse)
        table[:, 1::2] = torch.cos(position * inverse)
        return table.to(dtype)

    mine = None if ours is None else (lambda: ours(a, b, dtype=dtype, device="cuda"))
    return mine, (alibi if op == "alibi" else sinusoidal), []


def checker(op: str, args: list[Any], reference: Any) -> Callable[[str, Any], None]:
    """The benchmark counts only results that agree with torch's formula (sinusoidal's
    f32 formula, whose angles p * w lose up to p * 2^-24, within that: ours are the
    float64 angles rounded once); dropout: zeros at about p, the rest x / (1 - p)."""
    torch = torch_module()

    def check(system: str, got: Any) -> None:
        if system == "eager":
            return
        if op == "dropout":
            _check_dropout(args[0], got, 0.1)
            return
        wide = reference.dtype != torch.float32
        angles = got.shape[0] * 2.0 ** -24 if op == "sinusoidal" else 0.0
        harness.assert_close(got, reference, rtol=2e-2 if wide else 1e-4,
                             atol=max(5e-2 if wide else 1e-4, 2 * angles))

    return check


def _check_dropout(x: Any, got: Any, p: float) -> None:
    kept = got != 0
    fraction = float(kept.float().mean())
    if abs(fraction - (1 - p)) > 0.01:
        raise AssertionError(f"kept {fraction:.4f} of the elements, expected {1 - p}")
    harness.assert_close(got[kept], (x[kept].float() / (1 - p)).to(x.dtype),
                         rtol=1e-2, atol=1e-3)


def build(group: str, op: str, dtype: str, shape: tuple[int, ...]) -> Built:
    from tile_mlir import ops

    setup = {"activation": activation, "gated": gated, "dropout": dropout,
             "generative": generative}[group]
    mine, formula, args = setup(op, getattr(ops, op, None), torch_dtype(dtype), shape)
    return Built({
        "tile-mlir": Call(mine, tuple(args)) if mine is not None
        else f"tile_mlir.ops has no {op}",
        "eager": Call(formula, tuple(args)),
        "compile": Call(formula, tuple(args), compiled=True),
    }, checker(op, args, formula(*args)))


def main(argv: Sequence[str] | None = None) -> int:
    return harness.main(BENCH, plan, argv)


if __name__ == "__main__":
    raise SystemExit(main())
