"""`make demo`'s checking, without a GPU: every kernel of every example has a reference
that fits its signature, and wrong, unwritten or unchecked results fail."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mlir import ir

import tile_mlir
from tile_mlir import demo
from tile_mlir.dtypes import DTYPES
from tile_mlir.runtime import driver
from tile_mlir.runtime.spec import KernelSpec

EXAMPLES = sorted(demo.EXAMPLES.glob("*.mlir"))


def _kernel_names(example: Path) -> list[str]:
    """The gpu.func kernels of an example, read from its IR (not through the demo)."""
    context = ir.Context()
    tile_mlir.register(context)
    module = ir.Module.parse(example.read_text(), context)
    names: list[str] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "gpu.func" and "gpu.kernel" in op.attributes:
            names.append(ir.StringAttr(op.attributes["sym_name"]).value)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return names


def test_every_kernel_of_every_example_has_a_reference() -> None:
    kernels = {name: example.name for example in EXAMPLES for name in _kernel_names(example)}
    assert {"vector_add", "scale_rows", "unary_op", "test_reduction", "reg_sqrt"} <= set(kernels)
    missing = sorted(f"{example}: {name}" for name, example in kernels.items()
                     if name not in demo.REFERENCES)
    assert not missing, f"kernels without a reference in tile_mlir/demo.py: {missing}"
    assert demo.uncovered(EXAMPLES) == []


def _specs() -> list[KernelSpec]:
    specs = []
    for example in EXAMPLES:
        module = tile_mlir.parse(example.read_text(), ir.Context(), name=str(example))
        specs += list(tile_mlir.kernel_specs(module).values())
    return specs


def _faithful(spec: KernelSpec, rng: np.random.Generator) -> Any:
    """A stand-in for the GPU that writes the reference, rounded to each output's type."""
    ref = demo.reference(spec.name)

    def launch(*values: Any) -> None:
        reads = [np.asarray(v, np.float64) if isinstance(v, np.ndarray) else v
                 for v, p in zip(values, spec.params, strict=True)
                 if not p.is_memref or ref.in_place or not p.writes]
        result = ref.compute(*reads)
        outputs = [v for v, p in zip(values, spec.params, strict=True) if p.writes]
        for out, want in zip(outputs, result if isinstance(result, tuple) else (result,),
                             strict=True):
            out[...] = np.asarray(want).astype(out.dtype)

    return launch


@pytest.mark.parametrize("spec", _specs(), ids=lambda s: s.name)
def test_the_reference_fits_the_kernel(spec: KernelSpec, rng: np.random.Generator) -> None:
    verdict = demo.check(spec, _faithful(spec, rng), rng)
    assert verdict.ok, verdict
    assert 0 < verdict.bound < 1


def _spec(name: str) -> KernelSpec:
    return next(s for s in _specs() if s.name == name)


@pytest.mark.parametrize("name", ["vector_add", "test_reduction", "unary_op", "scale_rows"])
def test_a_wrong_or_unwritten_element_is_a_mismatch(name: str, rng: np.random.Generator
                                                    ) -> None:
    spec = _spec(name)
    faithful = _faithful(spec, rng)

    def off_by_a_little(*values: Any) -> None:
        faithful(*values)
        out = next(v for v, p in zip(values, spec.params, strict=True) if p.writes)
        flat = out.reshape(-1)
        flat[rng.integers(flat.size)] += np.abs(out).max() * out.dtype.type(0.01)

    def one_left_out(*values: Any) -> None:
        faithful(*values)
        out = next(v for v, p in zip(values, spec.params, strict=True) if p.writes)
        out.reshape(-1)[-1] = np.nan

    assert not demo.check(spec, off_by_a_little, rng).ok
    if not demo.reference(name).in_place:  # an in-place kernel's outputs start as inputs
        assert not demo.check(spec, one_left_out, rng).ok


def test_a_kernel_without_a_reference_fails_loudly(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    renamed = tmp_path / "renamed.mlir"
    renamed.write_text((demo.EXAMPLES / "vector_add.mlir").read_text()
                       .replace("@vector_add", "@vector_sum"))
    with pytest.raises(demo.MissingReference, match=r"add it to REFERENCES in tile_mlir/demo\.py"):
        demo.reference("vector_sum")
    assert demo.uncovered([renamed]) == ["renamed.mlir: vector_sum"]
    monkeypatch.setattr(demo, "EXAMPLES", tmp_path)
    monkeypatch.setattr(demo, "OUT", tmp_path / "out")
    monkeypatch.setattr(demo, "lower", lambda example: example)  # no tile-opt runs
    monkeypatch.setattr(driver, "gpu_available", lambda: False)
    assert demo.main() == 1
    assert "MISSING REFERENCE: renamed.mlir: vector_sum" in capsys.readouterr().out


def test_the_demo_passes_without_a_gpu(monkeypatch: pytest.MonkeyPatch,
                                       tmp_path: Path) -> None:
    monkeypatch.setattr(demo, "OUT", tmp_path)
    monkeypatch.setattr(demo, "lower", lambda example: example)
    monkeypatch.setattr(driver, "gpu_available", lambda: False)
    assert demo.main() == 0


def _nbytes(param: Any) -> int:
    return int(np.prod(param.shape)) * DTYPES[param.dtype].np_dtype().itemsize


def test_traffic_counts_bytes_in_and_out(rng: np.random.Generator) -> None:
    add_spec, in_place_spec, rows_spec = (_spec(n) for n in ("vector_add", "unary_op",
                                                             "scale_rows"))
    add = demo.arguments(add_spec, demo.reference("vector_add"), rng)
    assert add.traffic_bytes == sum(_nbytes(p) for p in add_spec.params) > 0
    in_place = demo.arguments(in_place_spec, demo.reference("unary_op"), rng)
    (param,) = in_place_spec.params
    assert in_place.traffic_bytes == 2 * _nbytes(param)  # read, then written
    rows = demo.arguments(rows_spec, demo.reference("scale_rows"), rng)
    assert rows.traffic_bytes == sum(_nbytes(p) for p in rows_spec.params if p.is_memref)
    assert np.isnan(add.values[2]).all() and not np.isnan(in_place.values[0]).any()


class _FakeDriver:
    """cuda-python's event calls, on a clock that advances 2 ms per recorded event."""

    class CUresult:
        CUDA_SUCCESS = 0

    def __init__(self) -> None:
        self.clock = 0.0
        self.live: set[int] = set()
        self.recorded: dict[int, float] = {}
        self.streams: list[object] = []

    def cuEventCreate(self, flags: int) -> tuple[int, int]:
        event = len(self.recorded) + len(self.live) + 1000
        self.live.add(event)
        return 0, event

    def cuEventRecord(self, event: int, stream: object) -> tuple[int]:
        self.clock += 2.0
        self.recorded[event] = self.clock
        self.streams.append(stream)
        return (0,)

    def cuEventSynchronize(self, event: int) -> tuple[int]:
        return (0,)

    def cuEventElapsedTime(self, start: int, end: int) -> tuple[int, float]:
        return 0, self.recorded[end] - self.recorded[start]

    def cuEventDestroy(self, event: int) -> tuple[int]:
        self.live.remove(event)
        return (0,)


class _FakeBuffer:
    closed = 0

    def __init__(self, array: np.ndarray):
        self.array = np.array(array, copy=True)

    @staticmethod
    def from_array(array: np.ndarray) -> _FakeBuffer:
        return _FakeBuffer(array)

    def close(self) -> None:
        _FakeBuffer.closed += 1


def test_the_gpu_report_with_a_stand_in_gpu(monkeypatch: pytest.MonkeyPatch,
                                            rng: np.random.Generator,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """run_on_gpu's checking, timing and report, with the driver and the launches faked:
    each kernel checked once, timed on device buffers with events on stream 0, the
    median of the runs in us and bytes in + out per second."""
    from tile_mlir.runtime import memory
    from tile_mlir.runtime.program import Program

    fake = _FakeDriver()
    launches: list[tuple[str, list[type]]] = []

    def kernel(self: Program, name: str, device: int = 0) -> Any:
        faithful = _faithful(self.kernels[name], rng)

        def launch(*values: Any) -> None:
            launches.append((name, [type(v) for v in values]))
            if all(not isinstance(v, _FakeBuffer) for v in values):
                faithful(*values)

        return launch

    monkeypatch.setattr(driver, "cuda", lambda: fake)
    monkeypatch.setattr(memory, "DeviceBuffer", _FakeBuffer)
    monkeypatch.setattr(Program, "kernel", kernel)
    monkeypatch.setattr(_FakeBuffer, "closed", 0)
    assert demo.run_on_gpu(demo.EXAMPLES / "vector_add.mlir", rng)
    out = capsys.readouterr().out
    assert out.startswith("  vector_add: OK  max |error| ")
    assert f"; 2000.0 us median of {demo.TIMED_RUNS}, 6.3 GB/s\n" in out  # 12.6 MB in 2 ms
    assert len(launches) == 2 + demo.TIMED_RUNS  # checked, warmed up, timed
    assert launches[-1][1] == [_FakeBuffer] * 3 and fake.streams == [0] * 2 * demo.TIMED_RUNS
    assert not fake.live and _FakeBuffer.closed == 3
