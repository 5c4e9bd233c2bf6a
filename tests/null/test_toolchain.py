"""null tier: the toolchain's occupancy requests (toolchain.settle): a kernel's
`.minnctapersm` is kept where ptxas fits it without spilling and dropped where it spills,
the cubin then the one of the PTX without it (ptxas of the pinned wheel, no GPU)."""

from __future__ import annotations

import re
from typing import Any

import pytest

import tile_mlir
from tile_mlir import toolchain
from tile_mlir.lang import ArrayDesc
from tile_mlir.ops.programs import rows as programs
from tile_mlir.ops.programs.rows import Geometry


@pytest.fixture(scope="module")
def row_ir() -> str:
    """A cluster row kernel's IR (softmax f32, 16 CTAs of 256 threads, 3 CTAs an SM)."""
    x: Any = ArrayDesc("f32", (128, 262144), None, 1 << 20)
    y: Any = ArrayDesc("f32", (128, 262144), None, 1 << 32)
    g = Geometry("cluster", 4, 4096, 1, 16)
    program = programs.specialize(programs.softmax_rows, {"x": x, "y": y},
                                  {"G": g.constexpr()})
    assert program.spec.occupancy == 3 and program.spec.spill == 0
    text = program.ir()
    assert 'nvvm.minctasm = 3 : i32' in text and toolchain.SPILL_ATTR not in text
    return text


@pytest.fixture(scope="module")
def plain_ptx(row_ir: str) -> str:
    """The row kernel's PTX, its request removed."""
    ptx = tile_mlir.compile(row_ir, chip="sm_90", cache=False, cubin=False).ptx["kernels"]
    assert ptx.count(".minnctapersm 3") == 1  # NVVM's translation of nvvm.minctasm
    return toolchain.OCCUPANCY.sub("", ptx)


def _report(ptx: str) -> str:
    return toolchain._ptxas(ptx, "sm_90", 3, verbose=True)[1]


def _registers(report: str) -> int:
    found = re.search(r"Used (\d+) registers", report)
    assert found is not None, report
    return int(found.group(1))


@pytest.mark.parametrize("ctas", [2, 3, 8])
def test_a_request_is_kept_where_it_does_not_spill(plain_ptx: str, ctas: int) -> None:
    requested = plain_ptx.replace(".maxntid", f".minnctapersm {ctas}\n.maxntid", 1)
    spilled = toolchain.spills(_report(requested))
    settled, cubin = toolchain.settle(requested)
    if spilled:  # 8 CTAs of 256 threads leave 32 registers a thread: it spills
        assert settled == plain_ptx
        assert cubin == toolchain.settle(plain_ptx)[1]
        assert not toolchain.spills(_report(settled))
    else:
        assert settled == requested
        assert _registers(_report(settled)) * 256 * ctas <= 65536
    assert ctas != 8 or spilled
    assert toolchain.assemble(requested) == cubin


def test_spills_reads_every_function_of_the_report() -> None:
    report = ("ptxas info    : Function properties for a\n"
              "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
              "ptxas info    : Function properties for b\n"
              "    16 bytes stack frame, 16 bytes spill stores, 16 bytes spill loads\n")
    assert toolchain.spills(report)
    assert not toolchain.spills(report.replace("16 bytes spill stores", "0 bytes spill stores"))
    assert not toolchain.spills("")
    assert not toolchain.spills(report, 16) and toolchain.spills(report, 15)


def test_a_request_that_spills_is_kept_within_its_allowance(row_ir: str,
                                                            plain_ptx: str) -> None:
    """8 CTAs of 256 threads spill: settle keeps the request where the spill stores are
    within `spill` bytes; the compiler passes settle the gpu.func's SPILL_ATTR."""
    requested = plain_ptx.replace(".maxntid", ".minnctapersm 8\n.maxntid", 1)
    stored = max(int(n) for n in re.findall(r"(\d+) bytes spill stores", _report(requested)))
    assert stored > 0
    assert toolchain.settle(requested, spill=stored)[0] == requested
    assert toolchain.settle(requested, spill=stored - 1)[0] == plain_ptx
    for allowed, kept in [(stored, True), (stored - 1, False)]:
        text = row_ir.replace("nvvm.minctasm = 3 : i32", f"nvvm.minctasm = 8 : i32, "
                              f"{toolchain.SPILL_ATTR} = {allowed} : i32")
        ptx = tile_mlir.compile(text, chip="sm_90", cache=False).ptx["kernels"]
        assert (".minnctapersm 8" in ptx) == kept, allowed
