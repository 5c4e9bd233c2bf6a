"""The fast path: a call that looks like an earlier one reuses its prepared launch.

A call on torch tensors is described by a key: the op, and per argument its
dtype, shape, strides, device and pointer alignment (a number's Python type),
and the output's when `out=` is given. Everything dispatch.py derives (the
result dtype, the coalesced view, the strategy, the kernel and its argument
list) is a function of that key, so the first call with a key records its
launch (dispatch.Prepared plus the loaded kernel) and later calls only read
their pointers and numbers, allocate the output and launch: a few microseconds
of Python instead of a hundred. Any argument the key cannot describe (a CuPy or
NumPy array, a CPU tensor, an unusual scalar) takes the full path.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tile_mlir.dtypes import DTYPES
from tile_mlir.ops import _runtime, dispatch, strategy
from tile_mlir.ops.dispatch import Arg, Prepared

LIMIT = 4096
"""Plans kept; past that the table starts over (shapes that never repeat)."""

_NUMBERS = (bool, int, float)


@dataclass(frozen=True)
class Plan:
    kernel: Any
    ready: Prepared
    compute: str  # the dtype scalars are passed in
    round_to: tuple[str | None, ...]  # per input, see dispatch.Call
    names: tuple[str, ...]
    shape: tuple[int, ...]  # the result's
    dtype: Any  # the result's torch dtype
    device: int


_PLANS: dict[tuple[Any, ...], Plan] = {}
strategy.listeners.append(_PLANS.clear)  # new tuning choices: prepare again


def _tensor_key(torch: Any, value: Any) -> tuple[Any, ...] | None:
    if not isinstance(value, torch.Tensor) or not value.is_cuda:
        return None
    return value.dtype, value.shape, value.stride(), value.data_ptr() & 15, value.get_device()


def key(op: str, args: Sequence[Arg], out: Any, result: str | None) -> tuple[Any, ...] | None:
    """What the call's launch depends on, or None when only the full path can tell."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    parts: list[Any] = [op, result]
    for arg in args:
        value = arg.value
        if type(value) in _NUMBERS:
            parts.append((type(value), arg.promotes))
            continue
        described = _tensor_key(torch, value)
        if described is None:
            return None
        parts.append((*described, arg.promotes))
    if out is not None:
        described = _tensor_key(torch, out)
        if described is None:
            return None
        pointer = out.data_ptr()
        parts.append((*described, tuple(a.value.data_ptr() == pointer for a in args
                                        if type(a.value) not in _NUMBERS)))
    return tuple(parts)


def call(op: str, args: Sequence[Arg], out: Any, result: str | None) -> Any:
    """The op's result through a recorded launch, or None (take the full path)."""
    plan_key = key(op, args, out, result)
    plan = _PLANS.get(plan_key) if plan_key is not None else None
    if plan is None:
        return None
    torch = sys.modules["torch"]
    if out is None:
        out = torch.empty(plan.shape, dtype=plan.dtype, device=f"cuda:{plan.device}")
        if out.data_ptr() & 15:
            return None
    elif _overlaps(out, args):
        return None  # the full path refuses it with the reason
    ready = plan.ready
    values = ready.args[:]
    for slot in ready.slots:
        if slot.scalar:  # a Python number (the key says so)
            number = dispatch.Scalar(args[slot.operand].value, "", 0)
            values[slot.position] = dispatch.scalar_value(number, plan.compute,
                                                          plan.names[slot.operand],
                                                          plan.round_to[slot.operand])
        else:
            tensor = out if slot.operand < 0 else args[slot.operand].value
            values[slot.position] = tensor.data_ptr() - slot.misalignment
    _runtime.launch(plan.kernel, values, ready.grid, ready.signature.strategy.threads,
                    _runtime.stream("torch", plan.device))
    return out


def _overlaps(out: Any, args: Sequence[Arg]) -> bool:
    """Whether out shares memory with an input other than as the very same view."""
    start = out.data_ptr()
    end = start + _reach(out)
    for arg in args:
        value = arg.value
        same_view = value.data_ptr() == start and value.stride() == out.stride() and \
            value.shape == out.shape
        if type(value) in _NUMBERS or same_view:
            continue
        other = value.data_ptr()
        if other < end and start < other + _reach(value):
            return True
    return False


def _reach(tensor: Any) -> int:
    """Bytes from a tensor's first element to just past its last."""
    extent = sum((size - 1) * abs(stride) for size, stride in zip(tensor.shape, tensor.stride(),
                                                                   strict=True))
    return (extent + 1) * tensor.element_size() if tensor.numel() else 0


def recorder(op: str, args: Sequence[Arg], out: Any, result: str | None,
             call_: dispatch.Call) -> dispatch.Record | None:
    """What the full path calls after its launch, to record the plan for this key."""
    plan_key = key(op, args, out, result)
    if plan_key is None:
        return None
    torch = sys.modules["torch"]

    def record(ready: Prepared, kernel: Any) -> None:
        if len(_PLANS) >= LIMIT:
            _PLANS.clear()
        first = next(a.value for a in args if type(a.value) not in _NUMBERS)
        _PLANS[plan_key] = Plan(kernel, ready, call_.compute, call_.round_to, tuple(call_.names),
                                tuple(call_.shape), getattr(torch, DTYPES[call_.result].numpy),
                                first.get_device())

    return record


def clear() -> None:
    _PLANS.clear()
