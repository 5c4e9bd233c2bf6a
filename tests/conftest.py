"""Test tiers: the null tier runs anywhere; tests marked `gpu` need a CUDA GPU."""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import Iterator

import numpy as np
import pytest
from support.emulated import device  # noqa: F401 - the pretend device, for the null tier's op tests

from tile_mlir.runtime.driver import gpu_available


@pytest.fixture(autouse=True, scope="session")
def _private_kernel_cache() -> Iterator[None]:
    """Tests compile into a cache of their own, never the user's (nor a warm one)."""
    saved = os.environ.get("TILE_MLIR_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="tile-mlir-test-cache-") as tmp:
        os.environ["TILE_MLIR_CACHE_DIR"] = tmp
        yield
    if saved is None:
        os.environ.pop("TILE_MLIR_CACHE_DIR", None)
    else:
        os.environ["TILE_MLIR_CACHE_DIR"] = saved


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="gpu tier: no CUDA GPU on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    """Fresh random inputs every run; the seed is in the test's report, and a run with
    TILE_MLIR_TEST_SEED=<seed> replays it."""
    seed = int(os.environ.get("TILE_MLIR_TEST_SEED") or secrets.randbits(64))
    request.node.user_properties.append(("seed", seed))
    print(f"seed {seed}")
    return np.random.default_rng(seed)


@pytest.fixture(params=[False, True], ids=["narrow-weights", "weight-copies"])
def copies(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[bool]:
    """The row norms' weights read as each row is split (aligned_as), or from their copies
    at every alignment (ops/rows.py's COPY_BYTES and COPY_LENGTH down to 0), the plans
    made afresh."""
    from tile_mlir.ops import entry, rows

    monkeypatch.setattr(rows, "COPY_BYTES", 0 if request.param else 1 << 62)
    if request.param:
        monkeypatch.setattr(rows, "COPY_LENGTH", dict.fromkeys(rows.COPY_LENGTH, 0))
    entry.clear()
    yield request.param
    entry.clear()
