"""tile.elementwise without operandSegmentSizes: the attribute filled in before parsing.

IRDL gives `tile.elementwise` (dst, optional a, optional b, variadic c) no custom
syntax, so its generic form must carry `operandSegmentSizes = array<i32: 1, #a, #b,
#c>`. Nobody should count that by hand: the slots are filled in order, so the
operand count decides it (1 dst + n inputs -> [1, min(n, 1), min(max(n - 1, 0), 1),
max(n - 2, 0)]). `fill()` rewrites the text before MLIR parses it
(tile_mlir.context.parse, hence tile-opt, compile() and tile_mlir.parse do it):

    "tile.elementwise"(%c, %a, %b) {op = "add", scope = "cta"} : (...) -> ()
    "tile.elementwise"(%c, %a, %b) {op = "add", scope = "cta", operandSegmentSizes =
        array<i32: 1, 1, 1, 0>} : (...) -> ()          (on one line: no line moves)

The attribute goes just before the dictionary's closing brace, so no text moves to
another line and nothing before the brace moves at all; `Filled.column()` maps a
column of the rewritten text back to the source for the rest of that line. An op
whose text is too unusual to rewrite safely (no attribute dictionary right after the
operands, an operand that is not an SSA value, properties `<{...}>`, regions or
successors) is reported, at the op, as a `SegmentError`; an op that already has
operandSegmentSizes is left as written.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

OP_NAME = '"tile.elementwise"'
_CANDIDATE = re.compile(r'"tile\.elementwise"\s*\(')
_SSA_VALUE = re.compile(r"^%[\w$.-]+(?:#\d+)?$")
_HAS_SEGMENTS = re.compile(r"(?:^|[{,\s])operandSegmentSizes\s*=")
_HOW = "write operandSegmentSizes = array<i32: 1, #a, #b, #c> in its attribute dictionary"


def segment_sizes(operands: int) -> tuple[int, int, int, int]:
    """operandSegmentSizes for a dst and `operands - 1` inputs filling a, b, c... in order."""
    n = operands - 1
    return 1, min(n, 1), min(max(n - 1, 0), 1), max(n - 2, 0)


@dataclass(frozen=True)
class Insertion:
    line: int  # 1-based, in the source
    col: int  # 1-based column of the source where the text was inserted
    length: int


@dataclass(frozen=True)
class Problem:
    line: int
    col: int
    message: str


class SegmentError(ValueError):
    """tile.elementwise ops whose operandSegmentSizes cannot be filled in, located."""

    def __init__(self, problems: Sequence[Problem]):
        self.problems = tuple(problems)
        super().__init__("; ".join(f"{p.line}:{p.col}: {p.message}" for p in self.problems))


@dataclass(frozen=True)
class Filled:
    """The rewritten text and where it differs from the source."""

    text: str
    insertions: tuple[Insertion, ...] = ()

    def column(self, line: int, col: int) -> int:
        """The source column of (line, col) in the rewritten text; a column inside an
        inserted attribute maps to where it was inserted (the closing brace)."""
        shift = 0
        for ins in self.insertions:
            if ins.line != line:
                continue
            start = ins.col + shift
            if col < start:
                break
            if col < start + ins.length:
                return ins.col
            shift += ins.length
        return col - shift


def fill(text: str) -> Filled:
    """The text with operandSegmentSizes added to each tile.elementwise that lacks it.

    Raises SegmentError listing every op where it cannot be inferred."""
    if OP_NAME not in text:
        return Filled(text)
    scanner = _Scanner(text)
    edits: list[tuple[int, str]] = []  # (offset, text to insert)
    problems: list[Problem] = []
    for m in _CANDIDATE.finditer(text):
        if not scanner.is_op_name(m.start()):
            continue
        try:
            edit = _edit(scanner, m.end() - 1)
        except _Unusual as e:
            line, col = scanner.position(m.start())
            problems.append(Problem(line, col, f"cannot infer operandSegmentSizes of "
                                               f"'tile.elementwise': {e}; {_HOW}"))
            continue
        if edit is not None:
            edits.append(edit)
    if problems:
        raise SegmentError(problems)
    return _apply(scanner, edits)


def _apply(scanner: _Scanner, edits: list[tuple[int, str]]) -> Filled:
    pieces, insertions, last = [], [], 0
    for offset, insert in edits:
        pieces += [scanner.text[last:offset], insert]
        line, col = scanner.position(offset)
        insertions.append(Insertion(line, col, len(insert)))
        last = offset
    pieces.append(scanner.text[last:])
    return Filled("".join(pieces), tuple(insertions))


class _Unusual(Exception):
    """The op's text is not the plain generic form that fill() rewrites."""


def _edit(scanner: _Scanner, open_paren: int) -> tuple[int, str] | None:
    """The insertion for the op whose operand list opens at `open_paren`, or None when
    it already has operandSegmentSizes."""
    close = scanner.closing(open_paren, "the operand list is not closed")
    operands = scanner.split(open_paren + 1, close)
    for operand in operands:
        if not _SSA_VALUE.match(operand):
            raise _Unusual(f"operand '{operand}' is not an SSA value")
    if not operands:
        raise _Unusual("it has no operands (its destination is the first)")
    after = scanner.skip_blank(close + 1)
    following = scanner.text[after:after + 2]
    if following == "<{":
        raise _Unusual("properties (<{...}>) are not supported by IRDL ops")
    if following[:1] != "{":
        what = {"(": "regions", "[": "successors"}.get(following[:1], "no attribute dictionary")
        raise _Unusual(f"{what} after the operands, where the attribute dictionary "
                       "{op = ..., scope = ...} belongs")
    end = scanner.closing(after, "the attribute dictionary is not closed")
    body = scanner.text[after + 1:end]
    if _HAS_SEGMENTS.search(body):
        return None
    sizes = ", ".join(map(str, segment_sizes(len(operands))))
    attribute = f"operandSegmentSizes = array<i32: {sizes}>"
    return end, (f", {attribute}" if body.strip() else attribute)


_PAIRS = {"(": ")", "[": "]", "{": "}"}
_TOKEN = re.compile(r'["()\[\]{}]|//')  # what changes the nesting, or hides brackets
_STRING_BODY = re.compile(r'(?:[^"\\\n]|\\.)*')


class _Scanner:
    """Just enough of MLIR's lexer: strings, `//` comments and bracket nesting."""

    def __init__(self, text: str):
        self.text = text

    @cached_property
    def _line_starts(self) -> list[int]:
        return [0] + [m.end() for m in re.finditer("\n", self.text)]

    def position(self, offset: int) -> tuple[int, int]:
        """(line, column), both 1-based, of an offset."""
        line = bisect.bisect_right(self._line_starts, offset) - 1
        return line + 1, offset - self._line_starts[line] + 1

    def is_op_name(self, offset: int) -> bool:
        """Whether the string at `offset` is code (not in a comment or a string) where an
        op can start: not after `(`, `[` or `,` (a name location `loc("x"(...))`)."""
        i = self.text.rfind("\n", 0, offset) + 1
        while i < offset:
            if self.text[i] == '"':
                i = self._string_end(i)
                if i > offset:  # the candidate is inside this string
                    return False
            elif self.text.startswith("//", i):
                return False
            else:
                i += 1
        before = offset - 1
        while before >= 0 and self.text[before].isspace():
            before -= 1
        return before < 0 or self.text[before] not in "([,"

    def skip_blank(self, offset: int) -> int:
        """The first offset at or after `offset` that is not whitespace or a comment."""
        text = self.text
        while offset < len(text):
            if text[offset].isspace():
                offset += 1
            elif text.startswith("//", offset):
                newline = text.find("\n", offset)
                offset = len(text) if newline < 0 else newline + 1
            else:
                break
        return offset

    def closing(self, opening: int, what: str) -> int:
        """The offset of the bracket that closes the one at `opening`."""
        stack = [_PAIRS[self.text[opening]]]
        position = opening + 1
        while (m := _TOKEN.search(self.text, position)) is not None:
            token, at = m.group(), m.start()
            if token == '"':
                position = self._string_end(at)
                continue
            if token == "//":
                position = self.skip_blank(at)
                continue
            if token in _PAIRS:
                stack.append(_PAIRS[token])
            elif token != stack.pop():
                break
            elif not stack:
                return at
            position = at + 1
        raise _Unusual(what)

    def _string_end(self, start: int) -> int:
        """The offset after the string literal that starts at `start` (its line's end when
        it is not closed there)."""
        m = _STRING_BODY.match(self.text, start + 1)
        assert m is not None  # the pattern also matches an empty body
        return m.end() + 1

    def split(self, start: int, end: int) -> list[str]:
        """The comma-separated items of text[start:end] (operands: no nesting), without
        comments and blanks."""
        body = re.sub(r"//[^\n]*", "", self.text[start:end])
        if not body.strip():
            return []
        items = [item.strip() for item in body.split(",")]
        if not all(items):
            raise _Unusual("an operand is missing between commas")
        return items
