"""A/B of the ALiBi kernel's body (op_table/bodies.py: its names patched by the variants
defined here), beside torch.compile's kernel: each variant's result checked against
float64 (within an f32 ulp), its call timed by the one DeviceTimer (torch.compile's
beside), and both kernels' durations by torch.profiler (L2 flushed before each), which is
what tells them apart: the ~3 us around the kernels move the calls by more than the
kernels differ.

    python3 bench/alibi_ab.py [--heads 32] [--length 2048] [--calls 200]

Variants: the body first and last (the drift between), and the body with the position's
head and column by a division in place of the length's division magic (_divide_magic).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

Patch = dict[str, Any]


def _variants() -> dict[str, Patch]:
    """Each variant's settings of op_table/bodies.py's names: the body first and last (the
    drift between), and the head and column by a division (arith.divui and remui) in
    place of the length's magic."""
    return {"body": {}, "division": {"_divide_magic": _divide_plain}, "body again": {}}


def _divide_plain(a: Any, b: Any, magic: Any) -> tuple[Any, Any]:
    """bodies._divide_magic's quotient and remainder by the division itself."""
    from mlir.dialects import arith

    return arith.divui(a, b), arith.remui(a, b)


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
