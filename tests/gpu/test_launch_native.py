"""gpu tier: library ops launched by the compiled launcher (runtime/_launch.c) give what
the fallback (ctypes slots and cuda-python's cuLaunchKernel) gives, bit for bit, on
calls whose launches pass pointers, offsets, f32/i32/i64 numbers and constants; and
one plan called from several threads at once stays correct (the compiled launcher packs
each call's values under the GIL: no per-thread copy needed). A kernel of
tile_mlir.compile launches the same way, with its own grid or the call's, and with a
scalar parameter.

    source .stage/mlir/env.sh && python3 -m pytest -m gpu tests/gpu/test_launch_native.py
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.cases import Case

import tile_mlir
from tile_mlir import ops
from tile_mlir.ops import entry, kernels

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")


def _fresh_plans() -> None:
    entry.clear()
    kernels.clear()


@pytest.fixture
def fresh() -> Iterator[None]:
    _fresh_plans()
    yield
    _fresh_plans()


def _calls() -> dict[str, Callable[[], Any]]:
    gen = torch.Generator(device="cuda").manual_seed(7)
    x = torch.randn(3, 1000, device="cuda", generator=gen)
    y = torch.randn(3, 1000, device="cuda", generator=gen)
    h = torch.randn(5, 2 * 777, device="cuda", generator=gen).to(torch.bfloat16)
    return {
        "add": lambda: ops.add(x, y, alpha=0.75),
        "add scalar": lambda: ops.add(x, 2.5),
        "add view": lambda: ops.add(x[:, 3:], y[:, :-3]),
        "clamp": lambda: ops.clamp(x, -0.5, 0.25),
        "pow int": lambda: ops.pow(x, 3),
        "sum rows": lambda: ops.sum(x, dim=-1),
        "amax columns": lambda: ops.amax(x, dim=0),
        "silu_and_mul": lambda: ops.silu_and_mul(h),
        "dropout": lambda: ops.dropout(x, 0.3, seed=11),
    }


def _launch_kinds() -> set[str]:
    """The kind of launcher each plan's first launch went through."""
    return {type(getattr(plan.__globals__.get("_L0"), "__self__", None)).__name__
            for plan in entry.PLANS.values()}


def _in_threads(work: Callable[[int], None], count: int) -> None:
    """work(0), ..., work(count - 1), each in a thread of its own, all at once."""
    workers = [threading.Thread(target=work, args=(seed,)) for seed in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def test_compiled_launcher_is_used_and_matches_the_fallback(
        fresh: None, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _calls()
    native = {name: fn() for name, fn in calls.items()}
    native_again = {name: fn() for name, fn in calls.items()}  # through the plans
    assert _launch_kinds() == {"Launcher"}, "the compiled launcher was not built or not used"
    _fresh_plans()
    monkeypatch.setenv("TILE_MLIR_NATIVE_LAUNCH", "0")
    fallback = {name: fn() for name, fn in calls.items()}
    fallback_again = {name: fn() for name, fn in calls.items()}
    assert "Launcher" not in _launch_kinds()
    for name in calls:
        for got in (native_again[name], fallback[name], fallback_again[name]):
            assert torch.equal(got, native[name]), name


def test_one_plan_from_many_threads(fresh: None) -> None:
    """8 threads, each 300 calls of one plan (add) and one reduction plan on tensors of
    its own, all launched while the others launch; each result against torch."""
    n = 4099
    ops.add(torch.ones(n, device="cuda"), torch.ones(n, device="cuda"))  # the plans
    ops.sum(torch.ones(7, n, device="cuda"), dim=-1)
    errors: list[str] = []
    barrier = threading.Barrier(8)

    def work(seed: int) -> None:
        gen = torch.Generator(device="cuda").manual_seed(seed)
        a = torch.randn(n, device="cuda", generator=gen)
        b = torch.randn(n, device="cuda", generator=gen)
        m = torch.randn(7, n, device="cuda", generator=gen)
        barrier.wait()
        sums, rows = [], []
        for _ in range(300):
            sums.append(ops.add(a, b))
            rows.append(ops.sum(m, dim=-1))
        torch.cuda.synchronize()
        want_sum, want_rows = a + b, m.double().sum(dim=-1)
        if not all(torch.equal(s, want_sum) for s in sums):
            errors.append(f"thread {seed}: add")
        if not all(torch.allclose(r.double(), want_rows, rtol=1e-5, atol=1e-4) for r in rows):
            errors.append(f"thread {seed}: sum")

    _in_threads(work, 8)
    assert not errors, errors


def test_a_compiled_kernel_launches_natively_from_threads() -> None:
    """The runtime's Kernel: the fast launcher's launch is the compiled one; 6 threads
    of 200 calls each on tensors of their own; a 4-CTA kernel called with a grid of one
    CTA (the rest of the output keeps its poison), then with its own; a scalar
    parameter."""
    kernel = tile_mlir.compile(Case("add", (4096,), block=256).mlir()).kernel("kernel")
    x, y = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    out = torch.full((4096,), float("nan"), device="cuda")
    kernel(x, y, out)
    assert torch.equal(out, x + y)
    assert "NATIVE" in kernel._fast.__globals__, "the Kernel did not take the compiled launch"
    errors: list[int] = []

    def work(seed: int) -> None:
        gen = torch.Generator(device="cuda").manual_seed(seed)
        a, b = torch.randn(4096, device="cuda", generator=gen), \
            torch.randn(4096, device="cuda", generator=gen)
        outs = [torch.empty(4096, device="cuda") for _ in range(200)]
        for o in outs:
            kernel(a, b, o)
        torch.cuda.synchronize()
        if not all(torch.equal(o, a + b) for o in outs):
            errors.append(seed)

    _in_threads(work, 6)
    assert not errors, errors
    rows = tile_mlir.compile(Case("add", (4, 1024), form="rows", split=4).mlir()
                             ).kernel("kernel")  # 4 CTAs of 4 rows each
    assert rows.spec.grid == (4, 1, 1)
    x4, y4 = torch.randn(16, 1024, device="cuda"), torch.randn(16, 1024, device="cuda")
    part = torch.full((16, 1024), float("nan"), device="cuda")
    rows(x4, y4, part, grid=(1, 1, 1))  # the first CTA's rows only
    torch.cuda.synchronize()
    assert torch.equal(part[:4], (x4 + y4)[:4]) and bool(part[4:].isnan().all())
    rows(x4, y4, part)
    assert torch.equal(part, x4 + y4)
    scaled = tile_mlir.compile(Case("mul", (4096,), block=256, scalar=True).mlir()
                               ).kernel("kernel")
    out2 = torch.full((4096,), float("nan"), device="cuda")
    scaled(x, 2.5, out2)
    assert torch.equal(out2, x * 2.5)
