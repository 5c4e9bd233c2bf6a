"""null tier: RoPE's five ops run end to end on the pretend device (emulated.py).

Each call's kernels are the library's tile programs, lowered by the compiler's
passes and run thread by thread in the host emulator; outputs start poisoned
(NaN), so an element no op wrote fails the comparison. The expectations are
float64 (rope_ref.py, written from the formulas): the caches against rope_ref's
tables, the rotations against rope_ref.rotate applied to query and key with the
cache as the kernel got it (rounded to the query's dtype).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from support import rope_ref
from support.emulated import Device, EmuArray

import tile_mlir
from tile_mlir import ops
from tile_mlir.dtypes import DTYPES
from tile_mlir.ops import rope
from tile_mlir.runtime import driver


@pytest.fixture(autouse=True)
def _fresh_device_caches(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Caches placed on one test's pretend device are not another's."""
    monkeypatch.setattr(rope, "_on_device", {})
    yield


LONG_FACTORS = tuple(1.0 + 0.25 * i for i in range(16))
SHORT_FACTORS = tuple(1.0 + 0.05 * i for i in range(16))

VARIANTS: dict[str, tuple[Any, dict[str, Any]]] = {
    # op, and parameters small enough for the emulator (caches of a few hundred rows)
    "neox": (ops.rope_neox, {"base": 10000.0, "max_position": 300}),
    "non_neox": (ops.rope_non_neox, {"base": 10000.0, "max_position": 300}),
    "llama31": (ops.rope_llama31, {"base": 500000.0, "scaling_factor": 8.0,
                                   "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                   "original_max_position": 64, "max_position": 512}),
    "yarn": (ops.rope_yarn, {"base": 10000.0, "scaling_factor": 4.0,
                             "original_max_position": 96, "beta_fast": 32.0,
                             "beta_slow": 1.0}),
    "longrope": (ops.rope_longrope, {"base": 10000.0, "short_factor": SHORT_FACTORS,
                                     "long_factor": LONG_FACTORS,
                                     "original_max_position": 64, "max_position": 256}),
}


@dataclass(frozen=True)
class Shape:
    tokens: int
    heads: int
    key_heads: int  # 0: no key
    head_dim: int
    rotary_dim: int

    def __str__(self) -> str:
        return (f"t{self.tokens}h{self.heads}k{self.key_heads}d{self.head_dim}"
                f"r{self.rotary_dim}")


FULL = Shape(7, 4, 2, 32, 32)  # odd tokens, GQA
PARTIAL = Shape(5, 3, 1, 64, 32)  # partial rotary, odd heads
WIDE = Shape(2, 2, 2, 128, 128)

CASES = [
    # variant, dtype, shape, neox (llama31 and yarn take either pairing)
    ("neox", "f32", FULL, True), ("neox", "bf16", PARTIAL, True), ("neox", "f16", WIDE, True),
    ("non_neox", "f32", FULL, False), ("non_neox", "bf16", PARTIAL, False),
    ("non_neox", "f16", Shape(9, 2, 1, 48, 48), False),
    ("llama31", "bf16", FULL, True), ("llama31", "f32", PARTIAL, False),
    ("yarn", "f16", FULL, True), ("yarn", "bf16", PARTIAL, False),
    ("longrope", "f32", FULL, True), ("longrope", "bf16", PARTIAL, True),
]


def _table_params(variant: str, shape: Shape) -> dict[str, Any]:
    params = dict(VARIANTS[variant][1])
    if variant == "longrope":  # one factor per pair
        half = shape.rotary_dim // 2
        params["short_factor"] = SHORT_FACTORS[:half]
        params["long_factor"] = LONG_FACTORS[:half]
    return params


def _positions(rng: np.random.Generator, tokens: int, rows: int) -> np.ndarray:
    """Out of order, with a repeat, both ends of the cache among them."""
    positions = rng.integers(0, rows, tokens)
    if tokens >= 3:
        positions[:3] = [rows - 1, 0, rows - 1]
    return rng.permutation(positions)


def _inputs(device: Device, rng: np.random.Generator, dtype: str, shape: Shape
            ) -> tuple[np.ndarray, np.ndarray | None, EmuArray, EmuArray | None]:
    np_type = DTYPES[dtype].np_dtype()
    q = (rng.standard_normal((shape.tokens, shape.heads, shape.head_dim)) * 3).astype(np_type)
    k = (rng.standard_normal((shape.tokens, shape.key_heads, shape.head_dim)) * 3
         ).astype(np_type) if shape.key_heads else None
    return q, k, device.array(q, dtype), None if k is None else device.array(k, dtype)


@dataclass(frozen=True)
class How:
    """What a kernel did: the pairing, the dtype and the rotated dims."""

    style: str
    dtype: str
    rotary_dim: int


def _check(got: np.ndarray, x: np.ndarray, cache: np.ndarray, positions: np.ndarray,
           how: How) -> str:
    """Compare one output with the float64 rotation of its input; '' when within bounds."""
    style, dtype, rotary_dim = how.style, how.dtype, how.rotary_dim
    rows = cache[positions].astype(np.float64)
    half = rotary_dim // 2
    padded = np.zeros(x.shape, np.float64)
    padded[..., :rotary_dim] = x[..., :rotary_dim].astype(np.float64)
    want, size = rope_ref.rotate(padded[..., :rotary_dim], rows[:, :half], rows[:, half:],
                                 style)
    g = got.astype(np.float64)
    err = np.abs(g[..., :rotary_dim] - want)
    ok = err <= rope_ref.bound(want, size, dtype)  # NaN (unwritten) fails
    passed = np.array_equal(got[..., rotary_dim:].view(np.uint8),
                            x[..., rotary_dim:].view(np.uint8))
    print(f"  max err {np.nanmax(err / np.maximum(size, 1e-30)):.3g} of |x1 c| + |x2 s|")
    if not ok.all():
        at = np.argwhere(~ok)[0]
        return f"{int((~ok).sum())} elements out of bounds, first {tuple(at)}: got " \
            f"{g[tuple(at)]}, want {want[tuple(at)]}"
    return "" if passed else "the dims past rotary_dim are not the input's"


@pytest.mark.parametrize("case", CASES,
                         ids=[f"{v}-{d}-{s}-{'neox' if n else 'gptj'}" for v, d, s, n in CASES])
def test_variant(device: Device, rng: np.random.Generator,
                 case: tuple[str, str, Shape, bool]) -> None:
    """The op computes its cache from the variant's parameters (rope_cache), rounds it to
    the query's dtype, and rotates query and key by the positions' rows."""
    variant, dtype, shape, neox = case
    fn, _ = VARIANTS[variant]
    params = _table_params(variant, shape)
    q, k, q_dev, k_dev = _inputs(device, rng, dtype, shape)
    style = "neox" if neox else "gptj"
    extra = {"is_neox": neox} if variant in ("llama31", "yarn") else {}
    placed = ops.rope_cache(variant, rotary_dim=shape.rotary_dim, like=q_dev, **params)
    cache = placed.numpy()
    table = rope_ref.table(variant, shape.rotary_dim, **params)
    assert cache.shape == table.shape
    np.testing.assert_allclose(cache.astype(np.float64), table, rtol=rope_ref.EPS[dtype],
                               atol=rope_ref.EPS[dtype])
    first, rows = 0, table.shape[0]
    if variant == "longrope":  # max_position > original: the long rows
        first, rows = params["original_max_position"], params["max_position"]
    positions = _positions(rng, shape.tokens, rows)
    q_out, k_out = fn(q_dev, k_dev, device.array(positions), rotary_dim=shape.rotary_dim,
                      **params, **extra)
    used = cache[first:first + rows]
    print(f"{variant} {style} {dtype} {shape}")
    how = How(style, dtype, shape.rotary_dim)
    assert _check(q_out.numpy(), q, used, positions, how) == ""
    assert k is not None and k_out is not None
    assert _check(k_out.numpy(), k, used, positions, how) == ""


@pytest.mark.parametrize("spread", [True, False], ids=["spread", "cta-per-token"])
@pytest.mark.parametrize("neox", [True, False], ids=["neox", "gptj"])
def test_both_launch_forms(device: Device, rng: np.random.Generator,
                           monkeypatch: pytest.MonkeyPatch, neox: bool, spread: bool) -> None:
    """Few tokens take a CTA per op of a token (grid axis 1: query and key, each the pairs'
    first elements, their second ones and the dims past rotary_dim) while those CTAs make
    one wave, more tokens a CTA per token (the SM count moved to make these 4 tokens take
    either form): both rotate every element, and write NaN over the whole row of a
    position outside the cache."""
    monkeypatch.setattr(driver, "device_sms", lambda device=0: 1 << 20 if spread else 1)
    shape, dtype = Shape(4, 3, 2, 48, 16), "bf16"
    q, k, q_dev, k_dev = _inputs(device, rng, dtype, shape)
    positions = np.array([7, -1, 0, 299])
    fn = ops.rope_neox if neox else ops.rope_non_neox
    q_out, k_out = fn(q_dev, k_dev, device.array(positions), rotary_dim=16, max_position=300)
    header = device.launches[-1].splitlines()[0]
    assert header.startswith("// tile_mlir.ops rope"), header
    assert ("a CTA per op of a token (6)" in header) == spread, header
    cache = ops.rope_cache("neox" if neox else "non_neox", rotary_dim=16, like=q_dev,
                           max_position=300, base=10000.0).numpy()
    good = np.array([0, 2, 3])
    assert k is not None and k_out is not None
    for got, x in ((q_out.numpy(), q), (k_out.numpy(), k)):
        assert np.isnan(got[1].astype(np.float32)).all()
        assert _check(got[good], x[good], cache, positions[good],
                      How("neox" if neox else "gptj", dtype, 16)) == ""


def test_caches_match_the_formulas() -> None:
    """rope_cache's float64 tables against rope_ref's, at a real model's sizes: to float64's
    rounding of angles up to 2^14 (the two compute the frequencies in other orders)."""
    cases: list[tuple[str, int, dict[str, Any]]] = [
        ("neox", 128, {"base": 10000.0, "max_position": 4096}),
        ("llama31", 128, {"base": 500000.0, "scaling_factor": 8.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position": 8192,
                          "max_position": 16384}),
        ("yarn", 64, {"base": 10000.0, "scaling_factor": 4.0, "original_max_position": 4096,
                      "beta_fast": 32.0, "beta_slow": 1.0}),
        ("yarn", 64, {"base": 10000.0, "scaling_factor": 2.0, "original_max_position": 2048,
                      "attention_factor": 0.7, "truncate": False}),
        ("longrope", 96, {"base": 10000.0, "short_factor": [1.0 + 0.01 * i for i in range(48)],
                          "long_factor": [1.0 + 0.5 * i for i in range(48)],
                          "original_max_position": 4096, "max_position": 8192}),
    ]
    for variant, rotary_dim, params in cases:
        got = ops.rope_cache(variant, rotary_dim=rotary_dim, **params)
        want = rope_ref.table(variant, rotary_dim, **params)
        assert got.dtype == np.float64 and got.shape == want.shape, variant
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-10, err_msg=variant)
        assert ops.rope_cache(variant, rotary_dim=rotary_dim, **params) is got  # cached


# ------------------------------------------------------------------ arguments


def test_given_cache_strided_inputs_and_out(device: Device, rng: np.random.Generator) -> None:
    """vLLM's packed qkv: query and key are views into one (tokens, heads + 2 key_heads,
    head_dim) buffer, one of them at an offset that breaks 16-byte alignment; the cache is
    given (a slice of a wider one), and so are the poisoned outputs."""
    tokens, heads, key_heads, head_dim, rotary_dim = 6, 4, 2, 64, 64
    width = heads + 2 * key_heads
    qkv = rng.standard_normal((tokens, width, head_dim)).astype(np.float32)
    buffer = device.array(qkv, "f32", offset=1)
    strides = (width * head_dim, head_dim, 1)
    q_dev = buffer.view((tokens, heads, head_dim), strides)
    k_dev = buffer.view((tokens, key_heads, head_dim), strides, heads * head_dim)
    wide = rope_ref.table("neox", rotary_dim, max_position=40).astype(np.float32)
    wider = np.zeros((40, rotary_dim + 8), np.float32)
    wider[:, :rotary_dim] = wide
    cache_dev = device.array(wider).view((40, rotary_dim), (rotary_dim + 8, 1))
    out = (device.empty((tokens, heads, head_dim), "f32"),
           device.empty((tokens, key_heads, head_dim), "f32"))
    positions = _positions(rng, tokens, 40).astype(np.int32)
    q_out, k_out = ops.rope_neox(q_dev, k_dev, device.array(positions),
                                 cos_sin_cache=cache_dev, out=out)
    assert q_out is out[0] and k_out is out[1]
    q, k = qkv[:, :heads], qkv[:, heads:heads + key_heads]
    how = How("neox", "f32", rotary_dim)
    assert _check(q_out.numpy(), q, wide, positions, how) == ""
    assert _check(k_out.numpy(), k, wide, positions, how) == ""


@pytest.mark.parametrize("fn", [ops.rope_neox, ops.rope_non_neox], ids=["neox", "gptj"])
def test_expanded_query_key_and_cache(device: Device, rng: np.random.Generator,
                                      fn: Any) -> None:
    """Views with stride 0 (torch's expand) as query (every token the same row), key (one
    token's heads as well) and cache (every row the same), aligned and not: computed as
    their values are, no copy."""
    tokens, heads, head_dim = 5, 3, 32
    row = (rng.standard_normal((heads, head_dim)) * 3).astype(np.float32)
    style = "neox" if fn is ops.rope_neox else "gptj"
    for offset in (0, 1):
        q_dev = device.array(row, offset=offset).view((tokens, heads, head_dim),
                                                      (0, head_dim, 1))
        k_dev = device.array(row[0], offset=offset).view((tokens, 2, head_dim), (0, 0, 1))
        table = rope_ref.table("neox", head_dim, max_position=9).astype(np.float32)
        positions = _positions(rng, tokens, 9)
        q_out, k_out = fn(q_dev, k_dev, device.array(positions), max_position=9, base=10000.0)
        cache = ops.rope_cache(style if style == "neox" else "non_neox", rotary_dim=head_dim,
                               like=q_dev, max_position=9, base=10000.0).numpy()
        how = How(style, "f32", head_dim)
        assert _check(q_out.numpy(), q_dev.numpy(), cache, positions, how) == ""
        assert _check(k_out.numpy(), k_dev.numpy(), cache, positions, how) == ""
        one_row = device.array(table[4], offset=offset).view((9, head_dim), (0, 1))
        q_out, _ = fn(q_dev, None, device.array(positions), cos_sin_cache=one_row)
        assert _check(q_out.numpy(), q_dev.numpy(), one_row.numpy(), positions, how) == ""


def test_no_key_and_no_tokens(device: Device, rng: np.random.Generator) -> None:
    q, _, q_dev, _ = _inputs(device, rng, "bf16", Shape(3, 2, 0, 32, 16))
    positions = np.array([5, 1, 5])
    q_out, k_out = ops.rope_non_neox(q_dev, None, device.array(positions), max_position=8,
                                     rotary_dim=16)
    cache = ops.rope_cache("non_neox", rotary_dim=16, like=q_dev, max_position=8,
                           base=10000.0).numpy()
    assert k_out is None
    assert _check(q_out.numpy(), q, cache, positions, How("gptj", "bf16", 16)) == ""
    launches = len(device.launches)
    empty = device.array(np.zeros((0, 2, 32), np.float32))
    q_out, k_out = ops.rope_neox(empty, empty, device.array(np.zeros(0, np.int64)))
    assert q_out.shape == (0, 2, 32) and k_out.shape == (0, 2, 32)
    assert len(device.launches) == launches  # nothing to launch


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_positions_outside_the_cache_give_nan(device: Device, rng: np.random.Generator,
                                              dtype: str) -> None:
    """On the device positions are not checked (that would wait for the GPU): a token whose
    position is outside the cache (negative, or max_position and beyond) gets NaN rows,
    the others their rotation."""
    q, k, q_dev, k_dev = _inputs(device, rng, dtype, Shape(5, 2, 1, 32, 32))
    positions = np.array([3, -1, 16, 0, 1 << 40])
    q_out, k_out = ops.rope_neox(q_dev, k_dev, device.array(positions), max_position=16)
    cache = ops.rope_cache("neox", rotary_dim=32, like=q_dev, max_position=16,
                           base=10000.0).numpy()
    good = np.array([0, 3])
    assert k is not None
    for got, x in ((q_out.numpy(), q), (k_out.numpy(), k)):
        assert np.isnan(got[[1, 2, 4]]).all()
        assert _check(got[good], x[good], cache, positions[good], How("neox", dtype, 32)) == ""


def test_host_positions_are_checked() -> None:
    q = np.zeros((2, 1, 8), np.float32)
    with pytest.raises(ValueError, match=r"argument 'positions' has 9, outside.*\[0, 9\)"):
        ops.rope_neox(q, q, np.array([0, 9]), max_position=9)
    with pytest.raises(ValueError, match="argument 'positions' has -2"):
        ops.rope_neox(q, q, np.array([-2, 0]), max_position=9)


def _error_cases() -> list[tuple[str, dict[str, Any], type[Exception], str]]:
    f32 = np.zeros((3, 2, 16), np.float32)
    cache = np.zeros((8, 16), np.float32)
    pos = np.zeros(3, np.int64)
    good = {"query": f32, "key": f32, "positions": pos, "cos_sin_cache": cache}
    return [
        ("query rank", {**good, "query": f32[0]}, ValueError, "argument 'query'"),
        ("query dtype", {**good, "query": f32.astype(np.int32)}, TypeError,
         "argument 'query'"),
        ("key tokens", {**good, "key": f32[:2]}, ValueError, "argument 'key'"),
        ("key dtype", {**good, "key": f32.astype(np.float16)}, TypeError, "argument 'key'"),
        ("key head_dim strided", {**good, "key": f32[:, :, ::2]}, ValueError,
         "argument 'key'"),
        ("positions dtype", {**good, "positions": pos.astype(np.float32)}, TypeError,
         "argument 'positions'"),
        ("positions length", {**good, "positions": pos[:2]}, ValueError,
         "argument 'positions'"),
        ("positions kind", {**good, "positions": [0, 1, 2]}, TypeError,
         "argument 'positions'"),
        ("cache width", {**good, "cos_sin_cache": cache[:, :12], "rotary_dim": 16},
         ValueError, "argument 'cos_sin_cache' has rows of 12"),
        ("cache dtype", {**good, "query": f32.astype(np.float16),
                         "key": f32.astype(np.float16)}, TypeError, "argument 'cos_sin_cache'"),
        ("cache rank", {**good, "cos_sin_cache": cache[0]}, ValueError,
         "argument 'cos_sin_cache'"),
        ("rotary_dim odd", {**good, "cos_sin_cache": None, "rotary_dim": 5}, ValueError,
         "argument 'rotary_dim'"),
        ("rotary_dim past head_dim", {**good, "cos_sin_cache": None, "rotary_dim": 18},
         ValueError, "argument 'rotary_dim'"),
        ("out not a pair", {**good, "out": f32}, TypeError, "argument 'out'"),
        ("out shape", {**good, "out": (f32[:, :1], f32)}, ValueError, "argument 'out\\[0\\]'"),
    ]


@pytest.mark.parametrize(("what", "kwargs", "error", "message"), _error_cases(),
                         ids=[c[0] for c in _error_cases()])
def test_bad_arguments_are_named(what: str, kwargs: dict[str, Any], error: type[Exception],
                                 message: str) -> None:
    args = dict(kwargs)
    with pytest.raises(error, match=message):
        ops.rope_neox(args.pop("query"), args.pop("key"), args.pop("positions"), **args)


def test_in_place(device: Device, rng: np.random.Generator) -> None:
    """out= the inputs themselves rotates in place (vLLM's form); any other overlap of an
    output with an input is refused, naming the output."""
    q, k, q_dev, k_dev = _inputs(device, rng, "bf16", Shape(3, 2, 1, 32, 16))
    assert k is not None and k_dev is not None
    positions = np.array([0, 5, 2])
    for _ in range(2):  # planned, then from the plan
        q_dev, k_dev = device.array(q, "bf16"), device.array(k, "bf16")
        q_out, k_out = ops.rope_neox(q_dev, k_dev, device.array(positions), max_position=8,
                                     rotary_dim=16, out=(q_dev, k_dev))
        assert q_out is q_dev and k_out is k_dev
        cache = ops.rope_cache("neox", rotary_dim=16, like=q_dev, max_position=8,
                               base=10000.0).numpy()
        how = How("neox", "bf16", 16)
        assert _check(q_dev.numpy(), q, cache, positions, how) == ""
        assert _check(k_dev.numpy(), k, cache, positions, how) == ""
    shifted = q_dev.view(q_dev.shape, q_dev.strides, offset=1)
    with pytest.raises(ValueError, match="argument 'out\\[0\\]' overlaps argument 'query'"):
        ops.rope_neox(q_dev, k_dev, device.array(positions), max_position=8,
                      out=(shifted, None))
    with pytest.raises(ValueError, match="argument 'out\\[1\\]'"):
        ops.rope_neox(q_dev, k_dev, device.array(positions), max_position=8,
                      out=(device.empty(q.shape, "bf16"), q_dev))


def test_variant_parameters_are_checked() -> None:
    q = np.zeros((1, 1, 8), np.float32)
    with pytest.raises(TypeError, match="argument 'scaling_factor'"):
        ops.rope_yarn(q, q, np.zeros(1, np.int64), original_max_position=64)
    with pytest.raises(ValueError, match="argument 'short_factor' has 3 factors"):
        ops.rope_longrope(q, q, np.zeros(1, np.int64), short_factor=[1.0] * 3,
                          long_factor=[1.0] * 4, original_max_position=4, max_position=8)
    with pytest.raises(TypeError, match="rope_cache\\('llama31'\\)"):
        ops.rope_cache("llama31", rotary_dim=8, max_position=8)
    with pytest.raises(ValueError, match="unknown RoPE variant 'xpos'"):
        ops.rope_cache("xpos", rotary_dim=8)


# ------------------------------------------------------------------ the kernels


def _kernel_ptx(device: Device, rng: np.random.Generator, fn: Any, dtype: str) -> str:
    _, _, q_dev, k_dev = _inputs(device, rng, dtype, Shape(3, 32, 8, 128, 128))
    fn(q_dev, k_dev, device.array(np.array([0, 5, 2])), max_position=16)
    program = tile_mlir.compile(device.launches[-1], name="rope")
    assert program.cubin["kernels"][:4] == b"\x7fELF"
    ptx: str = program.ptx["kernels"]
    return ptx


def test_neox_kernel_uses_16_byte_accesses_and_no_barriers(
        device: Device, rng: np.random.Generator) -> None:
    """The halves of every head and the cache row are read with 16-byte non-coherent
    loads and written with 16-byte stores; no op waits for another (each output region
    is written through its own pointer argument)."""
    ptx = _kernel_ptx(device, rng, ops.rope_neox, "bf16")
    assert "bar.sync" not in ptx and "barrier" not in ptx
    assert re.search(r"ld\.global\.nc\.v4\.b32", ptx)
    assert re.search(r"st\.global\.v4\.b32", ptx)
    assert not re.search(r"ld\.global\.nc\.b16|st\.global\.b16", ptx)


def test_gptj_kernel_has_no_barriers(device: Device, rng: np.random.Generator) -> None:
    ptx = _kernel_ptx(device, rng, ops.rope_non_neox, "f16")
    assert "bar.sync" not in ptx
    assert re.search(r"ld\.global\.nc", ptx)


def test_in_place_in_a_packed_qkv(device: Device, rng: np.random.Generator) -> None:
    """vLLM's in-place RoPE on the query and key views of one packed qkv buffer: their
    byte ranges interleave without sharing a byte, which is allowed (as torch allows it);
    the value heads stay untouched."""
    tokens, heads, key_heads, head_dim = 4, 2, 1, 16
    width = heads + 2 * key_heads
    qkv = rng.standard_normal((tokens, width, head_dim)).astype(np.float32)
    buffer = device.array(qkv, offset=2)
    strides = (width * head_dim, head_dim, 1)
    q = buffer.view((tokens, heads, head_dim), strides)
    k = buffer.view((tokens, key_heads, head_dim), strides, heads * head_dim)
    positions = device.array(np.array([1, 0, 3, 2]))
    want_q, want_k = (a.numpy() for a in ops.rope_neox(
        device.array(qkv[:, :heads].copy()), device.array(qkv[:, heads:heads + 1].copy()),
        positions, max_position=4))
    assert ops.rope_neox(q, k, positions, max_position=4, out=(q, k)) == (q, k)
    np.testing.assert_array_equal(q.numpy(), want_q)
    np.testing.assert_array_equal(k.numpy(), want_k)
    np.testing.assert_array_equal(buffer.numpy()[:, heads + 1:], qkv[:, heads + 1:])
