"""gpu tier: library ops in CUDA graphs (issue 14, part 3).

Each op is called once outside capture (the warm-up: the first call of a signature
compiles and loads its kernel, which a capture cannot hold), captured with
torch.cuda.graph, then replayed after new values are copied into the captured inputs;
the replay's outputs are compared with an eager call on the new values. Pointers are
fixed at capture, as for torch's own ops. Dropout under capture replays the (seed,
offset) the captured call had: with seed= given, the eager reference is the same call;
from the library's generator, every replay draws the same mask. A first call under
capture raises CaptureError instead of breaking the capture. Last, a model step that
mixes torch ops with the library's torch custom ops under
torch.compile(mode="reduce-overhead") (inductor's CUDA graphs) against eager.

    source .stage/mlir/env.sh && python3 -m pytest -m gpu tests/gpu/test_ops_graphs.py
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from tile_mlir import ops
from tile_mlir.ops import kernels

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")


def _captured(fn: Callable[[], Any]) -> tuple[Any, Any]:
    """Warm up on a side stream (torch's recipe), then capture; (graph, outputs)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


def _normal(given: Any) -> Any:
    """Fresh random values of a tensor's shape and dtype."""
    return torch.randn(given.shape, device=given.device).to(given.dtype)


def _replay_matches(fn: Callable[[], Any], inputs: Sequence[Any],
                    fresh: Callable[[Any], Any] = _normal,
                    eager: Callable[[], Any] | None = None) -> None:
    """Capture fn; three times: new values into the inputs (fresh(input)), replay, compare
    with `eager` (default: fn itself, called eagerly) on those values."""
    graph, outs = _captured(fn)
    for _ in range(3):
        for given in inputs:
            given.copy_(fresh(given))
        graph.replay()
        torch.cuda.synchronize()
        want = (eager or fn)()  # on the values now in the inputs
        for got, expected in zip(outs if isinstance(outs, tuple) else (outs,),
                                 want if isinstance(want, tuple) else (want,), strict=True):
            assert torch.equal(got, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_elementwise_and_gated(dtype: Any) -> None:
    x = torch.randn(37, 4096, device="cuda", dtype=dtype)
    y = torch.randn(4096, device="cuda", dtype=dtype)
    h = torch.randn(37, 2 * 1000, device="cuda", dtype=dtype)
    _replay_matches(lambda: ops.add(x, y), [x, y])
    _replay_matches(lambda: ops.exp(x), [x])
    _replay_matches(lambda: ops.silu_and_mul(h), [h])
    out = torch.empty_like(x)
    _replay_matches(lambda: ops.mul(x, 2.5, out=out), [x],
                    eager=lambda: torch.mul(x, 2.5))


def test_reductions_and_rope() -> None:
    x = torch.randn(300, 1000, device="cuda")
    _replay_matches(lambda: ops.sum(x, dim=-1), [x])
    _replay_matches(lambda: ops.amax(x), [x])  # two stages
    q = torch.randn(33, 8, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(33, 2, 128, device="cuda", dtype=torch.bfloat16)
    positions = torch.randint(0, 4096, (33,), device="cuda")
    _replay_matches(lambda: ops.rope_neox(q, k, positions, max_position=4096), [q, k])
    _replay_matches(lambda: ops.rope_neox(q, k, positions, max_position=4096), [positions],
                    lambda given: torch.randint(0, 4096, given.shape, device=given.device))


def test_dropout_replays_its_captured_stream() -> None:
    x = torch.randn(64, 1000, device="cuda")
    _replay_matches(lambda: ops.dropout(x, 0.3, seed=1234, offset=7), [x])
    ops.manual_seed(5)
    graph, (_, mask) = _captured(lambda: ops.dropout(x, 0.3, return_mask=True))
    masks = []
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        masks.append(mask.clone())
    assert all(torch.equal(m, masks[0]) for m in masks)  # the captured (seed, offset)


def test_a_first_call_under_capture_raises() -> None:
    x = torch.randn(1000, 7, device="cuda")  # a shape no other test planned
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(kernels.CaptureError, match="warm-up"), torch.cuda.graph(graph):
        ops.log1p(x.t())


def test_reduce_overhead_model_step(rng: np.random.Generator) -> None:
    tops = ops.torch_ops()
    w = torch.randn(2 * 512, 256, device="cuda", dtype=torch.bfloat16) / 16
    bias = torch.randn(2 * 512, device="cuda", dtype=torch.bfloat16)

    def step(x: Any) -> Any:
        h = torch.nn.functional.linear(x, w)
        h = tops.add(h, bias)
        h = tops.silu_and_mul(h)
        h = torch.tanh(h) + 1
        return tops.sum(h, dim=-1)

    def eager(x: Any) -> Any:
        h = torch.nn.functional.linear(x, w)
        h = ops.silu_and_mul(ops.add(h, bias))
        return ops.sum(torch.tanh(h) + 1, dim=-1)

    compiled = torch.compile(step, mode="reduce-overhead")
    for _ in range(4):
        x = torch.from_numpy(rng.standard_normal((64, 256)).astype(np.float32)).cuda()
        x = x.to(torch.bfloat16)
        got = compiled(x).clone()
        want = eager(x)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.allclose(got.float(), want.float(), rtol=2e-2, atol=2e-2)
