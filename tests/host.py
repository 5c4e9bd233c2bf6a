"""Running the op library's kernels on the CPU, thread by thread: the null tier's emulator.

An elementwise kernel has no barriers, shared memory or communication between
threads, so running its threads one after another computes what the GPU
computes. `emulate` takes a tile program (the text program.py makes), lowers
it with the compiler's own passes to the "gpu" stage, turns the gpu.func into
a host function of (thread, block, arguments...) that a loop calls for every
block and thread, and runs it with MLIR's ExecutionEngine. Everything of the
kernel is exercised: the piece decomposition, the partition, the vector and
scalar accesses, the staged rounds, the conversions and the bodies, except the
NVVM conversion instructions of f8e4m3 (no host lowering: those kernels are
refused here and left to the gpu tier) and the libdevice math functions (the
host uses libm's, so only exact ops are compared bit for bit).
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

from tile_mlir import pipeline
from tile_mlir.context import new_context, parse
from tile_mlir.diagnostics import DiagnosticSink
from tile_mlir.dtypes import DTYPES

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
    """The kernel uses an instruction the host cannot run (NVVM's fp8 conversions)."""


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


def host_module(text: str) -> tuple[str, list[tuple[str, str]], int]:
    """The host version of a tile program's kernel: (module text, arguments, threads)."""
    context = new_context()
    module = parse(text, "kernel.mlir", context)
    sink = DiagnosticSink()
    if not pipeline.run(module, pipeline.Expander().expand("tile-to-gpu"), sink):
        raise RuntimeError("\n".join(str(d) for d in sink.diagnostics))
    gpu_text = str(module)
    if "nvvm." in gpu_text:
        raise NotEmulated("the kernel converts fp8 with NVVM instructions")
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
    stray = re.search(r"gpu[.]\w+", body)
    if stray:
        raise NotEmulated(f"the kernel uses {stray.group(0)}")
    args = _split_args(arg_text)
    params = ", ".join(f"{n}: {t}" for n, t in args)
    names = ", ".join(n for n, _ in args)
    types = ", ".join(t for _, t in args)
    host = f"""module {{
  func.func private @{name}(%tid_h: index, %bid_h: index, {params}) {{
{body}    func.return
  }}
  func.func @run(%grid_h: index, {params}) attributes {{llvm.emit_c_interface}} {{
    %c0_h = arith.constant 0 : index
    %c1_h = arith.constant 1 : index
    %ct_h = arith.constant {threads} : index
    scf.for %b_h = %c0_h to %grid_h step %c1_h {{
      scf.for %t_h = %c0_h to %ct_h step %c1_h {{
        func.call @{name}(%t_h, %b_h, {names}) : (index, index, {types}) -> ()
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


@cache
def compiled(text: str) -> Compiled:
    """A kernel's host version, lowered and JIT-compiled (once per program)."""
    host, args, _ = host_module(text)
    context = ir.Context()
    with context:
        module = ir.Module.parse(host)
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


def run(text: str, grid: int, args: Sequence[Any], buffers: Sequence[Buffer]) -> None:
    """Run the kernel of `text` over `grid` blocks: `args` as dispatch.kernel_arguments
    gives them (pointers are made-up addresses inside `buffers`)."""
    program = compiled(text)
    packed: list[Any] = [ctypes.pointer(ctypes.c_int64(grid))]
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
