"""null tier: ops.fuse (ops/fuse.py) on the pretend device.

A fused function is the very function the unfused calls make: each test runs one
function both ways on the same arrays (fresh random values, the special ones mixed in)
and wants the same bits (any NaN for any NaN), the fused way in one kernel: random
chains of the unary, binary and activation ops over f32, f16 and bf16 with Python
numbers, broadcasts, views and out=; every unary, binary and activation row once in
bf16; the slot-bound cases (many layouts, too many types: cut into kernels, same bits).
Also: a second call takes the plan (the entry's key, no trace); number arguments are
keyed by value; the errors a user gets for what cannot be fused; NumPy arrays; the
operators on traced values; the meta torch's fake implementation uses. The kernels run
in the host emulator (host.py), the gpu tier runs them on the GPU (test_ops_fuse.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from typing import Any, cast

import numpy as np
import pytest
from support import fake_torch
from support.emulated import Device, EmuArray
from support.fuse_chains import (
    ACTIVATIONS,
    BINARY,
    UNARY,
    Argument,
    Program,
    function,
    place,
    random_program,
    row_chain,
    same_bits,
)

from tile_mlir import ops
from tile_mlir.dtypes import DTYPES
from tile_mlir.ops import entry
from tile_mlir.ops.fuse import Fused, FuseError

GELU_MUL = "add(%0, %1) : bf16", "gelu($0) : bf16", "mul($1, %2) : bf16"


def _np(dtype: str) -> Any:
    return DTYPES[dtype].np_dtype()


def _arrays(device: Device, program: Program, rng: np.random.Generator) -> list[EmuArray]:
    made = []
    for argument in program.arguments:
        placed = place(argument, rng, _np(argument.dtype))
        base = device.array(placed.base, argument.dtype)
        made.append(base.view(placed.shape, placed.strides, placed.offset))
    return made


def _launched(device: Device, call: Callable[..., Any], *given: Any) -> tuple[Any, list[str]]:
    """The call's result and the kernels it launched."""
    before = len(device.launches)
    result = call(*given)
    return result, device.launches[before:]


def _fused_ops(kernels: list[str]) -> list[str]:
    return [line for text in kernels for line in text.splitlines()
            if '"tile.elementwise"' in line and 'op = "fused"' in line]


def test_the_bench_chain_is_one_kernel_with_the_unfused_bits(
        device: Device, rng: np.random.Generator) -> None:
    x = device.array(rng.standard_normal((7, 1000)) * 3, "bf16")
    b = device.array(rng.standard_normal(1000), "bf16")

    def chain(x: Any, b: Any) -> Any:
        return ops.mul(ops.gelu(ops.add(x, b)), 0.5)

    fused = ops.fuse(chain)
    got, kernels = _launched(device, fused, x, b)
    assert len(kernels) == 1
    assert all(f'"{step}"' in _fused_ops(kernels)[0] for step in GELU_MUL), kernels[0]
    same_bits(got.numpy(), chain(x, b).numpy(), "mul(gelu(add(x, b)), 0.5)")
    wide = x.numpy().astype(np.float64) + b.numpy().astype(np.float64)
    reference = 0.5 * wide * 0.5 * (1 + np.vectorize(math.erf)(wide / math.sqrt(2)))
    np.testing.assert_allclose(got.numpy().astype(np.float64), reference, rtol=2e-2,
                               atol=1e-2)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("draw", range(3))
def test_random_chains(device: Device, rng: np.random.Generator, dtype: str,
                       draw: int) -> None:
    program = random_program(rng, dtype, calls=int(rng.integers(2, 6)))
    what = program.describe()
    print(what)
    arrays = _arrays(device, program, rng)
    fn = function(program, ops)
    want = fn(*arrays).numpy()
    fused = ops.fuse(fn)
    got, kernels = _launched(device, fused, *arrays)
    # one kernel wherever the inputs fit tile.elementwise's slots (see the slot tests)
    assert 1 <= len(kernels) <= len(program.calls) and _fused_ops(kernels), what
    same_bits(got.numpy(), want, what)
    out = device.empty(want.shape, got.dtype)
    assert fused(*arrays, out=out) is out
    same_bits(out.numpy(), want, f"out=: {what}")
    wide = device.empty(want.shape, "f32")  # out= of another dtype: the result widened
    same_bits(fused(*arrays, out=wide).numpy(), want.astype(np.float32), f"f32 out: {what}")


def test_every_row_once_in_bf16(device: Device, rng: np.random.Generator) -> None:
    """Each unary, binary and activation row as a step between two narrowing ones."""
    x = device.array(rng.standard_normal((3, 70)) * 3, "bf16")
    y = device.array(rng.uniform(0.25, 4, (3, 70)), "bf16")
    for op in (*UNARY, *ACTIVATIONS, *BINARY, "lerp", "where"):
        fn = row_chain(op, ops)
        got, kernels = _launched(device, ops.fuse(fn), x, y)
        assert len(kernels) == 1, op
        same_bits(got.numpy(), fn(x, y).numpy(), op)


# ------------------------------------------------------------------ the plan cache


def test_a_second_call_takes_the_plan(device: Device, rng: np.random.Generator,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    fused = ops.fuse(lambda x, b: ops.silu(ops.sub(x, b, alpha=0.5)))
    x, b = device.array(rng.standard_normal(300), "f16"), device.array(rng.standard_normal(300),
                                                                        "f16")
    fused(x, b)
    ops.silu(ops.sub(x, b, alpha=0.5))  # the unfused calls' plans too
    monkeypatch.setattr(entry, "full", lambda *a, **k: pytest.fail("took the full path"))
    for _ in range(2):
        x2 = device.array(rng.standard_normal(300), "f16")
        b2 = device.array(rng.standard_normal(300), "f16")
        same_bits(fused(x2, b2).numpy(), ops.silu(ops.sub(x2, b2, alpha=0.5)).numpy(), "again")


def test_number_arguments_are_keyed_by_value(device: Device, rng: np.random.Generator) -> None:
    fused = ops.fuse(lambda x, s: ops.mul(ops.add(x, s), s))
    x = device.array(rng.standard_normal(100), "f32")
    for s in (2.0, 0.5, 0.0, -0.0, 3, True):
        got = fused(x, s).numpy()
        same_bits(got, ops.mul(ops.add(x, s), s).numpy(), f"s={s!r}")
    assert np.signbit(fused(device.array(np.array([1.0, 2.0]), "f32"), -0.0).numpy()).all()


def test_torch_numbers(device: Device, rng: np.random.Generator) -> None:
    """div by a number is a multiplication by its reciprocal, pow's special exponents, a
    number rounded to bf16 first where torch rounds it (comparisons): as unfused."""
    x = device.array(rng.uniform(0.1, 9, 257), "bf16")
    chains: list[Callable[[Any], Any]] = [
               lambda x: ops.div(ops.exp(x), 3.0), lambda x: ops.pow(ops.add(x, 1.0), 0.5),
               lambda x: ops.pow(ops.mul(x, 1.5), 3), lambda x: ops.eq(ops.add(x, 0.0), 1.1),
               lambda x: ops.floor_divide(ops.neg(x), 0.3),
               lambda x: ops.remainder(ops.mul(x, 3.0), 1.1)]
    for fn in chains:
        got, kernels = _launched(device, ops.fuse(fn), x)
        assert len(kernels) == 1
        same_bits(got.numpy(), fn(x).numpy(), "torch's numbers")


def test_integers(device: Device, rng: np.random.Generator) -> None:
    i = device.array(rng.integers(-100, 100, 77), "i32")
    fused = ops.fuse(lambda i: ops.bitwise_xor(ops.mul(ops.add(i, 3), 2), 5))
    np.testing.assert_array_equal(fused(i).numpy(), ((i.numpy() + 3) * 2) ^ 5)
    with pytest.raises(OverflowError, match="argument 'other'"):
        ops.fuse(lambda i: ops.add(ops.neg(i), 1 << 40))(i)
    with pytest.raises(TypeError, match="sub: argument 'other' is a bool"):  # as unfused
        ops.fuse(lambda i: ops.sub(ops.neg(i), True))(i)
    with pytest.raises(TypeError, match="sub: argument 'the result of gt' is a bool"):
        ops.fuse(lambda i: i - ops.gt(i, 0))(i)


# ------------------------------------------------------------------ out= and views


def test_out_in_place_and_shape(device: Device, rng: np.random.Generator) -> None:
    values = rng.standard_normal((4, 33))
    x = device.array(values, "f32")
    y = device.array(values, "f32")
    fused = ops.fuse(lambda x: ops.tanh(ops.mul(x, 2.0)))
    assert fused(x, out=x) is x  # in place: the very same view
    same_bits(x.numpy(), ops.tanh(ops.mul(y, 2.0)).numpy(), "in place")
    with pytest.raises(ValueError, match="argument 'out' has shape"):
        fused(y, out=device.empty((4, 32), "f32"))
    with pytest.raises(TypeError, match="argument 'out' is int32"):
        fused(y, out=device.empty((4, 33), "i32"))


def test_gated_ops_and_prelu_on_arguments(device: Device, rng: np.random.Generator) -> None:
    h = device.array(rng.standard_normal((5, 64)), "bf16")
    w = device.array(rng.uniform(0, 1, 32), "bf16")
    chains: list[Callable[[Any, Any], Any]] = [
        lambda h, w: ops.mul(ops.silu_and_mul(h), w),
        lambda h, w: ops.prelu(ops.gelu_tanh_and_mul(h), w)]
    for fn in chains:
        got, kernels = _launched(device, ops.fuse(fn), h, w)
        assert len(kernels) == 1
        same_bits(got.numpy(), fn(h, w).numpy(), "gated")


def test_many_layouts_share_the_slot(device: Device, rng: np.random.Generator) -> None:
    """Layer norm's last step on five arrays of five layouts: one kernel (the variadic
    slot's arrays made one layout); with three numbers besides, two kernels (an
    intermediate stored in bf16, as unfused), and the same bits either way."""
    x = device.array(rng.standard_normal((6, 96)), "bf16")
    mean, rstd = (device.array(rng.standard_normal((6, 1)), "bf16") for _ in range(2))
    w, b = (device.array(rng.standard_normal(96), "bf16") for _ in range(2))
    t = device.array(rng.standard_normal(96 * 6), "bf16").view((6, 96), (1, 6))

    def norm(x: Any, mean: Any, rstd: Any, w: Any, b: Any) -> Any:
        return ops.add(ops.mul(ops.mul(ops.sub(x, mean), rstd), w), b)

    def scaled(x: Any, mean: Any, rstd: Any, w: Any, b: Any) -> Any:
        return ops.add(ops.mul(norm(x, mean, rstd, w, ops.mul(b, 0.5)), 1.5), 0.25)

    for fn, count in ((norm, 1), (scaled, 2)):
        for first in (x, t):
            got, kernels = _launched(device, ops.fuse(fn), first, mean, rstd, w, b)
            assert len(kernels) == count, fn.__name__
            same_bits(got.numpy(), fn(first, mean, rstd, w, b).numpy(), fn.__name__)


def test_a_cut_intermediate_is_computed_once(device: Device, rng: np.random.Generator) -> None:
    """An intermediate that two later cuts both read (v6 below, and v5 and v4 inside it)
    is computed once into its temporary and read from there by every later kernel (it was
    computed again for the second cut: 8 kernels for 6 calls; CI's seed
    15169871580766688903 of test_random_chains)."""
    x = device.array(rng.standard_normal((6, 90)), "bf16").view((6, 45), (90, 2), 0)
    y = device.array(rng.standard_normal((6, 90)), "bf16").view((6, 45), (90, 2), 1)
    b = device.array(rng.standard_normal(45), "f32")

    def chain(v0: Any, v1: Any, v2: Any) -> Any:
        v4 = ops.where(ops.eq(v2, 2.0), 2.0, v0)
        v6 = ops.where(ops.ge(v4, v1), v4, 7.0)
        return ops.where(ops.le(v1, v6), v6, v0)

    got, kernels = _launched(device, ops.fuse(chain), x, b, y)
    heads = [line for text in kernels for line in text.splitlines() if "tile_mlir.ops" in line]
    assert len(heads) == len(kernels) == len(set(heads)) <= 6, heads
    same_bits(got.numpy(), chain(x, b, y).numpy(), "a shared intermediate")


def test_numpy_arrays(device: Device, rng: np.random.Generator) -> None:
    x = rng.standard_normal((3, 50)).astype(np.float32)
    fused = ops.fuse(lambda x, b: ops.sigmoid(ops.add(x, b)))
    got = fused(x, x[0])
    assert isinstance(got, np.ndarray)
    same_bits(got, ops.sigmoid(ops.add(x, x[0])), "numpy")


# ------------------------------------------------------------------ tracing


def test_operators_are_the_ops(device: Device, rng: np.random.Generator) -> None:
    x = device.array(rng.uniform(0.5, 3, 64), "f32")
    y = device.array(rng.uniform(0.5, 3, 64), "f32")

    def written(x: Any, y: Any) -> Any:
        return ops.where((x > y) | (x <= 1.0), -(x * 2 + y) / (1 - y) ** 2 % 3, abs(x) // y)

    def called(x: Any, y: Any) -> Any:
        condition = ops.bitwise_or(ops.gt(x, y), ops.le(x, 1.0))
        numerator = ops.neg(ops.add(ops.mul(x, 2), y))
        value = ops.remainder(ops.div(numerator, ops.pow(ops.sub(1, y), 2)), 3)
        return ops.where(condition, value, ops.floor_divide(ops.abs(x), y))

    got, kernels = _launched(device, ops.fuse(written), x, y)
    assert len(kernels) == 1
    same_bits(got.numpy(), called(x, y).numpy(), "operators")


def test_nested_and_unused(device: Device, rng: np.random.Generator) -> None:
    inner = ops.fuse(lambda x, s=2.0: ops.mul(ops.exp(x), s))

    @ops.fuse(name="outer")
    def outer(x: Any) -> Any:
        """The docstring stays."""
        ops.sin(x)  # computed and not used: left out
        return ops.add(inner(x, 3.0), x)

    x = device.array(rng.standard_normal(40), "f16")
    got, kernels = _launched(device, outer, x)
    assert isinstance(outer, Fused) and outer.__doc__ == "The docstring stays."
    assert "outer" in repr(outer) and ops.fuse(outer) is outer
    assert len(kernels) == 1 and "sin" not in _fused_ops(kernels)[0]
    same_bits(got.numpy(), ops.add(ops.mul(ops.exp(x), 3.0), x).numpy(), "nested")


def test_static_parameters(device: Device, rng: np.random.Generator) -> None:
    fused = ops.fuse(lambda x, op="exp", *, approximate="none": ops.gelu(
        getattr(ops, op)(x), approximate=approximate))
    x = device.array(rng.standard_normal(30), "f32")
    same_bits(fused(x, "sin", approximate="tanh").numpy(),
              ops.gelu(ops.sin(x), approximate="tanh").numpy(), "static")
    same_bits(fused(x).numpy(), ops.gelu(ops.exp(x)).numpy(), "defaults")


def test_meta_is_the_traced_shape_and_dtype() -> None:
    from tile_mlir.ops.args import Array, classify

    fused = ops.fuse(lambda x, b, s: ops.gt(ops.silu_and_mul(ops.add(x, b)), s))
    x = Array("x", "torch", "bf16", (2, 3, 8), (24, 8, 1), 0, 0, root="_p_x")
    b = Array("b", "torch", "f32", (8,), (1,), 0, 0, root="_p_b")
    with pytest.raises(FuseError, match="view of an intermediate"):
        fused.meta({"x": x, "b": b, "s": classify(0.5, "s")})
    fused = ops.fuse(lambda x, b: ops.mul(ops.add(x, b), 2))
    assert fused.meta({"x": x, "b": b}) == ((2, 3, 8), "f32")


# ------------------------------------------------------------------ errors


def _error(device: Device, fn: Callable[..., Any], pattern: str, *given: Any) -> None:
    with pytest.raises(FuseError, match=pattern):
        ops.fuse(fn)(*given)


def test_what_cannot_be_fused_says_so(device: Device, rng: np.random.Generator) -> None:
    x = device.array(rng.standard_normal((4, 8)), "f32")
    y = device.array(rng.standard_normal((4, 8)), "f32")
    cases: list[tuple[Callable[..., Any], str]] = [
        (lambda x: ops.sum(ops.exp(x), dim=-1), r"sum cannot be fused: it is a reduction"),
        (lambda x: ops.dropout(ops.exp(x), 0.1), r"dropout cannot be fused: it is a generator"),
        (lambda x: ops.rope_neox(x, x, x), r"rope_neox cannot be fused: it is RoPE"),
        (lambda x: ops.exp(x, out=x), r"exp: out= inside the fused function"),
        (lambda x: ops.relu(ops.exp(x), inplace=True), r"relu: inplace=True inside"),
        (lambda x: ops.add(x, y), r"argument 'other' is an array that is not an array "
                                  r"argument"),
        (lambda x: ops.silu_and_mul(ops.exp(x)), r"view of an intermediate result"),
        (lambda x: ops.exp(x) if ops.gt(x, 0) else x, r"Python control flow"),
        (lambda x: float(ops.exp(x)), r"float\(\) on a traced value"),
        (lambda x: x, r"returns its argument \(x\) unchanged"),
        (lambda x: (ops.exp(x), ops.sin(x)), r"returns 2 values"),
        (lambda x: 1.0, r"returns a float"),
        (lambda x: ops.leaky_relu(x, x), r"argument 'negative_slope' must be a number"),
        (lambda x: np.asarray(ops.exp(x)), r"conversion to a NumPy array"),
    ]
    for fn, pattern in cases:
        _error(device, fn, pattern, x)
    with pytest.raises(FuseError, match="keyword-only ones are constants of the kernel"):
        ops.fuse(lambda x, *, b: ops.add(x, b))(x, b=y)
    kept: list[Any] = []

    def leaks(x: Any) -> Any:
        kept.append(x)
        return ops.exp(x)

    ops.fuse(leaks)(x)
    with pytest.raises(FuseError, match="after its trace ended"):
        ops.fuse(lambda y: ops.add(y, kept[0]))(y)


def test_bad_functions_are_refused_when_fused() -> None:
    with pytest.raises(TypeError, match=r"parameter '\*xs'"):
        ops.fuse(lambda *xs: xs[0])
    with pytest.raises(TypeError, match="parameter 'out'"):
        ops.fuse(lambda x, out: x)
    with pytest.raises(TypeError, match="parameter '_x'"):
        ops.fuse(lambda _x: _x)
    with pytest.raises(TypeError, match="argument 'fn' must be a function"):
        ops.fuse(cast(Any, 3))


def test_too_many_types_cut_the_function(device: Device, rng: np.random.Generator) -> None:
    """Four arrays of four dtypes: no one op takes them; the function still runs (in as
    many kernels as it takes), with the unfused bits."""
    arrays = [device.array(rng.standard_normal(50), d) for d in ("f32", "f16", "bf16", "i32")]

    def fn(a: Any, b: Any, c: Any, d: Any) -> Any:
        return ops.add(ops.add(ops.mul(a, b), ops.mul(c, 2.0)), ops.mul(d, 0.5))

    got, kernels = _launched(device, ops.fuse(fn), *arrays)
    assert 1 < len(kernels) < 5
    same_bits(got.numpy(), fn(*arrays).numpy(), "four dtypes")


# ------------------------------------------------------------------ with torch


@pytest.fixture
def torch(device: Device, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    yield from fake_torch.installed(device, monkeypatch)


def test_torch_tensors_and_a_0d_host_tensor(torch: Any, rng: np.random.Generator) -> None:
    values = rng.standard_normal((3, 20)).astype(np.float32)
    x = torch.tensor(values)
    fused = ops.fuse(lambda x, s: ops.mul(ops.exp(x), s))
    for s in (2.0, 3.0):  # a 0-d CPU tensor is a number; its value is read at every call
        host = fake_torch.HostScalar(s, torch.float32)
        same_bits(fused(x, host).numpy(), ops.mul(ops.exp(x), host).numpy(), "0-d")


def test_describe_names_what_it_traces(device: Device) -> None:
    seen: list[str] = []

    def fn(x: Any) -> Any:
        seen.append(repr(x))
        return ops.exp(x)

    ops.fuse(fn)(device.array(np.ones((2, 3)), "bf16"))
    assert re.fullmatch(r"<x: bfloat16\[2, 3\], traced by ops\.fuse>", seen[0]), seen


def test_argument_sketch_shapes() -> None:
    """The layouts the random programs draw are what their strides say."""
    rng = np.random.default_rng(0)
    for layout in ("contiguous", "row", "column", "transposed", "strided", "misaligned",
                   "expanded"):
        placed = place(Argument("f32", layout), rng, np.float32)
        assert placed.values.shape == placed.shape
