"""null tier: every op x dtype of the library compiles to PTX and ptxas accepts it, and the
PTX has the accesses the strategies promise (16-byte, non-coherent loads issued before use)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from support.ops_check import Case, prepared, standard_cases

import tile_mlir
from tile_mlir import op_table

LARGE = (1024, 1 << 14)  # 2^24 elements: the default strategy stages 4 rounds
RAGGED = (1024, (1 << 14) + 3)  # as many again and a partial last piece: both branches


def _ptx(case: Case) -> str:
    program = tile_mlir.compile(prepared(case).program.ir(), name=case.id)
    assert program.cubin["kernels"][:4] == b"\x7fELF"
    return program.ptx["kernels"]


def _full_piece(case: Case) -> str:
    """The PTX of a whole piece of the case's kernel: a kernel of whole pieces (its
    signature's `whole`) is nothing else; a ragged one's is its branch after the last
    label, where the static tile op is (program.py's scf.if puts it last)."""
    ptx = _ptx(case)
    if prepared(case).signature.whole:
        assert "$L__BB0_1:" not in ptx  # straight-line: no branch to a partial piece
        return ptx
    return ptx[ptx.rindex("$L__BB0_1:"):]


@pytest.mark.parametrize("op", [row.name for row in op_table.public_ops()])
def test_every_dtype_assembles(op: str) -> None:
    row = op_table.ELEMENTWISE[op]
    for dtype in row.dtypes:
        ptx = _ptx(Case(op, dtype, standard_cases(op, dtype, RAGGED)[0].shapes))
        local = re.findall(r"\b(?:ld|st)\.local", ptx)
        if op not in ("sin", "cos"):  # libdevice's slow-path range reduction uses a stack
            assert not local, f"{op} {dtype}: local memory"


@pytest.mark.parametrize("shape", [LARGE, RAGGED], ids=["whole", "ragged"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "f8e4m3", "f8e5m2", "i32", "i64",
                                   "bool"])
def test_whole_pieces_load_16_bytes_ahead(dtype: str, shape: tuple[int, ...]) -> None:
    """A whole piece: every thread issues its four 16-byte loads of each input before the
    first store, and every access is 16 bytes; in a kernel of whole pieces and in the
    static branch of one whose last piece is partial."""
    op = "maximum"
    case = Case(op, dtype, (shape, shape))
    assert prepared(case).signature.whole == (shape == LARGE)
    full = _full_piece(case)
    accesses = re.findall(r"\b(ld|st)\.global(\.nc)?\.(v4\.b32|v2\.b64)", full)
    loads = [a for a in accesses if a[0] == "ld"]
    stores = [a for a in accesses if a[0] == "st"]
    assert len(loads) == 8 and len(stores) == 4, accesses
    assert all(nc == ".nc" for _, nc, _ in loads)
    first_store = full.index("st.global")
    assert full.count("ld.global", 0, first_store) == 8


def test_bias_add_loads_the_bias_once_per_row() -> None:
    case = Case("add", "bf16", ((4096, 4096), (4096,)))  # 2^24: the default stages 4 rounds
    ready = prepared(case)
    assert ready.signature.mode == "blocks" and ready.signature.piece() == (2, 4096)
    assert ready.signature.whole  # 4096 rows: 2048 pieces of 2
    full = _full_piece(case)
    assert len(re.findall(r"ld\.global\.nc\.v4\.b32", full)) == 6  # 4 of x, 2 of the bias
    assert len(re.findall(r"add\.rn\.bf16x2", full)) == 16


def test_fp8_uses_the_packed_conversions() -> None:
    e4m3 = _ptx(Case("mul", "f8e4m3", (LARGE, LARGE)))
    assert "cvt.rn.f16x2.e4m3x2" in e4m3 and "cvt.rn.satfinite.e4m3x2.f32" in e4m3
    e5m2 = _ptx(Case("mul", "f8e5m2", (LARGE, LARGE)))
    assert "cvt.rn.f16x2.e5m2x2" in e5m2 and "cvt.rn.satfinite.e5m2x2.f32" in e5m2
    assert "setp.ge.f32" in e5m2  # e5m2 keeps Inf: what saturated moves up to it


@pytest.mark.parametrize("op", ["softplus", "mish", "elu", "selu", "silu", "sigmoid",
                                "silu_and_mul"])
def test_narrow_results_take_the_narrow_body(op: str) -> None:
    """A result narrower than f32 (whatever the inputs) takes the row's narrow_body, an f32
    one the body whose results are torch's."""
    row = op_table.ELEMENTWISE[op]
    assert row.narrow_body is not None
    for dst in ("f16", "bf16", "f8e4m3", "f8e5m2"):
        assert row.body_for([dst], dst) is row.narrow_body
        assert row.body_for(["f32"], dst) is row.narrow_body
    assert row.body_for(["f32"], "f32") is row.body
    assert row.body_for(["bf16"], "f32") is row.body


@pytest.mark.parametrize(("op", "instruction", "flushing"),
                         [("softplus", "lg2.approx.f32", "lg2.approx.ftz"),
                          ("mish", "div.approx.f32", "div.approx.ftz"),
                          ("silu", "ex2.approx.f32", "ex2.approx.ftz"),
                          ("sigmoid", "div.approx.f32", "div.approx.ftz")])
def test_narrow_bodies_reach_the_ptx(op: str, instruction: str, flushing: str) -> None:
    """The MUFU's instructions of a narrow body are in a 16-bit or fp8 kernel's PTX (not
    flushing subnormals: no .ftz), and not in the f32 one's."""
    for dtype in ("f16", "bf16", "f8e4m3"):
        ptx = _ptx(Case(op, dtype, standard_cases(op, dtype, LARGE)[0].shapes))
        assert instruction in ptx and flushing not in ptx, dtype
    assert instruction not in _ptx(Case(op, "f32", standard_cases(op, "f32", LARGE)[0].shapes))


def test_index_width_follows_the_size() -> None:
    small = prepared(Case("add", "f32", ((1000,), (1000,))))
    assert small.signature.index_bits == 32
    ptx = _ptx(Case("add", "f32", ((1000,), (1000,))))
    assert ".param .u32 kernel_param_0" in ptx
    big = prepared(Case("neg", "f8e5m2", (((1 << 31) + 5,),)))
    assert big.signature.index_bits == 64 and big.args[0] == (1 << 31) + 5
    assert big.grid == -(-((1 << 31) + 5) // big.signature.chunk())


def test_kernel_arguments_follow_the_signature() -> None:
    ready = prepared(Case("where", "f16", ((6, 7, 8), (6, 7, 8), None)),
                     np.random.default_rng(1))
    sig = ready.signature
    assert sig.rank == 1 and sig.mode == "flat"
    assert [type(a) for a in ready.args] == [int, int, int, int, float]


def test_the_bias_add_lit_test_shows_the_current_program() -> None:
    """lit-tests/ops-bias-add.mlir holds what programs/elementwise.py makes for a bias
    add whose last piece is partial (an odd number of rows)."""
    from pathlib import Path

    lit = Path(__file__).resolve().parents[2] / "lit-tests" / "ops-bias-add.mlir"
    program = lit.read_text().split("module attributes", 1)[1]
    case = Case("add", "bf16", ((4097, 4096), (4096,)))  # the default stages 4 rounds
    assert not prepared(case).signature.whole
    assert prepared(case).program.ir().endswith("module attributes" + program)
