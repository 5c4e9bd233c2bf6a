"""null tier for the runtime: no MLIR import, specs as data, argument checks before launch."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from support.cases import Case

import tile_mlir
from tile_mlir.runtime import ArgumentError, Kernel, KernelSpec, Param


def test_runtime_imports_no_mlir() -> None:
    code = ("import sys; sys.modules['mlir'] = None\n"  # any `import mlir` now fails
            "import tile_mlir, tile_mlir.runtime, tile_mlir.layout, tile_mlir.dtypes\n"
            "print('ok')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_spec_round_trips_through_json() -> None:
    spec = tile_mlir.compile(Case("fma", (4, 1031), block=128).mlir(), cubin=False).kernels["kernel"]
    assert KernelSpec.from_json(json.loads(spec.dumps())) == spec
    assert [p.kind for p in spec.params] == ["memref"] * 4
    assert spec.block == (128, 1, 1) and spec.grid == (1, 1, 1)


SPEC = KernelSpec("k", "m", (
    Param("arg0", "memref", "f32", (4, 8), writes=False, align=16),
    Param("arg1", "scalar", "f32"),
    Param("arg2", "memref", "f32", (4, 8), writes=True, align=16),
), block=(32, 1, 1), grid=(1, 1, 1))


@pytest.mark.parametrize(("args", "message"), [
    ((np.zeros((4, 8), np.float32), 1.0), "takes 3 arguments, got 2"),
    ((np.zeros((4, 8), np.float64), 1.0, np.zeros((4, 8), np.float32)),
     "argument 0 (arg0): expected f32 elements, got float64"),
    ((np.zeros((4, 8), np.float32), 1.0, np.zeros((8, 4), np.float32)),
     "argument 2 (arg2): expected shape (4, 8), got (8, 4)"),
    ((np.zeros((4, 8), np.float32), "1.0", np.zeros((4, 8), np.float32)),
     "argument 1 (arg1): expected a f32 scalar, got str"),
    ((np.zeros((4, 8), np.float32), 1.0, [0.0] * 32),
     "argument 2 (arg2): expected an array or a device pointer, got list"),
])
def test_bad_arguments_name_the_argument(args: tuple[object, ...], message: str) -> None:
    kernel = Kernel(SPEC, function=None)  # rejected before any device work
    with pytest.raises(ArgumentError, match=message.replace("(", r"\(").replace(")", r"\)")):
        kernel(*args)


def test_launch_dims_required_when_not_known() -> None:
    spec = KernelSpec("k", "m", (), block=None, grid=None)
    with pytest.raises(ArgumentError, match="does not fix its grid size"):
        Kernel(spec, function=None)()
