"""null tier: the compiled launcher (tile_mlir/runtime/_launch.c) packs every kind of
kernel parameter as the ctypes slots of the fallback launcher do, refuses a wrong
number or kind of value before launching, and is chosen only for the real driver's
functions. Launching itself needs a GPU (tests/gpu/test_launch_native.py)."""

from __future__ import annotations

import ctypes
import ctypes.util
import shutil
from typing import Any

import numpy as np
import pytest

from tile_mlir.runtime import driver
from tile_mlir.runtime.arrays import PARAM_LETTERS, SCALAR_CTYPES

if shutil.which("cc") is None and shutil.which("gcc") is None:  # pragma: no cover
    pytest.skip("no C compiler here: pip install could not build the launcher",
                allow_module_level=True)

from tile_mlir.runtime import _launch  # built by pip install (setup.py)

CTYPES: dict[str, Any] = {"ptr": ctypes.c_uint64, **SCALAR_CTYPES}


def _random_value(kind: str, rng: np.random.Generator) -> Any:
    if kind == "bool":
        return bool(rng.integers(0, 2))
    if kind in ("f32", "f64"):
        return float(rng.normal() * 10.0 ** rng.integers(-30, 30))
    bits = 64 if kind == "ptr" else int(kind[1:])
    low = 0 if kind == "ptr" else -(2 ** (bits - 1))
    return int(rng.integers(low, low + 2**bits - 1, dtype=np.uint64 if kind == "ptr"
                            else np.int64)) if bits < 64 else \
        int.from_bytes(rng.bytes(8), "little", signed=kind != "ptr")


def _ctypes_bytes(kinds: list[str], values: list[Any]) -> bytes:
    """The parameters as the fallback's ctypes slots hold them, 8 bytes each."""
    out = b""
    for kind, value in zip(kinds, values, strict=True):
        slot = CTYPES[kind]()
        slot.value = value
        out += bytes(slot).ljust(8, b"\0")
    return out


@pytest.mark.parametrize("seed", range(20))
def test_packing_matches_ctypes(seed: int) -> None:
    """Random kinds, some constant (packed once) and some per call; three calls of one
    launcher with fresh values each, every byte as ctypes packs it."""
    rng = np.random.default_rng(seed)
    kinds = list(rng.choice(list(PARAM_LETTERS), size=int(rng.integers(1, 40))))
    constant = rng.random(len(kinds)) < 0.4
    fixed = [_random_value(k, rng) for k in kinds]
    launcher = _launch.Launcher(0x7000, (3, 1, 1), (128, 1, 1),
                                "".join(PARAM_LETTERS[k] for k in kinds),
                                tuple(v if c else None for v, c in zip(fixed, constant,
                                                                      strict=True)))
    for _ in range(3):
        values = [f if c else _random_value(k, rng)
                  for k, f, c in zip(kinds, fixed, constant, strict=True)]
        per_call = [v for v, c in zip(values, constant, strict=True) if not c]
        assert launcher.pack(*per_call) == _ctypes_bytes(kinds, values)


def test_integers_wrap_as_ctypes_stores_them() -> None:
    launcher = _launch.Launcher(1, (1, 1, 1), (32, 1, 1), "Pqihb?", (None,) * 6)
    values = [-16, 2**64 - 1, 2**31, 70000, 300, 2]
    assert launcher.pack(*values) == _ctypes_bytes(
        ["ptr", "i64", "i32", "i16", "i8", "bool"], values)


def test_wrong_values_raise_before_any_launch() -> None:
    launcher = _launch.Launcher(1, (1, 1, 1), (32, 1, 1), "Pf", (None, 2.0))
    with pytest.raises(TypeError, match="pack takes 1 values, got 2"):
        launcher.pack(1, 2)
    with pytest.raises(TypeError, match="launch takes the stream and 1 values, got 0"):
        launcher.launch(0)
    with pytest.raises(TypeError, match="launch_grid takes the stream and 1 values, got 0"):
        launcher.launch_grid(0, 1, 1, 1)
    with pytest.raises(TypeError, match="launch_grid takes the stream, gx, gy, gz"):
        launcher.launch_grid(0, 1, 1)  # type: ignore[call-arg]
    with pytest.raises(OverflowError):
        launcher.launch_grid(0, -1, 1, 1, 16)
    with pytest.raises(TypeError, match="cannot be interpreted as an integer"):
        launcher.pack(1.5)
    with pytest.raises(TypeError, match="must be real number"):
        _launch.Launcher(1, (1, 1, 1), (32, 1, 1), "f", ("x",))


@pytest.mark.parametrize(("grid", "block", "kinds", "constants", "error"), [
    ((0, 1, 1), (32, 1, 1), "P", (None,), "grid: sizes from 1"),
    ((1, 1), (32, 1, 1), "P", (None,), "grid: a tuple of 3 ints"),
    ((1, 1, 1), (32, 1, 1), "P", (None, None), "constants: a tuple with one entry"),
    ((1, 1, 1), (32, 1, 1), "Z", (None,), "unknown parameter kind 'Z'"),
    ((1, 1, 1), (32, 1, 1), "P" * 129, (None,) * 129, "at most 128 kernel parameters"),
])
def test_a_bad_launcher_is_refused(grid: Any, block: Any, kinds: str, constants: Any,
                                   error: str) -> None:
    with pytest.raises((TypeError, ValueError), match=error):
        launcher = _launch.Launcher(1, grid, block, kinds, constants)
        launcher.pack(*([0] * kinds.count("P")))


@pytest.mark.skipif(ctypes.util.find_library("cuda") is not None,
                    reason="a CUDA driver is installed here: the launch would reach it")
def test_without_a_driver_launch_raises() -> None:
    launcher = _launch.Launcher(1, (1, 1, 1), (32, 1, 1), "P", (None,))
    with pytest.raises(OSError, match=r"libcuda\.so\.1"):
        launcher.launch(0, 16)
    with pytest.raises(OSError, match=r"libcuda\.so\.1"):
        launcher.launch_grid(0, 2, 1, 1, 16)


def test_chosen_only_for_the_real_drivers_functions(monkeypatch: pytest.MonkeyPatch) -> None:
    assert driver.native_launcher(object()) is None  # a stand-in's handle
    real = driver.cuda().CUfunction
    function = real(0x1000)
    assert driver.native_launcher(function) is _launch.Launcher
    monkeypatch.setenv("TILE_MLIR_NATIVE_LAUNCH", "0")
    assert driver.native_launcher(function) is None


def test_results_as_the_drivers_enum() -> None:
    enum = driver.cuda().CUresult
    assert driver.result(201) == enum.CUDA_ERROR_INVALID_CONTEXT
    assert driver.result(201).name == "CUDA_ERROR_INVALID_CONTEXT"
    assert driver.result(enum.CUDA_SUCCESS) is enum.CUDA_SUCCESS
