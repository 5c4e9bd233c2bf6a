"""Running one registry row on arrays and numbers: the steps every op of the library takes.

    arguments -> result dtype (promotion.py) -> broadcast shape and output
              -> coalesced view (layout.py) -> strategy (strategy.py)
              -> kernel signature -> tile program (program.py) -> kernel -> launch

A signature fixes everything the kernel is specialized on; the sizes, the
strides that are not 0 or 1, the pointers and the scalars are its arguments.
Kernels are kept per signature and device, so a call that repeats a signature
goes straight from its arguments to the launch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from tile_mlir import op_table
from tile_mlir.dtypes import DTYPES, opmath
from tile_mlir.ops import _runtime, layout, promotion, strategy
from tile_mlir.ops._runtime import ArrayRef
from tile_mlir.ops.program import INDEX, ArraySpec, Signature, Strategy, kernel_text

ALIGN = 16
"""Bytes of alignment kernels assume of their pointers (lowering.alignment)."""


@dataclass(frozen=True)
class Arg:
    """One argument of an op call, as the API names it."""

    name: str
    value: Any
    promotes: bool = True  # takes part in the result's type promotion
    # A Python number here stands for a tensor operand, which torch casts to the common
    # dtype before the kernel; False for torch's Scalar parameters (lerp's weight).
    cast: bool = True


@dataclass(frozen=True)
class Scalar:
    value: bool | int | float
    dtype: str  # what promotion counts it as
    priority: int  # promotion.SCALAR, or ZERO_DIM for a 0-d host tensor


@dataclass(frozen=True)
class Index(Scalar):
    """An indexed row's last input, the index base: made in the kernel (program.INDEX),
    never passed at launch."""

    value: bool | int | float = 0
    dtype: str = "i64"
    priority: int = promotion.SCALAR


Operand = ArrayRef | Scalar


def _scalar(arg: Arg) -> Scalar:
    value = arg.value
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool | int | float):
        return Scalar(value, promotion.scalar_dtype(value), promotion.SCALAR)
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:  # a 0-d host tensor
        ref = _runtime.describe(np.asarray(value.cpu() if hasattr(value, "cpu") else value),
                                f"argument '{arg.name}'")
        assert ref is not None
        return Scalar(value.item(), ref.dtype, promotion.ZERO_DIM)
    raise TypeError(f"argument '{arg.name}' must be an array or a number, "
                    f"got {type(value).__name__}")


def classify(arg: Arg) -> Operand:
    """An argument as an array or a scalar; errors name the argument. An ArrayRef is
    taken as it is (tests and tools describe arrays that need not exist)."""
    if isinstance(arg.value, ArrayRef):
        return arg.value
    try:
        ref = _runtime.describe(arg.value, f"argument '{arg.name}'")
    except _runtime.UnsupportedArrayError as e:
        raise TypeError(str(e)) from None
    return ref if ref is not None else _scalar(arg)


def _typed(operand: Operand) -> promotion.Typed:
    if isinstance(operand, Scalar):
        return promotion.Typed(operand.dtype, operand.priority)
    priority = promotion.TENSOR if operand.shape else promotion.ZERO_DIM
    return promotion.Typed(operand.dtype, priority)


def promoted(args: Sequence[Arg], operands: Sequence[Operand]) -> str:
    """torch.result_type of the promoting arguments."""
    typed = [_typed(o) for a, o in zip(args, operands, strict=True) if a.promotes]
    return promotion.result_type(typed)


def result_dtype(row: op_table.EwOp, common: str, what: str, culprit: str = "") -> str:
    """The op's result dtype from the promoted one; TypeError if the op lacks it."""
    if row.out == "float" and not DTYPES[common].is_float:
        common = "f32"
    if common not in row.dtypes:
        because = f"{culprit}; " if culprit else ""
        raise TypeError(f"{what} is not defined on {_torch_name(common)} ({because}"
                        f"dtypes: {', '.join(_torch_name(d) for d in row.dtypes)})")
    return "bool" if row.out == "bool" else common


def _culprit(args: Sequence[Arg], operands: Sequence[Operand], common: str) -> str:
    """Which argument brought the promoted dtype in (for an error message)."""
    for arg, operand in zip(args, operands, strict=True):
        if arg.promotes and operand.dtype == common:
            return f"argument '{arg.name}' is {_torch_name(common)}"
    return ""


def _torch_name(dtype: str) -> str:
    return DTYPES[dtype].numpy


# ---------------------------------------------------------------- scalars


CASTS_NUMBERS = frozenset(("eq", "ne", "gt", "lt", "ge", "le", "remainder", "pow_scalar"))
"""Ops whose torch CUDA kernels see a Python number cast to the f16/bf16 tensor's dtype
first: measured against torch on an H200, `x_bf16 == s`, `remainder(x_f16, s)` and
`x_f16 ** s` see bf16(s) and f16(s), while add, sub, mul and floor_divide take the
number as it is (in float, torch's opmath type)."""


def scalar_value(scalar: Scalar, dtype: str, name: str, round_to: str | None = None
                 ) -> bool | int | float:
    """A scalar as the kernel takes it, in `dtype` (the op's compute type), rounded
    first to `round_to` when given (see Call.round_to)."""
    value = scalar.value
    kind = DTYPES[dtype].kind
    if kind == "float":
        if round_to is not None:
            return float(np.asarray(float(value), dtype=DTYPES[round_to].np_dtype()))
        return float(value)
    if kind == "bool":
        return bool(value)
    if isinstance(value, float):
        raise TypeError(f"argument '{name}': a float ({value}) for an integer op")
    bits = DTYPES[dtype].bits
    if not -(1 << (bits - 1)) <= int(value) < (1 << (bits - 1)):
        raise OverflowError(f"argument '{name}': {value} does not fit {_torch_name(dtype)}")
    return int(value)


# ------------------------------------------------------------------ arrays


def _device_and_kind(arrays: Sequence[tuple[str, ArrayRef]]) -> tuple[int, str]:
    """The device and array kind of a call: every array on one device, none mixing
    host (NumPy) and device memory."""
    first_name, first = arrays[0]
    for name, ref in arrays[1:]:
        if (ref.device is None) != (first.device is None):
            raise TypeError(f"argument '{name}' is a {ref.kind} array, argument "
                            f"'{first_name}' a {first.kind} one: host and device arrays "
                            "do not mix")
        if ref.device != first.device:
            raise ValueError(f"argument '{name}' is on cuda:{ref.device}, argument "
                             f"'{first_name}' on cuda:{first.device}")
    return (first.device or 0), first.kind


def _castable(src: str, dst: str) -> bool:
    """torch.can_cast for out=: never float into integer or bool, nor integer into bool."""
    order = ("bool", "int", "float")
    return order.index(DTYPES[src].kind) <= order.index(DTYPES[dst].kind)


@dataclass
class Call:
    """One op call, resolved: what runs, on what, into what."""

    row: op_table.EwOp
    names: list[str]
    operands: list[Operand]
    result: str  # the result dtype
    compute: str  # the dtype scalars are passed in
    shape: tuple[int, ...]
    # Per input: the dtype a Python number there is rounded to before the kernel sees
    # it (see CASTS_NUMBERS).
    round_to: tuple[str | None, ...]

    def scalar_dtype(self, n: int) -> str:
        """The type the scalar input n is passed in: the compute type, or its own where
        the row keeps it (the generators' i64 and f64 numbers)."""
        operand = self.operands[n]
        return operand.dtype if n in self.row.keep else self.compute


def result_type(op: str, args: Sequence[Arg]) -> str:
    """The result dtype of the op on these arguments (any subset of its inputs)."""
    operands = [classify(a) for a in args]
    common = promoted(args, operands)
    return result_dtype(op_table.ELEMENTWISE[op], common, op, _culprit(args, operands, common))


def resolve(op: str, args: Sequence[Arg], result: str | None = None, what: str = "") -> Call:
    """Classify the arguments, promote, broadcast: everything short of the output."""
    row = op_table.ELEMENTWISE[op]
    what = what or op
    if len(args) != row.arity:
        raise TypeError(f"{what} takes {row.arity} inputs, got {len(args)}")
    operands = [classify(a) for a in args]
    arrays = [(a.name, o) for a, o in zip(args, operands, strict=True) if isinstance(o, ArrayRef)]
    if not arrays:
        raise TypeError(f"{what} needs at least one array argument")
    common = promoted(args, operands)
    dtype = result or result_dtype(row, common, what, _culprit(args, operands, common))
    if dtype not in (*row.dtypes, "bool" if row.out == "bool" else ""):
        raise TypeError(f"{what} is not defined on {_torch_name(dtype)}")
    shape = layout.broadcast_shapes([o.shape for _, o in arrays],
                                    [f"argument '{n}'" for n, _ in arrays])
    compute = opmath(common if row.out == "bool" else dtype)
    casts = common in ("f16", "bf16") and row.name in CASTS_NUMBERS
    round_to = tuple(common if casts and a.promotes and a.cast and isinstance(o, Scalar)
                     else None for a, o in zip(args, operands, strict=True))
    return Call(row, [a.name for a in args], operands, dtype, compute, shape, round_to)


Record = Callable[["Prepared", Any], None]
"""Told of each launch (the prepared launch and the kernel): the fast path's memory."""


def run(call: Call, out: Any = None, record: Record | None = None) -> Any:
    """Allocate or check the output, then launch (nothing for an empty result)."""
    arrays = [(n, o) for n, o in zip(call.names, call.operands, strict=True)
              if isinstance(o, ArrayRef)]
    device, kind = _device_and_kind(arrays)
    target = _runtime.empty(call.shape, call.result, arrays[0][1]) if out is None else out
    ref = _runtime.describe(target, "argument 'out'")
    if ref is None:
        raise TypeError(f"argument 'out' must be an array, got {type(out).__name__}")
    _check_out(call, ref, arrays)
    if ref.dtype != call.result:
        temporary = run(call)
        return run(resolve("cast", [Arg("input", temporary)], result=ref.dtype), out)
    if ref.numel:
        _launch(call, ref, device, kind, record)
    return target


def generate(call: Call, out: Any) -> Any:
    """A call with no array inputs (the generators) into `out`, whose kind and device it
    runs on."""
    ref = _runtime.describe(out, "argument 'out'")
    if ref is None:
        raise TypeError(f"argument 'out' must be an array, got {type(out).__name__}")
    if ref.shape != call.shape or ref.dtype != call.result:
        raise ValueError(f"argument 'out' is {_torch_name(ref.dtype)}{list(ref.shape)}, the "
                         f"result {_torch_name(call.result)}{list(call.shape)}")
    if ref.numel:
        _launch(call, ref, ref.device or 0, ref.kind, None)
    return out


def _check_out(call: Call, out: ArrayRef, arrays: Sequence[tuple[str, ArrayRef]]) -> None:
    if out.shape != call.shape:
        raise ValueError(f"argument 'out' has shape {out.shape}, the result has {call.shape}")
    if (out.device is None) != (arrays[0][1].device is None) or \
            (out.device is not None and out.device != arrays[0][1].device):
        raise ValueError(f"argument 'out' is a {out.kind} array on "
                         f"{'the host' if out.device is None else f'cuda:{out.device}'}, "
                         f"the inputs are not")
    if not _castable(call.result, out.dtype):
        raise TypeError(f"argument 'out' is {_torch_name(out.dtype)}, which the "
                        f"{_torch_name(call.result)} result cannot be cast to")


# ------------------------------------------------------------------ launch


@dataclass(frozen=True)
class Bound:
    """An array on the device: where its data is and how it is laid out."""

    dtype: str
    strides: tuple[int, ...]  # over the output's dims, 0 where broadcast
    pointer: int


def _bind(call: Call, out: ArrayRef, staging: _runtime.HostStaging | None
          ) -> tuple[Bound, list[Bound | Scalar]]:
    """Device addresses for the output and the inputs (NumPy arrays uploaded)."""
    def bound(ref: ArrayRef) -> Bound:
        strides, pointer = ref.strides, ref.pointer
        if staging is not None:
            pointer = staging.upload(ref.obj)
            strides = layout.contiguous_strides(ref.shape)
        return Bound(ref.dtype, layout.expand_strides(ref.shape, strides, call.shape), pointer)

    out_bound = Bound(out.dtype, out.strides, out.pointer)
    if staging is not None:
        buffer = staging.allocate(out.shape, out.dtype)
        out_bound = Bound(out.dtype, layout.contiguous_strides(out.shape), int(buffer.ptr))
    inputs = [bound(o) if isinstance(o, ArrayRef) else o for o in call.operands]
    return out_bound, inputs


@dataclass(frozen=True)
class Slot:
    """Where a per-call value goes among a kernel's arguments: an operand's pointer
    (operand -1 is the output, n the n-th input), minus its misalignment, or a scalar."""

    position: int
    operand: int
    misalignment: int = 0  # bytes the pointer is above the base passed
    scalar: bool = False


@dataclass(frozen=True)
class Prepared:
    """A launch, ready: the kernel's signature, its arguments and its grid."""

    signature: Signature
    args: list[Any]
    grid: int
    slots: tuple[Slot, ...] = ()


def prepare(call: Call, out: Bound, inputs: Sequence[Bound | Scalar], chip: str | None
            ) -> Prepared:
    """Coalesce the operands' view, choose the strategy, specialize the kernel."""
    arrays = [out, *(b for b in inputs if isinstance(b, Bound))]
    view = layout.coalesce(call.shape, [b.strides for b in arrays])
    inplace = _check_overlap(call, out, inputs)
    choice = strategy.choose(call.row.family, call.result, view.numel, chip)
    sig = signature(call, view, arrays, inputs, choice=choice, inplace=inplace)
    args, slots = kernel_arguments(call, sig, view, arrays, inputs)
    return Prepared(sig, args, layout.grid(view, sig.mode, sig.piece()), tuple(slots))


def _launch(call: Call, out: ArrayRef, device: int, kind: str, record: Record | None
            ) -> None:
    staging = _runtime.HostStaging() if kind == "numpy" else None
    try:
        out_bound, inputs = _bind(call, out, staging)
        ready = prepare(call, out_bound, inputs, _chip(device))
        kernel = _runtime.kernel(text(ready.signature), device)
        _runtime.launch(kernel, ready.args, ready.grid, ready.signature.strategy.threads,
                        _runtime.stream(kind, device))
        if record is not None and staging is None:
            record(ready, kernel)
        if staging is not None:
            out.obj[...] = _download(staging, out_bound)
    finally:
        if staging is not None:
            staging.close()


def _download(staging: _runtime.HostStaging, out: Bound) -> np.ndarray:
    buffer = next(b for b in staging.buffers if int(b.ptr) == out.pointer)
    result: np.ndarray = buffer.numpy()
    return result


@cache
def _chip(device: int) -> str | None:
    try:
        from tile_mlir.runtime import driver

        return driver.device_chip(device)
    except Exception:  # noqa: BLE001 - no GPU: no tuned choices either
        return None


@cache
def text(sig: Signature) -> str:
    """The kernel's tile program (made once per signature)."""
    return kernel_text(sig)


def _check_overlap(call: Call, out: Bound, inputs: Sequence[Bound | Scalar]) -> bool:
    """Whether out is also an input (in place: allowed when it is the very same view);
    any other overlap of out with an input is refused, as torch does."""
    size = DTYPES[out.dtype].bytes
    reach = sum((d - 1) * abs(s) for d, s in zip(call.shape, out.strides, strict=True))
    out_range = (out.pointer, out.pointer + (reach + 1) * size)
    inplace = False
    for name, bound in zip(call.names, inputs, strict=True):
        if not isinstance(bound, Bound):
            continue
        if bound.pointer == out.pointer and bound.strides == out.strides:
            inplace = True
            continue
        in_reach = sum((d - 1) * abs(s) for d, s in zip(call.shape, bound.strides, strict=True))
        in_range = (bound.pointer, bound.pointer + (in_reach + 1) * DTYPES[bound.dtype].bytes)
        if in_range[0] < out_range[1] and out_range[0] < in_range[1]:
            raise ValueError(f"argument 'out' overlaps argument '{name}' without being the "
                             "same view of it: some elements would be read after written")
    return inplace


def _offset(bound: Bound) -> tuple[int, int]:
    """(16-byte aligned base, element offset) of an array's pointer."""
    misalignment = bound.pointer % ALIGN
    return bound.pointer - misalignment, misalignment // DTYPES[bound.dtype].bytes


def signature(call: Call, view: layout.Coalesced, arrays: Sequence[Bound],
              inputs: Sequence[Bound | Scalar], *, choice: Strategy, inplace: bool
              ) -> Signature:
    """What the kernel for this call is specialized on."""
    specs = [ArraySpec(b.dtype, layout.stride_classes(strides), bool(_offset(b)[1]))
             for b, strides in zip(arrays, view.strides, strict=True)]
    specs_in = iter(specs[1:])
    ins: list[ArraySpec | str] = [next(specs_in) if isinstance(b, Bound)
                                  else INDEX if isinstance(b, Index)
                                  else call.scalar_dtype(n) for n, b in enumerate(inputs)]
    draft = Signature(call.row.name, specs[0], tuple(ins), view.rank, "flat", choice,
                      inplace=inplace)
    mode, width = layout.pieces(view, draft.chunk())
    offsets = [_offset(b)[1] for b in arrays]
    bits = 32 if layout.fits_32_bits(view, offsets, draft.chunk()) else 64
    return Signature(call.row.name, specs[0], tuple(ins), view.rank, mode, choice, width,
                     bits, inplace)


def kernel_arguments(call: Call, sig: Signature, view: layout.Coalesced,
                     arrays: Sequence[Bound], inputs: Sequence[Bound | Scalar]
                     ) -> tuple[list[Any], list[Slot]]:
    """The kernel's arguments in program.py's order: the sizes, then per operand its
    pointer, its dynamic strides and its offset, or the scalar; and the slots of the
    values that change from call to call (pointers and scalars)."""
    args: list[Any] = list(view.shape)
    slots: list[Slot] = []
    views = iter(zip(arrays, view.strides, [sig.out, *(
        s for s in sig.inputs if isinstance(s, ArraySpec))], strict=True))

    def array_args(operand: int) -> None:
        bound, strides, spec = next(views)
        base, offset = _offset(bound)
        slots.append(Slot(len(args), operand, bound.pointer - base))
        args.append(base)
        args.extend(s for s, c in zip(strides, spec.strides, strict=True) if c[0] == "?")
        if spec.offset:
            args.append(offset)

    array_args(-1)
    for n, (name, operand) in enumerate(zip(call.names, inputs, strict=True)):
        if isinstance(operand, Bound):
            array_args(n)
        elif not isinstance(operand, Index):
            slots.append(Slot(len(args), n, scalar=True))
            args.append(scalar_value(operand, call.scalar_dtype(n), name, call.round_to[n]))
    return args, slots
