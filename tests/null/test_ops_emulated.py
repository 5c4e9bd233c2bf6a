"""null tier: every op of the library on every dtype, run end to end on the pretend device.

The public functions of tile_mlir.ops are called as a user calls them; their
kernels, generated as tile programs and lowered by the compiler's passes, run
in the host emulator (emulated.py, host.py) on fresh random inputs with the
special values mixed in, and are compared with the registry's references
(torch's semantics): exact ops bit for bit, NaN and Inf everywhere. The fp8
kernels' NVVM conversion instructions run as host functions written from the
PTX ISA (host.py); the gpu tier checks the instructions themselves, and
test_ops_compile.py has ptxas assemble every kernel.
"""

from __future__ import annotations

import numpy as np
import pytest
from support.emulated import Device
from support.ops_check import Case, compare, expected, inputs, standard_cases
from support.ops_torch import PATTERN_OPS, cases

from tile_mlir import op_table, ops


def _cases() -> list[Case]:
    found = []
    for row in op_table.public_ops():
        for dtype in row.dtypes:
            found += cases(row.name, dtype) if row.name in PATTERN_OPS else \
                standard_cases(row.name, dtype)
    return found


def run_case(device: Device, case: Case, rng: np.random.Generator) -> tuple[np.ndarray, list]:
    args = inputs(case, rng)
    placed = [device.array(a, case.dtype if n not in case.row.keep else "bool")
              if isinstance(a, np.ndarray) else a for n, a in enumerate(args)]
    result = getattr(ops, case.op)(*placed)
    return result.numpy(), args


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c.id)
def test_op(device: Device, case: Case, rng: np.random.Generator) -> None:
    got, args = run_case(device, case, rng)
    report = compare(case, got, expected(case, args))
    print(f"{case.id}: max rel {report.max_rel:.3g}, max {report.max_ulp} ulp")
    assert report.ok, report.detail
