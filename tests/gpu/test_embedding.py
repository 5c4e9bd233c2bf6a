"""gpu tier for the embedding API: docs/embedding.md's code, its gpu block included, and
every example compiled by a host's own PassManager, assembled, launched through
tile_mlir.runtime and checked against float64 NumPy (the demo's references)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from mlir import ir
from mlir.passmanager import PassManager
from support.doc_blocks import ROOT, run_blocks

import tile_mlir
from tile_mlir import demo
from tile_mlir.runtime import Program, detect_chip
from tile_mlir.toolchain import assemble

pytestmark = pytest.mark.gpu


def test_the_page_runs_on_a_gpu() -> None:
    namespace = run_blocks(ROOT / "docs" / "embedding.md", frozenset({"gpu"}))
    assert namespace["program"].kernel("vector_add").binary == "cubin"
    assert not np.isnan(namespace["c"]).any()


@pytest.mark.parametrize("example", sorted(demo.EXAMPLES.glob("*.mlir")), ids=lambda p: p.stem)
def test_every_example_through_a_hosts_pass_manager(example: Path,
                                                    rng: np.random.Generator) -> None:
    chip = detect_chip()
    context = ir.Context()
    with context:
        module = tile_mlir.parse(example.read_text(), context, name=str(example))
        kernels = tile_mlir.kernel_specs(module)
        pm = PassManager("builtin.module")
        tile_mlir.add_pipeline(pm, "tile-to-ptx", chip=chip)
        pm.run(module.operation)
    ptx = tile_mlir.ptx(module)
    program = Program(chip, kernels, ptx, {name: assemble(text, chip) for name, text in ptx.items()})
    assert kernels
    for name, spec in kernels.items():
        verdict = demo.check(spec, program.kernel(name), rng)
        assert verdict.ok, (name, verdict)
