"""null tier: the toolchain's occupancy requests (toolchain.settle): a kernel's
`.minnctapersm` is kept where ptxas fits it without spilling; where it spills, the
highest lower request that does not and gives more CTAs an SM than none takes its place,
else none (the cubin then the one of the PTX without it); ptxas of the pinned wheel, no
GPU."""

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


def _request(ptx: str, ctas: int) -> str:
    return ptx.replace(".maxntid", f".minnctapersm {ctas}\n.maxntid", 1)


@pytest.mark.parametrize("ctas", [2, 3, 8])
def test_a_request_is_kept_where_it_does_not_spill(plain_ptx: str, ctas: int) -> None:
    requested = _request(plain_ptx, ctas)
    spilled = toolchain.spills(_report(requested))
    settled, cubin = toolchain.settle(requested)
    if spilled:  # 8 CTAs of 256 threads leave 32 registers a thread: it spills
        # so do 3 to 7, and unasked ptxas gives it 2 (over 80 registers): none is kept
        assert settled == plain_ptx
        assert cubin == toolchain.settle(plain_ptx)[1]
        assert not toolchain.spills(_report(settled))
    else:
        assert settled == requested
        assert _registers(_report(settled)) * 256 * ctas <= 65536
    assert ctas != 8 or spilled
    assert toolchain.assemble(requested) == cubin


def test_a_lower_request_where_it_gives_more_ctas_than_none() -> None:
    """log_softmax bf16 over rows of 32001 (a cluster of 4 CTAs of 128 threads, edges):
    its request of 6 CTAs an SM spills, 5 does not, and unasked ptxas gives it 4 (over 96
    registers): it is compiled asking for 5. (Its e^x by expf, the kernels' default EXP:
    the library's exp_fast, ops/rows.py's SOFTMAX_EXP, takes 95 registers: 5 CTAs unasked.)"""
    x: Any = ArrayDesc("bf16", (2097, 32001), None, 1 << 20)
    y: Any = ArrayDesc("bf16", (2097, 32001), None, 1 << 32)
    g = Geometry("cluster", 8, 512, 1, 4, ahead=65, edges=True)
    program = programs.specialize(programs.softmax_rows, {"x": x, "y": y},
                                  {"G": g.constexpr(), "LOG": True})
    assert program.spec.occupancy == 6
    ptx = tile_mlir.compile(program.ir(), chip="sm_90", cache=False).ptx["kernels"]
    assert ptx.count(".minnctapersm") == 1 and ".minnctapersm 5" in ptx
    report = _report(ptx)
    assert not toolchain.spills(report) and toolchain.ctas_an_sm(report, 128) == 5
    bare = toolchain.OCCUPANCY.sub("", ptx)
    assert toolchain.ctas_an_sm(_report(bare), 128) == 4
    assert toolchain.spills(_report(_request(bare, 6)))
    assert toolchain.settle(_request(bare, 6))[0] == _request(bare, 5)
    assert toolchain.settle(_request(bare, 5))[0] == _request(bare, 5)  # kept
    assert toolchain.settle(_request(bare, 6), spill=-1)[0] == bare  # nothing meets it
    several = _request(_request(bare, 6), 6)
    assert toolchain.settle(several)[0] == bare  # two requests: none


def test_ctas_an_sm_counts_registers_as_allocated() -> None:
    report = "ptxas info    : Used 125 registers, 16 bytes cmem[0]\n"  # 128 allocated
    assert toolchain.ctas_an_sm(report, 256) == 2
    assert toolchain.ctas_an_sm(report, 96) == 5  # 3 warps of 128 registers a thread
    assert toolchain.ctas_an_sm(report, 100) == 4  # 4 warps: a warp is allocated whole
    assert toolchain.ctas_an_sm("", 256) == 0
    assert toolchain.ctas_an_sm("ptxas info    : Used 0 registers\n", 1024) == 8


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
    requested = _request(plain_ptx, 8)
    stored = max(int(n) for n in re.findall(r"(\d+) bytes spill stores", _report(requested)))
    assert stored > 0
    assert toolchain.settle(requested, spill=stored)[0] == requested
    lowered = toolchain.settle(requested, spill=stored - 1)[0]  # a lower request, or none
    assert ".minnctapersm 8" not in lowered
    assert not toolchain.spills(_report(lowered), stored - 1)
    for allowed, kept in [(stored, True), (stored - 1, False)]:
        text = row_ir.replace("nvvm.minctasm = 3 : i32", f"nvvm.minctasm = 8 : i32, "
                              f"{toolchain.SPILL_ATTR} = {allowed} : i32")
        ptx = tile_mlir.compile(text, chip="sm_90", cache=False).ptx["kernels"]
        assert (".minnctapersm 8" in ptx) == kept, allowed
