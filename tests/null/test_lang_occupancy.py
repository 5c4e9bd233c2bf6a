"""null tier: tile_mlir.lang's `occupancy=`: the CTAs an SM should fit, held by the
specialization (an int, or a callable of the constexprs as threads is), said by the
gpu.func (nvvm.minctasm, PTX .minnctapersm), refused with the kernel's name when it is
not an int from 1 to 32; with the bytes of spill stores it may cost, (ctas, bytes), the
gpu.func's tile.spill_allowance too."""

from __future__ import annotations

from typing import Annotated, Any

import pytest

import tile_mlir.lang as tl
from tile_mlir.lang import ArgumentError

Flat = Annotated[tl.Tensor, "f32", ("N",)]


@tl.kernel(threads=256, occupancy=3)
def scaled(x: Flat, y: Flat) -> None:
    tl.cta.mul(y, x, 2.0)


@tl.kernel(threads=lambda c: c["T"], occupancy=lambda c: c["K"])
def chosen(x: Flat, y: Flat, T: tl.constexpr = 128, K: tl.constexpr = None) -> None:
    tl.cta.copy(y, x)


def test_the_specialization_holds_the_request_and_the_kernel_says_it() -> None:
    desc = tl.ArrayDesc("f32", (4096,))
    spec = scaled.signature(desc, desc)
    assert spec.occupancy == 3 and "block 256x1x1, 3 CTAs/SM" in repr(spec)
    assert "nvvm.minctasm = 3 : i32" in scaled.ir(spec)
    ptx = scaled.compile([desc, desc], chip="sm_90").ptx["kernels"]
    assert ".minnctapersm 3" in ptx and ".maxntid 256, 1, 1" in ptx
    assert chosen.signature(desc, desc, K=6).occupancy == 6
    plain = chosen.signature(desc, desc)
    assert plain.occupancy is None and "minctasm" not in chosen.ir(plain)
    assert plain.key() != chosen.signature(desc, desc, K=6).key()
    allowing = chosen.signature(desc, desc, K=(6, 24))
    assert (allowing.occupancy, allowing.spill) == (6, 24) and "6 CTAs/SM (spill <= 24 B)" \
        in repr(allowing)
    assert "nvvm.minctasm = 6 : i32, tile.spill_allowance = 24 : i32" in chosen.ir(allowing)
    assert allowing.key() != chosen.signature(desc, desc, K=6).key()


@pytest.mark.parametrize("bad", [0, 33, 2.5, True, "3", (3, -1), (3, 1.5), (0, 8), (3,)])
def test_a_bad_request_is_refused_with_the_kernel_name(bad: Any) -> None:
    desc = tl.ArrayDesc("f32", (4096,))
    with pytest.raises(ArgumentError, match=r"chosen: occupancy is None, the CTAs an SM "
                                            r"should fit \(an int from 1 to 32\), or those "
                                            r"and the bytes of spill stores they may cost"):
        chosen.signature(desc, desc, K=bad)
