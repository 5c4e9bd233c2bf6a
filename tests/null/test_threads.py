"""Thread counts that do not divide evenly, in the null tier (support/thread_programs.py):
each program compiles (ptxas accepts it) and runs correctly on the CPU's SIMT emulator
(barriers, shuffles and partial warps as the GPU has them) against float64 NumPy on
fresh random inputs with poisoned outputs; each refused program gets a located error
that says why."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest
from support import simt
from support.cases import ulp_distance
from support.primitive_programs import Program
from support.reduction_programs import Reduce
from support.thread_programs import (
    LANG_BLOCKS,
    PROGRAMS,
    REDUCTIONS,
    REFUSED,
    Refused,
    lang_seed_000,
    lang_warpgroup,
)

import tile_mlir
import tile_mlir.lang as tl
from tile_mlir.diagnostics import CompileError
from tile_mlir.dtypes import DTYPES

_BLOCK = re.compile(r"known_block_size = array<i32: (\d+), (\d+), (\d+)>")


def _partial_warp(text: str) -> bool:
    match = _BLOCK.search(text)
    assert match
    return int(match[1]) * int(match[2]) * int(match[3]) % 32 != 0


def _check_ptx(text: str, name: str) -> None:
    """ptxas accepts it, nothing spills, and with a partial last warp no shuffle names
    the whole warp (shfl.sync's mask is its last operand)."""
    program = tile_mlir.compile(text, name=name)
    assert program.cubin["kernels"][:4] == b"\x7fELF"
    ptx = program.ptx["kernels"]
    assert ".local" not in ptx, "a register tile spilled to local memory"
    if _partial_warp(text):
        full = re.findall(r"shfl\.sync\.\w+\.b32[^;]*, -1;", ptx)
        assert not full, f"a full-warp mask in a block with a partial warp: {full[0]}"


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_program_compiles(program: Program) -> None:
    _check_ptx(program.mlir, program.name)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_program_on_the_cpu(program: Program, rng: np.random.Generator) -> None:
    inputs = program.inputs(rng)
    expected = program.expected(*(np.asarray(a, np.float64) for a in inputs))
    if program.in_place:
        assert isinstance(inputs[0], np.ndarray)
        out = inputs[0].copy()
        simt.emulate(program.mlir, [out], program.kernel)
    else:
        out = np.full(program.out_shape, np.nan, DTYPES[program.dtype].np_dtype())
        simt.emulate(program.mlir, [*inputs, out], program.kernel)
    assert not np.isnan(out.astype(np.float64)).any(), "elements never written"
    assert ulp_distance(out, expected, program.dtype).max() <= program.ulps


@pytest.mark.parametrize("case", REDUCTIONS, ids=lambda c: c.id)
def test_reduction_compiles(case: Reduce) -> None:
    _check_ptx(case.mlir(), case.id)


@pytest.mark.parametrize("case", REDUCTIONS, ids=lambda c: c.id)
def test_reduction_on_the_cpu(case: Reduce, rng: np.random.Generator) -> None:
    src, old = case.inputs(rng)
    out = np.full(case.out_shape, np.nan, DTYPES[case.dst_dtype].np_dtype())
    simt.emulate(case.mlir(), [src, out])
    expected = case.reference(src, old)
    got = out.astype(np.float64)
    assert (np.isnan(got) == np.isnan(expected)).all(), "NaN where there is none, or lost"
    error = np.where(np.isnan(expected), 0.0, np.abs(got - expected))
    assert (error <= case.tolerance(src)).all(), f"max |error| {error.max():.3g}"


@pytest.mark.parametrize("case", REFUSED, ids=lambda c: c.name)
def test_refused_with_a_located_reason(case: Refused) -> None:
    with pytest.raises(CompileError) as caught:
        tile_mlir.compile(case.mlir, name=case.name)
    text = str(caught.value)
    assert text.startswith(f"{case.name}:{case.line}:"), text
    assert case.message in text.split("\n    ", maxsplit=1)[0], text  # the first diagnostic's message


@pytest.mark.parametrize("block", LANG_BLOCKS, ids=str)
def test_seed_000_from_python_at_odd_blocks(block: int | tuple[int, int, int],
                                            rng: np.random.Generator) -> None:
    """Seed 000's kernel written with tile_mlir.lang: its block is the kernel's, and the
    kernel is right there."""
    text = lang_seed_000(block).ir(tl.ArrayDesc("f32", (32, 32)))
    x, y, z = (block, 1, 1) if isinstance(block, int) else block
    assert f"known_block_size = array<i32: {x}, {y}, {z}>" in text
    a = rng.uniform(0.0, 100.0, (32, 32)).astype(np.float32)
    expected = np.sqrt(a.astype(np.float64))
    simt.emulate(text, [a])
    assert ulp_distance(a, expected, "f32").max() == 0


def test_a_refusal_from_python_is_at_the_call() -> None:
    """tl.warpgroup.copy in a kernel of 100 threads: the error names the Python line."""
    kernel = lang_warpgroup(100)
    source, first = inspect.getsourcelines(lang_warpgroup)
    line = first + next(n for n, text in enumerate(source) if "LANG_WARPGROUP_LINE" in text)
    with pytest.raises(CompileError) as caught:
        kernel.compile([tl.ArrayDesc("f32", (32, 32))])
    text = str(caught.value)
    assert f"thread_programs.py:{line}:" in text.splitlines()[0], text
    assert "at scope 'warpgroup' needs whole warpgroups, but the block has 100 threads" in text


ROW_TAIL = """gpu.module @kernels {
  gpu.func @k(%x: memref<1029x1xf32>, %z: memref<1029x1xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %r = "tile.alloc"() {layout = #tile.layout<"S[(256, 1):(1@tid, 1)]">} : () -> memref<256x1xf32, #gpu.address_space<private>>
    %s = memref.subview %x[1024, 0] [TAIL, 1] [1, 1] : memref<1029x1xf32> to memref<TAILx1xf32, strided<[1, 1], offset: 1024>>
    "tile.copy"(%r, %s) {padding = 0xFFF0000000000000 : f64, scope = "cta"} : (memref<256x1xf32, #gpu.address_space<private>>, memref<TAILx1xf32, strided<[1, 1], offset: 1024>>) -> ()
    %t = memref.subview %z[1024, 0] [TAIL, 1] [1, 1] : memref<1029x1xf32> to memref<TAILx1xf32, strided<[1, 1], offset: 1024>>
    "tile.elementwise"(%t, %r) {op = "neg", operandSegmentSizes = array<i32: 1, 1, 0, 0>, scope = "cta"} : (memref<TAILx1xf32, strided<[1, 1], offset: 1024>>, memref<256x1xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}
"""


@pytest.mark.parametrize("tail", [1, 2, 5])
def test_a_row_tail_written_from_registers_by_its_holders(tail: int) -> None:
    """A memory dst that ends before the register tile (a row's last `tail` elements, as
    the fused row ops write them) is written on the overlap by the threads holding it: a
    size of 1 there is where the dst ends, not a broadcast (every thread would write the
    one element, the last writer's padding winning)."""
    x = np.random.default_rng(tail).standard_normal((1029, 1)).astype(np.float32)
    z = np.full((1029, 1), np.nan, np.float32)
    simt.emulate(ROW_TAIL.replace("TAIL", str(tail)), [x, z])
    np.testing.assert_array_equal(z[1024:1024 + tail], -x[1024:1024 + tail])
    assert np.isnan(z[:1024]).all() and np.isnan(z[1024 + tail:]).all()
