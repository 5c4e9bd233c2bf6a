"""The embedding API: tile-mlir inside a host compiler's own Context and PassManager.

    with ir.Context() as context:
        tile_mlir.register(context)                       # the tile dialect (idempotent)
        module = tile_mlir.parse(text, context, name="k.mlir")
        pm = PassManager("builtin.module")
        tile_mlir.add_pipeline(pm, "tile-to-ptx", chip="sm_90")
        pm.run(module.operation)
        ptx = tile_mlir.ptx(module)                       # gpu.module symbol -> PTX

docs/embedding.md says what a host may rely on: threads, several contexts, passes of
its own between the tile passes, diagnostics, and what the package changes
process-wide. The names here are re-exported by the package (tile_mlir.register, ...).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache

from mlir import ir
from mlir.passmanager import PassManager

from tile_mlir import passes, pipeline
from tile_mlir.context import PARSED_NAME
from tile_mlir.context import parse as _parse
from tile_mlir.diagnostics import Diagnostic, DiagnosticSink
from tile_mlir.dialects import tile
from tile_mlir.runtime.spec import KernelSpec

_CHIP = re.compile(r"^sm_\d{2,3}[af]?$")


def register(context: ir.Context) -> None:
    """Make `context` ready for tile IR and the tile passes: load the tile dialect.

    Idempotent (a second call does nothing) and per context. The upstream dialects and
    translations the passes use come with every `mlir.ir.Context()` of the bindings."""
    if not isinstance(context, ir.Context):
        raise TypeError(f"register: context must be an mlir.ir.Context, not "
                        f"{type(context).__name__}")
    tile.load(context)


def parse(text: str, context: ir.Context | None = None, name: str = "<input>") -> ir.Module:
    """Parse tile IR into `context` (default: the current one), registering the dialect
    first; tile.elementwise may omit operandSegmentSizes (tile_mlir.segments). The ops'
    locations name `name` (ir.Module.parse would call the text "-"), so diagnostics that
    reach the host's handler later point into its file.

    Raises tile_mlir.diagnostics.CompileError whose diagnostics are located in `name`."""
    context = context if context is not None else ir.Context.current
    if context is None:
        raise ValueError("parse: no context: pass context= or parse inside `with ir.Context():`")
    register(context)
    module = _parse(text, name, context)
    if name != PARSED_NAME:
        _name_locations(module.operation, name)
    return module


def _name_locations(root: ir.Operation, name: str) -> None:
    """Give `name` to the file locations the parser made for ops and block arguments."""

    def renamed(loc: ir.Location) -> ir.Location | None:
        if loc.is_a_file() and loc.filename == PARSED_NAME:
            return ir.Location.file(name, loc.start_line, loc.start_col, loc.context)
        return None

    def visit(op: ir.Operation) -> ir.WalkResult:
        new = renamed(op.location)
        if new is not None:
            op.location = new
        for region in op.regions:
            for block in region.blocks:
                for argument in block.arguments:
                    new = renamed(argument.location)
                    if new is not None:
                        argument.set_location(new)
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)


@dataclass(frozen=True)
class Remark:
    """A tile pass's remark (tile-dispatch's decisions), shaped like the
    `mlir.ir.Diagnostic` a context's diagnostic handler receives, so that the same
    handler can take both."""

    location: ir.Location
    message: str
    severity: ir.DiagnosticSeverity = ir.DiagnosticSeverity.REMARK
    notes: tuple[Remark, ...] = ()

    def __str__(self) -> str:
        return self.message


@dataclass
class _RemarkSink(DiagnosticSink):
    """Hands each remark of the tile passes to the host's callback as it is made."""

    callback: Callable[[Remark], object] | None = field(default=None, repr=False)

    def report(self, severity: str, message: str, location: ir.Location | None = None,
               notes: Iterable[Diagnostic] = ()) -> None:
        if self.callback is not None:
            self.callback(Remark(location or ir.Location.unknown(), message))


def add_pipeline(pm: PassManager, pipeline_text: str = pipeline.DEFAULT_PIPELINE, *,
                 chip: str | None = None, explain: bool = False,
                 remarks: Callable[[Remark], object] | None = None,
                 **options: str | int) -> None:
    """Append a pipeline to the host's PassManager: tile passes as Python passes, the rest
    as upstream passes, in order.

    `pipeline_text` is a named pipeline ("tile-to-gpu", "tile-to-ptx", "gpu-to-nvvm"), a
    tile pass, or any textual pipeline mixing them with upstream passes. `chip` and the
    other named-pipeline parameters (features="+ptx81", opt_level=3) fill `$chip`, ...
    A tile pass's requirements that neither the text nor the PassManager (from an earlier
    call) already has are added in front of it. explain=True has tile-dispatch report
    each decision to `remarks`.

    Raises PipelineError (a ValueError) for an unknown pass or option, ValueError for a
    bad chip or option, TypeError when `pm` is not a PassManager."""
    if not isinstance(pm, PassManager):
        raise TypeError(f"add_pipeline: pm must be an mlir.passmanager.PassManager, not "
                        f"{type(pm).__name__}")
    if explain and remarks is None:
        raise ValueError("add_pipeline: explain=True needs remarks=<callable> to report to")
    expander = pipeline.Expander(
        params=_parameters(chip, options),
        pass_options={"tile-dispatch": {"explain": True}} if explain else {},
    )
    steps = expander.expand(pipeline_text, done=_tile_passes_in(pm))
    _check_anchor(pm, steps)
    _fill(pm, steps, _RemarkSink(callback=remarks) if remarks is not None else None)


def _parameters(chip: str | None, options: Mapping[str, str | int]) -> dict[str, str]:
    """The named pipelines' parameters from add_pipeline's keywords, checked."""
    values = {key.replace("_", "-"): str(value) for key, value in options.items()}
    unknown = sorted(set(values) - _known_parameters())
    if unknown:
        known = ", ".join(sorted(k.replace("-", "_") for k in _known_parameters()))
        raise ValueError(f"add_pipeline: unknown option {', '.join(unknown)} (options: {known})")
    if chip is not None:
        if "chip" in values:
            raise ValueError("add_pipeline: give chip once")
        if not isinstance(chip, str) or not _CHIP.match(chip):
            raise ValueError(f"add_pipeline: chip {chip!r} is not a GPU architecture such as "
                             "'sm_90' or 'sm_90a'")
        values["chip"] = chip
    return values


@cache
def _known_parameters() -> frozenset[str]:
    return frozenset(p for named in pipeline.named_pipelines().values() for p in named.params)


def _top_level(pm: PassManager) -> tuple[str, list[str]]:
    """The PassManager's anchor and the names of its top-level passes, read off its
    textual form (`anchor(pass,pass{...},gpu.module(...))`): the bindings show no more."""
    text = str(pm)
    anchor, paren, rest = text.partition("(")
    elements = pipeline.split_top_level(rest[:rest.rindex(")")]) if paren else []
    return anchor.strip(), [re.split(r"[{(\s]", e, maxsplit=1)[0] for e in elements]


def _tile_passes_in(pm: PassManager) -> set[str]:
    """The tile passes at the top level of the PassManager (added by an earlier call)."""
    return set(_top_level(pm)[1]) & set(passes.PASSES)


_ON_GPU_MODULES = ("nvvm-attach-target", "gpu-module-to-binary", "gpu.module")


def _check_anchor(pm: PassManager, steps: list[pipeline.Step]) -> None:
    """Passes that work on the gpu.modules inside the root do nothing, silently, when the
    root is a gpu.module: refuse a PassManager anchored on one (or on anything else
    that cannot hold gpu.modules)."""
    anchor = _top_level(pm)[0]
    if anchor in ("builtin.module", "any"):
        return
    for step in steps:
        name = re.split(r"[{(\s]", step.upstream or "", maxsplit=1)[0]
        if name in _ON_GPU_MODULES:
            raise ValueError(f"add_pipeline: '{name}' works on the gpu.modules inside a "
                             f"builtin.module, so it would do nothing in this PassManager "
                             f"anchored on {anchor}: anchor it on builtin.module")


def _fill(pm: PassManager, steps: list[pipeline.Step], sink: DiagnosticSink | None) -> None:
    pending: list[str] = []
    for step in steps:
        if step.upstream is not None:
            pending.append(step.upstream)
            continue
        if pending:
            pm.add(",".join(pending))
            pending.clear()
        assert step.tile is not None
        dataclasses.replace(step.tile, sink=sink).add_to(pm)
    if pending:
        pm.add(",".join(pending))


def kernel_specs(module: ir.Module) -> dict[str, KernelSpec]:
    """Each kernel's launch signature (tile_mlir.runtime.KernelSpec), by name: read it from
    the tile IR, before the pipeline turns the gpu.modules into gpu.binary ops."""
    from tile_mlir.compiler import kernel_specs as specs

    return specs(module)


def ptx(module: ir.Module) -> dict[str, str]:
    """The PTX of each gpu.binary in the module (after tile-to-ptx), by symbol.

    Raises ValueError for a binary that holds no PTX (gpu-module-to-binary{format=bin})."""
    result = {}
    for name, data in _objects(module).items():
        if data.startswith(b"\x7fELF"):
            raise ValueError(f"gpu.binary @{name} holds a cubin, not PTX (format=bin); "
                             "tile-to-ptx makes PTX")
        result[name] = data.decode()
    return result


def _objects(module: ir.Module) -> dict[str, bytes]:
    from mlir.dialects import gpu

    found: dict[str, bytes] = {}

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "gpu.binary":
            objects = ir.ArrayAttr(op.attributes["objects"])
            name = ir.StringAttr(op.attributes["sym_name"]).value
            found[name] = bytes(gpu.ObjectAttr(objects[0]).object)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found

