"""The registry's bodies by name: the table names them, bodies.py builds them on first use.

bodies.py imports MLIR (its builders are typed against the bindings), while the
registry must import without it (the runtime, the operator library's argument
checks and its cache lookups need the table, not the builders). So the table
writes `b.exp_like_name` or `b.factory(args)` through this proxy, which records the
name and the factory's arguments; the first call of a body imports bodies.py and
builds it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mlir import ir

Body = Callable[..., "ir.Value"]
"""(inputs, compute type) -> result; rows with `storage` also take storage=<dtype name>."""

FACTORIES = frozenset({"arith_op", "by_kind", "classify", "comparison", "gated", "logical",
                       "math_op", "rounding"})
"""Names in bodies.py that make a body from arguments (the others are bodies)."""


class LazyBody:
    """A body of bodies.py by name (with its factory's arguments), built on first call."""

    __slots__ = ("_built", "args", "name")

    def __init__(self, name: str, args: tuple[Any, ...] = ()) -> None:
        self.name = name
        self.args = args
        self._built: Body | None = None

    def resolve(self) -> Body:
        """The real builder (imports bodies.py, and with it MLIR, the first time)."""
        if self._built is None:
            module = importlib.import_module("tile_mlir.op_table.bodies")
            target = getattr(module, self.name)
            if self.name in FACTORIES:
                args = tuple(a.resolve() if isinstance(a, LazyBody) else a for a in self.args)
                target = target(*args)
            self._built = target
        return self._built

    def __call__(self, *args: Any, **kwargs: Any) -> ir.Value:
        return self.resolve()(*args, **kwargs)

    def __repr__(self) -> str:
        args = ", ".join(repr(a) for a in self.args)
        return f"bodies.{self.name}({args})" if self.name in FACTORIES else f"bodies.{self.name}"


class _Bodies:
    """`b.name` is the body `name` of bodies.py; `b.factory(...)` the body it makes."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name in FACTORIES:
            return lambda *args: LazyBody(name, args)
        return LazyBody(name)


bodies = _Bodies()
