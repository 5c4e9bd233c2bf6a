"""null tier: examples/<name>.py print the examples/<name>.mlir that is checked in, and
that IR, lowered by tile-opt, gives the PTX that compiling the kernel from Python gives."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.lang import EXAMPLE_NAMES, EXAMPLES, ROOT, example

import tile_mlir.lang as tl

CHIP = "sm_90"


def test_every_example_has_both_files() -> None:
    assert sorted(p.stem for p in EXAMPLES.glob("*.mlir")) == EXAMPLE_NAMES
    assert len(EXAMPLE_NAMES) == 5


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_checked_in_ir_is_what_the_python_prints(name: str) -> None:
    """Regenerate with `python examples/<name>.py --ir > examples/<name>.mlir`."""
    assert example(name).ir_text() == (EXAMPLES / f"{name}.mlir").read_text(), \
        f"examples/{name}.mlir is stale: python examples/{name}.py --ir > examples/{name}.mlir"


def _kernel(module: object) -> tl.KernelFunction:
    found = [v for v in vars(module).values() if isinstance(v, tl.KernelFunction)]
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_tile_opt_lowers_the_ir_to_the_ptx_of_the_python_kernel(name: str) -> None:
    module = example(name)
    kernel = _kernel(module)
    program = kernel.compile(kernel.signature(*module.ARGS), chip=CHIP)
    lowered = subprocess.run(
        [sys.executable, "-m", "tile_mlir", str(EXAMPLES / f"{name}.mlir"), "-p",
         f"tile-to-ptx{{chip={CHIP}}}", "--emit=ptx"],
        capture_output=True, text=True, check=True, cwd=ROOT)
    assert lowered.stdout.strip() == program.ptx["kernels"].strip()
    assert ".entry " + kernel.name in lowered.stdout


def test_the_script_prints_its_ir() -> None:
    result = subprocess.run([sys.executable, str(EXAMPLES / "vector_add.py"), "--ir"],
                            capture_output=True, text=True, check=True, cwd=ROOT)
    assert result.stdout == (EXAMPLES / "vector_add.mlir").read_text()


def test_vector_add_specializes_on_its_length() -> None:
    """The example's kernel takes any length: a tail where N is not a multiple of its tile,
    pointers with strides and offsets for views."""
    add = _kernel(example("vector_add"))
    whole = add.signature(*(tl.ArrayDesc("f32", (4096,)),) * 3)
    assert whole.static == (("N", 4096),) and all(p.memref for p in whole.params)  # type: ignore[union-attr]
    odd = add.ir(*(tl.ArrayDesc("f32", (1001,)),) * 3)
    assert "known_grid_size = array<i32: 1, 1, 1>" in odd and "scf.if" in odd
    view = add.signature(tl.ArrayDesc("f32", (7,), pointer=4), tl.ArrayDesc("f32", (7,), (3,)),
                         tl.ArrayDesc("f32", (7,)))
    assert [(p.memref, p.offset, p.strides) for p in view.params] == [  # type: ignore[union-attr]
        (False, True, ("1",)), (False, False, ("?1",)), (True, False, ("1",))]
