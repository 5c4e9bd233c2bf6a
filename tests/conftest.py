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
