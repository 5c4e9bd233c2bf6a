"""The operator library's activations (torch.nn.functional's signatures and semantics) and
fused gated activations (vLLM's and FlashInfer's `silu_and_mul` convention).

Each is a registry row (op_table, families "activation" and "fused_gated") run by the
same dispatch as the elementwise ops: the narrow floats compute in f32 with torch's
CUDA formulas, and scalar parameters (negative_slope, alpha, min_val/max_val,
beta/threshold) are kernel arguments, so one kernel serves every value. Two ops take
their operands as views of their arguments, never copies:
- prelu's weight, one per channel (dim 1) or a single one, is broadcast by a view
  with stride 0 on every other dimension;
- a gated op's input (..., 2N) is cut into its two halves (..., N), views with the
  input's row stride, which the row `act(a) * b` takes as its two inputs.
`inplace=True` writes the result over the input (the very same view, which dispatch
allows); `out=` is offered where torch has it (sigmoid, tanh) and on the gated ops
(FlashInfer's `out`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from tile_mlir.dtypes import DTYPES
from tile_mlir.ops import _runtime
from tile_mlir.ops.dispatch import Arg
from tile_mlir.ops.functions import _run

__all__ = [
    "elu",
    "gelu",
    "gelu_and_mul",
    "gelu_tanh_and_mul",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "leaky_relu",
    "mish",
    "prelu",
    "relu",
    "selu",
    "sigmoid",
    "silu",
    "silu_and_mul",
    "softplus",
    "tanh",
]
"""Seed 004's activation (14) and fused gated activation (3) families."""


def _number(value: Any, name: str, op: str) -> float:
    """A scalar parameter as a float (a Python or NumPy number, or a 0-d tensor)."""
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        value = value.item()
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{op}: argument '{name}' must be a number, got {type(value).__name__}")
    return float(value)


def _apply(op: str, input: Any, params: Sequence[tuple[str, Any]] = (), *,  # noqa: A002
           inplace: bool = False, out: Any = None, what: str = "") -> Any:
    """The row `op` on input and its scalar parameters; inplace writes over input."""
    what = what or op
    args = [Arg("input", input)] + [Arg(n, _number(v, n, what), promotes=False)
                                    for n, v in params]
    return _run(op, args, input if inplace else out, what=what)


# ---------------------------------------------------------------- activation


def relu(input: Any, inplace: bool = False) -> Any:  # noqa: A002 - torch's name
    """max(x, 0), NaN kept. As torch.nn.functional.relu."""
    return _apply("relu", input, inplace=inplace)


def gelu(input: Any, approximate: str = "none") -> Any:  # noqa: A002
    """x * 0.5 * (1 + erf(x / sqrt 2)), or with approximate="tanh" 0.5 * x *
    (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))). As torch.nn.functional.gelu."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: argument 'approximate' must be 'none' or 'tanh', "
                         f"got {approximate!r}")
    return _apply("gelu" if approximate == "none" else "gelu_tanh", input, what="gelu")


def silu(input: Any, inplace: bool = False) -> Any:  # noqa: A002
    """x / (1 + exp(-x)). As torch.nn.functional.silu."""
    return _apply("silu", input, inplace=inplace)


def sigmoid(input: Any, *, out: Any = None) -> Any:  # noqa: A002
    """1 / (1 + exp(-x)). As torch.sigmoid."""
    return _apply("sigmoid", input, out=out)


def tanh(input: Any, *, out: Any = None) -> Any:  # noqa: A002
    """As torch.tanh."""
    return _apply("tanh", input, out=out)


def leaky_relu(input: Any, negative_slope: float = 0.01,  # noqa: A002
               inplace: bool = False) -> Any:
    """x > 0 ? x : x * negative_slope. As torch.nn.functional.leaky_relu."""
    return _apply("leaky_relu", input, [("negative_slope", negative_slope)], inplace=inplace)


def elu(input: Any, alpha: float = 1.0, inplace: bool = False) -> Any:  # noqa: A002
    """x > 0 ? x : alpha * (exp(x) - 1) (expm1). As torch.nn.functional.elu."""
    return _apply("elu", input, [("alpha", alpha)], inplace=inplace)


def selu(input: Any, inplace: bool = False) -> Any:  # noqa: A002
    """scale * elu(x, alpha) with torch's constants. As torch.nn.functional.selu."""
    return _apply("selu", input, inplace=inplace)


def hardswish(input: Any, inplace: bool = False) -> Any:  # noqa: A002
    """x * min(max(x + 3, 0), 6) / 6. As torch.nn.functional.hardswish."""
    return _apply("hardswish", input, inplace=inplace)


def hardsigmoid(input: Any, inplace: bool = False) -> Any:  # noqa: A002
    """min(max(x + 3, 0), 6) / 6. As torch.nn.functional.hardsigmoid."""
    return _apply("hardsigmoid", input, inplace=inplace)


def hardtanh(input: Any, min_val: float = -1.0, max_val: float = 1.0,  # noqa: A002
             inplace: bool = False) -> Any:
    """clamp(x, min_val, max_val), NaN kept. As torch.nn.functional.hardtanh."""
    low, high = _number(min_val, "min_val", "hardtanh"), _number(max_val, "max_val", "hardtanh")
    if low > high:
        raise ValueError(f"hardtanh: argument 'min_val' ({low}) is greater than argument "
                         f"'max_val' ({high})")
    return _apply("hardtanh", input, [("min_val", low), ("max_val", high)], inplace=inplace)


def softplus(input: Any, beta: float = 1.0, threshold: float = 20.0) -> Any:  # noqa: A002
    """log(1 + exp(beta x)) / beta, or x where beta x > threshold. As
    torch.nn.functional.softplus."""
    return _apply("softplus", input, [("beta", beta), ("threshold", threshold)])


def mish(input: Any, inplace: bool = False) -> Any:  # noqa: A002
    """x * tanh(softplus(x)). As torch.nn.functional.mish."""
    return _apply("mish", input, inplace=inplace)


def prelu(input: Any, weight: Any) -> Any:  # noqa: A002
    """x > 0 ? x : weight * x, weight one per channel (dim 1) or a single one. As
    torch.nn.functional.prelu (input and weight of one dtype)."""
    view = channel_weight(input, weight)
    return _run("prelu", [Arg("input", input), Arg("weight", view)], what="prelu")


def channel_weight(input: Any, weight: Any) -> Any:  # noqa: A002
    """prelu's weight as torch broadcasts it: a view of shape (1, C, 1, ...) (all ones
    for a single weight) with stride 0 but along dim 1; the errors torch gives."""
    x = _array(input, "input", "prelu")
    w = _array(weight, "weight", "prelu")
    if w.dtype != x.dtype:
        raise TypeError(f"prelu: argument 'weight' is {_dtype(w)} and argument 'input' "
                        f"{_dtype(x)}: prelu does not promote")
    if len(w.shape) > 1:
        raise ValueError(f"prelu: argument 'weight' must be 0-d or 1-d, got shape {w.shape}")
    if w.numel != 1:
        channels = x.shape[1] if len(x.shape) > 1 else 1
        if not x.shape or w.numel != channels:
            raise ValueError(f"prelu: argument 'weight' has {w.numel} elements; argument "
                             f"'input' of shape {x.shape} has {channels} channel(s) (dim 1): "
                             "give one weight per channel, or one weight")
    rank = len(x.shape)
    shape, strides = [1] * rank, [0] * rank
    if rank > 1:
        shape[1] = w.numel
        strides[1] = w.strides[0] if w.shape else 0
    return channel_view(weight, w, tuple(shape), tuple(strides))


def _array(value: Any, name: str, op: str) -> _runtime.ArrayRef:
    if isinstance(value, _runtime.ArrayRef):  # described already (tests, tools)
        return value
    ref = _runtime.describe(value, f"argument '{name}'")
    if ref is None:
        raise TypeError(f"{op}: argument '{name}' must be an array, got {type(value).__name__}")
    return ref


def _dtype(ref: _runtime.ArrayRef) -> str:
    return DTYPES[ref.dtype].numpy


def channel_view(value: Any, ref: _runtime.ArrayRef, shape: tuple[int, ...],
                  strides: tuple[int, ...]) -> Any:
    """A 0-d or 1-d array seen with `shape` (ones but for dim 1): torch's, CuPy's and
    NumPy's own view (inserting unit dimensions never copies), else a described
    ArrayRef (any __cuda_array_interface__ object)."""
    if ref.kind == "torch":
        return value.view(shape)
    if ref.kind in ("cupy", "numpy"):
        return value.reshape(shape)
    return dataclasses.replace(ref, shape=shape, strides=strides)


def _itemsize(ref: _runtime.ArrayRef) -> int:
    return DTYPES[ref.dtype].bytes


# ----------------------------------------------------------- fused gated activations


def split_halves(input: Any, op: str) -> tuple[Any, Any]:  # noqa: A002
    """input[..., :N] and input[..., N:] of an input (..., 2N), as views."""
    ref = _array(input, "input", op)
    if not ref.shape:
        raise ValueError(f"{op}: argument 'input' is 0-d; it needs a last dimension of "
                         "2N elements (the gate, then the values)")
    width = ref.shape[-1]
    if width % 2:
        raise ValueError(f"{op}: argument 'input' has an odd last dimension ({width}); it "
                         "must be 2N (the gate, then the values)")
    n = width // 2
    if ref.kind in ("torch", "cupy", "numpy"):
        return input[..., :n], input[..., n:]
    shape = (*ref.shape[:-1], n)
    first = dataclasses.replace(ref, shape=shape)
    second = dataclasses.replace(first, pointer=ref.pointer + n * ref.strides[-1] * _itemsize(ref))
    return first, second


def _gated(op: str, input: Any, out: Any) -> Any:  # noqa: A002
    gate, up = split_halves(input, op)
    return _run(op, [Arg("input[..., :N]", gate), Arg("input[..., N:]", up)], out, what=op)


def silu_and_mul(input: Any, *, out: Any = None) -> Any:  # noqa: A002
    """silu(x[..., :N]) * x[..., N:] of an input (..., 2N) (SwiGLU), in f32, rounded once."""
    return _gated("silu_and_mul", input, out)


def gelu_and_mul(input: Any, *, out: Any = None) -> Any:  # noqa: A002
    """gelu(x[..., :N]) * x[..., N:] of an input (..., 2N) (GeGLU), in f32, rounded once."""
    return _gated("gelu_and_mul", input, out)


def gelu_tanh_and_mul(input: Any, *, out: Any = None) -> Any:  # noqa: A002
    """gelu(x[..., :N], approximate="tanh") * x[..., N:] of an input (..., 2N), in f32,
    rounded once."""
    return _gated("gelu_tanh_and_mul", input, out)
