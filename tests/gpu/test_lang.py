"""gpu tier for tile_mlir.lang: every example against float64 NumPy with poisoned outputs,
the vector add over odd sizes, misaligned and strided views, transposed inputs, torch, CuPy,
DLPack and CUDA-array-interface arguments, torch's current stream, and the tutorial's
programs (docs/programs.md)."""

from __future__ import annotations

from types import ModuleType
from typing import Annotated, Any

import numpy as np
import pytest
from support.cluster_programs import (
    center_then_normalize,
    center_then_normalize_reference,
    normalize_pairs,
    normalize_pairs_reference,
    softmax_persistent,
    softmax_reference,
)
from support.lang import EXAMPLE_NAMES, example, requires_feature, tutorial

import tile_mlir.lang as tl
from tile_mlir.runtime import DeviceBuffer

pytestmark = pytest.mark.gpu


def _torch() -> Any:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return torch


@pytest.fixture(scope="module")
def doc(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return tutorial(tmp_path_factory.mktemp("tutorial"))


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_example(name: str, rng: np.random.Generator) -> None:
    """Each example's own check: NumPy inputs, outputs poisoned with NaN, every element
    compared with float64 NumPy within its rounding."""
    error = example(name).run(rng)
    print(f"{name}: max |error| {error:.3g}")


VECTOR_ADD = example("vector_add")


@pytest.mark.parametrize("n", [1, 7, 1000, (1 << 20) + 3])
def test_vector_add_of_odd_lengths(n: int, rng: np.random.Generator) -> None:
    error = VECTOR_ADD.run(rng, n)
    print(f"vector_add n={n}: max |error| {error:.3g}")


def test_vector_add_of_views_with_torch() -> None:
    torch = _torch()
    n = 100_003
    base = torch.randn(n + 1, device="cuda")
    a = base[1:]  # 4 bytes past the allocation's 16-byte boundary
    b = torch.randn(3 * n, device="cuda")[::3]  # strided
    c = torch.full((n,), float("nan"), device="cuda")
    VECTOR_ADD.vector_add(a, b, c)
    spec = VECTOR_ADD.vector_add.signature(a, b, c)
    assert [(p.offset, p.strides) for p in spec.params] == \
        [(True, ("1",)), (False, ("?1",)), (False, ("1",))]
    torch.cuda.synchronize()
    assert torch.equal(c, a + b)
    out = torch.full((n,), float("nan"), device="cuda")
    VECTOR_ADD.vector_add(base[1:], b, out)  # the prepared launch, other memory
    assert torch.equal(out, c)
    print(f"vector_add of torch views: {n} elements exact")


def test_vector_add_with_cupy_dlpack_and_cai() -> None:
    cupy = pytest.importorskip("cupy")
    n = 4099
    a = cupy.random.standard_normal(n + 2, dtype=cupy.float32)[2:]
    b = cupy.random.standard_normal(n, dtype=cupy.float32)
    c = cupy.full(n, cupy.nan, dtype=cupy.float32)
    VECTOR_ADD.vector_add(a, b, c)
    assert bool((c == a + b).all())

    class OnlyDLPack:
        def __init__(self, array: Any):
            self.array = array

        def __dlpack__(self, **kwargs: Any) -> Any:
            return self.array.__dlpack__(**kwargs)

        def __dlpack_device__(self) -> Any:
            return self.array.__dlpack_device__()

    d = cupy.full(n, cupy.nan, dtype=cupy.float32)
    VECTOR_ADD.vector_add(OnlyDLPack(a), OnlyDLPack(b), OnlyDLPack(d))
    cupy.cuda.get_current_stream().synchronize()
    assert bool((d == c).all())
    host_a, host_b = cupy.asnumpy(a), cupy.asnumpy(b)
    with DeviceBuffer.from_array(host_a) as x, DeviceBuffer.from_array(host_b) as y, \
            DeviceBuffer((n,), np.float32) as z:
        VECTOR_ADD.vector_add(x, y, z)  # __cuda_array_interface__, default stream
        assert np.array_equal(z.numpy(), host_a + host_b)
    print(f"vector_add: CuPy, DLPack and CUDA array interface, {n} elements exact")


def test_scale_rows_of_a_transposed_tensor(rng: np.random.Generator) -> None:
    torch = _torch()
    scale_rows = example("scale_rows").scale_rows
    m, n = 64, 1003
    values = rng.uniform(-4, 4, (n, m)).astype(np.float16)
    x = torch.from_numpy(values).cuda().t()  # (m, n), strides (1, m)
    y = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    scale_rows(x, 1.5, y)
    torch.cuda.synchronize()
    expected = values.T.astype(np.float64) * 1.5
    got = y.cpu().numpy().astype(np.float64)
    # f16's rounding: half an ulp, 2^-25 among the subnormals (|product| < 2^-14)
    assert (np.abs(got - expected) <= 2.0 ** -11 * np.abs(expected) + 2.0 ** -25).all()
    print(f"scale_rows of a transposed f16 tensor: {m}x{n}, max |error| "
          f"{np.abs(got - expected).max():.3g}")


def test_launch_follows_torchs_current_stream() -> None:
    """A torch op on a side stream writes the input after a long wait; the kernel, launched
    with no sync and no stream= argument, must run after it on the same stream."""
    torch = _torch()
    n = 1 << 16
    x = torch.full((n,), float("nan"), device="cuda")
    y = torch.ones(n, device="cuda")
    out = torch.empty_like(x)
    VECTOR_ADD.vector_add(y, y, out)  # compiled and prepared before the race
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)
        x.fill_(2.0)
        VECTOR_ADD.vector_add(x, y, out)
        result = out * 1
    torch.cuda.synchronize()
    assert bool((result == 3.0).all()), "the kernel ran before torch wrote its input"


@tl.kernel(threads=128)
def doubled(x: Annotated[tl.Tensor, "T", ("N",)], y: Annotated[tl.Tensor, "T", ("N",)],
            TILE: tl.constexpr = 512) -> None:
    for start in tl.range(tl.block_id() * TILE, y.shape[0], tl.num_blocks() * TILE):
        tl.cta.mul(y[start:start + TILE], x[start:start + TILE], 2.0)


@pytest.mark.parametrize("n", [1, 511, 513, 100_000])
def test_a_loop_over_tiles_with_a_tail(n: int, rng: np.random.Generator) -> None:
    x = rng.standard_normal(n).astype(np.float32)
    y = np.full(n, np.nan, np.float32)
    doubled[(7,)](x, y)  # 7 CTAs stride over the tiles
    assert np.array_equal(y, 2 * x)


@tl.kernel(threads=64, cluster=2)
def copy_rows_prefetching(x: Annotated[tl.Tensor, "T", ("M", "N")],
                          y: Annotated[tl.Tensor, "T", ("M", "N")], AHEAD: tl.constexpr) -> None:
    """Row b of y <- row b of x, a cluster's 128 threads taking it in 16-byte vectors, after
    prefetching the row AHEAD rows on (the last row past the end) and a strided view."""
    row = tl.block_id() // 2
    tl.cluster.prefetch(x[tl.minimum(row + AHEAD, x.shape[0] - 1)])
    tl.cluster.prefetch(x[row:row + 1, ::3])  # strided: an element a prefetch
    tl.cluster.copy(y[row], x[row])


@pytest.mark.parametrize(("m", "n", "dtype", "ahead"),
                         [(1, 8, "float32", 1), (37, 1000, "float32", 3),
                          (300, 4099, "float16", 32), (5, 65536, "float16", 2)])
def test_prefetching_leaves_the_data_alone(m: int, n: int, dtype: str, ahead: int,
                                           rng: np.random.Generator) -> None:
    """tile.prefetch writes nothing and faults on nothing: rows of odd lengths (a partial
    last round of vectors), the row ahead clamped to the last, every element of y copied
    exactly from x over a poisoned y."""
    x = rng.standard_normal((m, n)).astype(dtype)
    y = np.full((m, n), np.nan, dtype)
    copy_rows_prefetching[(2 * m,)](x, y, AHEAD=ahead)
    assert np.array_equal(y, x)


@pytest.mark.parametrize("m", [2, 10, 264])
def test_two_rows_a_cluster(m: int, rng: np.random.Generator) -> None:
    """Rows 2k and 2k + 1 of each cluster of 2 CTAs, normalized by their sums with no
    cluster barrier between the rows (tile-barriers finds their views apart): every
    element written, each within f32's rounding of float64."""
    x = rng.uniform(0.5, 1.5, (m, 1024)).astype(np.float32)
    y = np.full((m, 1024), np.nan, np.float32)
    normalize_pairs[(m,)](x, y)
    expected = normalize_pairs_reference(x)
    assert not np.isnan(y).any()
    error = float(np.max(np.abs(y - expected) / expected))
    assert error < 2e-6, error  # 16 ulps: a sum of 1024 terms, then a quotient
    print(f"normalize_pairs m={m}: max relative error {error:.3g}")


@pytest.mark.parametrize(("m", "clusters"), [(1, 1), (7, 3), (64, 5), (301, 1), (1000, 66)])
def test_a_persistent_cluster_kernel(m: int, clusters: int, rng: np.random.Generator) -> None:
    """Softmax over rows of 1024 by `clusters` clusters of 2 CTAs that loop over the rows
    (1 to 301 iterations each, the last ones short where the clusters do not divide the
    rows): the mailboxes of its two reductions serve every iteration, their phases
    wrapping many times; every element written, within f32's rounding of float64."""
    x = (4 * rng.standard_normal((m, 1024))).astype(np.float32)
    y = np.full((m, 1024), np.nan, np.float32)
    softmax_persistent[(2 * clusters,)](x, y)
    expected = softmax_reference(x)
    assert not np.isnan(y).any()
    error = float(np.max(np.abs(y - expected) / expected))
    assert error < 4e-6, error  # an exp of a difference, a sum of 1024 terms, a quotient
    print(f"softmax_persistent m={m} clusters={clusters}: max relative error {error:.3g}")


@pytest.mark.parametrize(("m", "clusters"), [(2, 2), (9, 4), (100, 3)])
def test_a_reduction_then_a_loop_of_them(m: int, clusters: int,
                                         rng: np.random.Generator) -> None:
    """A cluster reduction in the entry block, then one in a loop over the rest of the
    rows (mailboxes of one half, then of two, closed once): every element written, each
    within f32's rounding of float64 (the centered rows against their own scale)."""
    x = rng.uniform(0.5, 1.5, (m, 1024)).astype(np.float32)
    y = np.full((m, 1024), np.nan, np.float32)
    center_then_normalize[(2 * clusters,)](x, y)
    expected = center_then_normalize_reference(x, clusters)
    assert not np.isnan(y).any()
    centered = float(np.max(np.abs(y[:clusters] - expected[:clusters])))
    assert centered < 1e-6, centered  # x - mean, x near 1: a few ulps of 1
    error = float(np.max(np.abs(y[clusters:] - expected[clusters:]) / expected[clusters:])) \
        if m > clusters else 0.0
    assert error < 2e-6, error
    print(f"center_then_normalize m={m} clusters={clusters}: {centered:.3g}, {error:.3g}")


@pytest.mark.parametrize("n", [1, 2047, 2049, 1_000_003])
def test_tutorial_add_any_length(doc: ModuleType, n: int) -> None:
    torch = _torch()
    a, b = torch.randn(2, n, device="cuda")
    c = torch.full((n,), float("nan"), device="cuda")
    doc.add_any_length[lambda d: (tl.cdiv(d["N"], 2048),)](a, b, c)
    torch.cuda.synchronize()
    assert torch.equal(c, a + b)


def test_tutorial_programs(doc: ModuleType, rng: np.random.Generator) -> None:
    doc.run_vector_add(1 << 16)
    x = rng.standard_normal((12, 50)).astype(np.float32)
    bias = rng.standard_normal(50).astype(np.float32)
    y = np.full((12, 50), np.nan, np.float32)
    doc.bias_add[(3,)](x, bias, y)
    assert np.array_equal(y, x + bias)
    a = rng.uniform(0, 100, (32, 8)).astype(np.float32)
    b = np.full((32, 8), np.nan, np.float32)
    doc.reg_sqrt[(1,)](a, b)
    assert (np.abs(b - np.sqrt(a.astype(np.float64))) <= 2.0 ** -24 * np.sqrt(a)).all()
    m = rng.standard_normal((4, 8)).astype(np.float32)
    sums = np.full(4, np.nan, np.float32)
    doc.row_sums[(1,)](m, sums)
    bound = 8 * 2.0 ** -24 * np.abs(m.astype(np.float64)).sum(axis=-1)
    assert (np.abs(sums - m.astype(np.float64).sum(axis=-1)) <= bound).all()


@requires_feature("cross_warp_reduce", "copy_overlap", "broadcast")
@pytest.mark.parametrize("n", [1, 255, 1000, 1024])
def test_tutorial_softmax(doc: ModuleType, n: int, rng: np.random.Generator) -> None:
    x = rng.standard_normal((6, n)).astype(np.float32) * 4
    y = doc.run_softmax(x)
    wide = x.astype(np.float64)
    expected = np.exp(wide - wide.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    assert np.isfinite(y).all() and np.allclose(y, expected, rtol=1e-5, atol=1e-7)


@requires_feature("cross_warp_reduce", "copy_overlap", "broadcast", "mixed")
@pytest.mark.parametrize("n", [1, 255, 4097])
def test_tutorial_rms_norm(doc: ModuleType, n: int, rng: np.random.Generator) -> None:
    x = rng.standard_normal((5, n)).astype(np.float16)
    w = rng.standard_normal(n).astype(np.float16)
    y = np.full((5, n), np.nan, np.float16)
    doc.rms_norm[lambda d: (d["M"],)](x, w, y, 1e-6)
    wide = x.astype(np.float64)
    expected = wide / np.sqrt((wide ** 2).mean(axis=1, keepdims=True) + 1e-6) * w
    assert np.allclose(y.astype(np.float64), expected, rtol=4e-3, atol=1e-3)
