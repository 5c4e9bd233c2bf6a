"""The elementwise op registry: one row per op, read by the verifier, the lowering
variants, the operator library (tile_mlir.ops) and the tests.

A row says how many inputs the op takes, which element types it is defined
on, what it produces, how to build its body in MLIR (on scalars or vectors of
the compute type, bodies.py) and its NumPy reference with PyTorch's semantics
(refs.py). `tile.elementwise {op = name}` names a row.

Element types. The inputs of an op are promoted as torch promotes them
(bool < integers < floats, the wider within a kind; dtypes.promote_types)
together with dst, except the inputs a row keeps in their own type (where's
condition, masked_fill's mask), and the op computes in the promoted type's
opmath type: f16, bf16 and the fp8 formats compute in f32 (unless the row is
exact in the narrow type and every operand has it: `native`), everything else
in itself. A tile (memref) input of another type than the tiles and dst promote to
is first rounded to that type where it is narrower than the compute type (torch
casts every tensor operand to the common dtype: lowering/support/compute.py);
scalars are not. The result is converted to dst's type. Where that type is
narrower than f32, a row may build a cheaper body: `narrow_body` (softplus, mish,
elu, selu, silu, sigmoid and silu_and_mul on the special function unit's
approximations: within one ulp of the narrow result) or, where every operand is fp8,
`fp8_body` (division: the same fp8 results); a fused step takes the body its unfused op
would (`body_for`).

Output rules: "same" (dst has the promoted type), "float" (as "same", but
integer and bool inputs promote to f32: exp, div), "bool" (a predicate), and
"any" (the cast row: dst is any type).

Indexed rows (`indexed=True`: the generators, dropout's random stream) also see
where each element is. Their last input is the index base, an i64 scalar kept
in its type; the lowering hands the body, in its place, the element's
position: base + the element's linear index in dst's row-major order (an i64,
a vector of them for a vector access, lane l at position + l). The library's
programs pass the position of the piece's first element in the whole output
as the base (ops/program.py), so the body sees the element's index in the
whole array, whatever the launch configuration. (Last, because the dialect's
variadic third slot takes operands of one type: the base shares it with the
rows' other i64 numbers.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

import numpy as np

from tile_mlir.dtypes import (
    DTYPES,
    FLOATS,
    FP8,
    HALVES,
    INTS,
    LIBRARY_FLOATS,
    opmath,
    promote_types,
)
from tile_mlir.op_table import refs as r
from tile_mlir.op_table.lazy import Body
from tile_mlir.op_table.lazy import bodies as b
from tile_mlir.op_table.refs import Reference

F = LIBRARY_FLOATS  # f32, f16, bf16, f8e4m3, f8e5m2
FI = F + INTS
FIB = (*FI, "bool")
IB = (*INTS, "bool")
NARROW = (*HALVES, *FP8)
"""The float results narrower than f32 (a row's narrow_body serves them)."""

FAMILIES = ("unary_math", "binary_arith", "activation", "fused_gated", "comparison", "bitwise",
            "logical", "special", "rope", "dropout", "alibi", "sinusoidal")
"""The operator library's families, in seed 004's order. A public op is a registry row
of one of them, or a `Composite`; other rows are the compiler's primitives (fill,
copy, fma...) and the library's internal helpers."""


@dataclass(frozen=True)
class EwOp:
    name: str
    arity: int
    body: Body
    ref: Reference
    dtypes: tuple[str, ...] = FLOATS  # the types the op is defined on (its results')
    out: str = "same"  # "same", "float", "bool" or "any" (see the module docstring)
    family: str = "primitive"
    native: tuple[str, ...] = ()  # narrow types the body may run on directly
    keep: tuple[int, ...] = ()  # inputs kept in their own type (tested for truth)
    scalar_only: tuple[int, ...] = ()  # inputs that must be scalars (fill's value)
    exact: bool = False  # exact or correctly rounded: bit for bit torch's result
    # torch rounds an intermediate to the result's type (scalar_t arithmetic): the body
    # and the reference take that type's name as the keyword `storage`
    storage: bool = False
    indexed: bool = False  # the last input is the index base; the body gets the position there
    kept_types: tuple[tuple[int, str], ...] = ()  # (input, the scalar type it must have)
    # where every input and the result are fp8: a cheaper body whose results round to the
    # same fp8 values (its docstring says why; the gpu tier checks every input pair)
    fp8_body: Body | None = None
    # where the result is narrower than f32 (f16, bf16, fp8): a cheaper body whose
    # results are within one ulp of that type (its docstring says why; the gpu tier
    # checks every 16-bit input)
    narrow_body: Body | None = None

    def promoted(self, inputs: Sequence[str], dst: str) -> str:
        """The type the inputs (and dst, unless a predicate) promote to."""
        data = [d for i, d in enumerate(inputs) if i not in self.keep]
        if self.out in ("same", "float"):
            data.append(dst)
        common = reduce(promote_types, data) if data else dst
        if self.out == "float" and DTYPES[common].kind != "float":
            return "f32"
        return common

    def compute_dtype(self, inputs: Sequence[str], dst: str) -> str:
        """The element type the body runs on, for these input and dst types."""
        common = self.promoted(inputs, dst)
        data = [d for i, d in enumerate(inputs) if i not in self.keep] + [dst]
        if common in self.native and all(d == common for d in data):
            return common
        return opmath(common)

    def storage_type(self, dst: str) -> str | None:
        """The type a `storage` row rounds its intermediates to, for a dst type: dst's
        (torch's scalar_t), except for fp8, which torch has no kernels for: there the
        library's rule holds (compute in f32, round once)."""
        return dst if self.storage and dst not in FP8 else None

    def body_for(self, inputs: Sequence[str], dst: str) -> Body:
        """The body for these input and dst types: fp8_body where all are fp8,
        narrow_body where dst is narrower than f32."""
        if self.fp8_body is not None and dst in FP8 and all(d in FP8 for d in inputs):
            return self.fp8_body
        if self.narrow_body is not None and dst in NARROW:
            return self.narrow_body
        return self.body

    def kept_type(self, n: int) -> str | None:
        """The type scalar input n must have (a generator's seed, sizes, base...), if any."""
        return dict(self.kept_types).get(n)

    @property
    def public(self) -> bool:
        """One of the operator library's ops (tile_mlir.ops lists these)."""
        return self.family in FAMILIES


def _unary_float(name: str, body: Body, ref: Reference, exact: bool = False) -> EwOp:
    return EwOp(name, 1, body, ref, F, "float", "unary_math", exact=exact)


def _unary(name: str, body: Body, ref: Reference, native: tuple[str, ...] = ()) -> EwOp:
    return EwOp(name, 1, body, ref, FI, "same", "unary_math", native, exact=True)


def _binary(name: str, body: Body, ref: Reference, *, dtypes: tuple[str, ...] = FI,
            native: tuple[str, ...] = (), exact: bool = True) -> EwOp:
    return EwOp(name, 2, body, ref, dtypes, "same", "binary_arith", native, exact=exact)


def _activation(name: str, arity: int = 1, *, scalar_only: tuple[int, ...] = (),
                native: tuple[str, ...] = (), exact: bool = False,
                narrow: Body | None = None) -> EwOp:
    return EwOp(name, arity, getattr(b, name), getattr(r, name), F, "same", "activation",
                native, scalar_only=scalar_only, exact=exact, narrow_body=narrow)


def _gated(name: str, activation: Body, narrow: Body | None = None) -> EwOp:
    """act(a) * b: the library applies it to the two halves of one input (`narrow`: the
    activation's narrow body, for results narrower than f32)."""
    return EwOp(name, 2, b.gated(activation), getattr(r, name), F, "same", "fused_gated",
                narrow_body=b.gated(narrow) if narrow else None)


def _compare(name: str) -> EwOp:
    return EwOp(name, 2, b.comparison(name), getattr(r, name), FIB, "bool", "comparison",
                exact=True)


def _bitwise(name: str, arity: int, body: Body) -> EwOp:
    return EwOp(name, arity, body, getattr(r, name), IB, "same", "bitwise", exact=True)


def _logical(name: str, arity: int, body: Body) -> EwOp:
    return EwOp(name, arity, body, getattr(r, name), FIB, "bool", "logical", exact=True)


def _predicate(name: str) -> EwOp:
    return EwOp(name, 1, b.classify(name), getattr(r, name), FIB, "bool", "special",
                exact=True)


def division_magic(divisor: int) -> int:
    """M, as the i64 of its bits, such that a // d = mulhi(2a, M) >> ceil(log2 d) for every
    0 <= a < 2^63 (1 <= d < 2^63; mulhi the high word of the 128-bit product): M =
    ceil(2^(63 + l) / d), l = ceil(log2 d), under 2^64. With M d = 2^(63+l) + e, 0 <= e <
    d <= 2^l: a M / 2^(63+l) = a / d + a e / (d 2^(63+l)), whose second term stays under
    1/d (a e < 2^(63+l)), so the floor is a // d. bodies.alibi's division by its length."""
    if not 1 <= divisor < 1 << 63:
        raise ValueError(f"division_magic: the divisor {divisor} is not in [1, 2^63)")
    magic = -(-(1 << (63 + (divisor - 1).bit_length())) // divisor)
    return magic - (1 << 64) if magic >= 1 << 63 else magic


GENERATED = ("f32", "f16", "bf16")
"""The position encodings' types (fp8 has no use for a table of encodings)."""


def _generator(name: str, arity: int, body: Body, ref: Reference, *, dtypes: tuple[str, ...],
               out: str, scalars: tuple[int, ...], kept: tuple[int, ...],
               exact: bool = True, floats: tuple[int, ...] = ()) -> EwOp:
    """An indexed internal row: inputs `scalars` must be scalars, those `kept` keep their
    own type: i64, or f64 for those in `floats` (the bodies compute with them so); so
    does the index base, input arity - 1, an i64."""
    base = arity - 1
    types = tuple((n, "f64" if n in floats else "i64") for n in kept)
    return EwOp(name, arity, body, ref, dtypes, out, "internal", keep=(*kept, base),
                scalar_only=(*scalars, base), exact=exact, indexed=True, kept_types=types)


_ROWS = (
    # unary_math: float functions (integer inputs compute in f32), then the ops
    # exact on every type
    _unary_float("exp", b.math_op("exp"), r.exp),
    _unary_float("log", b.math_op("log"), r.log),
    _unary_float("sqrt", b.sqrt, r.sqrt, exact=True),
    _unary_float("rsqrt", b.math_op("rsqrt"), r.rsqrt),
    _unary("abs", b.abs_, r.abs_, native=HALVES),
    _unary("neg", b.neg, r.neg, native=HALVES),
    _unary_float("reciprocal", b.reciprocal, r.reciprocal, exact=True),
    _unary("sign", b.sign, r.sign),
    _unary_float("sin", b.math_op("sin"), r.sin),
    _unary_float("cos", b.math_op("cos"), r.cos),
    _unary("floor", b.rounding("floor"), r.floor),
    _unary("ceil", b.rounding("ceil"), r.ceil),
    _unary("round", b.rounding("roundeven"), r.round_),
    _unary("trunc", b.rounding("trunc"), r.trunc),
    _unary_float("erf", b.math_op("erf"), r.erf),
    _unary_float("log1p", b.math_op("log1p"), r.log1p),
    _unary_float("expm1", b.math_op("expm1"), r.expm1),
    # binary_arith
    _binary("add", b.by_kind("addf", "addi"), r.add, native=HALVES),
    _binary("sub", b.by_kind("subf", "subi"), r.sub, native=HALVES),
    _binary("mul", b.by_kind("mulf", "muli"), r.mul, native=HALVES),
    EwOp("div", 2, b.arith_op("divf"), r.div, F, "float", "binary_arith", exact=True,
         fp8_body=b.div_fp8),
    _binary("remainder", b.remainder, r.remainder),
    _binary("pow", b.pow_, r.pow_, exact=False),
    EwOp("floor_divide", 2, b.floor_divide, r.floor_divide, FI, "same", "binary_arith",
         exact=True, storage=True),
    EwOp("lerp", 3, b.lerp, r.lerp, F, "same", "binary_arith"),
    _binary("maximum", b.maximum, r.maximum, dtypes=FIB, native=HALVES),
    _binary("minimum", b.minimum, r.minimum, dtypes=FIB, native=HALVES),
    # activation: torch.nn.functional's, on floats, computed in f32 for the narrow ones
    # (torch's opmath) with torch's CUDA formulas; scalar parameters are kernel arguments
    _activation("relu", native=HALVES, exact=True),
    _activation("gelu"),
    _activation("silu", narrow=b.silu_narrow),
    _activation("sigmoid", narrow=b.sigmoid_narrow),
    _activation("tanh"),
    _activation("leaky_relu", 2, scalar_only=(1,), exact=True),
    _activation("elu", 2, scalar_only=(1,), narrow=b.elu_narrow),
    _activation("selu", narrow=b.selu_narrow),
    _activation("hardswish", exact=True),
    _activation("hardsigmoid", exact=True),
    _activation("hardtanh", 3, scalar_only=(1, 2), exact=True),
    _activation("softplus", 3, scalar_only=(1, 2), narrow=b.softplus_narrow),
    _activation("mish", narrow=b.mish_narrow),
    _activation("prelu", 2, exact=True),  # weight: (C,) along dim 1 or (1,), by strides
    EwOp("gelu_tanh", 1, b.gelu_tanh, r.gelu_tanh, F, "same", "internal"),  # approximate="tanh"
    # fused_gated: act(x[..., :N]) * x[..., N:] (vLLM, FlashInfer), rounded once
    _gated("silu_and_mul", b.silu, b.silu_narrow),
    _gated("gelu_and_mul", b.gelu),
    _gated("gelu_tanh_and_mul", b.gelu_tanh),
    # comparison: NaN compares false, except ne
    *(_compare(name) for name in ("eq", "ne", "gt", "lt", "ge", "le")),
    # bitwise, on integers and bools
    _bitwise("bitwise_and", 2, b.arith_op("andi")),
    _bitwise("bitwise_or", 2, b.arith_op("ori")),
    _bitwise("bitwise_xor", 2, b.arith_op("xori")),
    _bitwise("bitwise_not", 1, b.bitwise_not),
    # logical: any type in, bool out (nonzero and NaN are true)
    _logical("logical_not", 1, b.logical_not),
    _logical("logical_and", 2, b.logical("andi")),
    _logical("logical_or", 2, b.logical("ori")),
    # special
    EwOp("where", 3, b.where, r.where, FIB, "same", "special", keep=(0,), exact=True,
         native=NARROW),
    EwOp("clamp", 3, b.clamp, r.clamp, FI, "same", "special", exact=True),
    EwOp("masked_fill", 3, b.masked_fill, r.masked_fill, FIB, "same", "special", keep=(1,),
         exact=True),
    EwOp("nan_to_num", 4, b.nan_to_num, r.nan_to_num, FIB, "same", "special",
         scalar_only=(1, 2, 3), exact=True),
    *(_predicate(name) for name in ("isnan", "isinf", "isfinite")),
    # internal helpers of the operator library
    EwOp("add_alpha", 3, b.add_alpha, r.add_alpha, FI, "same", "internal"),
    EwOp("div_trunc", 2, b.div_trunc, r.div_trunc, FI, "same", "internal", exact=True,
         storage=True),
    EwOp("div_trunc_scalar", 2, b.div_trunc_scalar, r.div_trunc_scalar, F, "same", "internal",
         scalar_only=(1,), exact=True),
    EwOp("floor_divide_scalar", 3, b.floor_divide_scalar, r.floor_divide_scalar, F, "same",
         "internal", scalar_only=(1, 2), exact=True, storage=True),
    EwOp("pow_scalar", 2, b.pow_scalar, r.pow_scalar, FI, "same", "internal",
         scalar_only=(1,)),
    EwOp("cast", 1, b.identity, r.identity, tuple(DTYPES), "any", "internal", exact=True),
    # rope: a pair (x1, x2) rotated by (cos, sin), the two outputs (ops/rope.py)
    EwOp("rope_first", 4, b.rope_first, r.rope_first, ("f32", *HALVES), "same", "internal"),
    EwOp("rope_second", 4, b.rope_second, r.rope_second, ("f32", *HALVES), "same", "internal"),
    # generators (indexed rows, ops/generators.py): dropout's Philox stream and the
    # position encodings; the arguments are in bodies.py
    _generator("dropout_philox", 6, b.dropout, r.dropout, dtypes=F, out="same",
               scalars=(1, 2, 3, 4), kept=(2, 3, 4)),
    _generator("dropout_mask", 4, b.dropout_mask, r.dropout_mask, dtypes=("bool",),
               out="bool", scalars=(0, 1, 2), kept=(0, 1, 2)),
    _generator("alibi_bias", 4, b.alibi, r.alibi, dtypes=GENERATED, out="same",
               scalars=(0, 1, 2), kept=(0, 1, 2), exact=False),
    _generator("sinusoidal_pe", 4, b.sinusoidal, r.sinusoidal, dtypes=GENERATED, out="same",
               scalars=(0, 1, 2), kept=(0, 1, 2), exact=False, floats=(0, 1)),
    # the compiler's primitives
    # tail_fill(x, value, limit, base): x where the element's position is below limit,
    # else value (indexed): a register tile's elements past a row's end, set again after
    # ops wrote them (layer norm's (x - mean)^2 back to 0 past the row)
    EwOp("tail_fill", 4, b.tail_fill, r.tail_fill, FI, "same", keep=(2, 3),
         scalar_only=(1, 2, 3), exact=True, indexed=True),
    # exp_fast(x): e^x by the special function unit (ex2.approx; f32 only): softmax's
    EwOp("exp_fast", 1, b.exp_fast, r.exp, ("f32",), "same"),
    EwOp("fma", 3, b.fma, r.fma),
    EwOp("zero", 0, b.zero, r.zero),
    EwOp("fill", 1, b.identity, r.identity, scalar_only=(0,)),
    EwOp("copy", 1, b.identity, r.identity, dtypes=tuple(DTYPES), native=tuple(DTYPES)),
)

ELEMENTWISE: dict[str, EwOp] = {row.name: row for row in _ROWS}

ALIASES: dict[str, str] = {"max": "maximum", "min": "minimum"}
"""The seeds' names for ops whose registry name follows torch."""


def lookup(name: str) -> EwOp | None:
    """The row for an op name or alias, None if there is none."""
    return ELEMENTWISE.get(ALIASES.get(name, name))


def public_ops() -> list[EwOp]:
    """The operator library's ops that are one registry row each, in the table's order."""
    return [row for row in _ROWS if row.public]


@dataclass(frozen=True)
class Composite:
    """An op of the library that is not one registry row applied to its arguments: a
    kernel of its own shape (RoPE's rotation of pairs), or rows applied to arrays and
    numbers the library makes (dropout's random stream, the position encodings)."""

    name: str
    family: str
    dtypes: tuple[str, ...]
    rows: tuple[str, ...]  # the registry rows its kernels apply
    summary: str


_ROPE_ROWS = ("rope_first", "rope_second", "copy", "fill")
_ROPE_DTYPES = ("f32", "f16", "bf16")

COMPOSITES: tuple[Composite, ...] = (
    # rope: query and key rotated by the positions' angles from a cos/sin cache
    Composite("rope_neox", "rope", _ROPE_DTYPES, _ROPE_ROWS,
              "neox pairs (x[i], x[i + rotary_dim/2])"),
    Composite("rope_non_neox", "rope", _ROPE_DTYPES, _ROPE_ROWS,
              "GPT-J pairs (x[2i], x[2i+1])"),
    Composite("rope_llama31", "rope", _ROPE_DTYPES, _ROPE_ROWS,
              "Llama 3.1's frequency scaling"),
    Composite("rope_yarn", "rope", _ROPE_DTYPES, _ROPE_ROWS, "YaRN's frequencies and mscale"),
    Composite("rope_longrope", "rope", _ROPE_DTYPES, _ROPE_ROWS,
              "LongRoPE's per-pair rescale factors (Phi-3)"),
    # dropout and the position encodings: indexed rows (ops/generators.py)
    Composite("dropout", "dropout", F, ("dropout_philox", "dropout_mask"),
              "zeroes elements with probability p (Philox 4x32-10 in the kernel), scales "
              "the rest by 1/(1-p)"),
    Composite("alibi", "alibi", GENERATED, ("alibi_bias",),
              "ALiBi attention bias (num_heads, seq_len): slope[h] * j"),
    Composite("sinusoidal", "sinusoidal", GENERATED, ("sinusoidal_pe",),
              "sinusoidal position encoding (positions, dim), sin and cos interleaved"),
)
"""The library's composite ops, in seed 004's order within their families."""


def library_ops() -> list[EwOp | Composite]:
    """Every op of the operator library, family by family (FAMILIES' order)."""
    ops: list[EwOp | Composite] = [*public_ops(), *COMPOSITES]
    return sorted(ops, key=lambda op: FAMILIES.index(op.family))


# ------------------------------------------------------------- reductions


@dataclass(frozen=True)
class ReduceKind:
    """A `tile.reduce` kind: how two partial results combine, and where they start.

    Most kinds fold one value per element with an elementwise row (`combine`). A kind
    of `arity` k > 1 folds k-tuples: tile.reduce takes k sources and k destinations, the
    element i of each source together making the i-th tuple, and `merge` (a body of
    bodies.py taking two tuples, giving one) combines two partial tuples. These are the
    statistics that a row op needs in one pass over its partials, where two reductions
    would need two rounds of communication: online softmax's (max, sum of exp) and
    Welford's (count, mean, M2), merged as Chan et al. do."""

    name: str
    combine: str  # the elementwise row that combines two partials ("" for a tuple kind)
    identity: tuple[float, ...]  # what a lane without elements contributes
    ref: Callable[..., Any]  # NumPy reduction (array(s), axis=..., keepdims=...) in float64
    merge: Body | None = None  # a tuple kind's combine: (a, b) -> a tuple

    @property
    def arity(self) -> int:
        return len(self.identity)


def _online_softmax(m: np.ndarray, s: np.ndarray, axis: Any = None, keepdims: bool = False
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(max m, sum of s * exp(m - max m)) over `axis`: a term whose m is the max counts
    s itself (so that -inf maxima stay exact)."""
    top = np.max(m, axis=axis, keepdims=True)
    with np.errstate(invalid="ignore", over="ignore"):
        factor = np.where(m == top, 1.0, np.exp(m - top))
    total = np.sum(s * factor, axis=axis, keepdims=keepdims)
    return (top if keepdims else np.squeeze(top, axis=axis)), total


def _welford(n: np.ndarray, mean: np.ndarray, m2: np.ndarray, axis: Any = None,
             keepdims: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(count, mean, M2) of the union of the partial statistics over `axis`."""
    count = np.sum(n, axis=axis, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        total = np.where(count > 0, np.sum(n * mean, axis=axis, keepdims=True) /
                         np.where(count > 0, count, 1.0), 0.0)
    m2_total = np.sum(m2 + n * (mean - total) ** 2, axis=axis, keepdims=True)
    if keepdims:
        return count, total, m2_total
    return tuple(np.squeeze(a, axis=axis) for a in (count, total, m2_total))  # type: ignore[return-value]


REDUCE_KINDS: dict[str, ReduceKind] = {
    k.name: k
    for k in (
        ReduceKind("sum", "add", (0.0,), np.sum),
        ReduceKind("prod", "mul", (1.0,), np.prod),
        # maximum/minimum propagate NaN, as torch.amax / torch.amin do
        ReduceKind("max", "maximum", (float("-inf"),), np.max),
        ReduceKind("min", "minimum", (float("inf"),), np.min),
        # pairs (m, s): the max of m, and the sum of s * exp(m - that max)
        ReduceKind("online_softmax", "", (float("-inf"), 0.0), _online_softmax,
                   b.online_softmax_merge),
        # triples (n, mean, M2) of disjoint parts: those of their union
        ReduceKind("welford", "", (0.0, 0.0, 0.0), _welford, b.welford_merge),
    )
}
