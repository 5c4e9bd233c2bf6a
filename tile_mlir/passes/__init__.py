"""The tile passes, by their one kebab-case name.

The name is the `tile-opt` flag, the pipeline element, the module
(`tile-verify` -> passes/tile_verify.py) and the lit test
(lit-tests/tile-verify.mlir). A pass is a frozen dataclass whose fields are its
`name{option=value}` options; the pass manager calls it on its root op. A pass
imports no other pass: what one pass needs from another is on the IR (tile-lower
reads the `variant` that tile-dispatch wrote) or in REQUIRES.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field
from typing import Any, ClassVar

from mlir import ir
from mlir.passmanager import PassManager

from tile_mlir.diagnostics import DiagnosticSink
from tile_mlir.dialects import tile

PASSES: dict[str, str] = {
    "tile-verify": "tile_mlir.passes.tile_verify",
    "tile-fuse": "tile_mlir.passes.tile_fuse",
    "tile-dispatch": "tile_mlir.passes.tile_dispatch",
    "tile-barriers": "tile_mlir.passes.tile_barriers",
    "tile-buffers": "tile_mlir.passes.tile_buffers",
    "tile-lower": "tile_mlir.passes.tile_lower",
    "tile-target": "tile_mlir.passes.tile_target",
}
"""Pass name -> the module that defines it (imported on first use), in pipeline order."""


@dataclass(frozen=True)
class TilePass:
    """A tile pass. Subclasses set NAME and SUMMARY and implement run()."""

    NAME: ClassVar[str] = ""
    SUMMARY: ClassVar[str] = ""
    REQUIRES: ClassVar[tuple[str, ...]] = ()
    """Tile passes that must have run before this one (pipeline.Expander adds those a
    pipeline lacks, in front: `--tile-lower` alone verifies, dispatches, places buffers
    and inserts barriers first). A pass trusts what its requirements established."""

    sink: DiagnosticSink | None = field(default=None, compare=False, repr=False,
                                        metadata={"option": False})

    def run(self, root: ir.Operation) -> bool:
        """Transform or check `root`; report errors at op locations; False on failure."""
        raise NotImplementedError

    def __call__(self, root: ir.Operation, pass_: Any) -> None:
        with root.context, root.location:
            if not self.run(root):
                pass_.signal_pass_failure()

    def add_to(self, pm: PassManager) -> None:
        pm.add(self, name=type(self).__name__, argument=self.NAME, description=self.SUMMARY)

    def remark(self, message: str, location: ir.Location) -> None:
        if self.sink is not None:
            self.sink.report("remark", message, location)

    @classmethod
    def options(cls) -> list[dataclasses.Field[Any]]:
        return [f for f in dataclasses.fields(cls) if f.metadata.get("option", True)]


def get(name: str) -> type[TilePass]:
    """The pass class for a name; KeyError if there is no such tile pass."""
    module = importlib.import_module(PASSES[name])
    cls: type[TilePass] = module.Pass
    return cls


def parse_options(cls: type[TilePass], text: str) -> dict[str, Any]:
    """`a=1 b=true c=x` -> typed keyword arguments for the pass; ValueError when wrong."""
    fields = {f.name.replace("_", "-"): f for f in cls.options()}
    values: dict[str, Any] = {}
    for item in text.split():
        key, eq, raw = item.partition("=")
        if key not in fields:
            known = ", ".join(fields) or "none"
            raise ValueError(f"{cls.NAME} has no option '{key}' (options: {known})")
        f = fields[key]
        values[f.name] = _convert(raw if eq else "true", f.type, f"{cls.NAME}{{{key}}}")
    return values


def _convert(raw: str, type_: Any, where: str) -> Any:
    kind = type_ if isinstance(type_, str) else getattr(type_, "__name__", str(type_))
    if kind == "bool":
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"{where}: '{raw}' is not a boolean")
    if kind == "int":
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"{where}: '{raw}' is not an integer") from None
    return raw


def tile_ops(root: ir.Operation, names: tuple[str, ...] = tile.LOWERED) -> list[ir.OpView]:
    """The tile ops under root (default: those that tile-lower rewrites), in IR order."""
    found: list[ir.OpView] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in names:
            found.append(op.opview)
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def op_error(op: ir.OpView | ir.Operation, message: str) -> None:
    """Report `'<op name>' op <message>` at the op's location, as MLIR's verifiers do."""
    operation = op.operation
    operation.location.emit_error(f"'{operation.name}' op {message}")

