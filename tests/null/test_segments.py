"""tile.elementwise without operandSegmentSizes: filled in before parsing, lines and
columns of the source kept, unusual text reported at the op."""

from __future__ import annotations

import pytest
from mlir import ir

from tile_mlir import segments
from tile_mlir.context import new_context, parse
from tile_mlir.diagnostics import CompileError

HEAD = ('gpu.module @m {\n  gpu.func @k(%a: memref<64xf32>, %s: f32) kernel attributes '
        '{known_block_size = array<i32: 64, 1, 1>} {\n')
TAIL = "    gpu.return\n  }\n}\n"


def _op(inputs: list[str], attrs: str = 'op = "add", scope = "cta"') -> str:
    operands = ", ".join(["%a", *inputs])
    types = ", ".join("f32" if v == "%s" else "memref<64xf32>" for v in ["%a", *inputs])
    return f'    "tile.elementwise"({operands}) {{{attrs}}} : ({types}) -> ()\n'


@pytest.mark.parametrize(("inputs", "sizes"), [
    (0, (1, 0, 0, 0)), (1, (1, 1, 0, 0)), (2, (1, 1, 1, 0)), (3, (1, 1, 1, 1)),
    (5, (1, 1, 1, 3)),
])
def test_sizes_fill_the_slots_in_order(inputs: int, sizes: tuple[int, ...]) -> None:
    assert segments.segment_sizes(1 + inputs) == sizes


def _elementwise_ops(module: ir.Module) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "tile.elementwise":
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


@pytest.mark.parametrize("inputs", [1, 2, 3, 4, 6])
def test_parsed_op_has_the_sizes_and_its_source_location(inputs: int) -> None:
    text = HEAD + _op(["%a", *["%s"] * (inputs - 1)]) + TAIL
    module = parse(text, "in.mlir", new_context())
    (op,) = _elementwise_ops(module)
    sizes = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    assert sizes == list(segments.segment_sizes(1 + inputs))
    assert (op.location.start_line, op.location.start_col) == (3, 5)


def test_text_without_the_op_is_returned_as_is() -> None:
    text = HEAD + TAIL
    assert segments.fill(text).text is text


def test_written_sizes_are_kept_even_when_wrong() -> None:
    text = HEAD + _op(["%a"], 'op = "sqrt", operandSegmentSizes = array<i32: 1, 0, 1, 0>, '
                              'scope = "cta"') + TAIL
    assert segments.fill(text).text == text


def test_comments_strings_and_name_locations_are_not_ops() -> None:
    text = ('// "tile.elementwise"(%a) {}\n'
            '"test.op"() {note = "\\"tile.elementwise\\"(%a)"} : () -> () '
            'loc("tile.elementwise"("f.mlir":1:1))\n')
    assert segments.fill(text).text == text


def test_multi_line_op_keeps_every_line() -> None:
    text = (HEAD + '    "tile.elementwise"(%a, // dst\n        %a, %a) {op = "add",\n'
            '        scope = "cta"}\n        : (memref<64xf32>, memref<64xf32>, '
            'memref<64xf32>) -> ()\n' + TAIL)
    filled = segments.fill(text)
    assert filled.text.count("\n") == text.count("\n")
    assert 'scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>}' in filled.text
    parse(text, "in.mlir", new_context())


def test_result_numbers_count_as_one_operand_each() -> None:
    text = '"tile.elementwise"(%r#0, %r#1, %x) {op = "add"} : (i32, i32, i32) -> ()\n'
    assert "array<i32: 1, 1, 1, 0>" in segments.fill(text).text


def test_columns_map_back_through_two_insertions_on_one_line() -> None:
    one = '"tile.elementwise"(%a, %a) {op = "sqrt"} : (t, t) -> ()'
    filled = segments.fill(f"{one}; {one} x\n")
    first, second = filled.insertions
    assert first.line == second.line == 1
    source_x = len(f"{one}; {one} x")  # 1-based column of x in the source
    filled_x = filled.text.index(" x\n") + 2
    assert filled.column(1, filled_x) == source_x
    assert filled.column(1, 5) == 5  # before any insertion
    assert filled.column(1, first.col + 3) == first.col  # inside the inserted text
    assert filled.column(2, filled_x) == filled_x  # another line


@pytest.mark.parametrize(("op", "reason"), [
    ('"tile.elementwise"(%a, %a) <{op = "sqrt"}> : (t, t) -> ()', "properties"),
    ('"tile.elementwise"(%a, %a) : (t, t) -> ()', "no attribute dictionary"),
    ('"tile.elementwise"(%a, %a) ({}) {op = "sqrt"} : (t, t) -> ()', "regions"),
    ('"tile.elementwise"(%a, %a)[^bb1] {op = "sqrt"} : (t, t) -> ()', "successors"),
    ('"tile.elementwise"() {op = "sqrt"} : () -> ()', "no operands"),
    ('"tile.elementwise"(%a, 3) {op = "sqrt"} : (t, t) -> ()', "'3' is not an SSA value"),
    ('"tile.elementwise"(%a, , %a) {op = "sqrt"} : (t, t) -> ()', "missing between commas"),
    ('"tile.elementwise"(%a, %a) {op = "sqrt" : (t, t) -> ()', "not closed"),
])
def test_unusual_text_is_reported_at_the_op(op: str, reason: str) -> None:
    with pytest.raises(segments.SegmentError) as info:
        segments.fill(f"// first line\n  {op}\n")
    (problem,) = info.value.problems
    assert (problem.line, problem.col) == (2, 3)
    assert reason in problem.message and "write operandSegmentSizes" in problem.message


def test_parse_reports_every_unusual_op_located() -> None:
    text = HEAD + '    "tile.elementwise"(%a, %a) : (memref<64xf32>, memref<64xf32>) -> ()\n' * 2
    with pytest.raises(CompileError) as info:
        parse(text + TAIL, "user.mlir", new_context())
    assert [str(d.loc) for d in info.value.diagnostics] == ["user.mlir:3:5", "user.mlir:4:5"]
    assert "Traceback" not in str(info.value)
