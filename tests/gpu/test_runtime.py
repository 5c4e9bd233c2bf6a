"""gpu tier for the runtime: torch and CuPy arrays in and out, stream ordering with torch
work, PTX fallback, bad arrays refused, and kernels run from a warm cache in a process
where MLIR cannot be imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.cases import Case

import tile_mlir
from tile_mlir.runtime import ArgumentError, DeviceBuffer
from tile_mlir.runtime import cache as kernel_cache

pytestmark = pytest.mark.gpu

ADD = Case("add", (4, 1024), block=256)
BF16_SCALE = Case("mul", (37, 129), dtype="bf16", block=128, scalar=True)


def _torch() -> Any:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return torch


def test_torch_tensors_in_and_out() -> None:
    torch = _torch()
    kernel = tile_mlir.compile(ADD.mlir()).kernel("kernel")
    x, y = (torch.randn(4, 1024, device="cuda") for _ in range(2))
    [out] = kernel.new_outputs(like=x)
    assert isinstance(out, torch.Tensor) and out.device == x.device and out.shape == x.shape
    kernel(x, y, out)
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)
    print(f"torch f32 add: {out.numel()} elements exact, kernel from {kernel.binary}")


def test_torch_bf16_with_a_scalar() -> None:
    torch = _torch()
    kernel = tile_mlir.compile(BF16_SCALE.mlir()).kernel("kernel")
    x = torch.randn(37, 129, device="cuda", dtype=torch.bfloat16)
    out = torch.full_like(x, float("nan"))
    kernel(x, 3.0, out)
    torch.testing.assert_close(out, x * 3.0)
    print(f"torch bf16 mul by scalar: {out.numel()} elements")


def test_cupy_arrays_in_and_out() -> None:
    cupy = pytest.importorskip("cupy")
    kernel = tile_mlir.compile(ADD.mlir()).kernel("kernel")
    x, y = (cupy.random.standard_normal((4, 1024), dtype=cupy.float32) for _ in range(2))
    [out] = kernel.new_outputs(like=x)
    assert isinstance(out, cupy.ndarray)
    kernel(x, y, out)
    assert bool((out == x + y).all())
    print(f"cupy f32 add: {out.size} elements exact")


def test_launch_follows_torchs_current_stream() -> None:
    """A torch op on a side stream writes the input after a long wait; our kernel, launched
    with no sync and no stream= argument, must run after it on the same stream."""
    torch = _torch()
    kernel = tile_mlir.compile(ADD.mlir()).kernel("kernel")
    x = torch.full((4, 1024), float("nan"), device="cuda")
    y = torch.ones(4, 1024, device="cuda")
    out = torch.empty_like(x)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # ~tens of ms of GPU time before x is written
        x.fill_(2.0)
        kernel(x, y, out)
        result = out * 1  # torch work after ours, same stream
    torch.cuda.synchronize()
    assert bool((result == 3.0).all()), "the kernel ran before torch wrote its input"
    explicit = torch.cuda.Stream()
    explicit.wait_stream(side)
    kernel(y, y, out, stream=explicit)
    explicit.synchronize()
    assert bool((out == 2.0).all())


def test_bad_torch_inputs_are_refused_by_name() -> None:
    torch = _torch()
    kernel = tile_mlir.compile(ADD.mlir()).kernel("kernel")
    good = torch.zeros(4, 1024, device="cuda")
    strided = torch.zeros(1024, 4, device="cuda").t()  # the right shape, transposed
    with pytest.raises(ArgumentError, match=r"argument 0 \(arg0\).*contiguous"):
        kernel(strided, good, good)
    misaligned = torch.zeros(4 * 1024 + 1, device="cuda")[1:].view(4, 1024)
    with pytest.raises(ArgumentError, match=r"argument 1 \(arg1\).*not aligned to 16 bytes"):
        kernel(good, misaligned, good)
    with pytest.raises(ArgumentError, match=r"argument 2 \(arg2\): expected f32 .*float16"):
        kernel(good, good, good.half())
    with pytest.raises(ArgumentError, match=r"argument 0 \(arg0\).*host memory"):
        kernel(good.cpu(), good, good)


def test_ptx_fallback_runs(rng: np.random.Generator) -> None:
    fresh = tile_mlir.compile(ADD.mlir(), cache=False)
    fresh.cubin.clear()  # as if no cubin matched this GPU
    old_chip = tile_mlir.compile(ADD.mlir(), chip="sm_80", cache=False)  # cubin can't run
    for program in (fresh, old_chip):
        kernel = program.kernel("kernel")
        assert kernel.binary == "ptx"
        a, b = (rng.standard_normal((4, 1024)).astype(np.float32) for _ in range(2))
        c = np.full((4, 1024), np.nan, np.float32)
        kernel(a, b, c)
        np.testing.assert_array_equal(c, a + b)
        print(f"PTX for {program.chip} JIT-compiled by the driver: exact")


def test_device_buffer_is_a_cuda_array() -> None:
    torch = _torch()
    with DeviceBuffer((4, 1024), np.float32) as buf:
        view = torch.as_tensor(buf, device="cuda")
        view.fill_(1.5)
        torch.cuda.synchronize()
        assert (buf.numpy() == 1.5).all()


NO_MLIR = textwrap.dedent("""
    import sys
    sys.modules["mlir"] = None  # any import of MLIR now fails
    import numpy as np
    import tile_mlir
    program = tile_mlir.compile({source!r})  # must come from the warm cache
    kernel = program.kernel("kernel")
    a, b = np.random.rand(2, 4, 1024).astype(np.float32)
    c = np.full((4, 1024), np.nan, np.float32)
    kernel(a, b, c)
    assert (c == a + b).all()
    import torch
    x = torch.from_numpy(a).cuda()
    out = kernel.new_outputs(like=x)[0]
    kernel(x, x, out)
    assert bool((out.cpu() == x.cpu() * 2).all())
    assert not [m for m in sys.modules if m.startswith("mlir") and sys.modules[m]]
    print("ran from", kernel.binary, "without MLIR")
""")


def test_warm_cache_runs_without_mlir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _torch()
    monkeypatch.setenv("TILE_MLIR_CACHE_DIR", str(tmp_path))  # the child inherits it
    kernel_cache.clear_memory()
    tile_mlir.compile(ADD.mlir())  # warm the cache, in this process (with MLIR)
    assert list(tmp_path.rglob("*.bundle"))
    result = subprocess.run([sys.executable, "-c", NO_MLIR.format(source=ADD.mlir())],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "without MLIR" in result.stdout
    print(result.stdout.strip())
