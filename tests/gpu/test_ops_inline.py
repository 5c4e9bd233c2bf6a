"""gpu tier: the inline cache (entry.inline_entry) with torch's own tensor guard.

A call like its op's latest runs that op's plan without building its key, the tensors
compared by torch._C._dynamo.guards.TensorGuards (C++). Here on CUDA tensors of the
installed torch: each library op of bench/launch_cost.py is served so on its second
call; and each way a call can differ from the last (strides, a misaligned view, a
dtype, requires_grad, a tensor at the input's address for out=, a number's type) is
not served so but planned, with the plan cache emptied and the inline cache kept, and
the result compared with a float64 reference.

    source .stage/mlir/env.sh && python3 -m pytest -m gpu tests/gpu/test_ops_inline.py
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from support.plans import full_paths

from tile_mlir import ops
from tile_mlir.ops import entry

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")


@pytest.fixture
def fulls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The ops whose calls take the full path (plan) during the test, in order."""
    made = full_paths(monkeypatch)
    entry.clear()
    yield made
    entry.clear()


def _f64(t: Any) -> np.ndarray:
    return np.asarray(t.detach().double().cpu().numpy())


def _silu_and_mul(h: np.ndarray) -> np.ndarray:
    gate, up = np.split(h, 2, axis=-1)
    return np.asarray(gate / (1 + np.exp(-gate)) * up)


def test_this_torch_has_the_guard() -> None:
    """The fast path exists with the torch installed: a guard passes the tensors it was
    made from and refuses another shape."""
    x = torch.randn(4, 8, device="cuda")
    check = entry.tensor_guard([x])
    assert check is not None and check(x) and not check(x[:, :4]) and not check(x.t())


def test_every_launch_cost_op_is_served_inline(fulls: list[str]) -> None:
    gen = torch.Generator(device="cuda").manual_seed(5)
    x = torch.randn(4, 1024, device="cuda", generator=gen)
    y = torch.randn(4, 1024, device="cuda", generator=gen)
    h = torch.randn(4, 2048, device="cuda", generator=gen).to(torch.bfloat16)
    w = torch.nn.Parameter(torch.rand(1024, device="cuda", generator=gen))
    out = torch.empty_like(x)
    calls: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
        "add": (lambda: ops.add(x, y), lambda: _f64(x) + _f64(y)),
        "add out=": (lambda: ops.add(x, y, out=out), lambda: _f64(x) + _f64(y)),
        "add scalar": (lambda: ops.add(x, 2.5), lambda: _f64(x) + 2.5),
        "exp": (lambda: ops.exp(x), lambda: np.exp(_f64(x))),
        "silu_and_mul": (lambda: ops.silu_and_mul(h), lambda: _silu_and_mul(_f64(h))),
        "sum": (lambda: ops.sum(x, dim=-1), lambda: _f64(x).sum(-1)),
        "amax": (lambda: ops.amax(x, dim=-1), lambda: _f64(x).max(-1)),
        "rms_norm (a Parameter)": (lambda: ops.rms_norm(x, (1024,), w, 1e-6), lambda: (
            _f64(x) / np.sqrt((_f64(x) ** 2).mean(-1, keepdims=True) + 1e-6) * _f64(w))),
    }
    for name, (call, reference) in calls.items():
        call()
        entry.PLANS.clear()  # the next call has nothing but the inline cache
        fulls.clear()
        got = _f64(call())
        assert fulls == [], name
        tolerance = {"silu_and_mul": 2.0 ** -7, "sum": 1e-4}.get(name, 1e-5)
        np.testing.assert_allclose(got, reference(), rtol=tolerance, atol=tolerance,
                                   err_msg=name)
    p = ops.dropout(x, 0.25, seed=9)
    entry.PLANS.clear()
    fulls.clear()
    q = ops.dropout(x, 0.25, seed=9)
    assert fulls == [] and torch.equal(p, q) and bool(((q == 0) | (q == x / 0.75)).all())


def test_each_difference_plans_again(fulls: list[str]) -> None:
    gen = torch.Generator(device="cuda").manual_seed(6)

    def normal(*shape: int, dtype: Any = torch.float32) -> Any:
        return torch.randn(*shape, device="cuda", generator=gen).to(dtype)

    def base() -> Any:
        return ops.add(normal(3, 1000), normal(3, 1000), alpha=2.0,
                       out=torch.empty(3, 1000, device="cuda"))

    def served(make: Callable[[], tuple[Any, Any, Any, Any]], inline: bool) -> None:
        entry.clear()
        base()
        entry.PLANS.clear()
        fulls.clear()
        a, b, alpha, out = make()
        want = _f64(a) + alpha * _f64(b)
        got = ops.add(a, b, alpha=alpha, out=out)
        assert fulls == ([] if inline else ["add"])
        rtol = 2.0 ** -8 if out.dtype == torch.bfloat16 else 1e-5  # rounded once
        np.testing.assert_allclose(_f64(got), want, rtol=rtol, atol=1e-5)

    def fresh() -> Any:
        return torch.empty(3, 1000, device="cuda")

    served(lambda: (normal(3, 1000), normal(3, 1000), -0.5, fresh()), inline=True)
    served(lambda: (normal(1000, 3).t(), normal(3, 1000), 2.0, fresh()), inline=False)
    served(lambda: (normal(3001)[1:].view(3, 1000), normal(3, 1000), 2.0, fresh()),
           inline=False)  # 4 bytes past an aligned address
    served(lambda: (normal(3, 1000, dtype=torch.bfloat16), normal(3, 1000, dtype=torch.bfloat16),
                    2.0, torch.empty(3, 1000, device="cuda", dtype=torch.bfloat16)),
           inline=False)
    served(lambda: (normal(3, 1000).requires_grad_(), normal(3, 1000), 2.0, fresh()),
           inline=False)  # torch's guard tells requires_grad apart
    a = normal(3, 1000)
    served(lambda: (a, normal(3, 1000), 2.0, a.view(3, 1000)), inline=False)  # in place
    served(lambda: (normal(3, 1000), normal(3, 1000), 2, fresh()), inline=False)  # int alpha


def test_a_megamorphic_op_is_served_by_shape(fulls: list[str]) -> None:
    """add(out=) over three shapes in turn: past MEGAMORPHIC calls by key the plans are
    served by the leading tensor's shape and dtype, no call building its key; a tensor of
    one of those shapes but other strides (a transposed view) is planned by key, right."""
    gen = torch.Generator(device="cuda").manual_seed(7)
    args = [(torch.randn(n, 64, device="cuda", generator=gen),
             torch.randn(n, 64, device="cuda", generator=gen),
             torch.empty(n, 64, device="cuda")) for n in (64, 65, 66)]
    for _ in range(entry.MEGAMORPHIC):
        for a, b, out in args:
            ops.add(a, b, out=out)
    assert entry.NAMES["_IC_add"] is None and entry.NAMES["_BY_add"]
    keyed = entry.NAMES["_KEYED_add"]
    for _ in range(3):
        for a, b, out in args:
            out.fill_(float("nan"))
            np.testing.assert_allclose(_f64(ops.add(a, b, out=out)), _f64(a) + _f64(b),
                                       rtol=1e-6)
    assert entry.NAMES["_KEYED_add"] == keyed
    t = torch.randn(64, 64, device="cuda", generator=gen).t()
    b, out = args[0][1], args[0][2]
    for _ in range(2):
        np.testing.assert_allclose(_f64(ops.add(t, b, out=out)), _f64(t) + _f64(b), rtol=1e-6)
    assert entry.NAMES["_KEYED_add"] == keyed + 1 and fulls.count("add") == 4
