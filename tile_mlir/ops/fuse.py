"""ops.fuse: a function of the library's elementwise ops, run as one kernel.

    @ops.fuse
    def bias_gelu(x, b):
        return ops.mul(ops.gelu(ops.add(x, b)), 0.5)

    y = bias_gelu(x, b)      # one kernel: x and b read once, y written once

`fuse(fn)` makes fn a public function of the spine (entry.op): its key is made as
ops.add's is (each array argument's dtype, shape, strides, alignment and device; each
number argument's type and value; static arguments, the keyword-only ones and those
whose default is not a number, by value), so a call like an earlier one costs one key,
one lookup and one launch. A call the plan cache does not answer traces fn:

- fn is called with a `Value` for each array argument (its shape and dtype known, its
  elements not), its numbers and static arguments as they are;
- an op of tile_mlir.ops called on a Value takes the full path (entry.py's key has no
  part for one), which hands the call to the trace; the trace runs the op's own
  semantics (functions.py, activations.py) on a `Recording` builder, so promotion,
  broadcasting, torch's number rules (a Python number divided into a multiplication by
  its reciprocal, pow's special exponents, the numbers rounded to f16/bf16 first) are
  the unfused call's, and `elementwise.apply` records the resolved call as a step
  instead of planning it: its row, its inputs, its result dtype (what the unfused call
  writes, so every intermediate is rounded as the unfused chain rounds it) and shape;
- the steps the result depends on become one fused expression (op_table/fusion.build):
  arguments read once however often used, numbers as kernel scalars written into the
  plan's parameters once; with out= of another dtype, a last `cast` step;
- the expression runs as one elementwise program (op = "fused") over the broadcast,
  coalesced views, planned by the spine as every elementwise call is (out=, in place,
  views, NumPy staging, CUDA graphs).

How an op knows a Value: it does not look. Its generated entry keys tensors and
numbers by type and sends anything else to entry.keyof, which describes no Value, so
the call takes the full path (no plan is kept without a key), whose first loop hands
it to the Value's trace before describing anything. The fast path of every op is
untouched; the full path pays an isinstance per argument on a call that plans anyway.
A namespace the tracer patched in instead (tile_mlir.ops' functions swapped for
recording ones while fn runs) would miss the functions fn bound before (`from
tile_mlir.ops import add`) or reaches through other modules, and would race with other
threads calling the library meanwhile; a Value carries its trace, so tracing needs no
global state.

Numbers are traced by value: a number argument is part of the key (the kernel is the
same for every value, the plan is not), a number inside fn is a constant of the plan.
A 0-d host tensor is traced by value too, so a call with one plans every time.

What fn may do: call the elementwise functions and activations of tile_mlir.ops (and
other fused functions) on its arguments and their results, with Python numbers; use
Python's operators on Values (`x * 0.5` is ops.mul(x, 0.5)); read `shape`, `ndim` and
`dtype`. What it may not, each a FuseError naming the op: reductions, RoPE, dropout
and the generators; out= or inplace= inside; arrays that are not its arguments;
views of an intermediate result (a gated op or prelu's weight on one); Python control
flow on a Value's elements; torch functions on a Value.

The dialect's variadic operand slot takes operands of one type: the inputs are ordered
so that those from the third on share one (op_table/fusion.fit_slots); where their
layouts differ, arrays of one dtype share a layout made dynamic where they disagree
(elementwise.one_type). Inputs that cannot fit (more than two besides the largest group
of one dtype and kind: three arrays and three numbers, say) cut the function: an
intermediate is computed by a kernel of its own into a temporary of its dtype, which
is where the unfused call stores it, so the bits are the same; one kernel wherever the
inputs fit, which the usual chains' do.
"""

from __future__ import annotations

import inspect
import itertools
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, overload

from tile_mlir import op_table
from tile_mlir.dtypes import opmath
from tile_mlir.op_table import fusion
from tile_mlir.ops import activations, args, coalesce, elementwise, entry, functions, promotion
from tile_mlir.ops.args import Array, Scalar, torch_name
from tile_mlir.ops.elementwise import Call, In
from tile_mlir.ops.plan import Builder
from tile_mlir.ops.programs.elementwise import ArraySpec


class FuseError(TypeError):
    """A function ops.fuse cannot make one elementwise kernel of (the message names the
    op, or the argument)."""


FUSABLE = frozenset((*functions.__all__, *activations.__all__))
"""The ops a fused function may call: the elementwise functions and the activations."""

_WHY = {"tile_mlir.ops.reductions": "a reduction (its result has other dims than its input)",
        "tile_mlir.ops.rope": "RoPE (it gathers a cache row per token)",
        "tile_mlir.ops.generators": "a generator (dropout's random stream, the encodings)"}

Key = tuple[Any, ...]
"""A fused input: ("array", root, dtype, shape, strides, delta) or ("number", dtype, repr)."""

_BY_SPEC: dict[str, Fused] = {}
"""Fused functions by their spec's name: one called inside another is inlined."""

_COUNT = itertools.count()


@dataclass(frozen=True)
class Step:
    """A recorded step: a registry row on inputs (keys) and earlier steps' results, its
    result's dtype (the link's) and shape."""

    link: fusion.Link[Key]
    shape: tuple[int, ...]


def _needed(links: Sequence[fusion.Link[Key]], last: int) -> list[int]:
    """The steps step `last` depends on, itself included, in order."""
    needed = {last}
    for k in range(last, -1, -1):
        if k in needed:
            needed.update(a.link for a in links[k].args if isinstance(a, fusion.Result))
    return sorted(needed)


def subchain(steps: Sequence[Step], last: int) -> list[Step]:
    """Step `last` and the steps it depends on, numbered afresh."""
    keep = _needed([s.link for s in steps], last)
    number = {old: new for new, old in enumerate(keep)}

    def moved(arg: Key | fusion.Result) -> Key | fusion.Result:
        return fusion.Result(number[arg.link]) if isinstance(arg, fusion.Result) else arg

    return [Step(fusion.Link(steps[k].link.row, tuple(moved(a) for a in steps[k].link.args),
                             steps[k].link.dtype), steps[k].shape) for k in keep]


# ------------------------------------------------------------------ values


class Value(entry.Traced):
    """An array argument of a function ops.fuse traces, or an op's result in it: its shape
    and dtype are known, its elements are not. The ops of tile_mlir.ops and Python's
    operators on it record steps."""

    __slots__ = ("_array", "_node", "_trace")
    __array_ufunc__ = None  # NumPy numbers defer to the reflected operators below

    def __init__(self, trace: Trace, array: Array, node: int | None):
        self._trace, self._array, self._node = trace, array, node

    @property
    def shape(self) -> tuple[int, ...]:
        return self._array.shape

    @property
    def ndim(self) -> int:
        return len(self._array.shape)

    @property
    def dtype(self) -> str:
        """The element type as torch and NumPy name it (float32, bfloat16, bool...)."""
        return torch_name(self._array.dtype)

    def __repr__(self) -> str:
        return f"<{self._array.name}: {self.dtype}{list(self.shape)}, traced by ops.fuse>"

    def record(self, spec: entry.Spec, values: Sequence[Any]) -> Any:
        return self._trace.record(spec, values)

    def _refuse(self, what: str) -> Any:
        raise FuseError(f"{self._trace.name}: {what} on a traced value ({self._array.name}): "
                        "its elements are not known while ops.fuse traces the function "
                        "(use ops.where for choices by element)")

    def __bool__(self) -> bool:
        return bool(self._refuse("Python control flow (bool)"))

    def __float__(self) -> float:
        return float(self._refuse("float()"))

    def __int__(self) -> int:
        return int(self._refuse("int()"))

    def __index__(self) -> int:
        return int(self._refuse("an index"))

    def __iter__(self) -> Any:
        return self._refuse("iteration")

    def __array__(self, *given: Any, **named: Any) -> Any:
        return self._refuse("a conversion to a NumPy array")

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None
                           ) -> Any:
        raise FuseError(f"torch's {getattr(func, '__name__', func)} on a traced value: a "
                        "fused function computes with the functions of tile_mlir.ops")

    __hash__ = object.__hash__  # == is elementwise (ops.eq), as torch's

    def __add__(self, other: Any) -> Any: return functions.add(self, other)
    def __radd__(self, other: Any) -> Any: return functions.add(other, self)
    def __sub__(self, other: Any) -> Any: return functions.sub(self, other)
    def __rsub__(self, other: Any) -> Any: return functions.sub(other, self)
    def __mul__(self, other: Any) -> Any: return functions.mul(self, other)
    def __rmul__(self, other: Any) -> Any: return functions.mul(other, self)
    def __truediv__(self, other: Any) -> Any: return functions.div(self, other)
    def __rtruediv__(self, other: Any) -> Any: return functions.div(other, self)
    def __floordiv__(self, other: Any) -> Any: return functions.floor_divide(self, other)
    def __rfloordiv__(self, other: Any) -> Any: return functions.floor_divide(other, self)
    def __mod__(self, other: Any) -> Any: return functions.remainder(self, other)
    def __rmod__(self, other: Any) -> Any: return functions.remainder(other, self)
    def __pow__(self, other: Any) -> Any: return functions.pow(self, other)
    def __rpow__(self, other: Any) -> Any: return functions.pow(other, self)
    def __and__(self, other: Any) -> Any: return functions.bitwise_and(self, other)
    def __rand__(self, other: Any) -> Any: return functions.bitwise_and(other, self)
    def __or__(self, other: Any) -> Any: return functions.bitwise_or(self, other)
    def __ror__(self, other: Any) -> Any: return functions.bitwise_or(other, self)
    def __xor__(self, other: Any) -> Any: return functions.bitwise_xor(self, other)
    def __rxor__(self, other: Any) -> Any: return functions.bitwise_xor(other, self)
    def __neg__(self) -> Any: return functions.neg(self)
    def __abs__(self) -> Any: return functions.abs(self)
    def __invert__(self) -> Any: return functions.bitwise_not(self)
    def __lt__(self, other: Any) -> Any: return functions.lt(self, other)
    def __le__(self, other: Any) -> Any: return functions.le(self, other)
    def __gt__(self, other: Any) -> Any: return functions.gt(self, other)
    def __ge__(self, other: Any) -> Any: return functions.ge(self, other)
    def __eq__(self, other: object) -> Any: return functions.eq(self, other)
    def __ne__(self, other: object) -> Any: return functions.ne(self, other)


# ------------------------------------------------------------------ the trace


class _Recorder(elementwise.Recording):
    """The builder an op's semantics run on while traced: its elementwise calls go to the
    trace (`apply` hands them over instead of planning them)."""

    trace: Trace

    def record(self, call: Call, out: Array | None) -> Array:
        return self.trace.step(call, out, self)


class Trace:
    """One tracing of a fused function: its arguments, the steps its ops recorded, and
    the fused kernel's inputs (by key). `meta` traces (torch's fake tensors, whose
    sizes may be symbolic) record shapes and dtypes only."""

    def __init__(self, name: str, arrays: Sequence[Array], meta: bool = False):
        self.name, self.meta = name, meta
        first = arrays[0] if arrays else None
        self.kind = first.kind if first is not None else ""
        self.device = first.device if first is not None else None
        self.arguments = {a.root for a in arrays}
        self.steps: list[Step] = []
        self.results: dict[str, Value] = {}  # an intermediate's root -> its Value
        self.operands: dict[Key, Array | Scalar] = {}
        self.active = True
        self.cacheable = True  # False once a value read on the host is traced in

    def argument(self, array: Array) -> Value:
        return Value(self, array, None)

    # ------------------------------------------------------------ an op's call

    def record(self, spec: entry.Spec, values: Sequence[Any]) -> Any:
        """An op of tile_mlir.ops called on this trace's values: its semantics, run on a
        recorder; the Value of its result."""
        if not self.active:
            raise FuseError(f"{spec.name}: called on a traced value of {self.name} after "
                            "its trace ended (a traced value must not leave its function)")
        inner = _BY_SPEC.get(spec.name)
        if inner is not None:
            return self._inline(inner, spec, values)
        if spec.name not in FUSABLE:
            why = _WHY.get(spec.semantics.__module__, "not an elementwise op")
            raise FuseError(f"{self.name}: {spec.name} cannot be fused: it is {why}; call it "
                            "outside the fused function")
        described = {p.name: self._describe(spec, p.name, v)
                     for p, v in zip(spec.params, values, strict=True)}
        recorder = _Recorder(spec.name, spec.launcher_params())
        recorder.trace = self
        root = spec.semantics(recorder, **described)
        if not recorder.cacheable:
            raise FuseError(f"{spec.name}: an argument read on the host at every call (a 0-d "
                            "array) cannot be part of a fused kernel; give a Python number")
        if root not in self.results:
            raise FuseError(f"{self.name}: {spec.name} made no elementwise step to fuse")
        return self.results[root]

    def _inline(self, inner: Fused, spec: entry.Spec, values: Sequence[Any]) -> Any:
        """A fused function called inside another: its ops join this trace."""
        given = dict(zip((p.name for p in spec.params), values, strict=True))
        if given.pop("out") is not None:
            raise FuseError(f"{self.name}: out= of {inner.name}, called inside it")
        positional = [given[p.name] for p in inner.params if p.kind is not p.KEYWORD_ONLY]
        keywords = {p.name: given[p.name] for p in inner.params if p.kind is p.KEYWORD_ONLY}
        return inner.fn(*positional, **keywords)

    def _describe(self, spec: entry.Spec, name: str, value: Any) -> Any:
        """One parameter of an op called in the trace, as its semantics take it."""
        role = spec.role(name)
        if isinstance(value, Value):
            return self._traced(spec, name, role, value)
        if role == "static":
            return value
        if isinstance(value, Scalar):  # a 0-d host tensor argument (fuse passes it so)
            return value
        if role == "number":
            return args.number(value, name, spec.name)
        if value is None and role in ("optional", "out", "outs"):
            return None
        if role in ("out", "outs"):
            raise FuseError(f"{spec.name}: out= inside the fused function {self.name} (the "
                            "fused function takes out= for its result)")
        operand = args.classify(value, name)
        if isinstance(operand, Array):
            raise FuseError(f"{spec.name}: argument '{name}' is an array that is not an "
                            f"array argument of the fused function {self.name}; pass it as "
                            "one (a positional parameter: keyword-only ones are constants "
                            "of the kernel, passed as they are)")
        if operand.priority == promotion.ZERO_DIM:
            self.cacheable = False  # a 0-d host tensor: its value is traced in
        return operand

    def _traced(self, spec: entry.Spec, name: str, role: str, value: Value) -> Array:
        if not value._trace.active:
            raise FuseError(f"{spec.name}: argument '{name}' is a traced value of "
                            f"{value._trace.name} used after its trace ended (a traced "
                            "value must not leave its function)")
        if value._trace is not self:
            raise FuseError(f"{spec.name}: argument '{name}' is a traced value of "
                            f"{value._trace.name}, not of {self.name}")
        if role in ("out", "outs"):
            raise FuseError(f"{spec.name}: out= inside the fused function {self.name} (the "
                            "fused function takes out= for its result)")
        if role not in ("operand", "array", "optional"):
            raise FuseError(f"{spec.name}: argument '{name}' must be a number (or a static "
                            "value), not a traced array")
        return value._array

    # ------------------------------------------------------------ a step

    def step(self, call: Call, out: Array | None, recorder: Builder) -> Array:
        """A resolved elementwise call, recorded: its result's description."""
        if out is not None:
            inplace = any(isinstance(i.operand, Array) and args.same_view(i.operand, out)
                          for i in call.inputs)
            given = "inplace=True" if inplace else "out="
            raise FuseError(f"{call.what}: {given} inside the fused function {self.name} (the "
                            "fused function takes out= for its result)")
        if call.row.indexed:
            raise FuseError(f"{self.name}: {call.what} cannot be fused: it is "
                            f"{_WHY['tile_mlir.ops.generators']}")
        keys = tuple(self._input(call, n, given, recorder) for n, given in enumerate(call.inputs))
        root = f"_n{len(self.steps)}"
        self.steps.append(Step(fusion.Link(call.row.name, keys, call.result), call.shape))
        array = Array(f"the result of {call.what}", self.kind, call.result, call.shape,
                      args.row_major(call.shape), 0, self.device, None, root)
        self.results[root] = Value(self, array, len(self.steps) - 1)
        recorder.objects[root] = root  # what the semantics' object_of returns
        return array

    def _input(self, call: Call, n: int, given: In, recorder: Builder) -> Key | fusion.Result:
        """Input n of a step: an earlier step's result, an argument (any view of one), or
        a number, converted and checked as the unfused call converts it per call."""
        operand = given.operand
        if isinstance(operand, Array):
            found = self.results.get(operand.root)
            if found is not None:
                canonical = found._array
                if (operand.shape, operand.strides, operand.delta) != \
                        (canonical.shape, canonical.strides, canonical.delta):
                    raise FuseError(f"{call.what}: reads a view of an intermediate result "
                                    f"({canonical.name}): only the fused function's arguments "
                                    "can be viewed (a gated op, prelu's weight)")
                assert found._node is not None
                return fusion.Result(found._node)
            assert operand.root in self.arguments, "an array that _describe let through"
            key: Key = ("array", operand.root, operand.dtype, operand.shape, operand.strides,
                        operand.delta)
            return self._keep(key, operand)
        assert isinstance(operand, Scalar), "indexed rows are refused before"
        dtype = call.scalar_dtype(n)
        elementwise.scalar_value(recorder, operand, dtype, call.round_to[n])  # its checks
        round_to = call.round_to[n]
        value = operand.value if round_to is None else \
            elementwise.round_number(operand.value, round_to)
        return self._keep(("number", dtype, repr(value)),
                          Scalar(operand.name, value, dtype, promotion.SCALAR, repr(value)))

    def _keep(self, key: Key, operand: Array | Scalar) -> Key:
        if not self.meta:  # a meta trace's sizes may be symbolic: unhashable
            self.operands.setdefault(key, operand)
        return key

    # ------------------------------------------------------------ the result

    def result(self, returned: Any) -> Value:
        """What the function returned, checked: the result of an op on its arguments."""
        if isinstance(returned, Value) and returned._trace is self:
            if returned._node is None:
                raise FuseError(f"{self.name} returns its argument ({returned._array.name}) "
                                "unchanged: there is nothing to compute")
            return returned
        if isinstance(returned, tuple | list):
            raise FuseError(f"{self.name} returns {len(returned)} values; a fused function "
                            "returns one array")
        raise FuseError(f"{self.name} returns a {type(returned).__name__}; a fused function "
                        "returns the result of ops of tile_mlir.ops on its arguments")

    def chain(self, result: Value) -> list[Step]:
        """The steps the result depends on, in order (what the function computed and did
        not use is left out), numbered afresh."""
        assert result._node is not None
        return subchain(self.steps, result._node)


# ------------------------------------------------------------------ the fused kernel


def _used(links: Sequence[fusion.Link[Key]]) -> list[Key]:
    """The inputs the steps read, in order of first use (fusion.build's order)."""
    used: list[Key] = []
    for link in links:
        for arg in link.args:  # one at a time: a link may read an input twice
            if not isinstance(arg, fusion.Result) and arg not in used:
                used.append(arg)
    return used


def _types(operands: dict[Key, Array | Scalar], used: Sequence[Key], shape: tuple[int, ...],
           out: Array | None) -> dict[Key, Any]:
    """Each input's type in the kernel: a number's dtype, an array's memref type (dtype,
    static strides and offset over the view elementwise._launch will coalesce)."""
    arrays = [a for a in (operands[k] for k in used) if isinstance(a, Array)]
    strides = [out.strides if out is not None else args.row_major(shape)]
    strides += [coalesce.expand_strides(a.shape, a.strides, shape) for a in arrays]
    view = coalesce.coalesce(shape, strides)
    types: dict[Key, Any] = {k: ("number", operands[k].dtype) for k in used
                             if isinstance(operands[k], Scalar)}
    keys = [k for k in used if isinstance(operands[k], Array)]
    for key, array, steps in zip(keys, arrays, view.strides[1:], strict=True):
        spec = ArraySpec(array.dtype, coalesce.stride_classes(steps), bool(array.offset))
        types[key] = ("array", array.dtype, tuple(spec.static_strides()), spec.offset)
    return types


def _slots(used: Sequence[Key], types: dict[Key, Any], name: str) -> dict[Key, Any]:
    """Slot classes for fusion.fit_slots when the inputs' own types do not fit: the
    inputs of one class (arrays of one dtype, whose layouts elementwise.one_type makes
    one, or numbers of one dtype) share the variadic slot, at most two others go
    first. Those first are the other classes, then the arrays that would lose most by
    sharing a layout (a unit innermost stride, a layout of their own)."""
    classes = {k: types[k][:2] for k in used}
    counts = Counter(classes.values())
    shared = max(counts, key=lambda c: (counts[c], c[0] == "array"))
    others = [k for k in used if classes[k] != shared]
    if len(others) > 2:
        kinds = ", ".join(f"{n} {kind}(s) of {torch_name(dtype)}"
                          for (kind, dtype), n in sorted(counts.items()))
        raise FuseError(f"{name}: one kernel would take {len(used)} inputs ({kinds}); "
                        "tile.elementwise takes at most two of other types than the rest")
    members = [k for k in used if classes[k] == shared]
    common = Counter(types[k] for k in members)
    members.sort(key=lambda k: (types[k][0] == "array" and types[k][2][-1:] != ("1",),
                                common[types[k]]))
    first = others + members[:2 - len(others)]
    return {k: ("own", n) if k in first else "shared" for n, k in enumerate(used)}


def _build(links: list[fusion.Link[Key]], operands: dict[Key, Array | Scalar],
           shape: tuple[int, ...], out: Array | None, name: str) -> fusion.Fused[Key]:
    """The fused expression, its inputs ordered to fit the dialect's slots."""
    used = _used(links)
    types = _types(operands, used, shape, out)
    try:
        return fusion.build(links, types.__getitem__)
    except fusion.FusionError:  # more than two types besides the most common one
        return fusion.build(links, _slots(used, types, name).__getitem__)


# ------------------------------------------------------------------ fused functions


class Fused:
    """A function of the library's elementwise ops, run as one kernel (`fuse(fn)`). Call
    it as fn, with `out=` for the result; `torch_op` is the same as a torch custom op."""

    def __init__(self, fn: Callable[..., Any], params: tuple[inspect.Parameter, ...],
                 name: str, spec_name: str):
        self.fn, self.params, self.name, self.spec_name = fn, params, name, spec_name
        self.__wrapped__ = fn
        self.__name__ = name
        self.__doc__ = fn.__doc__
        roles = {p.name: "static" if static(p) else "operand" for p in params}
        # a number argument's key part is its value: -0.0 and 0 apart from +0.0 and False
        classes = {p.name: f"({p.name} if {p.name} else repr({p.name}))" for p in params
                   if roles[p.name] == "operand"}
        self.function = entry.op({**roles, "out": "out"}, classes, spec_name)(self._semantics())

    def __call__(self, *given: Any, **named: Any) -> Any:
        # fuse() gives each fused function a class whose __call__ is the generated entry
        return self.function(*given, **named)

    def __repr__(self) -> str:
        return f"<fused function {self.name} ({self.spec_name})>"

    @property
    def torch_op(self) -> Callable[..., Any]:
        """The fused function as torch custom ops (torch.ops.tile_mlir.<spec_name>*) that
        torch.compile(fullgraph=True) traces through; registered on first use (needs
        torch; get it outside the compiled function)."""
        from tile_mlir.ops import torch_library

        return torch_library.fused_op(self)

    def _semantics(self) -> Callable[..., str]:
        def semantics(_builder: Builder, /, **params: Any) -> str:
            return self._plan(_builder, params)

        builder = inspect.Parameter("_builder", inspect.Parameter.POSITIONAL_ONLY)
        out = inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None)
        semantics.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [builder, *self.params, out])
        semantics.__doc__ = self.fn.__doc__ or f"{self.name}, fused by ops.fuse."
        return semantics

    def trace(self, params: dict[str, Any], meta: bool = False) -> tuple[Trace, Value]:
        """fn run on Values for its array arguments (described), its numbers as they are
        (a 0-d host tensor as its Scalar, which keeps its promotion priority)."""
        trace = Trace(self.name, [v for v in params.values() if isinstance(v, Array)], meta)
        positional, keywords = [], {}
        for p in self.params:
            value = params[p.name]
            if p.kind is p.KEYWORD_ONLY:
                keywords[p.name] = value
                continue
            if isinstance(value, Array):
                value = trace.argument(value)
            elif isinstance(value, Scalar) and value.priority == promotion.ZERO_DIM:
                trace.cacheable = False  # its value is traced in: no plan can keep it
            elif isinstance(value, Scalar):
                value = value.value
            positional.append(value)
        try:
            returned = self.fn(*positional, **keywords)
        finally:
            trace.active = False
        return trace, trace.result(returned)

    def meta(self, params: dict[str, Any]) -> tuple[tuple[Any, ...], str]:
        """The result's shape and dtype for these (described) arguments, from a trace."""
        _, result = self.trace(params, meta=True)
        return result.shape, result._array.dtype

    def _plan(self, b: Builder, params: dict[str, Any]) -> str:
        """The semantics of a call: trace, fuse, plan the elementwise launch."""
        out = params.pop("out")
        trace, result = self.trace(params)
        if not trace.cacheable:
            b.cacheable = False
        steps = trace.chain(result)
        shape, dtype = result.shape, result._array.dtype
        if out is not None and out.dtype != dtype:  # rounded into out as an unfused out= is
            arrays = [o for o in trace.operands.values() if isinstance(o, Array)]
            elementwise.check_out(out, shape, dtype, arrays, self.name)
            steps.append(Step(fusion.Link("cast", (fusion.Result(len(steps) - 1),), out.dtype),
                              shape))
        return b.object_of(self._launch(b, steps, dict(trace.operands), out))

    def _launch(self, b: Builder, steps: list[Step], operands: dict[Key, Array | Scalar],
                out: Array | None, done: dict[Expression, Key] | None = None) -> Array:
        """The steps as one kernel into `out` (or a new output); where their inputs do not
        fit the dialect's slots, an intermediate is computed first into a temporary of its
        dtype (where the unfused call would store it: the same bits) and read from there,
        until they do. Each intermediate is computed once: `done` holds those already in a
        temporary, by their expression, and later kernels read them from it."""
        done = {} if done is None else done
        while True:
            steps = _reuse(steps, done)
            shape = steps[-1].shape
            try:
                built = _build([s.link for s in steps], operands, shape, out, self.name)
            except FuseError:
                if len(steps) == 1:
                    raise
                b.place([o for o in operands.values() if isinstance(o, Array)])
                k = _cut([s.link for s in steps])
                temporary = b.temporary(steps[k].shape, steps[k].link.dtype)
                self._launch(b, subchain(steps, k), operands, temporary, done)
                key: Key = ("array", temporary.root, temporary.dtype, temporary.shape,
                            temporary.strides, 0)
                operands[key] = temporary
                done[_expressions(steps)[k]] = key
                steps = _replaced(steps, k, key)
                continue
            return elementwise.run_call(b, self._call(built, operands, shape), out)

    def _call(self, built: fusion.Fused[Key], operands: dict[Key, Array | Scalar],
              shape: tuple[int, ...]) -> Call:
        inputs = tuple(In(o) if isinstance(o, Array) else
                       In(o, promotes=False, keep=o.dtype, fixed=True)
                       for o in (operands[k] for k in built.inputs))
        dtype = built.expr.dtype
        last = op_table.ELEMENTWISE[built.expr.steps[-1].row]
        return Call(last, inputs, dtype, opmath(dtype), shape, (None,) * len(inputs),
                    self.name, tuple(built.expr.texts()))


def _cut(links: Sequence[fusion.Link[Key]]) -> int:
    """The intermediate to compute by itself when a chain does not fit one op: the one
    whose steps read the most inputs (the last such)."""
    def inputs(k: int) -> int:
        return len({a for i in _needed(links, k) for a in links[i].args
                    if not isinstance(a, fusion.Result)})

    return max(range(len(links) - 1), key=lambda k: (inputs(k), k))


def _replaced(steps: Sequence[Step], k: int, key: Key) -> list[Step]:
    """The steps with step k's result read from the input `key`, those no longer needed
    left out."""
    return _read_from(steps, {k: key})


def _read_from(steps: Sequence[Step], keys: dict[int, Key]) -> list[Step]:
    """The steps with the results of steps `keys` names read from those inputs, the steps
    no longer needed left out."""
    def moved(arg: Key | fusion.Result) -> Key | fusion.Result:
        return keys.get(arg.link, arg) if isinstance(arg, fusion.Result) else arg

    replaced = [Step(fusion.Link(s.link.row, tuple(moved(a) for a in s.link.args),
                                 s.link.dtype), s.shape) for s in steps]
    return subchain(replaced, len(replaced) - 1)


Expression = tuple[Any, ...]
"""A step's whole computation: its row, dtype, shape and arguments, each an input's key
or the expression of the step it reads (the same value whatever the steps' numbering)."""


def _expressions(steps: Sequence[Step]) -> list[Expression]:
    made: list[Expression] = []
    for s in steps:
        made.append((s.link.row, s.link.dtype, s.shape,
                     tuple(made[a.link] if isinstance(a, fusion.Result) else a
                           for a in s.link.args)))
    return made


def _reuse(steps: Sequence[Step], done: dict[Expression, Key]) -> list[Step]:
    """The steps with the intermediates already computed into a temporary read from it
    (the last step is the one to compute, never read)."""
    if not done:
        return list(steps)
    made = _expressions(steps)
    keys = {k: done[e] for k, e in enumerate(made[:-1]) if e in done}
    return _read_from(steps, keys) if keys else list(steps)


def static(param: inspect.Parameter) -> bool:
    """Whether a parameter of a fused function is passed to it as it is (part of the key
    by value): keyword-only ones, and those whose default is neither a number nor None
    (`lambda x, name="exp": ...`); the others are arrays or numbers."""
    default = param.default
    return param.kind is param.KEYWORD_ONLY or not (
        default is param.empty or default is None or type(default) in args.NUMBERS)


def _params(fn: Callable[..., Any], label: str) -> tuple[inspect.Parameter, ...]:
    """fn's parameters, checked: named ones only, none called out or starting with _."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as e:
        raise TypeError(f"fuse: {label} has no signature to trace ({e})") from None
    params = []
    for p in signature.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"fuse: {label}'s parameter '{p}': a fused function's parameters "
                            "are named (each is a part of its key)")
        if p.name == "out" or p.name.startswith("_"):
            raise TypeError(f"fuse: {label}'s parameter '{p.name}': 'out' and names starting "
                            "with '_' are the fused function's own")
        params.append(p.replace(annotation=inspect.Parameter.empty))
    return tuple(params)


@overload
def fuse(fn: Callable[..., Any], *, name: str | None = None) -> Fused: ...


@overload
def fuse(fn: None = None, *, name: str | None = None) -> Callable[[Callable[..., Any]], Fused]:
    ...


def fuse(fn: Callable[..., Any] | None = None, *, name: str | None = None
         ) -> Fused | Callable[[Callable[..., Any]], Fused]:
    """fuse(fn, *, name=None) -> fused function

    fn, a function of the library's elementwise ops, as one kernel whose results are the
    unfused calls' (each intermediate rounded as they round it). `ops.fuse(lambda x, b:
    ops.mul(ops.gelu(ops.add(x, b)), 0.5))(x, b)` reads x and b once and writes the result
    once (docs/ops.md, "Fusing elementwise ops"). A decorator too (`@ops.fuse`,
    `@ops.fuse(name=...)`). The fused function takes fn's arguments and `out=`;
    `.torch_op` is it as torch custom ops (torch.compile)."""
    if fn is None:
        return lambda given: fuse(given, name=name)
    if isinstance(fn, Fused):
        return fn
    if not callable(fn):
        raise TypeError(f"fuse: argument 'fn' must be a function, got {type(fn).__name__}")
    label = str(name or getattr(fn, "__name__", "fn"))
    params = _params(fn, label)
    identifier = re.sub(r"\W", "_", label)
    spec_name = f"fused{next(_COUNT)}_{identifier}"
    # a class of its own, whose __call__ is the generated entry: no frame in between
    cls: type[Fused] = type(f"Fused_{identifier}", (Fused,), {})
    fused = cls(fn, params, label, spec_name)
    cls.__call__ = staticmethod(fused.function)  # type: ignore[method-assign]
    _BY_SPEC[spec_name] = fused
    return fused
