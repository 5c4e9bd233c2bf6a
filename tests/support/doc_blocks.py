"""Running the code blocks of a Markdown page, so that the page cannot drift from the code."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

_BLOCK = re.compile(r"^```python(?P<tags>[^\n]*)\n(?P<code>.*?)^```", re.S | re.M)


def python_blocks(page: Path, with_tags: frozenset[str] = frozenset()) -> list[str]:
    """The page's ```python blocks, in order: the untagged ones and those tagged with one of
    `with_tags` (```python gpu)."""
    blocks = []
    for m in _BLOCK.finditer(page.read_text()):
        tags = set(m.group("tags").split())
        if not tags or tags & with_tags:
            blocks.append(m.group("code"))
    return blocks


def run_blocks(page: Path, with_tags: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Run the blocks as one program from the repository root (paths in the page are
    relative to it); the namespace it leaves. A failing block raises with its number."""
    namespace: dict[str, Any] = {"__name__": f"doc:{page.name}"}
    blocks = python_blocks(page, with_tags)
    assert blocks, f"{page} has no python blocks"
    saved = Path.cwd()
    os.chdir(ROOT)
    try:
        for number, code in enumerate(blocks, start=1):
            compiled = compile(code, f"{page.name}[python block {number}]", "exec")
            exec(compiled, namespace)  # the page's own code, run as its test
    finally:
        os.chdir(saved)
    return namespace
