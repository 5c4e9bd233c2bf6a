"""Benchmark: tile_mlir.ops' elementwise ops against torch eager and torch.compile, TB/s
of essential traffic (bench/harness.py times and reports).

Cases: some ops of every family of seed 004, each in every dtype the library has for
it, at 2^16, 2^20, 2^24 and 2^28 elements, and a bf16 bias add (65536x4096 plus a
4096 row). Traffic: each input read once, the output written once (the bias its own
size; isnan of integers and booleans: the output alone, there is no NaN to look
for). Outputs: out= for every system (torch.compile traces out= into its kernel's
store) except isnan (neither torch nor the library takes out=): fresh. fp8: torch
eager has no kernel for most ops (its cell says so where it fails); torch.compile
runs torch's f32 path (inputs widened, the op, the result narrowed back, e4m3fn
saturating as the library does), which it fuses into one kernel. Each system's
result is checked against torch's before it is timed (fp8: within one step of the
format).

    python3 bench/elementwise.py --quick        # the issue's bars: one op per family
    python3 bench/elementwise.py --cases '^(add|exp) bf16'
    python3 bench/elementwise.py --dry-run      # no GPU
    python3 bench/elementwise.py --tune ...     # run the library's autotuner first

The whole list (345 cases) took 7 minutes on an H100: run it in two parts with
--cases and --append to stay well inside a 10-minute command (bench/README.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

import harness
from harness import Benchmark, Built, Call, Case, Gap, torch_dtype, torch_module

FAMILY_OPS = {
    "unary_math": ("exp", "neg", "sqrt"),
    "binary_arith": ("add", "mul", "div", "maximum"),
    "comparison": ("lt",),
    "bitwise": ("bitwise_and",),
    "logical": ("logical_and",),
    "special": ("where", "clamp", "isnan"),
}
FLOATS = ("f32", "f16", "bf16", "f8e4m3", "f8e5m2")
DTYPES = {  # the library's dtypes of each op (tile_mlir.op_table)
    "exp": FLOATS, "sqrt": FLOATS, "div": FLOATS,
    "neg": (*FLOATS, "i32", "i64"), "add": (*FLOATS, "i32", "i64"),
    "mul": (*FLOATS, "i32", "i64"), "clamp": (*FLOATS, "i32", "i64"),
    "maximum": (*FLOATS, "i32", "i64", "bool"), "lt": (*FLOATS, "i32", "i64", "bool"),
    "logical_and": (*FLOATS, "i32", "i64", "bool"), "where": (*FLOATS, "i32", "i64", "bool"),
    "isnan": (*FLOATS, "i32", "i64", "bool"), "bitwise_and": ("i32", "i64", "bool"),
}
SIZES = (16, 20, 24, 28)
QUICK = {  # the bars: one op per family, its main dtypes, at 2^24 and 2^28
    "add": ("f32", "f16", "bf16", "f8e4m3", "f8e5m2"),
    "exp": ("f32", "bf16", "f8e4m3"),
    "lt": ("f32", "bf16"),
    "bitwise_and": ("i32", "bool"),
    "logical_and": ("bool",),
    "where": ("f32", "bf16"),
}
BIAS_SHAPE = (16 * 4096, 4096)
# fp8 results may differ from torch's f32 path by one step of the format (inductor's
# conversions and division round differently): 2^-3 relative for e4m3, 2^-2 for e5m2
FP8_RTOL = {"f8e4m3": 0.13, "f8e5m2": 0.26}
BOOL_RESULT = {"lt", "logical_and", "isnan"}
NO_OUT = {"isnan"}
ARITY = {"where": 2, "clamp": 1, "exp": 1, "neg": 1, "sqrt": 1, "isnan": 1}  # dtype'd inputs

BENCH = Benchmark(
    "elementwise", "Elementwise ops",
    notes=("fp8: torch.compile runs torch's f32 path (widen, op, narrow; e4m3fn saturating); "
           "torch eager is n/a where torch has no fp8 kernel",
           "outputs: out= for every system (torch.compile's out= is stored by its kernel), "
           "fresh for isnan (no out= in torch)"))


# ------------------------------------------------------------------ the cases


def traffic(op: str, dtype: str, shape: tuple[int, ...]) -> int:
    """Inputs read once, the output written once."""
    size = harness.ITEMSIZE[dtype]
    numel = 1
    for n in shape:
        numel *= n
    if op == "bias_add":
        return 2 * numel * size + shape[-1] * size
    inputs = ARITY.get(op, 2) * numel * size + (numel if op == "where" else 0)
    if op == "isnan" and dtype not in FLOATS:  # no NaN to find: the input needs no read
        inputs = 0
    return inputs + numel * (1 if op in BOOL_RESULT else size)


def case(op: str, dtype: str, shape: tuple[int, ...]) -> Case:
    label = f"2^{shape[0].bit_length() - 1}" if len(shape) == 1 else "x".join(map(str, shape))
    family = next((f for f, names in FAMILY_OPS.items() if op in names), "bias")
    return Case(f"{op} {dtype} {label}", traffic(op, dtype, shape),
                lambda: build(op, dtype, shape), "fresh" if op in NO_OUT else "out=",
                {"family": family, "op": op, "dtype": dtype, "shape": list(shape)})


def plan(quick: bool) -> list[Case]:
    if quick:
        chosen = [(op, dtype, 1 << size) for op, dtypes in QUICK.items()
                  for dtype in dtypes for size in (24, 28)]
    else:
        chosen = [(op, dtype, 1 << size) for names in FAMILY_OPS.values() for op in names
                  for dtype in DTYPES[op] for size in SIZES]
    return [*(case(op, dtype, (n,)) for op, dtype, n in chosen),
            case("bias_add", "bf16", BIAS_SHAPE)]


# ------------------------------------------------------------------ on the GPU


def _make(shape: tuple[int, ...], dtype: str) -> Any:
    torch = torch_module()
    if dtype == "bool":
        return torch.rand(shape, device="cuda") < 0.5
    if dtype in ("i32", "i64"):
        return torch.randint(-1000, 1000, shape, device="cuda", dtype=torch_dtype(dtype))
    return (torch.randn(shape, device="cuda") * 4).to(torch_dtype(dtype))


def inputs(op: str, dtype: str, shape: tuple[int, ...]) -> tuple[list[Any], Callable[..., Any]]:
    """(arguments, torch's function) of one call of the op."""
    torch = torch_module()
    if op == "bias_add":
        return [_make(shape, dtype), _make(shape[-1:], dtype)], torch.add
    if op == "where":
        return [torch.rand(shape, device="cuda") < 0.5, _make(shape, dtype),
                _make(shape, dtype)], torch.where
    if op == "clamp":
        return [_make(shape, dtype), -1.0, 1.0], torch.clamp
    args = [_make(shape, dtype) for _ in range(ARITY.get(op, 2))]
    if op == "sqrt" and not dtype.startswith("f8"):
        args[0] = args[0].abs()
    return args, getattr(torch, op)


def via_float(fn: Callable[..., Any], dtype: str) -> Callable[..., Any]:
    """torch's f32 path for fp8: inputs widened, fn, the result narrowed (e4m3fn
    saturating, as the library)."""
    torch = torch_module()

    def call(*args: Any) -> Any:
        wide = [a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                for a in args]
        result = fn(*wide)
        if not result.is_floating_point():
            return result
        if dtype == "f8e4m3":
            result = result.clamp(-448, 448)
        return result.to(torch_dtype(dtype))

    return call


def _eager(fn: Callable[..., Any], op: str, dtype: str) -> Callable[..., Any]:
    if not dtype.startswith("f8"):
        return fn

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (NotImplementedError, RuntimeError, TypeError) as e:
            raise Gap(f"torch has no fp8 kernel for {op}") from e

    return call


def _compiled(fn: Callable[..., Any], dtype: str) -> Callable[..., Any]:
    """What torch.compile is given: torch's function (fp8: its f32 path), out= as a
    keyword."""
    formula = via_float(fn, dtype) if dtype.startswith("f8") else fn

    def call(*args: Any, out: Any = None) -> Any:
        if dtype.startswith("f8"):
            result = formula(*args)
            return result if out is None else out.copy_(result)
        return formula(*args) if out is None else formula(*args, out=out)

    return call


def build(op: str, dtype: str, shape: tuple[int, ...]) -> Built:
    from tile_mlir import ops

    torch = torch_module()
    args, fn = inputs(op, dtype, shape)
    reference = via_float(fn, dtype)(*args) if dtype.startswith("f8") else fn(*args)
    outs = {} if op in NO_OUT else \
        {key: harness.poison(torch.empty_like(reference)) for key in ("tile-mlir", "compile")}
    outs["eager"] = torch.empty_like(reference) if op not in NO_OUT else None

    def kwargs(key: str) -> dict[str, Any]:
        return {} if outs.get(key) is None else {"out": outs[key]}

    ours = getattr(ops, "add" if op == "bias_add" else op, None)

    rtol = FP8_RTOL.get(dtype, 2e-2)

    def check(key: str, result: Any) -> None:
        if key != "eager":
            got = outs[key] if outs.get(key) is not None else result
            harness.assert_close(got, reference, rtol=rtol, atol=1e-3)

    return Built({
        "tile-mlir": Call(ours, tuple(args), kwargs("tile-mlir")) if ours is not None
        else f"tile_mlir.ops has no {op}",
        "eager": Call(_eager(fn, op, dtype), tuple(args), kwargs("eager")),
        "compile": Call(_compiled(fn, dtype), tuple(args), kwargs("compile"), compiled=True),
    }, check)


def tune(cases: Sequence[Case]) -> None:
    """The library's autotuner on the chosen cases (its results cached for later runs)."""
    from tile_mlir.ops import tune as tuner

    tuner.run([(c.params["op"] if c.params["op"] != "bias_add" else "add", c.params["dtype"],
                _numel(c.params["shape"])) for c in cases], log=print)


def _numel(shape: Sequence[int]) -> int:
    count = 1
    for n in shape:
        count *= n
    return count


def main(argv: Sequence[str] | None = None) -> int:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--tune", action="store_true")
    known, rest = pre.parse_known_args(sys.argv[1:] if argv is None else argv)
    return harness.main(BENCH, plan, rest, before=tune if known.tune else None)


if __name__ == "__main__":
    raise SystemExit(main())
