"""A random differential test of tile_mlir.ops (issue 16, part 3): cases drawn from a seed.

`draw(tier, seed, index)` makes case `index` of a run from its own generator
(`default_rng([seed, index])`), so any one case replays alone: an op of a family
(families take turns, `schedule`), a dtype the op has (a few per op and run, so
that kernels, compiled once per signature, do not dominate), arrays of rank 0-4
with odd, prime and unit sizes, and views of them: offset (misaligned base
pointers), transposed, strided (`x[:, ::2]`), rows with gaps (`x[:, :n]` of a
wider array), expanded (stride 0); Python numbers and 0-d arrays where the op
takes them, operands of other dtypes (promotion), `out=` (fresh, a view, another
dtype, or the very same view as an input: in place), and a few calls that must
fail (shapes that do not broadcast, an out= that overlaps an input or itself,
dtypes the op lacks) or that the library documents as differing from torch.
Input values come from support.ops_check (each op's domain, NaN, +-Inf, +-0 and
the dtype's extremes sprinkled in).

`run_case(case, backend, reference)` builds the inputs on a backend (the null
tier's pretend device, or CUDA torch tensors made with torch's own slicing,
`permute` and `expand`), calls `tile_mlir.ops.<op>` through the public API only,
and compares: elementwise ops with the tier's reference (`NumpyReference`:
float64 NumPy through the registry's references with torch's promotion written
out here; the gpu tier's: torch itself), exact ops bit for bit and the others
within docs/ops-accuracy.md's bounds (ops_check.compare); reductions, RoPE,
dropout (bit for bit against tile_mlir.op_table.refs' Philox stream, its keep
rate and scaling), ALiBi and sinusoidal encodings against float64 NumPy. It
also checks the result's dtype and shape, that `out=` is what comes back, that
no input changed and that nothing outside the output's view was written, and
calls an elementwise op a second time on new arrays of the same layout (other
pointers: what the library's fast path reuses), which must give the same bits.
"""

from __future__ import annotations

import inspect
import math
import os
import secrets
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np

from support import ops_check, rope_ref
from tile_mlir import op_table, ops
from tile_mlir.dtypes import DTYPES, FP8, lowest, max_value, smallest
from tile_mlir.op_table import refs

# ---------------------------------------------------------------- families

REDUCTIONS = ("sum", "amax", "amin", "prod", "mean")
REDUCTION_DTYPES = ("f32", "f16", "bf16")  # README: the reductions take fp32, fp16, bf16
ROPE_OPS = ("rope_neox", "rope_non_neox")
ELEMENTWISE = ("unary_math", "binary_arith", "activation", "fused_gated", "comparison",
               "bitwise", "logical", "special")
FAMILIES = (*ELEMENTWISE, "reduction", "rope", "dropout", "alibi", "sinusoidal")

WEIGHTS = {"unary_math": 4, "binary_arith": 5, "activation": 4, "fused_gated": 1,
           "comparison": 2, "bitwise": 1, "logical": 1, "special": 3, "reduction": 3,
           "rope": 1, "dropout": 1, "alibi": 1, "sinusoidal": 1}
"""How many turns a family takes in each round of the schedule (about its ops' share)."""


@dataclass(frozen=True)
class Tier:
    """Where a run goes: the families it draws, how large its arrays are, how to replay."""

    name: str
    families: tuple[str, ...]
    budget: int  # elements of an array's logical shape, at most
    dtypes_per_op: int
    command: str  # runs the tier's test

    def schedule(self) -> tuple[str, ...]:
        """Families in turn, each as often as its weight, spread over the round."""
        turns: list[tuple[float, int, str]] = []
        for n, family in enumerate(self.families):
            weight = WEIGHTS[family]
            turns += [((k + 0.5) / weight, n, family) for k in range(weight)]
        return tuple(family for _, _, family in sorted(turns))


GPU = Tier("gpu", FAMILIES, 1 << 18, 2, "python -m pytest -m gpu tests/gpu/test_differential.py")
NULL = Tier("null", tuple(f for f in FAMILIES if f != "reduction"), 1 << 10, 2,
            "python -m pytest tests/null/test_differential.py")
"""The null tier does without the reductions: their kernels use shuffles and shared
memory, which the host emulator does not run (support/host.py)."""


def family_ops(family: str) -> tuple[str, ...]:
    """The public ops of a family, as the registry lists them."""
    if family == "reduction":
        return REDUCTIONS
    if family == "rope":
        return ROPE_OPS
    return tuple(op.name for op in op_table.library_ops() if op.family == family)


def op_dtypes(op: str) -> tuple[str, ...]:
    """The dtypes the registry says an op takes."""
    if op in REDUCTIONS:
        return REDUCTION_DTYPES
    row = op_table.ELEMENTWISE.get(op)
    if row is not None and row.family in ELEMENTWISE:
        return row.dtypes
    return next(c.dtypes for c in op_table.COMPOSITES if c.name == op)


def run_dtypes(tier: Tier, seed: int, op: str) -> tuple[str, ...]:
    """The few dtypes an op runs on in this run (drawn from the seed and the op's name)."""
    rng = np.random.default_rng([seed, zlib.crc32(op.encode())])
    dtypes = op_dtypes(op)
    count = min(tier.dtypes_per_op, len(dtypes))
    chosen = rng.choice(len(dtypes), count, replace=False)
    return tuple(dtypes[int(n)] for n in sorted(chosen))


T = TypeVar("T")


def pick(rng: np.random.Generator, items: Sequence[T]) -> T:
    return items[int(rng.integers(len(items)))]


# ------------------------------------------------------------------- views

Shape = tuple[int, ...]
Layout = tuple[Shape, tuple[int, ...], int]  # shape, strides, offset (elements of storage)


@dataclass(frozen=True)
class View:
    """An array as a view of a 1-d storage: a contiguous block of shape `base` starting
    `lead` elements in (`tail` more after it), then torch's view steps in order:
    ("slice", dim, start, stop, step), ("permute", order), ("expand", shape)."""

    base: Shape
    lead: int = 0
    tail: int = 0
    steps: tuple[tuple[Any, ...], ...] = ()
    kinds: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        """Elements of the storage."""
        return self.lead + math.prod(self.base) + self.tail

    def layout(self) -> Layout:
        shape = self.base
        strides = tuple(math.prod(shape[d + 1:]) for d in range(len(shape)))
        layout: Layout = (shape, strides, self.lead)
        for step in self.steps:
            layout = _step_layout(layout, step)
        return layout

    @property
    def shape(self) -> Shape:
        return self.layout()[0]

    def of(self, storage: np.ndarray) -> np.ndarray:
        """The view's values, from the storage's, with NumPy's own slicing (a copy)."""
        array = storage[self.lead:self.lead + math.prod(self.base)].reshape(self.base)
        for step in self.steps:
            array = _step_numpy(array, step)
        return np.array(array)

    def covered(self) -> np.ndarray:
        """Which elements of the storage the view reaches."""
        shape, strides, offset = self.layout()
        mask = np.zeros(self.size, bool)
        index = np.full(shape, offset, np.int64)
        for d, (size, stride) in enumerate(zip(shape, strides, strict=True)):
            steps = np.arange(size, dtype=np.int64) * stride
            index = index + steps.reshape([size if i == d else 1 for i in range(len(shape))])
        mask[index.reshape(-1)] = True
        return mask

    def label(self) -> str:
        return "+".join(self.kinds) if self.kinds else "contiguous"


def _step_layout(layout: Layout, step: tuple[Any, ...]) -> Layout:
    shape, strides, offset = layout
    if step[0] == "permute":
        order = step[1]
        return tuple(shape[i] for i in order), tuple(strides[i] for i in order), offset
    if step[0] == "slice":
        _, dim, start, stop, by = step
        size = len(range(start, min(stop, shape[dim]), by))
        new_shape = (*shape[:dim], size, *shape[dim + 1:])
        new_strides = (*strides[:dim], strides[dim] * by, *strides[dim + 1:])
        return new_shape, new_strides, offset + start * strides[dim]
    target = step[1]
    new_strides = tuple(0 if size == 1 and want != 1 else stride
                        for size, stride, want in zip(shape, strides, target, strict=True))
    return tuple(target), new_strides, offset


def _step_numpy(array: np.ndarray, step: tuple[Any, ...]) -> np.ndarray:
    if step[0] == "permute":
        return array.transpose(step[1])
    if step[0] == "slice":
        _, dim, start, stop, by = step
        index = [slice(None)] * array.ndim
        index[dim] = slice(start, stop, by)
        return array[tuple(index)]
    return np.broadcast_to(array, step[1])


def _expand(rng: np.random.Generator, shape: list[int], unit_last: bool = False
            ) -> tuple[Any, ...] | None:
    """Some dims of size > 1 made 1 before an expand back to `shape` (stride 0)."""
    dims = [d for d, size in enumerate(shape) if size > 1 and not (unit_last and
                                                                    d == len(shape) - 1)]
    if not dims:
        return None
    chosen = rng.choice(dims, int(rng.integers(1, len(dims) + 1)), replace=False)
    target = tuple(shape)
    for d in chosen:
        shape[int(d)] = 1
    return ("expand", target)


def _permute(rng: np.random.Generator, shape: list[int], unit_last: bool
             ) -> tuple[Any, ...] | None:
    """A permutation (not the identity) that maps the base's dims to `shape`'s."""
    movable = len(shape) - 1 if unit_last else len(shape)
    if movable < 2:
        return None
    order = list(range(len(shape)))
    while order[:movable] == sorted(order[:movable]):
        order[:movable] = [int(d) for d in rng.permutation(movable)]
    base = [0] * len(shape)
    for i, d in enumerate(order):
        base[d] = shape[i]
    shape[:] = base
    return ("permute", tuple(order))


def _strided(rng: np.random.Generator, shape: list[int], unit_last: bool
             ) -> tuple[Any, ...] | None:
    """Every 2nd or 3rd element of a longer dim (`x[:, ::2]`), from element 0 or 1."""
    dims = len(shape) - 1 if unit_last else len(shape)
    if dims < 1:
        return None
    dim = int(rng.integers(dims)) if rng.random() < 0.5 or unit_last else len(shape) - 1
    by, start = pick(rng, (2, 3)), pick(rng, (0, 1))
    stop = start + (shape[dim] - 1) * by + 1 if shape[dim] else start
    shape[dim] = stop + int(rng.integers(0, 2))
    return ("slice", dim, start, stop, by)


def _gaps(rng: np.random.Generator, shape: list[int]) -> tuple[Any, ...] | None:
    """The first or last n of a wider dim (`x[:, :n]`): rows with gaps between them."""
    if not shape:
        return None
    dim = len(shape) - 1 if rng.random() < 0.6 else int(rng.integers(len(shape)))
    pad = pick(rng, (1, 2, 3, 5))
    start = pick(rng, (0, pad))
    size = shape[dim]
    shape[dim] = size + pad
    return ("slice", dim, start, start + size, 1)


VIEW_KINDS = ("offset", "transpose", "strided", "gaps", "expand")


def draw_view(rng: np.random.Generator, shape: Shape, *, expand: bool = True,
              unit_last: bool = False, plain: float = 0.35) -> View:
    """A view of logical shape `shape`: contiguous with probability `plain`, else some of
    VIEW_KINDS (built from the result backwards: the steps run in the other order).
    `unit_last` keeps the last dim at stride 1 (RoPE's head_dim)."""
    base = list(shape)
    steps: list[tuple[Any, ...]] = []
    kinds: list[str] = []
    makers: list[tuple[str, float, Callable[[], tuple[Any, ...] | None]]] = [
        ("expand", 0.3 if expand else 0.0, lambda: _expand(rng, base, unit_last)),
        ("transpose", 0.45, lambda: _permute(rng, base, unit_last)),
        ("strided", 0.4, lambda: _strided(rng, base, unit_last)),
        ("gaps", 0.35, lambda: _gaps(rng, base)),
    ]
    fancy = rng.random() >= plain
    for kind, chance, make in makers:
        step = make() if fancy and rng.random() < chance else None
        if step is not None:
            steps.append(step)
            kinds.append(kind)
    lead = 0
    if fancy and rng.random() < 0.4:
        lead = pick(rng, (1, 2, 3, 5, 7))
        kinds.append("offset")
    return View(tuple(base), lead, int(rng.integers(0, 3)), tuple(reversed(steps)),
                tuple(kinds))


SIZES = (1, 1, 2, 3, 5, 7, 8, 11, 13, 16, 17, 31, 32, 37, 64, 97, 127, 128, 257, 509, 1000,
         1031, 4099)
RANK_WEIGHTS = (0.06, 0.26, 0.32, 0.22, 0.14)  # ranks 0-4
EMPTY = 0.02  # an array with no elements


def draw_shape(rng: np.random.Generator, budget: int, least: int = 0, most: int = 4) -> Shape:
    """Rank `least`-`most`, odd, prime, unit and power-of-two sizes, at most `budget`
    elements (now and then none)."""
    weights = np.array(RANK_WEIGHTS[least:most + 1])
    rank = least + int(rng.choice(len(weights), p=weights / weights.sum()))
    shape = [pick(rng, SIZES) for _ in range(rank)]
    while math.prod(shape) > budget:
        largest = shape.index(max(shape))
        shape[largest] = pick(rng, [s for s in SIZES if s < shape[largest]])
    if rank and rng.random() < EMPTY:
        shape[int(rng.integers(rank))] = 0
    return tuple(shape)


def with_ones(rng: np.random.Generator, shape: Shape) -> Shape:
    """Some dims made 1 (the operand broadcasts along them)."""
    return tuple(1 if rng.random() < 0.4 else size for size in shape)


def broadcastable(rng: np.random.Generator, shape: Shape) -> Shape:
    """An operand's shape that broadcasts to `shape`: the same, a suffix, with ones."""
    r = rng.random()
    if r < 0.55 or not shape:
        return shape
    if r < 0.75:
        return shape[int(rng.integers(1, len(shape) + 1)):]
    return with_ones(rng, shape)


# ------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Array:
    """An array argument: its dtype and view; `role` says how its values are drawn."""

    dtype: str
    view: View
    role: str = "data"
    limit: int = 0  # positions: the cache's rows
    near: int = -1  # role "near": the argument whose values it takes, nudged

    @property
    def shape(self) -> Shape:
        return self.view.shape

    def label(self) -> str:
        kinds = "" if not self.view.kinds else "{" + self.view.label() + "}"
        return f"{self.dtype}{list(self.shape)}{kinds}"


@dataclass(frozen=True)
class Number:
    """A Python number argument."""

    value: bool | int | float

    def label(self) -> str:
        return repr(self.value)


@dataclass(frozen=True)
class Same:
    """The very same array object as positional argument `position` (`op(x, x)`)."""

    position: int

    def label(self) -> str:
        return f"<arg {self.position}>"


@dataclass(frozen=True)
class Out:
    """out=: "fresh" (a poisoned array, maybe a view, maybe of another dtype),
    "inplace" (the very same view as argument `position`; inplace=True for the
    activations), "overlap" (a view of argument `position`'s storage that overlaps it
    without being it), "expanded" (a view with stride 0: elements written twice)."""

    kind: str
    dtype: str = ""
    view: View | None = None
    position: int = 0
    second: View | None = None  # RoPE: key_out's view

    def label(self) -> str:
        if self.kind == "inplace":
            return f"in place of arg {self.position}"
        assert self.view is not None
        where = f" of arg {self.position}'s storage" if self.kind in ("overlap",
                                                                        "interleaved") else ""
        return f"{self.kind} {self.dtype}{list(self.view.shape)}{{{self.view.label()}}}{where}"


EXPECTS = ("ok", "error", "library_error", "library_extends")
"""ok: torch's result; error: torch and the library both refuse the call;
library_error: the library documents that it refuses what torch takes;
library_extends: the library documents that it takes what torch refuses."""


@dataclass(frozen=True)
class Case:
    """One call of a run, fully described: everything else is drawn from (seed, index)."""

    tier: str
    seed: int
    index: int
    family: str
    op: str  # tile_mlir.ops.<op>
    dtype: str
    row: str = ""  # the registry row the call runs, whose accuracy applies
    args: tuple[Any, ...] = ()  # Array, Number, Same, or plain values
    kwargs: tuple[tuple[str, Any], ...] = ()
    out: Out | None = None
    expect: str = "ok"
    why: str = ""
    kind: str = "torch"  # null tier: fake torch tensors or plain pretend-device arrays

    def kw(self, name: str, default: Any = None) -> Any:
        return dict(self.kwargs).get(name, default)

    def describe(self) -> str:
        parts = [_label(a) for a in self.args]
        parts += [f"{k}={_label(v)}" for k, v in self.kwargs]
        if self.out is not None:
            parts.append(f"out={self.out.label()}")
        expect = "" if self.expect == "ok" else f" [expect {self.expect}: {self.why}]"
        kind = " (pretend-device arrays)" if self.kind == "cai" else ""
        return f"case {self.index}: {self.op}({', '.join(parts)}){kind}{expect}"

    def replay(self) -> str:
        tier = GPU if self.tier == "gpu" else NULL
        return f"TILE_MLIR_DIFF_SEED={self.seed} TILE_MLIR_DIFF_ONLY={self.index} {tier.command}"

    def values_rng(self) -> np.random.Generator:
        return np.random.default_rng([self.seed, self.index, 1])


def _label(value: Any) -> str:
    return value.label() if hasattr(value, "label") else repr(value)


def draw(tier: Tier, seed: int, index: int) -> Case:
    """Case `index` of the run with `seed`."""
    rng = np.random.default_rng([seed, index])
    schedule = tier.schedule()
    family = schedule[index % len(schedule)]
    op = pick(rng, family_ops(family))
    dtype = pick(rng, run_dtypes(tier, seed, op))
    case = Case(tier.name, seed, index, family, op, dtype, row=op)
    if tier is NULL:  # the stand-in torch has no slicing: the gated ops' halves, prelu's
        # weight view (the library makes them with torch's own methods)
        plain = family == "fused_gated" or op == "prelu"
        case = replace(case, kind="cai" if plain else pick(rng, ("torch", "cai")))
    return _bool_subtraction(DRAWERS[_group(family)](rng, case, tier))


def _bool_subtraction(case: Case) -> Case:
    """sub with a bool operand (an array or a Python bool) fails in both: torch raises
    "Subtraction, the `-` operator, with a bool tensor is not supported", the library a
    TypeError naming the argument."""
    if case.op != "sub" or case.expect != "ok" or not any(
            (isinstance(a, Array) and a.dtype == "bool") or
            (isinstance(a, Number) and isinstance(a.value, bool)) for a in case.args):
        return case
    return replace(case, expect="error", why="sub with a bool (torch: RuntimeError)")


def _group(family: str) -> str:
    return "elementwise" if family in ELEMENTWISE else family


# ------------------------------------------------------ torch's promotion

_KIND = {"bool": 0, "int": 1, "float": 2}
TENSOR, ZERO_DIM, NUMBER = 0, 1, 2


def promote(a: str, b: str) -> str:
    """torch.promote_types; fp8 with another float gives the other (the library's
    documented extension: torch refuses)."""
    if a == b:
        return a
    ka, kb = _KIND[DTYPES[a].kind], _KIND[DTYPES[b].kind]
    if ka != kb:
        return a if ka > kb else b
    if {a, b} == {"f16", "bf16"} or (a in FP8 and b in FP8):
        return "f32"
    if a in FP8 or b in FP8:
        return b if a in FP8 else a
    return a if DTYPES[a].bits >= DTYPES[b].bits else b


def _combine(higher: str | None, lower: str | None) -> str | None:
    """c10's combine_categories: the higher priority's dtype, unless the lower one is
    of a higher kind (or the higher is bool)."""
    if higher is None:
        return lower
    if lower is None or DTYPES[higher].is_float:
        return higher
    if higher == "bool" or _KIND[DTYPES[lower].kind] > _KIND[DTYPES[higher].kind]:
        return promote(higher, lower)
    return higher


def result_type(typed: Sequence[tuple[str, int]]) -> str:
    """torch.result_type of (dtype, priority) operands: tensors with dims, 0-d tensors
    and Python numbers (a float counts as float32, an int as int64)."""
    best: list[str | None] = [None, None, None]
    for dtype, priority in typed:
        current = best[priority]
        best[priority] = dtype if current is None else promote(current, dtype)
    result = _combine(best[TENSOR], _combine(best[ZERO_DIM], best[NUMBER]))
    assert result is not None
    return result


def number_dtype(value: bool | int | float) -> str:
    if isinstance(value, bool):
        return "bool"
    return "i64" if isinstance(value, int) else "f32"


# ------------------------------------------------ what a call runs, as data

PARAMETERS = {"leaky_relu": (("negative_slope", 0.01),), "elu": (("alpha", 1.0),),
              "hardtanh": (("min_val", -1.0), ("max_val", 1.0)),
              "softplus": (("beta", 1.0), ("threshold", 20.0))}
"""The activations' scalar parameters, in the row's order, with torch's defaults."""

OWN_DTYPE = ("masked_fill", "nan_to_num", "prelu")
"""Ops whose result has the input's dtype (no promotion with their other arguments)."""


@dataclass(frozen=True)
class Extreme:
    """A bound the library fills in (clamp without min or max): the result dtype's end."""

    low: bool


def resolve(case: Case, value: Any) -> Any:
    """An argument spec with Same resolved."""
    return case.args[value.position] if isinstance(value, Same) else value


def row_inputs(case: Case) -> list[tuple[Any, bool]]:
    """The registry row's inputs for the call, in its order (specs: Array, Number, a
    plain number or Extreme), and whether each takes part in type promotion."""
    row = op_table.ELEMENTWISE[case.row]
    args = [resolve(case, a) for a in case.args]
    if case.op == "clamp":
        bounds = [case.kw(n) for n in ("min", "max")]
        return [(args[0], True)] + [(Extreme(n == 0) if b is None else b, b is not None)
                                    for n, b in enumerate(bounds)]
    if case.op == "nan_to_num":
        return [(args[0], True), (case.kw("nan") or Number(0.0), False),
                (case.kw("posinf") or Extreme(False), False),
                (case.kw("neginf") or Extreme(True), False)]
    if case.row == "add_alpha":
        alpha = case.kw("alpha")
        return [(args[0], True), (args[1], True),
                (Number(alpha if case.op == "add" else -alpha), False)]
    if case.op in PARAMETERS:
        return [(args[0], True)] + [(Number(case.kw(n, d)), False)
                                    for n, d in PARAMETERS[case.op]]
    if case.family == "fused_gated":
        return [(args[0], True)]
    lerp_number = case.op == "lerp" and isinstance(args[2], Number)
    return [(a, n not in row.keep and not (lerp_number and n == 2) and
             not (case.op == "masked_fill" and n == 2)) for n, a in enumerate(args)]


def _typed(spec: Any) -> tuple[str, int]:
    if isinstance(spec, Number):
        return number_dtype(spec.value), NUMBER
    return spec.dtype, TENSOR if spec.shape else ZERO_DIM


def common_dtype(case: Case) -> str:
    """The dtype torch computes the call in (before opmath): the promoting inputs'."""
    if case.op in OWN_DTYPE or case.family in ("activation", "fused_gated"):
        return str(resolve(case, case.args[0]).dtype)
    return result_type([_typed(s) for s, promotes in row_inputs(case) if promotes])


def result_dtype(case: Case) -> str:
    row = op_table.ELEMENTWISE[case.row]
    common = common_dtype(case)
    if row.out == "bool":
        return "bool"
    if row.out == "float" and not DTYPES[common].is_float:
        return "f32"
    return common


def defined(case: Case) -> bool:
    """Whether the row is defined on the call's promoted dtype."""
    row = op_table.ELEMENTWISE[case.row]
    common = common_dtype(case)
    return (row.out == "float" and not DTYPES[common].is_float) or common in row.dtypes


def result_shape(case: Case) -> Shape:
    args = [resolve(case, a) for a in case.args]
    x = args[0]
    if case.family == "fused_gated":
        return (*x.shape[:-1], x.shape[-1] // 2)
    if case.op == "prelu":
        return tuple(x.shape)
    arrays = [a.shape for a in [*args, *dict(case.kwargs).values()] if isinstance(a, Array)]
    return tuple(np.broadcast_shapes(*arrays))


def fp8_mixed(case: Case) -> bool:
    """An fp8 array promoted with an array of another float type (documented: the
    library promotes to the wider type, torch refuses)."""
    dtypes = {s.dtype for s, promotes in row_inputs(case) if promotes and isinstance(s, Array)}
    return any(d in FP8 for d in dtypes) and any(DTYPES[d].is_float and d not in FP8
                                                 for d in dtypes)


def _takes_out(op: str) -> bool:
    return "out" in inspect.signature(getattr(ops, op)).parameters


INPLACE = ("relu", "silu", "leaky_relu", "elu", "selu", "hardswish", "hardsigmoid",
           "hardtanh", "mish")
"""Activations with torch.nn.functional's `inplace=`."""



# ------------------------------------------------------- elementwise drawers

DIVISIONS = ("remainder", "floor_divide", "div_trunc")
"""Rows whose integer divisors must not be 0 (undefined, as in torch on CUDA)."""


def _array(rng: np.random.Generator, dtype: str, shape: Shape, role: str = "data",
           **options: Any) -> Array:
    return Array(dtype, draw_view(rng, shape, **options), role)


def _number(rng: np.random.Generator, case: Case, position: int) -> Number:
    """A Python number for input `position`, from the op's domain (ops_check), now and
    then of another kind than the dtype (a float beside integers: promotion)."""
    kind = DTYPES[case.dtype].kind
    value: bool | int | float
    if rng.random() < 0.15:
        value = pick(rng, (0.5, -2.25, 3.0, 1e-3, True)) if kind != "float" else \
            pick(rng, (2, -3, 7, True))
    else:
        value = ops_check.scalar(ops_check.Case(case.row, case.dtype, ()), position, rng)
    if case.row in DIVISIONS and position == 1 and not value and not isinstance(value, float):
        value = 7
    return Number(value)


def _other_dtype(rng: np.random.Generator, case: Case) -> str:
    """Another dtype of the op for a second operand (promotion), fp8 aside."""
    if case.dtype in FP8:
        return case.dtype
    choices = [d for d in op_table.ELEMENTWISE[case.op].dtypes if d not in FP8 and d != case.dtype]
    return pick(rng, choices) if choices else case.dtype


def _other(rng: np.random.Generator, case: Case, shape: Shape, position: int = 1,
           first: int = 0) -> Any:
    """A second operand: an array (broadcast, maybe of another dtype), a number, a 0-d
    array, or the first operand itself. One of another dtype often takes the first
    operand's values nudged below the narrower dtype's resolution (role "near"), where
    casting to the common dtype first (as torch does) or not shows."""
    r = rng.random()
    if r < 0.42:
        return _array(rng, case.dtype, broadcastable(rng, shape))
    if 0.54 <= r < 0.74:
        return _number(rng, case, position)
    if r < 0.54:
        other = _array(rng, _other_dtype(rng, case), broadcastable(rng, shape))
    elif r < 0.92 or case.row in DIVISIONS:  # (x // x: integer zeros divide by zero)
        other = _array(rng, pick(rng, (case.dtype, _other_dtype(rng, case))), ())
    else:
        return Same(first)
    if other.dtype != case.dtype and case.row not in DIVISIONS and rng.random() < 0.6:
        other = replace(other, role="near", near=first)
    return other


def _unary(rng: np.random.Generator, case: Case, tier: Tier) -> Case:
    return replace(case, args=(_array(rng, case.dtype, draw_shape(rng, tier.budget)),))


def _binary(rng: np.random.Generator, case: Case, tier: Tier) -> Case:
    shape = draw_shape(rng, tier.budget)
    first = shape if rng.random() < 0.85 else with_ones(rng, shape)
    whole = tier is NULL and case.op == "pow" and not DTYPES[case.dtype].is_float
    if whole:  # the host emulator's LLVM (O2) does not finish an integer pow whose base
        first = shape  # is loop-invariant (broadcast, stride 0); the gpu tier draws them
    x = _array(rng, case.dtype, first, expand=not whole)
    args: tuple[Any, ...] = (x, _other(rng, case, shape))
    if case.op in ("pow", "remainder") and rng.random() < 0.15:  # torch takes a number first
        args = (_number(rng, case, 0), _array(rng, case.dtype, shape))
    return replace(case, args=args)


def _add_sub(rng: np.random.Generator, case: Case, tier: Tier) -> Case:
    drawn = _binary(rng, case, tier)
    if rng.random() < 0.3 and defined(drawn):
        integral = not DTYPES[result_dtype(drawn)].is_float
        alpha = pick(rng, (2, -1, 3)) if integral else pick(rng, (0.5, -1.5, 2.0, 0.1))
        drawn = replace(drawn, row="add_alpha", kwargs=(("alpha", alpha),))
    return drawn


def _div(rng: np.random.Generator, case: Case, tier: Tier) -> Case:
    mode = pick(rng, (None, None, "trunc", "floor"))
    row = {None: "div", "trunc": "div_trunc", "floor": "floor_divide"}[mode]
    drawn = _binary(rng, replace(case, row=row), tier)
    return drawn if mode is None else replace(drawn, kwargs=(("rounding_mode", mode),))


def _lerp(rng: np.random.Generator, case: Case, tier: Tier) -> Case:
    """input, end and a tensor weight of one dtype (torch wants that), or a number weight."""
    shape = draw_shape(rng, tier.budget)
    weight = _number(rng, case, 2) if rng.random() < 0.4 else \
        _array(rng, case.dtype, broadcastable(rng, shape))
    return replace(case, args=(_array(rng, case.dtype, shape),
                               _array(rng, case.dtype, broadcastable(rng, shape)), weight))


def _where(rng: np.random.Generator, case: Case, tier: Tier) -> Case:
    shape = draw_shape(rng, tier.budget)
    condition = _array(rng, "bool", broadcastable(rng, shape), "condition")
    x = _array(rng, case.dtype, broadcastable(rng, shape))
    y = _other(rng, case, shape, 2, first=1)
    first: Any = x if rng.random() < 0.8 else _number(rng, case, 1)
    if isinstance(first, Number):  # not two numbers; near and Same need x
        y = replace(y, role="data", near=-1) if isinstance(y, Array) else \
            _array(rng, case.dtype, shape)
    return replace(case, args=(condition, first, y))


def _clamp(rng: np.random.Generator, case: Case, tier: Tier) -> Case:
    """Both bounds numbers or both arrays (torch has no mixed overload), or one None."""
    shape = draw_shape(rng, tier.budget)
    x = _array(rng, case.dtype, shape)
    arrays = rng.random() < 0.4

    def bound(position: int) -> Any:
        if arrays:
            return _array(rng, pick(rng, (case.dtype, _other_dtype(rng, case))),
                          broadcastable(rng, shape))
        return _number(rng, case, position)

    which = pick(rng, ("both", "both", "min", "max"))
    kwargs = [(name, bound(n + 1)) for n, name in enumerate(("min", "max"))
              if which in ("both", name)]
    return replace(case, args=(x,), kwargs=tuple(kwargs))


def _masked_fill(rng: np.random.Generator, case: Case, tier: Tier) -> Case:
    shape = draw_shape(rng, tier.budget)
    mask = _array(rng, "bool", broadcastable(rng, shape), "mask")
    return replace(case, args=(_array(rng, case.dtype, shape), mask, _number(rng, case, 2)))


def _nan_to_num(rng: np.random.Generator, case: Case, tier: Tier) -> Case:
    choices = {"nan": (0.0, 0.25, -1.5), "posinf": (7.5, 1000.0, 1e30),
               "neginf": (-3.0, -1e30)}
    kwargs = tuple((name, Number(pick(rng, values))) for name, values in choices.items()
                   if rng.random() < 0.5)
    return replace(_unary(rng, case, tier), kwargs=kwargs)


def _prelu(rng: np.random.Generator, case: Case, tier: Tier) -> Case:
    """A weight per channel (dim 1) or a single one, of the input's dtype (torch's rule)."""
    shape = draw_shape(rng, tier.budget, least=1)
    channels = shape[1] if len(shape) > 1 and shape[1] and rng.random() < 0.7 else 1
    weight = _array(rng, case.dtype, (channels,), "weight")
    return replace(case, args=(_array(rng, case.dtype, shape), weight))


def _gelu(rng: np.random.Generator, case: Case, tier: Tier) -> Case:
    approximate = pick(rng, (None, "none", "tanh", "tanh"))
    drawn = _unary(rng, replace(case, row="gelu_tanh" if approximate == "tanh" else "gelu"),
                   tier)
    return drawn if approximate is None else replace(drawn, kwargs=(("approximate",
                                                                     approximate),))


def _with_parameters(rng: np.random.Generator, case: Case, tier: Tier) -> Case:
    """An activation's scalar parameters, each given or left at torch's default."""
    kwargs = []
    for n, (name, _) in enumerate(PARAMETERS[case.op]):
        if rng.random() < 0.7:
            kwargs.append((name, float(pick(rng, ops_check.PARAMETERS[case.op][n]))))
    drawn = replace(_unary(rng, case, tier), kwargs=tuple(kwargs))
    if case.op == "hardtanh" and drawn.kw("min_val", -1.0) > drawn.kw("max_val", 1.0):
        drawn = replace(drawn, kwargs=(("min_val", -1.5), ("max_val", 0.5)))
    return drawn


def _gated(rng: np.random.Generator, case: Case, tier: Tier) -> Case:
    shape = draw_shape(rng, tier.budget // 2, least=1)
    return replace(case, args=(_array(rng, case.dtype, (*shape[:-1], 2 * shape[-1])),))


FORMS: dict[str, Callable[[np.random.Generator, Case, Tier], Case]] = {
    "add": _add_sub, "sub": _add_sub, "div": _div, "lerp": _lerp, "where": _where,
    "clamp": _clamp, "masked_fill": _masked_fill, "nan_to_num": _nan_to_num,
    "prelu": _prelu, "gelu": _gelu, **dict.fromkeys(PARAMETERS, _with_parameters)}


def _form(case: Case) -> Callable[[np.random.Generator, Case, Tier], Case]:
    if case.op in FORMS:
        return FORMS[case.op]
    if case.family == "fused_gated":
        return _gated
    return _unary if op_table.ELEMENTWISE[case.op].arity == 1 else _binary


def _elementwise(rng: np.random.Generator, case: Case, tier: Tier) -> Case:
    """A call of an elementwise op: now and then one of the calls that must fail or that
    the library documents as differing (`special`), else the op's form, redrawn until
    its promoted dtype is one the op has."""
    if rng.random() < 0.1:
        drawn = special(rng, case, tier)
        if drawn is not None:
            return drawn
    form = _form(case)
    for _ in range(50):
        drawn = form(rng, case, tier)
        if defined(drawn) and not fp8_mixed(drawn):
            return _with_out(rng, _inplace(rng, drawn), tier)
    raise AssertionError(f"no call of {case.op} on {case.dtype} drawn in 50 tries")


def _inplace(rng: np.random.Generator, case: Case) -> Case:
    """inplace=True now and then, where torch.nn.functional has it."""
    x = case.args[0]
    if case.op not in INPLACE or "expand" in x.view.kinds or rng.random() > 0.2:
        return case
    return replace(case, kwargs=(*case.kwargs, ("inplace", True)), out=Out("inplace"))


def _with_out(rng: np.random.Generator, case: Case, tier: Tier) -> Case:
    """out=: none, a fresh (maybe strided, maybe cast) array, an input itself; or one
    that overlaps an input, or itself (expect both to refuse)."""
    if case.out is not None or not _takes_out(case.op):
        return case
    shape, dtype = result_shape(case), result_dtype(case)
    r = rng.random()
    if r < 0.25:
        return replace(case, out=Out("fresh", _out_dtype(rng, dtype),
                                     draw_view(rng, shape, expand=False)))
    if r < 0.42:
        same = [n for n, a in enumerate(case.args) if isinstance(a, Array) and
                a.shape == shape and a.dtype == dtype and "expand" not in a.view.kinds]
        return replace(case, out=Out("inplace", position=pick(rng, same))) if same else case
    first = resolve(case, case.args[0])
    if r < 0.45 and math.prod(shape) > 1 and isinstance(first, Array) and \
            first.dtype == dtype and first.shape == shape:
        return _overlapping_out(rng, case, shape, dtype)
    if r < 0.51 and shape and isinstance(first, Array) and first.dtype == dtype and \
            first.shape == shape:
        return _interleaved_out(case, shape, dtype)
    if r < 0.54 and any(s > 1 for s in shape) and 0 not in shape and \
            case.family != "fused_gated":  # (torch's check of out= needs elements)
        base = list(shape)
        step = _expand(rng, base)
        view = View(tuple(base), steps=(step,) if step else (), kinds=("expand",))
        return replace(case, out=Out("expanded", dtype, view), expect="error",
                       why="out= has stride 0 (torch: more than one element of the "
                           "written-to tensor refers to a single memory location)")
    return case


def _out_dtype(rng: np.random.Generator, dtype: str) -> str:
    """The result's dtype, or now and then a wider kind or another float (a cast)."""
    if dtype == "bool" or dtype in FP8 or rng.random() > 0.15:
        return dtype
    kind = _KIND[DTYPES[dtype].kind]
    choices = [d for d in ("f32", "f16", "bf16", "i64")
               if d != dtype and _KIND[DTYPES[d].kind] >= kind]
    return pick(rng, choices)


def _interleaved_out(case: Case, shape: Shape, dtype: str) -> Case:
    """The first input the even elements of a last dim twice as long, out= the odd ones:
    one storage, no element shared (torch: TooHard to tell, so allowed)."""
    base = (*shape[:-1], 2 * shape[-1])
    last = len(shape) - 1

    def half(start: int) -> View:
        return View(base, steps=(("slice", last, start, 2 * shape[-1], 2),), kinds=("strided",))

    x = replace(resolve(case, case.args[0]), view=half(0))
    return replace(case, args=(x, *case.args[1:]),
                   out=Out("interleaved", dtype, half(1), position=0))


def _overlapping_out(rng: np.random.Generator, case: Case, shape: Shape, dtype: str) -> Case:
    """The first input one element into its storage, out= one element before or after."""
    x = replace(resolve(case, case.args[0]), view=View(shape, 1, 1, kinds=("offset",)))
    args = (x, *case.args[1:])
    out = Out("overlap", dtype, View(shape, pick(rng, (0, 2))), position=0)
    return replace(case, args=args, out=out, expect="error",
                   why="out= overlaps an input without being it (torch: unsupported "
                       "operation: some elements of the input tensor and the written-to "
                       "tensor refer to a single memory location)")


def special(rng: np.random.Generator, case: Case, tier: Tier) -> Case | None:
    """A call that must fail in both, or that the library documents as differing from
    torch; None when the op has none."""
    maker = _SPECIALS.get(case.op) or _SPECIALS.get(case.family)
    if maker is None and op_table.ELEMENTWISE[case.op].arity >= 2 and \
            case.family != "fused_gated" and case.op != "prelu":
        maker = _binary_special
    return maker(rng, case, tier) if maker is not None else None


def _broadcast_error(rng: np.random.Generator, case: Case, tier: Tier) -> Case | None:
    drawn = _form(case)(rng, case, tier)
    x = drawn.args[0]
    position = 2 if case.op == "where" else 1
    if len(drawn.args) <= position or not isinstance(x, Array) or \
            not any(s > 1 for s in x.shape):
        return None
    dim = pick(rng, [d for d, s in enumerate(x.shape) if s > 1])
    shape = tuple(s + 1 if d == dim else s for d, s in enumerate(x.shape))
    other = _array(rng, x.dtype, shape)
    args = tuple(other if n == position else a for n, a in enumerate(drawn.args))
    return replace(drawn, args=args, expect="error",
                   why="the shapes do not broadcast (torch: RuntimeError)")


def _bool_arithmetic(rng: np.random.Generator, case: Case, tier: Tier) -> Case | None:
    shape = draw_shape(rng, tier.budget)
    return replace(case, dtype="bool", row=case.op, expect="library_error",
                   args=(_array(rng, "bool", shape), _array(rng, "bool", shape)),
                   why="add/sub/mul on bool tensors are not supported (docs/ops.md)")


def _integer_activation(rng: np.random.Generator, case: Case, tier: Tier) -> Case | None:
    drawn = _form(case)(rng, replace(case, dtype="i32"), tier)
    args = tuple(replace(a, dtype="i32") if isinstance(a, Array) else a for a in drawn.args)
    return replace(drawn, args=args, expect="library_error",
                   why="the activations are defined on the float types only (docs/ops.md)")


def _float_bitwise(rng: np.random.Generator, case: Case, tier: Tier) -> Case | None:
    drawn = _form(case)(rng, replace(case, dtype="f32"), tier)
    args = tuple(replace(a, dtype="f32") if isinstance(a, Array) else a for a in drawn.args)
    args = tuple(Number(2.5) if isinstance(a, Number) else a for a in args)
    return replace(drawn, args=args, expect="error",
                   why="bitwise ops on floats (torch: not implemented for 'Float')")


def _integer_condition(rng: np.random.Generator, case: Case, tier: Tier) -> Case | None:
    drawn = _form(case)(rng, case, tier)
    position = 0 if case.op == "where" else 1
    spec = drawn.args[position]
    args = tuple(replace(spec, dtype="i32") if n == position else a
                 for n, a in enumerate(drawn.args))
    return replace(drawn, args=args, expect="error",
                   why=f"{case.op}'s condition or mask is not bool (torch: RuntimeError)")


def _no_bounds(rng: np.random.Generator, case: Case, tier: Tier) -> Case | None:
    return replace(_unary(rng, case, tier), expect="error",
                   why="clamp with neither min nor max (torch: RuntimeError)")


def _hardtanh_bounds(rng: np.random.Generator, case: Case, tier: Tier) -> Case | None:
    return replace(_unary(rng, case, tier), kwargs=(("min_val", 2.0), ("max_val", -1.0)),
                   expect="error", why="hardtanh's min_val > max_val (torch: ValueError)")


def _odd_gate(rng: np.random.Generator, case: Case, tier: Tier) -> Case | None:
    # a budget of a fifth: the last dim made at least 2, then 2n + 1, grows it 5 times
    shape = draw_shape(rng, tier.budget // 5, least=1)
    odd = (*shape[:-1], 2 * max(shape[-1], 2) + 1)  # halves of n and n + 1 > 1: no broadcast
    return replace(case, args=(_array(rng, case.dtype, odd),), expect="error",
                   why="an odd last dimension (the halves differ: torch cannot multiply them)")


def _fp8_mixed(rng: np.random.Generator, case: Case, tier: Tier) -> Case | None:
    """An fp8 array with an array of a wider float type: promoted to the wider one."""
    wider = [d for d in op_table.ELEMENTWISE[case.op].dtypes if d in ("f32", "f16", "bf16")]
    fp8 = [d for d in op_table.ELEMENTWISE[case.op].dtypes if d in FP8]
    if not wider or not fp8:
        return None
    shape = draw_shape(rng, tier.budget)
    args = (_array(rng, pick(rng, fp8), shape),
            _array(rng, pick(rng, wider), broadcastable(rng, shape)))
    drawn = replace(case, dtype=args[0].dtype, args=args, expect="library_extends",
                    why="fp8 mixed with a wider float promotes to it; torch refuses "
                        "(docs/ops.md)")
    return drawn if defined(drawn) else None


def _binary_special(rng: np.random.Generator, case: Case, tier: Tier) -> Case | None:
    """Half the time fp8 with a wider float (where the op has fp8), else shapes that do
    not broadcast."""
    if rng.random() < 0.5 and case.op not in ("pow", "lerp", "nan_to_num"):
        drawn = _fp8_mixed(rng, case, tier)
        if drawn is not None:
            return drawn
    return _broadcast_error(rng, case, tier)


def _add_special(rng: np.random.Generator, case: Case, tier: Tier) -> Case | None:
    if rng.random() < 0.4:
        return _bool_arithmetic(rng, case, tier)
    return _binary_special(rng, case, tier)


_SPECIALS: dict[str, Callable[[np.random.Generator, Case, Tier], Case | None]] = {
    "add": _add_special, "mul": _add_special, "sub": _add_special, "maximum": _binary_special,
    "eq": _binary_special, "lt": _binary_special,
    "activation": _integer_activation, "hardtanh": _hardtanh_bounds,
    "bitwise": _float_bitwise, "where": _integer_condition, "masked_fill": _integer_condition,
    "clamp": _no_bounds, "fused_gated": _odd_gate,
}


# ----------------------------------------------------------- other families


def _dims(rng: np.random.Generator, rank: int) -> Any:
    """A reduction's dim: None, an int (maybe negative) or a tuple of distinct dims."""
    if rank == 0:
        return pick(rng, (None, 0, -1))
    r = rng.random()
    if r < 0.25:
        return None
    if r < 0.65:
        dim = int(rng.integers(rank))
        return dim - rank if rng.random() < 0.3 else dim
    count = int(rng.integers(1, rank + 1))
    dims = [int(d) for d in rng.choice(rank, count, replace=False)]
    return tuple(d - rank if rng.random() < 0.3 else d for d in dims)


def reduced_count(shape: Shape, dim: Any) -> int:
    if dim is None or not shape:
        return math.prod(shape)
    dims = dim if isinstance(dim, tuple) else (dim,)
    return math.prod(shape[d] for d in dims)


def _reduction(rng: np.random.Generator, case: Case, tier: Tier) -> Case:
    shape = draw_shape(rng, tier.budget)
    x = _array(rng, case.dtype, shape, "reduce")
    dim = _dims(rng, len(shape))
    keepdim = bool(rng.random() < 0.4)
    expect, why = "ok", ""
    if shape and rng.random() < 0.04:
        dim, expect, why = pick(rng, (len(shape), -len(shape) - 1)), "error", \
            "dim out of range (torch: IndexError)"
    elif case.op in ("amax", "amin") and reduced_count(shape, dim) == 0:
        expect, why = "error", f"{case.op} of an empty selection (torch: RuntimeError)"
    return replace(case, args=(x,), kwargs=(("dim", dim), ("keepdim", keepdim)),
                   expect=expect, why=why)


def _rope(rng: np.random.Generator, case: Case, tier: Tier) -> Case:
    """query, key (or None: fewer heads, GQA) and positions as views with a unit-stride
    head_dim; the cache given (a view) or made from (base, max_position); out= now and
    then; positions outside the cache now and then (NaN rows on a device)."""
    small = tier is NULL
    tokens = pick(rng, (1, 2, 3, 5, 7) if small else (1, 3, 7, 33, 100, 257))
    heads = pick(rng, (1, 2, 3, 4) if small else (1, 2, 3, 8, 16))
    key_heads = pick(rng, (0, 1, heads))
    head_dim = pick(rng, (16, 32, 48, 64) if small else (16, 32, 64, 96, 128))
    rotary = pick(rng, [r for r in (head_dim, head_dim // 2, 16, 8) if r % 2 == 0])
    rows = pick(rng, (16, 40, 300) if small else (64, 300, 4096))
    while tokens > 1 and tokens * heads * head_dim > tier.budget:
        tokens //= 2
    q = _array(rng, case.dtype, (tokens, heads, head_dim), "query", unit_last=True)
    k = _array(rng, case.dtype, (tokens, key_heads, head_dim), "key", unit_last=True) \
        if key_heads else None
    role = "positions_outside" if rng.random() < 0.15 else "positions"
    positions = Array(pick(rng, ("i32", "i64")), draw_view(rng, (tokens,)), role, rows)
    kwargs: list[tuple[str, Any]] = []
    if rng.random() < 0.3:
        cache = _array(rng, case.dtype, (rows, rotary), "cache", unit_last=True, expand=False)
        kwargs.append(("cos_sin_cache", cache))
    else:  # a base of its own: a fresh cache (the library keeps them per parameters)
        kwargs += [("base", float(rng.uniform(5000, 20000))), ("max_position", rows)]
    if rotary != head_dim or rng.random() < 0.5:
        kwargs.append(("rotary_dim", rotary))
    drawn = replace(case, args=(q, k, positions), kwargs=tuple(kwargs))
    if rng.random() < 0.05:
        bad = pick(rng, (rotary - 1, head_dim + 2))
        kwargs = [(n, v) for n, v in kwargs if n not in ("rotary_dim", "cos_sin_cache")]
        return replace(drawn, kwargs=(*kwargs, ("rotary_dim", bad)), expect="error",
                       why=f"rotary_dim {bad} (odd, or past head_dim {head_dim})")
    if rng.random() < 0.3:
        second = draw_view(rng, k.shape, unit_last=True, expand=False) if k else None
        drawn = replace(drawn, out=Out("fresh", case.dtype, draw_view(
            rng, q.shape, unit_last=True, expand=False), second=second))
    return drawn


def _dropout(rng: np.random.Generator, case: Case, tier: Tier) -> Case:
    x = _array(rng, case.dtype, draw_shape(rng, tier.budget), "dropout")
    p = pick(rng, (0.0, 0.1, 0.5, 0.9, 1 / 3, float(rng.uniform(0, 0.95))))
    kwargs: list[tuple[str, Any]] = [
        ("seed", int(rng.integers(0, 2**64, dtype=np.uint64))),
        ("offset", pick(rng, (0, int(rng.integers(0, 2**62))))),
        ("return_mask", bool(rng.random() < 0.5))]
    if rng.random() < 0.06:
        kwargs.append(("training", False))
    expect, why = "ok", ""
    r = rng.random()
    if r < 0.03:
        p, expect, why = pick(rng, (1.5, -0.1)), "error", "p outside [0, 1] (torch: ValueError)"
    elif r < 0.05:
        p, expect, why = 1.0, "library_error", "p = 1 (docs/ops.md: p in [0, 1)); torch " \
            "gives zeros"
    return replace(case, args=(x, Number(p)), kwargs=tuple(kwargs), expect=expect, why=why)


def _like(rng: np.random.Generator) -> Array:
    return Array("f32", draw_view(rng, (3,)), "like")


def _alibi(rng: np.random.Generator, case: Case, tier: Tier) -> Case:
    heads = pick(rng, (1, 2, 3, 5, 8, 12, 16, 33, 64))
    length = pick(rng, [n for n in (0, 1, 7, 37, 128, 1031, 4099) if heads * n <= tier.budget])
    expect, why = "ok", ""
    if rng.random() < 0.05:
        heads, expect, why = 0, "error", "num_heads = 0"
    return replace(case, args=(Number(heads), Number(length)), expect=expect, why=why,
                   kwargs=(("dtype", DTYPES[case.dtype].numpy), ("like", _like(rng))))


def _sinusoidal(rng: np.random.Generator, case: Case, tier: Tier) -> Case:
    dim = pick(rng, (1, 2, 3, 6, 63, 64, 128, 512))
    positions = pick(rng, [n for n in (0, 1, 5, 100, 1000, 4099) if n * dim <= tier.budget])
    base = pick(rng, (10000.0, 500000.0, 10.0, float(rng.uniform(2, 1e5))))
    expect, why = "ok", ""
    if rng.random() < 0.05:
        dim, base = pick(rng, ((0, base), (dim, 0.0)))
        expect, why = "error", "dim = 0 or base = 0"
    return replace(case, args=(Number(positions), Number(dim)), expect=expect, why=why,
                   kwargs=(("base", base), ("dtype", DTYPES[case.dtype].numpy),
                           ("like", _like(rng))))


DRAWERS: dict[str, Callable[[np.random.Generator, Case, Tier], Case]] = {
    "elementwise": _elementwise, "reduction": _reduction, "rope": _rope,
    "dropout": _dropout, "alibi": _alibi, "sinusoidal": _sinusoidal}


# ------------------------------------------------------------------ values

KWARG_POSITIONS = {"min": 1, "max": 2}
"""Keyword arrays' positions among their row's inputs (for their values' domain)."""


def storage_values(case: Case, position: int, spec: Array, rng: np.random.Generator
                   ) -> np.ndarray:
    """Values for the whole storage behind an array argument (1-d): from the op's domain
    with the special values (ops_check.array), or what the array's role needs."""
    size = spec.view.size
    np_type = DTYPES[spec.dtype].np_dtype()
    maker = _ROLE_VALUES.get(spec.role)
    if maker is not None:
        values = maker(case, spec, rng, size)
    elif spec.dtype == "bool" or spec.role in ("condition", "mask"):
        values = rng.random(size) < 0.5 if spec.dtype == "bool" else rng.integers(0, 3, size)
    else:
        row = case.row if case.row in op_table.ELEMENTWISE and \
            position < op_table.ELEMENTWISE[case.row].arity else "relu"
        shapes = ((),) * position + ((size,),)
        values = ops_check.array(ops_check.Case(row, spec.dtype, shapes), position, rng)
        if row in DIVISIONS and position == 1 and DTYPES[spec.dtype].kind == "int":
            values = np.where(values == 0, 7, values)
    with np.errstate(all="ignore"):
        return np.asarray(values).astype(np_type)


def near_values(source: np.ndarray, dtype: str, size: int, rng: np.random.Generator
                ) -> np.ndarray:
    """Values of another operand, nudged: floats by a relative 2^-13 or 2^-9 (between a
    half's and a float's resolution), integers by 2^32 (what an int32 cast drops)."""
    picked = rng.choice(source.reshape(-1), size) if source.size else np.zeros(size)
    np_type = DTYPES[dtype].np_dtype()
    with np.errstate(all="ignore"):
        wide = picked.astype(np.float64)
        if dtype == "bool" or source.dtype == np.bool_:
            return wide.astype(np_type)
        if DTYPES[dtype].is_float:
            nudge = rng.choice(np.array([0.0, 2.0**-13, -(2.0**-13), 2.0**-9]), size)
            nudged: np.ndarray = (wide * (1 + nudge)).astype(np_type)
            return nudged
        integers = np.nan_to_num(wide, posinf=7, neginf=-7).astype(np.int64)
    if dtype == "i64":
        integers = integers + rng.choice(np.array([0, 1 << 32, -(1 << 32)]), size)
    return integers.astype(np_type)


def _reduce_values(case: Case, spec: Array, rng: np.random.Generator, size: int
                   ) -> np.ndarray:
    """prod: near 1 (no overflow over long rows); amax/amin: NaN and +-Inf now and then;
    sum and mean: a rare NaN."""
    values = rng.standard_normal(size)
    if case.op == "prod":
        return 1 + 0.01 * values
    rate = 0.02 if case.op in ("amax", "amin") else 0.002
    specials = rng.choice(np.array([np.nan, np.inf, -np.inf]), size)
    return np.where(rng.random(size) < rate, specials, values * 4)


def _positions(case: Case, spec: Array, rng: np.random.Generator, size: int) -> np.ndarray:
    values = rng.integers(0, spec.limit, size)
    if spec.role == "positions_outside":
        outside = rng.choice(np.array([-1, spec.limit, spec.limit + 5]), size)
        values = np.where(rng.random(size) < 0.25, outside, values)
    return values


_ROLE_VALUES: dict[str, Callable[[Case, Array, np.random.Generator, int], np.ndarray]] = {
    "reduce": _reduce_values,
    "positions": _positions,
    "positions_outside": _positions,
    "cache": lambda case, spec, rng, size: rng.uniform(-1, 1, size),
    "query": lambda case, spec, rng, size: rng.standard_normal(size) * 3,
    "key": lambda case, spec, rng, size: rng.standard_normal(size) * 3,
    "like": lambda case, spec, rng, size: np.zeros(size),
}


def bits(values: np.ndarray) -> np.ndarray:
    """The bytes of each element as an unsigned integer (NaN compares to NaN)."""
    carrier = ops_check.CARRIERS_BY_SIZE[values.dtype.itemsize]
    return np.ascontiguousarray(values).view(carrier)


# ---------------------------------------------------------------- backends


class Backend:
    """Where a case's arrays live: storages (1-d) and views of them."""

    def storage(self, values: np.ndarray, dtype: str) -> Any:
        """A device copy of a 1-d host array."""
        raise NotImplementedError

    def view(self, storage: Any, view: View, dtype: str, case: Case) -> Any:
        raise NotImplementedError

    def poisoned(self, size: int, dtype: str) -> Any:
        """A 1-d storage of NaN (or 0x5A bytes; 0x7F for fp8, NaN in both formats)."""
        raise NotImplementedError

    def read(self, array: Any, dtype: str) -> np.ndarray:
        """An array's values (a host copy, in its logical shape)."""
        raise NotImplementedError

    def dtype(self, array: Any) -> str:
        raise NotImplementedError

    def shape(self, array: Any) -> Shape:
        return tuple(int(s) for s in array.shape)


class NullBackend(Backend):
    """The null tier's pretend device (support.emulated); arrays as fake torch tensors
    (the library's torch paths, its fast path among them) or as pretend-device arrays."""

    def __init__(self, device: Any, torch: Any = None):
        self.device, self.torch = device, torch
        self.dtypes = {d.numpy: getattr(torch, d.numpy) for d in DTYPES.values()} \
            if torch is not None else {}

    def storage(self, values: np.ndarray, dtype: str) -> Any:
        return self.device.array(values, dtype)

    def view(self, storage: Any, view: View, dtype: str, case: Case) -> Any:
        shape, strides, offset = view.layout()
        array = storage.view(shape, strides, offset)
        if self.torch is None or case.kind != "torch":
            return array
        from support import fake_torch

        return fake_torch.Tensor(array, self.dtypes)

    def poisoned(self, size: int, dtype: str) -> Any:
        return self.device.empty((size,), dtype)

    def read(self, array: Any, dtype: str) -> np.ndarray:
        return np.array(array.numpy())

    def dtype(self, array: Any) -> str:
        return str(getattr(array, "array", array).dtype)


class TorchBackend(Backend):
    """CUDA torch tensors; views made with torch's own slicing, permute and expand."""

    def __init__(self, torch: Any):
        self.torch = torch
        self.names = {DTYPES[n].numpy: n for n in DTYPES}

    def storage(self, values: np.ndarray, dtype: str) -> Any:
        from support import ops_torch

        return ops_torch.to_device(values, dtype)

    def view(self, storage: Any, view: View, dtype: str, case: Case) -> Any:
        tensor = storage[view.lead:view.lead + math.prod(view.base)].view(view.base)
        for step in view.steps:
            if step[0] == "permute":
                tensor = tensor.permute(*step[1])
            elif step[0] == "slice":
                index: list[Any] = [slice(None)] * tensor.dim()
                index[step[1]] = slice(step[2], step[3], step[4])
                tensor = tensor[tuple(index)]
            else:
                tensor = tensor.expand(*step[1])
        self._check_layout(tensor, view)
        return tensor

    @staticmethod
    def _check_layout(tensor: Any, view: View) -> None:
        """torch's view must be the one the case describes (a test bug otherwise)."""
        shape, strides, offset = view.layout()
        assert tuple(tensor.shape) == shape, (tuple(tensor.shape), shape)
        if math.prod(shape) == 0:
            return
        got = [s for s, n in zip(tensor.stride(), shape, strict=True) if n > 1]
        want = [s for s, n in zip(strides, shape, strict=True) if n > 1]
        assert got == want and tensor.storage_offset() == offset, \
            f"torch made the view {tensor.stride()}+{tensor.storage_offset()}, the case " \
            f"describes {strides}+{offset}"

    def poisoned(self, size: int, dtype: str) -> Any:
        torch = self.torch
        tensor = torch.empty(size, dtype=getattr(torch, DTYPES[dtype].numpy), device="cuda")
        if size:
            tensor.view(torch.uint8).fill_(0x7F if dtype in FP8 else 0x5A)
            if DTYPES[dtype].is_float and dtype not in FP8:
                tensor.fill_(float("nan"))
        return tensor

    def read(self, array: Any, dtype: str) -> np.ndarray:
        from support import ops_torch

        return np.array(ops_torch.to_host(array, dtype))

    def dtype(self, array: Any) -> str:
        return self.names.get(str(array.dtype).removeprefix("torch."), str(array.dtype))


# ----------------------------------------------------------------- building


@dataclass
class Placed:
    """An array made for a case: its spec, storage, the object the library gets, and
    the storage's values before the call."""

    spec: Array
    storage: Any
    obj: Any
    before: np.ndarray
    target: View | None = None  # the part of the storage the call may write


@dataclass
class Built:
    """A case's arguments as the library gets them, and their values on the host
    (`host`, by id of the spec: Array specs are distinct objects)."""

    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    host: dict[int, np.ndarray] = field(default_factory=dict)
    placed: list[Placed] = field(default_factory=list)
    out: Any = None

    def values(self, spec: Any) -> np.ndarray:
        return self.host[id(spec)]


def build(case: Case, backend: Backend) -> Built:
    rng = case.values_rng()
    built = Built()
    for n, arg in enumerate(case.args):
        built.args.append(_place(case, n, arg, backend, built=built, rng=rng))
    for name, value in case.kwargs:
        built.kwargs[name] = _place(case, KWARG_POSITIONS.get(name, 0), value, backend,
                                    built=built, rng=rng)
    if case.out is not None:
        built.out = _place_out(case, case.out, backend, built)
    return built


def _place(case: Case, position: int, value: Any, backend: Backend, *, built: Built,
           rng: np.random.Generator) -> Any:
    if isinstance(value, Same):
        return built.args[value.position]
    if isinstance(value, Number):
        return value.value
    if not isinstance(value, Array):
        return value
    flat = storage_values(case, position, value, rng)
    if value.role == "near":
        source = next(p for p in built.placed if p.obj is built.args[value.near])
        flat = near_values(source.before, value.dtype, flat.size, rng)
    storage = backend.storage(flat, value.dtype)
    obj = backend.view(storage, value.view, value.dtype, case)
    built.placed.append(Placed(value, storage, obj, flat))
    built.host[id(value)] = value.view.of(flat)
    return obj


def _poisoned(case: Case, view: View | None, dtype: str, backend: Backend, built: Built
              ) -> Any:
    if view is None:
        return None
    storage = backend.poisoned(view.size, dtype)
    obj = backend.view(storage, view, dtype, case)
    built.placed.append(Placed(Array(dtype, view, "out"), storage, obj,
                               backend.read(storage, dtype), view))
    return obj


def _place_out(case: Case, out: Out, backend: Backend, built: Built) -> Any:
    if case.family == "rope":
        return (_poisoned(case, out.view, out.dtype, backend, built),
                _poisoned(case, out.second, out.dtype, backend, built))
    if out.kind in ("fresh", "expanded"):
        return _poisoned(case, out.view, out.dtype, backend, built)
    shared = built.args[out.position]
    placed = next(p for p in built.placed if p.obj is shared)
    if out.kind == "inplace":
        placed.target = placed.spec.view
        return shared
    assert out.view is not None
    placed.target = out.view
    return backend.view(placed.storage, out.view, out.dtype, case)


# ------------------------------------------------------------------ calling

LIBRARY_ERRORS = (TypeError, ValueError, NotImplementedError, OverflowError)
"""What the library raises for a call it refuses: TypeError for the kinds and dtypes of
arguments, ValueError for their shapes and values (ops/args.py, the ops' semantics),
NotImplementedError for what it does not support (round's decimals), OverflowError for a
number that does not fit the dtype. torch raises RuntimeError for most of both, TypeError or ValueError for
some, IndexError for a dim out of range: any of those is a refusal of the same call."""


class Refused(Exception):
    """The reference does not compute this call (an expected error)."""


def call(case: Case, built: Built) -> tuple[Any, Exception | None]:
    """The library's op on the built arguments: (result, None) or (None, what it raised)."""
    function = getattr(ops, case.op)
    kwargs = dict(built.kwargs)
    if built.out is not None and "inplace" not in kwargs:
        kwargs["out"] = built.out
    try:
        return function(*built.args, **kwargs), None
    except Exception as e:  # noqa: BLE001 - any exception is the library's answer
        return None, e


def adjudicate(case: Case, error: Exception | None, peer: Exception | None) -> str | None:
    """Whether refusals agree: '' when both refused (as they should), a message when they
    disagree, None when both computed (compare the results)."""
    if error is not None and not isinstance(error, LIBRARY_ERRORS):
        return f"raised {type(error).__name__} (not an argument error): {error}"
    if case.expect == "library_error":
        return "" if error is not None else f"took the call; the library documents it " \
            f"refuses it ({case.why})"
    if case.expect == "error":
        if error is None:
            return f"took a call torch refuses ({case.why})"
        if peer is None:
            return f"the test expected torch to refuse ({case.why}); it did not"
        return ""
    if peer is not None and not isinstance(peer, Refused):
        if case.expect == "library_extends":
            return f"the reference failed: {type(peer).__name__}: {peer}"
        if error is not None:
            return ""  # both refuse a call the test thought valid: they agree
        return f"took a call torch refuses ({type(peer).__name__}: {peer})"
    if error is not None:
        return f"raised {type(error).__name__}: {error}"
    return None


def memory(backend: Backend, built: Built) -> str:
    """No input changed, and nothing of an output's storage outside its view."""
    for placed in built.placed:
        now = bits(backend.read(placed.storage, placed.spec.dtype))
        changed = now != bits(placed.before)
        if placed.target is not None:
            changed &= ~placed.target.covered()
        if changed.any():
            where = "outside the output's view" if placed.target is not None else "(an input)"
            return f"{int(changed.sum())} element(s) of the storage of " \
                f"{placed.spec.label()} changed {where}, first at {int(np.argmax(changed))}"
    return ""


def _same_object(result: Any, expected: Any, what: str) -> str:
    return "" if result is expected else f"returned a new array, not {what}"


def _dtype_and_shape(backend: Backend, result: Any, dtype: str, shape: Shape) -> str:
    got_dtype, got_shape = backend.dtype(result), backend.shape(result)
    if got_dtype != dtype:
        return f"result dtype {got_dtype}, expected {dtype}"
    if got_shape != tuple(shape):
        return f"result shape {got_shape}, expected {tuple(shape)}"
    return ""


# --------------------------------------------------------------- references


class Reference:
    """What a tier compares with; `peer` names it in messages."""

    peer = "float64 NumPy"

    def elementwise(self, case: Case, built: Built) -> tuple[str, np.ndarray]:
        """(dtype, values) of the call's result; raises where the peer refuses it."""
        raise NotImplementedError

    def refuses(self, case: Case, built: Built) -> Exception | None:
        """For the ops without an elementwise reference (dropout...): whether the peer
        refuses the call (the generator's expectation, unless the peer can tell)."""
        return Refused(case.why) if case.expect == "error" else None


class NumpyReference(Reference):
    """The registry's NumPy references (support.ops_check.expected) after torch's
    promotion: each array cast to the common dtype first (as TensorIterator casts its
    operands), numbers passed as ops_check passes them."""

    def elementwise(self, case: Case, built: Built) -> tuple[str, np.ndarray]:
        if case.expect in ("error", "library_error"):
            raise Refused(case.why)
        row = op_table.ELEMENTWISE[case.row]
        result = result_dtype(case)
        cast_to = common_dtype(case) if row.out == "bool" else result
        values = [_host_input(case, built, spec, promotes, cast_to=cast_to, result=result)
                  for spec, promotes in row_inputs(case)]
        shapes = tuple(np.shape(v) if isinstance(v, np.ndarray) else None for v in values)
        want = ops_check.expected(ops_check.Case(case.row, cast_to, shapes), values)
        target = case.out.dtype if case.out is not None and case.out.kind == "fresh" else result
        with np.errstate(all="ignore"):
            return target, np.asarray(want).astype(DTYPES[target].np_dtype())


def _host_input(case: Case, built: Built, spec: Any, promotes: bool, *, cast_to: str,
                result: str) -> Any:
    if case.op == "nan_to_num" and isinstance(spec, Number | Extreme) and \
            not DTYPES[result].is_float:
        return 0  # nothing to replace: the library passes 0 (torch never uses them)
    if isinstance(spec, Number):
        return spec.value
    if isinstance(spec, Extreme):
        if DTYPES[result].is_float and case.op != "nan_to_num":  # clamp: no bound
            return -math.inf if spec.low else math.inf
        return lowest(result) if spec.low else max_value(result)
    values = built.values(spec)
    if not promotes:
        return values
    return ops_check.rounded(values, cast_to)  # a 0-d f32 into e4m3fn saturates, as the library


TENSORS_ONLY = ("maximum", "minimum", "logical_and", "logical_or")
"""Ops whose torch functions take no Python numbers (the library does: a documented
extension); torch's reference gets a 0-d tensor of the promoted dtype instead."""

FUNCTIONAL = ("relu", "gelu", "silu", "leaky_relu", "elu", "selu", "hardswish", "hardsigmoid",
              "hardtanh", "softplus", "mish", "prelu")
"""Activations torch has in torch.nn.functional (sigmoid and tanh: torch's own)."""


class TorchReference(Reference):
    """torch's own op on the same views (the gpu tier). fp8, which torch's elementwise
    kernels mostly lack, goes through float32 and back (e4m3fn saturating, as the
    library); the gated ops are act(a) * b on float32 rounded once (ops_torch)."""

    peer = "torch"

    def __init__(self, torch: Any):
        self.torch = torch
        self.names = {DTYPES[n].numpy: n for n in DTYPES}

    def elementwise(self, case: Case, built: Built) -> tuple[str, np.ndarray]:
        from support import ops_torch

        if case.expect == "library_error":
            raise Refused(case.why)
        want = self._result(case, built)
        dtype = self.names[str(want.dtype).removeprefix("torch.")]
        if case.out is not None and case.out.kind == "fresh" and case.out.dtype != dtype:
            dtype = case.out.dtype
            want = want.to(getattr(self.torch, DTYPES[dtype].numpy))
        return dtype, np.array(ops_torch.to_host(want, dtype))

    def _result(self, case: Case, built: Built) -> Any:
        from support import ops_torch

        torch = self.torch
        model = result_dtype(case) if case.expect != "error" else case.dtype
        args = list(built.args)
        kwargs = {k: v for k, v in built.kwargs.items() if k != "inplace"}
        if case.expect == "error" and case.out is not None:  # torch's checks of out=
            kwargs["out"] = built.out
        if case.family == "fused_gated":
            return ops_torch.gated_reference(case.op, args[0], model)
        fp8 = any(self._fp8(a) for a in [*args, *kwargs.values()])
        if fp8:
            # torch casts every tensor operand to the common dtype first: a 0-d float
            # beside an fp8 array is narrowed to it, then widened; as the library
            # narrows it, saturating to e4m3fn (docs/ops.md), where torch's cast gives NaN
            common = common_dtype(case)
            if common in FP8:
                args = [self._narrow(a, common) if isinstance(a, torch.Tensor) and
                        a.dim() == 0 and not self._fp8(a) and a.is_floating_point() else a
                        for a in args]
            # an fp8 array beside a wider float is that float's (docs/ops.md): torch's op
            # on it (floor_divide's floor kept in f16/bf16); else float32 and back
            wide = torch.float32 if common in FP8 or not DTYPES[common].is_float else \
                getattr(torch, DTYPES[common].numpy)
            shadows: dict[int, Any] = {}
            args = [self._widen(a, shadows, wide) for a in args]
            kwargs = {k: self._widen(v, shadows, wide) for k, v in kwargs.items()}
            if case.op == "nan_to_num" and model in FP8:  # the fp8 type's extremes
                kwargs.setdefault("posinf", float(max_value(model)))
                kwargs.setdefault("neginf", float(lowest(model)))
        if case.op in TENSORS_ONLY:
            args = [self._tensor(a, args[0], case.op) for a in args]
        function = getattr(torch.nn.functional if case.op in FUNCTIONAL else torch, case.op)
        result = function(*args, **kwargs)
        return self._narrow(result, model) if fp8 else result

    def _fp8(self, value: Any) -> bool:
        return isinstance(value, self.torch.Tensor) and \
            self.names.get(str(value.dtype).removeprefix("torch.")) in FP8

    def _widen(self, value: Any, shadows: dict[int, Any], wide: Any) -> Any:
        """An fp8 tensor as `wide` (exactly), the same view of a `wide` copy of its storage
        (one copy per storage): views that overlap or repeat elements (out= expanded, or
        over an input's storage) still do, so torch's checks of out= see what it would."""
        if not self._fp8(value):
            return value
        storage = value.untyped_storage()
        shadow = shadows.get(storage.data_ptr())
        if shadow is None:
            flat = self.torch.empty(0, dtype=value.dtype, device=value.device).set_(storage)
            shadow = shadows[storage.data_ptr()] = flat.to(wide)
        return shadow.as_strided(value.size(), value.stride(), value.storage_offset())

    def _tensor(self, value: Any, like: Any, op: str) -> Any:
        if isinstance(value, self.torch.Tensor):
            return value
        if op.startswith("logical"):
            return self.torch.tensor(value, device="cuda")
        return self.torch.tensor(value, dtype=self.torch.result_type(like, value), device="cuda")

    def _narrow(self, result: Any, dtype: str) -> Any:
        torch = self.torch
        if dtype == "f8e4m3":
            result = torch.clamp(result, -448.0, 448.0)  # saturating; NaN stays NaN
        return result.to(getattr(torch, DTYPES[dtype].numpy))

    def refuses(self, case: Case, built: Built) -> Exception | None:
        """dropout: whether torch.nn.functional.dropout takes p."""
        if case.family != "dropout" or case.expect != "error":
            return super().refuses(case, built)
        try:
            self.torch.nn.functional.dropout(built.args[0].float(), built.args[1])
        except Exception as e:  # noqa: BLE001 - torch's refusal, whatever its type
            return e
        return None


# ------------------------------------------------------------------ running


def run_elementwise(case: Case, built: Built, backend: Backend, reference: Reference) -> str:
    want: tuple[str, np.ndarray] | None = None
    peer: Exception | None = None
    try:
        want = reference.elementwise(case, built)
    except Exception as e:  # noqa: BLE001 - the peer's refusal
        peer = e
    result, error = call(case, built)
    verdict = adjudicate(case, error, peer)
    if verdict is not None:
        return verdict
    assert want is not None
    dtype, values = want
    problem = _same_object(result, built.out, "out=") if case.out is not None else ""
    problem = problem or _dtype_and_shape(backend, result, dtype, values.shape)
    if problem:
        return problem
    got = backend.read(result, dtype)
    computed = computed_in(case, dtype)
    compared = got, values
    if computed != dtype:
        narrow = DTYPES[computed].np_dtype()
        with np.errstate(all="ignore"):  # a value past the narrow type's range: reported
            held = got.astype(narrow).astype(got.dtype)
            off = np.flatnonzero((held != got) & ~np.isnan(got))
            if off.size:
                return f"out= {dtype} holds values that are not {computed}'s (the op " \
                    f"computes in {computed}, then casts): first at {off[0]}: " \
                    f"{got.flat[off[0]]!r}"
            compared = got.astype(narrow), values.astype(narrow)
    report = ops_check.compare(ops_check.Case(case.row, computed, ()), *compared)
    if not report.ok:
        return f"values differ from {reference.peer}: {report.detail} (max rel " \
            f"{report.max_rel:.3g}, {report.max_ulp} ulp of {computed})"
    return memory(backend, built) or _again(case, backend, dtype, got)


def computed_in(case: Case, dtype: str) -> str:
    """The type a result is compared in: its own, but where a fresh out= is a wider float
    than the one the op computes in (torch's promoted type: pow(bf16, 3.0, out=f32)
    computes in bf16, then casts), that narrower one, whose ulps its bounds are in."""
    computed = result_dtype(case)
    if case.out is None or case.out.kind != "fresh" or computed == dtype or \
            not (DTYPES[computed].is_float and DTYPES[dtype].is_float):
        return dtype
    return computed if MANTISSA[computed] < MANTISSA[dtype] else dtype


MANTISSA = {"f64": 52, "f32": 23, "f16": 10, "bf16": 7, "f8e4m3": 3, "f8e5m2": 2}
"""Bits of each float type's significand (without the implicit one)."""


def _again(case: Case, backend: Backend, dtype: str, got: np.ndarray) -> str:
    """The call once more on new arrays of the same layout and values (other pointers,
    the same alignment): what the fast path reuses must give the same bits."""
    if case.out is not None:
        return ""
    built = build(case, backend)
    result, error = call(case, built)
    if error is not None:
        return f"a second call with new arrays raised {type(error).__name__}: {error}"
    same = bits(backend.read(result, dtype)) == bits(got)
    return "" if same.all() else f"a second call with new arrays of the same layout gave " \
        f"{int((~same).sum())} other values (the fast path)"


REDUCE_TOLERANCE = {"f32": 1e-5, "f16": 1e-3, "bf16": 1.6e-2}
"""The gpu tier's bounds for the reductions (tests/gpu/test_ops_reductions.py), relative
to the magnitude of what is summed."""


def reduction_reference(op: str, x: np.ndarray, dim: Any, keepdim: bool
                        ) -> tuple[np.ndarray, np.ndarray]:
    """(result, magnitude) in float64: the magnitude is what error scales with (the sum
    of |x| reduced; its mean for a mean). Raises where torch does (an empty amax)."""
    import warnings

    x64 = x.astype(np.float64)
    axis = None if dim is None or x.ndim == 0 else dim  # torch takes dim 0 of a 0-d tensor
    function = getattr(np, {"amax": "max", "amin": "min"}.get(op, op))
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # the mean of nothing: NaN
        want = np.asarray(function(x64, axis=axis, keepdims=keepdim))
        magnitude = np.asarray(np.sum(np.abs(x64), axis=axis, keepdims=keepdim))
    count = reduced_count(x.shape, dim)
    return want, magnitude / max(count, 1) if op == "mean" else magnitude


def _overflowed(want: np.ndarray, dtype: str, slack: float, got: np.ndarray) -> np.ndarray:
    """The float64 results rounded into `dtype` where that overflows (a product of a
    broadcast value, repeated thousands of times, passes f16's 65504: torch's result is
    inf too); within `slack` (relative) of the overflow threshold either answer stands
    (the result is got's)."""
    np_type = DTYPES[dtype].np_dtype()
    with np.errstate(over="ignore", invalid="ignore"):
        high = want.astype(np_type).astype(np.float64)
        low = (want * (1 - slack)).astype(np_type).astype(np.float64)
    over = np.isinf(high) & np.isfinite(want)
    edge = over & ~np.isinf(low)
    return np.where(edge, got, np.where(over, high, want))


def _reduction_error(op: str, dtype: str, got: np.ndarray, want: np.ndarray, *,
                     magnitude: np.ndarray, count: int) -> str:
    g = got.astype(np.float64)
    accumulate = math.sqrt(max(count, 1)) * 2.0**-22  # f32 partial sums, with margin
    tolerance = REDUCE_TOLERANCE[dtype]
    if DTYPES[dtype].is_float:  # a result past the type's range is its infinity
        want = _overflowed(want, dtype, tolerance + accumulate, g)
    wrong = (np.isnan(g) != np.isnan(want)) | ((np.isinf(g) | np.isinf(want)) & (g != want)
                                               & ~np.isnan(want))
    with np.errstate(all="ignore"):
        error = np.where(np.isfinite(g) & np.isfinite(want), np.abs(g - want), 0.0)
        if op in ("amax", "amin"):
            bound = np.zeros_like(want)
        elif op == "prod":
            # each f32 multiplication rounds by 2^-24 of the product: n of them, which
            # a broadcast input (one value repeated) makes add up rather than cancel;
            # a product under the type's range rounds to 0 (or its smallest step)
            tiny = smallest(dtype)
            bound = (tolerance + max(count, 1) * 2.0**-24) * np.abs(want) + \
                max(tiny, 2.0**-149)
        else:
            bound = tolerance * np.maximum(magnitude, np.abs(want)) + accumulate * magnitude
    bad = wrong | (error > bound)
    if not bad.any():
        return ""
    at = int(np.flatnonzero(bad)[0])
    return f"{int(bad.sum())} of {bad.size} out of bounds; first at {at}: got " \
        f"{g.flat[at]!r}, want {want.flat[at]!r} (bound {np.ravel(bound)[at]:.3g})"


def run_reduction(case: Case, built: Built, backend: Backend, reference: Reference) -> str:
    x = built.values(case.args[0])
    dim, keepdim = case.kw("dim"), case.kw("keepdim")
    want = magnitude = None
    peer: Exception | None = Refused(case.why) if case.expect == "error" else None
    try:
        want, magnitude = reduction_reference(case.op, x, dim, keepdim)
    except (ValueError, IndexError) as e:
        peer = e
    result, error = call(case, built)
    verdict = adjudicate(case, error, peer)
    if verdict is not None:
        return verdict
    assert want is not None and magnitude is not None
    problem = _dtype_and_shape(backend, result, case.dtype, want.shape)
    if problem:
        return problem
    got = backend.read(result, case.dtype)
    count = reduced_count(x.shape, dim)
    problem = _reduction_error(case.op, case.dtype, got, want, magnitude=magnitude,
                               count=count)
    return f"values differ from float64 NumPy: {problem}" if problem else \
        memory(backend, built)


def rope_check(got: np.ndarray, x: np.ndarray, cache: np.ndarray, positions: np.ndarray, *,
               style: str, dtype: str, rotary: int) -> str:
    """One RoPE output against the float64 rotation of its input by the cache rows the
    kernel read (support.rope_ref's bound); tokens whose position is outside the cache
    come out NaN; the dims past rotary_dim are the input's, bit for bit."""
    inside = (positions >= 0) & (positions < cache.shape[0])
    if not np.isnan(got[~inside].astype(np.float64)).all():
        return "a token outside the cache is not NaN"
    half = rotary // 2
    rows = cache[positions[inside]].astype(np.float64)
    want, size = rope_ref.rotate(x[inside][..., :rotary], rows[:, :half], rows[:, half:], style)
    error = np.abs(got[inside][..., :rotary].astype(np.float64) - want)
    ok = error <= rope_ref.bound(want, size, dtype)  # NaN (unwritten) fails
    if not ok.all():
        at = tuple(int(i) for i in np.argwhere(~ok)[0])
        return f"{int((~ok).sum())} elements out of bounds, first {at}: got " \
            f"{got[inside][at]}, want {want[at]}"
    if not np.array_equal(bits(got[inside][..., rotary:]), bits(x[inside][..., rotary:])):
        return "the dims past rotary_dim are not the input's"
    return ""


def _rope_cache(case: Case, built: Built, backend: Backend, rotary: int) -> np.ndarray:
    """The cache the kernel read: the given one, or the library's for the parameters."""
    given = case.kw("cos_sin_cache")
    if given is not None:
        return built.values(given)
    variant = "neox" if case.op == "rope_neox" else "non_neox"
    cache = ops.rope_cache(variant, rotary_dim=rotary, like=built.args[0],
                           base=case.kw("base"), max_position=case.kw("max_position"))
    return backend.read(cache, case.dtype)


def run_rope(case: Case, built: Built, backend: Backend, reference: Reference) -> str:
    result, error = call(case, built)
    verdict = adjudicate(case, error, reference.refuses(case, built))
    if verdict is not None:
        return verdict
    q_spec, k_spec, positions_spec = case.args
    rotary = case.kw("rotary_dim") or q_spec.shape[2]
    if case.kw("cos_sin_cache") is not None:
        rotary = case.kw("cos_sin_cache").shape[1]
    cache = _rope_cache(case, built, backend, rotary)
    positions = built.values(positions_spec).astype(np.int64)
    style = "neox" if case.op == "rope_neox" else "gptj"
    outs = built.out if built.out is not None else (None, None)
    for n, spec in enumerate((q_spec, k_spec)):
        got = result[n]
        if spec is None:
            problem = "" if got is None else "a key result without a key"
        else:
            problem = (_same_object(got, outs[n], f"out[{n}]") if case.out else "") or \
                _dtype_and_shape(backend, got, case.dtype, spec.shape) or \
                rope_check(backend.read(got, case.dtype), built.values(spec), cache,
                           positions, style=style, dtype=case.dtype, rotary=rotary)
        if problem:
            return f"{('query', 'key')[n]}: {problem}"
    return memory(backend, built)


def dropout_reference(x: np.ndarray, p: float, seed: int, offset: int, dtype: str
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(values, keep) from the library's NumPy Philox reference (docs/ops.md's stream),
    in float32 and rounded as the kernels round (e4m3fn saturating)."""
    index = np.arange(x.size, dtype=np.uint64)
    threshold = math.floor(p * 2**32)
    keep = refs.dropout_mask(seed, offset, threshold, index).reshape(x.shape)
    scale = np.float32(1 / (1 - p))
    values = refs.dropout(x.astype(np.float32).reshape(-1), scale, seed, offset, threshold,
                          index).reshape(x.shape)
    if dtype == "f8e4m3":
        values = np.clip(values, -448, 448)
    with np.errstate(over="ignore"):  # e5m2 keeps its infinities
        return values.astype(DTYPES[dtype].np_dtype()), keep


def _keep_rate(keep: np.ndarray, p: float) -> str:
    """Kept within 6 sigma of (1 - p) n."""
    n = keep.size
    if n < 1000 or p == 0:
        return ""
    kept = int(keep.sum())
    sigma = math.sqrt(n * p * (1 - p))
    return "" if abs(kept - n * (1 - p)) <= 6 * sigma else \
        f"kept {kept} of {n} at p = {p} (expected {n * (1 - p):.0f} +- {6 * sigma:.0f})"


def _dropout_values(got: np.ndarray, want: np.ndarray, keep: np.ndarray) -> str:
    """Bit for bit, NaN for NaN (whatever its sign and payload: x86's inf * 0 is negative)."""
    nan = np.isnan(got.astype(np.float32)) & np.isnan(want.astype(np.float32))
    differ = (bits(got) != bits(want)) & ~nan
    if not differ.any():
        return ""
    kept = int((differ & keep).sum())
    return f"{int(differ.sum())} values differ from the NumPy Philox reference ({kept} of " \
        f"them kept: the scaling; the others dropped), first at {int(np.argmax(differ))}: " \
        f"{got.flat[int(np.argmax(differ))]!r} != {want.flat[int(np.argmax(differ))]!r}"


def run_dropout(case: Case, built: Built, backend: Backend, reference: Reference) -> str:
    result, error = call(case, built)
    verdict = adjudicate(case, error, reference.refuses(case, built))
    if verdict is not None:
        return verdict
    x_spec, p = case.args[0], float(case.args[1].value)
    with_mask = case.kw("return_mask")
    got, mask = result if with_mask else (result, None)
    x = built.values(x_spec)
    if not case.kw("training", True):
        keep = np.ones(x.shape, bool)
        problem = _same_object(got, built.args[0], "the input (training=False)")
    else:
        want, keep = dropout_reference(x, p, case.kw("seed"), case.kw("offset"), case.dtype)
        problem = _dtype_and_shape(backend, got, case.dtype, x.shape) or \
            _dropout_values(backend.read(got, case.dtype), want, keep) or _keep_rate(keep, p)
    if not problem and mask is not None:
        problem = _dtype_and_shape(backend, mask, "bool", x.shape) or \
            ("" if np.array_equal(backend.read(mask, "bool"), keep) else
             "the mask differs from the NumPy Philox reference")
    return problem or memory(backend, built)


def paper_slopes(n: int) -> list[float]:
    """The ALiBi paper's get_slopes (float64): a power of two n gets start^(i+1),
    start = 2^(-8/n); otherwise the closest power's slopes, then every other slope of
    twice that many heads."""
    def power_of_two(n: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_two(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_two(closest) + paper_slopes(2 * closest)[0::2][:n - closest]


ENCODING_ULP = {"f32": 2 * 2.0**-23, "f16": 2.0**-10, "bf16": 2.0**-7}
SINUSOIDAL_BOUND = {"f32": 1e-6, "f16": 1e-3, "bf16": 8e-3}
"""tests/null/test_generators.py's bounds: ALiBi within an ulp (f32: two) relative,
sinusoidal within half an ulp of 1 absolute (f32: 1e-6)."""


def encoding_reference(case: Case) -> tuple[np.ndarray, np.ndarray]:
    """(values, allowed error) in float64, from the formulas."""
    first, second = (int(a.value) for a in case.args)
    if case.op == "alibi":
        want = np.array(paper_slopes(first))[:, None] * np.arange(second)
        tiny = {"f32": 2.0**-126, "f16": 2.0**-14, "bf16": 2.0**-126}[case.dtype]
        return want, ENCODING_ULP[case.dtype] * np.maximum(np.abs(want), tiny)
    p = np.arange(first)[:, None]
    i2 = (np.arange(second) // 2 * 2)[None]
    angle = p / np.power(case.kw("base"), i2 / second)
    want = np.where(np.arange(second) % 2 == 1, np.cos(angle), np.sin(angle))
    return want, np.full(want.shape, SINUSOIDAL_BOUND[case.dtype])


def run_encoding(case: Case, built: Built, backend: Backend, reference: Reference) -> str:
    result, error = call(case, built)
    verdict = adjudicate(case, error, reference.refuses(case, built))
    if verdict is not None:
        return verdict
    want, bound = encoding_reference(case)
    problem = _dtype_and_shape(backend, result, case.dtype, want.shape)
    if problem:
        return problem
    got = backend.read(result, case.dtype).astype(np.float64)
    bad = ~(np.abs(got - want) <= bound)  # NaN (unwritten) is bad
    if bad.any():
        at = int(np.flatnonzero(bad)[0])
        return f"{int(bad.sum())} values differ from float64 NumPy, first at {at}: got " \
            f"{got.flat[at]!r}, want {want.flat[at]!r}"
    return memory(backend, built)


RUNNERS: dict[str, Callable[[Case, Built, Backend, Reference], str]] = {
    "elementwise": run_elementwise, "reduction": run_reduction, "rope": run_rope,
    "dropout": run_dropout, "alibi": run_encoding, "sinusoidal": run_encoding}


def run_case(case: Case, backend: Backend, reference: Reference) -> str:
    """'' when the library agrees with the reference on the case; else what differs."""
    built = build(case, backend)
    return RUNNERS[_group(case.family)](case, built, backend, reference)


# ---------------------------------------------------------------- a run


def run_seed() -> int:
    """TILE_MLIR_DIFF_SEED, or a fresh one (printed by the tests for replay)."""
    given = os.environ.get("TILE_MLIR_DIFF_SEED")
    return int(given) if given else secrets.randbits(32)


def case_count(default: int) -> int:
    return int(os.environ.get("TILE_MLIR_DIFF_CASES", default))


def only() -> int | None:
    """TILE_MLIR_DIFF_ONLY: run that one case (by index) and no other."""
    given = os.environ.get("TILE_MLIR_DIFF_ONLY")
    return int(given) if given else None


def indices(tier: Tier, count: int, family: str, one: int | None = None) -> list[int]:
    """The run's cases of a family (or case `one`, if it is of the family)."""
    schedule = tier.schedule()
    chosen = range(count) if one is None else [one]
    return [i for i in chosen if schedule[i % len(schedule)] == family]


def run_family(tier: Tier, seed: int, count: int, family: str, *, backend: Backend,
               reference: Reference, one: int | None = None) -> tuple[int, list[str]]:
    """Run a family's cases; (how many ran, a message per case that failed)."""
    import traceback

    failures = []
    chosen = indices(tier, count, family, one)
    for index in chosen:
        case = draw(tier, seed, index)
        try:
            problem = run_case(case, backend, reference)
        except Exception as e:  # noqa: BLE001 - the harness's own failure, reported as one
            where = "".join(traceback.format_exception(e, limit=-3)).strip()
            problem = f"the test itself raised {type(e).__name__}: {e}\n{where}"
        if problem:
            failures.append(f"{case.describe()}\n    {problem}\n    replay: {case.replay()}")
    return len(chosen), failures


def report(tier: Tier, seed: int, count: int, family: str, *, ran: int, failures: list[str]
           ) -> str:
    head = f"seed {seed}: {len(failures)} of {ran} {family} cases differ (all {count}: " \
        f"TILE_MLIR_DIFF_SEED={seed} TILE_MLIR_DIFF_CASES={count} {tier.command})"
    shown = failures[:15]
    more = f"\n... and {len(failures) - len(shown)} more" if len(failures) > len(shown) else ""
    return "\n".join([head, *shown]) + more
