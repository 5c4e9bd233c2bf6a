"""Chains of elementwise rows as tile programs, lowered with and without tile-fuse.

A chain is a list of `fusion.Link`s (op_table/fusion.py: the builder tile-fuse and
the operator library share) over named operands: tiles, broadcast tiles and f32
scalars. `program_text` writes it as one kernel whose every link is a
`tile.elementwise` into a temporary of the link's dtype (the last into the
output), in one of two settings:
- "registers": a warp's 32x8 tile in registers (elementwise/reg), the operands
  copied in from global memory (a row (1, 8) and a column (32, 1) broadcast by
  stride-0 views) and the result copied out;
- "threads": each of 32 threads its own row of W elements in global memory at
  scope thread (elementwise/gmem), temporaries from memref.alloca; a row operand
  (W,) is read by every thread, a column operand is one element per thread seen
  as a stride-0 view of W elements (a splat in the partition).
`lower` runs the tile passes with or without tile-fuse to the "gpu" stage; the
null tier runs both on the host (host.py), the gpu tier on the GPU.
`random_chain` draws chains of the unary, binary and activation rows over
f32, f16 and bf16 (fp8 temporaries too in the threads setting), with scalars
and broadcasts, always valid for tile-verify.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from mlir import runtime

from support.host import CARRIERS, compiled, grid_arguments
from tile_mlir import op_table, pipeline
from tile_mlir.context import new_context, parse
from tile_mlir.diagnostics import DiagnosticSink
from tile_mlir.dtypes import DTYPES, FP8, promote_types
from tile_mlir.op_table import fusion

ROWS_PER_BLOCK = 32
REGISTER_WIDTH = 8
LAYOUT = "S[(32, 8):(1@laneid, 1)]"

UNFUSED = "tile-verify,tile-dispatch,tile-barriers,tile-buffers,tile-lower,canonicalize,cse"
FUSED = "tile-verify,tile-fuse,tile-dispatch,tile-barriers,tile-buffers,tile-lower,canonicalize,cse"

Link = fusion.Link[str]


@dataclass(frozen=True)
class Operand:
    """An external input of a chain: a kernel argument."""

    name: str
    dtype: str
    kind: str  # "tile", "row" (broadcast over rows), "column" (over columns), "scalar"


@dataclass(frozen=True)
class Chain:
    setting: str  # "registers" or "threads"
    operands: tuple[Operand, ...]
    links: tuple[Link, ...]
    width: int = REGISTER_WIDTH  # elements per row

    @property
    def shape(self) -> tuple[int, int]:
        return ROWS_PER_BLOCK, self.width

    @property
    def dtype(self) -> str:
        return self.links[-1].dtype

    def describe(self) -> str:
        ops = {o.name: f"{o.name}:{o.kind}:{o.dtype}" for o in self.operands}
        steps = [f"{link.row}({', '.join(ops[a] if isinstance(a, str) else f'${a.link}' for a in link.args)}) : {link.dtype}"
                 for link in self.links]
        return f"{self.setting} W={self.width}: " + "; ".join(steps)


# ------------------------------------------------------------------ program text


def _mlir(dtype: str) -> str:
    return DTYPES[dtype].mlir


class _Writer:
    """The kernel's text, one line at a time."""

    def __init__(self, chain: Chain):
        self.chain = chain
        self.lines: list[str] = []
        self.values: dict[str, tuple[str, str]] = {}  # operand -> (SSA name, type)

    def tile_type(self, dtype: str) -> str:
        rows, width = self.chain.shape
        if self.chain.setting == "registers":
            return f"memref<{rows}x{width}x{_mlir(dtype)}, #gpu.address_space<private>>"
        return f"memref<{width}x{_mlir(dtype)}>"

    def temporary(self, name: str, dtype: str) -> str:
        if self.chain.setting == "registers":
            self.lines.append(f'    {name} = "tile.alloc"() {{layout = #tile.layout<"{LAYOUT}">}} '
                              f": () -> {self.tile_type(dtype)}")
        else:
            self.lines.append(f"    {name} = memref.alloca() : {self.tile_type(dtype)}")
        return name

    def elementwise(self, row: str, dst: tuple[str, str], args: Sequence[tuple[str, str]]
                    ) -> None:
        segments = [1, min(len(args), 1), min(max(len(args) - 1, 0), 1), max(len(args) - 2, 0)]
        names = ", ".join([dst[0], *(a[0] for a in args)])
        types = ", ".join([dst[1], *(a[1] for a in args)])
        scope = "warp" if self.chain.setting == "registers" else "thread"
        self.lines.append(
            f'    "tile.elementwise"({names}) {{op = "{row}", scope = "{scope}", '
            f"operandSegmentSizes = array<i32: {', '.join(map(str, segments))}>}} : ({types}) -> ()")


def argument_type(chain: Chain, operand: Operand) -> str:
    rows, width = chain.shape
    elem = _mlir(operand.dtype)
    return {"tile": f"memref<{rows}x{width}x{elem}>", "row": f"memref<{width}x{elem}>",
            "column": f"memref<{rows}x{elem}>", "scalar": elem}[operand.kind]


def _registers_operand(w: _Writer, operand: Operand) -> tuple[str, str]:
    """A register tile holding the operand (copied in; broadcasts through stride-0 views)."""
    rows, width = w.chain.shape
    elem, name = _mlir(operand.dtype), f"%{operand.name}"
    if operand.kind == "scalar":
        return name, elem
    source, source_type = name, f"memref<{rows}x{width}x{elem}>"
    if operand.kind != "tile":
        strides = "[0, 1]" if operand.kind == "row" else "[1, 0]"
        source_type = f"memref<{rows}x{width}x{elem}, strided<{strides}>>"
        source = f"%{operand.name}_view"
        w.lines.append(f"    {source} = memref.reinterpret_cast {name} to offset: [0], sizes: "
                       f"[{rows}, {width}], strides: {strides} : "
                       f"{argument_type(w.chain, operand)} to {source_type}")
    register = w.temporary(f"%{operand.name}_r", operand.dtype)
    w.lines.append(f'    "tile.copy"({register}, {source}) {{scope = "warp"}} : '
                   f"({w.tile_type(operand.dtype)}, {source_type}) -> ()")
    return register, w.tile_type(operand.dtype)


def _threads_operand(w: _Writer, operand: Operand) -> tuple[str, str]:
    """The thread's view of the operand: its row, the shared row, or its column element
    repeated (a stride-0 view)."""
    width, elem, name = w.chain.width, _mlir(operand.dtype), f"%{operand.name}"
    if operand.kind in ("scalar", "row"):
        return name, argument_type(w.chain, operand)
    view = f"%{operand.name}_t"
    if operand.kind == "tile":
        type_ = f"memref<{width}x{elem}, strided<[1], offset: ?>>"
        w.lines.append(f"    {view} = memref.subview {name}[%tid, 0] [1, {width}] [1, 1] : "
                       f"{argument_type(w.chain, operand)} to {type_}")
    else:
        type_ = f"memref<{width}x{elem}, strided<[0], offset: ?>>"
        w.lines.append(f"    {view} = memref.reinterpret_cast {name} to offset: [%tid], sizes: "
                       f"[{width}], strides: [0] : {argument_type(w.chain, operand)} to {type_}")
    return view, type_


def program_text(chain: Chain) -> str:
    """The chain as one kernel `k(operands..., out)`: each link a tile.elementwise into a
    temporary of its dtype, the last into the output (noalias: no input overlaps it, as
    the operator library promises, which lets tile-fuse move reads next to its writes)."""
    w = _Writer(chain)
    rows, width = chain.shape
    out_type = f"memref<{rows}x{width}x{_mlir(chain.dtype)}>"
    params = [f"%{o.name}: {argument_type(chain, o)}" for o in chain.operands]
    if chain.setting == "threads":
        w.lines.append("    %tid = gpu.thread_id x")
    place = _registers_operand if chain.setting == "registers" else _threads_operand
    values = {o.name: place(w, o) for o in chain.operands}
    results: list[tuple[str, str]] = []
    for k, link in enumerate(chain.links):
        if k < len(chain.links) - 1:
            dst = (w.temporary(f"%tmp{k}", link.dtype), w.tile_type(link.dtype))
        elif chain.setting == "registers":
            dst = (w.temporary("%result", link.dtype), w.tile_type(link.dtype))
        else:
            dst = ("%out_t", f"memref<{width}x{_mlir(link.dtype)}, strided<[1], offset: ?>>")
            w.lines.append(f"    %out_t = memref.subview %out[%tid, 0] [1, {width}] [1, 1] : "
                           f"{out_type} to {dst[1]}")
        args = [results[a.link] if isinstance(a, fusion.Result) else values[a]
                for a in link.args]
        w.elementwise(link.row, dst, args)
        results.append(dst)
    if chain.setting == "registers":
        w.lines.append(f'    "tile.copy"(%out, %result) {{scope = "warp"}} : ({out_type}, '
                       f"{results[-1][1]}) -> ()")
    body = "\n".join(w.lines)
    return f"""gpu.module @kernels {{
  gpu.func @k({", ".join([*params, f"%out: {out_type} {{llvm.noalias}}"])}) kernel attributes {{known_block_size = array<i32: {ROWS_PER_BLOCK}, 1, 1>, known_grid_size = array<i32: 1, 1, 1>}} {{
{body}
    gpu.return
  }}
}}
"""


def fused_input_types(chain: Chain) -> dict[str, str]:
    """Each operand's type as the fused op sees it (fusion.fit_slots orders by these)."""
    w = _Writer(chain)
    place = _registers_operand if chain.setting == "registers" else _threads_operand
    return {o.name: place(w, o)[1] for o in chain.operands}


def expect_fused(chain: Chain) -> bool:
    """Whether tile-fuse can make the whole chain one op: the fused op's inputs fit the
    dialect's slots (the one builder says)."""
    types = fused_input_types(chain)
    try:
        fusion.build(list(chain.links), types.__getitem__)
    except fusion.FusionError:
        return False
    return True


# ------------------------------------------------------------------ lowering


def lower(text: str, passes: str) -> str:
    """The program's IR after `passes` (FUSED or UNFUSED, or a prefix of them)."""
    module = parse(text, "chain.mlir", new_context())
    sink = DiagnosticSink()
    if not pipeline.run(module, pipeline.Expander().expand(passes), sink):
        raise AssertionError("\n".join(str(d) for d in sink.diagnostics) + "\n" + text)
    return str(module)


def elementwise_ops(text: str) -> int:
    """How many tile.elementwise ops the chain is after tile-fuse."""
    return lower(text, "tile-verify,tile-fuse").count('"tile.elementwise"')


SLOTS_FULL = "tile.elementwise's operands after the second must share one type"
"""tile-fuse's remark where fusing on would give the op more input types than its slots."""


def fuse_remarks(text: str) -> str:
    """tile-fuse's remarks on a program (what it fused and why it refused)."""
    module = parse(text, "chain.mlir", new_context())
    sink = DiagnosticSink()
    pipeline.run(module, pipeline.Expander(
        pass_options={"tile-fuse": {"explain": True}}).expand("tile-verify,tile-fuse"), sink)
    return "\n".join(d.message for d in sink.diagnostics)


def check_fused(chain: Chain, text: str) -> int:
    """The tile.elementwise ops tile-fuse leaves of the chain's program, checked: one where
    the chain's inputs fit the dialect's slots (expect_fused), unless the copies into
    registers fused too (elementwise/reg_mem reads global operands) and brought the fused
    op's inputs to more types than the slots take: then tile-fuse stops there, and says
    so."""
    ops = elementwise_ops(text)
    if expect_fused(chain) and ops != 1:
        assert SLOTS_FULL in fuse_remarks(text), \
            f"{chain.describe()}: {ops} elementwise ops after tile-fuse"
    return ops


# ------------------------------------------------------------------ running on the host


def _descriptor(array: np.ndarray) -> Any:
    carrier = np.ascontiguousarray(array).view(CARRIERS[array.dtype.itemsize])
    return ctypes.pointer(ctypes.pointer(runtime.get_ranked_memref_descriptor(carrier)))


def run_on_host(gpu_text: str, chain: Chain, inputs: dict[str, Any]) -> np.ndarray:
    """Run a lowered chain with the host emulator; the output (poisoned beforehand).
    Registers (private memory, each thread's own allocas) are plain host memory there."""
    out = np.full(chain.shape, np.nan, DTYPES[chain.dtype].np_dtype())
    program = compiled(gpu_text.replace(", #gpu.address_space<private>", ""))
    args = grid_arguments(1)
    for operand in chain.operands:
        value = inputs[operand.name]
        args.append(ctypes.pointer(ctypes.c_float(value)) if operand.kind == "scalar"
                    else _descriptor(value))
    args.append(_descriptor(out))
    program.engine.invoke("run", *args)
    return out


# ------------------------------------------------------------------ inputs and references

SPECIAL = (0.0, -0.0, np.inf, -np.inf, np.nan, 1e4, -1e-5)


def random_inputs(chain: Chain, rng: np.random.Generator, special: bool = True
                  ) -> dict[str, Any]:
    """Values for the operands: uniform in [-3, 3], a few special values mixed in."""
    rows, width = chain.shape
    shapes = {"tile": (rows, width), "row": (width,), "column": (rows,)}
    values: dict[str, Any] = {}
    for operand in chain.operands:
        if operand.kind == "scalar":
            values[operand.name] = float(np.float32(rng.uniform(-2.0, 2.0)))
            continue
        x = rng.uniform(-3.0, 3.0, shapes[operand.kind])
        if special:
            mask = rng.random(x.shape) < 0.05
            x[mask] = rng.choice(SPECIAL, int(mask.sum()))
        values[operand.name] = x.astype(DTYPES[operand.dtype].np_dtype())
    return values


def reference(chain: Chain, inputs: dict[str, Any]) -> np.ndarray:
    """The chain in float64 NumPy, each link by its row's reference, rounded to its dtype
    as the program rounds it (its temporaries), broadcasts and scalars as the kernel
    sees them; float64 (the last link unrounded)."""
    rows, width = chain.shape
    full: dict[str, Any] = {}
    for operand in chain.operands:
        value = np.asarray(inputs[operand.name], np.float64)
        full[operand.name] = value if operand.kind in ("scalar", "tile") else \
            np.broadcast_to(value[None, :] if operand.kind == "row" else value[:, None],
                            (rows, width))
    results: list[np.ndarray] = []
    for k, link in enumerate(chain.links):
        row = op_table.lookup(link.row)
        assert row is not None
        args = [results[a.link] if isinstance(a, fusion.Result) else full[a] for a in link.args]
        value = np.asarray(row.ref(*args), np.float64)
        if k < len(chain.links) - 1:
            value = value.astype(DTYPES[link.dtype].np_dtype()).astype(np.float64)
        results.append(np.broadcast_to(value, (rows, width)))
    return results[-1]


# ------------------------------------------------------------------ random chains

FAMILIES = ("unary_math", "binary_arith", "activation")
FLOAT_TYPES = ("f32", "f16", "bf16")


def _rows() -> list[op_table.EwOp]:
    rows = [r for r in op_table.public_ops() if r.family in FAMILIES]
    rows.append(op_table.ELEMENTWISE["cast"])
    return rows


def _dtypes(row: op_table.EwOp, tiles: list[str], choices: Sequence[str]) -> list[str]:
    """The dtypes a link may round to: those its tile arguments promote into (any for a
    cast), among those the row is defined on."""
    if row.out == "any":
        return list(choices)
    return [d for d in choices if d in row.dtypes and all(promote_types(t, d) == d
                                                          for t in tiles)]


@dataclass
class _Draw:
    """A random chain under construction."""

    rng: np.random.Generator
    setting: str
    operands: list[Operand]
    links: list[Link]
    dtypes: list[str]  # the links' dtypes

    def operand(self, kind: str) -> str:
        dtype = "f32" if kind == "scalar" else str(self.rng.choice(FLOAT_TYPES))
        name = f"{kind[0]}{len(self.operands)}"
        self.operands.append(Operand(name, dtype, kind))
        return name

    def argument(self, scalar_only: bool) -> str | fusion.Result:
        """An operand (new or reused) or an earlier link's result."""
        if scalar_only:
            return self.operand("scalar")
        pick = self.rng.random()
        if self.links and pick < 0.25:
            return fusion.Result(int(self.rng.integers(len(self.links))))
        reusable = [o.name for o in self.operands if o.kind != "scalar"]
        if reusable and pick < 0.45:
            return str(self.rng.choice(reusable))
        kind = str(self.rng.choice(["tile", "tile", "row", "column", "scalar"]))
        return self.operand(kind)

    def dtype_of(self, arg: str | fusion.Result) -> tuple[str, bool]:
        """(dtype, is a tile) of an argument."""
        if isinstance(arg, fusion.Result):
            return self.dtypes[arg.link], True
        operand = next(o for o in self.operands if o.name == arg)
        return operand.dtype, operand.kind != "scalar"

    def link(self, rows: list[op_table.EwOp]) -> None:
        choices = (*FLOAT_TYPES, *FP8) if self.setting == "threads" else FLOAT_TYPES
        for _ in range(50):
            row = rows[int(self.rng.integers(len(rows)))]
            first: str | fusion.Result = fusion.Result(len(self.links) - 1) if self.links \
                else self.operand("tile")
            args = [first, *(self.argument(n in row.scalar_only) for n in range(1, row.arity))]
            tiles = [d for d, tile in map(self.dtype_of, args) if tile]
            allowed = _dtypes(row, tiles, choices)
            if allowed:
                dtype = str(self.rng.choice(allowed))
                self.links.append(fusion.Link(row.name, tuple(args), dtype))
                self.dtypes.append(dtype)
                return
        raise AssertionError("no row fits")


def random_chain(rng: np.random.Generator, setting: str, length: int | None = None) -> Chain:
    """A valid chain of 2 to 5 links, each reading the previous one's result (so that
    every result is used) and operands or earlier results; the last link rounds to a
    type that is not fp8 (the output)."""
    draw = _Draw(rng, setting, [], [], [])
    rows = _rows()
    for _ in range(length or int(rng.integers(2, 6))):
        draw.link(rows)
    if draw.dtypes[-1] in FP8:
        draw.links.append(fusion.Link("cast", (fusion.Result(len(draw.links) - 1),), "f32"))
    width = REGISTER_WIDTH if setting == "registers" else int(rng.choice([8, 36, 44, 64]))
    used = {a for link in draw.links for a in link.args if isinstance(a, str)}
    operands = tuple(o for o in draw.operands if o.name in used)
    return Chain(setting, operands, tuple(draw.links), width)


# ------------------------------------------------------------------ the gpu tier's chains


@dataclass(frozen=True)
class GpuCase:
    """A chain the gpu tier runs fused and unfused, and checks against `reference`
    within rtol * |ref| + atol (the rounding of its narrowest types)."""

    name: str
    chain: Chain
    rtol: float
    atol: float


def _chain(setting: str, operands: Sequence[tuple[str, str, str]],
           links: Sequence[tuple[str, tuple[str | int, ...], str]], width: int = REGISTER_WIDTH
           ) -> Chain:
    """A chain from (name, dtype, kind) operands and (row, args, dtype) links, an int arg
    being an earlier link's result."""
    return Chain(setting, tuple(Operand(*o) for o in operands),
                 tuple(fusion.Link(row, tuple(fusion.Result(a) if isinstance(a, int) else a
                                              for a in args), dtype)
                       for row, args, dtype in links), width)


GPU_CASES = (
    GpuCase("bf16_add_gelu_mul_registers", _chain(
        "registers", [("x", "bf16", "tile"), ("y", "bf16", "tile"), ("z", "bf16", "tile")],
        [("add", ("x", "y"), "bf16"), ("gelu", (0,), "bf16"), ("mul", (1, "z"), "bf16")]),
        rtol=2.0**-6, atol=2.0**-10),
    GpuCase("f32_scale_bias_silu_threads", _chain(
        "threads", [("x", "f32", "tile"), ("s", "f32", "scalar"), ("c", "f32", "column")],
        [("mul", ("x", "s"), "f32"), ("add", (0, "c"), "f32"), ("silu", (1,), "f32")],
        width=44), rtol=2.0**-20, atol=2.0**-24),
    GpuCase("f16_exp_mul_row_to_bf16_threads", _chain(
        "threads", [("x", "f16", "tile"), ("r", "f16", "row")],
        [("exp", ("x",), "f16"), ("mul", (0, "r"), "f16"), ("cast", (1,), "bf16")],
        width=36), rtol=2.0**-6, atol=2.0**-10),
    GpuCase("f16_sub_tanh_f32_registers", _chain(
        "registers", [("x", "f16", "tile"), ("y", "f16", "tile"), ("s", "f32", "scalar")],
        [("sub", ("x", "y"), "f16"), ("tanh", (0,), "f32"), ("add", (1, "s"), "f32")]),
        rtol=2.0**-20, atol=2.0**-24),
    GpuCase("e4m3_temporaries_threads", _chain(
        "threads", [("x", "f32", "tile"), ("s", "f32", "scalar")],
        [("cast", ("x",), "f8e4m3"), ("mul", (0, "s"), "f8e4m3"), ("cast", (1,), "f32")],
        width=64), rtol=2.0**-3, atol=2.0**-9),
)
