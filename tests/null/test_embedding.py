"""The embedding API: each test is a small host compiler with its own Context and
PassManager, filled by tile_mlir.register / add_pipeline (docs/embedding.md)."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from mlir import ir
from mlir._mlir_libs import _mlir
from mlir.dialects import irdl
from mlir.passmanager import PassManager
from support.doc_blocks import ROOT, python_blocks, run_blocks

import tile_mlir
from tile_mlir.diagnostics import CompileError
from tile_mlir.dialects.tile import ElementwiseOp
from tile_mlir.embedding import Remark
from tile_mlir.pipeline import PipelineError

VECTOR_ADD = ROOT / "examples" / "vector_add.mlir"
PAGE = ROOT / "docs" / "embedding.md"


def test_the_page_runs() -> None:
    """docs/embedding.md's code (all but the gpu block) is a working host compiler."""
    namespace = run_blocks(PAGE)
    assert ".visible .entry vector_add(" in namespace["ptx"]["kernels"]
    assert len(python_blocks(PAGE, frozenset({"gpu"}))) == len(python_blocks(PAGE)) + 1


def _walk(root: ir.Operation, name: str) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == name:
            found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def _compile(module: ir.Module | ir.Operation, pipeline: str = "tile-to-ptx",
             **kwargs: Any) -> PassManager:
    """Fill a builtin.module PassManager in the module's context and run it."""
    with module.context:
        pm = PassManager("builtin.module")
        tile_mlir.add_pipeline(pm, pipeline, **kwargs)
        pm.run(module.operation)
    return pm


def test_host_parse_gives_the_same_ptx_as_compile() -> None:
    """A module the host parses itself (ir.Module.parse) compiles to the PTX that
    tile_mlir.compile makes from the same file."""
    context = ir.Context()
    tile_mlir.register(context)
    module = ir.Module.parse(VECTOR_ADD.read_text(), context)
    _compile(module, chip="sm_80")
    expected = tile_mlir.compile(VECTOR_ADD, chip="sm_80", cubin=False, cache=False).ptx
    assert tile_mlir.ptx(module) == expected
    assert ".target sm_80" in expected["kernels"]


def test_register_is_idempotent_and_changes_no_setting() -> None:
    context = ir.Context()
    before = (context.emit_error_diagnostics, context.allow_unregistered_dialects,
              context.get_num_threads())
    tile_mlir.register(context)
    tile_mlir.register(context)  # a second IRDL load would abort the process
    assert context.is_registered_operation("tile.elementwise")
    assert (context.emit_error_diagnostics, context.allow_unregistered_dialects,
            context.get_num_threads()) == before
    assert "tile_mlir.dialects" in _mlir.globals.dialect_search_modules


def test_importing_the_package_imports_no_mlir() -> None:
    code = ("import sys, tile_mlir; assert 'mlir' not in sys.modules; "
            "tile_mlir.register; assert 'mlir' in sys.modules")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=False, cwd=ROOT)
    assert result.returncode == 0, result.stderr


def test_parse_names_locations_after_the_file() -> None:
    with ir.Context():
        module = tile_mlir.parse(VECTOR_ADD.read_text(), name="va.mlir")  # the current context
    (op,) = _walk(module.operation, "tile.elementwise")
    assert op.location.filename == "va.mlir" and op.location.start_line > 1
    (func,) = _walk(module.operation, "gpu.func")
    argument = func.regions[0].blocks[0].arguments[0]
    assert str(argument.location).startswith('loc("va.mlir":')
    assert isinstance(op.opview, ElementwiseOp)


def test_parse_without_a_context_says_so() -> None:
    with pytest.raises(ValueError, match="no context"):
        tile_mlir.parse(VECTOR_ADD.read_text())


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda pm: tile_mlir.add_pipeline(pm, "tile-to-ptx", chip="sm90"), ValueError,
     "chip 'sm90' is not a GPU architecture"),
    (lambda pm: tile_mlir.add_pipeline(pm, "tile-to-ptx", fetures="+ptx80"), ValueError,
     r"unknown option fetures \(options: chip, features, opt_level\)"),
    (lambda pm: tile_mlir.add_pipeline(pm, "tile-lowr"), PipelineError,
     "unknown pass or pipeline 'tile-lowr'"),
    (lambda pm: tile_mlir.add_pipeline(pm, "tile-dispatch{explian=1}"), PipelineError,
     "tile-dispatch has no option 'explian'"),
    (lambda pm: tile_mlir.add_pipeline(pm, "gpu.module(tile-lower)"), PipelineError,
     "put it at the top level"),
    (lambda pm: tile_mlir.add_pipeline(pm, "tile-to-gpu", explain=True), ValueError,
     "explain=True needs remarks"),
    (lambda pm: tile_mlir.add_pipeline("tile-to-ptx"), TypeError,  # type: ignore[arg-type]
     "pm must be an mlir.passmanager.PassManager, not str"),
    (tile_mlir.register, TypeError, "context must be an mlir.ir.Context"),
])
def test_mistakes_raise_before_anything_runs(call: Callable[[PassManager], None],
                                             error: type[Exception], match: str) -> None:
    with ir.Context():
        pm = PassManager("builtin.module")
        with pytest.raises(error, match=match):
            call(pm)
        assert str(pm) == "builtin.module()"


def test_options_fill_the_named_pipelines_parameters() -> None:
    with ir.Context():
        pm = PassManager("builtin.module")
        tile_mlir.add_pipeline(pm, "tile-to-ptx", chip="sm_80", features="+ptx83", opt_level=2)
    text = str(pm)
    assert "chip=sm_80" in text and "features=+ptx83" in text and "O=2" in text


# ----------------------------------------------------------------- pass managers


def test_requirements_already_in_the_manager_are_not_added_again() -> None:
    with ir.Context():
        pm = PassManager("builtin.module")
        tile_mlir.add_pipeline(pm, "tile-dispatch")  # tile-verify comes first
        assert str(pm) == "builtin.module(tile-verify,tile-dispatch)"
        pm.add("cse")
        tile_mlir.add_pipeline(pm, "tile-lower")
        assert str(pm) == ("builtin.module(tile-verify,tile-dispatch,cse,tile-barriers,"
                           "tile-buffers,tile-lower)")


def test_host_passes_between_tile_passes_see_the_decisions() -> None:
    """tile-verify and tile-dispatch, then the host's canonicalize/cse and a Python pass
    that reads and annotates the tile ops, then the rest: the same PTX as in one go."""
    seen: list[tuple[str, str]] = []

    def annotate(op: ir.Operation, pass_: Any) -> None:
        for tile_op in _walk(op, "tile.elementwise"):
            seen.append((tile_op.name, ir.StringAttr(tile_op.attributes["variant"]).value))
            tile_op.attributes["host.checked"] = ir.UnitAttr.get()

    context = ir.Context()

    with context:
        module = tile_mlir.parse(VECTOR_ADD.read_text(), context)
        pm = PassManager("builtin.module")
        tile_mlir.add_pipeline(pm, "tile-verify,tile-dispatch")
        pm.add("canonicalize,cse")
        pm.add(annotate, name="annotate", argument="host-annotate")
        tile_mlir.add_pipeline(pm, "tile-lower,canonicalize,cse,gpu-to-nvvm,"
                                   "gpu-module-to-binary{format=isa}")
        pm.run(module.operation)
        reference = tile_mlir.parse(VECTOR_ADD.read_text(), context)
        _compile(reference)
    assert seen == [("tile.elementwise", "gmem")]
    assert tile_mlir.ptx(module) == tile_mlir.ptx(reference)


def test_a_parsed_manager_takes_the_pipeline_after_its_own_passes() -> None:
    context = ir.Context()
    with context:
        pm = PassManager.parse("builtin.module(gpu.module(canonicalize))")
        tile_mlir.add_pipeline(pm, "tile-to-gpu,gpu.module(cse)")
        assert str(pm).startswith("builtin.module(gpu.module(canonicalize")
        assert str(pm).endswith(",gpu.module(cse))")
        module = tile_mlir.parse(VECTOR_ADD.read_text(), context)
        pm.run(module.operation)
    assert not _walk(module.operation, "tile.elementwise")
    assert _walk(module.operation, "vector.load")


def test_tile_to_gpu_runs_on_a_gpu_module() -> None:
    """Tile passes run on whatever op pm.run gets (here a gpu.module)."""
    context = ir.Context()
    with context:
        module = tile_mlir.parse(VECTOR_ADD.read_text(), context)
        (gpu_module,) = _walk(module.operation, "gpu.module")
        pm = PassManager("gpu.module")
        tile_mlir.add_pipeline(pm, "tile-to-gpu")
        pm.run(gpu_module)
        assert not _walk(module.operation, "tile.elementwise")


def test_the_ptx_stage_is_refused_where_it_would_do_nothing() -> None:
    with ir.Context():
        pm = PassManager("gpu.module")
        with pytest.raises(ValueError, match=r"'nvvm-attach-target' works on the gpu\.modules "
                                             r"inside a builtin\.module"):
            tile_mlir.add_pipeline(pm, "tile-to-ptx")


def test_python_passes_cannot_be_nested_with_op_name() -> None:
    """What docs/embedding.md says of the bindings: op_name equal to the anchor fails at run
    time (another name aborts the process, so it is not tried here)."""
    context = ir.Context()
    with context:
        module = ir.Module.parse("module {}", context)
        pm = PassManager("builtin.module")
        pm.add(lambda op, pass_: None, name="P", argument="p", op_name="builtin.module")
        with pytest.raises(ir.MLIRError, match="unable to schedule pass 'P'"):
            pm.run(module.operation)


# ----------------------------------------------------------------- diagnostics


def _bad_module(context: ir.Context, name: str = "bad.mlir") -> ir.Module:
    return tile_mlir.parse(VECTOR_ADD.read_text().replace('scope = "cta"', 'scope = "grid"'),
                           context, name=name)


def test_errors_arrive_in_mlir_error_by_default() -> None:
    context = ir.Context()
    with context:
        module = _bad_module(context)
        (op,) = _walk(module.operation, "tile.elementwise")
        with pytest.raises(ir.MLIRError) as info:
            _compile(module)
        (diagnostic,) = info.value.error_diagnostics
        assert diagnostic.severity == ir.DiagnosticSeverity.ERROR
        assert "has scope 'grid'" in diagnostic.message
        assert str(diagnostic.location) == str(op.location)


def test_errors_and_remarks_reach_the_hosts_handler_at_the_op() -> None:
    seen: list[tuple[Any, str, str]] = []

    def handler(diagnostic: Any) -> bool:
        seen.append((diagnostic.severity, str(diagnostic.location), diagnostic.message))
        return True

    context = ir.Context()

    with context:
        context.emit_error_diagnostics = True
        context.attach_diagnostic_handler(handler)
        good = tile_mlir.parse(VECTOR_ADD.read_text(), context, name="good.mlir")
        (op,) = _walk(good.operation, "tile.elementwise")
        where = (op.location.start_line, op.location.start_col)
        _compile(good, "tile-dispatch{explain=1}", remarks=handler)
        with pytest.raises(ir.MLIRError):
            _compile(_bad_module(context))
    (remark, remark_at, _), (error, error_at, message) = seen
    assert remark == ir.DiagnosticSeverity.REMARK and error == ir.DiagnosticSeverity.ERROR
    assert remark_at == 'loc("good.mlir":{}:{})'.format(*where)
    assert error_at == 'loc("bad.mlir":{}:{})'.format(*where)
    assert message.startswith("'tile.elementwise' op has scope 'grid'")


def test_remarks_without_a_callback_are_dropped() -> None:
    context = ir.Context()
    with context:
        module = tile_mlir.parse(VECTOR_ADD.read_text(), context)
        _compile(module, "tile-dispatch{explain=1}")  # no sink: nothing to report to, no error
        remarks: list[Remark] = []
        _compile(tile_mlir.parse(VECTOR_ADD.read_text(), context), "tile-to-gpu",
                 explain=True, remarks=remarks.append)
    (remark,) = remarks
    assert remark.severity == ir.DiagnosticSeverity.REMARK and "variant gmem" in str(remark)


def test_parse_errors_are_located_compile_errors() -> None:
    text = VECTOR_ADD.read_text().replace("gpu.return", "gpu.retrun")
    with pytest.raises(CompileError) as info:
        tile_mlir.parse(text, ir.Context(), name="typo.mlir")
    assert str(info.value).startswith("typo.mlir:") and "gpu.retrun" in str(info.value)


# ----------------------------------------------------------------- threads


def _several_kernels(context: ir.Context, ops: tuple[str, ...] = ("add", "mul", "sub", "div")
                     ) -> ir.Module:
    """vector_add's gpu.module once per op, each its own symbol: work for MLIR's threads."""
    module = tile_mlir.parse(VECTOR_ADD.read_text(), context)
    (original,) = _walk(module.operation, "gpu.module")
    for op in ops[1:]:
        with context, ir.InsertionPoint(module.body):
            clone = original.clone()
        clone.attributes["sym_name"] = ir.StringAttr.get(f"kernels_{op}", context)
        (elementwise,) = _walk(clone, "tile.elementwise")
        elementwise.attributes["op"] = ir.StringAttr.get(op, context)
    return module


def _ptx_of_several(threads: bool) -> dict[str, str]:
    context = ir.Context()
    context.enable_multithreading(threads)
    module = _several_kernels(context)
    _compile(module)
    return tile_mlir.ptx(module)


def test_multithreaded_results_are_deterministic() -> None:
    single = _ptx_of_several(threads=False)
    assert len(single) == 4 and "mul.rn.f32" in single["kernels_mul"]
    for _ in range(3):
        assert _ptx_of_several(threads=True) == single


def test_callbacks_run_on_the_calling_thread() -> None:
    """Python passes, remarks and handlers (also for errors from the parallel
    gpu.module(...) passes) all run on the thread that called pm.run."""
    threads: set[int] = set()
    errors: list[str] = []

    def handler(diagnostic: Any) -> bool:
        threads.add(threading.get_ident())
        errors.append(str(diagnostic.location))
        return True

    def break_each_kernel(op: ir.Operation, pass_: Any) -> None:
        """A second terminator at the top of each kernel: the verifier after the next
        (parallel) pass fails in every gpu.module, on MLIR's worker threads."""
        threads.add(threading.get_ident())
        for number, func in enumerate(_walk(op, "gpu.func")):
            block = func.regions[0].blocks[0]
            with ir.InsertionPoint.at_block_begin(block), \
                    ir.Location.file("host.mlir", number + 1, 1, op.context):
                ir.Operation.create("gpu.return")

    context = ir.Context()
    context.enable_multithreading(True)
    context.emit_error_diagnostics = True
    context.attach_diagnostic_handler(handler)
    module = _several_kernels(context)
    with context:
        pm = PassManager("builtin.module")
        tile_mlir.add_pipeline(pm, "tile-to-gpu", explain=True,
                               remarks=lambda r: threads.add(threading.get_ident()))
        pm.add(break_each_kernel, name="break", argument="host-break")
        pm.add("gpu.module(canonicalize)")
        with pytest.raises(ir.MLIRError):
            pm.run(module.operation)
    assert threads == {threading.get_ident()}
    assert errors == [f'loc("host.mlir":{n}:1)' for n in range(1, 5)]


def test_two_threads_each_with_its_own_context() -> None:
    results: dict[str, list[str]] = {"sm_80": [], "sm_90": []}

    def host(chip: str) -> None:
        context = ir.Context()
        with context:
            for _ in range(3):
                module = tile_mlir.parse(VECTOR_ADD.read_text(), context)
                _compile(module, chip=chip)
                results[chip].append(tile_mlir.ptx(module)["kernels"])

    workers = [threading.Thread(target=host, args=(chip,)) for chip in results]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    for chip, ptx in results.items():
        expected = tile_mlir.compile(VECTOR_ADD, chip=chip, cubin=False, cache=False)
        assert ptx == [expected.ptx["kernels"]] * 3, chip


# ----------------------------------------------------------------- contexts, dialects


def test_two_contexts_interleaved() -> None:
    """Register in two contexts and compile in both, stage by stage, alternating."""
    contexts = {chip: ir.Context() for chip in ("sm_80", "sm_90")}
    modules = {chip: tile_mlir.parse(VECTOR_ADD.read_text(), c) for chip, c in contexts.items()}
    for stage in ("tile-to-gpu", "gpu-to-nvvm", "gpu-module-to-binary{format=isa}"):
        for chip, module in modules.items():
            _compile(module, stage, chip=chip) if stage == "gpu-to-nvvm" else \
                _compile(module, stage)
    for chip, module in modules.items():
        expected = tile_mlir.compile(VECTOR_ADD, chip=chip, cubin=False, cache=False)
        assert tile_mlir.ptx(module) == expected.ptx, chip


HOST_DIALECT = """
irdl.dialect @hostd {
  irdl.operation @note {
    %text = irdl.base "#builtin.string"
    irdl.attributes {"text" = %text}
  }
}
"""

HOST_FUNC = """
  func.func @launch() {
    "hostd.note"() {text = "launches vector_add"} : () -> ()
    return
  }
"""


def _host_dialect(context: ir.Context) -> None:
    with context, ir.Location.unknown(context):
        irdl.load_dialects(ir.Module.parse(HOST_DIALECT))


@pytest.mark.parametrize("host_first", [True, False])
def test_a_host_irdl_dialect_beside_the_tile_dialect(host_first: bool) -> None:
    context = ir.Context()
    if host_first:
        _host_dialect(context)
    tile_mlir.register(context)
    if not host_first:
        _host_dialect(context)
    text = VECTOR_ADD.read_text()
    text = text[:text.rindex("}")] + HOST_FUNC + "}\n"  # a host function beside the kernels
    module = tile_mlir.parse(text, context)
    _compile(module)
    (note,) = _walk(module.operation, "hostd.note")
    assert ir.StringAttr(note.attributes["text"]).value == "launches vector_add"
    assert type(note.opview) is ir.OpView  # wrapped generically, not as a tile class
    assert ".entry vector_add(" in tile_mlir.ptx(module)["kernels"]


def test_ptx_refuses_a_cubin() -> None:
    text = ('module attributes {gpu.container_module} {\n  gpu.binary @kernels '
            '[#gpu.object<#nvvm.target<chip = "sm_90">, bin = "\\7FELF\\02">]\n}')
    with pytest.raises(ValueError, match=r"gpu\.binary @kernels holds a cubin"):
        tile_mlir.ptx(ir.Module.parse(text, ir.Context()))


@pytest.fixture(autouse=True)
def _no_context_left_current() -> Iterator[None]:
    """A test that leaves a context current would let the next one parse without one."""
    yield
    assert ir.Context.current is None
