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
from tile_mlir.ops import args, entry, plan, promotion
from tile_mlir.ops.args import Array, Scalar
from tile_mlir.ops.elementwise import In, Index, apply
from tile_mlir.ops.functions import run
from tile_mlir.ops.plan import Builder

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
    if not isinstance(state, tuple | list) or len(state) != 2:
        raise TypeError(f"argument 'state' must be a (seed, offset) pair from get_rng_state, "
                        f"got {state!r}")
    seed, offset = state
    _GENERATOR.set(_u64(seed, "seed"), _u64(offset, "offset"))


# ------------------------------------------------------------------ dropout


def _signed(value: int) -> int:
    """A 64-bit unsigned value as the i64 the kernel takes."""
    return value - _U64 if value >= 1 << 63 else value


def _p_error(p: Any) -> None:
    raise ValueError(f"dropout: argument 'p' must be in [0, 1), got {p}")


def _u64_error(name: str, value: Any) -> None:
    raise ValueError(f"dropout: argument '{name}' must be in [0, 2^64), got {value}")


def _offset_error() -> None:
    raise ValueError("dropout: argument 'offset' is for an explicit seed; the library's "
                     "generator keeps its own (set_rng_state)")


plan.HELPERS.update({"_SIGNED": _signed, "_FLOOR": math.floor, "_P_ERROR": _p_error,
                     "_U64_ERROR": _u64_error, "_OFFSET_ERROR": _offset_error,
                     "_TAKE": _GENERATOR.take})


def _integer(scalar: Scalar, what: str) -> Scalar:
    if isinstance(scalar.value, bool) or not isinstance(scalar.value, int):
        raise TypeError(f"{what}: argument '{scalar.name}' must be an int, got "
                        f"{type(scalar.value).__name__}")
    return scalar


def _i64(b: Builder, name: str, expr: str, value: int) -> In:
    """A 64-bit number the row keeps in its type, read per call from `expr`."""
    return In(Scalar(name, _signed(value) if value >= 0 else value, "i64", promotion.SCALAR,
                     b.derive(expr)), promotes=False, keep="i64")


def _stream(b: Builder, p: Scalar, seed: Scalar | None, offset: Scalar, counters: int
            ) -> list[In]:
    """The (seed, offset, threshold) inputs: the library generator's state per call, or
    the given seed and offset (checked per call)."""
    b.check(f"not 0.0 <= {p.expr} < 1.0", f"_P_ERROR({p.expr})")
    if not 0.0 <= float(p.value) < 1.0:
        _p_error(p.value)
    if seed is None:
        b.check(f"{offset.expr} != 0", "_OFFSET_ERROR()")
        if offset.value:
            _offset_error()
        state = b.derive(f"_TAKE({counters})")
        seed_expr, offset_expr, values = f"{state}[0]", f"{state}[1]", (0, 0)
    else:
        for given in (seed, offset):
            b.check(f"not 0 <= {given.expr} < {_U64}", f"_U64_ERROR({given.name!r}, "
                    f"{given.expr})")
            if not 0 <= int(given.value) < _U64:
                _u64_error(given.name, given.value)
        seed_expr, offset_expr = seed.expr, offset.expr
        values = (int(seed.value), int(offset.value))
    threshold = math.floor(float(p.value) * 2.0**32)
    return [_i64(b, "seed", f"_SIGNED({seed_expr})", values[0]),
            _i64(b, "offset", f"_SIGNED({offset_expr})", values[1]),
            _i64(b, "threshold", f"_FLOOR({p.expr} * 4294967296.0)", threshold)]


def _mask(b: Builder, x: Array, stream: list[In]) -> str:
    mask = apply(b, "dropout_mask", [*stream, In(Index(), promotes=False)], result="bool",
                 shape=x.shape, what="dropout")
    return b.object_of(mask)


def _all_kept(b: Builder, x: Array) -> str:
    """The mask of training=False: every element kept."""
    if b.fills:
        return b.object_of(b.filled(x.shape, "bool", True, "mask"))
    zero = [In(Scalar(n, 0, "i64", promotion.SCALAR, "0"), promotes=False, keep="i64")
            for n in ("seed", "offset", "threshold")]
    return _mask(b, x, zero)


def _float_input(input: Any) -> Array:  # noqa: A002
    if not isinstance(input, Array):
        raise TypeError(f"dropout: argument 'input' must be an array, got "
                        f"{type(input).__name__}")
    if input.dtype not in op_table.ELEMENTWISE["dropout_philox"].dtypes:
        raise TypeError(f"dropout: argument 'input' must be a float array, got "
                        f"{DTYPES[input.dtype].numpy}")
    return input


@entry.op({"input": "operand", "p": "number", "seed": "optional", "offset": "number",
           "out": "out"})
def dropout(b: Builder, input: Any, p: Any = 0.5, training: bool = True,  # noqa: A002 - torch's
            inplace: bool = False, *, seed: Any = None, offset: Any = 0,
            return_mask: bool = False, out: Array | None = None) -> str:
    """dropout(input, p=0.5, training=True, inplace=False, *, seed=None, offset=0,
    return_mask=False, out=None) -> Tensor (or (Tensor, mask))

    Zero each element with probability p and scale the rest by 1/(1-p); as
    torch.nn.functional.dropout, with this library's stream (docs/ops.md): element i of
    the input's row-major order is kept when word i % 4 of Philox 4x32-10 at counter
    offset + i // 4 under key `seed` is >= floor(p * 2^32). Without seed= the library's
    generator gives (seed, offset) and moves its offset on by ceil(numel / 4).
    `return_mask=True` returns (result, keep mask as bool). training=False returns the
    input itself (and an all-true mask). Under CUDA graph capture the (seed, offset) of
    the captured call are fixed in the graph: every replay draws the same mask (give
    seed= and offset= per replay through a fresh capture for fresh masks)."""
    x = _float_input(input)
    if seed is not None and not isinstance(seed, Scalar):
        raise TypeError("dropout: argument 'seed' must be an int or None")
    _integer(offset, "dropout")
    if seed is not None:
        _integer(seed, "dropout")
    target = x if inplace else out
    if inplace and out is not None:
        raise ValueError("dropout: give 'inplace=True' or 'out', not both")
    if not training:
        b.place([x])  # the mask is the input's kind (nothing else places the call here)
        b.check(f"not 0.0 <= {p.expr} < 1.0", f"_P_ERROR({p.expr})")
        if not 0.0 <= float(p.value) < 1.0:
            _p_error(p.value)
        result = "input" if target is None or target is x else run(
            b, "cast", [In(x)], target, result=target.dtype, what="dropout")
        return f"({result}, {_all_kept(b, x)})" if return_mask else result
    stream = _stream(b, p, seed, offset, -(-x.numel // 4))
    compute = opmath(x.dtype)
    scale = Scalar("scale", 1.0 / (1.0 - float(p.value)), compute, promotion.SCALAR,
                   b.derive(f"1.0 / (1.0 - {p.expr})"))  # in double, as torch
    result = run(b, "dropout_philox", [In(x), In(scale, promotes=False), *stream,
                                       In(Index(), promotes=False)], target, result=x.dtype,
                 what="dropout")
    return f"({result}, {_mask(b, x, stream)})" if return_mask else result


# ----------------------------------------------------------- position encodings


def _size(value: Any, name: str, what: str, least: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what}: argument '{name}' must be an int, got {type(value).__name__}")
    if value < least:
        raise ValueError(f"{what}: argument '{name}' must be at least {least}, got {value}")
    return int(value)


def _dtype_name(dtype: Any, what: str) -> str:
    """The output's dtype: float32 unless given (a torch dtype, a NumPy dtype or a name)."""
    return "f32" if dtype is None else args.dtype_of(dtype, "dtype", what, op_table.GENERATED)


def _current_device() -> int:
    return int(args.torch_module().cuda.current_device())


plan.HELPERS["_CURRENT_DEVICE"] = _current_device


def _place(b: Builder, device: Any, like: Any, out: Array | None, what: str) -> None:
    """Where the output goes: out's, like's kind and device, else a torch tensor on
    `device` (default "cuda", the current device)."""
    if device is not None and like is not None:
        raise ValueError(f"{what}: give 'device' or 'like', not both")
    if out is not None:
        b.place([out])
        return
    if like is not None:
        if not isinstance(like, Array):
            raise TypeError(f"{what}: argument 'like' must be an array, got a number")
        b.place([like])
        return
    try:
        torch = args.torch_module()
    except KeyError:
        raise TypeError(f"{what}: without 'like' (or out=) the result is a torch tensor; "
                        "import torch, or pass like= an array of the kind wanted") from None
    where = torch.device("cuda" if device is None else device)
    if where.type != "cuda":
        raise ValueError(f"{what}: argument 'device' must be a CUDA device, got {device}")
    index = where.index
    if index is None:
        index = _current_device()
        b.guard(f"_CURRENT_DEVICE() != {index}")
    b.set_place("torch", index, None)
    b.device_object = torch.device("cuda", index)


def _constant(name: str, value: int | float, dtype: str) -> In:
    return In(Scalar(name, value, dtype, promotion.SCALAR, repr(value)), promotes=False)


def _generated(b: Builder, row: str, shape: tuple[int, int], inputs: list[In], *, dtype: Any,
               out: Array | None, what: str) -> str:
    result = _dtype_name(dtype, what) if out is None else out.dtype
    if out is not None and (out.shape != shape or out.dtype not in op_table.GENERATED):
        raise ValueError(f"{what}: argument 'out' is {args.torch_name(out.dtype)}"
                         f"{list(out.shape)}, the result {args.torch_name(result)}"
                         f"{list(shape)}")
    if out is not None and dtype is not None and _dtype_name(dtype, what) != out.dtype:
        raise ValueError(f"{what}: argument 'out' is {args.torch_name(out.dtype)}, "
                         f"argument 'dtype' {dtype}")
    written = apply(b, row, [*inputs, In(Index(), promotes=False)], out, result=result,
                    shape=shape, what=what)
    return b.object_of(written)


GENERATOR_ROLES = {"like": "optional", "out": "out"}


@entry.op(GENERATOR_ROLES)
def alibi(b: Builder, num_heads: int, seq_len: int, *, dtype: Any = None, device: Any = None,
          like: Any = None, out: Array | None = None) -> str:
    """alibi(num_heads, seq_len, *, dtype=None, device=None, like=None, out=None) -> Tensor

    The ALiBi bias (Press et al.), shape (num_heads, seq_len): bias[h, j] = slope_h * j,
    added to head h's attention scores of key position j (softmax of row i sees the same
    as with -slope_h * (i - j) under a causal mask). Slopes: 2^(-8(h+1)/n) for the
    n = largest power of two <= num_heads heads, then the odd powers 2^(-4(2k+1)/n) of
    2n heads' base for the rest (the paper's get_slopes, BLOOM's build_alibi_tensor).
    The result: a torch tensor on `device` (default "cuda"), or of `like`'s kind and
    device, or out=; float32 unless `dtype`."""
    heads = _size(num_heads, "num_heads", "alibi", 1)
    length = _size(seq_len, "seq_len", "alibi")
    _place(b, device, like, out, "alibi")
    pow2 = 1 << (heads.bit_length() - 1)
    magic = op_table.division_magic(max(length, 1))
    return _generated(b, "alibi_bias", (heads, length),
                      [_constant("seq_len", length, "i64"), _constant("pow2", pow2, "i64"),
                       _constant("magic", magic, "i64")],
                      dtype=dtype, out=out, what="alibi")


def _base_error(base: Any) -> None:
    raise ValueError(f"sinusoidal: argument 'base' must be a positive number, got {base}")


plan.HELPERS.update({"_BASE_ERROR": _base_error, "_LOG2": math.log2})


@entry.op({**GENERATOR_ROLES, "base": "number"})
def sinusoidal(b: Builder, positions: int, dim: int, *, base: Any = 10000.0, dtype: Any = None,
               device: Any = None, like: Any = None, out: Array | None = None) -> str:
    """sinusoidal(positions, dim, *, base=10000.0, dtype=None, device=None, like=None,
    out=None) -> Tensor

    The sinusoidal position encoding (Vaswani et al.), shape (positions, dim), sin and
    cos interleaved: PE[p, 2i] = sin(p / base^(2i/dim)), PE[p, 2i+1] = cos(p / base^(2i/dim))
    (an odd dim ends with a sin column). Placed as alibi's result is."""
    count = _size(positions, "positions", "sinusoidal")
    width = _size(dim, "dim", "sinusoidal", 1)
    if not 0.0 < float(base.value) < math.inf:
        _base_error(base.value)
    b.check(f"not 0.0 < {base.expr} < _INF", f"_BASE_ERROR({base.expr})")
    _place(b, device, like, out, "sinusoidal")
    # the exponent of one column pair, 2 log2(base) / dim, and its ratio 2^-step
    step = 2.0 * math.log2(float(base.value)) / width
    step_expr = b.derive(f"2.0 * _LOG2({base.expr}) / {width}")

    def f64(name: str, value: float, expr: str) -> In:
        return In(Scalar(name, value, "f64", promotion.SCALAR, expr), promotes=False)

    scalars = [f64("step", step, step_expr),
               f64("ratio", 2.0 ** -step, b.derive(f"2.0 ** -{step_expr}")),
               _constant("dim", width, "i64")]
    return _generated(b, "sinusoidal_pe", (count, width), scalars, dtype=dtype, out=out,
                      what="sinusoidal")
