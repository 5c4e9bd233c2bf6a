"""Where the language-neutral data lives: dialect/ and pipelines/.

In a source checkout (or an editable install) they sit at the repository root
beside the package; an installed wheel carries them as the package data
`tile_mlir._dialect` and `tile_mlir._pipelines` (see pyproject.toml).
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent


def _data_dir(source_name: str, package: str) -> Path:
    in_tree = _ROOT / source_name
    if in_tree.is_dir():
        return in_tree
    return Path(str(resources.files(package)))


@cache
def dialect_file() -> Path:
    """dialect/tile.irdl.mlir"""
    return _data_dir("dialect", "tile_mlir._dialect") / "tile.irdl.mlir"


@cache
def pipelines_dir() -> Path:
    """pipelines/: the named pass pipelines, one `<name>.pipeline` file each."""
    return _data_dir("pipelines", "tile_mlir._pipelines")
