"""Errors of tile programs, located at the user's Python line. Imports no MLIR.

A kernel body runs Python that builds IR; a mistake the builder can see (an
unknown op, a slice out of bounds, a shape that is not static) is the user's,
so it is reported where the user wrote it: the first frame outside this
package, as `file:line:col: error: message` with the line quoted, the form of
every located error in tile-mlir (diagnostics.Diagnostic.format). The same
frame gives each built op its `ir.Location`, so errors that the passes find
later point there too.
"""

from __future__ import annotations

import contextlib
import linecache
import sys
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from types import FrameType

_PACKAGE = str(Path(__file__).resolve().parent)
_SKIPPED = (_PACKAGE, contextlib.__file__)  # the builder's frames, and its `with` helpers'


class ProgramError(Exception):
    """A mistake in a tile program, located at the Python line that made it."""


class ArgumentError(ProgramError, TypeError):
    """An argument (of a launch, or a description) that does not fit the kernel's
    parameter: the message names the parameter, located at the call that passed it."""

    def __init__(self, message: str):
        self.reason = message  # without the location
        super().__init__(located(message))


@dataclass(frozen=True)
class Place:
    """A position in the user's source: what a built op's location says."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


def _inside(frame: FrameType) -> bool:
    return frame.f_code.co_filename.startswith(_SKIPPED)


def user_frame() -> FrameType | None:
    """The innermost frame outside tile_mlir.lang: the user's line being built."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and _inside(frame):
        frame = frame.f_back
    return frame


def place(frame: FrameType | None = None) -> Place:
    """Where `frame` (the user's frame by default) is: its file, line and column (1-based)."""
    frame = frame or user_frame()
    if frame is None:
        return Place("<unknown>", 0, 0)
    code = frame.f_code
    # one entry per code unit (2 bytes): the instruction running is f_lasti // 2
    position = next(islice(code.co_positions(), frame.f_lasti // 2, None), None)
    line = frame.f_lineno or 0
    col = position[2] + 1 if position is not None and position[2] is not None else 1
    if position is not None and position[0] is not None:
        line = position[0]
    return Place(code.co_filename, line, col)


def located(message: str, where: Place | None = None) -> str:
    """`file:line:col: error: message`, the source line and a caret under the column."""
    where = where or place()
    text = f"{where}: error: {message}"
    line = linecache.getline(where.file, where.line).rstrip("\n")
    if line:
        text += f"\n{line}\n{' ' * max(where.col - 1, 0)}^"
    return text


def program_error(message: str, where: Place | None = None) -> ProgramError:
    """A ProgramError located at the user's line (or `where`)."""
    return ProgramError(located(message, where))
