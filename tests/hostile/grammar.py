"""Tile kernels from the dialect's grammar (dialect/tile.irdl.mlir), and ways to break them.

A `Kernel` is a small model of one gpu.func holding tile ops: its arguments,
its ops (tile.alloc, tile.copy, tile.elementwise, tile.reduce, tile.prefetch) with their
attributes as IR text, its attributes (known_block_size) and what encloses
it. `valid_kernel` builds one that should compile (one of a few templates:
global, shared and register operands, every elementwise op of the registry,
reductions); the perturbations in PERTURBATIONS each break one thing in it
(an extent, a type, an attribute, an operand, the scope, the block size, the
layout, what encloses the kernel), and `render` writes it as IR text.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from tile_mlir import op_table
from tile_mlir.dtypes import DTYPES
from tile_mlir.lowering.variants.predicates import MEMORY_DTYPES

from . import layouts

SHARED = "#gpu.address_space<workgroup>"
PRIVATE = "#gpu.address_space<private>"

HOSTILE_EXTENTS = ("0", "1", "3", "2147483647", "2147483648", "4294967296", "1099511627776",
                   "4611686018427387904", "9223372036854775807", "?")
ODD_ELEMENT_TYPES = ("index", "complex<f32>", "vector<4xf32>", "tf32", "i3", "ui8", "si32",
                     "f8E4M3FNUZ", "f4E2M1FN", "i128", "f80", "i0", "!llvm.ptr",
                     "memref<4xf32>", "tuple<f32>", "none")
ODD_SPACES = ("#gpu.address_space<global>", "1", "3", "5", "7", "0", '"shared"',
              "#gpu.address_space<workgroup>", "#gpu.address_space<private>",
              '#tile.layout<"S[4]">', "-1 : i64", "unit")
SCOPES = ("thread", "warp", "warpgroup", "cta")
ODD_SCOPES = ("grid", "", "CTA", "cta ", "warps", "\\00", "clusters", "thread\\0Awarp")
BAD_ATTRIBUTE_VALUES = (
    "1 : i32", "-1 : i64", "0 : i64", "9223372036854775807 : i64", "1.5 : f32",
    "0x7FC00000 : f32", "1.0e+300 : f64", '"x"', '""', "unit", "true", "false", "[1, 2]", "[]",
    "array<i64: 1>", "array<i32: 0, 0, 0, 0>", "array<i64>", "dense<1> : tensor<2xi32>",
    '#tile.layout<"S[4]">', "{a = 1 : i32}", "@sym", "f32", "memref<4xf32>",
    "affine_map<(d0) -> (d0)>", "#gpu.address_space<workgroup>", "array<f32: 1.0>",
    "array<i64: -9223372036854775808>", "array<i64: 1, 1, 1, 1, 1, 1, 1, 1, 1>",
)
OP_ATTRIBUTES = {
    "tile.copy": ("scope", "variant", "padding"),
    "tile.elementwise": ("op", "scope", "variant", "operandSegmentSizes", "vector_bytes", "stage",
                         "expr"),
    "tile.reduce": ("kind", "scope", "axes", "accum", "scale", "variant"),
    "tile.prefetch": ("scope", "variant"),
    "tile.alloc": ("layout",),
}
VARIANTS = ("gmem", "lut", "smem", "reg", "reg_mem", "mem", "gmem_smem", "shared", "local", "columns",
            "vectors", "bogus", "")
UNARY = ("exp", "sqrt", "neg", "relu", "gelu", "silu", "abs", "tanh", "sigmoid", "copy")
BINARY = ("add", "sub", "mul", "maximum", "minimum", "div")
ODD_EXPRS = ('["add(%0, %1) : f32"]', '["exp($0) : f32"]', '["add(%9, %1) : f32"]',
             '["bogus(%0) : f32"]', '["add(%0) : f32"]', '["add(%0, %1)"]', '["exp(%0) : f99"]',
             "[]", "[1, 2]", '["exp(%0) : f32", "gelu($0) : f16"]', '["exp(%-1) : f32"]',
             '["exp($1) : f32", "exp(%0) : f32"]', '["exp(%0) : f32", "exp($0) : f32", '
             '"exp($5) : f32"]', '["(%0) : f32"]', '["exp(%0):f32"]', '["exp(%0) : f32 : f32"]',
             '"exp(%0) : f32"', '["exp(%0, ) : f32"]', '["where(%0, %1, %1) : f32"]',
             '["exp(%0) : f32", ' + ", ".join(f'"exp(${i}) : f32"' for i in range(300)) + "]")


@dataclass
class Val:
    """An SSA value: a kernel argument or a tile.alloc result.

    A memref has a shape (extents as text: "?" is dynamic) and optionally a layout
    and a memory space; `raw` spells a type outright (unranked, odd ones).
    """

    name: str
    element: str
    shape: list[str] | None = None  # None: a scalar
    layout: str = ""
    space: str = ""
    raw: str | None = None

    @property
    def type(self) -> str:
        if self.raw is not None:
            return self.raw
        if self.shape is None:
            return self.element
        dims = "".join(f"{d}x" for d in self.shape)
        extras = "".join(f", {e}" for e in (self.layout, self.space) if e)
        return f"memref<{dims}{self.element}{extras}>"

    @property
    def is_memref(self) -> bool:
        return self.shape is not None and self.raw is None


@dataclass
class Op:
    """A tile op in generic form; `types` overrides the operand types of its signature."""

    name: str
    operands: list[Val]
    attrs: dict[str, str]
    result: Val | None = None
    types: list[str] | None = None
    result_types: list[str] = field(default_factory=list)

    def render(self) -> str:
        names = ", ".join(v.name for v in self.operands)
        types = self.types if self.types is not None else [v.type for v in self.operands]
        attrs = ", ".join(f"{k} = {v}" for k, v in self.attrs.items())
        results = [self.result.type] if self.result else self.result_types
        if self.result:
            lhs = f"{self.result.name} = "
        elif results:
            lhs = ", ".join(f"%r{i}" for i in range(len(results))) + " = "
        else:
            lhs = ""
        return (f'{lhs}"{self.name}"({names}) {{{attrs}}} : ({", ".join(types)}) -> '
                f"({', '.join(results)})")


@dataclass
class Kernel:
    args: list[Val]
    ops: list[Op]
    attrs: dict[str, str]
    kernel_keyword: bool = True
    wrapper: str = "gpu"  # gpu, func, bare (ops at the top level), loop (inside scf.for)
    container_attr: bool = True
    module_attrs: str = ""  # on the gpu.module, e.g. a dlti.dl_spec

    def memrefs(self) -> list[Val]:
        values = [*self.args, *(op.result for op in self.ops if op.result)]
        return [v for v in values if v.is_memref]

    def values(self) -> list[Val]:
        return [*self.args, *(op.result for op in self.ops if op.result)]

    def compute_ops(self) -> list[Op]:
        """The ops other than tile.alloc (all ops when there are none)."""
        return [op for op in self.ops if op.name != "tile.alloc"] or self.ops


# ------------------------------------------------------------------- rendering


def _body(kernel: Kernel, indent: str) -> list[str]:
    lines = [indent + op.render() for op in kernel.ops]
    if kernel.wrapper == "loop":
        lines = [f"{indent}%lo = arith.constant 0 : index",
                 f"{indent}%hi = arith.constant 2 : index",
                 f"{indent}%st = arith.constant 1 : index",
                 f"{indent}scf.for %iv = %lo to %hi step %st {{",
                 *("  " + line for line in lines), f"{indent}}}"]
    return lines


def render(kernel: Kernel) -> str:
    args = ", ".join(f"{v.name}: {v.type}" for v in kernel.args)
    attrs = ", ".join(f"{k} = {v}" for k, v in kernel.attrs.items())
    head = "module attributes {gpu.container_module} {" if kernel.container_attr else "module {"
    if kernel.wrapper == "bare":
        return "\n".join([head, *_body(kernel, "  "), "}", ""])
    if kernel.wrapper == "func":
        return "\n".join([head, f"  func.func @k({args}) attributes {{{attrs}}} {{",
                          *_body(kernel, "    "), "    return", "  }", "}", ""])
    keyword = " kernel" if kernel.kernel_keyword else ""
    attr_text = f" attributes {{{attrs}}}" if attrs else ""
    module_attrs = f" attributes {{{kernel.module_attrs}}}" if kernel.module_attrs else ""
    return "\n".join([head, f"  gpu.module @m{module_attrs} {{",
                      f"    gpu.func @k({args}){keyword}{attr_text} {{",
                      *_body(kernel, "      "), "      gpu.return", "    }", "  }", "}", ""])


# ---------------------------------------------------------------- valid kernels


def block(threads: int) -> str:
    return f"array<i32: {threads}, 1, 1>"


def _shape(rng: random.Random) -> list[str]:
    rank = rng.choice((1, 1, 2, 2, 3))
    return [str(rng.choice((1, 2, 4, 8, 16, 32, 64, 3, 5, 7, 33, 100))) for _ in range(rank)]


def _arg(kernel: Kernel, element: str, shape: list[str] | None = None) -> Val:
    value = Val(f"%{'a' if shape is not None else 's'}{len(kernel.args)}", element, shape)
    kernel.args.append(value)
    return value


def _alloc(kernel: Kernel, layout: str, element: str, shape: list[str], space: str) -> Val:
    value = Val(f"%t{len(kernel.ops)}", element, list(shape), space=space)
    kernel.ops.append(Op("tile.alloc", [], {"layout": f'#tile.layout<"{layout}">'}, value))
    return value


def row_major(shape: list[str]) -> str:
    return f"S[({', '.join(shape)})]" if len(shape) > 1 else f"S[{shape[0]}]"


def segments(inputs: int) -> str:
    a, b, c = min(inputs, 1), min(max(inputs - 1, 0), 1), max(inputs - 2, 0)
    return f"array<i32: 1, {a}, {b}, {c}>"


def _ew_inputs(kernel: Kernel, row: op_table.EwOp, shape: list[str], dtype: str) -> list[Val]:
    inputs = []
    for i in range(row.arity):
        if row.indexed and i == row.arity - 1:
            inputs.append(_arg(kernel, "i64"))
        elif i in row.scalar_only:  # scalars share the variadic slot's one type
            scalar = row.kept_type(i) or ("i64" if i in row.keep else
                                          "f32" if dtype.startswith("f8") else dtype)
            inputs.append(_arg(kernel, DTYPES[scalar].mlir))
        elif i in row.keep:
            inputs.append(_arg(kernel, "i1", shape))
        else:
            inputs.append(_arg(kernel, DTYPES[dtype].mlir, shape))
    return inputs


def elementwise_kernel(rng: random.Random, row: op_table.EwOp | None = None) -> Kernel:
    """One elementwise op on global memrefs at scope cta (any row of the registry, at a
    type the memory variants take: the registry's f64, i16 and i8 rows have none)."""
    row = row or rng.choice([r for r in op_table.ELEMENTWISE.values()
                             if set(r.dtypes) & set(MEMORY_DTYPES)])
    dtype = rng.choice([d for d in row.dtypes if d in MEMORY_DTYPES])
    shape = _shape(rng)
    kernel = Kernel([], [], {"known_block_size": block(rng.choice((32, 64, 128, 256)))})
    dst = _arg(kernel, "i1" if row.out == "bool" else DTYPES[dtype].mlir, shape)
    inputs = _ew_inputs(kernel, row, shape, dtype)
    attrs = {"op": f'"{row.name}"', "scope": '"cta"', "operandSegmentSizes": segments(len(inputs))}
    kernel.ops.append(Op("tile.elementwise", [dst, *inputs], attrs))
    return kernel


def shared_kernel(rng: random.Random) -> Kernel:
    """Seed 000's shape: copy into shared memory (the input prefetched into L2 first), an
    elementwise op there, copy back."""
    shape = _shape(rng)
    element = rng.choice(("f32", "f16", "bf16"))
    kernel = Kernel([], [], {"known_block_size": block(rng.choice((32, 64, 128, 256, 1024)))})
    a = _arg(kernel, element, shape)
    smem = _alloc(kernel, row_major(shape), element, shape, SHARED)
    op = rng.choice(("sqrt", "exp", "neg", "relu", "abs"))
    kernel.ops += [
        Op("tile.prefetch", [a], {"scope": '"cta"'}),
        Op("tile.copy", [smem, a], {"scope": '"cta"'}),
        Op("tile.elementwise", [smem, smem], {"op": f'"{op}"', "scope": '"cta"',
                                               "operandSegmentSizes": segments(1)}),
        Op("tile.copy", [a, smem], {"scope": '"cta"'}),
    ]
    return kernel


def register_kernel(rng: random.Random) -> Kernel:
    """Seed 003's shape: a warp's register tile, one row per lane."""
    cols = str(rng.choice((1, 2, 4, 8, 16)))
    element = rng.choice(("f32", "f16"))
    kernel = Kernel([], [], {"known_block_size": block(rng.choice((32, 64)))})
    a = _arg(kernel, element, ["32", cols])
    smem = _alloc(kernel, f"S[(32, {cols})]", element, ["32", cols], SHARED)
    regs = _alloc(kernel, f"S[(32, {cols}):(1@laneid, 1)]", element, ["32", cols], PRIVATE)
    scope = '"warp"'
    kernel.ops += [
        Op("tile.copy", [smem, a], {"scope": scope}),
        Op("tile.copy", [regs, smem], {"scope": scope}),
        Op("tile.elementwise", [regs, regs], {"op": '"sqrt"', "scope": scope,
                                               "operandSegmentSizes": segments(1)}),
        Op("tile.copy", [smem, regs], {"scope": scope}),
        Op("tile.copy", [a, smem], {"scope": scope}),
    ]
    return kernel


def reduce_kernel(rng: random.Random) -> Kernel:
    """A reduction over the last axis, in shared or global memory."""
    rows, cols = str(rng.choice((1, 2, 4, 8, 32))), str(rng.choice((1, 2, 8, 32, 33, 64, 128)))
    element = rng.choice(("f32", "f16", "bf16"))  # the reduction variants' types
    kernel = Kernel([], [], {"known_block_size": block(rng.choice((32, 64, 128)))})
    a, b = _arg(kernel, element, [rows, cols]), _arg(kernel, element, [rows])
    attrs = {"kind": f'"{rng.choice(("sum", "max", "min", "prod"))}"',
             "axes": "array<i64: -1>", "accum": rng.choice(("false", "true")), "scope": '"cta"'}
    if rng.random() < 0.3:
        attrs["scale"] = "0.5 : f32"
    if rng.random() < 0.5:
        sa = _alloc(kernel, f"S[({rows}, {cols})]", element, [rows, cols], SHARED)
        sb = _alloc(kernel, f"S[{rows}]", element, [rows], SHARED)
        kernel.ops += [Op("tile.copy", [sa, a], {"scope": '"cta"'}),
                       Op("tile.reduce", [sb, sa], attrs),
                       Op("tile.copy", [b, sb], {"scope": '"cta"'})]
    else:
        kernel.ops.append(Op("tile.reduce", [b, a], attrs))
    return kernel


def chain_kernel(rng: random.Random) -> Kernel:
    """Elementwise ops chained through shared temporaries (what tile-fuse fuses)."""
    shape = _shape(rng)
    element = rng.choice(("f32", "f16", "bf16"))
    kernel = Kernel([], [], {"known_block_size": block(rng.choice((32, 64, 128, 256)))})
    a, b, out = (_arg(kernel, element, shape) for _ in range(3))
    last = a
    for _ in range(rng.choice((1, 2, 3))):
        temp = _alloc(kernel, row_major(shape), element, shape, SHARED)
        binary = rng.random() < 0.5
        op = rng.choice(BINARY if binary else UNARY)
        inputs = [last, b] if binary else [last]
        kernel.ops.append(Op("tile.elementwise", [temp, *inputs], {
            "op": f'"{op}"', "scope": '"cta"', "operandSegmentSizes": segments(len(inputs))}))
        last = temp
    kernel.ops.append(Op("tile.elementwise", [out, last], {
        "op": f'"{rng.choice(UNARY)}"', "scope": '"cta"', "operandSegmentSizes": segments(1)}))
    return kernel


def fused_kernel(rng: random.Random) -> Kernel:
    """A fused elementwise op written out (op = "fused", its steps in expr)."""
    shape, dtype = _shape(rng), rng.choice(("f32", "f16", "bf16"))
    kernel = Kernel([], [], {"known_block_size": block(rng.choice((32, 64, 128, 256)))})
    out, a, b = (_arg(kernel, dtype, shape) for _ in range(3))
    first, last = rng.choice(BINARY), rng.choice(UNARY)
    kernel.ops.append(Op("tile.elementwise", [out, a, b], {
        "op": '"fused"', "scope": '"cta"', "operandSegmentSizes": segments(2),
        "expr": f'["{first}(%0, %1) : {dtype}", "{last}($0) : {dtype}"]'}))
    return kernel


TEMPLATES: tuple[Callable[[random.Random], Kernel], ...] = (
    elementwise_kernel, elementwise_kernel, shared_kernel, register_kernel, reduce_kernel,
    chain_kernel, fused_kernel)


def valid_kernel(rng: random.Random) -> Kernel:
    return rng.choice(TEMPLATES)(rng)


# ---------------------------------------------------------------- perturbations

Perturbation = Callable[[random.Random, Kernel], str]
NO_MEMREF = "no memref left to change"
"""What a perturbation of a memref type says where earlier ones (unranked) left none."""


def _memref(rng: random.Random, kernel: Kernel) -> Val | None:
    """One of the kernel's memref values, or None where it has none left (drawing from the
    generator only where there is one, so that other seeds' kernels stay as they were)."""
    memrefs = kernel.memrefs()
    return rng.choice(memrefs) if memrefs else None


def wrong_attribute(rng: random.Random, kernel: Kernel) -> str:
    op = rng.choice(kernel.ops)
    name = rng.choice(OP_ATTRIBUTES.get(op.name, ("scope",)))
    op.attrs[name] = rng.choice(BAD_ATTRIBUTE_VALUES)
    return f"{op.name} {name} = {op.attrs[name]}"


def drop_attribute(rng: random.Random, kernel: Kernel) -> str:
    op = rng.choice(kernel.ops)
    if not op.attrs:
        return "no attribute to drop"
    name = rng.choice(list(op.attrs))
    del op.attrs[name]
    return f"{op.name} without {name}"


def unknown_attribute(rng: random.Random, kernel: Kernel) -> str:
    op = rng.choice(kernel.ops)
    name = rng.choice(("bogus", "scopee", "Scope", "axis", "layouts", "tile.extra", "vector"))
    op.attrs[name] = rng.choice(BAD_ATTRIBUTE_VALUES)
    return f"{op.name} with {name}"


def hostile_extent(rng: random.Random, kernel: Kernel) -> str:
    value = _memref(rng, kernel)
    if value is None:
        return NO_MEMREF
    assert value.shape is not None
    if not value.shape:
        value.shape.append(rng.choice(HOSTILE_EXTENTS))
    else:
        value.shape[rng.randrange(len(value.shape))] = rng.choice(HOSTILE_EXTENTS)
    return f"{value.name}: {value.type}"


def rank_change(rng: random.Random, kernel: Kernel) -> str:
    value = _memref(rng, kernel)
    if value is None:
        return NO_MEMREF
    assert value.shape is not None
    if value.shape and rng.random() < 0.5:
        value.shape.pop(rng.randrange(len(value.shape)))
    else:
        value.shape.insert(0, rng.choice(("1", "2", "0")))
    return f"{value.name}: {value.type}"


def odd_element_type(rng: random.Random, kernel: Kernel) -> str:
    value = rng.choice(kernel.values())
    value.element = rng.choice((*ODD_ELEMENT_TYPES, "f32", "f64", "i1", "i8", "f8E5M2", "bf16"))
    return f"{value.name}: {value.type}"


def odd_space(rng: random.Random, kernel: Kernel) -> str:
    value = _memref(rng, kernel)
    if value is None:
        return NO_MEMREF
    value.space = rng.choice(ODD_SPACES)
    return f"{value.name}: {value.type}"


def odd_layout_type(rng: random.Random, kernel: Kernel) -> str:
    value = _memref(rng, kernel)
    if value is None:
        return NO_MEMREF
    rank = len(value.shape or [])
    strides = ", ".join(rng.choice(("1", "0", "2", "-1", "?", "4294967296")) for _ in range(rank))
    offset = rng.choice(("0", "?", "3", "-5", "9223372036854775807"))
    value.layout = rng.choice((f"strided<[{strides}], offset: {offset}>", f"strided<[{strides}]>",
                               "affine_map<(d0) -> (d0)>", "affine_map<(d0, d1) -> (d1, d0)>"))
    return f"{value.name}: {value.type}"


def unranked(rng: random.Random, kernel: Kernel) -> str:
    value = _memref(rng, kernel)
    if value is None:
        return NO_MEMREF
    value.raw = rng.choice(("memref<*xf32>", "memref<f32>", "memref<*xf16, 3>", "tensor<4xf32>",
                            "vector<4xf32>", "!gpu.async.token"))
    return f"{value.name}: {value.type}"


def odd_block(rng: random.Random, kernel: Kernel) -> str:
    x = rng.choice((0, 1, 3, 31, 33, 48, 96, 100, 1023, 1025, 2048, 65536, 2147483647, -1, -32))
    text = rng.choice((f"array<i32: {x}, 1, 1>", f"array<i32: 32, {x}, 1>", f"array<i32: {x}>",
                       f"array<i32: {x}, {x}>", f"array<i32: 32, 1, 1, {x}>", "array<i32>",
                       f"array<i64: {x}, 1, 1>", f"{x} : i32", '"32"',
                       f"dense<[{x}, 1, 1]> : vector<3xi32>"))
    kernel.attrs["known_block_size"] = text
    return f"known_block_size = {text}"


def no_block(rng: random.Random, kernel: Kernel) -> str:
    kernel.attrs.pop("known_block_size", None)
    return "no known_block_size"


def odd_scope(rng: random.Random, kernel: Kernel) -> str:
    op = rng.choice(kernel.compute_ops())
    scope = rng.choice((*SCOPES, *ODD_SCOPES))
    op.attrs["scope"] = f'"{scope}"'
    return f"{op.name} scope {scope!r}"


def forced_variant(rng: random.Random, kernel: Kernel) -> str:
    op = rng.choice(kernel.compute_ops())
    op.attrs["variant"] = f'"{rng.choice(VARIANTS)}"'
    return f"{op.name} variant {op.attrs['variant']}"


def unknown_name(rng: random.Random, kernel: Kernel) -> str:
    op = rng.choice(kernel.ops)
    if op.name == "tile.elementwise":
        name = rng.choice(("sqr", "", "ADD", "add ", "max", "min", "\\22", *op_table.ELEMENTWISE))
        op.attrs["op"] = f'"{name}"'
    elif op.name == "tile.reduce":
        name = rng.choice(("mean", "", "sum ", "argmax", "and", "SUM"))
        op.attrs["kind"] = f'"{name}"'
    else:
        name = rng.choice(("tile.move", "tile.Copy", "tile.", "tile.alloca", "tile.layout",
                           "tile.reduce", "tile.elementwise", "tile.copy", "tile.alloc",
                           "tile.prefetch"))
        op.name = name
    return f"{op.name} named {name!r}"


def odd_axes(rng: random.Random, kernel: Kernel) -> str:
    op = rng.choice([op for op in kernel.ops if op.name == "tile.reduce"] or kernel.ops)
    axes = rng.choice(("", "0", "-1", "1", "2", "-3", "0, 0", "-1, 1", "5", "9223372036854775807",
                       "-9223372036854775808", "0, 1, 2, 3"))
    op.attrs["axes"] = f"array<i64: {axes}>" if axes else "array<i64>"
    return f"{op.name} axes [{axes}]"


def operand_count(rng: random.Random, kernel: Kernel) -> str:
    op = rng.choice(kernel.ops)
    if op.operands and rng.random() < 0.5:
        what = f"without {op.operands.pop(rng.randrange(len(op.operands))).name}"
    else:
        extra = rng.choice(kernel.values())
        op.operands.insert(rng.randrange(len(op.operands) + 1), extra)
        what = f"with extra {extra.name}"
    if op.name == "tile.elementwise" and rng.random() < 0.5:
        op.attrs["operandSegmentSizes"] = segments(max(len(op.operands) - 1, 0))
    return f"{op.name} {what}"


def odd_segments(rng: random.Random, kernel: Kernel) -> str:
    op = rng.choice([op for op in kernel.ops if op.name == "tile.elementwise"] or kernel.ops)
    op.attrs["operandSegmentSizes"] = rng.choice((
        "array<i32: 1, 1, 1, 1>", "array<i32: 1, 0, 1, 0>", "array<i32: 0, 1, 1, 0>",
        "array<i32: 1, 1>", "array<i32: 1, 1, 0, -1>", "array<i32: 1, 2, 0, 0>",
        "array<i64: 1, 1, 0, 0>", "array<i32: 1, 1, 0, 2147483647>", "array<i32: 2, 0, 0, 0>"))
    return f"{op.name} operandSegmentSizes {op.attrs['operandSegmentSizes']}"


def signature_mismatch(rng: random.Random, kernel: Kernel) -> str:
    op = rng.choice(kernel.ops)
    types = [v.type for v in op.operands]
    if types:
        types[rng.randrange(len(types))] = rng.choice(("f32", "memref<4xf32>", "i64", "index"))
    op.types = types
    return f"{op.name} signature {types}"


def results(rng: random.Random, kernel: Kernel) -> str:
    op = rng.choice(kernel.compute_ops())
    op.result_types = [rng.choice(("memref<4xf32>", "f32", "i1"))]
    return f"{op.name} with a result"


def scalar_dst(rng: random.Random, kernel: Kernel) -> str:
    op = rng.choice(kernel.compute_ops())
    scalar = _arg(kernel, rng.choice(("f32", "i64", "index", "i1")))
    if op.operands:
        op.operands[0] = scalar
    return f"{op.name} writes a {scalar.type}"


def alias_operands(rng: random.Random, kernel: Kernel) -> str:
    op = rng.choice(kernel.compute_ops())
    if len(op.operands) > 1:
        op.operands[1] = op.operands[0]
    return f"{op.name} reads its dst"


def wrapper(rng: random.Random, kernel: Kernel) -> str:
    choice = rng.choice(("func", "bare", "loop", "not-kernel", "no-container"))
    if choice == "not-kernel":
        kernel.kernel_keyword = False
    elif choice == "no-container":
        kernel.container_attr = False
    else:
        kernel.wrapper = choice
    return f"wrapper {choice}"


def reorder(rng: random.Random, kernel: Kernel) -> str:
    if rng.random() < 0.5:
        rng.shuffle(kernel.ops)
        return "ops shuffled"
    op = rng.choice(kernel.compute_ops())
    kernel.ops.append(Op(op.name, list(op.operands), dict(op.attrs)))
    return f"{op.name} repeated"


def alloc_layout(rng: random.Random, kernel: Kernel) -> str:
    """A tile.alloc with a layout from the notation's grammar (its type follows the
    layout's shape when that is readable, so the check gets past the shape)."""
    text = layouts.layout_text(rng)
    allocs = [op for op in kernel.ops if op.name == "tile.alloc"]
    if not allocs:
        space = rng.choice((SHARED, PRIVATE))
        _alloc(kernel, text, "f32", ["4"], space)
        allocs = [kernel.ops[-1]]
    op = rng.choice(allocs)
    op.attrs["layout"] = f'#tile.layout<"{text}">'
    shape = layouts.layout_shape(text)
    if shape and op.result is not None and rng.random() < 0.7:
        op.result.shape = shape
    return f"layout {text!r}"


def huge_layout(rng: random.Random, kernel: Kernel) -> str:
    """A shared or register buffer of 2^32 to 2^40 elements, layout and type agreeing."""
    extent = rng.choice(("4294967296", "1099511627776", "65536", "1048577"))
    shape = rng.choice(([extent], ["1024", extent], [extent, "1"]))
    lanes = rng.random() < 0.3
    lane_rows = lanes and len(shape) == 2
    text = f"S[({', '.join(shape)}):(1@laneid, 1)]" if lane_rows else row_major(shape)
    space = PRIVATE if lanes else rng.choice((SHARED, PRIVATE))
    value = _alloc(kernel, text, "f32", shape, space)
    targets = [op for op in kernel.compute_ops() if op.operands]
    if targets:
        rng.choice(targets).operands[0] = value
    return f"buffer {value.type}, layout {text}"


def odd_expr(rng: random.Random, kernel: Kernel) -> str:
    """A fused op with steps that do not parse, refer past their inputs, or run long."""
    op = rng.choice([op for op in kernel.ops if op.name == "tile.elementwise"] or kernel.ops)
    op.attrs["op"] = '"fused"'
    op.attrs["expr"] = rng.choice(ODD_EXPRS)
    return f"{op.name} expr {op.attrs['expr'][:60]}"


def padding(rng: random.Random, kernel: Kernel) -> str:
    """A copy that pads: src shorter than dst in one dimension, with a padding value."""
    op = rng.choice([op for op in kernel.ops if op.name == "tile.copy"] or kernel.ops)
    op.attrs["padding"] = rng.choice(("0.0 : f32", "-1.0 : f16", "0 : i32", "0x7FC00000 : f32",
                                      "0xFF800000 : f32", "1.0e+40 : f32", "0.5 : f64"))
    src = op.operands[1] if len(op.operands) > 1 else None
    if src is not None and src.shape and rng.random() < 0.7:
        src.shape = [*src.shape[:-1], str(max(int(src.shape[-1]) // 2, 1))] \
            if src.shape[-1].isdigit() else src.shape
    return f"{op.name} padding {op.attrs['padding']}"


def index_width(rng: random.Random, kernel: Kernel) -> str:
    """A data layout on the gpu.module: the index width the NVVM lowering uses."""
    width = rng.choice(("32", "64", "0", "1", "16", "-1", "128", "16777216", "33"))
    entry = rng.choice((f"index = {width} : i32", f"#dlti.dl_entry<index, {width} : i32>",
                        f"index = {width} : i64", f"index = {width}"))
    kernel.module_attrs = f"dlti.dl_spec = #dlti.dl_spec<{entry}>"
    return kernel.module_attrs


def reshape(rng: random.Random, kernel: Kernel) -> str:
    """Give every memref of one shape another shape, alloc layouts included, so the
    kernel stays consistent: huge, tiny and odd extents reach the lowering."""
    memrefs = [v for v in kernel.memrefs() if v.shape]
    if not memrefs:
        return "nothing to reshape"
    old = list(rng.choice(memrefs).shape or [])
    new = [rng.choice(("1", "2", "3", "31", "33", "127", "1000", "1003", "65537", "2147483648",
                       "4294967296", old[i])) for i in range(len(old))]
    for value in memrefs:
        if value.shape == old:
            value.shape = list(new)
    for op in kernel.ops:
        layout = op.attrs.get("layout", "@")
        if op.result is not None and op.result.shape == new and "@" not in layout:
            op.attrs["layout"] = f'#tile.layout<"{row_major(new)}">'
    return f"{'x'.join(old)} -> {'x'.join(new)}"


def valid_block(rng: random.Random, kernel: Kernel) -> str:
    threads = rng.choice((32, 64, 96, 160, 224, 480, 992, 1024))
    two_d = f"array<i32: 32, {threads // 32}, 1>"
    kernel.attrs["known_block_size"] = rng.choice((block(threads), two_d))
    return f"known_block_size = {kernel.attrs['known_block_size']}"


def strided(rng: random.Random, kernel: Kernel) -> str:
    """A global operand with static, positive strides (padded rows, a broadcast)."""
    values = [v for v in kernel.args if v.is_memref and v.shape and "?" not in v.shape]
    if not values:
        return "nothing to stride"
    value = rng.choice(values)
    dims = [int(d) for d in value.shape or []]
    strides: list[str] = []
    running = 1
    for d in reversed(dims):
        strides.insert(0, str(running if rng.random() < 0.8 else 0))
        running *= d + rng.choice((0, 0, 1, 7))
    value.layout = f"strided<[{', '.join(strides)}], offset: {rng.choice((0, 1, 16))}>"
    return f"{value.name}: {value.type}"


PERTURBATIONS: tuple[Perturbation, ...] = (
    wrong_attribute, drop_attribute, unknown_attribute, hostile_extent, hostile_extent,
    rank_change, odd_element_type, odd_space, odd_layout_type, unranked, odd_block, no_block,
    odd_scope, forced_variant, unknown_name, odd_axes, operand_count, odd_segments,
    signature_mismatch, results, scalar_dst, alias_operands, wrapper, reorder, alloc_layout,
    alloc_layout, huge_layout, index_width, odd_expr, odd_expr,
)
GENTLE_PERTURBATIONS: tuple[Perturbation, ...] = (
    reshape, reshape, valid_block, strided, forced_variant, alias_operands, padding)
"""Perturbations that keep a kernel mostly valid, so that it reaches the lowering."""


def hostile_kernel(rng: random.Random, changes: int) -> tuple[str, list[str]]:
    """A valid kernel with `changes` perturbations, as text, and what was changed: half
    of them of the kinds that keep it valid (or nearly), so the lowering sees them."""
    kernel = valid_kernel(rng)
    what = []
    for _ in range(changes):
        perturb = rng.choice(GENTLE_PERTURBATIONS if rng.random() < 0.5 else PERTURBATIONS)
        what.append(perturb(rng, kernel))
    return render(kernel), what
