"""null tier: every kernel case compiles to PTX and ptxas accepts it; the compile API."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.cases import CASES, Case

import tile_mlir
from tile_mlir.diagnostics import CompileError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_case_compiles_and_assembles(case: Case) -> None:
    program = tile_mlir.compile(case.mlir(), name=case.id)
    assert set(program.cubin) == {"kernels"}
    assert program.cubin["kernels"][:4] == b"\x7fELF"
    spec = program.kernels["kernel"]
    assert [p.writes for p in spec.params if p.is_memref] == \
        [False] * case.memref_inputs + [True]


def test_examples_compile_with_all_stages() -> None:
    for path in sorted(EXAMPLES.glob("*.mlir")):
        program = tile_mlir.compile(path)
        assert list(program.stages) == ["tile", "gpu", "llvm", "ptx"], path
        assert "tile." not in program.stages["gpu"], path
        assert program.stages["ptx"].startswith("//"), path


def test_vector_add_is_vectorized() -> None:
    """Every global access of vector_add is 128 bits; loads are non-coherent (.nc)."""
    ptx = tile_mlir.compile(EXAMPLES / "vector_add.mlir", cubin=False).ptx["kernels"]
    loads = re.findall(r"\bld\.global\S*", ptx)
    stores = re.findall(r"\bst\.global\S*", ptx)
    assert loads and all(op.startswith("ld.global.nc.v4.") for op in loads), loads
    assert stores and all(op.startswith("st.global.v4.") for op in stores), stores
    assert len(loads) == 2 * len(stores)


def test_string_path_and_chip() -> None:
    program = tile_mlir.compile(str(EXAMPLES / "vector_add.mlir"), chip="sm_80")
    assert ".target sm_80" in program.ptx["kernels"]
    assert program.chip == "sm_80"


def test_compile_error_is_located_and_has_no_frames() -> None:
    bad = Case("sqrt", (64,), block=64).mlir().replace('"cta"', '"grid"')
    with pytest.raises(CompileError) as info:
        tile_mlir.compile(bad, name="bad.mlir")
    text = str(info.value)
    assert "bad.mlir:3:" in text and "scope 'grid'" in text
    assert "Traceback" not in text
    assert "reproduce with: tile-opt" in text


def test_syntax_error_names_the_file() -> None:
    with pytest.raises(CompileError) as info:
        tile_mlir.compile("gpu.module @m {\n  %x = \n}", name="broken.mlir")
    assert str(info.value).startswith("broken.mlir:")
