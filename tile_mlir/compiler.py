"""compile(): tile IR (a file, text or module) to PTX and cubins, stage by stage.

    tile --tile-to-gpu--> gpu --gpu-to-nvvm--> llvm --gpu-module-to-binary--> ptx --ptxas--> cubin

The stages are those of the named pipeline pipelines/tile-to-ptx.pipeline (each of
its elements ends one, `# stage <name>`), run in one loop; the IR text of every
stage is kept on the result, with each kernel's launch-relevant signature
(`KernelSpec`) read off the tile stage. The chip is decided once: the one asked
for, or its arch-specific variant (sm_90 -> sm_90a) as soon as a stage's IR uses
an instruction that needs it. Results go through the kernel cache
(runtime/cache.py): a request compiled before, in this process or another, is
loaded instead of compiled.
"""

from __future__ import annotations

import functools
import shlex
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

from mlir import ir
from mlir.dialects import gpu

from tile_mlir import pipeline
from tile_mlir.context import PARSED_NAME, new_context, parse
from tile_mlir.contract import KERNEL_ARG_ALIGN
from tile_mlir.diagnostics import CompileError, Diagnostic, DiagnosticSink, source_loc
from tile_mlir.dtypes import by_mlir
from tile_mlir.lowering.support.analysis import DYNAMIC, known_block_size
from tile_mlir.runtime import cache as kernel_cache
from tile_mlir.runtime.binary import detect_chip, specific_chip
from tile_mlir.runtime.program import Program
from tile_mlir.runtime.spec import KernelSpec, Param
from tile_mlir.toolchain import SPILL_ATTR, settle

# ------------------------------------------------------------- kernel specs


def _walk(root: ir.Operation, name: str) -> list[ir.OpView]:
    found: list[ir.OpView] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == name:
            found.append(op.opview)
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


_VIEW_OPS = ("memref.subview", "memref.collapse_shape", "memref.expand_shape", "memref.cast",
             "memref.reinterpret_cast")
_READ_ONLY_USES = ("memref.load", "vector.load", "vector.transfer_read")


def _may_write(value: ir.Value, depth: int = 0) -> bool:
    """Whether any use (through views) may write the memref: only reads say no."""
    for use in value.uses:
        user = use.owner.operation
        name = user.name
        if name in _VIEW_OPS and use.operand_number == 0:
            if depth > 16 or _may_write(user.results[0], depth + 1):
                return True
        elif name.startswith("tile.") and name != "tile.alloc":
            if use.operand_number == 0:  # tile ops write their first operand
                return True
        elif name not in _READ_ONLY_USES:
            return True
    return False


def _param(arg: ir.BlockArgument, attrs: ir.Attribute | None) -> Param:
    type_ = arg.type
    name = f"arg{arg.arg_number}"
    readonly = attrs is not None and "llvm.readonly" in ir.DictAttr(attrs)
    if isinstance(type_, ir.MemRefType):
        memref = ir.MemRefType(type_)
        shape = tuple(memref.shape)
        if DYNAMIC in shape:
            raise ValueError(f"{name}: kernel memref arguments need static shapes, got {type_}")
        return Param(
            name, "memref", by_mlir(str(memref.element_type)).name, shape,
            writes=not readonly and _may_write(arg), align=KERNEL_ARG_ALIGN,
        )
    spelling = "i64" if isinstance(type_, ir.IndexType) else str(type_)
    return Param(name, "scalar", by_mlir(spelling).name)


class ArgumentError(ValueError):
    """A kernel argument that compile() cannot pass, with the argument's location."""

    def __init__(self, message: str, location: ir.Location):
        super().__init__(message)
        self.location = location


def _params(args: list[ir.BlockArgument], arg_attrs: list[ir.Attribute]) -> tuple[Param, ...]:
    params = []
    for i, arg in enumerate(args):
        try:
            params.append(_param(arg, arg_attrs[i] if i < len(arg_attrs) else None))
        except ValueError as e:
            raise ArgumentError(str(e), arg.location) from None
    return tuple(params)


def kernel_specs(module: ir.Module) -> dict[str, KernelSpec]:
    """The spec of every gpu.func kernel in the module, by name."""
    specs = {}
    for gmod in _walk(module.operation, "gpu.module"):
        for func in _walk(gmod.operation, "gpu.func"):
            attrs = func.operation.attributes
            if "gpu.kernel" not in attrs:
                continue
            name = ir.StringAttr(attrs["sym_name"]).value
            arg_attrs = list(ir.ArrayAttr(attrs["arg_attrs"])) if "arg_attrs" in attrs else []
            params = _params(list(func.operation.regions[0].blocks[0].arguments), arg_attrs)
            grid = None
            if "known_grid_size" in attrs:
                g = list(ir.DenseI32ArrayAttr(attrs["known_grid_size"]))
                grid = (g[0], g[1], g[2])
            specs[name] = KernelSpec(
                name, ir.StringAttr(gmod.operation.attributes["sym_name"]).value, params,
                known_block_size(func), grid,
            )
    return specs


def spill_allowances(module: ir.Module) -> dict[str, int]:
    """Per gpu.module (its gpu.binary's symbol once lowered): the bytes of spill stores its
    kernels' occupancy requests may cost (the least a kernel of it allows; toolchain)."""
    allowed: dict[str, int] = {}
    for gmod in _walk(module.operation, "gpu.module"):
        name = ir.StringAttr(gmod.operation.attributes["sym_name"]).value
        for func in _walk(gmod.operation, "gpu.func"):
            attrs = func.operation.attributes
            given = ir.IntegerAttr(attrs[SPILL_ATTR]).value if SPILL_ATTR in attrs else 0
            allowed[name] = min(allowed.get(name, given), given)
    return allowed


# ------------------------------------------------------------------ compile


def binaries(module: ir.Module) -> dict[str, str]:
    """The PTX (or other object text) of each gpu.binary in the module, by symbol."""
    result = {}
    for binary in _walk(module.operation, "gpu.binary"):
        objects = ir.ArrayAttr(binary.operation.attributes["objects"])
        name = ir.StringAttr(binary.operation.attributes["sym_name"]).value
        result[name] = gpu.ObjectAttr(objects[0]).object.decode()
    return result


def _reproducer(source_path: Path | None, tile_ir: str, chip: str) -> str:
    if source_path is None:
        with tempfile.NamedTemporaryFile(
            "w", prefix="tile-mlir-repro-", suffix=".mlir", delete=False
        ) as handle:
            handle.write(tile_ir)
        source_path = Path(handle.name)
    return shlex.join(["tile-opt", str(source_path), "-p", pipeline.DEFAULT_PIPELINE,
                       "--chip", chip])


@functools.cache
def _shared_context() -> ir.Context:
    """The Context that compiles from text share: making one costs ~8 ms (every upstream
    dialect is registered), a fifth of a cold compile."""
    return new_context()


@functools.cache
def _steps(text: str, chip: str) -> tuple[pipeline.Step, ...]:
    """A stage's pipeline, expanded once per process and chip."""
    return tuple(pipeline.Expander(params={"chip": chip}).expand(text))


_lock = threading.Lock()  # compiles share a Context: one at a time


def compile(  # noqa: A001 - the natural name; the builtin is not needed here
    source: str | Path | ir.Module,
    *,
    chip: str | None = None,
    cubin: bool = True,
    name: str = "<input>",
    cache: bool = True,
    request: str | None = None,
    sources: Mapping[str, str] | None = None,
) -> Program:
    """Compile tile IR (a .mlir path, IR text or a module) to PTX, and cubins unless told not.

    A string that ends in ".mlir" and has no newline is a path; any other string is IR.
    `chip` defaults to the GPU's (sm_90 without one); a kernel that needs arch-specific
    instructions gets the `a` variant (sm_90a). cache=False bypasses the kernel cache.

    `request` names a built module in the kernel cache instead of its IR text: a front
    end (tile_mlir.lang) that can say what it would build without MLIR finds the result
    in a process that has no bindings. `sources` are texts, by file name, that error
    messages quote lines from (the Python file a program was built from).

    Raises CompileError with located diagnostics when the IR is wrong.
    """
    chip = chip or detect_chip()
    module = source if isinstance(source, ir.Module) else None
    if module is not None:
        text, path = str(module), None
    else:
        text, path = kernel_cache.source_text(source, name)  # type: ignore[arg-type]
        name = str(path) if path else name
    key_text = text if request is None else request
    options = kernel_cache.compile_options(cubin=cubin)
    if cache:
        hit = kernel_cache.lookup(key_text, chip, options)
        if hit is not None:
            return hit
    program = _compile(text, module, path=path, name=name, chip=chip, cubin=cubin,
                       sources=sources)
    return kernel_cache.store(key_text, chip, options, program) if cache else program


def _stage_text(module: ir.Module) -> str:
    """What a stage keeps: the module's IR, or the PTX once it is gpu.binary ops."""
    objects = binaries(module)
    return "\n".join(objects.values()) if objects else str(module)


def _compile(text: str, module: ir.Module | None, *, path: Path | None, name: str, chip: str,
             cubin: bool, sources: Mapping[str, str] | None = None) -> Program:
    quoted = {**(sources or {}), name: text}
    with _lock:
        if module is None:
            module = parse(text, name, _shared_context())
        sink = DiagnosticSink(rename={PARSED_NAME: name})
        stages = {"tile": str(module)}
        try:
            kernels = kernel_specs(module)
            allowed = spill_allowances(module)
        except ArgumentError as e:
            loc = source_loc(e.location, sink.rename)
            raise CompileError([Diagnostic("error", str(e), loc)], quoted) from None
        chip = specific_chip(chip, stages["tile"])
        staged = pipeline.named_pipelines()[pipeline.DEFAULT_PIPELINE]
        for element, stage in staged.staged():
            steps = _steps(staged.substitute(element, {"chip": chip}), chip)
            if not pipeline.run(module, list(steps), sink):
                raise CompileError(sink.diagnostics, quoted,
                                   _reproducer(path, stages["tile"], chip))
            stages[stage] = _stage_text(module)
            chip = specific_chip(chip, stages[stage])
        ptx = binaries(module)
    result = Program(chip, kernels, ptx, {}, stages)
    if cubin:  # the PTX kept is the PTX assembled (an occupancy request may be lowered)
        for m, text_ in list(ptx.items()):
            ptx[m], result.cubin[m] = settle(text_, chip, spill=allowed.get(m, 0))
    return result
