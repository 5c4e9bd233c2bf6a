"""null tier: the activations and fused gated activations beyond the every-op x dtype run
(test_ops_emulated.py): scalar parameters over several values (one kernel for all), NaN
and the infinities where torch's formulas say what they give, prelu's weight shapes and
errors, the gated ops on odd widths, strided inputs and out=, inplace=, gelu's tanh form.
Everything runs on the pretend device against the float64 references (ops_check)."""

from __future__ import annotations

import numpy as np
import pytest
from support.emulated import Device, EmuArray
from support.ops_check import Case, compare, expected

from tile_mlir import ops

SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 3.0, -3.0, 20.0, 25.0, -100.0]


def _input(rng: np.random.Generator, shape: tuple[int, ...] = (7, 333)) -> np.ndarray:
    values = rng.standard_normal(shape) * 4
    values.flat[:len(SPECIALS)] = SPECIALS
    return values.astype(np.float32)


def _check(case: Case, got: EmuArray, args: list) -> None:
    report = compare(case, got.numpy(), expected(case, args))
    print(f"{case.id} {args[1:]}: max rel {report.max_rel:.3g}, max {report.max_ulp} ulp")
    assert report.ok, report.detail


@pytest.mark.parametrize(("op", "values"), [
    ("leaky_relu", [(0.01,), (0.2,), (-0.5,), (1.5,), (0,)]),
    ("elu", [(1.0,), (0.5,), (2.5,), (-1.0,)]),
    ("hardtanh", [(-1.0, 1.0), (0.0, 6.0), (-2.5, 0.5), (2.0, 2.0)]),
    ("softplus", [(1.0, 20.0), (2.0, 5.0), (0.5, 1.0), (-1.0, 20.0)]),
])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_scalar_parameters(device: Device, rng: np.random.Generator, op: str,
                           values: list[tuple[float, ...]], dtype: str) -> None:
    """Each value against the reference, NaN and the infinities among the inputs; the
    parameters are kernel arguments: every value runs the same kernel."""
    x = _input(rng)
    placed = device.array(x, dtype)
    host = placed.numpy()
    for params in values:
        got = getattr(ops, op)(placed, *params)
        _check(Case(op, dtype, ((7, 333), *[None] * len(params))), got, [host, *params])
    assert len(set(device.launches)) == 1


def test_nan_and_infinities_as_torch_gives_them(device: Device) -> None:
    x = device.array(np.array([np.nan, -0.0, np.inf, -np.inf, 2.0], np.float32))

    def bits(a: EmuArray) -> list[str]:
        return [repr(v) for v in a.numpy().tolist()]

    assert bits(ops.relu(x)) == ["nan", "0.0", "inf", "0.0", "2.0"]  # -0 gives +0
    assert bits(ops.leaky_relu(x, 0.5)) == ["nan", "-0.0", "inf", "-inf", "2.0"]
    assert bits(ops.hardtanh(x, -1.0, 1.0)) == ["nan", "-0.0", "1.0", "-1.0", "1.0"]
    # x * min(max(x + 3, 0), 6) / 6: -inf * 0 is NaN in torch's formula
    assert bits(ops.hardswish(x)) == ["nan", "-0.0", "inf", "nan", "1.6666667461395264"]
    assert bits(ops.hardsigmoid(x))[:4] == ["nan", "0.5", "1.0", "0.0"]
    assert bits(ops.gelu(x))[:4] == ["nan", "-0.0", "inf", "nan"]  # -inf * 0.5 * (1 - 1)
    assert bits(ops.silu(x))[:4] == ["nan", "-0.0", "inf", "nan"]  # -inf / inf
    assert bits(ops.sigmoid(x))[:4] == ["nan", "0.5", "1.0", "0.0"]
    assert bits(ops.softplus(x))[:4] == ["nan", "0.6931471824645996", "inf", "0.0"]
    assert bits(ops.elu(x))[:4] == ["nan", "-0.0", "inf", "-1.0"]
    assert bits(ops.mish(x))[:4] == ["nan", "-0.0", "inf", "nan"]


def test_gelu_tanh_form(device: Device, rng: np.random.Generator) -> None:
    x = rng.uniform(-2, 6, (5, 999)).astype(np.float32)
    x.flat[:4] = [np.nan, np.inf, -np.inf, -0.0]
    for dtype in ("f32", "f16", "bf16", "f8e4m3"):
        placed = device.array(x, dtype)
        got = ops.gelu(placed, approximate="tanh")
        _check(Case("gelu_tanh", dtype, ((5, 999),)), got, [placed.numpy()])
    with pytest.raises(ValueError, match="argument 'approximate'"):
        ops.gelu(placed, approximate="erf")


@pytest.mark.parametrize(("shape", "weight"), [
    ((2, 3, 5, 7), (3,)), ((2, 3, 5, 7), (1,)), ((2, 3, 5, 7), ()), ((4, 9), (9,)),
    ((11,), (1,)), ((), (1,)),
])
def test_prelu_weight_shapes(device: Device, rng: np.random.Generator,
                             shape: tuple[int, ...], weight: tuple[int, ...]) -> None:
    """One weight per channel (dim 1), or one weight; broadcast by strides, not copied."""
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.uniform(-2, 2, weight).astype(np.float32)
    placed_w = device.array(w)
    got = ops.prelu(device.array(x), placed_w)
    _check(Case("prelu", "f32", (shape, w.shape or (1,))), got, [x, w.reshape(-1)])
    assert sum(b.array.size for b in device.buffers) == max(x.size, 1) * 2 + max(w.size, 1)


def test_prelu_errors_name_the_weight(device: Device) -> None:
    x = device.array(np.ones((2, 3, 4), np.float32))
    with pytest.raises(ValueError, match=r"argument 'weight' has 4 elements; .* 3 channel"):
        ops.prelu(x, device.array(np.ones(4, np.float32)))
    with pytest.raises(ValueError, match="argument 'weight' must be 0-d or 1-d"):
        ops.prelu(x, device.array(np.ones((1, 3), np.float32)))
    with pytest.raises(TypeError, match=r"argument 'weight' is bfloat16 .* does not promote"):
        ops.prelu(x, device.array(np.ones(3, np.float32), "bf16"))
    with pytest.raises(TypeError, match="argument 'weight' must be an array"):
        ops.prelu(x, 0.25)
    with pytest.raises(ValueError, match=r"argument 'weight' has 3 elements; argument 'input' "
                                         r"of shape \(5,\) has 1 channel"):
        ops.prelu(device.array(np.ones(5, np.float32)), device.array(np.ones(3, np.float32)))


GATED = ["silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul"]


@pytest.mark.parametrize("op", GATED)
@pytest.mark.parametrize("dtype", ["f32", "bf16", "f8e4m3"])
def test_gated_odd_width_and_tails(device: Device, rng: np.random.Generator, op: str,
                                   dtype: str) -> None:
    """N = 1237 (the values half starts 2474 bytes in: not 16-byte aligned), one row,
    three rows, and a 3-d input."""
    for shape in [(2 * 1237,), (3, 2 * 1237), (2, 3, 2 * 37)]:
        x = rng.uniform(-2, 6, shape).astype(np.float32)
        x.flat[:3] = [np.nan, np.inf, -0.0]
        placed = device.array(x, dtype)
        got = getattr(ops, op)(placed)
        assert got.shape == (*shape[:-1], shape[-1] // 2)
        _check(Case(op, dtype, (shape,)), got, [placed.numpy()])


@pytest.mark.parametrize("op", GATED)
def test_gated_strided_input_and_out(device: Device, rng: np.random.Generator, op: str) -> None:
    """Every other row of a wider buffer, starting one element in: the halves are views
    with the buffer's row stride; out= gets every element."""
    rows, width, pitch = 6, 2 * 100, 256
    buffer = rng.uniform(-2, 6, (2 * rows, pitch)).astype(np.float32)
    base = device.array(buffer)
    x = base.view((rows, width), (2 * pitch, 1), offset=1)
    out = device.empty((rows, width // 2), "f32")
    result = getattr(ops, op)(x, out=out)
    assert result is out
    _check(Case(op, "f32", ((rows, width),)), out, [x.numpy()])


@pytest.mark.parametrize("op", GATED)
def test_gated_errors_name_the_input(device: Device, op: str) -> None:
    fn = getattr(ops, op)
    with pytest.raises(ValueError, match=r"argument 'input' has an odd last dimension \(7\)"):
        fn(device.array(np.ones((2, 7), np.float32)))
    with pytest.raises(ValueError, match="argument 'input' is 0-d"):
        fn(device.array(np.ones((), np.float32)))
    with pytest.raises(ValueError, match="argument 'out' has shape"):
        fn(device.array(np.ones((2, 8), np.float32)), out=device.empty((2, 8), "f32"))
    with pytest.raises(TypeError, match="argument 'input' must be an array"):
        fn(3.0)
    with pytest.raises(TypeError, match=f"{op} is not defined on int32"):
        fn(device.array(np.ones((2, 8), np.int32)))


def test_inplace_writes_over_the_input(device: Device, rng: np.random.Generator) -> None:
    x = _input(rng)
    for op, params in [("relu", ()), ("silu", ()), ("leaky_relu", (0.2,)), ("elu", (1.0,)),
                       ("hardtanh", (-0.5, 0.5)), ("hardswish", ()), ("mish", ())]:
        placed = device.array(x)
        result = getattr(ops, op)(placed, *params, inplace=True)
        assert result is placed
        shapes = ((7, 333), *[None] * len(params))
        _check(Case(op, "f32", shapes), placed, [x, *params])


def test_out_where_torch_has_it(device: Device, rng: np.random.Generator) -> None:
    x = device.array(_input(rng), "f16")
    for op in ("sigmoid", "tanh"):
        out = device.empty((7, 333), "f16")
        assert getattr(ops, op)(x, out=out) is out
        _check(Case(op, "f16", ((7, 333),)), out, [x.numpy()])


def test_parameter_errors(device: Device) -> None:
    x = device.array(np.ones(4, np.float32))
    with pytest.raises(ValueError, match=r"'min_val' .* greater than argument 'max_val'"):
        ops.hardtanh(x, 1.0, -1.0)
    with pytest.raises(TypeError, match="argument 'negative_slope' must be a number"):
        ops.leaky_relu(x, "0.1")
    with pytest.raises(TypeError, match="relu is not defined on int32"):
        ops.relu(device.array(np.ones(4, np.int32)))
