"""RoPE: rotary position embeddings of query and key, seed 004's five variants.

    q, k = ops.rope_neox(query, key, positions)              # base 10000, rotary_dim = head_dim
    q, k = ops.rope_llama31(query, key, positions, base=500000.0)
    q, k = ops.rope_neox(query, key, positions, cos_sin_cache=cache)   # vLLM's cache

query (tokens, heads, head_dim) and key (tokens, key_heads, head_dim) (fewer
heads: GQA; or None), positions (tokens,) of int32/int64. Each pair of a
head's first rotary_dim dims is rotated by the angle position * inv_freq[i]:
neox pairs (x[i], x[i + rotary_dim/2]), GPT-J ("non_neox") pairs (x[2i],
x[2i+1]); the dims past rotary_dim pass through. The angles come from a
cos/sin cache in vLLM's layout, (max_position, rotary_dim): cos in the first
half of a row, sin in the second; given, or computed by `rope_cache` from the
variant's frequencies (vLLM's formulas, in float64 on the host, once per
parameter set, then rounded to the query's dtype as vLLM holds its cache).

The functions follow vLLM's RotaryEmbedding (neox, non_neox),
Llama3RotaryEmbedding (llama31), YaRNScalingRotaryEmbedding (yarn) and
Phi3LongRoPEScaledRotaryEmbedding (longrope); docs/ops.md lists the
differences. Results are new arrays, or out=(query_out, key_out); out= the inputs
themselves rotates in place (through a copy of the inputs: the kernel reads a pair's
both halves after writing one).

The functions hold the semantics (checks, the cache, the outputs); the launch is the
spine's (plan.py), the kernel programs/rope.py's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np

from tile_mlir.contract import ACCESS_BYTES
from tile_mlir.dtypes import DTYPES, promote_types
from tile_mlir.ops import args, coalesce, entry, kernels
from tile_mlir.ops.args import Array, torch_name
from tile_mlir.ops.elementwise import In, apply
from tile_mlir.ops.plan import Builder, Value
from tile_mlir.ops.programs.elementwise import ArraySpec
from tile_mlir.ops.programs.rope import RopeProgram, RopeSignature, parts
from tile_mlir.runtime import driver

__all__ = ["rope_cache", "rope_llama31", "rope_longrope", "rope_neox", "rope_non_neox",
           "rope_yarn"]

DTYPES_IN = ("f32", "f16", "bf16")
"""The query/key dtypes (computed in f32)."""
POSITION_DTYPES = ("i32", "i64")

# ----------------------------------------------------------------- frequencies


def _exponents(rotary_dim: int) -> np.ndarray:
    """2i / rotary_dim for the rotary_dim/2 pairs."""
    return np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim


def default_inv_freq(rotary_dim: int, base: float) -> np.ndarray:
    """RotaryEmbedding: 1 / base^(2i/rotary_dim)."""
    result: np.ndarray = 1.0 / np.power(float(base), _exponents(rotary_dim))
    return result


def llama31_inv_freq(rotary_dim: int, *, base: float, scaling_factor: float,
                     low_freq_factor: float, high_freq_factor: float,
                     original_max_position: int) -> np.ndarray:
    """Llama 3.1: wavelengths shorter than original/high_freq_factor keep their frequency,
    those longer than original/low_freq_factor are slowed by scaling_factor, and the band
    between blends the two linearly in original/wavelength."""
    inv = default_inv_freq(rotary_dim, base)
    wavelength = 2 * math.pi / inv
    if low_freq_factor != high_freq_factor:
        smooth = (original_max_position / wavelength - low_freq_factor) / \
            (high_freq_factor - low_freq_factor)
    else:
        smooth = np.zeros_like(inv)
    blended = (1 - smooth) * inv / scaling_factor + smooth * inv
    slowed = np.where(wavelength > original_max_position / low_freq_factor,
                      inv / scaling_factor, blended)
    result: np.ndarray = np.where(wavelength < original_max_position / high_freq_factor,
                                  inv, slowed)
    return result


def yarn_correction_range(rotary_dim: int, *, base: float, original_max_position: int,
                          beta_fast: float, beta_slow: float, truncate: bool
                          ) -> tuple[float, float]:
    """The pairs between which YaRN ramps from extrapolation to interpolation: the dim
    at which a pair turns `beta` times over the original context, clamped to the dims."""
    def dim(rotations: float) -> float:
        turns = original_max_position / (rotations * 2 * math.pi)
        return rotary_dim * math.log(turns) / (2 * math.log(base))

    low, high = dim(beta_fast), dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    return max(low, 0), min(high, rotary_dim - 1)


def yarn_mscale(scaling_factor: float) -> float:
    return 1.0 if scaling_factor <= 1 else 0.1 * math.log(scaling_factor) + 1.0


def yarn_inv_freq(rotary_dim: int, *, base: float, scaling_factor: float,
                  original_max_position: int, beta_fast: float, beta_slow: float,
                  truncate: bool) -> np.ndarray:
    """YaRN: the pairs below the correction range extrapolate (keep their frequency),
    those above interpolate (frequency / scaling_factor), a linear ramp between."""
    powers = np.power(float(base), _exponents(rotary_dim))
    low, high = yarn_correction_range(rotary_dim, base=base,
                                      original_max_position=original_max_position,
                                      beta_fast=beta_fast, beta_slow=beta_slow,
                                      truncate=truncate)
    if low == high:
        high += 0.001  # vLLM's guard against a zero-width ramp
    ramp = np.clip((np.arange(rotary_dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    keep = 1 - ramp
    result: np.ndarray = (1 / (scaling_factor * powers)) * (1 - keep) + (1 / powers) * keep
    return result


def longrope_mscale(max_position: int, original_max_position: int) -> float:
    scale = max_position / original_max_position
    if scale <= 1.0:
        return 1.0
    return math.sqrt(1 + math.log(scale) / math.log(original_max_position))


def _table(inv_freq: np.ndarray, rows: int, mscale: float = 1.0) -> np.ndarray:
    """cos and sin of position * inv_freq, rows 0 .. rows-1, times mscale."""
    angles = np.outer(np.arange(rows, dtype=np.float64), inv_freq)
    return np.concatenate([np.cos(angles) * mscale, np.sin(angles) * mscale], axis=1)


def _plain_table(rotary_dim: int, *, max_position: int, base: float) -> np.ndarray:
    return _table(default_inv_freq(rotary_dim, base), max_position)


def _llama31_table(rotary_dim: int, *, max_position: int, base: float, scaling_factor: float,
                   low_freq_factor: float, high_freq_factor: float,
                   original_max_position: int) -> np.ndarray:
    inv = llama31_inv_freq(rotary_dim, base=base, scaling_factor=scaling_factor,
                           low_freq_factor=low_freq_factor, high_freq_factor=high_freq_factor,
                           original_max_position=original_max_position)
    return _table(inv, max_position)


def _yarn_table(rotary_dim: int, *, base: float, scaling_factor: float,
                original_max_position: int, beta_fast: float = 32.0, beta_slow: float = 1.0,
                attention_factor: float | None = None, truncate: bool = True,
                max_position: int | None = None) -> np.ndarray:
    rows = math.ceil(original_max_position * scaling_factor)
    rows = max(rows, max_position or 0)
    mscale = yarn_mscale(scaling_factor) if attention_factor is None else attention_factor
    inv = yarn_inv_freq(rotary_dim, base=base, scaling_factor=scaling_factor,
                        original_max_position=original_max_position, beta_fast=beta_fast,
                        beta_slow=beta_slow, truncate=truncate)
    return _table(inv, rows, mscale)


def _longrope_table(rotary_dim: int, *, base: float, short_factor: tuple[float, ...],
                    long_factor: tuple[float, ...], original_max_position: int,
                    max_position: int, short_mscale: float | None = None,
                    long_mscale: float | None = None) -> np.ndarray:
    for name, factors in (("short_factor", short_factor), ("long_factor", long_factor)):
        if len(factors) != rotary_dim // 2:
            raise ValueError(f"argument '{name}' has {len(factors)} factors, rotary_dim "
                             f"{rotary_dim} needs {rotary_dim // 2}")
    default = longrope_mscale(max_position, original_max_position)
    powers = np.power(float(base), _exponents(rotary_dim))
    short = _table(1 / (np.asarray(short_factor, np.float64) * powers), original_max_position,
                   default if short_mscale is None else short_mscale)
    long = _table(1 / (np.asarray(long_factor, np.float64) * powers), max_position,
                  default if long_mscale is None else long_mscale)
    return np.concatenate([short, long], axis=0)


_TABLES: dict[str, Callable[..., np.ndarray]] = {
    "neox": _plain_table, "non_neox": _plain_table, "llama31": _llama31_table,
    "yarn": _yarn_table, "longrope": _longrope_table,
}
"""The cache builder of each variant (neox and non_neox share theirs)."""


@lru_cache(maxsize=8)
def _host_table(variant: str, params: tuple[tuple[str, Any], ...]) -> np.ndarray:
    table = _TABLES[variant](**dict(params))
    table.flags.writeable = False
    return table


_on_device: dict[tuple[Any, ...], Any] = {}
"""Caches already placed on a device, by (variant, parameters, dtype, kind, device)."""
_ON_DEVICE_LIMIT = 16


def _frozen(params: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((k, tuple(v) if isinstance(v, list | tuple) else v)
                        for k, v in params.items()))


def rope_cache(variant: str = "neox", *, rotary_dim: int, like: Any = None,
               dtype: str | None = None, **params: Any) -> Any:
    """rope_cache(variant="neox", *, rotary_dim, like=None, dtype=None, **params) -> array

    The cos/sin cache of a variant, in vLLM's layout: (rows, rotary_dim), cos of
    position * inv_freq in the first half of each row, sin in the second (times the
    variant's mscale). Computed in float64 NumPy on the host, once per parameter set.

    Without `like`: the float64 NumPy array (read-only). With `like` (an array): a copy
    of its kind and on its device, in `dtype` (a tile_mlir dtype name such as "bf16"; by
    default like's), kept for later calls with the same parameters.

    Parameters per variant (vLLM's names; rows is the cache's length):
      neox, non_neox  max_position, base=10000.0                  rows = max_position
      llama31         max_position, base, scaling_factor, low_freq_factor,
                      high_freq_factor, original_max_position     rows = max_position
      yarn            base, scaling_factor, original_max_position, beta_fast=32,
                      beta_slow=1, attention_factor=None (0.1 ln(s) + 1),
                      truncate=True, max_position=None    rows = ceil(original * s)
      longrope        base, short_factor, long_factor (rotary_dim/2 each),
                      original_max_position, max_position, short_mscale=None,
                      long_mscale=None    rows = original + max_position (short, long)
    """
    if variant not in _TABLES:
        raise ValueError(f"unknown RoPE variant {variant!r} (variants: {', '.join(_TABLES)})")
    if rotary_dim <= 0 or rotary_dim % 2:
        raise ValueError(f"argument 'rotary_dim' must be a positive even number, got "
                         f"{rotary_dim}")
    frozen = _frozen({"rotary_dim": rotary_dim, **params})
    try:
        table = _host_table(variant, frozen)
    except TypeError as e:  # an unknown or missing parameter
        raise TypeError(f"rope_cache({variant!r}): {e}") from None
    if like is None:
        return table
    return _placed(variant, frozen, table, args.array(like, "like", "rope_cache"), dtype)


def _placed(variant: str, frozen: tuple[tuple[str, Any], ...], table: np.ndarray, like: Array,
            dtype: str | None) -> Any:
    """The table in `dtype` of like's kind on like's device, placed once (kept)."""
    dtype = dtype or like.dtype
    key = (variant, frozen, dtype, like.kind, like.device)
    placed = _on_device.get(key)
    if placed is None:
        kernels.check_not_capturing("RoPE's cos/sin cache would be copied to the device")
        with np.errstate(over="ignore"):
            host = table.astype(DTYPES[dtype].np_dtype())
        placed = args.from_host(host, like)
        if len(_on_device) >= _ON_DEVICE_LIMIT:
            _on_device.pop(next(iter(_on_device)))
        _on_device[key] = placed
    return placed


# ------------------------------------------------------------------ arguments


@dataclass(frozen=True)
class _Region:
    """The rows of the cache a call uses: from `first`, `rows` of them."""

    first: int
    rows: int | None  # None: to the cache's end


def _array(value: Any, name: str) -> Array:
    if not isinstance(value, Array):
        raise TypeError(f"argument '{name}' must be an array, got a number")
    return value


def _check_qk(query: Array, key: Array | None) -> None:
    if len(query.shape) != 3:
        raise ValueError(f"argument 'query' must be (tokens, heads, head_dim), got shape "
                         f"{query.shape}")
    if query.dtype not in DTYPES_IN:
        raise TypeError(f"argument 'query' is {torch_name(query.dtype)}; RoPE takes "
                        f"{', '.join(torch_name(d) for d in DTYPES_IN)}")
    if key is not None:
        if len(key.shape) != 3:
            raise ValueError(f"argument 'key' must be (tokens, key_heads, head_dim), got "
                             f"shape {key.shape}")
        if key.shape[0] != query.shape[0] or key.shape[2] != query.shape[2]:
            raise ValueError(f"argument 'key' has shape {key.shape}, query {query.shape}: "
                             "their tokens and head_dim must agree")
        if key.dtype != query.dtype:
            raise TypeError(f"argument 'key' is {torch_name(key.dtype)}, query "
                            f"{torch_name(query.dtype)}: they must agree")
    for ref in (query, key):
        if ref is not None and ref.shape[2] > 1 and ref.strides[2] != 1:
            raise ValueError(f"argument '{ref.name}' must be contiguous along head_dim "
                             f"(stride 1), got strides {ref.strides}")


def _check_positions(positions: Array, tokens: int) -> None:
    if positions.dtype not in POSITION_DTYPES:
        raise TypeError(f"argument 'positions' is {torch_name(positions.dtype)}; it must "
                        "be int32 or int64")
    if positions.shape != (tokens,):
        raise ValueError(f"argument 'positions' must be ({tokens},), one per token of "
                         f"query, got shape {positions.shape}")


def _rotary_dim(query: Array, rotary_dim: int | None, cache_width: int | None) -> int:
    head_dim = query.shape[2]
    if rotary_dim is None:
        rotary_dim = cache_width if cache_width is not None else head_dim
    if not isinstance(rotary_dim, int) or isinstance(rotary_dim, bool) or rotary_dim <= 0 or \
            rotary_dim % 2 or rotary_dim > head_dim:
        raise ValueError(f"argument 'rotary_dim' must be even and in [2, head_dim = "
                         f"{head_dim}], got {rotary_dim}")
    if cache_width is not None and cache_width != rotary_dim:
        raise ValueError(f"argument 'cos_sin_cache' has rows of {cache_width}, rotary_dim "
                         f"is {rotary_dim}: a row is rotary_dim/2 cos then rotary_dim/2 sin")
    return rotary_dim


def _check_cache(cache: Array, query: Array) -> None:
    if len(cache.shape) != 2:
        raise ValueError(f"argument 'cos_sin_cache' must be (max_position, rotary_dim), "
                         f"got shape {cache.shape}")
    if not DTYPES[cache.dtype].is_float or \
            promote_types(cache.dtype, query.dtype) != query.dtype:
        raise TypeError(f"argument 'cos_sin_cache' is {torch_name(cache.dtype)}, query "
                        f"{torch_name(query.dtype)}: pass it in query's dtype (as vLLM "
                        "casts its cache)")
    if cache.shape[1] > 1 and cache.strides[1] != 1:
        raise ValueError("argument 'cos_sin_cache' must be contiguous along its rows "
                         f"(stride 1), got strides {cache.strides}")


def _check_range(positions: Array, rows: int) -> None:
    """Host positions are checked (device ones are not: that would wait for the GPU; the
    kernel writes NaN for a token whose position is outside the cache)."""
    host = positions.host if positions.host is not None else \
        positions.obj if positions.kind == "numpy" else None
    if host is None or not positions.numel:
        return
    values = np.asarray(host)
    low, high = int(values.min()), int(values.max())
    if low < 0 or high >= rows:
        bad = low if low < 0 else high
        raise ValueError(f"argument 'positions' has {bad}, outside the cache's "
                         f"[0, {rows}) positions")


def _output(b: Builder, name: str, given: Array | None, like: Array,
            inputs: Sequence[Array]) -> tuple[Array, Array]:
    """(where to write, what to read): a new output, or out[i]; out[i] the very same view
    as its input rotates in place, from a copy of the input (the kernel reads each pair's
    two halves after writing the first)."""
    if given is None:
        return b.output(like.shape, like.dtype, name), like
    if given.shape != like.shape or given.dtype != like.dtype:
        raise ValueError(f"argument '{name}' must be {torch_name(like.dtype)} of shape "
                         f"{like.shape}, got {torch_name(given.dtype)} of shape {given.shape}")
    if given.shape[2] > 1 and given.strides[2] != 1:
        raise ValueError(f"argument '{name}' must be contiguous along head_dim")
    args.check_distinct(given, "RoPE")
    same = args.check_overlap(given, inputs, "RoPE")
    for other in inputs:
        if not any(other is s for s in same):
            b.disjoint(given, other, "RoPE")
    if not same:
        return given, like
    if any(other is not like for other in same):
        raise ValueError(f"RoPE: argument '{name}' is the same view as argument "
                         f"'{same[0].name}': each output needs memory of its own")
    copy = apply(b, "cast", [In(like)], b.temporary(like.shape, like.dtype),
                 result=like.dtype, what="RoPE")
    return given, copy


# ------------------------------------------------------------------ launch


SPREAD_CTAS_PER_SM = 4
"""A spread kernel while its CTAs (tokens x ops of a token) are at most this many an SM:
one wave (its CTAs of 256 or 512 threads, 4 an SM, fit an SM's 2048 threads)."""


def _threads(heads: int, head_dim: int, rotary_dim: int, dtype: str, style: str, *,
             spread: bool) -> int:
    """Enough threads for one access each to the largest op of a token (a power of two,
    32 to 256, or 512 for a spread kernel's one op): 16-byte vectors along the neox
    halves and (a spread kernel's op) the dims past rotary_dim, elements along GPT-J's
    pairs. A CTA per token stays at 256 (GPT-J's 512 pairs a token at 512 threads: 32
    to 1024 tokens 2-7% faster, 4096 and 16384 tokens 3-4% slower, on an H100)."""
    vector = ACCESS_BYTES // DTYPES[dtype].bytes
    accesses = max(1, heads * (rotary_dim // 2) // (vector if style == "neox" else 1))
    if spread:
        accesses = max(accesses, -(-heads * (head_dim - rotary_dim) // vector))
    return min(512 if spread else 256, max(32, 1 << (accesses - 1).bit_length()))


def _spec(array: Array) -> ArraySpec:
    """An array's part of the signature. A first dim of stride 0 (an expanded query, key
    or cache: every token or row the same) takes the element-offset argument even when
    its offset is 0: the program views a token's (or row's) piece at an offset that the
    dynamic index moves, which that stride would make a constant."""
    offset = bool(array.offset) or (len(array.strides) > 1 and array.strides[0] == 0)
    return ArraySpec(array.dtype, coalesce.stride_classes(array.strides), offset)


def _values(b: Builder, program: RopeProgram, arrays: dict[str, Array], tokens: int,
            rows: int) -> list[Value]:
    values: list[Value] = []
    for role in program.roles():
        if role[0] == "tokens":
            values.append(tokens)
        elif role[0] == "max_position":
            values.append(rows)
        elif role[0] == "pointer":
            values.append(b.pointer(arrays[role[1]]))
        elif role[0] == "stride":
            values.append(arrays[role[1]].strides[int(role[2])])
        else:
            values.append(arrays[role[1]].offset)
    return values


def _launch(b: Builder, style: str, arrays: dict[str, Array], rotary_dim: int) -> None:
    """The kernel's signature and launch: a CTA per token, or (a spread kernel) a CTA per
    op of a token where those CTAs make one wave (SPREAD_CTAS_PER_SM): with one CTA per
    token a few tokens' ops ran one after another, each waiting for its loads, on a few
    of the SMs. Measured on an H100 (bf16, bench/rope.py's models, us per call, spread
    against a CTA per token): GPT-J's 1 token 4.77 / 5.57, 32 tokens 4.86 / 5.63, 64
    5.34 / 5.66, 128 (768 CTAs) 6.16 / 5.98; Llama-3-8B's 32 tokens 4.74 / 5.18, 128 5.18
    / 5.34, 256 (1024 CTAs) 6.18 / 5.89."""
    q, k = arrays["query"], arrays.get("key")
    tokens, rows = q.shape[0], arrays["cache"].shape[0]
    forward = all(s >= 0 for a in arrays.values() for s in a.strides)  # see coalesce.py
    bits = 32 if forward and args.fits_32_bits(args.reach(a) + 1 for a in arrays.values()) \
        else 64
    heads = max(q.shape[1], k.shape[1] if k is not None else 0)
    sig = RopeSignature(
        style, _spec(q), _spec(k) if k is not None else None, _spec(arrays["query_out"]),
        _spec(arrays["key_out"]) if k is not None else None, _spec(arrays["cache"]),
        _spec(arrays["positions"]), heads=q.shape[1], key_heads=k.shape[1] if k else 0,
        head_dim=q.shape[2], rotary_dim=rotary_dim,
        threads=_threads(heads, q.shape[2], rotary_dim, q.dtype, style, spread=False),
        index_bits=bits)
    ops = len(parts(sig))
    if tokens * ops <= SPREAD_CTAS_PER_SM * driver.device_sms(b.device):
        sig = replace(sig, spread=True, threads=_threads(heads, q.shape[2], rotary_dim,
                                                         q.dtype, style, spread=True))
    program = RopeProgram(sig)
    grid = (-(-tokens // sig.tokens_per_cta), ops if sig.spread else 1, 1)
    b.launch(program, grid, _values(b, program, arrays, tokens, rows))


def _cache_array(b: Builder, given: Any, query: Array, rotary_dim: int,
                 table: tuple[str, dict[str, Any]]) -> Array:
    """The cache this call reads: given, or the variant's, placed once and held by the
    plan (a constant pointer)."""
    if given is not None:
        return _array(given, "cos_sin_cache")
    variant, params = table
    like = query.obj if query.obj is not None else query
    placed = rope_cache(variant, rotary_dim=rotary_dim, like=like, dtype=query.dtype,
                        **params)
    described = args.describe(placed, "cos_sin_cache")
    assert described is not None
    return b.constant(placed, described)


def _rope(b: Builder, style: str, query: Any, key: Any, positions: Any, *, cos_sin_cache: Any,
          rotary_dim: int | None, out: tuple[Array | None, Array | None] | None,
          table: tuple[str, dict[str, Any]], region: _Region = _Region(0, None)) -> str:
    """Check the arguments, find or make the cache, plan the outputs and the launch."""
    q = _array(query, "query")
    k = None if key is None else _array(key, "key")
    p = _array(positions, "positions")
    given = None if cos_sin_cache is None else _array(cos_sin_cache, "cos_sin_cache")
    _check_qk(q, k)
    _check_positions(p, q.shape[0])
    width = given.shape[1] if given is not None and len(given.shape) == 2 else None
    rotary = _rotary_dim(q, rotary_dim, width)
    cache = _cache_array(b, given, q, rotary, table)
    _check_cache(cache, q)
    b.place([q, p, cache, *([k] if k is not None else [])])
    rows = cache.shape[0] - region.first if region.rows is None else region.rows
    if region.first + rows > cache.shape[0]:
        raise ValueError(f"argument 'cos_sin_cache' has {cache.shape[0]} rows; this call "
                         f"uses rows {region.first} to {region.first + rows - 1}")
    _check_range(p, rows)
    arrays = {"query": q, "positions": p,
              "cache": cache.view((rows, rotary), (cache.strides[0], 1),
                                  region.first * cache.strides[0])}
    results = _outputs(b, arrays, k, out)
    if q.shape[0] and (q.numel or (k is not None and k.numel)):
        _launch(b, style, arrays, rotary)
    return results


def _outputs(b: Builder, arrays: dict[str, Array], k: Array | None,
             out: tuple[Array | None, Array | None] | None) -> str:
    """The outputs into `arrays` (query_out, key_out; the inputs read, copied where the
    outputs are the inputs); the result's expression."""
    q = arrays["query"]
    q_given, k_given = (None, None) if out is None else out
    if out is not None and k is None and k_given is not None:
        raise ValueError("argument 'out[1]' must be None when key is None")
    inputs = [q, arrays["positions"], arrays["cache"], *([k] if k is not None else [])]
    arrays["query_out"], arrays["query"] = _output(b, "out[0]", q_given, q, inputs)
    if k is None:
        return f"({b.object_of(arrays['query_out'])}, None)"
    arrays["key_out"], arrays["key"] = _output(b, "out[1]", k_given, k,
                                               [*inputs, arrays["query_out"]])
    return f"({b.object_of(arrays['query_out'])}, {b.object_of(arrays['key_out'])})"


# ------------------------------------------------------------------ the ops

ROLES = {"query": "array", "key": "optional", "positions": "array",
         "cos_sin_cache": "optional", "out": "outs"}
"""Every other parameter (rotary_dim, the variant's) is part of the key: the cache is
made from them once."""


def _style(is_neox: bool) -> str:
    return "neox" if is_neox else "gptj"


@entry.op(ROLES)
def rope_neox(b: Builder, query: Any, key: Any, positions: Any, *, cos_sin_cache: Any = None,
              rotary_dim: int | None = None, base: float = 10000.0, max_position: int = 8192,
              out: Any = None) -> str:
    """rope_neox(query, key, positions, *, cos_sin_cache=None, rotary_dim=None,
    base=10000.0, max_position=8192, out=None) -> (query_out, key_out)

    RoPE with neox pairs (x[i], x[i + rotary_dim/2]). The cache: `cos_sin_cache`
    (vLLM's layout), else rope_cache("neox", rotary_dim, max_position, base) in query's
    dtype. rotary_dim: the cache's width, else head_dim. `out`: (query_out, key_out) to
    write into (the inputs themselves: in place)."""
    return _rope(b, "neox", query, key, positions, cos_sin_cache=cos_sin_cache,
                 rotary_dim=rotary_dim, out=out,
                 table=("neox", {"base": base, "max_position": max_position}))


@entry.op(ROLES)
def rope_non_neox(b: Builder, query: Any, key: Any, positions: Any, *,
                  cos_sin_cache: Any = None, rotary_dim: int | None = None,
                  base: float = 10000.0, max_position: int = 8192, out: Any = None) -> str:
    """rope_non_neox(query, key, positions, *, cos_sin_cache=None, rotary_dim=None,
    base=10000.0, max_position=8192, out=None) -> (query_out, key_out)

    RoPE with GPT-J's interleaved pairs (x[2i], x[2i+1]); otherwise as rope_neox."""
    return _rope(b, "gptj", query, key, positions, cos_sin_cache=cos_sin_cache,
                 rotary_dim=rotary_dim, out=out,
                 table=("non_neox", {"base": base, "max_position": max_position}))


@entry.op(ROLES)
def rope_llama31(b: Builder, query: Any, key: Any, positions: Any, *, cos_sin_cache: Any = None,
                 rotary_dim: int | None = None, base: float = 500000.0,
                 scaling_factor: float = 8.0, low_freq_factor: float = 1.0,
                 high_freq_factor: float = 4.0, original_max_position: int = 8192,
                 max_position: int = 131072, is_neox: bool = True, out: Any = None) -> str:
    """rope_llama31(query, key, positions, *, cos_sin_cache=None, rotary_dim=None,
    base=500000.0, scaling_factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
    original_max_position=8192, max_position=131072, is_neox=True, out=None)
    -> (query_out, key_out)

    RoPE with Llama 3.1's frequency scaling (defaults: Llama 3.1's configuration).
    The scaling parameters make the cache when `cos_sin_cache` is not given."""
    params = {"base": base, "max_position": max_position, "scaling_factor": scaling_factor,
              "low_freq_factor": low_freq_factor, "high_freq_factor": high_freq_factor,
              "original_max_position": original_max_position}
    return _rope(b, _style(is_neox), query, key, positions, cos_sin_cache=cos_sin_cache,
                 rotary_dim=rotary_dim, out=out, table=("llama31", params))


@entry.op(ROLES)
def rope_yarn(b: Builder, query: Any, key: Any, positions: Any, *, cos_sin_cache: Any = None,
              rotary_dim: int | None = None, base: float = 10000.0,
              scaling_factor: float | None = None, original_max_position: int | None = None,
              beta_fast: float = 32.0, beta_slow: float = 1.0,
              attention_factor: float | None = None, truncate: bool = True,
              max_position: int | None = None, is_neox: bool = True, out: Any = None) -> str:
    """rope_yarn(query, key, positions, *, cos_sin_cache=None, rotary_dim=None,
    base=10000.0, scaling_factor, original_max_position, beta_fast=32.0, beta_slow=1.0,
    attention_factor=None, truncate=True, max_position=None, is_neox=True, out=None)
    -> (query_out, key_out)

    RoPE with YaRN's frequencies and magnitude scale. Without `cos_sin_cache`,
    scaling_factor and original_max_position (the model's original context) are needed;
    the cache has ceil(original_max_position * scaling_factor) rows (at least
    max_position)."""
    if cos_sin_cache is None:
        for name, value in (("scaling_factor", scaling_factor),
                            ("original_max_position", original_max_position)):
            if value is None:
                raise TypeError(f"rope_yarn needs argument '{name}' (or a cos_sin_cache)")
    params = {"base": base, "scaling_factor": scaling_factor,
              "original_max_position": original_max_position, "beta_fast": beta_fast,
              "beta_slow": beta_slow, "attention_factor": attention_factor,
              "truncate": truncate, "max_position": max_position}
    return _rope(b, _style(is_neox), query, key, positions, cos_sin_cache=cos_sin_cache,
                 rotary_dim=rotary_dim, out=out, table=("yarn", params))


@entry.op(ROLES)
def rope_longrope(b: Builder, query: Any, key: Any, positions: Any, *,
                  original_max_position: int, max_position: int,
                  short_factor: Sequence[float] | None = None,
                  long_factor: Sequence[float] | None = None, cos_sin_cache: Any = None,
                  rotary_dim: int | None = None, base: float = 10000.0,
                  short_mscale: float | None = None, long_mscale: float | None = None,
                  long: bool | None = None, out: Any = None) -> str:
    """rope_longrope(query, key, positions, *, original_max_position, max_position,
    short_factor=None, long_factor=None, cos_sin_cache=None, rotary_dim=None,
    base=10000.0, short_mscale=None, long_mscale=None, long=None, out=None)
    -> (query_out, key_out)

    RoPE with LongRoPE's per-pair rescale factors (Phi-3), neox pairs only. The cache
    holds the short factors' original_max_position rows, then the long factors'
    max_position rows (vLLM's long_short_cos_sin_cache); `long` (by default: whether
    max_position > original_max_position, vLLM's choice from max_model_len) picks the
    long rows for every token, else the short ones."""
    if long is None:
        long = max_position > original_max_position
    if cos_sin_cache is None:
        for name, value in (("short_factor", short_factor), ("long_factor", long_factor)):
            if value is None:
                raise TypeError(f"rope_longrope needs argument '{name}' (or a cos_sin_cache)")
    params = {"base": base, "short_factor": short_factor, "long_factor": long_factor,
              "original_max_position": original_max_position, "max_position": max_position,
              "short_mscale": short_mscale, "long_mscale": long_mscale}
    region = _Region(original_max_position, max_position) if long else \
        _Region(0, original_max_position)
    return _rope(b, "neox", query, key, positions, cos_sin_cache=cos_sin_cache,
                 rotary_dim=rotary_dim, out=out, table=("longrope", params), region=region)
