"""Pass pipelines: tile passes and upstream passes in one textual pipeline.

A pipeline is MLIR's textual form (`a,b{opt=1},gpu.module(c)`), whose
elements may also be tile passes (`tile-lower`) or the named pipelines kept as
data in pipelines/<name>.pipeline (`tile-to-ptx{chip=sm_80}`), expanded in place.
The result is one upstream PassManager with the tile passes added as Python
passes, so IR printing, timing and failure handling work across both.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from mlir import ir
from mlir.passmanager import PassManager

from tile_mlir import passes
from tile_mlir._resources import pipelines_dir
from tile_mlir.diagnostics import DiagnosticSink, from_mlir_error

DEFAULT_PIPELINE = "tile-to-ptx"


class PipelineError(ValueError):
    """A pipeline text that names an unknown pass or option, or is malformed."""


@dataclass(frozen=True)
class NamedPipeline:
    name: str
    summary: str
    params: dict[str, str]  # parameter -> default
    elements: tuple[str, ...]  # pipeline elements, `$param` not yet substituted
    path: Path
    stages: tuple[str, ...] = ()  # per element: the stage it ends (`# stage <name>`), or ""

    def substitute(self, element: str, values: Mapping[str, str]) -> str:
        """One element with its `$parameters` replaced by `values` (defaults elsewhere)."""
        merged = {**self.params, **values}

        def sub(m: re.Match[str]) -> str:
            return merged.get(m.group(1) or m.group(2), m.group(0))

        return _PARAM.sub(sub, element)

    def expand_text(self, values: Mapping[str, str]) -> str:
        """The elements with parameters substituted, joined as one pipeline."""
        return ",".join(self.substitute(e, values) for e in self.elements)

    def staged(self) -> list[tuple[str, str]]:
        """(element, stage name) for each element that ends a stage, in order."""
        return [(e, s) for e, s in zip(self.elements, self.stages, strict=True) if s]


_PARAM = re.compile(r"\$\{([\w-]+)\}|\$([\w-]+)")


def _read_pipeline(path: Path) -> NamedPipeline:
    summary, params, elements, stages = "", {}, [], []
    for raw in path.read_text().splitlines():
        line, _, comment = raw.partition("#")
        comment = comment.strip()
        if not line.strip() and comment.startswith("parameters:"):
            for item in comment.removeprefix("parameters:").split():
                key, _, default = item.partition("=")
                params[key] = default
        elif not line.strip() and comment and not summary:
            summary = comment.split(":", 1)[-1].strip()
        if line.strip():
            elements.append(line.strip())
            stages.append(comment.removeprefix("stage ").strip()
                          if comment.startswith("stage ") else "")
    return NamedPipeline(path.stem, summary, params, tuple(elements), path, tuple(stages))


@cache
def named_pipelines() -> dict[str, NamedPipeline]:
    """The pipelines in pipelines/, by name."""
    return {p.stem: _read_pipeline(p) for p in sorted(pipelines_dir().glob("*.pipeline"))}


# ------------------------------------------------------------------ parsing

_OPEN, _CLOSE = "({[", ")}]"


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split at `sep` outside brackets and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
            if depth < 0:
                raise PipelineError(f"unbalanced '{ch}' in pipeline: {text}")
        elif ch == sep and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if depth or quote:
        raise PipelineError(f"unbalanced brackets or quotes in pipeline: {text}")
    parts.append(text[start:].strip())
    return [p for p in parts if p]


_ELEMENT = re.compile(r"^(?P<name>[\w.$-]+)\s*(?:\{(?P<opts>.*)\}|\((?P<nested>.*)\))?$", re.S)


def _parse_element(element: str) -> tuple[str, str | None, str | None]:
    m = _ELEMENT.match(element)
    if not m:
        raise PipelineError(f"malformed pipeline element '{element}'")
    return m.group("name"), m.group("opts"), m.group("nested")


def _key_values(text: str, where: str) -> dict[str, str]:
    values = {}
    for item in shlex.split(text):
        key, eq, value = item.partition("=")
        if not eq:
            raise PipelineError(f"{where}: option '{item}' needs a value (key=value)")
        values[key] = value
    return values


@dataclass(frozen=True)
class Step:
    """One element of an expanded pipeline: a tile pass or upstream pipeline text."""

    tile: passes.TilePass | None = None
    upstream: str | None = None


# The chips LLVM's NVPTX backend knows (sm_<n>, sm_<n>a, sm_<n>f) and the PTX version
# each needs (x10), measured with the bundled LLVM: an unknown chip aborts the process
# on the first instruction it lacks, and a PTX version too old for the chip makes LLVM
# exit(1), both from inside compile().
_CHIPS = {20: 60, 21: 60, 30: 60, 32: 60, 35: 60, 37: 60, 50: 60, 52: 60, 53: 60, 60: 60,
          61: 60, 62: 60, 70: 60, 72: 61, 75: 63, 80: 70, 86: 71, 87: 74, 88: 90, 89: 78,
          90: 78, 100: 86, 101: 86, 103: 88, 110: 90, 120: 87, 121: 88}
_CHIP = re.compile(r"sm_(\d+)([af]?)")


def check_target(values: Mapping[str, str], where: str) -> None:
    """PipelineError unless a pipeline's `chip` is one LLVM knows and its `features` give
    a PTX version that has the chip."""
    chip, features = values.get("chip", ""), values.get("features", "")
    if not chip or "$" in chip:
        return
    m = _CHIP.fullmatch(chip)
    if m is None or int(m.group(1)) not in _CHIPS:
        known = ", ".join(f"sm_{n}" for n in _CHIPS)
        raise PipelineError(f"{where}: unknown chip '{chip}' (chips: {known}, and sm_90a ...)")
    need = _CHIPS[int(m.group(1))]
    if m.group(2) == "f" or chip == "sm_90a":
        need = 88 if m.group(2) == "f" else 80
    given = [int(v) for v in re.findall(r"\+ptx(\d+)", features)]
    if given and max(given) < need:
        raise PipelineError(f"{where}: chip {chip} needs PTX {need // 10}.{need % 10} or newer "
                            f"(features=+ptx{need}), but features={features}")


@dataclass
class Expander:
    """Expands named pipelines and instantiates tile passes."""

    params: Mapping[str, str] = field(default_factory=dict)  # e.g. chip from --chip
    pass_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def expand(self, text: str, done: Iterable[str] = ()) -> list[Step]:
        """The steps of a pipeline text, with the tile passes' requirements (REQUIRES) that
        it lacks added in front of the pass that needs them; those in `done` (tile passes
        that run before these steps) are not added again."""
        return self._with_requirements(self._expand(text, 0), set(done))

    def _expand(self, text: str, depth: int) -> list[Step]:
        if depth > 16:
            raise PipelineError("named pipelines nest too deeply (a cycle?)")
        elements = split_top_level(text.strip())
        if len(elements) == 1:
            name, _, nested = _parse_element(elements[0])
            if name in ("builtin.module", "any") and nested is not None:
                return self._expand(nested, depth + 1)
        steps: list[Step] = []
        for element in elements:
            steps.extend(self._element(element, depth))
        return steps

    def _with_requirements(self, steps: list[Step], done: set[str]) -> list[Step]:
        out: list[Step] = []

        def need(name: str) -> None:
            if name in done:
                return
            cls = passes.get(name)
            for required in cls.REQUIRES:
                need(required)
            out.append(Step(tile=cls(**self.pass_options.get(name, {}))))
            done.add(name)

        for step in steps:
            if step.tile is not None:
                for required in step.tile.REQUIRES:
                    need(required)
                done.add(step.tile.NAME)
            out.append(step)
        return out

    def _element(self, element: str, depth: int) -> list[Step]:
        name, opts, nested = _parse_element(element)
        if name in passes.PASSES:
            cls = passes.get(name)
            try:
                options = passes.parse_options(cls, opts or "")
            except ValueError as e:
                raise PipelineError(str(e)) from None
            options.update(self.pass_options.get(name, {}))
            return [Step(tile=cls(**options))]
        named = named_pipelines().get(name)
        if named is not None:
            values = dict(named.params)
            values.update({k: v for k, v in self.params.items() if k in named.params})
            given = _key_values(opts or "", name)
            unknown = sorted(set(given) - set(named.params))
            if unknown:
                raise PipelineError(f"pipeline {name} has no parameter {', '.join(unknown)} "
                                    f"(parameters: {', '.join(named.params) or 'none'})")
            values.update(given)
            check_target(values, name)
            return self._expand(named.expand_text(values), depth + 1)
        if nested is not None:
            self._reject_nested_tile(name, nested)
        _check_upstream(element)
        return [Step(upstream=element)]

    def _reject_nested_tile(self, anchor: str, nested: str) -> None:
        for inner in split_top_level(nested):
            inner_name, _, deeper = _parse_element(inner)
            if inner_name in passes.PASSES or inner_name in named_pipelines():
                raise PipelineError(
                    f"'{inner_name}' runs on the whole module: put it at the top level of the "
                    f"pipeline, not inside {anchor}(...)"
                )
            if deeper is not None:
                self._reject_nested_tile(inner_name, deeper)


@cache
def _scratch_context() -> ir.Context:
    return ir.Context()


@cache
def _check_upstream(element: str) -> None:
    """Raise PipelineError unless MLIR knows the pass (and its options)."""
    try:
        PassManager.parse(f"any({element})", context=_scratch_context())
    except ValueError:
        name = _parse_element(element)[0]
        raise PipelineError(
            f"unknown pass or pipeline '{name}' (or bad options in '{element}'); tile passes: "
            f"{', '.join(passes.PASSES)}; named pipelines: {', '.join(named_pipelines())}"
        ) from None


def build(steps: list[Step], context: ir.Context, sink: DiagnosticSink | None = None
          ) -> PassManager:
    """One PassManager running the steps in order."""
    pm = PassManager("any", context)
    pending: list[str] = []

    def flush() -> None:
        if pending:
            pm.add(",".join(pending))  # each element was checked by _check_upstream
            pending.clear()

    for step in steps:
        if step.upstream is not None:
            pending.append(step.upstream)
            continue
        flush()
        assert step.tile is not None
        dataclasses.replace(step.tile, sink=sink).add_to(pm)
    flush()
    return pm


def run(module: ir.Module | ir.Operation, steps: list[Step], sink: DiagnosticSink,
        print_ir_after_all: bool = False) -> bool:
    """Run the steps on the module; diagnostics go to the sink. True on success."""
    operation = module.operation
    context = operation.context
    pm = build(steps, context, sink)
    if print_ir_after_all:
        context.enable_multithreading(False)  # module-scope printing needs it off
        pm.enable_ir_printing(print_after_all=True, print_module_scope=True)
    try:
        pm.run(operation)
    except ir.MLIRError as e:
        sink.extend(from_mlir_error(e, sink.rename))
        return False
    return True
