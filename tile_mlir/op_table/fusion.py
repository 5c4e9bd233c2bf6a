"""Fused elementwise expressions: several registry rows applied as one `tile.elementwise`.

A chain of elementwise ops whose intermediates are temporaries (tile-fuse finds
them; the operator library's `ops.fuse` builds them on purpose) becomes one op:

    "tile.elementwise"(%out, %x, %y, %z) {op = "fused", scope = "cta",
        expr = ["add(%0, %1) : bf16", "gelu($0) : bf16", "mul($1, %2) : bf16"],
        operandSegmentSizes = array<i32: 1, 1, 1, 1>} : (...) -> ()

`expr` is an array of strings, one step each, `row(arguments) : dtype`: the
registry row (op_table) applied to the fused op's inputs `%i` (i counts from 0
after dst: %0 is operand 1) and to earlier steps' results `$k`, its result
rounded to `dtype`. The last step is the result; its dtype is dst's. Each step
means exactly what its unfused op meant: `add(%0, %1) : bf16` is
`tile.elementwise {op = "add"}` writing a bf16 tile, so it computes in the type
that op computes in (the row's promotion and opmath over its arguments' types
and `dtype`: a `$k` argument has step k's dtype) and rounds its result to
bf16, which the next step reads as it would read a bf16 tile. An f32
intermediate is not rounded further; a bool one stays a predicate. Scalars and
broadcast inputs are operands of the fused op as they were of the unfused ones.
Indexed rows (the generators) take an i64 scalar input as their last argument,
the index base, as unfused.

Operand slots: the dialect's variadic third slot takes operands of one type (an
IRDL constraint binds one type), so a fused op's inputs are ordered to fit
`a, b, c...`: at most two inputs of types other than the rest. `build` orders
them so when it is given each input's type, and says when no order fits.

This module is pure Python (no MLIR): the verifier, the lowering (compute.py),
tile-fuse and the operator library's program text all read and build the same
form through it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from tile_mlir.dtypes import DTYPES
from tile_mlir.op_table import lookup

FUSED = "fused"
"""The `op` of a fused tile.elementwise; its steps are in the `expr` attribute."""
EXPR = "expr"


class FusionError(ValueError):
    """A chain that makes no fused expression, or an expression that does not parse."""


@dataclass(frozen=True)
class Arg:
    """A step's argument: the fused op's input `%index`, or step `$index`'s result."""

    step: bool
    index: int

    def __str__(self) -> str:
        return f"{'$' if self.step else '%'}{self.index}"


@dataclass(frozen=True)
class Step:
    """One registry row applied to inputs and earlier results, rounded to `dtype`."""

    row: str
    args: tuple[Arg, ...]
    dtype: str

    def __str__(self) -> str:
        return f"{self.row}({', '.join(map(str, self.args))}) : {self.dtype}"


_STEP = re.compile(r"^\s*(\w+)\s*\((.*)\)\s*:\s*(\w+)\s*$")
_ARG = re.compile(r"^([%$])(\d+)$")


def parse_step(text: str) -> Step:
    """`row(%0, $1) : dtype` -> Step; FusionError says what is wrong."""
    m = _STEP.match(text)
    if not m:
        raise FusionError(f"'{text}' is not of the form row(arguments) : dtype")
    row, arg_text, dtype = m.groups()
    args = []
    for item in filter(None, (a.strip() for a in arg_text.split(","))):
        arg = _ARG.match(item)
        if not arg:
            raise FusionError(f"argument '{item}' of '{text}' is neither an input %i nor "
                              "a step's result $k")
        args.append(Arg(arg.group(1) == "$", int(arg.group(2))))
    return Step(row, tuple(args), dtype)


@dataclass(frozen=True)
class Expr:
    """A fused op's steps, in order; the last one is the result."""

    steps: tuple[Step, ...]

    @classmethod
    def parse(cls, texts: Sequence[str]) -> Expr:
        """The steps of an `expr` attribute's strings (FusionError names the bad step)."""
        steps = []
        for k, text in enumerate(texts):
            try:
                steps.append(parse_step(text))
            except FusionError as e:
                raise FusionError(f"step {k}: {e}") from None
        return cls(tuple(steps))

    def texts(self) -> list[str]:
        return [str(step) for step in self.steps]

    def attribute(self) -> str:
        """The `expr` attribute as IR text: `["add(%0, %1) : bf16", ...]`."""
        return "[" + ", ".join(f'"{text}"' for text in self.texts()) + "]"

    @property
    def dtype(self) -> str:
        """The result's type (dst's)."""
        return self.steps[-1].dtype

    def problems(self, inputs: int) -> list[str]:
        """What is structurally wrong for a fused op of `inputs` inputs: unknown rows or
        dtypes, wrong arities, arguments out of range, unused steps or inputs (the
        rows' type rules are the verifier's, which knows the operands)."""
        if not self.steps:
            return ["has an empty fused expression"]
        errors = []
        used: set[Arg] = set()
        for k, step in enumerate(self.steps):
            errors += [f"step {k} '{step}': {e}" for e in _step_problems(step, k, inputs)]
            used.update(step.args)
        errors += [f"step {k} '{self.steps[k]}': its result is never used"
                   for k in self.unused_steps()]
        errors += [f"input %{i} is not used by any step" for i in range(inputs)
                   if Arg(False, i) not in used]
        return errors

    def unused_steps(self) -> list[int]:
        """The steps before the last whose results no later step reads."""
        used = {a.index for step in self.steps for a in step.args if a.step}
        return [k for k in range(len(self.steps) - 1) if k not in used]

    def arg_dtypes(self, k: int, inputs: Sequence[str]) -> list[str]:
        """The element types of step k's arguments (inputs' types, earlier steps' dtypes)."""
        return [self.steps[a.index].dtype if a.step else inputs[a.index]
                for a in self.steps[k].args]

    def chain(self, inputs: Sequence[T]) -> list[Link[T]]:
        """The chain this expression computes on `inputs` (build's inverse)."""
        return [Link(step.row, tuple(Result(a.index) if a.step else inputs[a.index]
                                     for a in step.args), step.dtype)
                for step in self.steps]


def _step_problems(step: Step, k: int, inputs: int) -> list[str]:
    row = lookup(step.row)
    if row is None:
        return [f"'{step.row}' is not a registry row"]
    errors = []
    if len(step.args) != row.arity:
        errors.append(f"'{row.name}' takes {row.arity} argument(s), got {len(step.args)}")
    if step.dtype not in DTYPES:
        errors.append(f"'{step.dtype}' is not an element type ({', '.join(DTYPES)})")
    for arg in step.args:
        if arg.step and arg.index >= k:
            errors.append(f"{arg} is not an earlier step's result")
        elif not arg.step and arg.index >= inputs:
            errors.append(f"{arg} is past the op's {inputs} input(s)")
    return errors


# ---------------------------------------------------------- building from a chain

T = TypeVar("T", bound=Hashable)


@dataclass(frozen=True)
class Result:
    """A link's argument that is the result of an earlier link (its index in the chain)."""

    link: int


@dataclass(frozen=True)
class Link(Generic[T]):
    """One op of a chain: a registry row on external inputs (any hashable key: an SSA
    value, a program's operand name) and earlier links' results, its result rounded to
    `dtype` (the type of the buffer the unfused op writes)."""

    row: str
    args: tuple[T | Result, ...]
    dtype: str


@dataclass(frozen=True)
class Fused(Generic[T]):
    """A fused op: its expression and its inputs in operand order (after dst)."""

    expr: Expr
    inputs: tuple[T, ...]

    @property
    def segments(self) -> tuple[int, int, int, int]:
        """operandSegmentSizes: dst, a, b, then the rest in c."""
        n = len(self.inputs)
        return 1, min(n, 1), min(max(n - 1, 0), 1), max(n - 2, 0)


def build(links: Sequence[Link[T]], type_of: Callable[[T], Hashable] | None = None
          ) -> Fused[T]:
    """The fused op of a chain: equal inputs become one input (loaded once), numbered in
    order of first use, or, given `type_of`, in an order that fits the dialect's operand
    slots (module docstring). Every link but the last must be used by a later one.
    FusionError says why a chain makes no fused op."""
    if not links:
        raise FusionError("an empty chain")
    order: list[T] = []
    for link in links:
        for arg in link.args:  # one at a time: a link may read an input twice
            if not isinstance(arg, Result) and arg not in order:
                order.append(arg)
    if type_of is not None:
        order = fit_slots(order, type_of)
    number = {value: i for i, value in enumerate(order)}
    steps = []
    for k, link in enumerate(links):
        row = lookup(link.row)
        if row is None:
            raise FusionError(f"link {k}: '{link.row}' is not a registry row")
        if any(isinstance(a, Result) and not 0 <= a.link < k for a in link.args):
            raise FusionError(f"link {k} ({link.row}) uses a result that is not an earlier "
                              "link's")
        args = tuple(Arg(True, a.link) if isinstance(a, Result) else Arg(False, number[a])
                     for a in link.args)
        steps.append(Step(row.name, args, link.dtype))
    expr = Expr(tuple(steps))
    unused = expr.unused_steps()
    if unused:
        raise FusionError(f"link {unused[0]} ({expr.steps[unused[0]].row}): its result is "
                          "never used")
    return Fused(expr, tuple(order))


def fit_slots(inputs: Sequence[T], type_of: Callable[[T], Hashable]) -> list[T]:
    """`inputs` reordered so that those from the third on share one type (the dialect's
    variadic slot): unchanged when they already do, else the inputs of the most common
    type last. FusionError when more than two inputs have other types."""
    types = [type_of(value) for value in inputs]
    if len(set(types[2:])) <= 1:
        return list(inputs)
    common = Counter(types).most_common(1)[0][0]
    odd = [v for v, t in zip(inputs, types, strict=True) if t != common]
    if len(odd) > 2:
        kinds = ", ".join(sorted({str(t) for t in types}))
        raise FusionError(f"its {len(inputs)} inputs have types {kinds}: tile.elementwise's "
                          "operands after the second must share one type")
    return odd + [v for v, t in zip(inputs, types, strict=True) if t == common]
