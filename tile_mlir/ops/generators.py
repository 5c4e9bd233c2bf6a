"""Dropout and the position encodings: ops that compute from each element's position.

    y = ops.dropout(x, 0.1)                              # the library's generator
    y, keep = ops.dropout(x, 0.1, seed=7, offset=0, return_mask=True)
    bias = ops.alibi(12, 2048, dtype=torch.bfloat16)     # (heads, seq_len), torch on cuda
    pe = ops.sinusoidal(4096, 512, like=cupy_array)      # (positions, dim), a CuPy array

Each runs an indexed registry row (op_table's generators), whose body gets the
element's row-major index in the output (lowering/compute.py, ops/program.py):
- dropout: the Philox 4x32-10 stream of docs/ops.md, computed in the kernel, so
  the mask depends on (seed, offset, element index) only, never on the launch;
  a second kernel writes the keep mask when asked for;
- alibi, sinusoidal: the values as functions of (row, column), computed in f64
  and rounded once.

The generators take sizes and make their output: a torch tensor on `device`
(default "cuda"), or, with `like=`, an array of the kind and on the device of
`like` (a torch tensor, a CuPy array, a NumPy array); dtype float32 unless given
(a torch dtype, a NumPy dtype or its name).
"""

from __future__ import annotations

import math
import numbers
import threading
from typing import Any

from tile_mlir import op_table
from tile_mlir.dtypes import DTYPES, opmath
from tile_mlir.ops import _runtime, dispatch, promotion
from tile_mlir.ops.dispatch import Arg, Call, Index, Scalar

__all__ = ["alibi", "dropout", "get_rng_state", "manual_seed", "set_rng_state", "sinusoidal"]

DEFAULT_SEED = 67280421310721
"""The library generator's seed until manual_seed (torch's default generator's)."""

_U64 = 1 << 64


# ------------------------------------------------------------- the generator


class _Generator:
    """The library's Philox state: a seed and the next unused counter (offset)."""

    def __init__(self, seed: int):
        self._lock = threading.Lock()
        self.seed, self.offset = seed, 0

    def take(self, counters: int) -> tuple[int, int]:
        """(seed, offset) for a call that uses `counters` counters; the offset moves past
        them, as torch's philox offset moves past what each kernel draws."""
        with self._lock:
            state = self.seed, self.offset
            self.offset = (self.offset + counters) % _U64
        return state

    def set(self, seed: int, offset: int) -> None:
        with self._lock:
            self.seed, self.offset = seed, offset


_GENERATOR = _Generator(DEFAULT_SEED)


def _u64(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"argument '{name}' must be an int, got {type(value).__name__}")
    if not 0 <= int(value) < _U64:
        raise ValueError(f"argument '{name}' must be in [0, 2^64), got {value}")
    return int(value)


def manual_seed(seed: int) -> None:
    """Seed the library's generator (what dropout uses without seed=); its offset restarts
    at 0. As torch.manual_seed, for this library's stream."""
    _GENERATOR.set(_u64(seed, "seed"), 0)


def get_rng_state() -> tuple[int, int]:
    """The library generator's (seed, offset): the next dropout without seed= uses
    counters from offset on."""
    with _GENERATOR._lock:
        return _GENERATOR.seed, _GENERATOR.offset


def set_rng_state(state: tuple[int, int]) -> None:
    """Restore a state from get_rng_state."""
    seed, offset = state
    _GENERATOR.set(_u64(seed, "seed"), _u64(offset, "offset"))


# ------------------------------------------------------------------ dropout


def _signed(value: int) -> int:
    """A 64-bit unsigned value as the i64 the kernel takes."""
    return value - _U64 if value >= 1 << 63 else value


def _probability(p: Any) -> float:
    if isinstance(p, bool) or not isinstance(p, numbers.Real):
        raise TypeError(f"dropout: argument 'p' must be a number, got {type(p).__name__}")
    if not 0.0 <= float(p) < 1.0:
        raise ValueError(f"dropout: argument 'p' must be in [0, 1), got {p}")
    return float(p)


def _array(value: Any, name: str, what: str) -> _runtime.ArrayRef:
    operand = dispatch.classify(Arg(name, value))
    if not isinstance(operand, _runtime.ArrayRef):
        raise TypeError(f"{what}: argument '{name}' must be an array, got "
                        f"{type(value).__name__}")
    return operand


def _stream(seed: int, offset: int, threshold: int) -> list[Scalar]:
    return [Scalar(_signed(seed), "i64", promotion.SCALAR),
            Scalar(_signed(offset), "i64", promotion.SCALAR),
            Scalar(threshold, "i64", promotion.SCALAR)]


def _mask(x: _runtime.ArrayRef, stream: list[Scalar]) -> Any:
    call = Call(op_table.ELEMENTWISE["dropout_mask"], ["seed", "offset", "threshold", "base"],
                [*stream, Index()], "bool", "bool", x.shape, (None,) * 4)
    return dispatch.generate(call, _runtime.empty(x.shape, "bool", x))


def dropout(input: Any, p: float = 0.5, training: bool = True, *,  # noqa: A002 - torch's
            seed: int | None = None, offset: int = 0, return_mask: bool = False) -> Any:
    """Zero each element with probability p and scale the rest by 1/(1-p); as
    torch.nn.functional.dropout, with this library's stream (docs/ops.md): element i of
    the input's row-major order is kept when word i % 4 of Philox 4x32-10 at counter
    offset + i // 4 under key `seed` is >= floor(p * 2^32). Without seed= the library's
    generator gives (seed, offset) and moves its offset on by ceil(numel / 4).
    `return_mask=True` returns (result, keep mask as bool). training=False returns the
    input itself (and an all-true mask)."""
    x = _array(input, "input", "dropout")
    if x.dtype not in op_table.ELEMENTWISE["dropout_philox"].dtypes:
        raise TypeError(f"dropout: argument 'input' must be a float array, got "
                        f"{DTYPES[x.dtype].numpy}")
    p = _probability(p)
    if not training:
        return (input, _mask(x, _stream(0, 0, 0))) if return_mask else input
    counters = -(-x.numel // 4)
    if seed is None:
        if offset:
            raise ValueError("dropout: argument 'offset' is for an explicit seed; the "
                             "library's generator keeps its own (set_rng_state)")
        seed, offset = _GENERATOR.take(counters)
    stream = _stream(_u64(seed, "seed"), _u64(offset, "offset"), math.floor(p * 2.0**32))
    compute = opmath(x.dtype)
    scale = Scalar(1.0 / (1.0 - p), compute, promotion.SCALAR)  # in double, as torch
    call = Call(op_table.ELEMENTWISE["dropout_philox"],
                ["input", "scale", "seed", "offset", "threshold", "base"],
                [x, scale, *stream, Index()], x.dtype, compute, x.shape, (None,) * 6)
    result = dispatch.run(call)
    return (result, _mask(x, stream)) if return_mask else result


# ----------------------------------------------------------- position encodings


def _size(value: Any, name: str, what: str, least: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what}: argument '{name}' must be an int, got {type(value).__name__}")
    if value < least:
        raise ValueError(f"{what}: argument '{name}' must be at least {least}, got {value}")
    return int(value)


def _dtype_name(dtype: Any, what: str) -> str:
    """A tile dtype name from a torch dtype, a NumPy dtype or a name (float32, bf16...)."""
    if dtype is None:
        return "f32"
    name = str(dtype).removeprefix("torch.")
    by_numpy = {d.numpy: n for n, d in DTYPES.items()}
    found = name if name in DTYPES else by_numpy.get(name)
    if found is None:
        try:
            import numpy as np

            found = by_numpy.get(np.dtype(dtype).name)
        except TypeError:
            found = None
    allowed = op_table.GENERATED
    if found not in allowed:
        raise TypeError(f"{what}: argument 'dtype' must be one of "
                        f"{', '.join(DTYPES[d].numpy for d in allowed)}, got {dtype}")
    return found


def _output(shape: tuple[int, ...], dtype: Any, device: Any, like: Any, what: str) -> Any:
    """An uninitialized output: of `like`'s kind and device, else a torch tensor."""
    name = _dtype_name(dtype, what)
    if like is None:
        return _runtime.empty_torch(shape, name, "cuda" if device is None else device)
    if device is not None:
        raise ValueError(f"{what}: give 'device' or 'like', not both")
    return _runtime.empty(shape, name, _array(like, "like", what))


def _generate(row: str, shape: tuple[int, ...], scalars: list[Scalar], out: Any) -> Any:
    names = [*(f"s{n}" for n in range(len(scalars))), "base"]
    result = _runtime.describe(out, "the output")
    assert result is not None
    call = Call(op_table.ELEMENTWISE[row], names, [*scalars, Index()], result.dtype, "f32",
                shape, (None,) * len(names))
    return dispatch.generate(call, out)


def alibi(num_heads: int, seq_len: int, *, dtype: Any = None, device: Any = None,
          like: Any = None) -> Any:
    """The ALiBi bias (Press et al.), shape (num_heads, seq_len): bias[h, j] = slope_h * j,
    added to head h's attention scores of key position j (softmax of row i sees the same
    as with -slope_h * (i - j) under a causal mask). Slopes: 2^(-8(h+1)/n) for the
    n = largest power of two <= num_heads heads, then the odd powers 2^(-4(2k+1)/n) of
    2n heads' base for the rest (the paper's get_slopes, BLOOM's build_alibi_tensor)."""
    heads = _size(num_heads, "num_heads", "alibi", 1)
    length = _size(seq_len, "seq_len", "alibi")
    out = _output((heads, length), dtype, device, like, "alibi")
    pow2 = 1 << (heads.bit_length() - 1)
    return _generate("alibi_bias", (heads, length),
                     [Scalar(length, "i64", promotion.SCALAR),
                      Scalar(pow2, "i64", promotion.SCALAR)], out)


def sinusoidal(positions: int, dim: int, *, base: float = 10000.0, dtype: Any = None,
               device: Any = None, like: Any = None) -> Any:
    """The sinusoidal position encoding (Vaswani et al.), shape (positions, dim), sin and
    cos interleaved: PE[p, 2i] = sin(p / base^(2i/dim)), PE[p, 2i+1] = cos(p / base^(2i/dim))
    (an odd dim ends with a sin column)."""
    count = _size(positions, "positions", "sinusoidal")
    width = _size(dim, "dim", "sinusoidal", 1)
    if isinstance(base, bool) or not isinstance(base, numbers.Real) or \
            not 0.0 < float(base) < math.inf:
        raise ValueError(f"sinusoidal: argument 'base' must be a positive number, got {base}")
    out = _output((count, width), dtype, device, like, "sinusoidal")
    return _generate("sinusoidal_pe", (count, width),
                     [Scalar(width, "i64", promotion.SCALAR),
                      Scalar(math.log2(float(base)), "f64", promotion.SCALAR)], out)
