"""null tier: the plan cache and the generated launchers (entry.py, plan.py).

With a stand-in torch on the pretend device: a call like an earlier one takes its plan
(the full path is not run), and still computes the right thing with its own pointers
and numbers; a new alignment, shape or stride plans again; out= that overlaps is refused
every time, in place works every time; another thread runs a copy of the launcher.

With a lean torch (attributes where torch has C getters) and the fake driver
(support/fakes.py): the Python function calls of one call of a planned op, counted with
cProfile, against a bound, so that a slower fast path shows without a GPU; and the
parameters the driver reads are this call's pointers and numbers.
"""

from __future__ import annotations

import cProfile
import gc
import pstats
import sys
import threading
import types
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from support import fake_torch
from support.emulated import Device
from support.fakes import FakeDriver, lean_torch
from support.plans import full_paths

from tile_mlir import ops
from tile_mlir.dtypes import DTYPES
from tile_mlir.ops import args, entry, kernels
from tile_mlir.ops.programs import KernelProgram
from tile_mlir.runtime import driver as runtime_driver
from tile_mlir.runtime.spec import KernelSpec, Param


@pytest.fixture
def torch(device: Device, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    yield from fake_torch.installed(device, monkeypatch)


def _only_plans(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on the full path fails the test: what runs must be a plan."""
    monkeypatch.setattr(entry, "full", lambda *a, **k: pytest.fail("took the full path"))


def test_repeated_calls_take_the_plan(torch: Any, rng: np.random.Generator,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    x, y = rng.standard_normal((2, 3, 1000)).astype(np.float32)
    np.testing.assert_array_equal(ops.add(torch.tensor(x), torch.tensor(y)).numpy(), x + y)
    _only_plans(monkeypatch)
    for _ in range(3):
        a, b = rng.standard_normal((2, 3, 1000)).astype(np.float32)
        np.testing.assert_array_equal(ops.add(torch.tensor(a), torch.tensor(b)).numpy(), a + b)


def _planned(name: str) -> list[Any]:
    return [plan for key, plan in entry.PLANS.items() if key[0] == name]


def test_outputs_made_like_an_input_where_it_lies_as_they_do(
        torch: Any, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch) -> None:
    """An output of an input's shape, that input row-major: torch.empty_like of it (half
    torch.empty's host cost); a comparison's bool output passes its dtype; a transposed
    input, a view the semantics made (silu_and_mul's halves) or a broadcast shape:
    the input's new_empty(shape). A subclass's call takes the same plan and gets a plain
    tensor from torch.empty."""
    x, y = rng.standard_normal((2, 6, 50)).astype(np.float32)
    made: list[tuple[str, Any]] = []

    def recorded(how: str, make: Callable[..., Any]) -> Callable[..., Any]:
        def record(*given: Any, **keywords: Any) -> Any:
            made.append((how, keywords))
            return make(*given, **keywords)
        return record

    monkeypatch.setattr(torch, "empty_like", recorded("like", torch.empty_like))
    monkeypatch.setattr(torch, "empty", recorded("empty", torch.empty))
    monkeypatch.setattr(fake_torch.Tensor, "new_empty",
                        recorded("new", fake_torch.Tensor.new_empty))  # type: ignore[attr-defined]

    def transposed() -> Any:  # x, laid out column-major
        return fake_torch.Tensor(torch.tensor(x.T.copy()).array.view((6, 50), (1, 6)),
                                 {"float32": torch.float32})

    calls: dict[str, tuple[Callable[[], Any], Any, list[tuple[str, Any]]]] = {
        "add": (lambda: ops.add(torch.tensor(x), torch.tensor(y)), x + y, [("like", {})]),
        "lt": (lambda: ops.lt(torch.tensor(x), torch.tensor(y)), x < y,
               [("like", {"dtype": torch.bool})]),
        "neg": (lambda: ops.neg(transposed()), -x, [("new", {})]),
        "mul": (lambda: ops.mul(torch.tensor(x[:1]), torch.tensor(y[:, :1].copy())),
                x[:1] * y[:, :1], [("new", {})]),
        "silu_and_mul": (lambda: ops.silu_and_mul(torch.tensor(x)), None, [("new", {})]),
        "sum": (lambda: ops.sum(torch.tensor(x), dim=-1), None, [("new", {})]),
    }
    for name, (call, expected, allocations) in calls.items():
        for _ in range(2):  # planned, then from the plan
            made.clear()
            got = call()
            if expected is not None:
                np.testing.assert_array_equal(got.numpy(), expected)
            assert [(how, "any" if how == "empty" else k) for how, k in made] == allocations, name
        assert len(_planned(name)) == 1, name

    class Sub(fake_torch.Tensor):
        pass

    ops.exp(torch.tensor(x))
    made.clear()
    got = ops.exp(Sub(torch.tensor(x).array, {"float32": torch.float32}))
    assert type(got) is fake_torch.Tensor and [how for how, _ in made] == ["empty"]
    np.testing.assert_allclose(got.numpy(), np.exp(x), rtol=1e-6)
    assert len(_planned("exp")) == 1


def test_a_plan_keeps_no_tensor_of_its_call_alive(torch: Any, rng: np.random.Generator
                                                  ) -> None:
    """torch.compile's CUDA graph trees refuse a capture pool with live tensors nothing
    tracks: a plan made from a call must not hold that call's tensors (nor views of them)."""
    x, y = rng.standard_normal((2, 6, 50)).astype(np.float32)
    a, b = torch.tensor(x), torch.tensor(y)
    held = [weakref.ref(t) for t in (a, b)]
    for _ in range(2):
        ops.add(a, b)
        ops.silu_and_mul(a)
        ops.sum(a, dim=-1)
    del a, b
    gc.collect()
    assert [ref() for ref in held] == [None, None]
    assert _planned("add") and _planned("silu_and_mul") and _planned("sum")


def test_numbers_change_between_calls(torch: Any, rng: np.random.Generator,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    x = rng.standard_normal(777).astype(np.float16)
    i = rng.integers(-9, 9, 50).astype(np.int32)
    ops.mul(torch.tensor(x), 2.0)
    ops.add(torch.tensor(i), 1)
    ops.leaky_relu(torch.tensor(x), 0.1)
    _only_plans(monkeypatch)
    for s in (3.0, -0.5, 1e-3):
        got = ops.mul(torch.tensor(x), s).numpy()
        np.testing.assert_array_equal(got, (x.astype(np.float32) * np.float32(s)).astype(
            np.float16))
        got = ops.leaky_relu(torch.tensor(x), s).numpy()
        wide = x.astype(np.float32)
        np.testing.assert_array_equal(got, np.where(wide > 0, wide, wide * np.float32(s))
                                      .astype(np.float16))
    with pytest.raises(OverflowError, match="argument 'other'"):
        ops.add(torch.tensor(i), 1 << 40)  # checked by the plan, every call


def test_each_special_power_has_its_plan(torch: Any, rng: np.random.Generator) -> None:
    """pow by 0.5, -0.5 and -1 runs sqrt, rsqrt and reciprocal: the value is in the key."""
    x = rng.uniform(0.5, 4, 100).astype(np.float32)
    for exponent in (-0.5, 0.5, -1.0, 2.5, -0.5):
        got = ops.pow(torch.tensor(x), exponent).numpy()
        np.testing.assert_allclose(got, x.astype(np.float64) ** exponent, rtol=1e-6)


def test_in_place_and_overlap(torch: Any, rng: np.random.Generator) -> None:
    x, y = rng.standard_normal((2, 4096)).astype(np.float32)
    for _ in range(2):  # the second time from the plan
        a = torch.tensor(x)
        assert ops.sub(a, torch.tensor(y), out=a) is a
        np.testing.assert_array_equal(a.numpy(), x - y)
    a = torch.tensor(np.arange(20, dtype=np.float32))
    front = fake_torch.Tensor(a.array.view((19,), (1,)), {"float32": torch.float32})
    shifted = fake_torch.Tensor(a.array.view((19,), (1,), offset=1), {"float32": torch.float32})
    for _ in range(2):  # refused by the full path, and by the plan's check after
        with pytest.raises(ValueError, match="argument 'out' overlaps argument 'input'"):
            ops.neg(front, out=shifted)
    apart = torch.tensor(np.arange(40, dtype=np.float32))
    ops.neg(fake_torch.Tensor(apart.array.view((19,), (1,)), {"float32": torch.float32}),
            out=fake_torch.Tensor(apart.array.view((19,), (1,), offset=20),
                                  {"float32": torch.float32}))
    np.testing.assert_array_equal(apart.numpy()[20:39], -np.arange(19, dtype=np.float32))


def test_new_alignment_or_shape_plans_again(torch: Any, rng: np.random.Generator) -> None:
    x = rng.standard_normal(1001).astype(np.float32)
    ops.exp(torch.tensor(x))
    misaligned = ops.exp(torch.tensor(x, offset=1)).numpy()
    np.testing.assert_allclose(misaligned, np.exp(x), rtol=1e-6)
    other = rng.standard_normal(999).astype(np.float32)
    np.testing.assert_allclose(ops.exp(torch.tensor(other)).numpy(), np.exp(other), rtol=1e-6)
    assert len(entry.PLANS) == 3


def test_the_inline_cache_serves_calls_like_the_last_and_no_other(
        torch: Any, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch) -> None:
    """A call like its op's latest (the same kinds of values; tensors alike by torch's
    guard: type, dtype, device, shape, strides; pointers as aligned and as aliased;
    numbers of the same types and classes; equal static values) runs that plan without
    building its key. Each way of differing is shown here with the plan cache emptied
    and the inline cache kept: the call plans again (its key missed), and is right."""
    x, y = rng.standard_normal((2, 3, 1000)).astype(np.float32)
    t = torch.tensor

    def base() -> Any:
        return ops.add(t(x), t(y), alpha=2.0, out=torch.empty((3, 1000), torch.float32))

    made = full_paths(monkeypatch)

    def served(call: Callable[[], Any], expected: np.ndarray, inline: bool) -> None:
        entry.clear()
        base()
        entry.PLANS.clear()  # only the inline cache knows a plan now
        made.clear()
        np.testing.assert_allclose(call().numpy(), expected, rtol=1e-6, atol=1e-6)
        assert made == ([] if inline else ["add"])

    a, b = rng.standard_normal((2, 3, 1000)).astype(np.float32)
    served(lambda: ops.add(t(a), t(b), alpha=-3.0, out=torch.empty((3, 1000), torch.float32)),
           a - 3 * b, inline=True)
    served(lambda: ops.add(t(a), t(b), alpha=2.0), a + 2 * b, inline=False)  # out=None
    served(lambda: ops.add(t(a), t(b), alpha=2, out=torch.empty((3, 1000), torch.float32)),
           a + 2 * b, inline=False)  # an int alpha
    served(lambda: ops.add(t(a), t(b), alpha=1.0, out=torch.empty((3, 1000), torch.float32)),
           a + b, inline=False)  # alpha == 1: another class
    served(lambda: ops.add(t(a), 1.5, alpha=2.0, out=torch.empty((3, 1000), torch.float32)),
           a + 3.0, inline=False)  # a number for a tensor
    served(lambda: ops.add(t(a[:, :999]), t(b[:, :999]), alpha=2.0,
                           out=torch.empty((3, 999), torch.float32)),
           a[:, :999] + 2 * b[:, :999], inline=False)  # a shape
    half = a.astype(np.float16)
    served(lambda: ops.add(t(half), t(half), alpha=2.0, out=torch.empty((3, 1000),
                                                                         torch.float16)),
           (3 * half.astype(np.float32)).astype(np.float16), inline=False)  # a dtype
    served(lambda: ops.add(t(a, offset=1), t(b), alpha=2.0,
                           out=torch.empty((3, 1000), torch.float32)),
           a + 2 * b, inline=False)  # 4 bytes past an aligned address
    inputs = t(a)
    served(lambda: ops.add(inputs, t(b), alpha=2.0, out=inputs), a + 2 * b,
           inline=False)  # out= is the input
    again = fake_torch.Tensor(inputs.array.view((3, 1000), (1000, 1)),
                              {"float32": torch.float32})
    served(lambda: ops.add(t(b), inputs, alpha=2.0, out=again), b + 2 * (a + 2 * b),
           inline=False)  # out= is another tensor at the input's address
    one = t(a)
    served(lambda: ops.add(one, one, alpha=2.0, out=torch.empty((3, 1000), torch.float32)),
           3 * a, inline=False)  # one tensor twice
    wide = t(np.ascontiguousarray(np.concatenate([a, b], axis=1)))
    view = fake_torch.Tensor(wide.array.view((3, 1000), (2000, 1)), {"float32": torch.float32})
    served(lambda: ops.add(view, t(b), alpha=2.0, out=torch.empty((3, 1000), torch.float32)),
           a + 2 * b, inline=False)  # strides


def test_two_shapes_alternating_are_both_served(
        torch: Any, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch) -> None:
    """The inline cache holds an op's two latest plans: calls alternating between two
    shapes take them without a key; a third shape plans, and pushes the older out."""
    made = full_paths(monkeypatch)
    xs = {n: rng.standard_normal(n).astype(np.float32) for n in (100, 200, 300)}

    def exp(n: int) -> None:
        np.testing.assert_allclose(ops.exp(torch.tensor(xs[n])).numpy(), np.exp(xs[n]),
                                   rtol=1e-6)

    exp(100)
    exp(200)
    entry.PLANS.clear()  # what serves a call without planning is the inline cache
    made.clear()
    for n in (100, 200, 100, 200):
        exp(n)
    assert made == []
    exp(300)  # plans: the inline cache holds 300 and 200
    exp(200)
    assert made == ["exp"]
    exp(100)
    assert made == ["exp", "exp"]


def test_an_op_called_with_many_shapes_stops_probing(
        torch: Any, rng: np.random.Generator) -> None:
    """Three shapes in turn miss both entries of the inline cache every call: past
    MEGAMORPHIC calls that found their plan by key the op's cache stays empty (no probe
    runs) and its plans are kept by the leading tensor's shape and dtype instead, which
    serve the three shapes without a key; calls those miss (same shape and dtype, other
    strides) find their plan by key, until RETRY such calls or the plan cache empties;
    two shapes in turn never get there."""
    xs = {n: torch.tensor(rng.standard_normal(n).astype(np.float32)) for n in (10, 20, 30)}
    for _ in range(3 * entry.MEGAMORPHIC):
        for n in (10, 20):
            ops.neg(xs[n])
    assert entry.NAMES["_IC_neg"] is not None and entry.NAMES["_KEYED_neg"] <= 2
    assert not entry.NAMES["_BY_neg"]  # None: not megamorphic
    for turn in range(entry.MEGAMORPHIC):
        for n in (10, 20, 30):
            np.testing.assert_array_equal(ops.neg(xs[n]).numpy(), -xs[n].numpy())
        if turn < entry.MEGAMORPHIC // 3 - 1:
            assert entry.NAMES["_IC_neg"] is not None
    assert entry.NAMES["_IC_neg"] is None
    keyed = entry.NAMES["_KEYED_neg"]
    assert sorted(shape for shape, _ in entry.NAMES["_BY_neg"]) == [(10,), (20,), (30,)]
    for _ in range(5):  # served by shape: no call builds its key
        for n in (30, 10, 20):
            np.testing.assert_array_equal(ops.neg(xs[n]).numpy(), -xs[n].numpy())
    assert entry.NAMES["_KEYED_neg"] == keyed
    wide = torch.tensor(rng.standard_normal(20).astype(np.float32))
    strided = fake_torch.Tensor(wide.array.view((10,), (2,)), {"float32": torch.float32})
    while entry.NAMES["_KEYED_neg"]:  # RETRY calls by key later the cache is tried again
        assert entry.NAMES["_IC_neg"] is None
        for x in (strided, xs[10]):  # each misses the other's plan by shape
            np.testing.assert_array_equal(ops.neg(x).numpy(), -x.numpy())
    ops.neg(strided)  # by key (the plan by shape is xs[10]'s): the next tries the cache
    assert entry.NAMES["_IC_neg"] is not None and entry.NAMES["_KEYED_neg"] == 1
    entry.clear()
    assert entry.NAMES["_BY_neg"] is None
    ops.neg(xs[10])
    assert entry.NAMES["_IC_neg"] is not None and entry.NAMES["_KEYED_neg"] == 0


def test_a_megamorphic_op_keeps_a_bounded_number_of_plans_by_shape(
        torch: Any, rng: np.random.Generator) -> None:
    """Past SHAPES shapes the plans by shape start over; every call is right."""
    xs = [torch.tensor(rng.standard_normal(n).astype(np.float32)) for n in range(1, 100)]
    for _ in range(2):
        for x in xs:
            np.testing.assert_array_equal(ops.neg(x).numpy(), -x.numpy())
    assert entry.NAMES["_IC_neg"] is None
    assert 0 < len(entry.NAMES["_BY_neg"]) <= entry.SHAPES


def test_the_inline_cache_compares_static_values(
        torch: Any, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch) -> None:
    x = rng.standard_normal((6, 50)).astype(np.float32)
    made = full_paths(monkeypatch)
    for dim, keepdim, planned in [(-1, False, True), (-1, False, False), (0, False, True),
                                  (-1, True, True), (-1, True, False), (1, True, True)]:
        entry.PLANS.clear()  # what serves a call without planning is the inline cache
        made.clear()
        got = ops.sum(torch.tensor(x), dim=dim, keepdim=keepdim).numpy()
        wide = x.astype(np.float64)  # a sum's error scales with the sum of magnitudes
        error = np.abs(got - wide.sum(axis=dim, keepdims=keepdim))
        assert np.all(error <= 1e-5 * np.abs(wide).sum(axis=dim, keepdims=keepdim))
        assert made == (["sum"] if planned else []), (dim, keepdim)


def test_no_inline_cache_without_torchs_guard(torch: Any, rng: np.random.Generator,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A torch without TensorGuards, or whose guard does not pass the tensors it was
    made from, gets no inline cache: every call builds its key. Tuning's adopt() empties
    the inline caches (they would serve the plans adopted over)."""
    x = rng.standard_normal(100).astype(np.float32)
    ops.exp(torch.tensor(x))
    assert entry.NAMES["_IC_exp"] is not entry.NAMES["_IC_neg"]  # exp's holds a plan
    entry.adopt({})
    assert entry.NAMES["_IC_exp"] is entry.NAMES["_IC_neg"]  # both empty
    for guards in (types.SimpleNamespace(),
                   types.SimpleNamespace(TensorGuards=lambda *t, **k: types.SimpleNamespace(
                       check=lambda *t: False))):
        entry.clear()
        monkeypatch.setattr(torch._C, "_dynamo", types.SimpleNamespace(guards=guards))
        made = full_paths(monkeypatch)
        for _ in range(2):
            np.testing.assert_allclose(ops.exp(torch.tensor(x)).numpy(), np.exp(x), rtol=1e-6)
        assert made == ["exp"] and entry.NAMES["_IC_exp"] is entry.NAMES["_IC_neg"]


def test_a_0d_cpu_tensor_is_a_number(torch: Any, rng: np.random.Generator) -> None:
    """torch takes a 0-d CPU tensor beside CUDA tensors, with the 0-d priority in
    promotion: float32 beside float16 stays float16."""
    x = rng.standard_normal(300).astype(np.float16)
    scale = fake_torch.HostScalar(0.5, torch.float32)
    got = ops.mul(torch.tensor(x), scale).numpy()
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, (x.astype(np.float32) * np.float32(0.5)).astype(
        np.float16))


def test_another_thread_runs_its_own_copy(torch: Any, rng: np.random.Generator) -> None:
    """A plan's parameter buffers belong to the thread that made it; another thread's call
    gets buffers of its own (and the right result)."""
    x, y = rng.standard_normal((2, 2000)).astype(np.float32)
    ops.add(torch.tensor(x), torch.tensor(y))
    results: list[np.ndarray] = []
    worker = threading.Thread(target=lambda: results.append(
        ops.add(torch.tensor(y), torch.tensor(x), alpha=1).numpy()))
    worker.start()
    worker.join()
    np.testing.assert_array_equal(results[0], x + y)
    np.testing.assert_array_equal(ops.add(torch.tensor(x), torch.tensor(x)).numpy(), x + x)


def test_dropout_and_rope_plans(torch: Any, rng: np.random.Generator,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The generator's state moves per call through the plan; RoPE's cache is the plan's."""
    x = rng.standard_normal((5, 64)).astype(np.float32)
    ops.manual_seed(3)
    first = ops.dropout(torch.tensor(x), 0.5).numpy()
    _only_plans(monkeypatch)
    second = ops.dropout(torch.tensor(x), 0.5).numpy()
    assert ops.get_rng_state() == (3, 2 * 80)
    assert not np.array_equal(first, second)
    ops.set_rng_state((3, 80))
    np.testing.assert_array_equal(ops.dropout(torch.tensor(x), 0.5).numpy(), second)
    with pytest.raises(ValueError, match="argument 'p'"):
        ops.dropout(torch.tensor(x), 1.5)


def test_sparse_and_nested_tensors_are_named_not_a_torch_error(
        torch: Any, rng: np.random.Generator) -> None:
    """A tensor whose getters raise (torch's sparse and nested tensors have no strides or
    data pointer) leaves the fast path for the full one, which names the argument and
    its layout; the fast path keeps serving the dense calls."""
    x = torch.tensor(rng.standard_normal(8).astype(np.float32))
    ops.add(x, x)  # the entry now knows torch's Tensor: the next calls key inline

    def no_storage() -> int:
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")

    sparse = torch.tensor(rng.standard_normal(8).astype(np.float32))
    sparse.layout, sparse.data_ptr = "torch.sparse_coo", no_storage
    with pytest.raises(TypeError, match=r"argument 'other' is a sparse_coo tensor; .*"
                                        r"\.to_dense\(\) makes one"):
        ops.add(x, sparse)
    nested = torch.tensor(rng.standard_normal(8).astype(np.float32))
    nested.is_nested = True
    with pytest.raises(TypeError, match="argument 'input' is a nested tensor"):
        ops.softmax(nested)
    np.testing.assert_array_equal(ops.add(x, x).numpy(), 2 * x.numpy())


# ------------------------------------------------------------------ call counts


def _spec(program: KernelProgram) -> KernelSpec:
    params = tuple(Param(f"a{n}", "memref" if kind == "ptr" else "scalar",
                         "i64" if kind == "ptr" else kind)
                   for n, kind in enumerate(program.params()))
    return KernelSpec(program.name, "ops", params, (program.threads, 1, 1))


@pytest.fixture
def lean(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, list[FakeDriver]]]:
    """A lean torch, and kernels that launch on fake drivers (one per kernel)."""
    torch = lean_torch()
    monkeypatch.setitem(sys.modules, "torch", torch)
    drivers: list[FakeDriver] = []

    def load(program: KernelProgram, device: int) -> kernels.Loaded:
        driver = FakeDriver(_spec(program))
        drivers.append(driver)
        return kernels.Loaded(object(), kernels.ctypes_of(program), driver.cuLaunchKernel,
                              (program.threads, 1, 1), device, program.name)

    monkeypatch.setattr(kernels, "load", load)
    monkeypatch.setattr(kernels, "chip", lambda device: None)
    monkeypatch.setattr(runtime_driver, "device_sms", lambda device=0: 132)  # an H100's
    monkeypatch.setattr(args, "from_host", lambda host, like: torch.empty(
        host.shape, getattr(torch, host.dtype.name)))
    entry.clear()
    kernels.clear()
    yield torch, drivers
    entry.clear()
    kernels.clear()


def _calls(function: Any) -> int:
    """Python function calls (builtins included) of one call, not counting those the fakes
    make inside themselves (a fake counts as the one call torch's C function would), nor
    the lambda that makes the call."""
    profile = cProfile.Profile()
    profile.enable()
    function()
    profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    total = 0
    for (filename, _, name), (_, _, _, _, callers) in stats.items():
        if name == "<method 'disable' of '_lsprof.Profiler' objects>" or \
                (filename.endswith("test_ops_fast.py") and name == "<lambda>"):
            continue
        total += sum(counts[0] for (caller_file, _, _), counts in callers.items()
                     if not caller_file.endswith("fakes.py"))
    return total


def _tensor(torch: Any, shape: tuple[int, ...], dtype: str = "float32", at: int = 1 << 36,
            strides: tuple[int, ...] | None = None) -> Any:
    return torch.Tensor(shape, getattr(torch, dtype), at, strides, torch.lean_device)


BOUNDS = {"add": 11, "add_out": 10, "sum": 10, "rope_neox": 19, "dropout": 15, "fused": 11}
"""Calls per call at most (measured: add 10, add out= 9, sum 9, rope_neox 18, dropout 14, a
fused mul(gelu(add(a, b)), 0.5) 10: what add costs). A call like the last one of its op
takes the inline cache: the entry, the plan's checked entry, torch's tensor guard and a
tensor's data_ptr(), C methods of torch's each counted as a call; rope_neox (its out= is
a pair) builds its key: data_ptr(), stride() and get_device() a tensor. The fakes'
kernels launch through the ctypes fallback, whose launch is a generated function of its
own."""


def test_python_calls_per_call(lean: tuple[Any, list[FakeDriver]]) -> None:
    torch, drivers = lean
    a, b, c = (_tensor(torch, (4096,), at=(n + 1) << 36) for n in range(3))
    x = _tensor(torch, (64, 1000))
    q, k = _tensor(torch, (7, 8, 64), "bfloat16"), _tensor(torch, (7, 2, 64), "bfloat16")
    positions = _tensor(torch, (7,), "int64")
    fused = ops.fuse(lambda x, y: ops.mul(ops.gelu(ops.add(x, y)), 0.5))
    calls: dict[str, Callable[[], Any]] = {"add": lambda: ops.add(a, b), "add_out": lambda: ops.add(a, b, out=c),
             "sum": lambda: ops.sum(x, dim=-1),
             "rope_neox": lambda: ops.rope_neox(q, k, positions, max_position=64),
             "dropout": lambda: ops.dropout(x, 0.1), "fused": lambda: fused(a, b)}
    counted = {}
    for name, call in calls.items():
        call()  # plans (and loads)
        call()
        counted[name] = _calls(call)
    print("Python calls per call:", counted)
    assert all(counted[name] <= bound for name, bound in BOUNDS.items()), counted
    assert counted["fused"] == counted["add"], counted
    launch = drivers[0].launches[-1]  # add's: this call's pointers in the parameters
    assert launch.stream == 0x5000 and launch.grid == (8, 1, 1)
    assert a.pointer in launch.values and b.pointer in launch.values


@pytest.mark.parametrize("gpus", [1, 2])
def test_one_gpu_allocates_as_inductor_does(lean: tuple[Any, list[FakeDriver]],
                                            gpus: int) -> None:
    """With one GPU visible, outputs come from torch._C._dynamo.guards._empty_strided_cuda
    (shape, row-major strides, dtype: no argument parser); with two, from empty_like of
    an input (the fast one allocates on the current device, which may not be the
    plan's)."""
    torch, drivers = lean
    made: list[tuple[Any, ...]] = []

    def empty_strided_cuda(shape: tuple[int, ...], strides: tuple[int, ...],
                           dtype: Any) -> Any:
        made.append((shape, strides, dtype))
        return torch.empty(shape, dtype)

    torch._C._dynamo = types.SimpleNamespace(
        guards=types.SimpleNamespace(_empty_strided_cuda=empty_strided_cuda))
    torch.cuda = types.SimpleNamespace(device_count=lambda: gpus)
    a, b = (_tensor(torch, (6, 1000), at=(n + 1) << 36) for n in range(2))
    for _ in range(3):
        out = ops.add(a, b)
        assert out.pointer in drivers[0].launches[-1].values
        total = ops.sum(a, dim=-1)
        assert total.shape == (6,)
    if gpus == 1:
        assert made[-2:] == [((6, 1000), (1000, 1), torch.float32), ((6,), (1,), torch.float32)]
        assert len(made) == 6
    else:
        assert not made


def test_misaligned_input_passes_an_aligned_base(lean: tuple[Any, list[FakeDriver]]) -> None:
    torch, drivers = lean
    x = _tensor(torch, (1000,), at=(1 << 36) + 8)  # 8 bytes past a 16-byte boundary
    ops.exp(x)
    values = drivers[-1].launches[-1].values
    assert (1 << 36) in values and values[-1] == 2  # base, and an element offset of 2


# ------------------------------------------------------------------ CUDA graphs


def test_a_first_call_under_capture_is_refused(torch: Any, rng: np.random.Generator,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """While torch captures a CUDA graph, a call that would compile or load a kernel (the
    first of its kind) raises CaptureError, naming the warm-up; after a warm-up call the
    same call runs from its plan (no load, no sync, no copy), and a new plan whose kernel
    is loaded already may be made under capture too."""
    capturing = [False]
    torch.cuda = types.SimpleNamespace(is_current_stream_capturing=lambda: capturing[0])
    kernels.clear()
    x, y = rng.standard_normal((2, 600)).astype(np.float32)
    capturing[0] = True
    with pytest.raises(kernels.CaptureError, match="warm-up"):
        ops.add(torch.tensor(x), torch.tensor(y))
    capturing[0] = False
    ops.add(torch.tensor(x), torch.tensor(y))  # the warm-up
    capturing[0] = True
    np.testing.assert_array_equal(ops.add(torch.tensor(x), torch.tensor(y)).numpy(), x + y)
    out = torch.tensor(np.zeros(600, np.float32))
    np.testing.assert_array_equal(ops.add(torch.tensor(x), torch.tensor(y), out=out).numpy(),
                                  x + y)  # a new plan (out=), the same kernel: allowed
    with pytest.raises(kernels.CaptureError):
        ops.rope_neox(torch.tensor(np.zeros((2, 1, 8), np.float32)), None,
                      torch.tensor(np.zeros(2, np.int64)), max_position=4)


def test_a_plan_checks_where_out_lies(device: Device, rng: np.random.Generator) -> None:
    """A plan made for out= apart from the input serves a later call whose out= overlaps
    the input with the same layouts (the key cannot tell): the plan compares the two byte
    ranges every call and refuses, naming out; in every family."""
    x = rng.standard_normal(64).astype(np.float32)
    buffer = device.array(np.concatenate([x, x]))
    ops.neg(device.array(x).view((10,), (1,)), out=device.empty((10,), "f32"))
    with pytest.raises(ValueError, match="argument 'out' overlaps argument 'input'"):
        ops.neg(buffer.view((10,), (1,)), out=buffer.view((10,), (1,), 4))  # 16 bytes on
    ops.sum(device.array(x).view((4, 8), (8, 1)), dim=1, out=device.empty((4,), "f32"))
    with pytest.raises(ValueError, match="argument 'out' overlaps argument 'input'"):
        ops.sum(buffer.view((4, 8), (8, 1)), dim=1, out=buffer.view((4,), (1,), 4))
    q = device.array(rng.standard_normal((2, 1, 8)).astype(np.float32))
    positions = device.array(np.array([0, 1]))
    ops.rope_neox(q, None, positions, max_position=4, out=(device.empty((2, 1, 8), "f32"),
                                                           None))
    with pytest.raises(ValueError, match="argument 'out\\[0\\]' overlaps argument 'query'"):
        ops.rope_neox(buffer.view((2, 1, 8), (8, 8, 1)), None, positions, max_position=4,
                      out=(buffer.view((2, 1, 8), (8, 8, 1), 4), None))
    assert ops.neg(buffer.view((10,), (1,)), out=buffer.view((10,), (1,), 32)) is not None


def test_cupy_arrays_take_plans(device: Device, rng: np.random.Generator,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """CuPy arrays (keyed by entry.keyof, outputs from cupy.empty, CuPy's current stream):
    planned once, then served by the plan; views (negative strides) and reductions too."""
    from support import fake_cupy

    cupy = fake_cupy.module(device)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setattr(args, "allocate", lambda shape, dtype, kind, index: cupy.empty(
        shape, DTYPES[dtype].np_dtype()))
    x, y = rng.standard_normal((2, 8, 300)).astype(np.float32)
    calls: dict[str, Callable[[Any, Any], tuple[Any, np.ndarray]]] = {
             "add": lambda a, b: (ops.add(a, b), x + y),
             "reversed": lambda a, b: (ops.neg(a.view_of((8, 300), (-300, 1), 7 * 300)),
                                       -x[::-1]),
             "sum": lambda a, b: (ops.sum(b, dim=0), y.astype(np.float64).sum(0))}
    for name, call in calls.items():
        got, want = call(cupy.asarray(x), cupy.asarray(y))
        assert isinstance(got, fake_cupy.ndarray), name
        np.testing.assert_allclose(got.get(), want, rtol=1e-6, atol=1e-6)
    reads = len(cupy.stream_reads)
    _only_plans(monkeypatch)
    for name, call in calls.items():
        got, want = call(cupy.asarray(x), cupy.asarray(y))
        np.testing.assert_allclose(got.get(), want, rtol=1e-6, atol=1e-6, err_msg=name)
    assert len(cupy.stream_reads) == reads + 3  # CuPy's current stream, read per call


@pytest.fixture
def planned(lean: tuple[Any, list[FakeDriver]], tmp_path: Any,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """The strategy of each elementwise kernel loaded, in order, on a device tuned as
    sm_90 whose tuning files (the user's and the package's) start empty under tmp."""
    from tile_mlir.ops import strategy
    from tile_mlir.ops.programs.elementwise import ElementwiseProgram

    monkeypatch.setenv("TILE_MLIR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(strategy, "SHIPPED", tmp_path / "shipped")
    monkeypatch.setattr(kernels, "tuning_target", lambda device: "sm_90")
    seen: list[Any] = []
    load = kernels.load

    def recording(program: KernelProgram, device: int) -> kernels.Loaded:
        assert isinstance(program, ElementwiseProgram)
        seen.append(program.sig.strategy)
        return load(program, device)

    monkeypatch.setattr(kernels, "load", recording)
    strategy._choices.cache_clear()
    yield seen
    strategy._choices.cache_clear()


def test_a_call_runs_its_ops_own_tuned_choice(lean: tuple[Any, list[FakeDriver]],
                                              planned: list[Any]) -> None:
    """An op with a choice of its own (`strategy.op_key`) is planned with it; another op of
    its family with the family's; a new tuning file plans again (the cache listens)."""
    from tile_mlir.ops import strategy
    from tile_mlir.ops.programs.elementwise import Strategy

    torch, _ = lean
    own, family = Strategy(128, 16, 4, 4), Strategy(128, 16, 2, 2)
    x = _tensor(torch, (1 << 24,))
    ops.softplus(x)
    assert planned == [strategy.default(1 << 24)]  # nothing tuned yet
    strategy.save("sm_90", {strategy.op_key("softplus", "f32", 1 << 24): own,
                            strategy.key("activation", "f32", 1 << 24): family},
                  {"device": "test"})
    ops.softplus(x)
    ops.silu(x)
    assert planned[1:] == [own, family]


def test_a_bias_add_runs_its_familys_rows_choice(lean: tuple[Any, list[FakeDriver]],
                                                 planned: list[Any]) -> None:
    """A launch over rows (a row broadcast over a matrix's rows: a view of rank 2) is
    planned with its family's rows key (strategy.ROWS); one over a flat run with the
    family's, as is a launch over rows where the family has no rows key."""
    from tile_mlir.ops import strategy
    from tile_mlir.ops.programs.elementwise import Strategy

    torch, _ = lean
    rows, family = Strategy(512, 16, 1, 1), Strategy(128, 8, 1, 1)
    strategy.save("sm_90", {strategy.key("binary_arith" + strategy.ROWS, "f32", 1 << 12): rows,
                            strategy.key("binary_arith", "f32", 1 << 12): family},
                  {"device": "test"})
    x, bias = _tensor(torch, (16, 256)), _tensor(torch, (256,))
    ops.add(x, bias)
    ops.add(x, x)
    ops.lt(x, bias)  # comparison: no rows key, the family's (none: the default)
    assert planned == [rows, family, strategy.default(1 << 12)]
