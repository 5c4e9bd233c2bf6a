"""null tier: tile.reduce's tuple kinds (online_softmax's (max, sum) pairs, welford's
(count, mean, M2) triples) in tile_mlir.lang kernels on the pretend device, the threads of
a CTA together (support/simt.py: lanes' shuffles, warps' partials in shared memory, a
partial last warp; 8 warps' partials folded over the lanes, registers._over_lanes),
against op_table's float64 references; and their errors."""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
import pytest
from support import simt
from support.emulated import Device, EmuArray
from support.lang import desc

import tile_mlir.lang as tl
from tile_mlir import op_table

Column = Annotated[tl.Tensor, "f32", ("P", 1)]


def _own(p: int) -> tl.Tensor:
    return tl.alloc_reg((p, 1), tl.f32, f"S[({p}, 1):(1@tid, 1)]")


def _threads(constexprs: dict[str, Any]) -> int:
    return int(constexprs["P"])


@tl.kernel(threads=_threads, static=("P",))
def pairs(m: Column, s: Column, out_m: Column, out_s: Column, *, P: tl.constexpr) -> None:
    tiles = [_own(P), _own(P)]
    for tile, column in zip(tiles, (m, s), strict=True):
        tl.cta.copy(tile, column)
    total = [_own(P), _own(P)]
    tl.cta.online_softmax(total, tiles, axes=0)
    for tile, column in zip(total, (out_m, out_s), strict=True):
        tl.cta.copy(column, tile)


@tl.kernel(threads=_threads, static=("P",))
def triples(n: Column, mean: Column, m2: Column, out_n: Column, out_mean: Column,  # noqa: PLR0917 - the kernel's arguments
            out_m2: Column, *, P: tl.constexpr) -> None:
    tiles = [_own(P) for _ in range(3)]
    for tile, column in zip(tiles, (n, mean, m2), strict=True):
        tl.cta.copy(tile, column)
    tl.cta.welford(tiles, tiles, axes=0)  # in place: each thread's reads come first
    for tile, column in zip(tiles, (out_n, out_mean, out_m2), strict=True):
        tl.cta.copy(column, tile)


def _launch(device: Device, kernel: tl.KernelFunction, *arrays: EmuArray) -> None:
    described = [desc(a) for a in arrays]
    p = arrays[0].numpy().shape[0]
    simt.run(kernel.ir(*described, P=p), kernel.arguments(*described, P=p), device.buffers,
             grid=1)


def _columns(device: Device, *values: np.ndarray) -> list[EmuArray]:
    return [device.array(v.astype(np.float32).reshape(-1, 1)) for v in values]


@pytest.mark.parametrize("p", [48, 64, 96, 256])
def test_online_softmax_pairs(rng: np.random.Generator, p: int) -> None:
    """Each thread's (max, sum of exp(x - max)) of its own 9 values, one thread with
    nothing (-inf, 0): every thread gets the CTA's (max, sum), as a float64 softmax of
    all the values has them."""
    device = Device()
    x = rng.uniform(-40.0, 40.0, (p, 9))
    m = x.max(axis=1)
    s = np.exp(x - m[:, None]).sum(axis=1)
    m[p // 3], s[p // 3] = -np.inf, 0.0
    m, s = m.astype(np.float32), s.astype(np.float32)
    inputs = _columns(device, m, s)
    outputs = [device.array(np.full((p, 1), np.nan, np.float32)) for _ in range(2)]
    _launch(device, pairs, *inputs, *outputs)
    want_m, want_s = op_table.REDUCE_KINDS["online_softmax"].ref(
        m.astype(np.float64), s.astype(np.float64), axis=0)
    got_m, got_s = (o.numpy()[:, 0] for o in outputs)
    assert np.all(got_m == np.float32(want_m))
    np.testing.assert_allclose(got_s, want_s, rtol=4e-6)
    assert np.all(got_s == got_s[0])  # every thread the same bits


@pytest.mark.parametrize("p", [48, 64, 96, 256])
def test_welford_triples(rng: np.random.Generator, p: int) -> None:
    """Each thread's (count, mean, M2) of its own values (1 to 12 of them, some threads
    none) around a mean of 100: every thread gets the CTA's, as NumPy's two-pass count,
    mean and M2 of all the values have them."""
    device = Device()
    counts = rng.integers(1, 13, p)
    counts[[1, p - 1]] = 0
    parts = [rng.normal(100.0, 3.0, c).astype(np.float32).astype(np.float64) for c in counts]
    means = np.array([v.mean() if v.size else 0.0 for v in parts])
    m2s = np.array([((v - v.mean()) ** 2).sum() if v.size else 0.0 for v in parts])
    inputs = _columns(device, counts.astype(np.float64), means, m2s)
    outputs = [device.array(np.full((p, 1), np.nan, np.float32)) for _ in range(3)]
    _launch(device, triples, *inputs, *outputs)
    every = np.concatenate(parts)
    got_n, got_mean, got_m2 = (o.numpy()[:, 0] for o in outputs)
    assert np.all(got_n == every.size)
    np.testing.assert_allclose(got_mean, every.mean(), rtol=1e-6)
    np.testing.assert_allclose(got_m2, ((every - every.mean()) ** 2).sum(), rtol=1e-4)
    assert np.all(got_m2 == got_m2[0])


def test_a_tuple_kind_takes_a_tuple_of_tensors() -> None:
    @tl.kernel(threads=32)
    def two_of_three(n: Annotated[tl.Tensor, "f32", (32, 1)]) -> None:
        a, b = _own(32), _own(32)
        tl.cta.welford((a, b), (a, b), axes=0)

    with pytest.raises(tl.ProgramError, match="'welford' reduction takes dst as a tuple of 3"):
        two_of_three.ir(desc(Device().empty((32, 1), "f32")))


def test_a_tuple_kind_reduces_register_tiles_of_one_shape() -> None:
    @tl.kernel(threads=32)
    def in_memory(m: Annotated[tl.Tensor, "f32", (32, 1)],
                  s: Annotated[tl.Tensor, "f32", (32, 1)]) -> None:
        a, b = _own(32), _own(32)
        tl.cta.online_softmax((a, b), (m, s), axes=0)

    @tl.kernel(threads=32)
    def kept_axes_only(m: Annotated[tl.Tensor, "f32", (32, 1)]) -> None:
        a, b = _own(32), _own(32)
        held = tl.alloc_reg((1, 1), tl.f32, "S[(1, 1)], R[32:1@tid]")
        tl.cta.online_softmax((held, b), (a, b), axes=0)

    column = desc(Device().empty((32, 1), "f32"))
    with pytest.raises(tl.ProgramError, match=r"folds register tiles \(tl.alloc_reg\): "
                                              r"src\[0\] is in global memory"):
        in_memory.ir(column, column)
    with pytest.raises(tl.ProgramError, match=r"tiles of one shape and layout .* dst \[1, 1\]"):
        kept_axes_only.ir(column)


def test_tile_verify_names_a_tuple_kind_s_problems() -> None:
    """IR written by hand: the operands' count, accum; IRDL itself requires the extra
    operands to have src's type."""
    from tile_mlir import pipeline
    from tile_mlir.context import new_context, parse
    from tile_mlir.diagnostics import DiagnosticSink

    template = """
gpu.module @m {{
  gpu.func @k() kernel attributes {{known_block_size = array<i32: 32, 1, 1>}} {{
    %a = "tile.alloc"() {{layout = #tile.layout<"S[(32, 1):(1@tid, 1)]">}}
        : () -> memref<32x1xf32, #gpu.address_space<private>>
    "tile.reduce"({operands}) {{kind = "{kind}", axes = array<i64: 0>, scope = "cta"{extra}}}
        : ({types}) -> ()
    gpu.return
  }}
}}"""
    reg = "memref<32x1xf32, #gpu.address_space<private>>"

    def problems(kind: str, count: int, extra: str = "") -> str:
        text = template.format(operands=", ".join(["%a"] * count), kind=kind, extra=extra,
                               types=", ".join([reg] * count))
        context = new_context()
        module = parse(text, "k.mlir", context)
        sink = DiagnosticSink()
        assert not pipeline.run(module, pipeline.Expander().expand("tile-verify"), sink)
        (found,) = sink.diagnostics
        assert found.loc is not None and (found.loc.line, found.loc.col) == (6, 5)  # the op
        return found.message

    assert "of kind 'welford' takes 3 (dst, src) pairs of operands, got 4 operands" in \
        problems("welford", 4)
    assert "of kind 'online_softmax' takes no 'accum' or 'scale'" in \
        problems("online_softmax", 4, ", accum = true")
