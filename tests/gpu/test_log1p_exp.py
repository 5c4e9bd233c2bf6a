"""gpu tier: f32 mish and softplus, whose log1p(exp(y)) runs libdevice's log1pf on a
capped argument (bodies._log1p_exp), bit for bit torch's own on every f32 value.

All 2^32 bit patterns, in pieces of 2^28, through ops.mish and ops.softplus (out=, the
output poisoned with a finite pattern first) beside torch.nn.functional's: every result
has torch's bits, NaN for NaN (any payload). softplus takes betas that are powers of
two (its reciprocal, which the library multiplies by, is then exact: torch divides) and
an infinite threshold, which sends every element through log1p(exp(y)), the
overflowing ones (y > 88.72) included.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support.ops_torch import HAVE_TORCH, torch_module

from tile_mlir import ops

pytestmark = pytest.mark.gpu

PIECE = 1 << 28
POISON = 0x12345678
"""A finite f32 (5.7e-28): an element left unwritten is not NaN-equal to anything."""

SOFTPLUS = [(1.0, 20.0), (2.0, 5.0), (0.5, 1.0), (-1.0, 20.0), (1.0, float("inf"))]


def _every_f32(first: int) -> Any:
    torch = torch_module()
    bits = torch.arange(first, first + PIECE, dtype=torch.int64, device="cuda")
    return bits.to(torch.int32).view(torch.float32)  # wraps past 2^31: the negatives


def _differ(ours: Callable[[Any, Any], Any], theirs: Callable[[Any], Any]) -> int:
    """How many of the 2^32 values ours(x, out) gives other bits than theirs(x) (NaN
    against NaN counts as the same)."""
    torch = torch_module()
    out = torch.empty(PIECE, dtype=torch.float32, device="cuda")
    differ = 0
    for first in range(0, 1 << 32, PIECE):
        x = _every_f32(first)
        out.view(torch.int32).fill_(POISON)
        ours(x, out)
        want = theirs(x)
        same = (out.view(torch.int32) == want.view(torch.int32)) | \
            (torch.isnan(out) & torch.isnan(want))
        differ += int((~same).sum())
    return differ


@pytest.fixture(autouse=True)
def _torch() -> None:
    if not HAVE_TORCH:
        pytest.skip("needs torch")


def test_mish_is_torchs_on_every_f32() -> None:
    F = torch_module().nn.functional
    differ = _differ(lambda x, out: ops.mish(x, out=out), F.mish)
    print(f"mish f32: {differ} of 2^32 values differ from torch's")
    assert differ == 0


@pytest.mark.parametrize(("beta", "threshold"), SOFTPLUS)
def test_softplus_is_torchs_on_every_f32(beta: float, threshold: float) -> None:
    F = torch_module().nn.functional
    differ = _differ(lambda x, out: ops.softplus(x, beta, threshold, out=out),
                     lambda x: F.softplus(x, beta, threshold))
    print(f"softplus f32 beta={beta} threshold={threshold}: {differ} of 2^32 values differ "
          f"from torch's")
    assert differ == 0
