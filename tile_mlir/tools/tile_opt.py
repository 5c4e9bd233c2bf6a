"""tile-opt: run pass pipelines over .mlir files, as mlir-opt does, with the tile dialect.

    tile-opt examples/vector_add.mlir -p tile-to-ptx --emit=ptx
    tile-opt in.mlir --tile-verify --tile-dispatch --tile-explain
    tile-opt in.mlir --tile-explain          (runs tile-dispatch itself)
    tile-opt invalid.mlir --split-input-file --verify-diagnostics --tile-verify

Passes come from `-p/--pass-pipeline` (tile passes, named pipelines from
pipelines/ and upstream passes mixed) or from one flag per pass, in order
(`--tile-lower`, `--canonicalize`, `--convert-gpu-to-nvvm=use-bare-ptr-memref-call-conv=1`).
Errors in the input (including input that is not UTF-8 text) print as
`file:line:col: error: ...` and exit with status 1; a bad command line exits
with status 2, a compiler bug with status 3.

`--tile-explain` reports tile-dispatch's decision for each tile op, and what
tile-fuse fused or refused, as remarks. A pipeline with neither gets
tile-dispatch at the end (so `tile-opt in.mlir --tile-explain` verifies,
explains and prints the IR with each op's `variant`).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mlir import ir

from tile_mlir import lowering, passes, pipeline
from tile_mlir.context import PARSED_NAME, new_context, parse
from tile_mlir.diagnostics import (
    CompileError,
    Diagnostic,
    DiagnosticSink,
    SourceLoc,
    decode,
    source_loc,
)
from tile_mlir.dialects import tile
from tile_mlir.runtime.binary import ptx_target
from tile_mlir.toolchain import DEFAULT_CHIP, ToolchainError, assemble
from tile_mlir.tools import verify_diagnostics

SPLIT_MARKER = re.compile(r"^// -----[ \t]*$", re.M)


class UsageError(Exception):
    """A command line that cannot run (exit status 2, like argparse)."""


@dataclass
class Options:
    input: str
    output: str | None
    pipeline: str | None
    pass_flags: list[str]
    split_input_file: bool
    verify_diagnostics: bool
    print_ir_after_all: bool
    emit: str
    chip: str
    explain: bool


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tile-opt",
        description="Run tile and upstream MLIR passes over a .mlir file.",
        epilog="Any other --<pass>[=options] runs that pass (tile, named pipeline or upstream), "
               "in the order given.",
    )
    p.add_argument("input", nargs="?", default="-", help="input file ('-' for stdin)")
    p.add_argument("-o", dest="output", metavar="FILE", help="output file (default stdout)")
    p.add_argument("-p", "--pass-pipeline", dest="pipeline", metavar="PIPELINE",
                   help="textual pass pipeline, e.g. 'tile-verify,tile-lower,canonicalize'")
    p.add_argument("--split-input-file", action="store_true",
                   help="process each '// -----' chunk of the input on its own")
    p.add_argument("--verify-diagnostics", action="store_true",
                   help="check diagnostics against expected-* comments in the input")
    p.add_argument("--mlir-print-ir-after-all", dest="print_ir_after_all", action="store_true",
                   help="print the IR after every pass (to stderr)")
    p.add_argument("--emit", choices=("mlir", "ptx", "cubin"), default="mlir",
                   help="what to write: the IR, the PTX of gpu.binary ops, or a cubin (-o)")
    p.add_argument("--chip", default=DEFAULT_CHIP, help=f"target GPU (default {DEFAULT_CHIP})")
    p.add_argument("--tile-explain", dest="explain", action="store_true",
                   help="report each tile op's dispatch decision, and what tile-fuse "
                        "fused or refused and why, as remarks (adds tile-dispatch at the "
                        "end of a pipeline that has neither)")
    p.add_argument("--list-passes", action="store_true",
                   help="list the tile passes, named pipelines and lowering variants, then exit")
    return p


def _options(argv: Sequence[str]) -> Options | None:
    args, rest = _parser().parse_known_args(argv)
    if args.list_passes:
        _list_passes()
        return None
    flags = []
    for extra in rest:
        if not extra.startswith("--") or len(extra) == 2:
            raise UsageError(f"unexpected argument '{extra}'")
        name, eq, opts = extra[2:].partition("=")
        flags.append(f"{name}{{{opts}}}" if eq else name)
    if args.pipeline and flags:
        raise UsageError("give passes either with -p/--pass-pipeline or as flags, not both")
    return Options(args.input, args.output, args.pipeline, flags, args.split_input_file,
                   args.verify_diagnostics, args.print_ir_after_all, args.emit, args.chip,
                   args.explain)


def _list_passes() -> None:
    print("tile passes:")
    for name in passes.PASSES:
        cls = passes.get(name)
        opts = " ".join(f"{f.name.replace('_', '-')}=<{f.type}>" for f in cls.options())
        needs = f"  (after {', '.join(cls.REQUIRES)})" if cls.REQUIRES else ""
        print(f"  {name:18} {cls.SUMMARY}" + (f"  [{opts}]" if opts else "") + needs)
    print("named pipelines (pipelines/):")
    for named in pipeline.named_pipelines().values():
        params = " ".join(f"{k}={v}" for k, v in named.params.items())
        print(f"  {named.name:18} {named.summary}" + (f"  [{params}]" if params else ""))
    print("lowering variants (tile-dispatch tries them by priority):")
    for op in tile.LOWERED:
        for variant in lowering.variants_for(op):
            print(f"  {op:17} {variant.name:10} {variant.priority:3}  {variant.summary}")


def _chunks(text: str, split: bool) -> list[str]:
    """The input, or each '// -----' chunk padded with newlines so that its line
    numbers are those of the whole file."""
    if not split:
        return [text]
    chunks, line, start = [], 1, 0
    for m in SPLIT_MARKER.finditer(text):
        chunks.append("\n" * (line - 1) + text[start:m.start()])
        line += text[start:m.end()].count("\n")
        start = m.end()
    chunks.append("\n" * (line - 1) + text[start:])
    return chunks


def _no_kernels(module: ir.Module, name: str, emit: str) -> CompileError:
    """The input has no gpu.module: an input error, at the module (or the file's start)."""
    loc = source_loc(module.operation.location, {PARSED_NAME: name})
    if loc is None or loc.line < 1:
        loc = SourceLoc(name, 1, 1)
    message = f"the input has no gpu.module, so there is no {emit} to emit"
    return CompileError([Diagnostic("error", message, loc)])


def _emit(module: ir.Module, emit: str, output: str | None, name: str) -> str | bytes:
    if emit == "mlir":
        return str(module)
    from tile_mlir.compiler import _walk
    from tile_mlir.compiler import binaries as module_binaries

    binaries = module_binaries(module)
    if not binaries and not _walk(module.operation, "gpu.module"):
        raise _no_kernels(module, name, emit)
    if not binaries:
        raise UsageError(f"--emit={emit} needs a pipeline that ends in gpu-module-to-binary "
                         "(for example -p tile-to-ptx)")
    if emit == "ptx":
        if len(binaries) == 1:
            return next(iter(binaries.values()))
        return "".join(f"// gpu.module @{n}\n{ptx}\n" for n, ptx in binaries.items())
    if output in (None, "-"):
        raise UsageError("--emit=cubin writes binary: give -o FILE")
    if len(binaries) != 1:
        raise UsageError(f"--emit=cubin makes one cubin, but there are {len(binaries)} modules")
    ptx = next(iter(binaries.values()))
    return assemble(ptx, ptx_target(ptx) or DEFAULT_CHIP)


@dataclass
class ChunkResult:
    output: str | bytes | None
    diagnostics: list[Diagnostic]


def _run_chunk(text: str, name: str, opts: Options, steps: list[pipeline.Step]) -> ChunkResult:
    context = new_context()
    sink = DiagnosticSink(rename={PARSED_NAME: name})
    try:
        module = parse(text, name, context)
    except CompileError as e:
        return ChunkResult(None, e.diagnostics)
    if steps and not pipeline.run(module, steps, sink, opts.print_ir_after_all):
        return ChunkResult(None, sink.diagnostics)
    try:
        return ChunkResult(_emit(module, opts.emit, opts.output, name), sink.diagnostics)
    except CompileError as e:
        return ChunkResult(None, sink.diagnostics + e.diagnostics)


def _write(outputs: list[str | bytes], destination: str | None) -> None:
    binary = [o for o in outputs if isinstance(o, bytes)]
    texts = [o for o in outputs if isinstance(o, str)]
    text = "// -----\n".join(o if o.endswith("\n") else f"{o}\n" for o in texts)
    if not binary and destination in (None, "-"):
        sys.stdout.write(text)
        return
    assert destination is not None
    try:
        if binary:
            Path(destination).write_bytes(binary[0])
        else:
            Path(destination).write_text(text)
    except OSError as e:
        raise UsageError(f"cannot write {destination}: {e.strerror}") from None


def _read(path: str) -> bytes:
    try:
        return sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None


def _steps(opts: Options) -> list[pipeline.Step]:
    expander = pipeline.Expander(
        params={"chip": opts.chip},
        pass_options={"tile-dispatch": {"explain": True}, "tile-fuse": {"explain": True}}
        if opts.explain else {},
    )
    pipeline_text = opts.pipeline or ",".join(opts.pass_flags)
    try:
        steps = expander.expand(pipeline_text) if pipeline_text else []
    except pipeline.PipelineError as e:
        raise UsageError(str(e)) from None
    done = [step.tile.NAME for step in steps if step.tile]
    if opts.explain and not {"tile-dispatch", "tile-fuse"} & set(done):
        # --tile-explain explains what tile-dispatch and tile-fuse decide: a pipeline with
        # neither (a tile pass that needs tile-dispatch gets it already) would say nothing,
        # so it gets tile-dispatch at the end, with its requirements unless they ran
        steps += expander.expand("tile-dispatch", done=done)
    return steps


def run(argv: Sequence[str]) -> int:
    opts = _options(argv)
    if opts is None:
        return 0
    name = "<stdin>" if opts.input == "-" else opts.input
    data = _read(opts.input)
    steps = _steps(opts)
    try:
        text = decode(data, name)
    except CompileError as e:
        for diagnostic in e.diagnostics:
            print(diagnostic.format(), file=sys.stderr)
        return 1
    outputs: list[str | bytes] = []
    failed = False
    sources = {name: text}
    for chunk in _chunks(text, opts.split_input_file):
        result = _run_chunk(chunk, name, opts, steps)
        if opts.verify_diagnostics:
            problems = verify_diagnostics.check(chunk, name, result.diagnostics)
            for problem in problems:
                print(problem.format(sources), file=sys.stderr)
            failed |= bool(problems)
        else:
            for diagnostic in result.diagnostics:
                print(diagnostic.format(sources), file=sys.stderr)
            failed |= any(d.severity == "error" for d in result.diagnostics)
        if result.output is not None:
            outputs.append(result.output)
    _write(outputs, opts.output)
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except UsageError as e:
        print(f"tile-opt: error: {e}", file=sys.stderr)
        return 2
    except ToolchainError as e:
        print(f"tile-opt: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 1
    except Exception as e:  # noqa: BLE001 - a compiler bug: say so, with the reproducer
        print(f"tile-opt: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        print("  this is a bug in tile-mlir; the same command reproduces it", file=sys.stderr)
        if os.environ.get("TILE_MLIR_TRACEBACK"):
            traceback.print_exc()
        else:
            print("  (set TILE_MLIR_TRACEBACK=1 for the Python traceback)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())

