"""The operator library's activations (torch.nn.functional's signatures and semantics) and
fused gated activations (vLLM's and FlashInfer's `silu_and_mul` convention).

Each is a registry row (op_table, families "activation" and "fused_gated") planned as
the elementwise ops are: the narrow floats compute in f32 with torch's CUDA formulas,
and scalar parameters (negative_slope, alpha, min_val/max_val, beta/threshold) are
kernel arguments read per call, so one kernel and one plan serve every value. Two ops
take their operands as views of their arguments, never copies:
- prelu's weight, one per channel (dim 1) or a single one, is broadcast by a view
  with stride 0 on every other dimension;
- a gated op's input (..., 2N) is cut into its two halves (..., N), views with the
  input's row stride (the second half's pointer a constant offset from the input's).
`inplace=True` writes the result over the input (the very same view, which the
elementwise plan allows); every op takes `out=`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tile_mlir.ops import entry, plan
from tile_mlir.ops.args import Array, Scalar, torch_name
from tile_mlir.ops.elementwise import In
from tile_mlir.ops.functions import run
from tile_mlir.ops.plan import Builder

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

Operand = Array | Scalar


def _input(input: Operand, op: str) -> Array:  # noqa: A002 - torch's name
    if not isinstance(input, Array):
        raise TypeError(f"{op}: argument 'input' must be an array, got a number")
    return input


def _target(input: Array, out: Array | None, inplace: bool, op: str) -> Array | None:  # noqa: A002
    """Where the result goes: out=, the input itself (inplace=True), or a new array."""
    if inplace and out is not None:
        raise ValueError(f"{op}: give 'inplace=True' or 'out', not both")
    return input if inplace else out


def _activation(b: Builder, op: str, input: Operand,  # noqa: A002
                params: Sequence[Scalar] = (), *, inplace: bool = False,
                out: Array | None = None, what: str = "") -> str:
    """The row `op` on input and its scalar parameters."""
    what = what or op
    x = _input(input, what)
    return run(b, op, [In(x), *(In(p, promotes=False) for p in params)],
               _target(x, out, inplace, what), what=what)


ROLES = {"input": "operand", "out": "out"}


def _simple(name: str, formula: str, inplace: bool = True) -> Callable[..., Any]:
    """An activation of the input alone: (input, inplace=False, *, out=None)."""
    if inplace:
        def semantics(b: Builder, input: Operand, inplace: bool = False, *,  # noqa: A002
                      out: Array | None = None) -> str:
            return _activation(b, name, input, inplace=inplace, out=out)

        signature = f"{name}(input, inplace=False, *, out=None) -> Tensor"
        where = f"torch.nn.functional.{name}"
    else:
        def semantics(b: Builder, input: Operand, *,  # type: ignore[misc] # noqa: A002
                      out: Array | None = None) -> str:
            return _activation(b, name, input, out=out)

        signature = f"{name}(input, *, out=None) -> Tensor"
        where = f"torch.{name}"
    semantics.__doc__ = f"{signature}\n\n{formula} As {where}."
    return entry.op(ROLES, name=name)(semantics)


# ---------------------------------------------------------------- activation

relu = _simple("relu", "max(x, 0), NaN kept.")
silu = _simple("silu", "x / (1 + exp(-x)).")
selu = _simple("selu", "scale * elu(x, alpha) with torch's constants.")
hardswish = _simple("hardswish", "x * min(max(x + 3, 0), 6) / 6.")
hardsigmoid = _simple("hardsigmoid", "min(max(x + 3, 0), 6) / 6.")
mish = _simple("mish", "x * tanh(softplus(x)).")
sigmoid = _simple("sigmoid", "1 / (1 + exp(-x)).", inplace=False)
tanh = _simple("tanh", "tanh(x).", inplace=False)


@entry.op(ROLES)
def gelu(b: Builder, input: Operand, approximate: str = "none", *,  # noqa: A002
         out: Array | None = None) -> str:
    """gelu(input, approximate="none", *, out=None) -> Tensor

    x * 0.5 * (1 + erf(x / sqrt 2)), or with approximate="tanh" 0.5 * x *
    (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))). As torch.nn.functional.gelu."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: argument 'approximate' must be 'none' or 'tanh', "
                         f"got {approximate!r}")
    return _activation(b, "gelu" if approximate == "none" else "gelu_tanh", input, out=out,
                       what="gelu")


NUMBER_ROLES = {"input": "operand", "out": "out"}


@entry.op({**NUMBER_ROLES, "negative_slope": "number"})
def leaky_relu(b: Builder, input: Operand, negative_slope: Scalar | float = 0.01,  # noqa: A002
               inplace: bool = False, *, out: Array | None = None) -> str:
    """leaky_relu(input, negative_slope=0.01, inplace=False, *, out=None) -> Tensor

    x > 0 ? x : x * negative_slope. As torch.nn.functional.leaky_relu."""
    assert isinstance(negative_slope, Scalar)
    return _activation(b, "leaky_relu", input, [negative_slope], inplace=inplace, out=out)


@entry.op({**NUMBER_ROLES, "alpha": "number"})
def elu(b: Builder, input: Operand, alpha: Scalar | float = 1.0,  # noqa: A002
        inplace: bool = False, *, out: Array | None = None) -> str:
    """elu(input, alpha=1.0, inplace=False, *, out=None) -> Tensor

    x > 0 ? x : alpha * (exp(x) - 1) (expm1). As torch.nn.functional.elu."""
    assert isinstance(alpha, Scalar)
    return _activation(b, "elu", input, [alpha], inplace=inplace, out=out)


def _bounds_error(low: float, high: float) -> None:
    raise ValueError(f"hardtanh: argument 'min_val' ({low}) is greater than argument "
                     f"'max_val' ({high})")


plan.HELPERS["_HARDTANH_BOUNDS"] = _bounds_error


@entry.op({**NUMBER_ROLES, "min_val": "number", "max_val": "number"})
def hardtanh(b: Builder, input: Operand, min_val: Scalar | float = -1.0,  # noqa: A002
             max_val: Scalar | float = 1.0, inplace: bool = False, *,
             out: Array | None = None) -> str:
    """hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False, *, out=None) -> Tensor

    clamp(x, min_val, max_val), NaN kept. As torch.nn.functional.hardtanh."""
    assert isinstance(min_val, Scalar) and isinstance(max_val, Scalar)
    if min_val.value > max_val.value:
        _bounds_error(min_val.value, max_val.value)
    b.check(f"{min_val.expr} > {max_val.expr}",
            f"_HARDTANH_BOUNDS({min_val.expr}, {max_val.expr})")
    return _activation(b, "hardtanh", input, [min_val, max_val], inplace=inplace, out=out)


@entry.op({**NUMBER_ROLES, "beta": "number", "threshold": "number"})
def softplus(b: Builder, input: Operand, beta: Scalar | float = 1.0,  # noqa: A002
             threshold: Scalar | float = 20.0, *, out: Array | None = None) -> str:
    """softplus(input, beta=1.0, threshold=20.0, *, out=None) -> Tensor

    log(1 + exp(beta x)) / beta, or x where beta x > threshold. As
    torch.nn.functional.softplus."""
    assert isinstance(beta, Scalar) and isinstance(threshold, Scalar)
    return _activation(b, "softplus", input, [beta, threshold], out=out)


@entry.op({"input": "operand", "weight": "array", "out": "out"})
def prelu(b: Builder, input: Operand, weight: Operand, *,  # noqa: A002
          out: Array | None = None) -> str:
    """prelu(input, weight, *, out=None) -> Tensor

    x > 0 ? x : weight * x, weight one per channel (dim 1) or a single one. As
    torch.nn.functional.prelu (input and weight of one dtype)."""
    x = _input(input, "prelu")
    return run(b, "prelu", [In(x), In(channel_weight(x, weight))], out, what="prelu")


def channel_weight(x: Array, weight: Operand) -> Array:
    """prelu's weight as torch broadcasts it: a view of shape (1, C, 1, ...) (all ones
    for a single weight) with stride 0 but along dim 1; the errors torch gives."""
    if not isinstance(weight, Array):
        raise TypeError("prelu: argument 'weight' must be an array, got a number")
    w = weight
    if w.dtype != x.dtype:
        raise TypeError(f"prelu: argument 'weight' is {torch_name(w.dtype)} and argument "
                        f"'input' {torch_name(x.dtype)}: prelu does not promote")
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
    return w.view(shape, strides)


# ----------------------------------------------------------- fused gated activations


def split_halves(input: Operand, op: str) -> tuple[Array, Array]:  # noqa: A002
    """input[..., :N] and input[..., N:] of an input (..., 2N), as views."""
    x = _input(input, op)
    if not x.shape:
        raise ValueError(f"{op}: argument 'input' is 0-d; it needs a last dimension of "
                         "2N elements (the gate, then the values)")
    width = x.shape[-1]
    if width % 2:
        raise ValueError(f"{op}: argument 'input' has an odd last dimension ({width}); it "
                         "must be 2N (the gate, then the values)")
    n = width // 2
    shape = (*x.shape[:-1], n)
    first = x.view(shape, x.strides, name="input[..., :N]")
    return first, x.view(shape, x.strides, n * x.strides[-1], name="input[..., N:]")


def _gated(name: str, formula: str) -> Callable[..., Any]:
    def semantics(b: Builder, input: Operand, *, out: Array | None = None) -> str:  # noqa: A002
        gate, up = split_halves(input, name)
        return run(b, name, [In(gate), In(up)], out, what=name)

    semantics.__doc__ = (f"{name}(input, *, out=None) -> Tensor\n\n{formula} of an input "
                         "(..., 2N) -> (..., N), in f32, rounded once (vLLM's and "
                         "FlashInfer's convention).")
    return entry.op(ROLES, name=name)(semantics)


silu_and_mul = _gated("silu_and_mul", "silu(x[..., :N]) * x[..., N:] (SwiGLU)")
gelu_and_mul = _gated("gelu_and_mul", "gelu(x[..., :N]) * x[..., N:] (GeGLU)")
gelu_tanh_and_mul = _gated("gelu_tanh_and_mul",
                           'gelu(x[..., :N], approximate="tanh") * x[..., N:]')
