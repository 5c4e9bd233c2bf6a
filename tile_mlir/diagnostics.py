"""Diagnostics: located messages from MLIR and from tile-mlir, printed like mlir-opt.

Every user-facing error carries a location (`file:line:col`) and no compiler
frames. MLIR reports parse and pass errors as `MLIRError`; tile passes report
errors through MLIR too (`Location.emit_error`), so hosts that embed the
passes see them in their own diagnostic handlers. Remarks (such as the
`--tile-explain` decisions) have no Python emitter in MLIR, so they go to a
`DiagnosticSink` instead; both kinds end up as `Diagnostic` values here.

Importing this module does not import MLIR (the kernel cache reads sources
through `decode` without it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mlir import ir

SEVERITIES = ("error", "warning", "note", "remark")


@dataclass(frozen=True)
class SourceLoc:
    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Diagnostic:
    severity: str
    message: str
    loc: SourceLoc | None = None
    notes: tuple[Diagnostic, ...] = ()

    def format(self, sources: Mapping[str, str] | None = None) -> str:
        """`file:line:col: error: message`, the source line and a caret, then notes."""
        head = f"{self.loc}: " if self.loc else ""
        lines = [f"{head}{self.severity}: {self.message}"]
        snippet = _snippet(self.loc, sources or {})
        if snippet:
            lines.append(snippet)
        lines.extend(note.format(sources) for note in self.notes)
        return "\n".join(lines)


_SNIPPET_WIDTH = 1000


def _snippet(loc: SourceLoc | None, sources: Mapping[str, str]) -> str:
    if loc is None or loc.file not in sources or loc.line < 1:
        return ""
    text_lines = sources[loc.file].splitlines()
    if loc.line > len(text_lines):
        return ""
    line, col = text_lines[loc.line - 1], max(loc.col - 1, 0)
    if len(line) > _SNIPPET_WIDTH:  # a window around the column, not a megabyte line
        start = min(max(col - _SNIPPET_WIDTH // 2, 0), len(line) - _SNIPPET_WIDTH)
        line, col = line[start:start + _SNIPPET_WIDTH], col - start
    return f"{line}\n{' ' * col}^"


def source_loc(loc: ir.Location, rename: Mapping[str, str] | None = None) -> SourceLoc | None:
    """The first file:line:col inside a location (through names, call sites and fusions)."""
    rename = rename or {}
    if loc.is_a_file():
        name = loc.filename
        return SourceLoc(rename.get(name, name), loc.start_line, loc.start_col)
    if loc.is_a_name():
        return source_loc(loc.child_loc, rename)
    if loc.is_a_callsite():
        return source_loc(loc.callee, rename)
    if loc.is_a_fused():
        for inner in loc.locations:
            found = source_loc(inner, rename)
            if found:
                return found
    return None


def from_mlir(info: ir.DiagnosticInfo | ir.Diagnostic, rename: Mapping[str, str] | None = None
              ) -> Diagnostic:
    """Copy an MLIR diagnostic (valid only inside its callback) into a Diagnostic."""
    severity = str(info.severity).rsplit(".", 1)[-1].lower()
    return Diagnostic(
        severity=severity if severity in SEVERITIES else "error",
        message=str(info.message),
        loc=source_loc(info.location, rename),
        notes=tuple(from_mlir(n, rename) for n in info.notes),
    )


def from_mlir_error(error: ir.MLIRError, rename: Mapping[str, str] | None = None
                    ) -> list[Diagnostic]:
    """The located diagnostics of an MLIRError, or its text when it carries none."""
    found = [from_mlir(d, rename) for d in error.error_diagnostics]
    return found or [Diagnostic("error", str(error).strip())]


@dataclass
class DiagnosticSink:
    """Collects the diagnostics of one compilation (MLIR's and tile-mlir's own)."""

    diagnostics: list[Diagnostic] = field(default_factory=list)
    rename: dict[str, str] = field(default_factory=dict)

    def report(self, severity: str, message: str, location: ir.Location | None = None,
               notes: Iterable[Diagnostic] = ()) -> None:
        loc = source_loc(location, self.rename) if location is not None else None
        self.diagnostics.append(Diagnostic(severity, message, loc, tuple(notes)))

    def extend(self, diagnostics: Iterable[Diagnostic]) -> None:
        self.diagnostics.extend(diagnostics)



class CompileError(Exception):
    """A user-facing compilation failure: located diagnostics, no compiler frames."""

    def __init__(self, diagnostics: list[Diagnostic], sources: Mapping[str, str] | None = None,
                 reproducer: str | None = None):
        self.diagnostics = diagnostics
        self.sources = dict(sources or {})
        self.reproducer = reproducer
        super().__init__(self.render())

    def render(self) -> str:
        text = "\n".join(d.format(self.sources) for d in self.diagnostics)
        if self.reproducer:
            text += f"\nreproduce with: {self.reproducer}"
        return text


def _line_col(text: str | bytes, offset: int) -> tuple[int, int]:
    """1-based line and column of an offset (in characters, or bytes for bytes)."""
    if isinstance(text, bytes):
        text = text.decode("latin-1")  # one character per byte: offsets stay
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1


def decode(data: bytes, name: str) -> str:
    """The text of an input; CompileError located at the first byte that is not UTF-8.

    MLIR reads UTF-8 only, so a binary file or text in another encoding is an input
    error like a syntax error: `name:line:col` (the column counts bytes, as MLIR's do).
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line, col = _line_col(data, e.start)
        hint = " (UTF-16? save it as UTF-8)" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        message = f"input is not UTF-8 text (byte {data[e.start]:#04x} at offset {e.start}){hint}"
        raise CompileError([Diagnostic("error", message, SourceLoc(name, line, col))]) from None


def check_text(text: str, name: str) -> None:
    """CompileError located at the first lone surrogate: a str that has no UTF-8 form
    (as `bytes.decode(errors="surrogateescape")` makes) cannot reach MLIR."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        line, col = _line_col(text, e.start)
        message = (f"input is not valid Unicode text (lone surrogate U+{ord(text[e.start]):04X} "
                   f"at index {e.start})")
        raise CompileError([Diagnostic("error", message, SourceLoc(name, line, col))]) from None
