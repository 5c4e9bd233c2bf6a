"""The gpu tier's side of the op checks: inputs on the GPU, the reference to compare with,
and the cases every op x dtype runs (test_ops_gpu.py and ops_accuracy.py share them).

With torch installed, inputs are CUDA tensors and the reference is torch's own
op on them (fp8, which torch's elementwise kernels mostly do not take, goes
through float32 and back, e4m3fn saturating). Without torch, inputs are NumPy
arrays (the library copies them in and out) and the reference is the
registry's NumPy reference (ops_check.expected).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import math
import multiprocessing
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from support.ops_check import (
    CARRIERS_BY_SIZE,
    Case,
    Report,
    compare,
    expected,
    gated,
    inputs,
    prepared,
    result_shape,
    standard_cases,
)
from tile_mlir import op_table, ops
from tile_mlir.dtypes import DTYPES, FP8
from tile_mlir.ops import kernels

HAVE_TORCH = importlib.util.find_spec("torch") is not None


def torch_module() -> Any:
    import torch

    return torch


def torch_dtype(dtype: str) -> Any:
    return getattr(torch_module(), DTYPES[dtype].numpy)


def to_device(value: np.ndarray, dtype: str) -> Any:
    """A NumPy array (of the library's dtype) as a CUDA tensor, through its bytes."""
    torch = torch_module()
    raw = np.ascontiguousarray(value).view(CARRIERS_BY_SIZE[value.dtype.itemsize])
    if raw.dtype != np.uint8:  # torch takes the signed ones in every version
        raw = raw.view(f"i{raw.dtype.itemsize}")
    tensor = torch.from_numpy(raw).cuda()
    return tensor.view(torch_dtype(dtype)) if value.ndim else \
        tensor.view(torch_dtype(dtype)).reshape(())


def to_host(value: Any, dtype: str) -> np.ndarray:
    """A result (tensor or NumPy array) as a NumPy array of the library's dtype."""
    if isinstance(value, np.ndarray):
        return value
    torch = torch_module()
    size = DTYPES[dtype].bytes
    carrier = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size]
    raw: np.ndarray = value.detach().contiguous().view(carrier).cpu().numpy()
    result: np.ndarray = raw.view(DTYPES[dtype].np_dtype())
    return result


def place(case: Case, args: Sequence[Any]) -> list[Any]:
    """The inputs as the library is called with them: tensors (or NumPy arrays)."""
    placed = []
    for n, arg in enumerate(args):
        if not isinstance(arg, np.ndarray):
            placed.append(arg)
            continue
        dtype = "bool" if n in case.row.keep else case.dtype
        placed.append(to_device(arg, dtype) if HAVE_TORCH else arg)
    return placed


def _torch_fn(name: str) -> Any:
    torch = torch_module()
    if op_table.ELEMENTWISE[name].family == "activation":
        return getattr(torch.nn.functional, name)
    return getattr(torch, name)


GATED_ACTIVATIONS = {"silu_and_mul": ("silu", {}), "gelu_and_mul": ("gelu", {}),
                     "gelu_tanh_and_mul": ("gelu", {"approximate": "tanh"})}
"""torch's counterpart of each gated op's activation."""


def gated_reference(op: str, x: Any, dtype: str) -> Any:
    """act(x[..., :N]) * x[..., N:] on torch's float32 path, rounded once to dtype (the
    library's semantics, FlashInfer's kernels'; torch's own bf16 ops would round twice)."""
    torch = torch_module()
    name, kwargs = GATED_ACTIVATIONS[op]
    wide = x.float()
    n = wide.shape[-1] // 2
    result = getattr(torch.nn.functional, name)(wide[..., :n], **kwargs) * wide[..., n:]
    return _from_float(result, dtype)


def _from_float(result: Any, dtype: str) -> Any:
    torch = torch_module()
    if dtype == "f8e4m3":
        result = torch.clamp(result, -448.0, 448.0)  # saturating; NaN stays NaN
    return result.to(torch_dtype(dtype))


def reference(case: Case, args: Sequence[Any], placed: Sequence[Any]) -> np.ndarray:
    """What the library's result must match: torch's op, or the NumPy reference."""
    if not HAVE_TORCH:
        return expected(case, list(args))
    if gated(case.op):
        return to_host(gated_reference(case.op, placed[0], case.result), case.result)
    widen = case.dtype in FP8
    inputs = [p.float() if widen and hasattr(p, "float") and n not in case.row.keep else p
              for n, p in enumerate(placed)]
    if case.op in TENSORS_ONLY:  # the library takes numbers there too; torch wants 0-d tensors
        like = next(p for p in inputs if hasattr(p, "dtype"))
        inputs = [torch_module().tensor(p, dtype=like.dtype, device="cuda")
                  if not hasattr(p, "dtype") else p for p in inputs]
    result = _torch_fn(case.op)(*inputs)
    if widen and case.result in FP8:
        result = _from_float(result, case.result)
    return to_host(result, case.result)


TENSORS_ONLY = ("maximum", "minimum", "logical_and", "logical_or")
"""Ops whose torch functions take no Python numbers."""


def poisoned_out(case: Case, shape: tuple[int, ...], like: Any) -> Any:
    """An output filled with NaN (or 0x5A bytes), so that unwritten elements show."""
    count = math.prod(shape)
    if HAVE_TORCH:
        torch = torch_module()
        out = torch.empty(shape, dtype=torch_dtype(case.result), device="cuda")
        if count:  # bytes, as fill_ may not take fp8: 0x7F is NaN in both fp8 formats
            out.view(torch.uint8).fill_(0x7F if case.result in FP8 else 0x5A)
        if DTYPES[case.result].is_float and case.result not in FP8 and count:
            out.fill_(float("nan"))
        return out
    out_np = np.empty(shape, DTYPES[case.result].np_dtype())
    out_np.view(np.uint8)[...] = 0x5A
    if DTYPES[case.result].is_float:
        out_np[...] = np.nan
    return out_np


# ------------------------------------------------------------------- cases

SHAPES = [(4099,), (0,), (1,), (8, 1000)]
PATTERNS = [  # seed 004's broadcast patterns: (input, other)
    ((2, 33, 64), (2, 33, 1)),  # scaling
    ((2, 3, 17, 17), (1, 1, 17, 17)),  # attention mask
    ((2, 3, 17, 17), (2, 1, 1, 17)),  # interleaved
    ((77, 1), (1, 45)),  # outer product
]


PATTERN_OPS = ("add", "lt", "maximum", "bitwise_and", "logical_or", "remainder", "mul",
               "prelu")
"""One or two ops per family also run seed 004's broadcast patterns (each a kernel of its
own: the others' broadcasting is the same code, checked in the null tier for all)."""


PRELU_PATTERNS = [  # (input, weight): channels along dim 1 of 3-d and 4-d inputs
    ((2, 33, 64), (33,)),
    ((2, 3, 17, 17), (3,)),
    ((2, 3, 17, 17), (1,)),
]


def cases(op: str, dtype: str) -> list[Case]:
    found = [case for shape in SHAPES for case in standard_cases(op, dtype, shape)]
    if op == "prelu":
        found += [Case(op, dtype, pattern) for pattern in PRELU_PATTERNS]
    elif op in PATTERN_OPS:
        found += [Case(op, dtype, pattern) for pattern in PATTERNS]
    return found


def _compile(program: Any) -> str:
    """Compile into the kernel cache; a failure is the test's to report, not the warm-up's."""
    try:
        kernels.compiled(program)
    except Exception as e:  # noqa: BLE001 - reported by the test that launches it
        return f"{type(e).__name__}: {e}"
    return ""


def warm_cache(every: list[Case], processes: int | None = None) -> int:
    """Compile the kernels the cases will launch, in parallel, into the runtime's kernel
    cache, so that the GPU's time goes to running them; returns how many. Nothing to do
    without a disk cache (tile_mlir.runtime.cache, issue 5). A kernel the run asks for
    differently (a tuned strategy, pow's and div's special forms) is compiled then."""
    try:
        kernel_cache = importlib.import_module("tile_mlir.runtime.cache")
    except ImportError:
        return 0
    if not kernel_cache.enabled():
        return 0
    programs = {}
    for case in every:
        if all(shape is None or math.prod(shape) for shape in case.shapes):
            program = prepared(case).program
            programs[program.request()] = program
    context = multiprocessing.get_context("spawn")  # no fork of a process that holds CUDA
    with context.Pool(processes or os.cpu_count()) as pool:
        failed = [error for error in pool.map(_compile, [programs[k] for k in sorted(programs)],
                                              chunksize=2) if error]
    for error in failed[:3]:
        print(f"warm-up: {error.splitlines()[0]}")
    return len(programs) - len(failed)


def run(case: Case, rng: np.random.Generator) -> Report:
    """One case: the library's result (into a poisoned out=) against the reference."""
    args = inputs(case, rng)
    placed = place(case, args)
    out = poisoned_out(case, result_shape(case, args), placed[0])
    fn = getattr(ops, case.op)
    takes_out = "out" in inspect.signature(fn).parameters
    result = fn(*placed, out=out) if takes_out else fn(*placed)
    got = to_host(result, case.result)
    report = compare(case, got, reference(case, args, placed))
    print(f"{case.id}: max rel {report.max_rel:.3g}, max {report.max_ulp} ulp"
          f"{'' if report.ok else ' FAILED ' + report.detail}")
    return report
