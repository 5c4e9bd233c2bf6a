"""Whether one run of a hostile input ended acceptably, and if not, in which class.

Acceptable: success, or an error located in the input (`<file>:<line>:<col>: error:`
from tile-opt with exit status 1; a CompileError whose errors all carry a location
from compile()). Everything else is a failure, classed so that one bug is one
class: death by a signal, a timeout, a Python traceback, tile-opt's internal
error, an unlocated error, another exit status, another exception.
"""

from __future__ import annotations

import json
import re
import signal
from dataclasses import dataclass
from typing import Any

TRACEBACK = "Traceback (most recent call last)"

UNLOCATED_ALLOWED: tuple[tuple[str, str], ...] = ()
"""(regex on the message, why it may have no location): errors about the input as a
whole rather than a place in it."""


@dataclass(frozen=True)
class Verdict:
    ok: bool
    kind: str  # "ok", "located error", or the failure's class
    detail: str = ""


def _first_lines(text: str, count: int = 6) -> str:
    return "\n".join(text.strip().splitlines()[:count])


def _allowed(message: str) -> bool:
    return any(re.search(pattern, message) for pattern, _ in UNLOCATED_ALLOWED)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _common(result: dict[str, Any]) -> Verdict | None:
    """Signals, timeouts and tracebacks, whatever the mode."""
    if result["signal"] is not None:
        if result["signal"] == signal.SIGALRM:
            return Verdict(False, "timeout", f"over {result.get('timeout')} s")
        name = _signal_name(result["signal"])
        return Verdict(False, f"killed by {name}", _first_lines(result["stderr"], 12))
    if result["stdout_traceback"] or TRACEBACK in result["stderr"]:
        lines = result["stderr"].strip().splitlines()
        last = lines[-1] if lines else "(traceback in stdout)"
        return Verdict(False, f"traceback: {last.split(':')[0]}", "\n".join(lines[-14:]))
    return None


_HEADER = re.compile(r"^(?:(?P<loc>\S+?):(?P<line>\d+):(?P<col>\d+): )?"
                     r"(?P<tool>tile-opt: )?(?P<internal>internal )?error: (?P<message>.*)$")


def tile_opt(result: dict[str, Any]) -> Verdict:
    """A tile-opt run: exit 0, or exit 1 with every error located in the input."""
    common = _common(result)
    if common:
        return common
    stderr, code = result["stderr"], result["exit"]
    if code == 0:
        return Verdict(True, "ok")
    name = "<stdin>" if result.get("stdin") else result["input"]
    headers = [m for line in stderr.splitlines() if (m := _HEADER.match(line))]
    if code == 3 or any(m["internal"] for m in headers):
        first = next((m["message"] for m in headers if m["internal"]), _first_lines(stderr, 1))
        return Verdict(False, f"internal error: {first.split(':')[0]}", _first_lines(stderr))
    if code != 1:
        return Verdict(False, f"exit status {code}", _first_lines(stderr))
    located = [m for m in headers if m["loc"] == name]
    stray = [m for m in headers if m["loc"] != name and not _allowed(m["message"])]
    if located and not stray:
        return Verdict(True, "located error")
    what = stray[0]["message"] if stray else "no error message"
    return Verdict(False, f"unlocated error: {what[:60]}", _first_lines(stderr))


def compile_(result: dict[str, Any]) -> Verdict:
    """A compile() run: success, or a CompileError whose errors all have a location."""
    common = _common(result)
    if common:
        return common
    if result["exit"] != 0:
        return Verdict(False, f"exit status {result['exit']}", _first_lines(result["stderr"]))
    try:
        verdict = json.loads(result["stdout"].strip().splitlines()[-1])
    except (ValueError, IndexError):
        return Verdict(False, "no verdict", _first_lines(result["stdout"] + result["stderr"]))
    if verdict["result"] == "ok":
        return Verdict(True, "ok")
    errors = [d for d in verdict["diagnostics"] if d["severity"] == "error"]
    stray = [d for d in errors if d["loc"] is None and not _allowed(d["message"])]
    if errors and not stray:
        return Verdict(True, "located error")
    what = stray[0]["message"] if stray else "CompileError without an error"
    return Verdict(False, f"unlocated CompileError: {what[:60]}", json.dumps(verdict)[:2000])


def judge(result: dict[str, Any]) -> Verdict:
    return compile_(result) if result["mode"] == "compile" else tile_opt(result)
