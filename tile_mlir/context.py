"""Contexts with the tile dialect, and parsing with located errors."""

from __future__ import annotations

import dataclasses

from mlir import ir

from tile_mlir import segments
from tile_mlir.diagnostics import CompileError, Diagnostic, SourceLoc, from_mlir_error
from tile_mlir.dialects import tile

PARSED_NAME = "-"
"""The file name MLIR gives locations of text parsed from a string."""


def new_context() -> ir.Context:
    """A Context with every upstream dialect available and the tile dialect loaded."""
    context = ir.Context()
    tile.load(context)
    return context


def parse(text: str, name: str, context: ir.Context) -> ir.Module:
    """Parse IR; a syntax or verifier error raises CompileError located in `name`.

    tile.elementwise ops written without operandSegmentSizes get it first
    (tile_mlir.segments): lines stay where they are, and the columns of errors on a
    line that got the attribute are those of `text`."""
    try:
        filled = segments.fill(text)
    except segments.SegmentError as e:
        found = [Diagnostic("error", p.message, SourceLoc(name, p.line, p.col))
                 for p in e.problems]
        raise CompileError(found, {name: text}) from None
    try:
        return ir.Module.parse(filled.text, context)
    except ir.MLIRError as e:
        found = from_mlir_error(e, {PARSED_NAME: name})
        if filled.insertions:
            found = [_in_source(d, name, filled) for d in found]
        raise CompileError(found, {name: text}) from None


def _in_source(diagnostic: Diagnostic, name: str, filled: segments.Filled) -> Diagnostic:
    """The diagnostic with columns of the filled text mapped back to the source."""
    loc = diagnostic.loc
    if loc is not None and loc.file == name:
        loc = SourceLoc(name, loc.line, filled.column(loc.line, loc.col))
    notes = tuple(_in_source(n, name, filled) for n in diagnostic.notes)
    return dataclasses.replace(diagnostic, loc=loc, notes=notes)
