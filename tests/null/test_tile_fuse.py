"""null tier: tile-fuse keeps every chain's meaning, bit for bit, on the host emulator.

Random chains of the unary, binary and activation rows over f32, f16 and bf16 (fp8
temporaries too), with scalars, row and column broadcasts and reused operands
(support/fuse_programs.py), in registers (elementwise/reg) and per thread in global
memory (elementwise/gmem), are lowered twice by the compiler's passes, with tile-fuse
and without, and run on the host (support/host.py) on the same random inputs with
special values mixed in. The outputs must be the same bits (any NaN for any NaN): the fused op rounds each
intermediate where the unfused program stores it, computes each step in its unfused
op's type, and the host runs the same libm calls in both. The fused program must be one
elementwise op wherever its inputs fit the dialect's slots. Also: the expression
builder (op_table/fusion.py) and directed programs (an indexed row, a chain the pass
must leave alone).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support.fuse_programs import (
    FUSED,
    GPU_CASES,
    UNFUSED,
    Chain,
    GpuCase,
    Operand,
    check_fused,
    elementwise_ops,
    lower,
    program_text,
    random_chain,
    random_inputs,
    reference,
    run_on_host,
)

import tile_mlir
from tile_mlir.dtypes import DTYPES
from tile_mlir.op_table import fusion
from tile_mlir.op_table.refs import alibi as ref_alibi

CHAINS = 24
"""Random chains per setting and run (fresh ones every run; the seed is printed)."""


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[x.dtype.itemsize])


def check_chain(chain: Chain, rng: np.random.Generator) -> None:
    """The chain's fused and unfused programs compute the same bits on the host."""
    text = program_text(chain)
    ops = check_fused(chain, text)
    inputs = random_inputs(chain, rng)
    fused = run_on_host(lower(text, FUSED), chain, inputs)
    unfused = run_on_host(lower(text, UNFUSED), chain, inputs)
    differ = different(fused, unfused)
    print(f"{chain.describe()}: {ops} op(s), {fused.size} elements")
    assert not differ.any(), (
        f"{chain.describe()}: {int(differ.sum())} elements differ, first at "
        f"{np.argwhere(differ)[0]}: fused {fused[differ][0]}, unfused {unfused[differ][0]}")


def different(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Where two results differ: in their bits, except that any NaN equals any NaN (a
    NaN's sign and payload are not the arithmetic's: LLVM and the hardware may make
    either, and may choose differently where the code around differs)."""
    nan = np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64))
    differ: np.ndarray = (_bits(a) != _bits(b)) & ~nan
    return differ


@pytest.mark.parametrize("setting", ["registers", "threads"])
@pytest.mark.parametrize("n", range(CHAINS))
def test_random_chain(setting: str, n: int, rng: np.random.Generator) -> None:
    check_chain(random_chain(rng, setting), rng)


def _link(row: str, args: tuple[str | fusion.Result, ...], dtype: str) -> fusion.Link[str]:
    return fusion.Link(row, args, dtype)


R = fusion.Result


def test_bf16_rounding_between_steps(rng: np.random.Generator) -> None:
    """The brief's example: add, gelu, mul in bf16 registers; and the same chain through
    f32 temporaries, which must differ from it somewhere (the rounding is kept, not
    dropped, and not added where there is none)."""
    operands = (Operand("x", "bf16", "tile"), Operand("y", "bf16", "tile"),
                Operand("z", "bf16", "tile"))
    bf16 = Chain("registers", operands, (_link("add", ("x", "y"), "bf16"),
                                         _link("gelu", (R(0),), "bf16"),
                                         _link("mul", (R(1), "z"), "bf16")))
    f32 = Chain("registers", operands, (_link("add", ("x", "y"), "f32"),
                                        _link("gelu", (R(0),), "f32"),
                                        _link("mul", (R(1), "z"), "f32"), _link("cast", (R(2),), "bf16")))
    inputs = random_inputs(bf16, rng, special=False)
    check_chain(bf16, rng)
    check_chain(f32, rng)
    narrow = run_on_host(lower(program_text(bf16), FUSED), bf16, inputs)
    wide = run_on_host(lower(program_text(f32), FUSED), f32, inputs)
    assert different(narrow, wide).any()


def test_mixed_operands_round_to_the_common_type(rng: np.random.Generator) -> None:
    """(i32 tile + bf16 tile) * f32 scalar into bf16, fused and not: the integers are
    rounded to bf16 (through f32) before the add, as torch casts tensor operands to the
    common dtype; the f32 scalar of the last step is not rounded. Odd integers past 2^10,
    which bf16 rounds: the test can tell. (Per thread in global memory: register tiles
    take floats only.)"""
    operands = (Operand("x", "i32", "tile"), Operand("y", "bf16", "tile"),
                Operand("s", "f32", "scalar"))
    chain = Chain("threads", operands, (_link("add", ("x", "y"), "bf16"),
                                        _link("mul", (R(0), "s"), "bf16")))
    assert elementwise_ops(program_text(chain)) == 1
    bf16 = DTYPES["bf16"].np_dtype()
    x = (rng.integers(500, 2000, chain.shape) * 2 + 1).astype(np.int32)
    y = rng.uniform(-3, 3, chain.shape).astype(bf16)
    inputs: dict[str, Any] = {"x": x, "y": y, "s": 1.3}
    fused = run_on_host(lower(program_text(chain), FUSED), chain, inputs)
    unfused = run_on_host(lower(program_text(chain), UNFUSED), chain, inputs)
    assert not different(fused, unfused).any()

    def expected(first: np.ndarray) -> np.ndarray:
        total = (first.astype(np.float32) + y.astype(np.float32)).astype(bf16)
        return np.asarray((total.astype(np.float32) * np.float32(1.3)).astype(bf16))

    rounded = expected(x.astype(np.float32).astype(bf16))
    assert not different(fused, rounded).any()
    assert different(rounded, expected(x)).any()  # the rounding shows


INDEXED = """gpu.module @kernels {
  gpu.func @k(%x: memref<32x36xf32>, %out: memref<32x36xf32> {llvm.noalias}) kernel attributes {known_block_size = array<i32: 32, 1, 1>, known_grid_size = array<i32: 1, 1, 1>} {
    %tid = gpu.thread_id x
    %x_t = memref.subview %x[%tid, 0] [1, 36] [1, 1] : memref<32x36xf32> to memref<36xf32, strided<[1], offset: ?>>
    %out_t = memref.subview %out[%tid, 0] [1, 36] [1, 1] : memref<32x36xf32> to memref<36xf32, strided<[1], offset: ?>>
    %len = arith.constant 9 : i64
    %pow2 = arith.constant 4 : i64
    %magic = arith.constant -2049638230412172401 : i64
    %w = arith.constant 36 : i64
    %tid64 = arith.index_cast %tid : index to i64
    %base = arith.muli %tid64, %w : i64
    %e = memref.alloca() : memref<36xf32>
    "tile.elementwise"(%e, %x_t) {op = "exp", scope = "thread", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<36xf32>, memref<36xf32, strided<[1], offset: ?>>) -> ()
    %bias = memref.alloca() : memref<36xf32>
    "tile.elementwise"(%bias, %len, %pow2, %magic, %base) {op = "alibi_bias", scope = "thread", operandSegmentSizes = array<i32: 1, 1, 1, 2>} : (memref<36xf32>, i64, i64, i64, i64) -> ()
    %sum = memref.alloca() : memref<36xf32>
    "tile.elementwise"(%sum, %e, %bias) {op = "add", scope = "thread", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<36xf32>, memref<36xf32>, memref<36xf32>) -> ()
    "tile.elementwise"(%out_t, %sum, %x_t) {op = "mul", scope = "thread", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<36xf32, strided<[1], offset: ?>>, memref<36xf32>, memref<36xf32, strided<[1], offset: ?>>) -> ()
    gpu.return
  }
}
"""


def test_indexed_row_fuses(rng: np.random.Generator) -> None:
    """An indexed row (alibi_bias: its last input the index base) in a fused chain sees
    each element's position (base + its index) as unfused: (exp(x) + alibi) * x, the
    thread's row of a (32, 36) array at base 36 * thread, is one op."""
    assert elementwise_ops(INDEXED) == 1
    fused_ir = lower(INDEXED, "tile-verify,tile-fuse")
    assert "alibi_bias(%" in fused_ir and "exp(%" in fused_ir
    chain = Chain("threads", (Operand("x", "f32", "tile"),),
                  (_link("exp", ("x",), "f32"), _link("mul", (R(0), "x"), "f32")), width=36)
    inputs = random_inputs(chain, rng, special=False)
    fused = run_on_host(lower(INDEXED, FUSED), chain, inputs)
    unfused = run_on_host(lower(INDEXED, UNFUSED), chain, inputs)
    assert not different(fused, unfused).any()
    x = inputs["x"].astype(np.float64)
    positions = np.arange(x.size).reshape(x.shape)
    expected = (np.exp(x) + ref_alibi(9, 4, -2049638230412172401, positions)) * x
    np.testing.assert_allclose(fused, expected, rtol=1e-5, atol=1e-6)


def test_kernel_argument_intermediate_is_kept() -> None:
    """An intermediate that is a kernel argument stays: the program is unchanged."""
    text = """gpu.module @m {
  gpu.func @k(%a: memref<64xf32>, %b: memref<64xf32>, %o: memref<64xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    "tile.elementwise"(%b, %a) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    "tile.elementwise"(%o, %b) {op = "neg", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    gpu.return
  }
}"""
    assert elementwise_ops(text) == 2


# ------------------------------------------------------------------ the builder


def test_build_numbers_inputs_by_first_use_and_shares_them() -> None:
    fused = fusion.build([_link("add", ("x", "y"), "bf16"), _link("gelu", (R(0),), "bf16"),
                          _link("mul", (R(1), "x"), "f32")])
    assert fused.inputs == ("x", "y")
    assert fused.expr.texts() == ["add(%0, %1) : bf16", "gelu($0) : bf16", "mul($1, %0) : f32"]
    assert fused.expr.attribute() == '["add(%0, %1) : bf16", "gelu($0) : bf16", "mul($1, %0) : f32"]'
    assert fused.segments == (1, 1, 1, 0)
    assert fusion.Expr.parse(fused.expr.texts()) == fused.expr
    assert fused.expr.chain(["x", "y"]) == [_link("add", ("x", "y"), "bf16"),
                                            _link("gelu", (R(0),), "bf16"),
                                            _link("mul", (R(1), "x"), "f32")]


def test_build_shares_an_input_read_twice_by_one_link() -> None:
    fused = fusion.build([_link("mul", ("x", "x"), "f32"), _link("lerp", (R(0), "y", "y"), "f32")])
    assert fused.inputs == ("x", "y")
    assert fused.expr.texts() == ["mul(%0, %0) : f32", "lerp($0, %1, %1) : f32"]
    assert not fused.expr.problems(len(fused.inputs))


def test_build_orders_inputs_to_fit_the_slots() -> None:
    types = {"a": "memref<f32>", "b": "memref<f32>", "s": "f32", "c": "memref<f32>",
             "h": "memref<f16>"}
    links = [_link("add", ("a", "b"), "f32"), _link("lerp", (R(0), "s", "c"), "f32")]
    fused = fusion.build(links, types.__getitem__)
    assert fused.inputs == ("s", "a", "b", "c")  # the scalar first: the rest share a type
    assert fused.expr.texts() == ["add(%1, %2) : f32", "lerp($0, %0, %3) : f32"]
    ok = [_link("add", ("a", "b"), "f32"), _link("add", (R(0), "c"), "f32")]
    assert fusion.build(ok, types.__getitem__).inputs == ("a", "b", "c")  # already fits
    too_many = [_link("lerp", ("a", "s", "h"), "f32"), _link("add", (R(0), "x"), "f32")]
    types["x"] = "memref<bf16>"
    with pytest.raises(fusion.FusionError, match="must share one type"):
        fusion.build(too_many, types.__getitem__)


def test_build_rejects_malformed_chains() -> None:
    with pytest.raises(fusion.FusionError, match="never used"):
        fusion.build([_link("exp", ("x",), "f32"), _link("neg", ("x",), "f32")])
    with pytest.raises(fusion.FusionError, match="not a registry row"):
        fusion.build([_link("expo", ("x",), "f32")])
    with pytest.raises(fusion.FusionError, match="not an earlier link"):
        fusion.build([_link("add", ("x", R(0)), "f32")])
    with pytest.raises(fusion.FusionError, match="empty"):
        fusion.build([])


@pytest.mark.parametrize("text", ["exp(%0)", "exp(%0) : ", "exp(x) : f32", "(%0) : f32",
                                  "exp(%0, , %1) f32"])
def test_parse_rejects(text: str) -> None:
    with pytest.raises(fusion.FusionError):
        fusion.Expr.parse([text])


def test_parse_and_check() -> None:
    expr = fusion.Expr.parse(["zero() : f32", "add($0, %0) : f32"])
    assert expr.problems(1) == []
    assert expr.arg_dtypes(1, ["bf16"]) == ["f32", "bf16"]
    assert any("never used" in p for p in fusion.Expr.parse(
        ["exp(%0) : f32", "neg(%0) : f32"]).problems(1))
    assert fusion.Expr.parse(["max(%0, %1) : f32"]).problems(2) == []  # aliases are rows
    assert DTYPES[expr.dtype].name == "f32"


# ------------------------------------------------------------------ the gpu tier's chains


@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: c.name)
def test_gpu_case_on_host(case: GpuCase, rng: np.random.Generator) -> None:
    """The gpu tier's chains: one op when fused, the same bits as unfused on the host,
    within the gpu tier's bound of the float64 reference (host libm here), and both
    programs compile to cubins (ptxas accepts them)."""
    check_chain(case.chain, rng)
    inputs = random_inputs(case.chain, rng, special=False)
    text = program_text(case.chain)
    got = run_on_host(lower(text, FUSED), case.chain, inputs).astype(np.float64)
    expected = reference(case.chain, inputs)
    assert (np.abs(got - expected) <= case.rtol * np.abs(expected) + case.atol).all()
    for source in (text, lower(text, UNFUSED)):
        program = tile_mlir.compile(source, name=case.name)
        assert program.cubin["kernels"][:4] == b"\x7fELF"
