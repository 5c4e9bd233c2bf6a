"""null tier: the gpu tier's harness (ops_torch.run) checked on the pretend device, so
that the GPU's time goes to the kernels and not to the harness's mistakes."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support import host, ops_accuracy, ops_torch
from support.emulated import Device, EmuArray
from support.ops_check import Case

from tile_mlir import op_table


@pytest.fixture
def harness(device: Device, monkeypatch: pytest.MonkeyPatch) -> Device:
    def place(case: Case, args: list[Any]) -> list[Any]:
        return [device.array(a, "bool" if n in case.row.keep else case.dtype)
                if isinstance(a, np.ndarray) else a for n, a in enumerate(args)]

    def poisoned(case: Case, shape: tuple[int, ...], like: Any) -> EmuArray:
        return device.empty(shape, case.result)

    monkeypatch.setattr(ops_torch, "place", place)
    monkeypatch.setattr(ops_torch, "poisoned_out", poisoned)
    monkeypatch.setattr(ops_torch, "to_host", lambda value, dtype: value.numpy())
    monkeypatch.setattr(ops_torch, "HAVE_TORCH", False)
    return device


@pytest.mark.parametrize(("op", "dtype"), [("add", "bf16"), ("lt", "i32"), ("where", "f16"),
                                           ("nan_to_num", "f32"), ("isinf", "f8e5m2"),
                                           ("masked_fill", "bool"), ("silu_and_mul", "bf16"),
                                           ("prelu", "f16"), ("softplus", "f8e4m3")])
def test_gpu_cases_pass_on_the_pretend_device(harness: Device, rng: np.random.Generator,
                                              op: str, dtype: str) -> None:
    for case in ops_torch.cases(op, dtype):
        assert ops_torch.run(case, rng).ok, case.id


def test_a_wrong_kernel_fails_the_harness(harness: Device, rng: np.random.Generator,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness notices a kernel that computes the wrong thing: sub's body made add's."""
    rows = op_table.ELEMENTWISE
    monkeypatch.setitem(rows, "sub", dataclasses.replace(rows["sub"], body=rows["add"].body))
    host.compiled.cache_clear()  # kernels are kept by their text, which is unchanged
    case = Case("sub", "f32", ((4099,), (4099,)))
    assert not ops_torch.run(case, rng).ok
    host.compiled.cache_clear()


def test_the_accuracy_table(harness: Device, monkeypatch: pytest.MonkeyPatch,
                            tmp_path: Path) -> None:
    monkeypatch.setattr(ops_accuracy, "device_name", lambda: "the pretend device")
    out = tmp_path / "accuracy.md"
    assert ops_accuracy.main(["--ops", "add,lt", "--dtypes", "f32,f16,bf16,f8e5m2,bool",
                              "--seed", "7", "--out", str(out)]) == 0
    text = out.read_text()
    assert "the pretend device" in text and "| add | exact | exact | exact | exact |  |" in text
    assert "| lt | exact | exact | exact | exact | exact |" in text
    assert text.count("\n| ") == 3  # the header row and two ops
