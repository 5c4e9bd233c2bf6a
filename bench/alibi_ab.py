"""A/B of the ALiBi kernel's body (op_table/bodies.py's ALIBI_SLOPE and ALIBI_DIVIDE,
and a variant defined here), beside torch.compile's kernel: each variant's result
checked against float64 (within an f32 ulp), its call timed by the one DeviceTimer
(torch.compile's beside), and both kernels' durations by torch.profiler (L2 flushed
before each), which is what tells them apart: the ~3 us around the kernels move the
calls by more than the kernels differ.

    python3 bench/alibi_ab.py [--heads 32] [--length 2048] [--calls 200]

Variants: the slope by "series" or "bits", the head and column by "divide" (a branch to
32 bits, then div.u32) or "magic" (a multiply-high by the length's division magic), main's
body ("series, divide") first and last (the drift between); and "bits 32-bit, magic" (the
slope's integer work in i32, which holds for fewer than 2^27 heads).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

Patch = dict[str, Any]


def _variants() -> dict[str, Patch]:
    """Each variant's settings of op_table/bodies.py's names."""
    from tile_mlir.op_table import bodies

    def body(slope: str, divide: str) -> Patch:
        return {"ALIBI_SLOPE": slope, "ALIBI_DIVIDE": divide}

    return {"series, divide": body("series", "divide"), "bits, divide": body("bits", "divide"),
            "series, magic": body("series", "magic"), "bits, magic": body("bits", "magic"),
            "bits 32-bit, magic": {**body("bits", "magic"), "_slope_bits": _slope_bits32(bodies)},
            "series, divide again": body("series", "divide")}


def _slope_bits32(bodies: Any) -> Callable[..., Any]:
    """bodies._slope_bits with its integer work in i32 (a vector head: the i64 one)."""
    from mlir import ir
    from mlir.dialects import arith, scf

    const, wide = bodies.const, bodies._slope_bits

    def slope(head: ir.Value, pow2: ir.Value, f64: ir.Type) -> ir.Value:
        if isinstance(head.type, ir.VectorType):
            return wide(head, pow2, f64)
        i32, i64 = ir.IntegerType.get_signless(32), head.type
        h, n = arith.trunci(i32, head), arith.trunci(i32, pow2)
        one = const(i32, 1)
        exponent = arith.select(
            arith.cmpi(arith.CmpIPredicate.ult, h, n),
            arith.muli(arith.addi(h, one), const(i32, 8)),
            arith.addi(arith.muli(arith.subi(h, n), const(i32, 8)), const(i32, 4)))
        scale = arith.bitcast(i32, arith.uitofp(ir.F32Type.get(), n))
        k = arith.subi(arith.shrui(scale, const(i32, 23)), const(i32, 127))
        whole = arith.shrui(exponent, k)
        fraction = arith.andi(exponent, arith.subi(n, one))
        top = arith.shrui(arith.shli(fraction, const(i32, 3)), k)
        rest = arith.subi(fraction, arith.shrui(arith.muli(top, n), const(i32, 3)))
        factors = [arith.select(arith.cmpi(arith.CmpIPredicate.ne,
                                           arith.andi(top, const(i32, bit)), const(i32, 0)),
                                const(f64, 2.0 ** (-bit / 8)), const(f64, 1.0))
                   for bit in (4, 2, 1)]
        value = arith.mulf(arith.mulf(factors[0], factors[1]), factors[2])
        inverse = arith.bitcast(f64, arith.shli(arith.extui(i64, arith.subi(const(i32, 1023), k)),
                                                const(i64, 52)))
        small = arith.negf(arith.mulf(arith.uitofp(f64, rest), inverse))
        branch = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ne, rest, const(i32, 0)), [f64],
                          has_else=True)
        with ir.InsertionPoint(branch.then_block):
            scf.YieldOp([arith.mulf(value, bodies._exp2_small(small))])
        with ir.InsertionPoint(branch.else_block):
            scf.YieldOp([value])
        bits = arith.subi(arith.bitcast(i64, branch.results[0]),
                          arith.shli(arith.extui(i64, whole), const(i64, 52)))
        return arith.bitcast(f64, bits)

    return slope


@contextmanager
def _patched(patch: Patch) -> Iterator[None]:
    """bodies' names set as `patch` says, the kernels compiled afresh (the cache is off:
    a kernel's request is its tile IR, the same for every variant)."""
    from tile_mlir.op_table import bodies
    from tile_mlir.ops import entry, kernels

    before = {name: getattr(bodies, name) for name in patch}
    for name, value in patch.items():
        setattr(bodies, name, value)
    entry.clear()
    kernels.clear()
    try:
        yield
    finally:
        for name, value in before.items():
            setattr(bodies, name, value)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--length", type=int, default=2048)
    parser.add_argument("--calls", type=int, default=200, help="profiled calls a variant")
    parser.add_argument("--reps", type=int, default=300)
    args = parser.parse_args(argv)
    os.environ["TILE_MLIR_CACHE"] = "0"
    import harness
    import torch

    from tile_mlir import ops
    from tile_mlir.ops.timing import DeviceTimer

    heads, length = args.heads, args.length
    power = 1 << (heads.bit_length() - 1)
    exponents = [8 * (h + 1) if h < power else 8 * (h - power) + 4 for h in range(heads)]
    slopes = torch.tensor([2.0 ** (-e / power) for e in exponents], dtype=torch.float64,
                          device="cuda")
    want = slopes[:, None] * torch.arange(length, dtype=torch.float64, device="cuda")

    def peer() -> Any:  # bench/part2.py's formula (its heads a power of two)
        base = 2.0 ** (-8.0 * torch.arange(1, heads + 1, device="cuda") / heads)
        return base[:, None] * torch.arange(length, device="cuda")

    compiled = torch.compile(peer, dynamic=False)
    timer = DeviceTimer(args.reps)
    print(f"device: {torch.cuda.get_device_name()}; ALiBi ({heads}, {length}) f32; "
          f"{args.reps} timed and {args.calls} profiled calls a variant")
    for name, patch in _variants().items():
        got, call = harness.variant(_patched(patch), lambda: ops.alibi(heads, length))
        error = float(((got.double() - want).abs() / want.abs().clamp_min(1e-30)).max())
        exact = bool((got == want.float()).all())
        compiled()
        times = timer.time({"compile": compiled, name: call})
        kernels = _profiled(torch, timer, call, compiled, args.calls)
        print(f"{name:20s} max rel error {error:.2e} ({'all' if exact else 'not all'} the "
              f"f64 values rounded once); call {times[name].median_s * 1e6:.3f} us, "
              f"torch.compile's {times['compile'].median_s * 1e6:.3f} "
              f"({times['compile'].median_s / times[name].median_s:.3f}x); kernels: "
              + "; ".join(f"{k} {v:.3f} us" for k, v in kernels.items()), flush=True)
    return 0


def _profiled(torch: Any, timer: Any, ours: Callable[[], Any], theirs: Callable[[], Any],
              calls: int) -> dict[str, float]:
    """Each kernel's mean duration (us) over `calls` calls of both, the L2 flushed before
    each."""
    activity = torch.profiler.ProfilerActivity.CUDA
    with torch.profiler.profile(activities=[activity]) as profile:
        for _ in range(calls):
            timer.flush()
            ours()
            timer.flush()
            theirs()
        torch.cuda.synchronize()
    found = {}
    for event in profile.key_averages():
        if event.count == calls and "flush" not in event.key.lower() and \
                "reduce" not in event.key.lower() and "amax" not in event.key:
            time = getattr(event, "device_time", None) or getattr(event, "cuda_time", 0.0)
            found[event.key[:24]] = float(time)
    return found


if __name__ == "__main__":
    raise SystemExit(main())
