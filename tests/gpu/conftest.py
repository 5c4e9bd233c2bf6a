"""The gpu tier's shared settings: which tests `make gpu-sanitize` runs under
compute-sanitizer (memcheck, racecheck, synccheck).

The subset covers every lowering variant (the seeds' programs: shared and
register tiles, copies both ways; every reduction variant; fp8 tables; the elementwise
gmem strategies over whole arrays, row blocks, warps and strided views) and
every op family of the library (one op per family, each dtype the test runs),
small enough to run under memcheck in a few minutes.
"""

from __future__ import annotations

import pytest

SANITIZE = (
    "test_primitives.py::test_program_on_gpu",
    "test_reductions.py::test_reduction_on_gpu",
    "test_reductions.py::test_48_thread_sum_sees_every_lane",
    "test_elementwise.py::test_elementwise_case",
    # the library: one op of each family
    *(f"test_ops.py::test_op[{op}-" for op in (
        "add", "exp", "where", "eq", "bitwise_and", "logical_or", "gelu", "silu_and_mul",
        "prelu", "nan_to_num", "isnan", "clamp")),
    "test_ops_reductions.py::test_against_torch",
    "test_ops_rope.py::",
    "test_generators.py::test_dropout_matches_the_reference_on_every_strategy",
    "test_generators.py::test_alibi_against_torch",
    "test_ops_rows.py::test_every_strategy_once",
    # elementwise/lut: the table written by the CTA, a barrier, then read (racecheck)
    "test_lut.py::test_table_is_the_computed_op[sqrt-",
    "test_lut.py::test_table_is_the_computed_op[mul-scalar-",
    # thread counts that do not divide evenly: partial warps' shuffle masks (synccheck),
    # each warp's (warpgroup's) own reduction scratch (racecheck)
    "test_threads.py::test_program_on_gpu[reduce_",
    "test_threads.py::test_program_on_gpu[seed_000_smem_sqrt-100]",
    "test_threads.py::test_reduction_on_gpu[sum-f32-4x8-ax-1-cta100-shared]",
    "test_threads.py::test_reduction_on_gpu[max-f32-5x300-ax-1-cta100-shared-nan]",
    "test_threads.py::test_reduction_on_gpu[sum-f32-100x4-ax0,1-cta100-registers-keep]",
    "test_threads.py::test_reduction_on_gpu[sum-f32-7x4-ax0,1-cta7-registers-keep]",
)
"""Node-id fragments of the tests marked `sanitize`."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if any(fragment in item.nodeid for fragment in SANITIZE):
            item.add_marker(pytest.mark.sanitize)
