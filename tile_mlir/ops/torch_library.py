"""torch.compile support: the library's ops as torch custom ops, registered on first use.

    import torch
    from tile_mlir import ops

    tops = ops.torch_ops()          # registers torch.ops.tile_mlir.* once (needs torch)

    @torch.compile(fullgraph=True)
    def block(x, bias):
        return tops.sum(tops.where(tops.gt(x, 0), tops.exp(x), bias), dim=-1)

Each op of the table below becomes one or more `torch.library.custom_op`s in the
`tile_mlir` namespace, each with a fake implementation (`register_fake`) that
gives the result's shape, dtype and device as the library computes them
(elementwise.result_type for the dtype, broadcasting for the shape), so that
dynamo and inductor trace through them and call the real op at run time. The
functions of `torch_ops()` have the library's signatures and pick the custom op
that fits the arguments: a custom op's schema has fixed types, so an operand
that may be an array or a number (`Tensor|Scalar`) makes one op per choice,
named by suffix (`add` takes two tensors, `add_ts` a tensor and a number,
`add_st` a number and a tensor; `where_ss` two numbers), and dropout's
`return_mask=True` is the op `dropout_mask`.

Nothing here imports torch until `torch_ops()` is called: the library keeps working
without torch, and `import tile_mlir.ops` does not import it.

Ops are grouped by the form of their signature (`Form`: its parameters, how its
result's meta follows from the arguments); an op is one line of `OPS`: its name
(the function of tile_mlir.ops it calls) and its form, with any parameters of
its own.

An op that writes arrays in place (fused_add_rms_norm: its input and residual) says so
in its form (`mutates`, each such parameter's alias set: `Tensor(a!) input`) and returns
nothing; torch.compile functionalizes it.

A fused function (ops.fuse) becomes custom ops the same way, on demand
(`tops.fuse(fn)`, `ops.fuse(fn).torch_op`): its positional parameters are operands
(`Tensor|Scalar`, an op per choice), its static ones typed by their defaults; the fake
implementation traces the function on the arguments' meta (fuse.Fused.meta).

The custom ops have no autograd formula (inference kernels): a backward through
one raises torch's "no autograd formula" error.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from tile_mlir import op_table
from tile_mlir.dtypes import DTYPES
from tile_mlir.ops import args as library_args
from tile_mlir.ops import elementwise, promotion, reductions

if TYPE_CHECKING:
    from tile_mlir.ops.fuse import Fused

NAMESPACE = "tile_mlir"


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()
"""The default of a parameter that has none."""

TS = "Tensor|Scalar"
"""An operand that is an array or a number: one custom op per choice."""
OPTIONAL_TS = "Tensor?|Scalar?"


@dataclass(frozen=True)
class Param:
    """One parameter of an op, as the library function and the custom op's schema have it.

    `type` is a schema type ("Tensor", "Scalar", "float", "int[1]?", "str?", ...),
    TS or OPTIONAL_TS (a variant per choice), or "Device" (a device, carried in the
    schema by an empty tensor on it: an op needs a tensor argument to dispatch).
    Arrays are passed to the library function by position unless `keyword`; every
    other parameter by name."""

    name: str
    type: str
    default: Any = REQUIRED
    keyword: bool = False  # keyword-only in the library's signature
    promotes: bool = True  # an operand that takes part in type promotion
    by_name: bool = False  # an array the library function takes by name (after others)
    alias: str = ""  # a tensor the op writes in place: its alias set in the schema (a!)

    @property
    def variable(self) -> bool:
        return "|" in self.type

    @property
    def operand(self) -> bool:
        """An array (or an array-or-number): broadcast into the result's shape."""
        return self.type.startswith("Tensor")

    @property
    def by_position(self) -> bool:
        return self.operand and not self.keyword and not self.by_name

    def schema(self, choice: str) -> str:
        """`type name[=default]` in the schema, for a variant's choice ("t" or "s")."""
        if self.variable:
            tensor, scalar = self.type.split("|")
            kind = tensor if choice == "t" else scalar
        else:
            kind = "Tensor" if self.type == "Device" else self.type
        if self.alias:
            kind = f"{kind}({self.alias}!)"
        text = f"{kind} {self.name}"
        return text if self.default is REQUIRED else f"{text}={_schema_default(self.default)}"


def _schema_default(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, str):
        return f"'{value}'"
    return repr(value)


Fake = Callable[["Entry", dict[str, Any]], Any]
"""The meta of an op's result from its arguments (fake tensors and numbers, by name)."""


@dataclass(frozen=True)
class Form:
    """A shape of signature: its parameters, what it returns and how the result's
    meta follows from the arguments. `selector`: a bool parameter that is not in
    the schema but picks the op (dropout's return_mask: `<name>_<selector>`'s
    schema returns `selected_returns`)."""

    name: str
    params: tuple[Param, ...]
    fake: Fake
    returns: str = "Tensor"
    selector: Param | None = None
    selected_returns: str = ""
    may_alias: bool = False  # the library may hand an input back: copy it (custom ops may not)
    mutates: tuple[str, ...] = ()  # the parameters written in place (their Param.alias)


@dataclass(frozen=True)
class Entry:
    """One op: the tile_mlir.ops function `name` in `form`, with `extra` parameters after
    the form's. `row`: the registry row whose result rule gives the dtype, from the
    arguments (default: the op's own row where there is one, else the first array's
    dtype). `shape`: a generative op's result shape from its arguments."""

    name: str
    form: Form
    extra: tuple[Param, ...] = ()
    row: Callable[[Mapping[str, Any]], str] | None = None
    shape: Callable[[Mapping[str, Any]], tuple[Any, ...]] | None = None

    @property
    def params(self) -> tuple[Param, ...]:
        return self.form.params + self.extra


# ------------------------------------------------------------------ fakes


def _torch() -> Any:
    import torch

    return torch


_LIBRARY_DTYPE = {d.numpy: name for name, d in DTYPES.items()}


def _library_dtype(tensor: Any, name: str) -> str:
    text = str(tensor.dtype).removeprefix("torch.")
    dtype = _LIBRARY_DTYPE.get(text)
    if dtype is None:
        raise TypeError(f"argument '{name}': element type {text} is not supported")
    return dtype


def _number(value: Any) -> Any:
    """A traced number (SymInt, SymFloat, SymBool) as a Python number of its type:
    promotion only looks at the type."""
    torch = _torch()
    if isinstance(value, torch.SymBool):
        return True
    if isinstance(value, torch.SymInt):
        return 1
    if isinstance(value, torch.SymFloat):
        return 1.0
    return value


def _described(value: Any, name: str) -> Any:
    """An argument as the library's promotion sees it: a tensor as an Array of its dtype
    and shape (a fake tensor has no memory to describe), a number as a Scalar."""
    if isinstance(value, _torch().Tensor):
        return library_args.Array(name, "torch", _library_dtype(value, name),
                                  tuple(value.shape), (), 0, 0)
    return library_args.classify(_number(value), name)


def _operands(entry: Entry, args: Mapping[str, Any]) -> list[tuple[Param, Any]]:
    return [(p, args[p.name]) for p in entry.params if p.operand and args[p.name] is not None]


def _device(tensors: Sequence[Any]) -> Any:
    """The result's device: the first array's, a 0-d CPU tensor (a number to the
    library) counting only when there is no other."""
    for t in tensors:
        if t.dim() or t.device.type != "cpu":
            return t.device
    return tensors[0].device


def _result_dtype(entry: Entry, args: Mapping[str, Any], operands: list[tuple[Param, Any]]
                  ) -> Any:
    torch = _torch()
    row = entry.row(args) if entry.row is not None else entry.name
    first = next(v for _, v in operands if isinstance(v, torch.Tensor))
    if row not in op_table.ELEMENTWISE:
        return first.dtype
    described = [elementwise.In(_described(v, p.name), promotes=p.promotes) for p, v in operands]
    return getattr(torch, DTYPES[elementwise.result_type(row, described)].numpy)


def elementwise_fake(entry: Entry, args: dict[str, Any]) -> Any:
    """Broadcast shape of the array operands; dtype by the library's promotion."""
    torch = _torch()
    operands = _operands(entry, args)
    tensors = [v for _, v in operands if isinstance(v, torch.Tensor)]
    shape = torch.broadcast_shapes(*(t.shape for t in tensors))
    dtype = _result_dtype(entry, args, operands)
    return torch.empty(shape, dtype=dtype, device=_device(tensors))


def like_input_fake(entry: Entry, args: dict[str, Any]) -> Any:
    """The first operand's shape (prelu: its weight is along dim 1, not broadcast)."""
    torch = _torch()
    operands = _operands(entry, args)
    first = operands[0][1]
    return torch.empty(first.shape, dtype=_result_dtype(entry, args, operands),
                       device=first.device)


def gated_fake(entry: Entry, args: dict[str, Any]) -> Any:
    """(..., 2N) -> (..., N): the gate and the value halves of the last dimension."""
    torch = _torch()
    x = args["input"]
    torch._check(x.dim() >= 1 and x.shape[-1] % 2 == 0,
                 lambda: f"{entry.name}: the last dimension must be even, got {tuple(x.shape)}")
    dtype = _result_dtype(entry, args, _operands(entry, args))
    return torch.empty((*x.shape[:-1], x.shape[-1] // 2), dtype=dtype, device=x.device)


def rope_fake(entry: Entry, args: dict[str, Any]) -> Any:
    """(query, key) rotated: each as it came."""
    torch = _torch()
    return tuple(torch.empty(t.shape, dtype=t.dtype, device=t.device)
                 for t in (args["query"], args["key"]))


def dropout_fake(entry: Entry, args: dict[str, Any]) -> Any:
    """Like the input; with return_mask, a bool mask of its shape too."""
    torch = _torch()
    x = args["input"]
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if not args.get("return_mask"):
        return out
    return out, torch.empty(x.shape, dtype=torch.bool, device=x.device)


def generative_fake(entry: Entry, args: dict[str, Any]) -> Any:
    """A made-up array: the entry's shape, the dtype asked, on the carrier's device."""
    torch = _torch()
    assert entry.shape is not None, f"{entry.name}: a generative op needs its shape rule"
    return torch.empty(entry.shape(args), dtype=args["dtype"], device=args["device"].device)


def reduction_fake(entry: Entry, args: dict[str, Any]) -> Any:
    """The reduced dims dropped (kept as 1 with keepdim); the input's dtype."""
    torch = _torch()
    x = args["input"]
    name = str(x.dtype).removeprefix("torch.")
    if _LIBRARY_DTYPE.get(name) not in reductions.SUPPORTED:
        raise TypeError(f"{entry.name}: argument 'input' has element type {name}; reductions "
                        f"take {', '.join(DTYPES[d].numpy for d in reductions.SUPPORTED)}")
    dims = reductions.normalize_dims(args["dim"], x.dim())
    shape = [1 if i in dims else s for i, s in enumerate(x.shape)] if args["keepdim"] else \
        [s for i, s in enumerate(x.shape) if i not in dims]
    dtype = x.dtype if args.get("dtype") is None else args["dtype"]
    return torch.empty(shape, dtype=dtype, device=x.device)


def rows_fake(entry: Entry, args: dict[str, Any]) -> Any:
    """A fused row op's result: the input's shape, its dtype (or `dtype`)."""
    torch = _torch()
    x = args["input"]
    dtype = args.get("dtype") or x.dtype
    return torch.empty(x.shape, dtype=dtype, device=x.device)


def in_place_fake(entry: Entry, args: dict[str, Any]) -> Any:
    """An op that writes its arguments in place and returns nothing."""
    return None


# ------------------------------------------------------------------ forms

INPUT = Param("input", "Tensor")

UNARY = Form("unary", (INPUT,), elementwise_fake)
BINARY = Form("binary", (Param("input", TS), Param("other", TS)), elementwise_fake)
POWER = Form("power", (Param("input", TS), Param("exponent", TS)), elementwise_fake)
LERP = Form("lerp", (INPUT, Param("end", "Tensor"), Param("weight", TS)), elementwise_fake)
WHERE = Form("where", (Param("condition", "Tensor", promotes=False), Param("input", TS),
                       Param("other", TS)), elementwise_fake)
CLAMP = Form("clamp", (INPUT, Param("min", OPTIONAL_TS, None), Param("max", OPTIONAL_TS, None)),
             elementwise_fake)
MASKED_FILL = Form("masked_fill", (INPUT, Param("mask", "Tensor", promotes=False),
                                   Param("value", "Scalar")), elementwise_fake)
NAN_TO_NUM = Form("nan_to_num", (INPUT, Param("nan", "float", 0.0), Param("posinf", "float?", None),
                                 Param("neginf", "float?", None)), elementwise_fake)
REDUCTION = Form("reduction", (Param("input", "Tensor"), Param("dim", "int[1]?", None),
                               Param("keepdim", "bool", False),
                               Param("dtype", "ScalarType?", None, keyword=True)),
                 reduction_fake)
# part 2
WEIGHTED = Form("weighted", (INPUT, Param("weight", "Tensor")), like_input_fake)
GATED = Form("gated", (INPUT,), gated_fake)
ROPE = Form("rope", (Param("query", "Tensor"), Param("key", "Tensor"),
                     Param("positions", "Tensor", promotes=False),
                     Param("cos_sin_cache", "Tensor", keyword=True, promotes=False),
                     Param("rotary_dim", "int", keyword=True)),
            rope_fake, returns="(Tensor, Tensor)", may_alias=True)
DROPOUT = Form("dropout", (INPUT, Param("p", "float", 0.5), Param("training", "bool", True),
                           Param("seed", "int?", None), Param("offset", "int", 0)),
               dropout_fake, selector=Param("return_mask", "bool", False),
               selected_returns="(Tensor, Tensor)", may_alias=True)
GENERATIVE_ALIBI = Form("generative", (Param("num_heads", "int"), Param("seq_len", "int"),
                                        Param("dtype", "ScalarType"), Param("device", "Device")),
                        generative_fake)
GENERATIVE_SINUSOIDAL = Form("generative", (Param("positions", "int"), Param("dim", "int"),
                                            Param("dtype", "ScalarType"),
                                            Param("device", "Device"),
                                            Param("base", "float", 10000.0)), generative_fake)

SOFTMAX = Form("softmax", (INPUT, Param("dim", "int", -1),
                           Param("dtype", "ScalarType?", None, keyword=True)), rows_fake)
_SHAPE = Param("normalized_shape", "int[]")
_WEIGHT = Param("weight", "Tensor?", None, by_name=True)
RMS_NORM = Form("rms_norm", (INPUT, _SHAPE, _WEIGHT, Param("eps", "float?", None)), rows_fake)
LAYER_NORM = Form("layer_norm", (INPUT, _SHAPE, _WEIGHT,
                                 Param("bias", "Tensor?", None, by_name=True),
                                 Param("eps", "float", 1e-5)), rows_fake)
FUSED_ADD_RMS_NORM = Form("fused_add", (Param("input", "Tensor", alias="a"),
                                        Param("residual", "Tensor", alias="b"),
                                        Param("weight", "Tensor"), Param("eps", "float")),
                          in_place_fake, returns="()", mutates=("input", "residual"))

ALPHA = Param("alpha", "Scalar", 1, keyword=True)


def _div_row(args: Mapping[str, Any]) -> str:
    """div's result rule: true division makes integers f32, rounded division keeps them."""
    return {"trunc": "div_trunc", "floor": "floor_divide"}.get(args["rounding_mode"], "div")


def _float(name: str, default: float) -> Param:
    return Param(name, "float", default)


OPS: tuple[Entry, ...] = (
    # unary_math
    Entry("exp", UNARY),
    Entry("log", UNARY),
    Entry("sqrt", UNARY),
    Entry("rsqrt", UNARY),
    Entry("abs", UNARY),
    Entry("neg", UNARY),
    Entry("reciprocal", UNARY),
    Entry("sign", UNARY),
    Entry("sin", UNARY),
    Entry("cos", UNARY),
    Entry("floor", UNARY),
    Entry("ceil", UNARY),
    Entry("round", UNARY, (Param("decimals", "int", 0, keyword=True),)),
    Entry("trunc", UNARY),
    Entry("erf", UNARY),
    Entry("log1p", UNARY),
    Entry("expm1", UNARY),
    # binary_arith
    Entry("add", BINARY, (ALPHA,)),
    Entry("sub", BINARY, (ALPHA,)),
    Entry("mul", BINARY),
    Entry("div", BINARY, (Param("rounding_mode", "str?", None, keyword=True),), row=_div_row),
    Entry("remainder", BINARY),
    Entry("pow", POWER),
    Entry("floor_divide", BINARY),
    Entry("lerp", LERP),
    Entry("maximum", BINARY),
    Entry("minimum", BINARY),
    # activation
    Entry("relu", UNARY),
    Entry("gelu", UNARY, (Param("approximate", "str", "none"),)),
    Entry("silu", UNARY),
    Entry("sigmoid", UNARY),
    Entry("tanh", UNARY),
    Entry("leaky_relu", UNARY, (_float("negative_slope", 0.01),)),
    Entry("elu", UNARY, (_float("alpha", 1.0),)),
    Entry("selu", UNARY),
    Entry("hardswish", UNARY),
    Entry("hardsigmoid", UNARY),
    Entry("hardtanh", UNARY, (_float("min_val", -1.0), _float("max_val", 1.0))),
    Entry("softplus", UNARY, (_float("beta", 1.0), _float("threshold", 20.0))),
    Entry("mish", UNARY),
    Entry("prelu", WEIGHTED),
    # fused_gated: (..., 2N) -> (..., N)
    Entry("silu_and_mul", GATED),
    Entry("gelu_and_mul", GATED),
    Entry("gelu_tanh_and_mul", GATED),
    # comparison
    Entry("eq", BINARY),
    Entry("ne", BINARY),
    Entry("gt", BINARY),
    Entry("lt", BINARY),
    Entry("ge", BINARY),
    Entry("le", BINARY),
    # bitwise
    Entry("bitwise_and", BINARY),
    Entry("bitwise_or", BINARY),
    Entry("bitwise_xor", BINARY),
    Entry("bitwise_not", UNARY),
    # logical
    Entry("logical_not", UNARY),
    Entry("logical_and", BINARY),
    Entry("logical_or", BINARY),
    # special
    Entry("where", WHERE),
    Entry("clamp", CLAMP),
    Entry("masked_fill", MASKED_FILL),
    Entry("nan_to_num", NAN_TO_NUM),
    Entry("isnan", UNARY),
    Entry("isinf", UNARY),
    Entry("isfinite", UNARY),
    # rope: (query, key, positions, *, cos_sin_cache, rotary_dim) -> (query, key); with the
    # cache given, the variants' own parameters are the pairing and LongRoPE's rows
    Entry("rope_neox", ROPE),
    Entry("rope_non_neox", ROPE),
    Entry("rope_llama31", ROPE, (Param("is_neox", "bool", True, keyword=True),)),
    Entry("rope_yarn", ROPE, (Param("is_neox", "bool", True, keyword=True),)),
    Entry("rope_longrope", ROPE, (Param("original_max_position", "int", keyword=True),
                                  Param("max_position", "int", keyword=True),
                                  Param("long", "bool?", None, keyword=True))),
    # dropout(x, p, training, seed, offset, return_mask) -> x' or (x', mask)
    Entry("dropout", DROPOUT),
    # position encodings
    Entry("alibi", GENERATIVE_ALIBI, shape=lambda a: (a["num_heads"], a["seq_len"])),
    Entry("sinusoidal", GENERATIVE_SINUSOIDAL, shape=lambda a: (a["positions"], a["dim"])),
    # reductions
    Entry("sum", REDUCTION),
    Entry("amax", REDUCTION),
    Entry("amin", REDUCTION),
    Entry("prod", REDUCTION),
    Entry("mean", REDUCTION),
    # fused row ops
    Entry("softmax", SOFTMAX),
    Entry("log_softmax", SOFTMAX),
    Entry("rms_norm", RMS_NORM),
    Entry("layer_norm", LAYER_NORM),
    Entry("fused_add_rms_norm", FUSED_ADD_RMS_NORM),
)
"""The library's ops, seed 004's families in order, then the reductions and the fused
row ops."""


# ------------------------------------------------------------ registration


@dataclass(frozen=True)
class Variant:
    """One custom op of an entry: a choice per variable parameter (and the selector)."""

    name: str
    key: tuple[str, ...]
    params: tuple[Param, ...]  # the schema's, in order
    choices: tuple[str, ...]  # per schema parameter: "t", "s" or "" (fixed type)
    selected: bool

    def schema(self, returns: str) -> str:
        params = ", ".join(p.schema(c) for p, c in zip(self.params, self.choices, strict=True))
        return f"({params}) -> {returns}"


def variants(entry: Entry) -> list[Variant]:
    """The custom ops of an entry: one per choice of array or number for each variable
    parameter (at least one array), times the selector's two values."""
    params = entry.params
    variable = [p for p in params if p.variable]
    fixed_tensor = any(p.operand and not p.variable and p.type != "Device" for p in params)
    selections = (False, True) if entry.form.selector is not None else (False,)
    out = []
    for picks in itertools.product("ts", repeat=len(variable)):
        if not fixed_tensor and "t" not in picks and variable:
            continue
        chosen = dict(zip((p.name for p in variable), picks, strict=True))
        suffix = "".join(picks) if "s" in picks else ""
        for selected in selections:
            name = entry.name + (f"_{suffix}" if suffix else "")
            if selected:
                assert entry.form.selector is not None
                name += "_" + entry.form.selector.name.removeprefix("return_")
            out.append(Variant(name, (*picks, "selected" if selected else ""), params,
                               tuple(chosen.get(p.name, "") for p in params), selected))
    return out


def _fill(entry: Entry, params: Sequence[Param], args: Sequence[Any], kwargs: Mapping[str, Any],
          *, keyword_only: bool) -> dict[str, Any]:
    """Arguments by name, defaults filled in; TypeError as Python gives one. With
    `keyword_only`, keyword parameters cannot be given by position (the library's
    signature); the custom ops take every parameter by position too."""
    positional = [p for p in params if not (keyword_only and p.keyword)]
    if len(args) > len(positional):
        raise TypeError(f"{entry.name}() takes {len(positional)} positional arguments but "
                        f"{len(args)} were given")
    values = {p.name: v for p, v in zip(positional, args, strict=False)}
    names = {p.name for p in params}
    for name, value in kwargs.items():
        if name not in names:
            raise TypeError(f"{entry.name}() got an unexpected keyword argument '{name}'")
        if name in values:
            raise TypeError(f"{entry.name}() got multiple values for argument '{name}'")
        values[name] = value
    for p in params:
        if p.name not in values:
            if p.default is REQUIRED:
                raise TypeError(f"{entry.name}() missing required argument '{p.name}'")
            values[p.name] = p.default
    return values


def _library_call(fn: Callable[..., Any], entry: Entry, values: Mapping[str, Any],
                  selected: bool) -> Any:
    """The library function on the arguments: arrays by position, the rest by name,
    devices from their carriers."""
    positional = [values[p.name] for p in entry.params if p.by_position]
    named = {p.name: values[p.name].device if p.type == "Device" else values[p.name]
             for p in entry.params if not p.by_position}
    if entry.form.selector is not None:
        named[entry.form.selector.name] = selected
    return fn(*positional, **named)


def _fresh(result: Any, inputs: Sequence[Any]) -> Any:
    """The result with any tensor that shares memory with an input copied (custom ops
    may not return an alias of an input)."""
    torch = _torch()
    storages = {t.untyped_storage().data_ptr() for t in inputs if isinstance(t, torch.Tensor)}

    def own(t: Any) -> Any:
        return t.clone() if t.untyped_storage().data_ptr() in storages else t

    return tuple(own(t) for t in result) if isinstance(result, tuple) else own(result)


def _define(namespace: str, entry: Entry, variant: Variant, fn: Callable[..., Any]) -> Any:
    """The custom op of one variant, with its fake; its OpOverload."""
    torch = _torch()
    form = entry.form
    returns = form.selected_returns if variant.selected else form.returns

    def real(*args: Any, **kwargs: Any) -> Any:
        values = _fill(entry, variant.params, args, kwargs, keyword_only=False)
        result = _library_call(fn, entry, values, variant.selected)
        return _fresh(result, list(values.values())) if form.may_alias else result

    def fake(*args: Any, **kwargs: Any) -> Any:
        values = _fill(entry, variant.params, args, kwargs, keyword_only=False)
        if form.selector is not None:
            values[form.selector.name] = variant.selected
        return form.fake(entry, values)

    real.__name__ = fake.__name__ = variant.name
    real.__doc__ = fn.__doc__
    op = torch.library.custom_op(f"{namespace}::{variant.name}", real,
                                 mutates_args=form.mutates, schema=variant.schema(returns))
    op.register_fake(fake)
    return getattr(getattr(torch.ops, namespace), variant.name).default


def _wrapper(entry: Entry, ops: dict[tuple[str, ...], Any]) -> Callable[..., Any]:
    """The library's signature over the entry's custom ops: picks the op that fits."""
    torch = _torch()
    params = entry.params
    variable = [p.name for p in params if p.variable]
    selector = entry.form.selector

    def call(*args: Any, **kwargs: Any) -> Any:
        selected = bool(kwargs.pop(selector.name, selector.default)) if selector else False
        values = _fill(entry, params, args, kwargs, keyword_only=True)
        picks = tuple("t" if isinstance(values[n], torch.Tensor) else "s" for n in variable)
        op = ops.get((*picks, "selected" if selected else ""))
        if op is None:
            raise TypeError(f"{entry.name}: needs at least one tensor among "
                            f"{', '.join(repr(n) for n in variable)}")
        return op(*(torch.empty(0, device=values[p.name]) if p.type == "Device"
                    else values[p.name] for p in params))

    call.__name__ = call.__qualname__ = entry.name
    return call


class TorchOps:
    """The library's ops as torch custom ops: `tops.add(x, y)` calls
    `torch.ops.<namespace>.add`, which torch.compile traces through."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.entries: dict[str, Entry] = {}

    @property
    def ops(self) -> Any:
        """torch.ops.<namespace>: the custom ops themselves (every variant)."""
        return getattr(_torch().ops, self.namespace)

    def fuse(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """ops.fuse(fn) as torch custom ops (fn a function of the library's elementwise ops,
        or a fused function already): see `fused_op`."""
        from tile_mlir.ops.fuse import fuse

        return fused_op(fuse(fn), self.namespace)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"{name!r} is not an op registered with torch (torch_ops() has "
                             f"{len(self.entries)}; see tile_mlir.ops.torch_library.OPS)")


def register(entries: Sequence[Entry], namespace: str = NAMESPACE,
             function: Callable[[str], Callable[..., Any] | None] | None = None) -> TorchOps:
    """Define the entries' custom ops in `namespace` (once per process and namespace),
    each calling `function(name)` (default: the tile_mlir.ops function of that name);
    entries without a function are left out."""
    if function is None:
        from tile_mlir import ops as library

        def function(name: str) -> Callable[..., Any] | None:
            return getattr(library, name, None)

    registered = TorchOps(namespace)
    for entry in entries:
        fn = function(entry.name)
        if fn is None:
            continue
        defined = {v.key: _define(namespace, entry, v, fn) for v in variants(entry)}
        wrapper = _wrapper(entry, defined)
        wrapper.__doc__ = f"{fn.__doc__ or entry.name}\n\nThrough torch.ops.{namespace}." \
                          f"{entry.name}* (custom ops that torch.compile traces)."
        setattr(registered, entry.name, wrapper)
        registered.entries[entry.name] = entry
    return registered


_REGISTERED: dict[str, TorchOps] = {}


def torch_ops() -> TorchOps:
    """The library's ops as torch custom ops (namespace tile_mlir), registered on the first
    call. Needs torch."""
    if NAMESPACE not in _REGISTERED:
        _torch()  # ImportError here, not half way through
        _REGISTERED[NAMESPACE] = register(OPS)
    return _REGISTERED[NAMESPACE]


# ------------------------------------------------------------ fused functions


MAX_FUSED_OPERANDS = 6
"""Positional parameters of a fused function that custom ops take (2^n - 1 variants)."""

_STATIC_TYPES = {bool: "bool", int: "int", float: "float", str: "str"}


def _fused_param(p: inspect.Parameter, name: str) -> Param:
    """A fused function's parameter in the schema: an operand (Tensor|Scalar, its
    default kept for the wrapper only), or a static one typed by its default."""
    from tile_mlir.ops.fuse import static

    if not static(p):
        return Param(p.name, TS, REQUIRED if p.default is p.empty else p.default)
    kind = _STATIC_TYPES.get(type(p.default))
    if kind is None:
        raise TypeError(f"{name}: parameter '{p.name}' has no default of bool, int, float "
                        "or str, which a custom op's schema would type it by")
    return Param(p.name, kind, p.default, keyword=p.kind is p.KEYWORD_ONLY)


def fused_entries(fused: Fused) -> tuple[Entry, Entry]:
    """(the entry the wrapper fills arguments by, the one the schemas come from: the
    operands without defaults, since a schema default would fit one choice only)."""
    params = tuple(_fused_param(p, fused.name) for p in fused.params)
    operands = [p for p in params if p.variable]
    if len(operands) > MAX_FUSED_OPERANDS:
        raise TypeError(f"{fused.name}: {len(operands)} array-or-number parameters make "
                        f"2^{len(operands)} - 1 custom ops; at most {MAX_FUSED_OPERANDS}")

    def fake(entry: Entry, args: dict[str, Any]) -> Any:
        return fused_fake(fused, args)

    call = Entry(fused.spec_name, Form("fused", params, fake))
    schema = Entry(fused.spec_name, Form("fused", tuple(
        replace(p, default=REQUIRED) if p.variable else p for p in params), fake))
    return call, schema


def fused_fake(fused: Fused, args: Mapping[str, Any]) -> Any:
    """The fused function's result meta: its trace on the arguments' shapes and dtypes."""
    from tile_mlir.ops.fuse import static

    torch = _torch()
    described: dict[str, Any] = {}
    tensors = []
    for p in fused.params:
        value = args[p.name]
        if static(p):
            described[p.name] = value
        elif isinstance(value, torch.Tensor):
            tensors.append(value)
            described[p.name] = _meta_operand(value, p.name)
        else:
            described[p.name] = library_args.classify(_number(value), p.name)
    shape, dtype = fused.meta(described)
    return torch.empty(shape, dtype=getattr(torch, DTYPES[dtype].numpy),
                       device=_device(tensors))


def _meta_operand(value: Any, name: str) -> Any:
    """A (fake) tensor as the trace takes it: an array of its dtype and shape, or a 0-d
    CPU tensor as a number of its dtype (its value is not needed for the meta)."""
    dtype = _library_dtype(value, name)
    if value.dim() == 0 and value.device.type == "cpu":
        number = False if dtype == "bool" else 1.0 if DTYPES[dtype].is_float else 1
        return library_args.Scalar(name, number, dtype, promotion.ZERO_DIM, "")
    shape = tuple(value.shape)
    return library_args.Array(name, "torch", dtype, shape, library_args.row_major(shape), 0, 0,
                              root=f"_p_{name}")


_FUSED: dict[tuple[str, str], Callable[..., Any]] = {}
"""The fused functions registered, by (spec name, namespace)."""


def fused_op(fused: Fused, namespace: str = NAMESPACE) -> Callable[..., Any]:
    """A fused function as custom ops `<namespace>::<spec_name>[_<choices>]`, one per
    choice of tensor or number for each array-or-number parameter (at least one tensor),
    and the function with fn's signature that picks the op fitting its arguments; once
    per function and namespace. The custom ops call the fused function (one kernel);
    their fake traces it."""
    found = _FUSED.get((fused.spec_name, namespace))
    if found is not None:
        return found
    call, schema = fused_entries(fused)
    defined = {v.key: _define(namespace, schema, v, fused) for v in variants(schema)}
    wrapper = _wrapper(call, defined)
    wrapper.__doc__ = f"{fused.name}, fused, through torch.ops.{namespace}.{fused.spec_name}*"
    _FUSED[fused.spec_name, namespace] = wrapper
    return wrapper
