"""null tier: the library's surface (issue 17, part 3): every public op takes out= (but
those torch has none for: NO_OUT) and writes its result there, returning out; every public function's docstring starts with
its signature in torch's terms and the function takes what it says; docs/ops.md holds
the generated reference (`python -m tile_mlir.ops --markdown`) as it is now.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.emulated import Device, EmuArray
from support.ops_check import inputs, standard_cases

from tile_mlir import op_table, ops
from tile_mlir.ops.__main__ import BEGIN, END, reference

Call = Callable[..., Any]


ROPE_PARAMETERS: dict[str, dict[str, Any]] = {
    "rope_longrope": {"original_max_position": 4, "max_position": 8,
                      "short_factor": [1.0] * 8, "long_factor": [2.0] * 8},
    "rope_yarn": {"scaling_factor": 2.0, "original_max_position": 4}}


def _registry_call(device: Device, op: str, rng: np.random.Generator) -> tuple[Call, list[Any]]:
    row = op_table.ELEMENTWISE[op]
    case = standard_cases(op, row.dtypes[0], (3, 37))[0]
    values = inputs(case, rng)
    placed = [device.array(a, case.dtype if n not in row.keep else "bool")
              if isinstance(a, np.ndarray) else a for n, a in enumerate(values)]
    return getattr(ops, op), placed


def _composite_call(device: Device, op: str, rng: np.random.Generator
                    ) -> tuple[Call, list[Any]]:
    x = device.array(rng.standard_normal((4, 3, 16)).astype(np.float32))
    like = device.array(np.zeros(1, np.float32))
    positions = device.array(np.array([0, 3, 1, 2]))
    made: dict[str, tuple[Call, list[Any]]] = {
        "dropout": (lambda a: ops.dropout(a, 0.5, seed=1), [x]),
        "alibi": (lambda: ops.alibi(5, 9, like=like), []),
        "sinusoidal": (lambda: ops.sinusoidal(7, 6, like=like), []),
    }
    if op in made:
        return made[op]
    if op.startswith("rope_"):
        extra = ROPE_PARAMETERS.get(op, {"max_position": 8})
        return (lambda q, p: getattr(ops, op)(q, q, p, **extra)), [x, positions]
    return getattr(ops, op), [x]  # the reductions


def _poisoned_like(device: Device, result: Any) -> Any:
    if isinstance(result, tuple):
        return tuple(_poisoned_like(device, r) for r in result)
    return device.empty(result.shape, result.dtype)


def _same(got: Any, want: Any) -> None:
    if isinstance(want, tuple):
        for g, w in zip(got, want, strict=True):
            _same(g, w)
        return
    a, b = got.numpy(), want.numpy()
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_array_equal(np.ascontiguousarray(a).view(np.uint8),
                                  np.ascontiguousarray(b).view(np.uint8))


NO_OUT = ("rms_norm", "layer_norm", "fused_add_rms_norm")
"""Ops torch gives no out= (the norms; vLLM's fused add works in place)."""
PUBLIC = [op.name for op in ops.list_ops() if op.name not in NO_OUT]


@pytest.mark.parametrize("op", PUBLIC)
def test_out_on_every_op(device: Device, op: str, rng: np.random.Generator) -> None:
    """The result written into out= (poisoned first) is the result without it, bit for
    bit, and the function returns out itself."""
    if op in op_table.ELEMENTWISE:
        fn, placed = _registry_call(device, op, rng)
        want = fn(*placed)
        out = _poisoned_like(device, want)
        got = fn(*placed, out=out)
    else:
        fn, placed = _composite_call(device, op, rng)
        want = fn(*placed)
        out = _poisoned_like(device, want)
        got = _call_with_out(op, placed, out)
    assert got is out if not isinstance(out, tuple) else \
        all(g is o for g, o in zip(got, out, strict=True))
    _same(got, want)


def _call_with_out(op: str, placed: list[Any], out: Any) -> Any:
    if op == "dropout":
        return ops.dropout(placed[0], 0.5, seed=1, out=out)
    if op == "alibi":
        return ops.alibi(5, 9, out=out)
    if op == "sinusoidal":
        return ops.sinusoidal(7, 6, out=out)
    if op.startswith("rope_"):
        extra = ROPE_PARAMETERS.get(op, {"max_position": 8})
        q, positions = placed
        return getattr(ops, op)(q, q, positions, out=out, **extra)
    return getattr(ops, op)(*placed, out=out)


def test_inplace_where_torch_has_it(device: Device, rng: np.random.Generator) -> None:
    """torch.nn.functional's inplace=: the result written over the input, returned."""
    for name, fn in vars(ops).items():
        if not callable(fn) or "inplace" not in _parameters(fn):
            continue
        values = rng.uniform(-2, 2, (3, 40)).astype(np.float32)
        want = fn(device.array(values), 0.5) if name == "dropout" else fn(device.array(values))
        placed = device.array(values)
        kwargs = {"seed": 0} if name == "dropout" else {}
        got = fn(placed, 0.5, inplace=True, **kwargs) if name == "dropout" else \
            fn(placed, inplace=True)
        assert got is placed, name
        if name != "dropout":
            _same(placed, want)


def test_out_is_an_input_whose_size_1_dims_have_other_strides(device: Device) -> None:
    """out= the very elements of an input is in place even where the op's view of that
    input differs in a size-1 dim's stride only (prelu's one-element weight broadcast to
    a one-element input: found by the random differential test, refused as an overlap)."""
    x = device.array(np.array([-2.0], np.float32), offset=1)
    weight = device.array(np.array([0.25], np.float32))
    assert ops.prelu(x, weight, out=weight) is weight
    np.testing.assert_array_equal(weight.numpy(), [-0.5])
    row = device.array(np.array([[3.0, -1.0]], np.float32))  # [1, 2]: its dim 0 moves nothing
    column = row.view((1, 2), (7, 1))
    assert ops.neg(row, out=column) is column
    np.testing.assert_array_equal(row.numpy(), [[-3.0, 1.0]])


def _parameters(fn: Any) -> list[str]:
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


# ------------------------------------------------------------------ docstrings


@pytest.mark.parametrize("op", PUBLIC)
def test_docstring_starts_with_the_signature(op: str) -> None:
    """`name(params) -> ...`, naming every parameter the function takes, in its order."""
    fn = getattr(ops, op)
    doc = inspect.getdoc(fn) or ""
    head = " ".join(doc.partition("\n\n")[0].split())
    assert head.startswith(f"{op}("), head
    named = [p.strip().split("=")[0].lstrip("*") for p in
             head[len(op) + 1:head.index(")")].split(",") if p.strip() not in ("*", "")]
    assert named == list(inspect.signature(fn).parameters), (named, head)
    assert "->" in head


def test_the_document_holds_the_generated_reference() -> None:
    """docs/ops.md's reference is what `python -m tile_mlir.ops --markdown` prints now:
    regenerate it (and commit) after changing an op's signature or docstring."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "ops.md").read_text()
    assert BEGIN in text and END in text, "docs/ops.md lost its generated reference"
    start = text.index(BEGIN)
    found = text[start:text.index(END) + len(END)] + "\n"
    assert found == reference(), "docs/ops.md is stale: python -m tile_mlir.ops --markdown"


def test_listed_ops_are_emu_arrays_in_and_out(device: Device) -> None:
    x = device.array(np.ones((2, 3), np.float32))
    assert isinstance(ops.exp(x), EmuArray)
