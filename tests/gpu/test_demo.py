"""gpu tier for `make demo`: every kernel of every example runs, matches its float64
NumPy reference, and is timed with CUDA events."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tile_mlir
from tile_mlir import demo

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("example", sorted(demo.EXAMPLES.glob("*.mlir")), ids=lambda p: p.stem)
def test_every_kernel_is_checked_and_timed(example: Path, rng: np.random.Generator,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert demo.run_on_gpu(example, rng)
    out = capsys.readouterr().out
    program = tile_mlir.compile(example)
    for name in program.kernels:
        assert f"  {name}: OK " in out and "GB/s" in out


def test_timing_is_in_seconds(rng: np.random.Generator) -> None:
    """vector_add moves 12 MiB: between 1 us and 1 s, under 20 TB/s."""
    program = tile_mlir.compile(demo.EXAMPLES / "vector_add.mlir")
    spec = program.kernels["vector_add"]
    args = demo.arguments(spec, demo.reference("vector_add"), rng)
    seconds = demo.time_kernel(program.kernel("vector_add"), args, runs=5)
    assert 1e-6 < seconds < 1.0
    assert args.traffic_bytes / seconds < 20e12


def test_a_wrong_kernel_is_reported(rng: np.random.Generator, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The demo checks what the GPU computed: vector_add compiled as a subtraction fails."""
    wrong = tmp_path / "vector_add.mlir"
    wrong.write_text((demo.EXAMPLES / "vector_add.mlir").read_text()
                     .replace('op = "add"', 'op = "sub"'))
    assert not demo.run_on_gpu(wrong, rng)
    assert "vector_add: MISMATCH" in capsys.readouterr().out
