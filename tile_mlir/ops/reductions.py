"""Reductions of whole tensors, as torch has them: sum, amax, amin, prod and mean.

    tile_mlir.ops.sum(x, dim=None, keepdim=False)      # also amax, amin, prod, mean

`x` is a CUDA torch tensor or CuPy array (results come back of the same kind,
on the same device and stream), or a NumPy array (copied to the GPU and the
result back). fp32, fp16 and bf16; halves accumulate in f32 and the result
has the input's type, as in torch. `dim` is an int, a tuple of ints, or None
for every dimension; negative dims count from the end.

How a call becomes kernels (all from tile programs through the passes):
the tensor is viewed with consecutive kept or reduced dimensions merged, so
each reduction is of one of two shapes, taken innermost reduced group first:

- rows [A, R] (the reduced dims are innermost): a CTA takes a block of rows
  and reduces them with `tile.reduce` at CTA scope (reduce/gmem: a warp or
  a group of lanes per row, 16-byte loads, xor shuffles; long rows split over
  the warps). A few very long rows are first cut into chunks over more CTAs,
  and the chunks' partials reduced by a second kernel.
- columns [A, R, B] (a kept dim is innermost): a CTA takes a block of columns
  of one batch and a chunk of the reduced rows (reduce/columns: a thread
  per output vector walking the rows with coalesced loads); when there are
  chunks, a second kernel reduces their partials.

Partials are kept in f32 for 16-bit inputs; a mean scales by 1/count in the
last kernel, before rounding.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tile_mlir.dtypes import DTYPES

BLOCK = 256  # threads per CTA
TARGET_CTAS = 4 * 132  # enough CTAs to fill an H100/H200 several times over
CHUNK_BYTES = 1 << 16  # what one CTA of a split row or column block reads, about
SUPPORTED = ("f32", "f16", "bf16")

# library name -> (tile.reduce kind, whether it is a mean)
KINDS = {"sum": ("sum", False), "amax": ("max", False), "amin": ("min", False),
         "prod": ("prod", False), "mean": ("sum", True)}


@dataclass(frozen=True)
class Stage:
    """One kernel: reduce [A, R] rows or [A, R, B] columns of a dense tensor."""

    kind: str  # tile.reduce kind
    a: int
    r: int
    b: int  # 1 for rows
    src: str  # element type names (tile_mlir.dtypes)
    dst: str
    chunks: int  # how many pieces R is cut into (the output keeps them: [A, chunks, B])
    scale: float | None = None

    @property
    def rows(self) -> bool:
        return self.b == 1

    @property
    def out_shape(self) -> tuple[int, ...]:
        return (self.a, self.chunks, self.b)

    def vec(self) -> int:
        """Elements a 16-byte load covers, if the reduced (rows) or kept (columns)
        innermost run is a multiple of it; else 1."""
        width = 16 // DTYPES[self.src].bytes
        run = self.r // self.chunks if self.rows else self.b
        while width > 1 and run % width:
            width //= 2
        return width

    def mlir(self) -> str:
        return _rows_program(self) if self.rows else _columns_program(self)


def _pow2_divisor_at_most(n: int, cap: int) -> int:
    """The largest power of two that divides n and is at most cap (at least 1)."""
    best = 1
    while best * 2 <= cap and n % (best * 2) == 0:
        best *= 2
    return best


def _memref(shape: Sequence[int], dtype: str, strided: str = "") -> str:
    dims = "x".join(map(str, shape))
    layout = f", {strided}" if strided else ""
    return f"memref<{dims}x{DTYPES[dtype].mlir}{layout}>"


def _kernel(name: str, src: str, dst: str, grid: tuple[int, int, int], body: str) -> str:
    """A gpu.module with one kernel (x read-only, y written) of BLOCK threads."""
    return f"""gpu.module @kernels {{
  gpu.func @{name}(%x: {src} {{llvm.noalias, llvm.readonly}}, %y: {dst} {{llvm.noalias}})
      kernel attributes {{known_block_size = array<i32: {BLOCK}, 1, 1>,
                         known_grid_size = array<i32: {grid[0]}, {grid[1]}, {grid[2]}>}} {{
{body}    gpu.return
  }}
}}
"""


def _reduce_attrs(stage: Stage, axes: str) -> str:
    attrs = f'kind = "{stage.kind}", axes = array<i64: {axes}>, scope = "cta"'
    if stage.scale is not None:  # in hex: exact, and MLIR's syntax takes no 1e-06
        attrs += f", scale = 0x{np.float64(stage.scale).view(np.uint64):016X} : f64"
    return attrs


def rows_per_cta(stage: Stage) -> int:
    """Rows of [A * chunks, R / chunks] a CTA takes: enough to give every group of lanes
    rows and each CTA about CHUNK_BYTES, dividing the row count."""
    length = stage.r // stage.chunks
    lanes = min(32, 1 << max(length // stage.vec() - 1, 0).bit_length())
    groups = BLOCK // lanes
    row_bytes = length * DTYPES[stage.src].bytes
    want = max(groups, CHUNK_BYTES // max(row_bytes, 1))
    rows = stage.a * stage.chunks
    per_cta = _pow2_divisor_at_most(rows, min(want, 1024))
    # a grid too small to fill the GPU: fewer rows a CTA
    while per_cta > 1 and rows // per_cta < TARGET_CTAS and per_cta > groups // 8:
        per_cta //= 2
    return per_cta


def _rows_program(stage: Stage) -> str:
    rows, length = stage.a * stage.chunks, stage.r // stage.chunks
    per_cta = rows_per_cta(stage)
    src_full = _memref((rows, length), stage.src)
    dst_full = _memref((rows,), stage.dst)
    src_tile = _memref((per_cta, length), stage.src, f"strided<[{length}, 1], offset: ?>")
    dst_tile = _memref((per_cta,), stage.dst, "strided<[1], offset: ?>")
    body = f"""    %bid = gpu.block_id x
    %n = arith.constant {per_cta} : index
    %first = arith.muli %bid, %n : index
    %tx = memref.subview %x[%first, 0] [{per_cta}, {length}] [1, 1]
        : {src_full} to {src_tile}
    %ty = memref.subview %y[%first] [{per_cta}] [1] : {dst_full} to {dst_tile}
    "tile.reduce"(%ty, %tx) {{{_reduce_attrs(stage, "1")}}} : ({dst_tile}, {src_tile}) -> ()
"""
    return _kernel("reduce_rows", src_full, dst_full, (rows // per_cta, 1, 1), body)


def columns_per_cta(stage: Stage) -> int:
    """Columns of a batch a CTA takes, dividing B: a vector per thread at most, and fewer
    (the CTA's threads then split the rows) while the grid would not fill the GPU."""
    vec = stage.vec()
    cap = BLOCK * vec
    grid = stage.a * stage.chunks * max(1, stage.b // cap)
    while cap > vec * 32 and grid < TARGET_CTAS:
        cap //= 2
        grid *= 2
    if stage.b <= cap:
        return stage.b
    return next(d for d in range(cap, 0, -vec) if stage.b % d == 0)


def _columns_program(stage: Stage) -> str:
    a, r, b, chunks = stage.a, stage.r, stage.b, stage.chunks
    cols = columns_per_cta(stage)
    rows = r // chunks
    src_full = _memref((a, r, b), stage.src)
    dst_full = _memref((a, chunks, b), stage.dst)
    src_tile = _memref((rows, cols), stage.src, f"strided<[{b}, 1], offset: ?>")
    dst_tile = _memref((cols,), stage.dst, "strided<[1], offset: ?>")
    body = f"""    %bx = gpu.block_id x
    %chunk = gpu.block_id y
    %blocks = arith.constant {b // cols} : index
    %cb = arith.remui %bx, %blocks : index
    %batch = arith.divui %bx, %blocks : index
    %ncols = arith.constant {cols} : index
    %nrows = arith.constant {rows} : index
    %col = arith.muli %cb, %ncols : index
    %row = arith.muli %chunk, %nrows : index
    %tx = memref.subview %x[%batch, %row, %col] [1, {rows}, {cols}] [1, 1, 1]
        : {src_full} to {src_tile}
    %ty = memref.subview %y[%batch, %chunk, %col] [1, 1, {cols}] [1, 1, 1]
        : {dst_full} to {dst_tile}
    "tile.reduce"(%ty, %tx) {{{_reduce_attrs(stage, "0")}}} : ({dst_tile}, {src_tile}) -> ()
"""
    return _kernel("reduce_columns", src_full, dst_full, (a * (b // cols), chunks, 1), body)


# ------------------------------------------------------------------ planning


def normalize_dims(dim: int | Sequence[int] | None, rank: int) -> tuple[int, ...]:
    """Sorted non-negative dims; ValueError naming `dim` when one is out of range or
    repeated. None (or an empty tuple) means every dimension."""
    if dim is None:
        return tuple(range(rank))
    if isinstance(dim, int | np.integer):
        dims: tuple[Any, ...] = (dim,)
    elif isinstance(dim, Sequence):
        dims = tuple(dim)
    else:
        raise TypeError(f"dim must be an int or a tuple of ints, got {dim!r}")
    if not dims:
        return tuple(range(rank))
    out = []
    for d in dims:
        if not isinstance(d, int | np.integer) or isinstance(d, bool):
            raise TypeError(f"dim must be an int or a tuple of ints, got {d!r}")
        if not -max(rank, 1) <= d < max(rank, 1):
            raise ValueError(f"dim {d} is out of range for a {rank}-d tensor")
        out.append(int(d) % max(rank, 1))
    if len(set(out)) != len(out):
        raise ValueError(f"dim {tuple(dims)} names a dimension twice")
    return tuple(sorted(out))


def groups(shape: Sequence[int], dims: tuple[int, ...]) -> list[tuple[int, bool]]:
    """(size, reduced) for runs of consecutive kept or reduced dims, size-1 dims dropped."""
    runs: list[tuple[int, bool]] = []
    for axis, size in enumerate(shape):
        if size == 1:
            continue
        reduced = axis in dims
        if runs and runs[-1][1] == reduced:
            runs[-1] = (runs[-1][0] * size, reduced)
        else:
            runs.append((size, reduced))
    return runs


def _chunks_for_rows(a: int, r: int, nbytes: int) -> int:
    """How many pieces to cut each of A rows into so that the grid fills the GPU."""
    if a >= TARGET_CTAS or r * nbytes <= CHUNK_BYTES:
        return 1
    want = min(TARGET_CTAS // max(a, 1), r * nbytes // CHUNK_BYTES)
    return _pow2_divisor_at_most(r, max(want, 1))


def _chunks_for_columns(a: int, r: int, b: int, nbytes: int) -> int:
    """How many pieces to cut the reduced rows into so that the grid fills the GPU."""
    blocks = a * max(1, b // (BLOCK * max(1, 16 // nbytes)))
    if blocks >= TARGET_CTAS or r * b * nbytes // blocks <= CHUNK_BYTES:
        return 1
    want = min(TARGET_CTAS // blocks, r * b * nbytes // (blocks * CHUNK_BYTES))
    return _pow2_divisor_at_most(r, max(want, 1))


SMALL_STAGE = 1 << 20
"""Bytes under which a stage of partials runs whole: cutting it costs a launch more."""


def _chunks(a: int, r: int, b: int, nbytes: int, first: bool) -> int:
    """Chunks for a stage: the source tensor's, and partials' when there are many."""
    if not first and a * r * b * nbytes < SMALL_STAGE:
        return 1
    return _chunks_for_rows(a, r, nbytes) if b == 1 else _chunks_for_columns(a, r, b, nbytes)


def plan(shape: Sequence[int], dtype: str, dims: tuple[int, ...], name: str) -> list[Stage]:
    """The kernels that reduce a dense tensor of `shape` over `dims`, in order."""
    kind, mean = KINDS[name]
    count = math.prod(shape[d] for d in dims)
    runs = groups(shape, dims) or [(1, True)]
    stages: list[Stage] = []
    acc = "f32" if DTYPES[dtype].bits < 32 else dtype
    current = dtype
    while True:
        reduced = [i for i, (_, r) in enumerate(runs) if r]
        if not reduced:
            reduced = [len(runs)]
            runs = [*runs, (1, True)]  # nothing to reduce: one pass over runs of 1
        i = reduced[-1]
        a = math.prod(s for s, _ in runs[:i])
        r = runs[i][0]
        b = math.prod(s for s, _ in runs[i + 1:])
        chunks = _chunks(a, r, b, DTYPES[current].bytes, first=not stages)
        last = chunks == 1 and len(reduced) == 1
        stages.append(Stage(kind, a, r, b, current, dtype if last else acc, chunks,
                            1.0 / count if mean and last and count else None))
        if last:
            return stages
        current = acc
        runs = [*runs[:i], *([(chunks, True)] if chunks > 1 else []), *runs[i + 1:]]
        runs = groups([s for s, _ in runs], tuple(j for j, (_, rr) in enumerate(runs) if rr))


# ------------------------------------------------------------------ running


def _compiled(stage: Stage, device: int) -> Any:
    """The stage's kernel, compiled (through the kernel cache) and loaded, kept per stage."""
    key = (stage, device)
    kernel = _KERNELS.get(key)
    if kernel is None:
        import tile_mlir

        program = tile_mlir.compile(stage.mlir(), name=f"<{stage.kind} reduction>")
        kernel = program.kernel(next(iter(program.kernels)), device)
        _KERNELS[key] = kernel
    return kernel


_KERNELS: dict[tuple[Stage, int], Any] = {}


def _dtype_of(x: Any) -> str:
    name = str(getattr(x, "dtype", "")).removeprefix("torch.")
    for dtype in SUPPORTED:
        if DTYPES[dtype].numpy == name:
            return dtype
    raise TypeError(f"x has element type {name or type(x).__name__}; reductions take "
                    f"{', '.join(DTYPES[d].numpy for d in SUPPORTED)}")


def _device_of(x: Any, kind: str) -> int:
    if kind == "torch":
        if not x.is_cuda:
            raise ValueError("x is a CPU torch tensor; move it to the GPU (x.cuda())")
        return int(x.device.index or 0)
    return int(x.device.id) if kind == "cupy" else 0


def _empty_result(name: str, x: Any, out_shape: tuple[int, ...], *, dtype: str, kind: str,
                  reduced_count: int) -> Any:
    """Results without a kernel: nothing to reduce (identity, NaN for a mean), or no
    output elements at all."""
    if reduced_count == 0 and name in ("amax", "amin"):
        raise ValueError(f"{name}() of an empty selection has no identity: x has shape "
                         f"{tuple(x.shape)} and the reduced dims have no elements")
    value = {"sum": 0.0, "prod": 1.0, "mean": float("nan")}.get(name, 0.0)
    if kind == "torch":
        torch = sys.modules["torch"]
        return torch.full(out_shape, value, dtype=x.dtype, device=x.device)
    if kind == "cupy":
        cupy = sys.modules["cupy"]
        return cupy.full(out_shape, value, dtype=x.dtype)
    return np.full(out_shape, value, dtype=DTYPES[dtype].np_dtype())


@dataclass(frozen=True)
class _Call:
    """Everything about a call that its argument types and shapes decide: the kernels of
    the stages, their outputs' shapes and types, and the result's shape."""

    kernels: tuple[tuple[Any, tuple[int, ...], str], ...]  # (kernel, output shape, dtype)
    out_shape: tuple[int, ...]

    def run_torch(self, x: Any, torch: Any) -> Any:
        """The hot path: device pointers on torch's current stream, no checks left."""
        stream = torch._C._cuda_getCurrentRawStream(x.device.index or 0)
        current = x
        for kernel, shape, dtype in self.kernels:
            out = torch.empty(shape, dtype=getattr(torch, DTYPES[dtype].numpy),
                              device=x.device)
            kernel(current.data_ptr(), out.data_ptr(), stream=stream)
            current = out
        return current.view(self.out_shape)

    def run_cupy(self, x: Any) -> Any:
        from tile_mlir.runtime import arrays

        current = x
        for kernel, shape, dtype in self.kernels:
            out = arrays.empty(shape, dtype, current)
            kernel(current.reshape(kernel.spec.params[0].shape), out)
            current = out
        return current.reshape(self.out_shape)


_CALLS: dict[tuple[Any, ...], _Call] = {}


def _torch_key(name: str, x: Any, dim: Any, keepdim: bool) -> tuple[Any, ...]:
    return (name, x.shape, x.dtype, x.device, tuple(dim) if isinstance(dim, list) else dim,
            keepdim)


def reduce(name: str, x: Any, dim: int | Sequence[int] | None = None,
           keepdim: bool = False) -> Any:
    """`name` (sum, amax, amin, prod, mean) of x over dim, as torch computes it.

    A torch tensor whose kind of call was seen before takes a path with no checks
    left to make (they were made the first time): a dict lookup and the launches.
    """
    torch = sys.modules.get("torch")
    if torch is not None and type(x) is torch.Tensor:
        call = _CALLS.get(_torch_key(name, x, dim, keepdim))
        if call is not None and x.is_contiguous():
            return call.run_torch(x, torch)
    return _reduce_checked(name, x, dim, keepdim)


def _reduce_checked(name: str, x: Any, dim: int | Sequence[int] | None, keepdim: bool) -> Any:
    """Check the arguments, plan, compile (cached) and run; remember the call for torch."""
    from tile_mlir.runtime import arrays

    kind = arrays.kind_of(x)
    if kind not in ("torch", "cupy", "numpy"):
        raise TypeError(f"x must be a torch tensor, a CuPy array or a NumPy array, "
                        f"not {type(x).__name__}")
    dtype = _dtype_of(x)
    shape = tuple(int(s) for s in x.shape)
    dims = normalize_dims(dim, len(shape))
    out_shape = tuple(1 if i in dims else s for i, s in enumerate(shape)) if keepdim else \
        tuple(s for i, s in enumerate(shape) if i not in dims)
    count = math.prod(shape[d] for d in dims)
    if count == 0 or math.prod(out_shape) == 0:
        return _empty_result(name, x, out_shape, dtype=dtype, kind=kind, reduced_count=count)
    if kind == "numpy":
        return _reduce_host(name, np.ascontiguousarray(x), dims, out_shape)
    device = _device_of(x, kind)
    call = _Call(tuple((_compiled(stage, device), stage.out_shape, stage.dst)
                       for stage in plan(shape, dtype, dims, name)), out_shape)
    if kind == "torch":
        _CALLS[_torch_key(name, x, dim, keepdim)] = call
        return call.run_torch(x.contiguous(), sys.modules["torch"])  # a copy if strided
    return call.run_cupy(sys.modules["cupy"].ascontiguousarray(x))


def _reduce_host(name: str, x: np.ndarray, dims: tuple[int, ...],
                 out_shape: tuple[int, ...]) -> np.ndarray:
    """A NumPy array: through device buffers, the result copied back."""
    from tile_mlir.runtime.memory import DeviceBuffer

    current = DeviceBuffer.from_array(x)
    for stage in plan(x.shape, _dtype_of(x), dims, name):
        out = DeviceBuffer(stage.out_shape, DTYPES[stage.dst].np_dtype())
        _compiled(stage, 0)(current.ptr, out.ptr)
        current = out
    return current.numpy().reshape(out_shape)


def _op(name: str) -> Any:
    def op(x: Any, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Any:
        return reduce(name, x, dim, keepdim)

    op.__name__ = name
    op.__qualname__ = name
    op.__doc__ = (f"{name}(x, dim=None, keepdim=False): torch.{name} on a CUDA torch tensor, "
                  "CuPy array or NumPy array (fp32, fp16, bf16).")
    return op


sum = _op("sum")  # noqa: A001 - torch's name
amax = _op("amax")
amin = _op("amin")
prod = _op("prod")
mean = _op("mean")
