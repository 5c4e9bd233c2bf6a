"""Helpers of the tile_mlir.lang tests: the lowering features they wait for, the examples
and the tutorial's programs as modules, and pretend-device arrays as descriptions."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import tile_mlir.lang as tl

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TUTORIAL = ROOT / "docs" / "programs.md"
EXAMPLE_NAMES = sorted(p.stem for p in EXAMPLES.glob("*.py") if not p.stem.startswith("_"))

FEATURES = {
    # tile.elementwise inputs with size-1 dims broadcast against dst (memory and registers)
    "broadcast": True,
    # tile.elementwise with register and memory operands mixed
    "mixed": True,
    # tile.reduce of register tiles across warps, the result replicated (R[...])
    "cross_warp_reduce": True,
    # tile.copy between a smaller or dynamic memory view and a static register tile
    # (padding = <number> outside the source)
    "copy_overlap": True,
}
"""The lowering features in progress (another branch): flip one when it lands."""


def requires_feature(*names: str) -> pytest.MarkDecorator:
    """Skip a test until the lowering has every named feature."""
    missing = [n for n in names if not FEATURES[n]]
    return pytest.mark.skipif(bool(missing), reason=f"needs lowering features: {missing}")


def load(path: Path, name: str) -> ModuleType:
    """Import a file as a module (the examples' directory on sys.path for _example)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def example(name: str) -> ModuleType:
    return load(EXAMPLES / f"{name}.py", f"lang_example_{name}")


_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def tutorial(tmp: Path) -> ModuleType:
    """docs/programs.md's ```python blocks, in order, as one module (from a file, so that
    its kernels have a source to hash and lines to point at)."""
    code = "\n\n".join(_BLOCK.findall(TUTORIAL.read_text()))
    path = tmp / "programs_md.py"
    path.write_text(code)
    return load(path, "lang_tutorial")


def desc(array: Any) -> tl.ArrayDesc:
    """A pretend-device array (support.emulated.EmuArray) as a description."""
    return tl.ArrayDesc(array.dtype, array.shape, array.strides, array.pointer)
