"""Contexts with the tile dialect, and parsing with located errors."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

from mlir import ir

from tile_mlir import segments
from tile_mlir.diagnostics import CompileError, Diagnostic, SourceLoc, check_text, from_mlir_error
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
    line that got the attribute are those of `text`.

    Three inputs are caught here because MLIR mishandles them: brackets nested
    thousands deep overflow the parser's stack (a segfault), a generic op named
    only by a dialect (`"tile"(...)`, `"arith."(...)`) aborts the process, and a
    tile op in custom form (`tile.copy %a, %b`) fails with no message at all.
    """
    check_text(text, name)
    refused = _too_deep(text, name) or _namespace_only_op(text, name)
    if refused:
        raise CompileError([refused], {name: text})
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
        if not e.error_diagnostics:
            found = [_custom_form(text, name) or found[0]]
        elif filled.insertions:
            found = [_in_source(d, name, filled) for d in found]
        raise CompileError(found, {name: text}) from None


def _in_source(diagnostic: Diagnostic, name: str, filled: segments.Filled) -> Diagnostic:
    """The diagnostic with columns of the filled text mapped back to the source."""
    loc = diagnostic.loc
    if loc is not None and loc.file == name:
        loc = SourceLoc(name, loc.line, filled.column(loc.line, loc.col))
    notes = tuple(_in_source(n, name, filled) for n in diagnostic.notes)
    return dataclasses.replace(diagnostic, loc=loc, notes=notes)


# Comments and string literals, as MLIR's lexer sees them.
_LEXEME = re.compile(r'//[^\n]*|"(?:[^"\\\n]|\\.)*"')
_ESCAPE = re.compile(r"\\([0-9a-fA-F]{2}|.)")
_CALL = re.compile(r"\s*\(")
_CUSTOM_TILE_OP = re.compile(r"(?<![\w.$#!%@\"-])tile\.("
                             + "|".join(name.removeprefix("tile.") for name in tile.OP_NAMES)
                             + r")\b")
"""A tile op written in custom form: any op of the dialect (tile.OP_NAMES)."""


def _strings(text: str) -> Iterator[re.Match[str]]:
    """The string literals outside comments."""
    return (m for m in _LEXEME.finditer(text) if m.group().startswith('"'))


def _unescape(literal: str) -> str:
    def one(m: re.Match[str]) -> str:
        code = m.group(1)
        return chr(int(code, 16)) if len(code) == 2 else {"n": "\n", "t": "\t"}.get(code, code)

    return _ESCAPE.sub(one, literal[1:-1])


def _at(text: str, offset: int, name: str) -> SourceLoc:
    line_start = text.rfind("\n", 0, offset) + 1
    return SourceLoc(name, text.count("\n", 0, offset) + 1, offset - line_start + 1)


MAX_NESTING = 1000
"""Brackets ((, [, {) nested deeper than this are refused. MLIR's parser recurses per
level and overflows an 8 MiB stack at about 4,000 nested regions or 9,000 arrays;
real IR nests a few dozen deep."""
_BRACKET = re.compile(r"[(\[{]|[)\]}]")


def _too_deep(text: str, name: str) -> Diagnostic | None:
    """An error at the first bracket nested deeper than MAX_NESTING."""
    if sum(text.count(c) for c in "([{") <= MAX_NESTING:
        return None
    depth = 0
    for m in _BRACKET.finditer(_code(text)):
        depth += 1 if m.group() in "([{" else -1
        if depth > MAX_NESTING:
            message = f"brackets nest more than {MAX_NESTING} deep, which MLIR cannot parse"
            return Diagnostic("error", message, _at(text, m.start(), name))
    return None


def _code(text: str) -> str:
    """The text with comments and string literals blanked out (offsets kept)."""
    return _LEXEME.sub(lambda m: " " * len(m.group()), text)


def _namespace_only_op(text: str, name: str) -> Diagnostic | None:
    """An error at the first generic op whose name has no op part ("tile", "gpu.")."""
    for m in _strings(text):
        if not _CALL.match(text, m.end()):
            continue
        op_name = _unescape(m.group())
        if not op_name.partition(".")[2]:
            message = (f"'{op_name}' is not an operation name: it needs a dialect and an op, "
                       'as in "tile.copy"')
            return Diagnostic("error", message, _at(text, m.start(), name))
    return None


def _custom_form(text: str, name: str) -> Diagnostic | None:
    """An error at the first tile op written in custom form (the dialect has none)."""
    m = _CUSTOM_TILE_OP.search(_code(text))
    if m is None:
        return None
    op = m.group()
    message = (f"'{op}' has no custom assembly form: write it in generic form, "
               f'"{op}"(operands) {{attributes}} : (types) -> (results)')
    return Diagnostic("error", message, _at(text, m.start(), name))
