"""Contexts with the tile dialect, and parsing with located errors."""

from __future__ import annotations

from mlir import ir

from tile_mlir.diagnostics import CompileError, from_mlir_error
from tile_mlir.dialects import tile

PARSED_NAME = "-"
"""The file name MLIR gives locations of text parsed from a string."""


def new_context() -> ir.Context:
    """A Context with every upstream dialect available and the tile dialect loaded."""
    context = ir.Context()
    tile.load(context)
    return context


def parse(text: str, name: str, context: ir.Context) -> ir.Module:
    """Parse IR; a syntax or verifier error raises CompileError located in `name`."""
    try:
        return ir.Module.parse(text, context)
    except ir.MLIRError as e:
        raise CompileError(from_mlir_error(e, {PARSED_NAME: name}), {name: text}) from None
