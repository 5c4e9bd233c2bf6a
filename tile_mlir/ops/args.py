"""The operator library's argument layer: what an argument is, where it lives, and how a
kernel takes it. Every family (elementwise, reductions, RoPE, the generators) goes
through here, so an error names the user's argument the same way everywhere.

- `describe(value, name)`: a torch tensor, a CuPy array, a DeviceBuffer, anything with
  `__cuda_array_interface__` or DLPack (read by tile_mlir.runtime.arrays), or a NumPy
  array, as an `Array`: library dtype, shape, strides in elements (any: offset,
  negative, zero, transposed), this call's pointer and device; None for a number;
- `classify(value, name)`: an Array or a `Scalar` (a number: Python, NumPy or a 0-d
  host tensor), with the expression the generated launcher reads it by;
- `place(arrays)`: the call's kind and device (one device; host and device arrays do
  not mix);
- `span`, `check_overlap`: the bytes an array covers (contract.extent), and out= against
  the inputs: the very same view is in place, any other overlap an error naming `out`;
  `check_distinct`: out= whose elements share a location (stride 0) is refused;
- `Array.misalignment`: a kernel takes a KERNEL_ARG_ALIGN-aligned base and an element
  offset, never a misaligned pointer;
- `fits_32_bits`: whether every index a kernel computes stays under contract.INDEX_LIMIT;
- `allocate(shape, dtype, kind, device)`: an output of the call's kind
  (runtime.arrays.empty for the kinds it knows);
- `to_device` / `to_host`: NumPy arguments staged through device memory.

An Array also says where its per-call pointer comes from in a plan (`root`: the
parameter or buffer whose pointer the launcher reads, `delta`: bytes from there), so
views the library makes of an argument (a gated op's halves, a RoPE cache row) cost
nothing per call.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from tile_mlir.contract import INDEX_LIMIT, KERNEL_ARG_ALIGN, extent
from tile_mlir.dtypes import DTYPES
from tile_mlir.ops import promotion

if TYPE_CHECKING:
    from tile_mlir.runtime import arrays as runtime_arrays

NUMBERS = (bool, int, float)
"""The Python number types a plan takes by type alone (the value is read per call)."""

_BY_NUMPY_NAME = {d.numpy: name for name, d in DTYPES.items()}


def torch_name(dtype: str) -> str:
    """A library dtype as torch and NumPy name it (float32, bfloat16, int64...)."""
    return DTYPES[dtype].numpy


@dataclass(frozen=True)
class Array:
    """An array argument (or a view the library makes of one) for one call."""

    name: str  # as the API names it: input, other, out, weight, positions, out[0]...
    kind: str  # torch, cupy, numpy, buffer, cai, dlpack (runtime.arrays.kind_of)
    dtype: str  # a tile_mlir.dtypes name
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    pointer: int  # this call's address of element 0 (0 for a host array)
    device: int | None  # CUDA ordinal; None for host (NumPy) memory
    obj: Any = None
    root: str = ""  # the plan's name of the pointer this array is relative to
    delta: int = 0  # bytes from root's pointer to element 0
    host: Any = None  # a NumPy argument staged on the device: the original

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return DTYPES[self.dtype].bytes

    @property
    def misalignment(self) -> int:
        """Bytes the pointer is past the KERNEL_ARG_ALIGN boundary below it."""
        return self.pointer % KERNEL_ARG_ALIGN

    @property
    def offset(self) -> int:
        """Elements from the aligned base a kernel is given to element 0."""
        return self.misalignment // self.itemsize

    def rooted(self, root: str) -> Array:
        """The array as a plan's parameter: its pointer read per call into `root`."""
        return replace(self, root=root, delta=0)

    def with_host(self, host: Any) -> Array:
        return replace(self, host=host)

    def view(self, shape: Sequence[int], strides: Sequence[int], elements: int = 0,
             name: str | None = None) -> Array:
        """Another view of the same memory, `elements` past this one's element 0."""
        moved = elements * self.itemsize
        return replace(self, shape=tuple(shape), strides=tuple(strides),
                       pointer=self.pointer + moved, delta=self.delta + moved,
                       name=self.name if name is None else name)


@dataclass(frozen=True)
class Scalar:
    """A number argument: its value, its type for promotion, and how a plan reads it."""

    name: str
    value: bool | int | float
    dtype: str  # what promotion counts it as
    priority: int  # promotion.SCALAR, or ZERO_DIM for a 0-d host tensor
    expr: str  # the launcher's expression for the value (the parameter, `x.item()`...)


Operand = Array | Scalar


# ------------------------------------------------------------------ describing


def _dtype(numpy_name: str, name: str) -> str:
    found = _BY_NUMPY_NAME.get(numpy_name)
    if found is None:
        raise TypeError(f"argument '{name}': element type {numpy_name} is not supported")
    return found


def row_major(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))


def _numpy(a: np.ndarray, name: str) -> Array:
    """A host array: its pointer is its host address (for overlaps between host arrays;
    a kernel gets a device copy's)."""
    size = a.dtype.itemsize
    return Array(name, "numpy", _dtype(a.dtype.name, name), tuple(a.shape),
                 tuple(s // size for s in a.strides), int(a.ctypes.data), None, a)


def _from_info(value: Any, kind: str, info: runtime_arrays.ArrayInfo, name: str) -> Array:
    strides = info.strides if info.strides is not None else row_major(info.shape)
    return Array(name, kind, _dtype(info.dtype, name), tuple(info.shape), tuple(strides),
                 info.pointer, info.device, value)


def _torch(t: Any, name: str) -> Array | None:
    layout = str(getattr(t, "layout", "torch.strided"))
    if getattr(t, "is_nested", False) or layout != "torch.strided":
        nested = getattr(t, "is_nested", False)
        kind, fix = ("nested", ".to_padded_tensor(0)") if nested else \
            (layout.removeprefix("torch."), ".to_dense()")
        raise TypeError(f"argument '{name}' is a {kind} tensor; the operator library takes "
                        f"dense (strided) tensors ({fix} makes one)")
    if not t.is_cuda:
        if t.dim() == 0:
            return None  # a 0-d host tensor is a number, as torch takes it beside CUDA tensors
        raise TypeError(f"argument '{name}' is a {t.device} tensor; the operator library "
                        "runs on CUDA tensors (move it with .cuda())")
    from tile_mlir.runtime import arrays as runtime_arrays

    return _from_info(t, "torch", runtime_arrays.torch_info(t), name)


_INFO_NAMES = {"cupy": "cupy_info", "buffer": "buffer_info", "cai": "cai_info",
               "dlpack": "dlpack_info"}
"""runtime.arrays' reader of each kind (imported on the first array described)."""


def describe(value: Any, name: str) -> Array | None:
    """The array behind an argument, or None when it is not one (a number, or anything
    else: classify says what is wrong with it)."""
    if isinstance(value, Array):  # described already (views the library made, tools)
        return value
    if type(value) in NUMBERS or isinstance(value, np.generic) or value is None:
        return None
    from tile_mlir.runtime import arrays as runtime_arrays

    kind = runtime_arrays.kind_of(value)
    if kind == "numpy":
        return _numpy(value, name)
    if kind == "torch":
        return _torch(value, name)
    reader = _INFO_NAMES.get(kind)
    if reader is None:
        return None
    try:
        described = getattr(runtime_arrays, reader)(value)
    except runtime_arrays.InterfaceError as e:
        raise TypeError(f"argument '{name}' {e}") from None
    if described.device is None and kind == "dlpack":
        raise TypeError(f"argument '{name}' is a host DLPack array; pass a NumPy array or a "
                        "device array")
    return _from_info(value, kind, described, name)


def _host_scalar(value: Any, name: str, expr: str) -> Scalar | None:
    """A 0-d host tensor (torch's CPU scalar) as a number with the 0-d priority."""
    if not (hasattr(value, "item") and getattr(value, "ndim", None) == 0):
        return None
    host = np.asarray(value.cpu() if hasattr(value, "cpu") else value)
    return Scalar(name, host.item(), _dtype(host.dtype.name, name), promotion.ZERO_DIM,
                  f"{expr}.item()")


def classify(value: Any, name: str, expr: str | None = None) -> Operand:
    """An argument as an Array or a Scalar; TypeError naming it otherwise."""
    expr = name if expr is None else expr
    array = describe(value, name)
    if array is not None:
        return array
    if type(value) in NUMBERS:
        return Scalar(name, value, promotion.scalar_dtype(value), promotion.SCALAR, expr)
    if isinstance(value, np.generic) and not isinstance(value, np.complexfloating):
        item = value.item()
        return Scalar(name, item, promotion.scalar_dtype(item), promotion.SCALAR,
                      f"{expr}.item()")
    scalar = _host_scalar(value, name, expr)
    if scalar is not None:
        return scalar
    raise TypeError(f"argument '{name}' must be an array or a number, got "
                    f"{type(value).__name__}")


def array(value: Any, name: str, what: str) -> Array:
    """An argument that must be an array; TypeError naming it otherwise."""
    found = describe(value, name)
    if found is None:
        raise TypeError(f"{what}: argument '{name}' must be an array, got "
                        f"{type(value).__name__}")
    return found


def number(value: Any, name: str, what: str) -> Scalar:
    """A parameter that must be a number (a Python or NumPy number, or a 0-d tensor; not
    a bool); TypeError naming it otherwise."""
    if type(value) in (int, float) or isinstance(value, np.integer | np.floating):
        found = classify(value, name)
        assert isinstance(found, Scalar)
        return found
    scalar = _host_scalar(value, name, name) if not isinstance(value, bool | np.bool_) \
        else None
    if scalar is None or isinstance(scalar.value, bool):
        raise TypeError(f"{what}: argument '{name}' must be a number, got "
                        f"{type(value).__name__}")
    return scalar


# ------------------------------------------------------------------- placement


def _where(array: Array) -> str:
    return "the host" if array.device is None else f"cuda:{array.device}"


def place(arrays: Sequence[Array]) -> tuple[str, int]:
    """The kind and device of a call: every array on one device, none mixing host (NumPy)
    and device memory. The kind is the first array's (outputs are made of it)."""
    first = arrays[0]
    for other in arrays[1:]:
        if (other.device is None) != (first.device is None):
            raise TypeError(f"argument '{other.name}' is a {other.kind} array on "
                            f"{_where(other)}, argument '{first.name}' a {first.kind} one "
                            f"on {_where(first)}: host and device arrays do not mix")
        if other.device != first.device:
            raise ValueError(f"argument '{other.name}' is on {_where(other)}, argument "
                             f"'{first.name}' on {_where(first)}")
    return first.kind, first.device or 0


def span(array: Array) -> tuple[int, int]:
    """[low, high): the bytes the array's elements cover, relative to its pointer (negative
    strides reach below it)."""
    if not array.numel:
        return 0, 0
    low = sum((d - 1) * s for d, s in zip(array.shape, array.strides, strict=True) if s < 0)
    reach = extent(array.shape, array.strides)
    return low * array.itemsize, (low + reach + 1) * array.itemsize


def same_view(a: Array, b: Array) -> bool:
    """Whether two arrays are one view: each element at one address in both (a size-1
    dim's stride moves nothing, so it may differ: a broadcast of a one-element weight)."""
    return a.pointer == b.pointer and a.shape == b.shape and a.dtype == b.dtype and \
        all(x == y for n, x, y in zip(a.shape, a.strides, b.strides, strict=True) if n != 1)


def dense(array: Array) -> bool:
    """Whether the array's elements fill the bytes they span, each once (torch's
    non-overlapping and dense): any order of dims, no gaps, no stride 0."""
    low, high = span(array)
    return array.numel > 0 and high - low == array.numel * array.itemsize


def overlaps(a: Array, b: Array) -> bool:
    """Whether two arrays provably share a byte, as torch proves it: both dense and their
    ranges meeting. (Views with gaps that interleave, such as the query and key of a
    packed qkv, may lie in one range without sharing a byte: torch lets them be, and
    so does the library.) A buffer the plan allocates has no address yet (pointer 0): it
    overlaps only views of itself (the same root)."""
    if a.device != b.device or not dense(a) or not dense(b):
        return False
    if 0 in (a.pointer, b.pointer) and a.root and b.root and a.root != b.root:
        return False
    a_low, a_high = span(a)
    b_low, b_high = span(b)
    return a.pointer + a_low < b.pointer + b_high and b.pointer + b_low < a.pointer + a_high


def check_overlap(out: Array, inputs: Iterable[Array], what: str = "") -> list[Array]:
    """The inputs that are the very same view as out (in place, as torch allows); any
    other overlap of out with an input is refused (ValueError naming both), as torch
    does: some elements would be read after they were written."""
    same = []
    for given in inputs:
        if same_view(out, given):
            same.append(given)
        elif overlaps(out, given):
            prefix = f"{what}: " if what else ""
            raise ValueError(f"{prefix}argument '{out.name}' overlaps argument "
                             f"'{given.name}' without being the same view of it: some "
                             "elements would be read after they were written")
    return same


def check_distinct(out: Array, what: str = "") -> None:
    """Refuse an output some of whose elements share one location (a stride 0 over more
    than one element: an expanded view), as torch refuses it ("more than one element of
    the written-to tensor refers to a single memory location"): which of the results
    written there would remain is not defined. ValueError naming the argument."""
    if not out.numel:
        return  # nothing is written (torch's check finds no overlap in an empty tensor)
    shared = [d for d, (size, stride) in enumerate(zip(out.shape, out.strides, strict=True))
              if stride == 0 and size > 1]
    if shared:
        prefix = f"{what}: " if what else ""
        raise ValueError(f"{prefix}argument '{out.name}' has stride 0 along dim {shared[0]} "
                         f"(an expanded view): more than one of its elements refers to a "
                         "single memory location")


def fits_32_bits(reaches: Iterable[int]) -> bool:
    """Whether every index a kernel computes (each array's furthest element from its base,
    the end of the last piece) stays below contract.INDEX_LIMIT."""
    return all(0 <= r < INDEX_LIMIT for r in reaches)


def reach(array: Array) -> int:
    """Elements from the aligned base a kernel gets to the array's furthest element."""
    return array.offset + extent(array.shape, array.strides)


# -------------------------------------------------------------------- outputs


def torch_module() -> Any:
    return sys.modules["torch"]


def allocate(shape: Sequence[int], dtype: str, kind: str, device: int) -> Any:
    """An uninitialized output of the call's kind on its device: torch (torch.empty),
    CuPy, NumPy (host), else a DeviceBuffer (runtime.arrays.empty decides)."""
    shape = tuple(shape)
    if kind == "torch":
        torch = torch_module()
        return torch.empty(shape, dtype=getattr(torch, torch_name(dtype)),
                           device=torch.device("cuda", device))
    if kind == "cupy":
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(device):
            return cupy.empty(shape, dtype=DTYPES[dtype].np_dtype())
    if kind == "numpy":
        return np.empty(shape, DTYPES[dtype].np_dtype())
    from tile_mlir.runtime.memory import DeviceBuffer

    return DeviceBuffer(shape, DTYPES[dtype].np_dtype(), device)


def full(shape: Sequence[int], value: bool | int | float, dtype: str, kind: str,
         device: int) -> Any:
    """An output with every element `value`: torch.full, cupy.full, numpy.full."""
    shape = tuple(shape)
    if kind == "torch":
        torch = torch_module()
        return torch.full(shape, value, dtype=getattr(torch, torch_name(dtype)),
                          device=torch.device("cuda", device))
    if kind == "cupy":
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(device):
            return cupy.full(shape, value, dtype=DTYPES[dtype].np_dtype())
    if kind == "numpy":
        return np.full(shape, value, DTYPES[dtype].np_dtype())
    raise ValueError(f"no filled allocation for {kind} arrays (fill with a kernel)")


def from_host(host: np.ndarray, like: Array) -> Any:
    """A copy of a host array of `like`'s kind and on its device (a NumPy array stays as
    it is); bit for bit, whatever the element type (bf16 too)."""
    if like.kind == "numpy":
        return host
    host = np.ascontiguousarray(host)
    if like.kind == "torch":
        torch = torch_module()
        carrier = torch.from_numpy(host.view(_CARRIERS[host.dtype.itemsize]))
        return carrier.to(like.obj.device).view(getattr(torch, host.dtype.name))
    if like.kind == "cupy":
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(like.device):
            return cupy.asarray(host)
    return to_device(host, like.device or 0)


_CARRIERS = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}


def pointer_of(value: Any) -> int:
    """The device address of an array the library allocated (any kind)."""
    described = describe(value, "output")
    assert described is not None
    return described.pointer


# -------------------------------------------------------------------- staging


def to_device(host: np.ndarray, device: int = 0) -> Any:
    """A device copy of a host array (contiguous), for a call on NumPy arrays."""
    from tile_mlir.runtime.memory import DeviceBuffer

    return DeviceBuffer.from_array(np.ascontiguousarray(host), device)


def to_host(value: Any) -> np.ndarray:
    """A device array's values on the host (waits for the work before it on the legacy
    stream, which staged calls launch on)."""
    result: np.ndarray = value.numpy()
    return result


def capturing(kind: str, device: int) -> bool:
    """Whether the caller's current stream is capturing a CUDA graph (torch's view)."""
    if kind != "torch":
        return False
    torch = torch_module()
    check = getattr(getattr(torch, "cuda", None), "is_current_stream_capturing", None)
    return bool(check()) if check is not None else False


def dtype_of(value: Any, name: str, what: str, allowed: Sequence[str]) -> str:
    """A library dtype name from a torch dtype, a NumPy dtype or a name (float32, bf16...);
    TypeError naming the argument when it is not one of `allowed`."""
    text = str(value).removeprefix("torch.")
    found = text if text in DTYPES else _BY_NUMPY_NAME.get(text)
    if found is None:
        try:
            found = _BY_NUMPY_NAME.get(np.dtype(value).name)
        except TypeError:
            found = None
    if found not in allowed:
        raise TypeError(f"{what}: argument '{name}' must be one of "
                        f"{', '.join(torch_name(d) for d in allowed)}, got {value}")
    assert found is not None
    return found
