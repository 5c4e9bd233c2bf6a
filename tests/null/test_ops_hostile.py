"""null tier: hostile arguments to the library (issue 16, part 2, the library's half).

Each case is a call a user could make by mistake: the wrong device, dtype or shape,
out= of the wrong shape, dtype or device or overlapping an input, dims out of range or
repeated, numbers where arrays go (and the reverse), mixes of host and device arrays,
empty and 0-d arrays, sizes past 2^31 through expanded views. Each either raises an
error of the expected type whose message names the user's argument, or gives the
reference's result; none reaches a kernel with a bad argument or fails deep inside.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from support.emulated import Device, EmuArray
from support.fakes import FakeDriver, lean_torch

from tile_mlir import ops
from tile_mlir.ops import args, entry, kernels
from tile_mlir.ops.programs import KernelProgram
from tile_mlir.ops.programs.elementwise import ElementwiseProgram
from tile_mlir.ops.programs.reduction import ReductionProgram
from tile_mlir.runtime.spec import KernelSpec, Param

Case = tuple[str, Callable[[Device], Any], type[Exception], str]


def _f32(device: Device, shape: tuple[int, ...] = (4, 8), offset: int = 0,
         at: int = 0) -> EmuArray:
    array = device.array(np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape),
                         offset=offset)
    array.device = at
    return array


def _into(device: Device, shape: tuple[int, ...], out: tuple[tuple[int, ...], tuple[int, ...], int],
          fn: Callable[..., Any]) -> Any:
    """fn(x, out=) with out a view (shape, strides, element offset) of x's own memory."""
    x = _f32(device, shape)
    if fn is ops.neg and len(shape) == 1:
        x = x.view((10,), (1,))
    return fn(x, out=x.view(*out))


def _cases() -> list[Case]:
    def q(d: Device) -> EmuArray:
        return d.array(np.zeros((3, 2, 16), np.float32))

    def pos(d: Device) -> EmuArray:
        return d.array(np.zeros(3, np.int64))

    return [
        # devices and kinds
        ("two devices", lambda d: ops.add(_f32(d), _f32(d, at=1)), ValueError,
         r"argument 'other' is on cuda:1, argument 'input' on cuda:0"),
        ("host and device", lambda d: ops.mul(_f32(d), np.ones((4, 8), np.float32)), TypeError,
         r"argument 'other' is a numpy array on the host, argument 'input' a cai one"),
        ("out on another device", lambda d: ops.exp(_f32(d), out=_f32(d, at=1)), ValueError,
         r"argument 'out' is a cai array on cuda:1"),
        ("numpy out for device input", lambda d: ops.exp(_f32(d), out=np.zeros((4, 8), np.float32)),
         ValueError, r"argument 'out' is a numpy array on the host"),
        ("reduction on two devices", lambda d: ops.sum(_f32(d), out=_f32(d, (4,), at=1)),
         ValueError, r"argument 'out' is on cuda:1"),
        ("rope positions elsewhere", lambda d: ops.rope_neox(q(d), None, np.zeros(3, np.int64),
                                                             max_position=4),
         TypeError, r"argument 'positions' is a numpy array on the host"),
        # dtypes
        ("float64", lambda d: ops.exp(np.ones(3)), TypeError,
         r"exp is not defined on float64 \(argument 'input' is float64"),
        ("uint8", lambda d: ops.neg(np.ones(3, np.uint8)), TypeError,
         r"argument 'input': element type uint8 is not supported"),
        ("complex", lambda d: ops.add(np.ones(3, np.complex64), 1), TypeError,
         r"argument 'input': element type complex64"),
        ("bitwise on floats", lambda d: ops.bitwise_and(_f32(d), _f32(d)), TypeError,
         r"bitwise_and is not defined on float32 \(argument 'input' is float32"),
        ("int reduction", lambda d: ops.amax(d.array(np.ones(4, np.int32))), TypeError,
         r"amax: argument 'input' has element type int32"),
        ("reduction dtype", lambda d: ops.sum(_f32(d), dtype="int64"), TypeError,
         r"sum: argument 'dtype' must be one of"),
        ("out dtype narrows kind", lambda d: ops.exp(_f32(d), out=d.empty((4, 8), "i32")),
         TypeError, r"argument 'out' is int32, which the float32 result cannot be cast to"),
        ("rope dtype", lambda d: ops.rope_neox(d.array(np.zeros((3, 2, 16), np.int32)), None,
                                               pos(d), max_position=4),
         TypeError, r"argument 'query' is int32"),
        ("positions dtype", lambda d: ops.rope_neox(q(d), None, _f32(d, (3,)), max_position=4),
         TypeError, r"argument 'positions' is float32"),
        ("dropout dtype", lambda d: ops.dropout(d.array(np.ones(4, np.int64)), 0.5), TypeError,
         r"dropout: argument 'input' must be a float array"),
        # shapes
        ("broadcast", lambda d: ops.add(_f32(d, (3, 4)), _f32(d, (2, 4))), ValueError,
         r"argument 'other' \(2, 4\) does not broadcast"),
        ("out shape", lambda d: ops.add(_f32(d), 1.0, out=_f32(d, (4, 9))), ValueError,
         r"argument 'out' has shape \(4, 9\), the result has \(4, 8\)"),
        ("reduction out shape", lambda d: ops.sum(_f32(d), dim=1, out=_f32(d, (8,))), ValueError,
         r"argument 'out' has shape \(8,\)"),
        ("gated odd", lambda d: ops.silu_and_mul(_f32(d, (4, 7))), ValueError,
         r"argument 'input' has an odd last dimension"),
        ("prelu weight", lambda d: ops.prelu(_f32(d), _f32(d, (3,))), ValueError,
         r"argument 'weight' has 3 elements"),
        ("rope rank", lambda d: ops.rope_neox(_f32(d), None, pos(d), max_position=4),
         ValueError, r"argument 'query' must be \(tokens, heads, head_dim\)"),
        ("rope out pair", lambda d: ops.rope_neox(q(d), q(d), pos(d), out=q(d), max_position=4),
         TypeError, r"argument 'out' must be a pair"),
        ("rope out shape", lambda d: ops.rope_neox(q(d), None, pos(d), max_position=4,
                                                   out=(_f32(d, (3, 2, 8)), None)),
         ValueError, r"argument 'out\[0\]' must be float32 of shape"),
        # overlap
        ("partial overlap", lambda d: _into(d, (16,), ((10,), (1,), 1), ops.neg), ValueError,
         r"argument 'out' overlaps argument 'input'"),
        ("transposed in place", lambda d: _into(d, (4, 4), ((4, 4), (1, 4), 0), ops.neg),
         ValueError, r"argument 'out' overlaps argument 'input'"),
        ("reduction into input", lambda d: _into(d, (4, 8), ((4,), (1,), 4),
                                                 lambda x, out: ops.amax(x, 1, out=out)),
         ValueError, r"argument 'out' overlaps argument 'input'"),
        ("expanded out", lambda d: ops.neg(_f32(d), out=_f32(d, (8,)).view((4, 8), (0, 1))),
         ValueError, r"neg: argument 'out' has stride 0 along dim 0 \(an expanded view\)"),
        ("expanded out of a cast", lambda d: ops.eq(_f32(d), 1.0,
                                                    out=d.empty((4, 1), "bool").view((4, 8),
                                                                                     (1, 0))),
         ValueError, r"eq: argument 'out' has stride 0 along dim 1"),
        ("expanded reduction out", lambda d: ops.sum(_f32(d), 1, out=_f32(d, (1,)).view(
            (4,), (0,))), ValueError, r"sum: argument 'out' has stride 0 along dim 0"),
        ("expanded rope out", lambda d: ops.rope_neox(q(d), None, pos(d), max_position=4, out=(
            d.array(np.zeros((2, 16), np.float32)).view((3, 2, 16), (0, 16, 1)), None)),
         ValueError, r"RoPE: argument 'out\[0\]' has stride 0 along dim 0"),
        ("expanded generator out", lambda d: ops.alibi(2, 4, out=_f32(d, (4,)).view(
            (2, 4), (0, 1))), ValueError, r"alibi: argument 'out' has stride 0 along dim 0"),
        # dims
        ("dim out of range", lambda d: ops.mean(_f32(d), dim=2), ValueError,
         r"argument 'dim': 2 is out of range for a 2-d tensor"),
        ("dim repeated", lambda d: ops.mean(_f32(d), dim=(1, -1)), ValueError,
         r"argument 'dim' \(1, -1\) names a dimension twice"),
        ("dim a float", lambda d: ops.sum(_f32(d), dim=1.0), TypeError,
         r"argument 'dim' must be an int"),
        ("empty amax", lambda d: ops.amax(d.array(np.zeros((2, 0), np.float32)), dim=1),
         ValueError, r"amax: argument 'input' of shape \(2, 0\) has no elements"),
        # numbers and objects where they do not go
        ("string operand", lambda d: ops.mul(_f32(d), "2"), TypeError,
         r"argument 'other' must be an array or a number, got str"),
        ("list operand", lambda d: ops.add([1.0, 2.0], _f32(d, (2,))), TypeError,
         r"argument 'input' must be an array or a number, got list"),
        ("None operand", lambda d: ops.add(_f32(d), None), TypeError,
         r"argument 'other' must be an array or a number, got NoneType"),
        ("numbers only", lambda d: ops.add(1.0, 2.0), TypeError,
         r"add needs at least one array argument"),
        ("number condition", lambda d: ops.where(True, _f32(d), 0.0), TypeError,
         r"argument 'condition' must be a bool array"),
        ("number out", lambda d: ops.exp(_f32(d), out=3.0), TypeError,
         r"argument 'out' must be an array, got float"),
        ("array slope", lambda d: ops.leaky_relu(_f32(d), _f32(d)), TypeError,
         r"argument 'negative_slope' must be a number"),
        ("bool p", lambda d: ops.dropout(_f32(d), True), TypeError, r"argument 'p'"),
        ("nan p", lambda d: ops.dropout(_f32(d), float("nan")), ValueError, r"argument 'p'"),
        ("negative seed", lambda d: ops.dropout(_f32(d), 0.5, seed=-1), ValueError,
         r"argument 'seed'"),
        ("float seed", lambda d: ops.dropout(_f32(d), 0.5, seed=1.5), TypeError,
         r"argument 'seed'"),
        ("overflow", lambda d: ops.add(d.array(np.ones(3, np.int32)), 1 << 31), OverflowError,
         r"argument 'other': 2147483648 does not fit int32"),
        ("float alpha on ints", lambda d: ops.add(d.array(np.ones(3, np.int32)),
                                                   d.array(np.ones(3, np.int32)), alpha=0.5),
         TypeError, r"argument 'alpha': a float"),
        ("negative heads", lambda d: ops.alibi(-1, 4, like=_f32(d)), ValueError,
         r"alibi: argument 'num_heads' must be at least 1"),
        ("generator dtype", lambda d: ops.sinusoidal(4, 4, dtype="int32", like=_f32(d)),
         TypeError, r"sinusoidal: argument 'dtype' must be one of"),
        ("rotary_dim odd", lambda d: ops.rope_neox(q(d), None, pos(d), rotary_dim=5,
                                                   max_position=4),
         ValueError, r"argument 'rotary_dim' must be even"),
        ("cpu tensor", lambda d: ops.exp(_cpu_tensor()), TypeError,
         r"argument 'input' is a cpu tensor"),
    ]


class _CpuTensor:
    """A torch CPU tensor, as far as the library looks."""

    is_cuda = False
    device = "cpu"

    def dim(self) -> int:
        return 2


def _cpu_tensor() -> Any:
    sys.modules["torch"].Tensor = _CpuTensor  # type: ignore[attr-defined]
    return _CpuTensor()


@pytest.fixture
def torch_stand_in(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(sys.modules, "torch", lean_torch())
    yield


CASES = _cases()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_hostile(device: Device, torch_stand_in: None, case: Case) -> None:
    _, call, error, message = case
    with pytest.raises(error, match=message):
        call(device)


# ---------------------------------------------------------- answers, not errors


def test_empty_and_zero_dim(device: Device) -> None:
    """Empty and 0-d arrays in every family: results of the right shape, no launch where
    there is nothing to write."""
    empty = device.array(np.zeros((0, 4), np.float32))
    assert ops.exp(empty).shape == (0, 4)
    assert ops.silu_and_mul(empty).shape == (0, 2)
    assert ops.sum(empty, dim=1).shape == (0,)
    assert ops.dropout(empty, 0.5).shape == (0, 4)
    assert ops.alibi(3, 0, like=empty).shape == (3, 0)
    assert not device.launches
    scalar = device.array(np.array(2.0, np.float32))
    assert float(ops.mul(scalar, scalar).numpy()) == 4.0
    assert float(ops.sum(scalar).numpy()) == 2.0
    assert float(ops.amax(scalar, dim=0).numpy()) == 2.0
    assert float(ops.mean(scalar, keepdim=True).numpy()) == 2.0
    np.testing.assert_array_equal(ops.sum(device.array(np.zeros((3, 0), np.float32)),
                                          dim=1).numpy(), np.zeros(3))


def test_mixed_kinds_on_one_device(device: Device) -> None:
    """Device arrays of different kinds (here a CAI array and a DeviceBuffer-like one) on
    one device mix; the result is of the first array's kind."""
    x = _f32(device)
    y = _f32(device)
    np.testing.assert_array_equal(ops.add(x, y).numpy(), 2 * x.numpy())


# --------------------------------------------------- past 2^31 through expanded views


def _spec(program: KernelProgram) -> KernelSpec:
    params = tuple(Param(f"a{n}", "memref" if kind == "ptr" else "scalar",
                         "i64" if kind == "ptr" else kind)
                   for n, kind in enumerate(program.params()))
    return KernelSpec(program.name, "ops", params, (program.threads, 1, 1))


def test_past_2_to_the_31_elements_through_expanded_views(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """A (2^16, 2^16) view of one row (stride 0): an elementwise plan with 64-bit
    indices, and reductions of it (whose kernels index in 64 bits), planned and launched
    with the view's strides; nothing is materialized."""
    torch = lean_torch()
    monkeypatch.setitem(sys.modules, "torch", torch)
    programs: list[KernelProgram] = []

    def load(program: KernelProgram, device: int) -> kernels.Loaded:
        programs.append(program)
        driver = FakeDriver(_spec(program))
        return kernels.Loaded(object(), kernels.ctypes_of(program), driver.cuLaunchKernel,
                              (program.threads, 1, 1), device, program.name)

    monkeypatch.setattr(kernels, "load", load)
    monkeypatch.setattr(kernels, "chip", lambda device: None)
    entry.clear()
    kernels.clear()
    n = 1 << 16
    wide = torch.Tensor((n, n), torch.float32, 1 << 40, (0, 1), torch.lean_device)
    ops.exp(wide)
    sig = programs[-1].sig  # type: ignore[attr-defined]
    assert isinstance(programs[-1], ElementwiseProgram) and sig.index_bits == 64
    ops.sum(wide, dim=0)
    ops.amax(wide)
    reductions = [p for p in programs if isinstance(p, ReductionProgram)]
    assert reductions and all(p.stage.a * p.stage.r * p.stage.b <= n * n for p in reductions)
    assert reductions[0].stage.source_strides()[1] == "0"  # the expanded dim stays expanded
    entry.clear()
    kernels.clear()
    assert args.fits_32_bits([n * n]) is False
