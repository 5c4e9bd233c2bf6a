"""RoPE references in float64 NumPy, written from the formulas (not from tile_mlir.ops.rope).

Shared by the null tier (test_ops_rope.py) and the gpu tier (test_ops_rope_gpu.py):
- `table(variant, rotary_dim, **params)`: the cos/sin cache, (rows, rotary_dim), one
  pair frequency at a time as the papers and vLLM's classes define it;
- `rotate(x, cos, sin, style)`: the rotation of every head's pairs by per-token angles;
- `bound(...)`: how far a kernel that computes in f32 and rounds once may be from it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

# ------------------------------------------------------------------ frequencies


def _plain(rotary_dim: int, base: float) -> list[float]:
    return [base ** (-(2.0 * i) / rotary_dim) for i in range(rotary_dim // 2)]


def _llama31(rotary_dim: int, base: float, *, scaling_factor: float, low_freq_factor: float,
             high_freq_factor: float, original_max_position: int) -> list[float]:
    result = []
    for freq in _plain(rotary_dim, base):
        wavelength = 2 * math.pi / freq
        if wavelength < original_max_position / high_freq_factor:
            result.append(freq)  # high frequencies: unchanged
        elif wavelength > original_max_position / low_freq_factor:
            result.append(freq / scaling_factor)  # low frequencies: slowed
        else:
            ratio = original_max_position / wavelength
            smooth = (ratio - low_freq_factor) / (high_freq_factor - low_freq_factor)
            result.append(smooth * freq + (1 - smooth) * freq / scaling_factor)
    return result


def _yarn(rotary_dim: int, base: float, *, scaling_factor: float, original_max_position: int,
          beta_fast: float, beta_slow: float, truncate: bool) -> list[float]:
    def dim_turning(turns: float) -> float:
        # the pair i whose wavelength 2 pi base^(2i/d) fits `turns` times in the context
        return rotary_dim * math.log(original_max_position / (2 * math.pi * turns)) / \
            (2 * math.log(base))

    low, high = dim_turning(beta_fast), dim_turning(beta_slow)
    if truncate:
        low, high = float(math.floor(low)), float(math.ceil(high))
    low, high = max(low, 0.0), min(high, rotary_dim - 1.0)
    if high == low:
        high += 0.001
    result = []
    for i, freq in enumerate(_plain(rotary_dim, base)):
        ramp = min(max((i - low) / (high - low), 0.0), 1.0)  # 0: extrapolate, 1: interpolate
        result.append(freq * (1 - ramp) + freq / scaling_factor * ramp)
    return result


def _cos_sin(freqs: list[float], rows: int, mscale: float) -> np.ndarray:
    position = np.arange(rows, dtype=np.float64)[:, None]
    angle = position * np.array(freqs)[None, :]
    result: np.ndarray = np.hstack([mscale * np.cos(angle), mscale * np.sin(angle)])
    return result


def table(variant: str, rotary_dim: int, **p: Any) -> np.ndarray:
    """The cos/sin cache of a variant in vLLM's layout, float64."""
    base = p.get("base", 10000.0)
    if variant in ("neox", "non_neox"):
        return _cos_sin(_plain(rotary_dim, base), p["max_position"], 1.0)
    if variant == "llama31":
        freqs = _llama31(rotary_dim, base, scaling_factor=p["scaling_factor"],
                         low_freq_factor=p["low_freq_factor"],
                         high_freq_factor=p["high_freq_factor"],
                         original_max_position=p["original_max_position"])
        return _cos_sin(freqs, p["max_position"], 1.0)
    if variant == "yarn":
        s, original = p["scaling_factor"], p["original_max_position"]
        freqs = _yarn(rotary_dim, base, scaling_factor=s, original_max_position=original,
                      beta_fast=p.get("beta_fast", 32.0), beta_slow=p.get("beta_slow", 1.0),
                      truncate=p.get("truncate", True))
        mscale = p.get("attention_factor") or (1 + 0.1 * math.log(s) if s > 1 else 1.0)
        return _cos_sin(freqs, math.ceil(original * s), mscale)
    if variant == "longrope":
        original, longest = p["original_max_position"], p["max_position"]
        default = math.sqrt(1 + math.log(longest / original) / math.log(original)) \
            if longest > original else 1.0
        parts = []
        for name, rows in (("short", original), ("long", longest)):
            factors = p[f"{name}_factor"]
            freqs = [f / factor for f, factor in zip(_plain(rotary_dim, base), factors,
                                                     strict=True)]
            mscale = p.get(f"{name}_mscale") or default
            parts.append(_cos_sin(freqs, rows, mscale))
        return np.vstack(parts)
    raise ValueError(variant)


# ------------------------------------------------------------------ rotation


def pairs(rotary_dim: int, style: str) -> tuple[np.ndarray, np.ndarray]:
    """The head dims of each pair's first and second element."""
    half = rotary_dim // 2
    if style == "neox":
        return np.arange(half), np.arange(half) + half
    return np.arange(0, rotary_dim, 2), np.arange(1, rotary_dim, 2)


def rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, style: str
           ) -> tuple[np.ndarray, np.ndarray]:
    """x (tokens, heads, head_dim) rotated by per-token angles (cos, sin: (tokens, R/2)),
    in float64; also the magnitude |x1 cos| + |x2 sin| of every result (for bounds)."""
    x = x.astype(np.float64)
    first, second = pairs(2 * cos.shape[1], style)
    c, s = cos[:, None, :], sin[:, None, :]
    x1, x2 = x[..., first], x[..., second]
    out, size = x.copy(), np.zeros_like(x)
    out[..., first] = x1 * c - x2 * s
    out[..., second] = x2 * c + x1 * s
    size[..., first] = np.abs(x1 * c) + np.abs(x2 * s)
    size[..., second] = np.abs(x2 * c) + np.abs(x1 * s)
    return out, size


EPS = {"f32": 2.0**-23, "f16": 2.0**-10, "bf16": 2.0**-7}


def bound(want: np.ndarray, size: np.ndarray, dtype: str) -> np.ndarray:
    """Allowed |got - want|: the final rounding to dtype (an ulp of the result) plus the
    f32 arithmetic's (a few f32 ulps of the terms that cancel)."""
    tiny = 2.0**-126 if dtype == "f32" else 2.0**-24
    allowed: np.ndarray = EPS[dtype] * np.abs(want) + 4 * 2.0**-23 * size + tiny
    return allowed
