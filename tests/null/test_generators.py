"""null tier: dropout (Philox 4x32-10 in the kernel), ALiBi and sinusoidal encodings.

The kernels run on the pretend device (emulated.py) and are compared with NumPy
written independently of them: the Philox stream bit for bit (mask and values), the
encodings against float64 formulas (the ALiBi paper's get_slopes recursion, PE's
p / base^(2i/dim)). The reference stream itself is checked against Random123's
known-answer vectors and for its keep rate and independence over ~1e6 elements.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from support.differential import paper_slopes
from support.emulated import Device, EmuArray

import tile_mlir
from tile_mlir import op_table, ops
from tile_mlir.dtypes import DTYPES
from tile_mlir.op_table import refs
from tile_mlir.ops import strategy
from tile_mlir.ops.programs.elementwise import Strategy

# ------------------------------------------------------------- the reference stream

# Random123's kat_vectors: counter (4 words), key (2 words) -> philox4x32-10's 4 words
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize(("counter", "key", "want"), KAT)
def test_philox_known_answers(counter: tuple, key: tuple, want: tuple) -> None:
    got = refs.philox4x32_10(counter, key)
    assert [int(w) for w in got] == list(want)


def test_stream_layout() -> None:
    """Element i takes word i % 4 at counter offset + i // 4 (low, high words, 0, 0)."""
    seed, offset = (0x0123456789ABCDEF, (1 << 32) - 1)  # the counter crosses into the high word
    index = np.arange(40, dtype=np.uint64)
    words = refs.random_words(index, seed, offset)
    for i in (0, 5, 39):
        counter = offset + i // 4
        block = refs.philox4x32_10((counter & 0xFFFFFFFF, counter >> 32, 0, 0),
                                   (seed & 0xFFFFFFFF, seed >> 32))
        assert words[i] == block[i % 4]
    # an offset of k counters is the same stream moved by 4k elements
    assert np.array_equal(refs.random_words(index[8:], seed, offset),
                          refs.random_words(index[:-8], seed, offset + 2))


N = 1 << 20


def _within_sigmas(count: int, n: int, p: float, sigmas: float = 6.0) -> bool:
    return abs(count - n * p) <= sigmas * math.sqrt(n * p * (1 - p))


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9, 1 / 3])
def test_keep_rate(p: float, rng: np.random.Generator) -> None:
    seed, offset = int(rng.integers(0, 2**63)), int(rng.integers(0, 2**40))
    keep = refs.dropout_mask(seed, offset, math.floor(p * 2**32), np.arange(N))
    print(f"p={p}: kept {keep.mean():.5f} of {N}")
    assert _within_sigmas(int(keep.sum()), N, 1 - p)


def test_streams_are_independent(rng: np.random.Generator) -> None:
    """Masks of other seeds, of other offsets, and of neighbouring elements agree as often
    as independent coin flips do (p^2 + (1-p)^2), within 6 sigma."""
    p, t = 0.5, 1 << 31
    index = np.arange(N)
    seed = int(rng.integers(0, 2**63))
    base = refs.dropout_mask(seed, 0, t, index)
    others = {"seed + 1": refs.dropout_mask(seed + 1, 0, t, index),
              "seed ^ 2^32": refs.dropout_mask(seed ^ (1 << 32), 0, t, index),
              "offset + 2^18": refs.dropout_mask(seed, N // 4, t, index),
              "next element": np.roll(base, 1)}
    for name, other in others.items():
        agree = int((base == other).sum())
        print(f"{name}: agree {agree / N:.5f}")
        assert _within_sigmas(agree, N, p * p + (1 - p) * (1 - p)), name
    words = refs.random_words(index, seed, 0).astype(np.float64)
    assert abs(np.corrcoef(words[:-1], words[1:])[0, 1]) < 6 / math.sqrt(N)


# ------------------------------------------------------------------ dropout


def _float_input(device: Device, shape: tuple[int, ...], dtype: str,
                 rng: np.random.Generator) -> tuple[EmuArray, np.ndarray]:
    values = rng.standard_normal(shape).astype(np.float32)
    array = device.array(values, dtype)
    return array, array.numpy()


def _expected(x: np.ndarray, p: float, seed: int, offset: int, dtype: str
              ) -> tuple[np.ndarray, np.ndarray]:
    """The reference in float32 (the kernels' compute type), rounded as the kernels round."""
    index = np.arange(x.size, dtype=np.uint64)
    threshold = math.floor(p * 2**32)
    keep = refs.dropout_mask(seed, offset, threshold, index).reshape(x.shape)
    values = refs.dropout(x.astype(np.float32).reshape(-1), np.float32(1 / (1 - p)), seed,
                          offset, threshold, index).reshape(x.shape)
    if dtype == "f8e4m3":  # saturating, as cvt.rn.satfinite
        values = np.clip(values, -448, 448)
    return values.astype(DTYPES[dtype].np_dtype()), keep


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view({1: np.uint8, 2: np.uint16, 4: np.uint32}[a.itemsize])


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "f8e4m3", "f8e5m2"])
@pytest.mark.parametrize("shape", [(4099,), (7, 1001), (3, 5, 37), (1,)])
def test_dropout_bit_exact(device: Device, rng: np.random.Generator, dtype: str,
                           shape: tuple[int, ...]) -> None:
    x, host = _float_input(device, shape, dtype, rng)
    p = float(rng.choice([0.1, 0.5, 0.75]))
    seed, offset = int(rng.integers(0, 2**64, dtype=np.uint64)), int(rng.integers(0, 2**62))
    got, mask = ops.dropout(x, p, seed=seed, offset=offset, return_mask=True)
    want, keep = _expected(host, p, seed, offset, dtype)
    assert got.shape == shape and mask.dtype == "bool"
    assert np.array_equal(mask.numpy(), keep)
    assert np.array_equal(_bits(got.numpy()), _bits(want))
    print(f"{dtype} {shape} p={p}: kept {keep.mean():.3f}, bit for bit")


def test_dropout_counts_the_logical_order(device: Device, rng: np.random.Generator) -> None:
    """A transposed input: element (i, j) of the result is element i * cols + j of the
    stream, wherever it lies in memory."""
    base, _ = _float_input(device, (37, 45), "f32", rng)
    x = base.view((45, 37), (1, 45))  # base.T
    host = x.numpy()
    got, mask = ops.dropout(x, 0.5, seed=11, offset=3, return_mask=True)
    want, keep = _expected(host, 0.5, 11, 3, "f32")
    assert np.array_equal(mask.numpy(), keep)
    assert np.array_equal(_bits(got.numpy()), _bits(want))


STRATEGIES = [Strategy(threads=32, vector_bytes=1, rounds=1, stage=1),
              Strategy(threads=64, vector_bytes=16, rounds=3, stage=1),
              Strategy(threads=128, vector_bytes=16, rounds=2, stage=2),
              Strategy(threads=32, vector_bytes=32, rounds=1, stage=1)]


@pytest.mark.parametrize("shape", [(3000,), (5, 2001), (40, 33)])
def test_mask_does_not_depend_on_the_launch(device: Device, rng: np.random.Generator,
                                            shape: tuple[int, ...]) -> None:
    """Direct, vector and staged strategies, threads, vector widths, and flat, rows and
    blocks pieces (every other row of a wider array keeps two dimensions): one mask, the
    reference's."""
    if len(shape) == 1:
        x, host = _float_input(device, shape, "f16", rng)
    else:
        rows, cols = shape
        wide, _ = _float_input(device, (2 * rows, cols), "f16", rng)
        x = wide.view(shape, (2 * cols, 1))
        host = x.numpy()
    want, keep = _expected(host, 0.3, 99, 1, "f16")
    modes = set()
    try:
        for choice in STRATEGIES:
            strategy.force(choice)
            got, mask = ops.dropout(x, 0.3, seed=99, offset=1, return_mask=True)
            modes.add(device.launches[-2].split(";")[1].split(",")[0].strip())
            assert np.array_equal(mask.numpy(), keep), choice
            assert np.array_equal(_bits(got.numpy()), _bits(want)), choice
    finally:
        strategy.force(None)
    print(f"{shape}: pieces {sorted(modes)}, {len(STRATEGIES)} strategies, one mask")


def test_p_zero_is_the_identity(device: Device, rng: np.random.Generator) -> None:
    x, host = _float_input(device, (5, 33), "bf16", rng)
    got, mask = ops.dropout(x, 0.0, seed=1, return_mask=True)
    assert np.array_equal(_bits(got.numpy()), _bits(host))
    assert mask.numpy().all()


def test_eval_mode_returns_the_input(device: Device, rng: np.random.Generator) -> None:
    x, _ = _float_input(device, (100,), "f32", rng)
    assert ops.dropout(x, 0.5, training=False) is x
    same, mask = ops.dropout(x, 0.5, training=False, return_mask=True)
    assert same is x and mask.numpy().all()
    assert type(mask) is type(x)  # the input's kind (a torch tensor for torch), not a buffer


def test_library_generator(device: Device, rng: np.random.Generator) -> None:
    x, host = _float_input(device, (1001,), "f32", rng)
    ops.manual_seed(1234)
    assert ops.get_rng_state() == (1234, 0)
    first = ops.dropout(x, 0.5).numpy()
    assert ops.get_rng_state() == (1234, 251)  # ceil(1001 / 4) counters used
    second = ops.dropout(x, 0.5).numpy()
    assert not np.array_equal(first, second)
    assert np.array_equal(_bits(first), _bits(_expected(host, 0.5, 1234, 0, "f32")[0]))
    assert np.array_equal(_bits(second), _bits(_expected(host, 0.5, 1234, 251, "f32")[0]))
    ops.set_rng_state((1234, 251))
    assert np.array_equal(ops.dropout(x, 0.5).numpy(), second)
    ops.manual_seed(1234)
    assert np.array_equal(ops.dropout(x, 0.5).numpy(), first)


def test_dropout_errors(device: Device) -> None:
    x = device.array(np.ones(8, np.float32))
    for p in (-0.1, 1.0, 1.5, math.nan):
        with pytest.raises(ValueError, match="'p'"):
            ops.dropout(x, p)
    with pytest.raises(TypeError, match="'p'"):
        ops.dropout(x, "0.5")
    with pytest.raises(TypeError, match="'input'"):
        ops.dropout(device.array(np.ones(8, np.int32)), 0.5)
    with pytest.raises(ValueError, match="'offset'"):
        ops.dropout(x, 0.5, offset=4)
    with pytest.raises(ValueError, match="'seed'"):
        ops.dropout(x, 0.5, seed=-1)
    with pytest.raises(ValueError, match="'seed'"):
        ops.manual_seed(1 << 64)
    state = ops.get_rng_state()
    for bad in ((1,), 5, (1, 2, 3), None):
        with pytest.raises(TypeError, match=r"argument 'state' must be a \(seed, offset\) "
                                            "pair"):
            ops.set_rng_state(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'offset'"):
        ops.set_rng_state((1, -1))
    assert ops.get_rng_state() == state  # nothing changed


# ---------------------------------------------------------------- encodings


def _close(got: np.ndarray, want: np.ndarray, dtype: str) -> None:
    """Within one ulp of the dtype (f32: 2), relative to max(|want|, the dtype's tiny)."""
    eps, tiny = {"f32": (2.0**-23, 2.0**-126), "f16": (2.0**-10, 2.0**-14),
                 "bf16": (2.0**-7, 2.0**-126)}[dtype]
    ulp = eps * (2 if dtype == "f32" else 1)
    scale = np.maximum(np.abs(want), tiny)
    error = np.abs(got.astype(np.float64) - want) / scale
    print(f"{dtype}: max relative error {error.max():.3g} (bound {ulp:.3g})")
    assert error.max() <= ulp


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize(("heads", "length"), [(12, 37), (48, 129), (8, 1000), (1, 5), (7, 1),
                                               (100, 9), (200, 6), (1031, 2)])
def test_alibi(device: Device, dtype: str, heads: int, length: int) -> None:
    like = device.array(np.zeros(1, np.float32))
    got = ops.alibi(heads, length, dtype=DTYPES[dtype].numpy, like=like)
    assert got.shape == (heads, length) and got.dtype == dtype
    want = np.array(paper_slopes(heads))[:, None] * np.arange(length)
    _close(got.numpy(), want, dtype)


def test_alibi_kernel_divides_cheaply(device: Device) -> None:
    """The slopes' exponent is scaled by 1/n (no f64 division), and an access's head and
    column come from the length's division magic (bodies._divide_magic): the kernel's PTX
    has a mul.hi.u64 and no integer division at all."""
    like = device.array(np.zeros(1, np.float32))
    got = ops.alibi(32, 2048, like=like)
    _close(got.numpy(), np.array(paper_slopes(32))[:, None] * np.arange(2048), "f32")
    ptx = tile_mlir.compile(device.launches[-1], chip="sm_90", cache=False).ptx["kernels"]
    assert "div.rn.f64" not in ptx
    assert "mul.hi.u64" in ptx
    assert not re.search(r"\b(div|rem)\.[us](32|64)\b", ptx), "an integer division"


@pytest.mark.parametrize("divisor", [1, 2, 3, 7, 9, 2047, 2048, 2049, 50257, (1 << 31) - 1,
                                     1 << 40, (1 << 62) + 1, (1 << 63) - 1])
def test_division_magic(divisor: int, rng: np.random.Generator) -> None:
    """a // d = mulhi(2a, M) >> ceil(log2 d) for every a < 2^63 (the ends, multiples of d
    and their neighbours, random ones), M = op_table.division_magic(d) as an i64's bits."""
    magic = op_table.division_magic(divisor) % (1 << 64)
    assert magic < 1 << 64
    shift = (divisor - 1).bit_length()
    top = (1 << 63) - 1
    edges = [0, 1, divisor - 1, divisor, divisor + 1, top, top // divisor * divisor,
             top // divisor * divisor - 1]
    for a in [*edges, *(int(v) for v in rng.integers(0, top, 2000, dtype=np.int64))]:
        if 0 <= a <= top:
            assert (2 * a * magic) >> 64 >> shift == a // divisor, a
    for bad in (0, 1 << 63):
        with pytest.raises(ValueError, match="not in"):
            op_table.division_magic(bad)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize(("positions", "dim", "base"),
                         [(101, 64, 10000.0), (37, 63, 10000.0), (2048, 6, 500000.0),
                          (1, 1, 10.0)])
def test_sinusoidal(device: Device, dtype: str, positions: int, dim: int, base: float) -> None:
    like = device.array(np.zeros(1, np.float32))
    got = ops.sinusoidal(positions, dim, base=base, dtype=DTYPES[dtype].numpy, like=like)
    assert got.shape == (positions, dim) and got.dtype == dtype
    p = np.arange(positions)[:, None]
    i2 = (np.arange(dim) // 2 * 2)[None]
    angle = p / np.power(base, i2 / dim)
    want = np.where(np.arange(dim) % 2 == 1, np.cos(angle), np.sin(angle))
    got64 = got.numpy().astype(np.float64)
    error = np.abs(got64 - want).max()
    bound = {"f32": 1e-6, "f16": 1e-3, "bf16": 8e-3}[dtype]  # half an ulp of 1, and f32's
    print(f"{dtype} ({positions}, {dim}) base {base}: max abs error {error:.3g}")
    assert error <= bound


def test_generator_errors(device: Device) -> None:
    like = device.array(np.zeros(1, np.float32))
    with pytest.raises(ValueError, match="'num_heads'"):
        ops.alibi(0, 8, like=like)
    with pytest.raises(TypeError, match="'seq_len'"):
        ops.alibi(4, 8.0, like=like)
    with pytest.raises(TypeError, match="'dtype'"):
        ops.alibi(4, 8, dtype="int32", like=like)
    with pytest.raises(ValueError, match="'base'"):
        ops.sinusoidal(4, 8, base=0.0, like=like)
    with pytest.raises(ValueError, match="'device' or 'like'"):
        ops.sinusoidal(4, 8, device="cuda", like=like)
    empty = ops.alibi(4, 0, like=like)
    assert empty.shape == (4, 0)
