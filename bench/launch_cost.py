"""Host time per launch of a small elementwise kernel: ours against the peers.

    python3 bench/launch_cost.py [--calls 200] [--repeats 200]

Peers (each skipped when its package is missing): our Kernel on torch tensors,
on raw device pointers and on CuPy arrays; a bare cuLaunchKernel from
cuda-python with pre-packed arguments (the floor for any Python launcher on
the same kernel); torch eager `torch.add(out=)`; a Triton kernel launch; and
CuPy's `cupy.add(out=)`. Every launcher adds two 4096-element f32 vectors, so
the GPU finishes each launch sooner than the host makes the next one and
what is timed is host time. Prints a markdown table and saves it as
bench/results/launch_cost-<device>.md.
"""

from __future__ import annotations

import argparse
import ctypes
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from common import cpu_name, save, table
from timing import per_call_us
from timing import percentiles as summary

if TYPE_CHECKING:
    from tile_mlir.runtime import Kernel

N = 4096
BLOCK = 256


def bare_launch(kernel: Kernel, pointers: tuple[int, ...]) -> Callable[[], object]:
    """cuLaunchKernel with the kernelParams array built beforehand: nothing else per call."""
    from cuda.bindings import driver

    slots = [ctypes.c_uint64(p) for p in pointers]
    params = (ctypes.c_void_p * len(slots))(*[ctypes.addressof(s) for s in slots])
    address, function, launch = ctypes.addressof(params), kernel.function, driver.cuLaunchKernel
    (gx, gy, gz), (bx, by, bz) = kernel.spec.grid or (1, 1, 1), kernel.spec.block or (1, 1, 1)

    def bare(_keep: object = (slots, params)) -> object:  # the default keeps them alive
        return launch(function, gx, gy, gz, bx, by, bz, 0, 0, address, 0)

    return bare


def cupy_peers(kernel: Kernel) -> dict[str, Callable[[], object]]:
    try:
        import cupy
    except ImportError:
        print("cupy missing: skipped", file=sys.stderr)
        return {}
    x, y, out = (cupy.random.standard_normal(N, dtype=cupy.float32) for _ in range(3))
    return {"tile-mlir Kernel, CuPy arrays": lambda: kernel(x, y, out),
            "cupy.add(out=)": lambda: cupy.add(x, y, out=out)}


def triton_peers(torch: Any) -> dict[str, Callable[[], object]]:
    try:
        import triton
        import triton.language as tl
    except ImportError:
        print("triton missing: skipped", file=sys.stderr)
        return {}

    @triton.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask)
                 + tl.load(y_ptr + offsets, mask=mask), mask=mask)

    x, y, out = (torch.randn(N, device="cuda") for _ in range(3))
    grid = (triton.cdiv(N, 1024),)
    return {"Triton kernel launch": lambda: add[grid](x, y, out, N, BLOCK_SIZE=1024)}


def peers(torch: Any) -> dict[str, Callable[[], object]]:
    from cases import Case

    import tile_mlir

    kernel = tile_mlir.compile(Case("add", (N,), block=BLOCK).mlir()).kernel("kernel")
    x, y, out = (torch.randn(N, device="cuda") for _ in range(3))
    pointers = (x.data_ptr(), y.data_ptr(), out.data_ptr())
    found: dict[str, Callable[[], object]] = {
        "tile-mlir Kernel, torch tensors": lambda: kernel(x, y, out),
        "tile-mlir Kernel, int pointers": lambda: kernel(*pointers),
        "bare cuLaunchKernel (cuda-python)": bare_launch(kernel, pointers),
        "torch eager torch.add(out=)": lambda: torch.add(x, y, out=out),
    }
    return found | cupy_peers(kernel) | triton_peers(torch)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per sample")
    parser.add_argument("--repeats", type=int, default=200, help="samples")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        sys.exit("this benchmark needs torch with CUDA (the op library's users bring it)")
    if not torch.cuda.is_available():
        sys.exit("no CUDA GPU: nothing to launch")
    rows = []
    for name, fn in peers(torch).items():
        for _ in range(3):
            fn()  # warm: plans, Triton's compile, lazy loading
        median, low, high = summary(per_call_us(fn, args.calls, args.repeats,
                                                torch.cuda.synchronize))
        rows.append((name, f"{median:.2f}", f"{low:.2f}", f"{high:.2f}"))
    device = torch.cuda.get_device_name()
    text = "\n".join([
        f"# Launch cost: host time per call, {N}-element f32 add",
        "",
        f"device: {device}; host CPU: {cpu_name()}; python {sys.version.split()[0]}, "
        f"torch {torch.__version__}",
        f"each sample: the mean of {args.calls} back-to-back calls; {args.repeats} samples",
        "",
        table(["launcher", "median us/call", "p10", "p90"], rows),
        "",
    ])
    print(text)
    print(f"saved to {save('launch_cost', device, text)}")


if __name__ == "__main__":
    main()
