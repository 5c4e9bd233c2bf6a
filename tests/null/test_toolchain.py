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
def plain_ptx() -> str:
    """A cluster row kernel (softmax f32, 16 CTAs of 256 threads), its request removed."""
    x: Any = ArrayDesc("f32", (128, 262144), None, 1 << 20)
    y: Any = ArrayDesc("f32", (128, 262144), None, 1 << 32)
    g = Geometry("cluster", 4, 4096, 1, 16)
    program = programs.specialize(programs.softmax_rows, {"x": x, "y": y},
                                  {"G": g.constexpr()})
    assert program.spec.occupancy == 3
    assert 'nvvm.minctasm = 3 : i32' in program.ir()
    ptx = tile_mlir.compile(program.ir(), chip="sm_90", cache=False, cubin=False).ptx["kernels"]
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
