"""--verify-diagnostics: compare diagnostics with `expected-*` comments, as mlir-opt does.

    op  // expected-error {{message substring}}
    // expected-error@+1 {{...}}     the next line (also @-2, @above, @below)
    // expected-remark {{...}}       also -warning and -note

Every diagnostic must be expected and every expectation met. Notes are only
checked where the input expects some.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tile_mlir.diagnostics import Diagnostic, SourceLoc

_EXPECT = re.compile(
    r"expected-(?P<sev>error|warning|note|remark)"
    r"(?:@(?P<where>[+-]\d+|above|below))?\s*\{\{(?P<msg>.*?)\}\}"
)


@dataclass
class Expectation:
    severity: str
    line: int
    message: str
    at: SourceLoc
    met: bool = False


def expectations(text: str, name: str) -> list[Expectation]:
    lines = text.splitlines()
    found = []
    for number, line in enumerate(lines, start=1):
        for m in _EXPECT.finditer(line):
            target = _target_line(lines, number, m.group("where"))
            found.append(Expectation(m.group("sev"), target, m.group("msg"),
                                     SourceLoc(name, number, m.start() + 1)))
    return found


def _target_line(lines: list[str], number: int, where: str | None) -> int:
    if where is None:
        return number
    if where in ("above", "below"):
        step = -1 if where == "above" else 1
        target = number + step
        while 1 <= target <= len(lines) and "expected-" in lines[target - 1]:
            target += step
        return target
    return number + int(where)


def _flatten(diagnostics: list[Diagnostic], with_notes: bool) -> list[Diagnostic]:
    flat = []
    for d in diagnostics:
        flat.append(d)
        if with_notes:
            flat.extend(_flatten(list(d.notes), with_notes))
    return flat


def check(text: str, name: str, diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """The problems: unexpected diagnostics and unmet expectations (empty when all match)."""
    expected = expectations(text, name)
    with_notes = any(e.severity == "note" for e in expected)
    problems = []
    for d in _flatten(diagnostics, with_notes):
        match = next((e for e in expected if not e.met and e.severity == d.severity
                      and d.loc is not None and d.loc.file == name and e.line == d.loc.line
                      and e.message in d.message), None)
        if match:
            match.met = True
        else:
            problems.append(Diagnostic("error", f"unexpected {d.severity}: {d.message}", d.loc))
    for e in expected:
        if not e.met:
            problems.append(Diagnostic(
                "error", f"expected {e.severity} \"{e.message}\" was not produced", e.at))
    return problems
