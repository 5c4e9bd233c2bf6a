"""Running the op library's kernels on the CPU, thread by thread: the null tier's emulator.

An elementwise kernel has no barriers, shared memory or communication between
threads, so running its threads one after another computes what the GPU
computes. `emulate` takes a tile program (the text program.py makes), lowers
it with the compiler's own passes to the "gpu" stage, turns the gpu.func into
a host function of (thread, block, arguments...) that a loop calls for every
block and thread, and runs it with MLIR's ExecutionEngine. Everything of the
kernel is exercised: the piece decomposition, the partition, the vector and
scalar accesses, the staged rounds, the conversions and the bodies, except two
things the host has not got: the NVVM fp8 conversion instructions, replaced by
host functions written from the PTX ISA's description (their actual behaviour
is the gpu tier's to check), and the libdevice math functions (the host uses
libm's, so only exact ops are compared bit for bit). An op on an fp8 input, which the
compiler gives a table in shared memory behind a barrier (elementwise/lut), is emulated
with gmem's per-element arithmetic, the values the table holds (`_without_tables`).

bf16 arithmetic, which the host has not got either, is computed in f32 and rounded to
bf16 after each op (`round_each_bf16_op`), as the GPU's add.rn.bf16x2 and mul.rn.bf16x2
round: upstream's arith-emulate-unsupported-floats alone keeps a chain of bf16 ops in
f32 without rounding in between (a fused op's native steps, add then mul).
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from mlir import execution_engine, ir, passmanager, runtime
from mlir.dialects import arith

from tile_mlir import pipeline
from tile_mlir.context import new_context, parse
from tile_mlir.diagnostics import DiagnosticSink
from tile_mlir.dtypes import DTYPES
from tile_mlir.passes.tile_target import plain_truncf

HOST_PIPELINE = ",".join([
    # libm for the math functions (the host's, not libdevice: accurate, not identical);
    # vectors of them are split into scalar calls before the vector dialect goes
    "expand-strided-metadata", "lower-affine",
    "arith-emulate-unsupported-floats{source-types=bf16 target-type=f32}",
    "arith-expand{include-bf16=true}",
    "math-expand-ops{ops=rsqrt}", "convert-math-to-libm", "convert-scf-to-cf",
    "convert-vector-to-llvm",
    "convert-math-to-llvm", "finalize-memref-to-llvm", "convert-arith-to-llvm",
    "convert-index-to-llvm", "convert-cf-to-llvm", "convert-func-to-llvm",
    "reconcile-unrealized-casts",
])


class NotEmulated(Exception):
    """The kernel uses an instruction the host cannot run."""


# NVVM's packed fp8 conversions, as host functions written from the PTX ISA's description
# of cvt: to f16x2 exactly; from two f32 (a, b) to bytes with b's in the low byte (element
# 0), rounded to nearest even and saturated to the largest finite value, NaN kept. The
# gpu tier checks the real instructions against torch.
_FP8_CALLS = [
    (re.compile(r"nvvm\.convert\.f8x2\.to\.f16x2 (%[\w#]+) : vector<2xi8>\((\w+)\) "
                r"-> vector<2xf16>"),
     r"func.call @__to_f16x2_\2(\1) : (vector<2xi8>) -> vector<2xf16>"),
    (re.compile(r"nvvm\.convert\.f32x2\.to\.f8x2 (%[\w#]+), (%[\w#]+) \{[^}]*\} : "
                r"vector<2xi8>\((\w+)\)"),
     r"func.call @__from_f32x2_\3(\1, \2) : (f32, f32) -> vector<2xi8>"),
]


# NVVM's integer intrinsics the kernels call (Philox's mul.hi.u32), as host functions.
_INTRINSIC_CALLS = [
    (re.compile(r'llvm\.call_intrinsic "llvm\.nvvm\.mulhi\.ui"\((%[\w#-]+), (%[\w#-]+)\) '
                r': \(i32, i32\) -> i32'),
     r"func.call @__mulhi_ui(\1, \2) : (i32, i32) -> i32"),
    # fp8 division's div.approx.f32 (bodies.div_fp8): the exact quotient, whose fp8
    # rounding the approximation's equals
    (re.compile(r'llvm\.call_intrinsic "llvm\.nvvm\.div\.approx\.f"\((%[\w#-]+), (%[\w#-]+)\) '
                r': \(f32, f32\) -> f32'),
     r"arith.divf \1, \2 : f32"),
    # the narrow bodies' ex2.approx.f32 and lg2.approx.f32 (bodies.py, the MUFU's
    # approximations): the host's exp2f and log2f, within one ulp of a narrow result
    (re.compile(r'llvm\.call_intrinsic "llvm\.nvvm\.ex2\.approx\.f32"\((%[\w#-]+)\) '
                r': \(f32\) -> f32'),
     r"math.exp2 \1 : f32"),
    (re.compile(r'llvm\.call_intrinsic "llvm\.nvvm\.lg2\.approx\.f"\((%[\w#-]+)\) '
                r': \(f32\) -> f32'),
     r"math.log2 \1 : f32"),
]

INTRINSIC_HELPERS = """
  func.func private @__mulhi_ui(%a: i32, %b: i32) -> i32 {
    %lo, %hi = arith.mului_extended %a, %b : i32
    func.return %hi : i32
  }"""


def _host_conversions(text: str) -> str:
    for pattern, call in _FP8_CALLS + _INTRINSIC_CALLS:
        text = pattern.sub(call, text)
    return text


def _from_f32(name: str, bias: int, mantissa: int, largest: int) -> str:
    """Host f32 x2 -> fp8 x2 (cvt.rn.satfinite): normal results rebias and round the
    dropped mantissa bits to nearest even; below the smallest normal, adding a power of
    two leaves the value rounded to the subnormal step in the low bits; then saturate."""
    drop = 23 - mantissa
    normal_min = (127 - bias + 1) << 23  # the f32 bits of the smallest normal
    magic = (127 - bias + 1 + drop) << 23  # 2^(emin + drop): its ulp is the subnormal step
    return f"""
  func.func private @__from_f32x2_{name}(%hi: f32, %lo: f32) -> vector<2xi8> {{
    %x = vector.from_elements %lo, %hi : vector<2xf32>
    %bits = arith.bitcast %x : vector<2xf32> to vector<2xi32>
    %c_sign = arith.constant dense<-2147483648> : vector<2xi32>
    %c_abs = arith.constant dense<2147483647> : vector<2xi32>
    %sign = arith.andi %bits, %c_sign : vector<2xi32>
    %mag = arith.andi %bits, %c_abs : vector<2xi32>
    %c_rebias = arith.constant dense<{(127 - bias) << 23}> : vector<2xi32>
    %rebiased = arith.subi %mag, %c_rebias : vector<2xi32>
    %c_drop = arith.constant dense<{drop}> : vector<2xi32>
    %c_one = arith.constant dense<1> : vector<2xi32>
    %c_half = arith.constant dense<{(1 << (drop - 1)) - 1}> : vector<2xi32>
    %kept = arith.shrui %rebiased, %c_drop : vector<2xi32>
    %odd = arith.andi %kept, %c_one : vector<2xi32>
    %up = arith.addi %rebiased, %c_half : vector<2xi32>
    %up2 = arith.addi %up, %odd : vector<2xi32>
    %normal = arith.shrui %up2, %c_drop : vector<2xi32>
    %fmag = arith.bitcast %mag : vector<2xi32> to vector<2xf32>
    %c_magic = arith.constant dense<{magic}> : vector<2xi32>
    %fmagic = arith.bitcast %c_magic : vector<2xi32> to vector<2xf32>
    %sum = arith.addf %fmag, %fmagic : vector<2xf32>
    %sumbits = arith.bitcast %sum : vector<2xf32> to vector<2xi32>
    %sub = arith.subi %sumbits, %c_magic : vector<2xi32>
    %c_normal = arith.constant dense<{normal_min}> : vector<2xi32>
    %is_sub = arith.cmpi ult, %mag, %c_normal : vector<2xi32>
    %r = arith.select %is_sub, %sub, %normal : vector<2xi1>, vector<2xi32>
    %c_inf = arith.constant dense<2139095040> : vector<2xi32>
    %huge = arith.cmpi uge, %mag, %c_inf : vector<2xi32>
    %c_max = arith.constant dense<{largest}> : vector<2xi32>
    %big = arith.cmpi ugt, %r, %c_max : vector<2xi32>
    %over = arith.ori %huge, %big : vector<2xi1>
    %sat = arith.select %over, %c_max, %r : vector<2xi1>, vector<2xi32>
    %is_nan = arith.cmpi ugt, %mag, %c_inf : vector<2xi32>
    %c_nan = arith.constant dense<127> : vector<2xi32>
    %v = arith.select %is_nan, %c_nan, %sat : vector<2xi1>, vector<2xi32>
    %c24 = arith.constant dense<24> : vector<2xi32>
    %s = arith.shrui %sign, %c24 : vector<2xi32>
    %signed = arith.ori %v, %s : vector<2xi32>
    %bytes = arith.trunci %signed : vector<2xi32> to vector<2xi8>
    func.return %bytes : vector<2xi8>
  }}"""


# compiler-rt's f32 -> bf16 (round to nearest even, NaN kept quiet), which the host's x86
# backend calls to materialize a bf16 vector constant (RoPE's NaN fill) and the JIT lacks
TRUNCSFBF2 = """
  func.func @__truncsfbf2(%x: f32) -> bf16 {
    %bits = arith.bitcast %x : f32 to i32
    %c16 = arith.constant 16 : i32
    %c1 = arith.constant 1 : i32
    %half = arith.constant 32767 : i32
    %quiet = arith.constant 4194304 : i32
    %high = arith.shrui %bits, %c16 : i32
    %odd = arith.andi %high, %c1 : i32
    %up = arith.addi %bits, %half : i32
    %even = arith.addi %up, %odd : i32
    %rounded = arith.shrui %even, %c16 : i32
    %nan_bits = arith.ori %bits, %quiet : i32
    %nan = arith.shrui %nan_bits, %c16 : i32
    %is_nan = arith.cmpf uno, %x, %x : f32
    %r32 = arith.select %is_nan, %nan, %rounded : i32
    %r16 = arith.trunci %r32 : i32 to i16
    %r = arith.bitcast %r16 : i16 to bf16
    func.return %r : bf16
  }"""

FP8_HELPERS = TRUNCSFBF2 + _from_f32("f8E4M3FN", 7, 3, 0x7E) + _from_f32("f8E5M2", 15, 2, 0x7B) + """
  func.func private @__to_f16x2_f8E5M2(%v: vector<2xi8>) -> vector<2xf16> {
    %w = arith.extui %v : vector<2xi8> to vector<2xi16>
    %c8 = arith.constant dense<8> : vector<2xi16>
    %h = arith.shli %w, %c8 : vector<2xi16>
    %f = arith.bitcast %h : vector<2xi16> to vector<2xf16>
    func.return %f : vector<2xf16>
  }
  func.func private @__to_f16x2_f8E4M3FN(%v: vector<2xi8>) -> vector<2xf16> {
    %w = arith.extui %v : vector<2xi8> to vector<2xi16>
    %c7f = arith.constant dense<127> : vector<2xi16>
    %mag = arith.andi %w, %c7f : vector<2xi16>
    %c7 = arith.constant dense<7> : vector<2xi16>
    %h = arith.shli %mag, %c7 : vector<2xi16>
    %f16 = arith.bitcast %h : vector<2xi16> to vector<2xf16>
    %f32 = arith.extf %f16 : vector<2xf16> to vector<2xf32>
    %c256 = arith.constant dense<256.0> : vector<2xf32>
    %scaled = arith.mulf %f32, %c256 : vector<2xf32>
    %is_nan = arith.cmpi eq, %mag, %c7f : vector<2xi16>
    %nan = arith.constant dense<0x7FC00000> : vector<2xf32>
    %value = arith.select %is_nan, %nan, %scaled : vector<2xi1>, vector<2xf32>
    %neg = arith.negf %value : vector<2xf32>
    %c80 = arith.constant dense<128> : vector<2xi16>
    %signbit = arith.andi %w, %c80 : vector<2xi16>
    %c0 = arith.constant dense<0> : vector<2xi16>
    %is_neg = arith.cmpi ne, %signbit, %c0 : vector<2xi16>
    %signed = arith.select %is_neg, %neg, %value : vector<2xi1>, vector<2xf32>
    %r = arith.truncf %signed : vector<2xf32> to vector<2xf16>
    func.return %r : vector<2xf16>
  }"""


_HEADER = re.compile(r"gpu\.func @(\w+)\((.*?)\) kernel attributes \{(.*?)\} \{", re.S)


def _split_args(text: str) -> list[tuple[str, str]]:
    """(name, type) of each argument in a printed argument list."""
    args, depth, start = [], 0, 0
    for i, ch in enumerate(text + ","):
        if ch in "<({[":
            depth += 1
        elif ch in ">)}]":
            depth -= 1
        elif ch == "," and depth == 0:
            name, _, type_ = text[start:i].strip().partition(":")
            args.append((name.strip(), re.sub(r"\s*\{.*\}$", "", type_.strip())))
            start = i + 1
    return args


def _without_tables(module: ir.Module) -> None:
    """Ops dispatched to elementwise/lut (an fp8 input's table in shared memory, behind a
    barrier) take gmem instead, which computes the same values per element: threads run
    one after another here. The gpu tier runs the tables."""
    def visit(op: ir.Operation) -> ir.WalkResult:
        variant = op.attributes.get("variant")
        if variant is not None and ir.StringAttr(variant).value == "lut":
            op.attributes["variant"] = ir.StringAttr.get("gmem")
        return ir.WalkResult.ADVANCE

    with module.context:
        module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)


def host_module(text: str) -> tuple[str, list[tuple[str, str]], int]:
    """The host version of a tile program's kernel: (module text, arguments, threads)."""
    context = new_context()
    module = parse(text, "kernel.mlir", context)
    sink = DiagnosticSink()
    expand = pipeline.Expander().expand
    if not pipeline.run(module, expand("tile-verify,tile-fuse,tile-dispatch"), sink):
        raise RuntimeError("\n".join(str(d) for d in sink.diagnostics))
    _without_tables(module)
    if not pipeline.run(module, expand("tile-to-gpu"), sink):
        raise RuntimeError("\n".join(str(d) for d in sink.diagnostics))
    gpu_text = _host_conversions(str(module))
    # register tiles (private allocas) are the host thread's stack memory alike
    gpu_text = gpu_text.replace(", #gpu.address_space<private>", "")
    stray_nvvm = re.search(r"nvvm[.][\w.]+", gpu_text)
    if stray_nvvm:
        raise NotEmulated(f"the kernel uses {stray_nvvm.group(0)}")
    match = _HEADER.search(gpu_text)
    assert match, "no kernel in the program"
    name, arg_text, attributes = match.groups()
    block = re.search(r"known_block_size = array<i32: (\d+)", attributes)
    assert block, "the kernel does not fix its block size"
    threads = int(block.group(1))
    body_start = match.end()
    body_end = gpu_text.index("gpu.return", body_start)
    body = gpu_text[body_start:body_end]
    body = re.sub(r"gpu\.thread_id\s+x", "arith.maxui %tid_h, %tid_h : index", body)
    body = re.sub(r"gpu\.block_id\s+x", "arith.maxui %bid_h, %bid_h : index", body)
    body = re.sub(r"gpu\.block_id\s+y", "arith.maxui %bidy_h, %bidy_h : index", body)
    stray = re.search(r"gpu[.]\w+", body)
    if stray:
        raise NotEmulated(f"the kernel uses {stray.group(0)}")
    args = _split_args(arg_text)
    params = ", ".join(f"{n}: {t}" for n, t in args)
    names = ", ".join(n for n, _ in args)
    types = ", ".join(t for _, t in args)
    host = f"""module {{
{FP8_HELPERS}
{INTRINSIC_HELPERS}
  func.func private @{name}(%tid_h: index, %bid_h: index, %bidy_h: index, {params}) {{
{body}    func.return
  }}
  func.func @run(%grid_h: index, %gridy_h: index, {params})
      attributes {{llvm.emit_c_interface}} {{
    %c0_h = arith.constant 0 : index
    %c1_h = arith.constant 1 : index
    %ct_h = arith.constant {threads} : index
    scf.for %by_h = %c0_h to %gridy_h step %c1_h {{
      scf.for %b_h = %c0_h to %grid_h step %c1_h {{
        scf.for %t_h = %c0_h to %ct_h step %c1_h {{
          func.call @{name}(%t_h, %b_h, %by_h, {names}) : (index, index, index, {types}) -> ()
        }}
      }}
    }}
    func.return
  }}
}}
"""
    return host, args, threads


@dataclass
class Compiled:
    engine: Any
    args: list[tuple[str, str]]
    context: ir.Context


_BF16_KEPT = frozenset(("arith.extf", "arith.truncf", "arith.bitcast", "arith.constant",
                        "arith.select", "arith.cmpf"))
"""bf16 ops that compute nothing to round (conversions, moves, comparisons)."""


def _operations(op: ir.Operation) -> list[ir.Operation]:
    found = []
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                found.append(inner.operation)
                found += _operations(inner.operation)
    return found


def _bf16(type_: ir.Type) -> bool:
    element = type_.element_type if isinstance(type_, ir.VectorType) else type_
    return isinstance(element, ir.BF16Type)


def _widened(type_: ir.Type) -> ir.Type:
    if isinstance(type_, ir.VectorType):
        return ir.VectorType.get(type_.shape, ir.F32Type.get())
    return ir.F32Type.get()


def round_each_bf16_op(module: ir.Module) -> None:
    """Every arith/math op on bf16 as an f32 op between extf and truncf, so that each
    result is rounded to bf16 on its own (see the module docstring)."""
    # the host's arith-expand rounds to bf16 only without a named mode; the kernels name
    # to_nearest_even (its own rounding) where an integer went to f32
    plain_truncf(module.operation)
    for op in _operations(module.operation):
        results = list(op.results)
        if op.name.split(".")[0] not in ("arith", "math") or op.name in _BF16_KEPT or \
                len(results) != 1 or not _bf16(results[0].type):
            continue
        with ir.InsertionPoint(op), op.location:
            operands = [arith.extf(_widened(v.type), v) if _bf16(v.type) else v
                        for v in op.operands]
            wide = ir.Operation.create(op.name, [_widened(results[0].type)], operands,
                                       {name: op.attributes[name] for name in op.attributes})
            rounded = arith.truncf(results[0].type, wide.results[0])
        results[0].replace_all_uses_with(rounded)
        op.erase()


@cache
def compiled(text: str) -> Compiled:
    """A kernel's host version, lowered and JIT-compiled (once per program)."""
    host, args, _ = host_module(text)
    context = ir.Context()
    with context:
        module = ir.Module.parse(host)
        round_each_bf16_op(module)
        passmanager.PassManager.parse(f"builtin.module({HOST_PIPELINE})").run(module.operation)
        engine = execution_engine.ExecutionEngine(module, opt_level=2)
    return Compiled(engine, args, context)


_SCALARS = {"f32": ctypes.c_float, "i32": ctypes.c_int32, "i64": ctypes.c_int64,
            "i1": ctypes.c_bool, "f64": ctypes.c_double, "index": ctypes.c_int64}
CARRIERS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@dataclass
class Buffer:
    """Host memory standing for a device allocation at a made-up address."""

    array: np.ndarray  # 1-D, contiguous
    address: int  # the device address the library was told

    def at(self, pointer: int) -> Any:
        """A memref descriptor of the memory from `pointer` on."""
        itemsize = self.array.dtype.itemsize
        start = (pointer - self.address) // itemsize
        assert 0 <= start <= self.array.size and (pointer - self.address) % itemsize == 0
        carrier = self.array.view(CARRIERS[itemsize])[start:]
        if carrier.size == 0:
            carrier = np.zeros(1, carrier.dtype)
        return ctypes.pointer(ctypes.pointer(runtime.get_ranked_memref_descriptor(carrier)))


Grid = int | tuple[int, int]
"""A grid of CTAs: a count, or x and y (simt.run takes the same)."""


def grid_xy(grid: Grid) -> tuple[int, int]:
    """The grid's x and y sizes."""
    return (grid, 1) if isinstance(grid, int) else grid


def grid_arguments(grid: Grid) -> list[Any]:
    """The host module's @run's first arguments: the grid's x and y sizes."""
    x, y = grid_xy(grid)
    return [ctypes.pointer(ctypes.c_int64(x)), ctypes.pointer(ctypes.c_int64(y))]


def run(text: str, grid: Grid, args: Sequence[Any], buffers: Sequence[Buffer]) -> None:
    """Run the kernel of `text` over `grid` blocks: `args` as dispatch.kernel_arguments
    gives them (pointers are made-up addresses inside `buffers`)."""
    program = compiled(text)
    packed = grid_arguments(grid)
    for (_, type_), value in zip(program.args, args, strict=True):
        if type_.startswith("memref"):
            buffer = next(b for b in buffers
                          if b.address <= value < b.address + max(b.array.nbytes, 1) + 16)
            packed.append(buffer.at(value))
        else:
            packed.append(ctypes.pointer(_SCALARS[type_](value)))
    program.engine.invoke("run", *packed)


def dtype_of(name: str) -> np.dtype:
    return DTYPES[name].np_dtype()
