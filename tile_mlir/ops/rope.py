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
differences. Results are new arrays (out of place): see rope_program.py for
what in place would need.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

import numpy as np

from tile_mlir.dtypes import DTYPES, promote_types
from tile_mlir.ops import _runtime, layout
from tile_mlir.ops._runtime import ArrayRef
from tile_mlir.ops.program import ArraySpec
from tile_mlir.ops.rope_program import Role, RopeSignature, kernel

__all__ = ["rope_cache", "rope_llama31", "rope_longrope", "rope_neox", "rope_non_neox",
           "rope_yarn"]

DTYPES_IN = ("f32", "f16", "bf16")
"""The query/key dtypes (computed in f32)."""
POSITION_DTYPES = ("i32", "i64")
ALIGN = 16

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
    """The cos/sin cache of a variant, in vLLM's layout: (rows, rotary_dim), cos of
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
    ref = _describe(like, "like")
    dtype = dtype or ref.dtype
    key = (variant, frozen, dtype, ref.kind, ref.device)
    placed = _on_device.get(key)
    if placed is None:
        with np.errstate(over="ignore"):
            host = table.astype(DTYPES[dtype].np_dtype())
        placed = _runtime.from_host(host, ref)
        if len(_on_device) >= _ON_DEVICE_LIMIT:
            _on_device.pop(next(iter(_on_device)))
        _on_device[key] = placed
    return placed


# ------------------------------------------------------------------ arguments


def _describe(value: Any, name: str) -> ArrayRef:
    try:
        ref = _runtime.describe(value, f"argument '{name}'")
    except _runtime.UnsupportedArrayError as e:
        raise TypeError(str(e)) from None
    if ref is None:
        raise TypeError(f"argument '{name}' must be an array, got {type(value).__name__}")
    return ref


def _torch_name(dtype: str) -> str:
    return DTYPES[dtype].numpy


@dataclass(frozen=True)
class _Region:
    """The rows of the cache a call uses: from `first`, `rows` of them."""

    first: int
    rows: int | None  # None: to the cache's end


@dataclass(frozen=True)
class _Inputs:
    query: ArrayRef
    key: ArrayRef | None
    positions: ArrayRef
    rotary_dim: int


def _check_qk(query: ArrayRef, key: ArrayRef | None) -> None:
    if len(query.shape) != 3:
        raise ValueError(f"argument 'query' must be (tokens, heads, head_dim), got shape "
                         f"{query.shape}")
    if query.dtype not in DTYPES_IN:
        raise TypeError(f"argument 'query' is {_torch_name(query.dtype)}; RoPE takes "
                        f"{', '.join(_torch_name(d) for d in DTYPES_IN)}")
    if key is not None:
        if len(key.shape) != 3:
            raise ValueError(f"argument 'key' must be (tokens, key_heads, head_dim), got "
                             f"shape {key.shape}")
        if key.shape[0] != query.shape[0] or key.shape[2] != query.shape[2]:
            raise ValueError(f"argument 'key' has shape {key.shape}, query {query.shape}: "
                             "their tokens and head_dim must agree")
        if key.dtype != query.dtype:
            raise TypeError(f"argument 'key' is {_torch_name(key.dtype)}, query "
                            f"{_torch_name(query.dtype)}: they must agree")
    for name, ref in (("query", query), ("key", key)):
        if ref is not None and ref.shape[2] > 1 and ref.strides[2] != 1:
            raise ValueError(f"argument '{name}' must be contiguous along head_dim (stride "
                             f"1), got strides {ref.strides}")


def _check_positions(positions: ArrayRef, tokens: int) -> None:
    if positions.dtype not in POSITION_DTYPES:
        raise TypeError(f"argument 'positions' is {_torch_name(positions.dtype)}; it must "
                        "be int32 or int64")
    if positions.shape != (tokens,):
        raise ValueError(f"argument 'positions' must be ({tokens},), one per token of "
                         f"query, got shape {positions.shape}")


def _inputs(query: Any, key: Any, positions: Any, rotary_dim: int | None,
            cache_width: int | None) -> _Inputs:
    q = _describe(query, "query")
    k = None if key is None else _describe(key, "key")
    p = _describe(positions, "positions")
    _check_qk(q, k)
    _check_positions(p, q.shape[0])
    head_dim = q.shape[2]
    if rotary_dim is None:
        rotary_dim = cache_width if cache_width is not None else head_dim
    if rotary_dim <= 0 or rotary_dim % 2 or rotary_dim > head_dim:
        raise ValueError(f"argument 'rotary_dim' must be even and in [2, head_dim = "
                         f"{head_dim}], got {rotary_dim}")
    if cache_width is not None and cache_width != rotary_dim:
        raise ValueError(f"argument 'cos_sin_cache' has rows of {cache_width}, rotary_dim "
                         f"is {rotary_dim}: a row is rotary_dim/2 cos then rotary_dim/2 sin")
    return _Inputs(q, k, p, rotary_dim)


def _check_cache(cache: ArrayRef, query: ArrayRef) -> None:
    if len(cache.shape) != 2:
        raise ValueError(f"argument 'cos_sin_cache' must be (max_position, rotary_dim), "
                         f"got shape {cache.shape}")
    if not DTYPES[cache.dtype].is_float or \
            promote_types(cache.dtype, query.dtype) != query.dtype:
        raise TypeError(f"argument 'cos_sin_cache' is {_torch_name(cache.dtype)}, query "
                        f"{_torch_name(query.dtype)}: pass it in query's dtype (as vLLM "
                        "casts its cache)")
    if cache.shape[1] > 1 and cache.strides[1] != 1:
        raise ValueError("argument 'cos_sin_cache' must be contiguous along its rows "
                         f"(stride 1), got strides {cache.strides}")


def _check_same_place(refs: Sequence[tuple[str, ArrayRef]]) -> None:
    first_name, first = refs[0]
    for name, ref in refs[1:]:
        if (ref.device is None) != (first.device is None) or ref.device != first.device:
            where = "the host" if ref.device is None else f"cuda:{ref.device}"
            there = "the host" if first.device is None else f"cuda:{first.device}"
            raise ValueError(f"argument '{name}' is on {where}, argument '{first_name}' on "
                             f"{there}")


def _extent(ref: ArrayRef) -> tuple[int, int]:
    """The bytes an array's elements span: [start, end)."""
    size = DTYPES[ref.dtype].bytes
    reach = sum((d - 1) * abs(s) for d, s in zip(ref.shape, ref.strides, strict=True))
    return ref.pointer, ref.pointer + (reach + 1) * size


def _check_out(name: str, out: ArrayRef, like: ArrayRef, inputs: Sequence[tuple[str, ArrayRef]]
               ) -> None:
    if out.shape != like.shape or out.dtype != like.dtype:
        raise ValueError(f"argument '{name}' must be {_torch_name(like.dtype)} of shape "
                         f"{like.shape}, got {_torch_name(out.dtype)} of shape {out.shape}")
    if len(out.shape) == 3 and out.shape[2] > 1 and out.strides[2] != 1:
        raise ValueError(f"argument '{name}' must be contiguous along head_dim")
    if out.device is None:
        return
    start, end = _extent(out)
    for other, ref in inputs:
        if ref.device is None or not ref.numel:
            continue
        other_start, other_end = _extent(ref)
        if start < other_end and other_start < end:
            raise ValueError(f"argument '{name}' overlaps argument '{other}': RoPE runs out "
                             "of place (in place would let a pair's first result overwrite "
                             "what its second reads)")


# ------------------------------------------------------------------ launch


@dataclass(frozen=True)
class _Bound:
    """An array as the kernel takes it: aligned base pointer, element offset, strides."""

    spec: ArraySpec
    base: int
    offset: int
    strides: tuple[int, ...]


def _bind(ref: ArrayRef, pointer: int, strides: tuple[int, ...]) -> _Bound:
    size = DTYPES[ref.dtype].bytes
    misalignment = pointer % ALIGN
    offset = misalignment // size
    return _Bound(ArraySpec(ref.dtype, layout.stride_classes(strides), bool(offset)),
                  pointer - misalignment, offset, strides)


def _threads(heads: int, rotary_dim: int, dtype: str, style: str) -> int:
    """Enough threads for one access each to the largest op of a token (a power of two,
    32 to 256): 16-byte vectors along the neox halves, elements along GPT-J's pairs."""
    vector = 16 // DTYPES[dtype].bytes if style == "neox" else 1
    accesses = max(1, heads * (rotary_dim // 2) // vector)
    return min(256, max(32, 1 << (accesses - 1).bit_length()))


INDEX_LIMIT = 2**31 - 1


def _fits_32_bits(bound: Sequence[tuple[_Bound, tuple[int, ...]]]) -> bool:
    for b, shape in bound:
        reach = b.offset + sum((d - 1) * abs(s) for d, s in zip(shape, b.strides, strict=True))
        if reach + 1 >= INDEX_LIMIT:
            return False
    return True


@cache
def _program(sig: RopeSignature) -> tuple[str, list[Role]]:
    return kernel(sig)


@dataclass
class _Launch:
    style: str
    inputs: _Inputs
    cache: ArrayRef
    region: _Region


def _arguments(roles: Sequence[Role], bound: dict[str, _Bound], tokens: int, rows: int
               ) -> list[Any]:
    args: list[Any] = []
    for role in roles:
        if role[0] == "tokens":
            args.append(tokens)
        elif role[0] == "max_position":
            args.append(rows)
        elif role[0] == "pointer":
            args.append(bound[role[1]].base)
        elif role[0] == "stride":
            args.append(bound[role[1]].strides[int(role[2])])
        else:
            args.append(bound[role[1]].offset)
    return args


def _run(launch: _Launch, outs: tuple[Any, Any]) -> None:
    """Bind the arrays (NumPy ones staged on the device), specialize, launch."""
    q, k = launch.inputs.query, launch.inputs.key
    refs: dict[str, ArrayRef] = {"query": q, "positions": launch.inputs.positions,
                                 "cache": launch.cache}
    out_refs = {"query_out": _describe(outs[0], "out")}
    if k is not None:
        refs["key"] = k
        out_refs["key_out"] = _describe(outs[1], "out")
    staging = _runtime.HostStaging() if q.kind == "numpy" else None
    try:
        pointers: dict[str, tuple[int, tuple[int, ...]]] = {}
        for name, ref in {**refs, **out_refs}.items():
            if staging is None:
                pointers[name] = (ref.pointer, ref.strides)
            elif name.endswith("_out"):
                buffer = staging.allocate(ref.shape, ref.dtype)
                pointers[name] = (int(buffer.ptr), layout.contiguous_strides(ref.shape))
            else:
                pointers[name] = (staging.upload(ref.obj), layout.contiguous_strides(ref.shape))
        _launch(launch, {**refs, **out_refs}, pointers)
        if staging is not None:
            for name, ref in out_refs.items():
                buffer = next(b for b in staging.buffers if int(b.ptr) == pointers[name][0])
                ref.obj[...] = buffer.numpy()
    finally:
        if staging is not None:
            staging.close()


def _launch(launch: _Launch, refs: dict[str, ArrayRef],
            pointers: dict[str, tuple[int, tuple[int, ...]]]) -> None:
    inputs, region = launch.inputs, launch.region
    q, k = inputs.query, inputs.key
    tokens = q.shape[0]
    cache_ref = refs["cache"]
    row_stride = pointers["cache"][1][0]  # a staged (NumPy) cache is contiguous
    first_row = region.first
    rows = (cache_ref.shape[0] - first_row) if region.rows is None else region.rows
    cache_pointer = pointers["cache"][0] + first_row * row_stride * DTYPES[cache_ref.dtype].bytes
    bound = {name: _bind(refs[name], pointer, strides)
             for name, (pointer, strides) in pointers.items() if name != "cache"}
    bound["cache"] = _bind(cache_ref, cache_pointer, (row_stride, 1))
    shapes = {name: refs[name].shape for name in bound}
    shapes["cache"] = (rows, inputs.rotary_dim)
    bits = 32 if _fits_32_bits([(bound[n], shapes[n]) for n in bound]) else 64
    sig = RopeSignature(
        launch.style, bound["query"].spec, bound["key"].spec if k else None,
        bound["query_out"].spec, bound["key_out"].spec if k else None, bound["cache"].spec,
        bound["positions"].spec, heads=q.shape[1], key_heads=k.shape[1] if k else 0,
        head_dim=q.shape[2], rotary_dim=inputs.rotary_dim,
        threads=_threads(max(q.shape[1], k.shape[1] if k else 0), inputs.rotary_dim,
                         q.dtype, launch.style),
        index_bits=bits)
    text, roles = _program(sig)
    device = q.device or 0
    kernel_ = _runtime.kernel(text, device)
    grid = -(-tokens // sig.tokens_per_cta)
    _runtime.launch(kernel_, _arguments(roles, bound, tokens, rows), grid, sig.threads,
                    _runtime.stream(q.kind, device))


def _apply(style: str, query: Any, key: Any, positions: Any, *, cos_sin_cache: Any,
           rotary_dim: int | None, out: Sequence[Any] | None,
           table: tuple[str, dict[str, Any]], region: _Region = _Region(0, None)
           ) -> tuple[Any, Any]:
    """Check the arguments, find or make the cache, allocate, launch."""
    cache_ref = None if cos_sin_cache is None else _describe(cos_sin_cache, "cos_sin_cache")
    inputs = _inputs(query, key, positions, rotary_dim,
                     cache_ref.shape[1] if cache_ref is not None and
                     len(cache_ref.shape) == 2 else None)
    q, k = inputs.query, inputs.key
    if cache_ref is None:
        variant, params = table
        cos_sin_cache = rope_cache(variant, rotary_dim=inputs.rotary_dim, like=query, **params)
        cache_ref = _describe(cos_sin_cache, "cos_sin_cache")
    _check_cache(cache_ref, q)
    placed = [("query", q), ("positions", inputs.positions), ("cos_sin_cache", cache_ref)]
    if k is not None:
        placed.append(("key", k))
    _check_same_place(placed)
    rows = cache_ref.shape[0] - region.first if region.rows is None else region.rows
    if region.first + rows > cache_ref.shape[0]:
        raise ValueError(f"argument 'cos_sin_cache' has {cache_ref.shape[0]} rows; this call "
                         f"uses rows {region.first} to {region.first + rows - 1}")
    if inputs.positions.kind == "numpy" and inputs.positions.numel:
        _check_range(np.asarray(inputs.positions.obj), rows)
    outs = _outputs(q, k, out, placed)
    if q.shape[0] and (q.numel or (k is not None and k.numel)):
        _run(_Launch(style, inputs, cache_ref, region), outs)
    return outs


def _check_range(positions: np.ndarray, rows: int) -> None:
    """Host positions are checked (device ones are not: that would wait for the GPU; the
    kernel writes NaN for a token whose position is outside the cache)."""
    low, high = int(positions.min()), int(positions.max())
    if low < 0 or high >= rows:
        bad = low if low < 0 else high
        raise ValueError(f"argument 'positions' has {bad}, outside the cache's "
                         f"[0, {rows}) positions")


def _outputs(q: ArrayRef, k: ArrayRef | None, out: Sequence[Any] | None,
             inputs: Sequence[tuple[str, ArrayRef]]) -> tuple[Any, Any]:
    if out is None:
        q_out = _runtime.empty(q.shape, q.dtype, q)
        k_out = None if k is None else _runtime.empty(k.shape, k.dtype, k)
        return q_out, k_out
    if not isinstance(out, tuple | list) or len(out) != 2:
        raise TypeError("argument 'out' must be a pair (query_out, key_out)")
    q_out, k_out = out
    _check_out("out[0]", _describe(q_out, "out[0]"), q, inputs)
    if k is None:
        if k_out is not None:
            raise ValueError("argument 'out[1]' must be None when key is None")
    else:
        k_ref = _describe(k_out, "out[1]")
        _check_out("out[1]", k_ref, k, [*inputs, ("out[0]", _describe(q_out, "out[0]"))])
    return q_out, k_out


# ------------------------------------------------------------------ the ops


def _style(is_neox: bool) -> str:
    return "neox" if is_neox else "gptj"


def rope_neox(query: Any, key: Any, positions: Any, *, cos_sin_cache: Any = None,
              rotary_dim: int | None = None, base: float = 10000.0, max_position: int = 8192,
              out: Sequence[Any] | None = None) -> tuple[Any, Any]:
    """RoPE with neox pairs (x[i], x[i + rotary_dim/2]): (query_out, key_out).

    The cache: `cos_sin_cache` (vLLM's layout), else rope_cache("neox", rotary_dim,
    max_position, base) in query's dtype. rotary_dim: the cache's width, else head_dim.
    `out`: (query_out, key_out) to write into (not the inputs themselves)."""
    return _apply("neox", query, key, positions, cos_sin_cache=cos_sin_cache,
                  rotary_dim=rotary_dim, out=out,
                  table=("neox", {"base": base, "max_position": max_position}))


def rope_non_neox(query: Any, key: Any, positions: Any, *, cos_sin_cache: Any = None,
                  rotary_dim: int | None = None, base: float = 10000.0,
                  max_position: int = 8192, out: Sequence[Any] | None = None
                  ) -> tuple[Any, Any]:
    """RoPE with GPT-J's interleaved pairs (x[2i], x[2i+1]); otherwise as rope_neox."""
    return _apply("gptj", query, key, positions, cos_sin_cache=cos_sin_cache,
                  rotary_dim=rotary_dim, out=out,
                  table=("non_neox", {"base": base, "max_position": max_position}))


def rope_llama31(query: Any, key: Any, positions: Any, *, cos_sin_cache: Any = None,
                 rotary_dim: int | None = None, base: float = 500000.0,
                 scaling_factor: float = 8.0, low_freq_factor: float = 1.0,
                 high_freq_factor: float = 4.0, original_max_position: int = 8192,
                 max_position: int = 131072, is_neox: bool = True,
                 out: Sequence[Any] | None = None) -> tuple[Any, Any]:
    """RoPE with Llama 3.1's frequency scaling (defaults: Llama 3.1's configuration).
    The scaling parameters make the cache when `cos_sin_cache` is not given."""
    params = {"base": base, "max_position": max_position, "scaling_factor": scaling_factor,
              "low_freq_factor": low_freq_factor, "high_freq_factor": high_freq_factor,
              "original_max_position": original_max_position}
    return _apply(_style(is_neox), query, key, positions, cos_sin_cache=cos_sin_cache,
                  rotary_dim=rotary_dim, out=out, table=("llama31", params))


def rope_yarn(query: Any, key: Any, positions: Any, *, cos_sin_cache: Any = None,
              rotary_dim: int | None = None, base: float = 10000.0,
              scaling_factor: float | None = None, original_max_position: int | None = None,
              beta_fast: float = 32.0, beta_slow: float = 1.0,
              attention_factor: float | None = None, truncate: bool = True,
              max_position: int | None = None, is_neox: bool = True,
              out: Sequence[Any] | None = None) -> tuple[Any, Any]:
    """RoPE with YaRN's frequencies and magnitude scale. Without `cos_sin_cache`,
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
    return _apply(_style(is_neox), query, key, positions, cos_sin_cache=cos_sin_cache,
                  rotary_dim=rotary_dim, out=out, table=("yarn", params))


def rope_longrope(query: Any, key: Any, positions: Any, *, original_max_position: int,
                  max_position: int, short_factor: Sequence[float] | None = None,
                  long_factor: Sequence[float] | None = None, cos_sin_cache: Any = None,
                  rotary_dim: int | None = None, base: float = 10000.0,
                  short_mscale: float | None = None, long_mscale: float | None = None,
                  long: bool | None = None, out: Sequence[Any] | None = None
                  ) -> tuple[Any, Any]:
    """RoPE with LongRoPE's per-pair rescale factors (Phi-3), neox pairs only. The cache
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
    return _apply("neox", query, key, positions, cos_sin_cache=cos_sin_cache,
                  rotary_dim=rotary_dim, out=out, table=("longrope", params), region=region)
