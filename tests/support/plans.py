"""Watching the operator library's plan cache from a test."""

from __future__ import annotations

from typing import Any

import pytest

from tile_mlir.ops import entry


def full_paths(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ops whose calls take the full path (plan) from here on, in order: a call the
    inline cache and the plan cache both answer adds nothing."""
    made: list[str] = []
    real = entry.full

    def counted(spec: entry.Spec, key: Any, values: Any) -> Any:
        made.append(spec.name)
        return real(spec, key, values)

    monkeypatch.setattr(entry, "full", counted)
    return made
