"""The library's public functions: a generated entry per op, one plan cache for all.

An op is declared by its semantics, a function of a plan Builder and the op's
parameters (the public signature after the builder), and the role of each parameter:

    operand   an array or a number (torch's Tensor|Scalar)
    array     an array (a number or anything else reaches the semantics, which refuse it)
    optional  an array, a number or None
    number    a number whose value is read per call (a kernel argument)
    static    a value the plan depends on (dims, a mode, a flag): part of the key
    out       None or an array to write the result into
    outs      None or a pair of (array or None)

`op(...)` writes the public function as Python source. First the op's inline cache:
the plans of its two latest calls that found one by key, newest first, each entered
through the plan's own checks (`inline_entry`: values of the same kinds, numbers of the
same types and classes, equal static values, tensors alike by torch's C++ guard, the
`TensorGuards` dynamo guards its graphs with, pointers as aligned and as aliased), which
answer MISS for a call unlike it. Else the key: for each parameter a few attribute
reads make its part (a torch tensor: dtype, shape, strides, pointer alignment `ptr &
15`, device index; a number: its type and, where the plan depends on its value, a class
expression such as `alpha == 1`; out=: its layout and whether its pointer is an
input's), then one dict lookup finds the plan's launcher (plan.py), which allocates,
writes the pointers and numbers and launches, and goes first into the inline cache
(which stays empty for an op past MEGAMORPHIC such calls, one called with more kinds of
arguments than it holds: such an op keeps its plans' checked entries by its leading
tensor's shape and dtype instead, and probes the one for the call's before the key).
Anything the key cannot describe cheaply (CuPy and other arrays, torch subclasses) is
keyed by `keyof`; NumPy arrays and unusual numbers take the full path every call, and
so does a tensor whose getters raise (torch's sparse and nested tensors), where args.py
names it. A miss runs the full path: describe the
arguments (args.py), run the semantics into a Builder, make the launcher, keep it
under the key, call it. Whatever empties the plan cache (clear, adopt, new tuning
choices, another torch) empties the inline caches too.

The inline cache saves the key's getters (a tensor's dtype, shape, stride(),
get_device(): the guard reads them in C++) and its hashing. bench/launch_cost.py on an
H100 host, without an inline cache and with one (of one entry) run twice each,
alternately, on the same machine: ops.add(a, b, out=c) of 2^10 elements 9.74 and 9.34
us a call (1.07x and 1.06x torch eager's in the same run) -> 7.24 and 7.83 (0.80x,
0.80x); exp 0.88-0.93x ->
0.73-0.84x; sum(dim=-1) 0.75-0.76x -> 0.68-0.69x. A call unlike the plans held pays
for the checks that refuse it (the guard stops at the first tensor that differs)
before its key is built: ops.add(out=) over three shapes in turn ran 1.15-1.26x torch
eager's host time with two probes that always missed (1.0x before the inline cache),
hence MEGAMORPHIC, with which it ran at the key's cost (1.04-1.10x), and with the plans
by shape 0.88-0.90x (bench/launch_cost.py, H100 host); over two shapes in turn,
0.83-0.89x.

ops.fuse (fuse.py) traces functions of the ops with `Traced` values: the key has no
part for one (keyof gives None), so a call on one takes the full path, which hands
it to the value's trace first thing; the fast path never sees one.
"""

from __future__ import annotations

import inspect
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tile_mlir.contract import KERNEL_ARG_ALIGN
from tile_mlir.ops import args, kernels, strategy
from tile_mlir.ops.args import NUMBERS, Array
from tile_mlir.ops.plan import Builder, Prologue

_ALIGN_MASK = KERNEL_ARG_ALIGN - 1

ROLES = ("operand", "array", "optional", "number", "static", "out", "outs")
ARRAY_ROLES = ("operand", "array", "optional", "out")

LIMIT = 4096
"""Plans kept; past that the cache starts over (shapes that never repeat)."""

PLANS: dict[tuple[Any, ...], Callable[..., Any]] = {}  # key -> a Launcher's function

Semantics = Callable[..., str]
"""(builder, **described parameters) -> the result's expression (the builder has the
rest)."""


class Traced:
    """What ops.fuse (fuse.py) passes a traced function for its arrays: an op called on
    one records itself in the trace instead of running."""

    __slots__ = ()

    def record(self, spec: Spec, values: Sequence[Any]) -> Any:
        """The op `spec` called on `values` (one of them this value), recorded."""
        raise NotImplementedError


class _NoTensor:
    """Stands for torch.Tensor until torch is imported (nothing is of this type)."""


_NS: dict[str, Any] = {"_TENSOR": _NoTensor, "_PLANS": PLANS}
"""The generated entries' globals: one for all, so that `_TENSOR` is set once."""
NAMES = _NS
"""Where the names a key's class expressions use go (`_POW_SPECIAL`)."""
_torch_seen: list[Any] = [None]
_lock = threading.Lock()


class _Miss:
    """What an inline cache's entry answers for a call its plan may not serve."""

    def __repr__(self) -> str:
        return "MISS"


MISS = _Miss()


def _miss(*values: Any) -> Any:
    """The inline cache of an op with no plan in it."""
    return MISS


_NS["_MISS"], _NS["_MISSED"] = MISS, _miss
_INLINE: list[str] = []
"""The ops with an inline cache: in _NS, `_IC_<op>` (the newest plan's checked entry;
None: probe nothing), `_IC2_<op>` (the one before it), `_KEYED_<op>` (the calls that
found their plan by key while the inline cache held another) and `_BY_<op>` (None, or
once the op is megamorphic its plans' checked entries by the leading tensor's shape and
dtype)."""

MEGAMORPHIC = 64
"""Calls of an op that found their plan by key, past which its inline cache is left
empty: the op is called with more kinds of arguments than the cache holds, and probing
it first would only add to every call (two probes that miss cost a call 15-25% on an
H100 host: three shapes in turn). Counted from the last time the plan cache emptied,
or the op's cache was last tried again (RETRY)."""
RETRY = 1024
"""Calls by key after which an op's emptied inline cache is tried again (the calls may
have settled on fewer kinds of arguments since): at most MEGAMORPHIC probing calls in
RETRY."""
SHAPES = 64
"""Plans a megamorphic op keeps by its leading tensor's shape and dtype (`_BY_<op>`);
past that it starts over. While its inline cache is empty, a call probes the plan found
last by key for a leading tensor like its own (one getter, one dict lookup, that
plan's checks) before it builds its key: an op called with several shapes in turn
(a model's layers of different widths) runs at the inline cache's cost, not the key's."""


def _empty(op: str) -> None:
    _NS[f"_IC_{op}"], _NS[f"_IC2_{op}"], _NS[f"_KEYED_{op}"] = None, _miss, 0
    _NS[f"_BY_{op}"] = None


def _push(op: str, checked: Callable[..., Any]) -> None:
    """A new plan's checked entry first in the op's inline cache (as the entry does)."""
    if _NS[f"_KEYED_{op}"] <= MEGAMORPHIC:
        newest = _NS[f"_IC_{op}"]
        _NS[f"_IC2_{op}"] = newest if newest is not None else _miss
        _NS[f"_IC_{op}"] = checked


def clear() -> None:
    """Forget every plan, the inline caches' too (tests that swap the device; tuning
    does it through listeners)."""
    PLANS.clear()
    for op in _INLINE:
        _empty(op)


def adopt(plans: dict[tuple[Any, ...], Callable[..., Any]]) -> None:
    """Take `plans` (made before, under other choices: tune.py) into the plan cache, in
    place of what the inline caches hold."""
    for op in _INLINE:
        _empty(op)
    PLANS.update(plans)


strategy.listeners.append(clear)  # new tuning choices: plan again


def _refresh_torch() -> None:
    """torch imported since (or a stand-in put in its place): plans made with the old one go."""
    torch = sys.modules.get("torch")
    if torch is not _torch_seen[0]:
        _torch_seen[0] = torch
        clear()
        tensor = getattr(torch, "Tensor", None) if torch is not None else None
        _NS["_TENSOR"] = tensor if isinstance(tensor, type) else _NoTensor


class _Generic:
    """The second key entry of an array that is not a torch tensor (keyof)."""


def keyof(value: Any) -> tuple[tuple[Any, ...], int] | None:
    """The key entries (SLOTS of them) and pointer of an array the generated code does
    not key inline (a torch subclass, a tensor met before the entry knew torch, CuPy, a
    DeviceBuffer, any __cuda_array_interface__ or DLPack object); None when the full
    path must run every call (NumPy, unusual numbers). A torch tensor's entries are the
    inline ones."""
    _refresh_torch()
    torch = sys.modules.get("torch")
    tensor: Any = getattr(torch, "Tensor", ()) if torch is not None else ()
    if isinstance(value, tensor):
        if not getattr(value, "is_cuda", True):
            return None
        pointer = value.data_ptr()
        return (value.dtype, tuple(value.shape), tuple(value.stride()), pointer & _ALIGN_MASK,
                value.get_device()), pointer
    try:
        found = args.describe(value, "argument")
    except TypeError:
        return None
    if found is None or found.kind == "numpy":
        return None
    return ((found.kind, found.dtype, found.shape, found.strides,
             found.pointer & _ALIGN_MASK, found.device), _Generic, None, None, None), \
        found.pointer


_NS["_KEYOF"] = keyof


# --------------------------------------------------------------------- specs


@dataclass(frozen=True)
class Spec:
    """One op: its public parameters, their roles, and its semantics."""

    name: str
    params: tuple[inspect.Parameter, ...]
    roles: dict[str, str]
    classes: dict[str, str]
    semantics: Semantics

    def role(self, param: str) -> str:
        return self.roles.get(param, "static")

    def pointers(self) -> list[str]:
        """The launcher's pointer parameters, after the op's own."""
        names = []
        for p in self.params:
            role = self.role(p.name)
            if role in ARRAY_ROLES:
                names.append(f"_p_{p.name}")
            elif role == "outs":
                names += [f"_p_{p.name}_0", f"_p_{p.name}_1"]
        return names

    def launcher_params(self) -> tuple[str, ...]:
        return (*(p.name for p in self.params), *self.pointers())


def op(roles: dict[str, str], classes: dict[str, str] | None = None,
       name: str | None = None) -> Callable[[Semantics], Callable[..., Any]]:
    """Make the public function of an op from its semantics (see the module docstring)."""
    def wrap(semantics: Semantics) -> Callable[..., Any]:
        params = tuple(inspect.signature(semantics).parameters.values())[1:]
        for role in roles.values():
            assert role in ROLES, role
        spec = Spec(name or semantics.__name__, params, dict(roles), dict(classes or {}),
                    semantics)
        function = _generate(spec)
        function.__doc__ = semantics.__doc__
        function.__module__ = semantics.__module__
        function.__wrapped_semantics__ = semantics  # type: ignore[attr-defined]
        return function

    return wrap


# ------------------------------------------------------------------ the entry


SLOTS = 5
"""Key entries per array parameter, whatever it was given as; the first two tell the
cases apart: a torch tensor (dtype, shape, strides, pointer alignment, device index:
get_device(), an int, is cheaper to make and to hash than a torch.device), None
(None, None, ...), a number (its type or (type, class), None, ...), any other array
(keyof's description, _Generic, None, ...). One flat tuple per call: no tuple built per
parameter, and hashing it does not recurse."""


def _slots(name: str) -> list[str]:
    return [f"_k_{name}{i}" for i in range(SLOTS)]


def _fill(name: str, first: str) -> list[str]:
    """An array parameter's key entries when it is None or a number: one, then Nones."""
    k = _slots(name)
    return [f"        {k[0]} = {first}", f"        {' = '.join(k[1:])} = None"]


def _number_part(spec: Spec, name: str) -> str:
    cls = spec.classes.get(name)
    return f"(_t, {cls})" if cls else "_t"


def _generic(name: str, value: str, call: str, pointer: str) -> list[str]:
    return ["    else:", f"        _g = _KEYOF({value})", "        if _g is None:",
            f"            return {call}", f"        {', '.join(_slots(name))} = _g[0]",
            f"        {pointer} = _g[1]"]


def _tensor_entries(value: str, pointer: str) -> list[str]:
    """A torch tensor's key entries: what a plan depends on (the misalignment under
    KERNEL_ARG_ALIGN, not the pointer: that is read per call). keyof's are the same."""
    return [f"{value}.dtype", f"{value}.shape", f"{value}.stride()",
            f"{pointer} & {_ALIGN_MASK}", f"{value}.get_device()"]


def _array_key(value: str, pointer: str) -> str:
    """A torch tensor's key entries as one tuple (out=(a, b)'s items)."""
    return f"({', '.join(_tensor_entries(value, pointer))})"


def _tensor_lines(name: str) -> list[str]:
    return [f"        _p_{name} = {name}.data_ptr()",
            *(f"        {k} = {e}" for k, e in zip(_slots(name),
                                                   _tensor_entries(name, f"_p_{name}"),
                                                   strict=True))]


def _param_lines(spec: Spec, param: inspect.Parameter, slow: str) -> list[str]:
    """The key entries (`_k_<name>`, or `_k_<name>0..4` for an array parameter) and the
    pointer (`_p_<name>`) of one parameter."""
    name, role = param.name, spec.role(param.name)
    if role == "static":
        return [f"    _k_{name} = {name} if type({name}) is not list else tuple({name})"]
    if role == "number":
        return ["    _t = type(" + name + ")",
                "    if _t is float or _t is int or _t is bool:",
                f"        _k_{name} = {_number_part(spec, name)}",
                "    else:", f"        return {slow}"]
    if role == "outs":
        return _outs_lines(name, slow)
    lines = [f"    _t = type({name})"]
    if role in ("optional", "out"):
        lines += [f"    if {name} is None:", f"        _p_{name} = 0", *_fill(name, "None"),
                  "    elif _t is _TENSOR:"]
    else:
        lines.append("    if _t is _TENSOR:")
    lines += _tensor_lines(name)
    if role in ("operand", "optional"):
        lines += ["    elif _t is float or _t is int or _t is bool:", f"        _p_{name} = 0",
                  *_fill(name, _number_part(spec, name))]
    return lines + _generic(name, name, slow, f"_p_{name}")


def key_entries(spec: Spec) -> list[str]:
    """The names and expressions of the key after the op's id, in order: each
    parameter's entries, then for out= (and each item of out=(a, b)) whether its pointer
    is each earlier array's."""
    entries: list[str] = []
    earlier: list[str] = []
    for p in spec.params:
        role = spec.role(p.name)
        if role in ARRAY_ROLES:
            entries += _slots(p.name)
            if role == "out":
                entries += [f"_p_{p.name} == {e}" for e in earlier]
            else:
                earlier.append(f"_p_{p.name}")
        else:
            entries.append(f"_k_{p.name}")
            if role == "outs":
                entries += [f"_p_{p.name}_{i} == {e}" for i in (0, 1) for e in earlier]
    return entries


def _outs_lines(name: str, slow: str) -> list[str]:
    """out=(a, b): each None or an array, keyed as one tuple (a rare parameter: the
    nesting costs what it costs)."""
    lines = [f"    if {name} is None:", f"        _p_{name}_0 = _p_{name}_1 = 0",
             f"        _k_{name} = None", "    else:",
             f"        if type({name}) is not tuple and type({name}) is not list:",
             f"            return {slow}"]
    for i in (0, 1):
        item, pointer = f"{name}[{i}]", f"_p_{name}_{i}"
        lines += [f"        _o = {item}", "        if _o is None:", f"            {pointer} = 0",
                  f"            _k{i} = None", "        elif type(_o) is _TENSOR:",
                  f"            {pointer} = _o.data_ptr()",
                  f"            _k{i} = {_array_key('_o', pointer)}",
                  "        else:", "            _g = _KEYOF(_o)", "            if _g is None:",
                  f"                return {slow}", f"            _k{i}, {pointer} = _g"]
    lines.append(f"        _k_{name} = (type({name}), len({name}), _k0, _k1)")
    return lines


def _signature_text(spec: Spec) -> str:
    parts, star = [], False
    for p in spec.params:
        if p.kind is inspect.Parameter.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        default = "" if p.default is inspect.Parameter.empty else f"=_D_{spec.name}_{p.name}"
        parts.append(f"{p.name}{default}")
    return ", ".join(parts)


def _keyed_lines(first: str, second: str, keyed: str, shaped: str, lead: str | None
                 ) -> list[str]:
    """After a call found its plan by key: the plan first in the inline cache (the cache
    empty for a plan without a checked entry, and past MEGAMORPHIC such calls until
    RETRY, when the plan goes into the op's plans by shape instead, under its leading
    tensor's shape and dtype: `_k_<lead>1`, `_k_<lead>0`)."""
    by_shape = [] if lead is None else [
        f"            if _c is not None and type({lead}) is _TENSOR:",
        f"                if {shaped} is None or len({shaped}) >= {SHAPES}:",
        f"                    {shaped} = {{}}",
        f"                {shaped}[(_k_{lead}1, _k_{lead}0)] = _c"]
    return ["    _c = _plan.inline", f"    if _c is not {first}:", f"        {keyed} += 1",
            f"        if _c is None or {keyed} > {MEGAMORPHIC}:", f"            {first} = None",
            *by_shape,
            f"            if {keyed} > {RETRY}:", f"                {keyed} = 0",
            "        else:", f"            {second} = {first} if {first} is not None "
            "else _MISSED", f"            {first} = _c"]


def _lead(spec: Spec) -> str | None:
    """The parameter whose shape and dtype index a megamorphic op's plans: its first array
    or operand (None for an op without one)."""
    return next((p.name for p in spec.params if spec.role(p.name) in ("operand", "array")),
                None)


def _shaped_lines(shaped: str, lead: str, values: str) -> list[str]:
    """A megamorphic op's probe: the checked entry of the plan last found by key for a
    leading tensor of this shape and dtype (its getters may raise: a nested tensor's)."""
    return [f"    elif {shaped} is not None and type({lead}) is _TENSOR:", "        try:",
            f"            _c = {shaped}.get(({lead}.shape, {lead}.dtype))",
            "        except RuntimeError:", "            _c = None", "        if _c is not None:",
            f"            _r = _c({values})", "            if _r is not _MISS:",
            "                return _r"]


def _generate(spec: Spec) -> Callable[..., Any]:
    names = [p.name for p in spec.params]
    values = ", ".join(names)
    slow = f"_SLOW_{spec.name}(None, {values})"
    inlined = "outs" not in spec.roles.values()  # (out=(a, b): never inline_entry's)
    first, second, keyed, shaped = (f"_IC_{spec.name}", f"_IC2_{spec.name}",
                                    f"_KEYED_{spec.name}", f"_BY_{spec.name}")
    lead = _lead(spec)
    lines = [f"def {spec.name}({_signature_text(spec)}):"]
    if inlined:
        lines += [f"    global {first}, {second}, {keyed}, {shaped}",
                  f"    if {first} is not None:"]
        for cache in (first, second):
            lines += [f"        _r = {cache}({values})", "        if _r is not _MISS:",
                      "            return _r"]
        if lead is not None:
            lines += _shaped_lines(shaped, lead, values)
    lines.append("    try:")
    for param in spec.params:
        lines += [f"    {line}" for line in _param_lines(spec, param, slow)]
    # a tensor without strided storage (sparse, nested) raises from its getters: the full
    # path says what is wrong with it (a try costs nothing until it catches)
    lines += ["    except RuntimeError:", f"        return {slow}"]
    key = ", ".join([f"_ID_{spec.name}", *key_entries(spec)])
    lines += [f"    _key = ({key},)", "    try:", "        _plan = _PLANS[_key]",
              "    except KeyError:", f"        return _SLOW_{spec.name}(_key, {values})",
              "    except TypeError:  # an unhashable parameter: no plan for it",
              f"        return {slow}",
              *(_keyed_lines(first, second, keyed, shaped, lead) if inlined else []),
              f"    return _plan({', '.join(spec.launcher_params())})"]
    if inlined:
        _empty(spec.name)
        _INLINE.append(spec.name)
    for p in spec.params:
        if p.default is not inspect.Parameter.empty:
            _NS[f"_D_{spec.name}_{p.name}"] = p.default
    _NS[f"_ID_{spec.name}"] = spec.name
    _NS[f"_SLOW_{spec.name}"] = lambda key, *values: full(spec, key, values)
    source = "\n".join(lines) + "\n"
    exec(compile(source, f"<tile_mlir.ops.{spec.name}>", "exec"), _NS)
    function: Callable[..., Any] = _NS[spec.name]
    function.__spec__ = spec  # type: ignore[attr-defined]
    function.__entry_source__ = source  # type: ignore[attr-defined] # to read, when in doubt
    return function


# ------------------------------------------------------------------ the full path


@dataclass
class _Call:
    """One call's parameters, described."""

    described: dict[str, Any]
    pointers: dict[str, int]
    objects: dict[str, str]  # pointer var -> the launcher's expression for the object
    staged: dict[int, Any]  # id(device copy) -> the NumPy array it stands for
    copies: dict[int, Any]  # id(NumPy array) -> its device copy
    stage: bool = False  # copy NumPy arrays to the device
    host: bool = False  # there are NumPy arrays


def _describe_array(value: Any, name: str, root: str, call: _Call) -> Any:
    operand = args.classify(value, name)
    if not isinstance(operand, Array):
        return operand
    if operand.kind == "numpy":
        call.host = True
    if operand.kind == "numpy" and call.stage:
        copy = call.copies.get(id(operand.obj))
        if copy is None:  # one copy per array: in place stays in place
            copy = args.to_device(operand.obj, 0)
            call.copies[id(operand.obj)] = copy
            call.staged[id(copy)] = operand.obj
        described = args.describe(copy, name)
        assert described is not None
        operand = described.with_host(operand.obj)
    call.pointers[root] = operand.pointer
    return operand.rooted(root)


def _describe(spec: Spec, values: Sequence[Any], stage: bool = False) -> _Call:
    call = _Call({}, {}, {}, {}, {}, stage)
    for param, value in zip(spec.params, values, strict=True):
        name, role = param.name, spec.role(param.name)
        if role == "static":
            call.described[name] = value
        elif role == "number":
            call.described[name] = args.number(value, name, spec.name)
        elif role == "outs":
            call.described[name] = _describe_outs(name, value, call)
        elif value is None and role in ("optional", "out"):
            call.described[name] = None
        else:
            if role == "out" and args.describe(value, name) is None:
                raise TypeError(f"{spec.name}: argument '{name}' must be an array, got "
                                f"{type(value).__name__}")
            root = f"_p_{name}"
            call.described[name] = _describe_array(value, name, root, call)
            call.objects[root] = name
    return call


def _describe_outs(name: str, value: Any, call: _Call) -> Any:
    if value is None:
        return None
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise TypeError(f"argument '{name}' must be a pair ({name}[0], {name}[1])")
    items: list[Array | None] = []
    for i, item in enumerate(value):
        root = f"_p_{name}_{i}"
        if item is None:
            items.append(None)
            continue
        if args.describe(item, f"{name}[{i}]") is None:
            raise TypeError(f"argument '{name}[{i}]' must be an array, got "
                            f"{type(item).__name__}")
        items.append(_describe_array(item, f"{name}[{i}]", root, call))
        call.objects[root] = f"{name}[{i}]"
    return tuple(items)


def _first_place(call: _Call) -> tuple[str, int] | None:
    for value in call.described.values():
        found = value if isinstance(value, Array) else next(
            (v for v in value if isinstance(v, Array)), None) if isinstance(value, tuple) \
            else None
        if found is not None and found.device is not None:
            return found.kind, found.device
    return None


def _semantics(spec: Spec, call: _Call) -> Builder:
    builder = Builder(spec.name, spec.launcher_params())
    builder.objects.update(call.objects)
    builder.result = spec.semantics(builder, **call.described)
    return builder


# ------------------------------------------------------------ the inline cache


def tensor_guard(tensors: Sequence[Any]) -> Callable[..., bool] | None:
    """A check, in C++, that tensors have these ones' types, dtypes, device indices,
    shapes, strides, dispatch keys and requires_grad, each passed once: torch's
    `torch._C._dynamo.guards.TensorGuards`, which guards dynamo's compiled graphs. None
    where this torch has none, or it does not pass the tensors it was made from."""
    torch = sys.modules.get("torch")
    make = getattr(getattr(getattr(getattr(torch, "_C", None), "_dynamo", None), "guards",
                           None), "TensorGuards", None)
    if make is None:
        return None
    try:
        check: Callable[..., bool] = make(*tensors, dynamic_dims_sizes=None,
                                          dynamic_dims_strides=None).check
        if check(*tensors) is not True:
            return None
    except Exception:  # noqa: BLE001 - another torch's guards: no inline cache
        return None
    return check


_PLAIN = (type(None), bool, int, float, str)


def _plain(value: Any) -> bool:
    """A static parameter the inline cache compares by type and ==: a builtin scalar, a
    torch dtype, or a tuple of them."""
    if type(value) is tuple:
        return all(_plain(v) for v in value)
    torch = sys.modules.get("torch")
    return type(value) in _PLAIN or (torch is not None and
                                     type(value) is getattr(torch, "dtype", None))


@dataclass
class _Checks:
    """What inline_entry gathers from a call, parameter by parameter."""

    spec: Spec
    stored: dict[str, Any]  # the call's key: entry name -> value
    checks: list[str] = field(default_factory=list)  # any true: not like this call
    names: dict[str, Any] = field(default_factory=lambda: {"_MISS": MISS})
    guarded: list[tuple[str, Any]] = field(default_factory=list)  # (parameter, tensor)
    pointers: list[str] = field(default_factory=list)  # the pointer variables, set
    aligned: list[tuple[str, int]] = field(default_factory=list)  # (pointer, ptr & 15)

    def number(self, name: str, value: Any, part: Any) -> None:
        """A number of the same type (and class: part[1] where the op has one)."""
        cls = self.spec.classes.get(name)
        self.checks.append(f"type({name}) is not {type(value).__name__}")
        if cls:
            self.names[f"_ICV_{name}"] = part[1]
            self.names.update((n, _NS[n]) for n in compile(cls, "<class>", "eval").co_names
                              if n in _NS)
            self.checks.append(f"({cls}) != _ICV_{name}")

    def static(self, name: str, value: Any) -> bool:
        if not _plain(value):
            return False
        self.names[f"_ICT_{name}"], self.names[f"_ICV_{name}"] = type(value), value
        self.checks.append(f"type({name}) is not _ICT_{name} or {name} != _ICV_{name}")
        return True

    def array(self, name: str, value: Any) -> bool:
        """An array parameter: None, a number, or a torch tensor keyed by its layout."""
        if value is None:
            self.checks.append(f"{name} is not None")
            self.pointers.append(f"_p_{name} = 0")
            return True
        if type(value) in (float, int, bool):
            self.number(name, value, self.stored[f"_k_{name}0"])
            self.pointers.append(f"_p_{name} = 0")
            return True
        if self.stored[f"_k_{name}1"] is _Generic or not hasattr(value, "data_ptr"):
            return False
        same = next((n for n, v in self.guarded if v is value), None)
        if same is None:
            self.guarded.append((name, value))
            self.pointers.append(f"_p_{name} = {name}.data_ptr()")
        else:  # torch's guard takes each tensor once
            self.checks.append(f"{name} is not {same}")
            self.pointers.append(f"_p_{name} = _p_{same}")
        self.aligned.append((f"_p_{name}", self.stored[f"_k_{name}3"]))
        return True

    def lines(self) -> list[str] | None:
        """The prologue: the checks, torch's guard, the pointers, then their alignment
        and out='s aliasing as in the key; None where torch has no guard."""
        lines = [f"if {' or '.join(self.checks)}:\n        return _MISS"] if self.checks \
            else []
        if self.guarded:
            guard = tensor_guard([v for _, v in self.guarded])
            if guard is None:
                return None
            self.names["_IC_GUARD"] = guard
            lines.append(f"if not _IC_GUARD({', '.join(n for n, _ in self.guarded)}):\n"
                         "        return _MISS")
        lines += self.pointers
        after = [f"{p} & {_ALIGN_MASK} != {a}" for p, a in self.aligned if a]
        if any(not a for _, a in self.aligned):
            after.append(f"({' | '.join(p for p, a in self.aligned if not a)}) & "
                         f"{_ALIGN_MASK}")
        after += [f"{'not ' if known else ''}({expr})" for expr, known in self.stored.items()
                  if "==" in expr]  # an out= whose pointer is (not) an input's
        if after:
            lines.append(f"if {' or '.join(after)}:\n        return _MISS")
        return lines


def inline_entry(spec: Spec, key: tuple[Any, ...], values: Sequence[Any]
                 ) -> Prologue | None:
    """The checks that let a plan serve a call without its key (the op's inline cache):
    the call passes what this call passed where the key looks: the same kinds of
    values (tensors of the same types, None, numbers of the same types and classes,
    equal static values), the tensors alike by torch's own guard (tensor_guard) and
    their pointers as aligned and as aliased. None where the call has what the inline
    cache does not check (another array, out=(a, b), a list) or torch has no guard."""
    found = _Checks(spec, dict(zip(key_entries(spec), key[1:], strict=True)))
    for param, value in zip(spec.params, values, strict=True):
        name, role = param.name, spec.role(param.name)
        if role == "number":
            found.number(name, value, found.stored[f"_k_{name}"])
        elif role == "outs" or not (found.static(name, value) if role == "static"
                                    else found.array(name, value)):
            return None
    lines = found.lines()
    if lines is None:
        return None
    return Prologue(tuple(p.name for p in spec.params), tuple(lines), found.names)


def full(spec: Spec, key: tuple[Any, ...] | None, values: Sequence[Any]) -> Any:
    """A call the plan cache did not answer: plan it, keep the plan, run it.

    NumPy arrays are planned on the host first (so that a bad call fails without a
    GPU, and one with nothing to launch needs none); with kernels to run they are then
    copied to the device, planned and run there, and the results copied back."""
    for value in values:
        if isinstance(value, Traced):  # ops.fuse is tracing: record, run nothing
            return value.record(spec, values)
    _refresh_torch()
    call = _describe(spec, values)
    place = _first_place(call)
    capturing = place is not None and args.capturing(*place)
    with kernels.capture_guard(capturing):
        builder = _semantics(spec, call)
        if call.host and builder.launches:
            return _staged(spec, values)
        kept = key if builder.cacheable and not call.host else None  # the key to keep under
        launcher = builder.finish(inline_entry(spec, kept, values) if kept is not None
                                  else None)
    launcher.full = lambda *given: full(spec, None, given[:len(spec.params)])
    pointers = [call.pointers.get(p, 0) for p in spec.pointers()]
    if kept is not None:
        with _lock:
            if len(PLANS) >= LIMIT:
                clear()
            PLANS[kept] = launcher.function
            launcher.function.inline = launcher.checked  # type: ignore[attr-defined]
            if spec.name in _INLINE and launcher.checked is not None:
                _push(spec.name, launcher.checked)
    return launcher(*values, *pointers)


def _staged(spec: Spec, values: Sequence[Any]) -> Any:
    """A call on NumPy arrays: through device copies (never kept as a plan)."""
    call = _describe(spec, values, stage=True)
    builder = _semantics(spec, call)
    launcher = builder.finish()
    pointers = [call.pointers.get(p, 0) for p in spec.pointers()]
    result = launcher(*[_device_value(v, call) for v in values], *pointers)
    return _unstage(result, call)


def _device_value(value: Any, call: _Call) -> Any:
    """A parameter as the launcher sees it in a staged call: the device copies."""
    if isinstance(value, tuple | list):
        return type(value)(call.copies.get(id(v), v) for v in value)
    return call.copies.get(id(value), value)


def _unstage(result: Any, call: _Call) -> Any:
    """A staged call's result on the host: NumPy outputs (the ones given filled in)."""
    def host(value: Any) -> Any:
        if value is None or type(value) in NUMBERS:
            return value
        original = call.staged.get(id(value))
        data = args.to_host(value)
        if original is None:
            return data
        original[...] = data
        return original

    if isinstance(result, tuple):
        return tuple(host(v) for v in result)
    return host(result)
