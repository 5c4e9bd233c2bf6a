"""null tier: the kernel cache (memory and disk), its keys, damage, concurrency, bundles."""

from __future__ import annotations

import multiprocessing
import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cases import Case

import tile_mlir
from tile_mlir import compiler
from tile_mlir.runtime import BundleError, Program, bundle, load_bundle
from tile_mlir.runtime import cache as kernel_cache

SOURCE = Case("add", (4, 256), block=128).mlir()
OPTIONS = kernel_cache.compile_options(cubin=True)


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty cache of the test's own, with nothing remembered in memory."""
    monkeypatch.setenv("TILE_MLIR_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TILE_MLIR_CACHE", raising=False)
    kernel_cache.clear_memory()
    yield tmp_path
    kernel_cache.clear_memory()


def _no_compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object, **__: object) -> Program:
        raise AssertionError("compiled, but the cache should have answered")

    monkeypatch.setattr(compiler, "_compile", refuse)


def _entries(root: Path) -> list[Path]:
    return sorted(root.rglob("*.bundle"))


def _same(a: Program, b: Program) -> None:
    assert (a.chip, a.kernels, a.ptx, a.cubin, a.stages) == \
        (b.chip, b.kernels, b.ptx, b.cubin, b.stages)


def test_miss_then_hits_in_memory_and_on_disk(cache_dir: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    first = tile_mlir.compile(SOURCE)
    [entry] = _entries(cache_dir)
    assert list(first.stages) == ["tile", "gpu", "llvm", "ptx"] and first.cubin
    _no_compiling(monkeypatch)
    assert tile_mlir.compile(SOURCE) is first  # memory
    kernel_cache.clear_memory()
    from_disk = tile_mlir.compile(SOURCE)  # disk
    assert from_disk is not first
    _same(from_disk, first)
    assert _entries(cache_dir) == [entry]
    assert kernel_cache.lookup(SOURCE, "sm_90", OPTIONS) is from_disk


def test_entry_keeps_every_stage_and_metadata(cache_dir: Path) -> None:
    program = tile_mlir.compile(SOURCE, chip="sm_80")
    [entry] = _entries(cache_dir)
    loaded, meta = bundle.load_with_meta(entry)
    _same(loaded, program)
    assert meta["key"] == entry.stem == kernel_cache.request_key(SOURCE, "sm_80", OPTIONS)
    assert meta["chip"] == "sm_80" and meta["options"] == OPTIONS
    assert meta["compiler"]["fingerprint"] == kernel_cache.compiler_fingerprint()
    spec = loaded.kernels["kernel"]
    assert spec.block == (128, 1, 1) and [p.kind for p in spec.params] == ["memref"] * 3


def test_cache_false_and_disabled_cache_compile_every_time(
        cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = tile_mlir.compile(SOURCE, cache=False)
    assert tile_mlir.compile(SOURCE, cache=False) is not a
    assert _entries(cache_dir) == []
    monkeypatch.setenv("TILE_MLIR_CACHE", "0")
    b = tile_mlir.compile(SOURCE)
    assert tile_mlir.compile(SOURCE) is not b
    assert _entries(cache_dir) == []
    _same(a, b)


def test_key_changes_with_text_chip_options_and_compiler(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = kernel_cache.request_key
    base = key(SOURCE, "sm_90", OPTIONS)
    assert key(SOURCE, "sm_90", OPTIONS) == base
    others = {key(SOURCE + " ", "sm_90", OPTIONS), key(SOURCE, "sm_80", OPTIONS),
              key(SOURCE, "sm_90", kernel_cache.compile_options(cubin=False))}
    assert base not in others and len(others) == 3
    source = tmp_path / "pass.py"
    source.write_text("A = 1\n")
    monkeypatch.setattr(kernel_cache, "_compiler_files", lambda: [("pass.py", source)])
    kernel_cache.compiler_fingerprint.cache_clear()
    try:
        before = key(SOURCE, "sm_90", OPTIONS)
        source.write_text("A = 2\n")  # the compiler changed
        kernel_cache.compiler_fingerprint.cache_clear()
        assert key(SOURCE, "sm_90", OPTIONS) != before
    finally:
        kernel_cache.compiler_fingerprint.cache_clear()


def test_fingerprint_covers_compiler_dialect_and_pipelines() -> None:
    names = [name for name, _ in kernel_cache._compiler_files()]
    assert "compiler.py" in names and "lowering/variants/elementwise/gmem.py" in names
    assert "dialect/tile.irdl.mlir" in names and "pipelines/tile-to-ptx.pipeline" in names


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "swap"])
def test_damaged_entry_is_rebuilt_with_a_warning(cache_dir: Path, damage: str) -> None:
    good = tile_mlir.compile(SOURCE)
    [entry] = _entries(cache_dir)
    data = entry.read_bytes()
    if damage == "truncate":
        entry.write_bytes(data[: len(data) * 2 // 3])
    elif damage == "flip":
        middle = len(data) - 100
        entry.write_bytes(data[:middle] + bytes([data[middle] ^ 1]) + data[middle + 1:])
    elif damage == "empty":
        entry.write_bytes(b"")
    else:  # a whole, valid entry of another request under this key's name
        other = tile_mlir.compile(SOURCE, chip="sm_80")
        entry.write_bytes(bundle.encode(other, {"key": "another"}))
    kernel_cache.clear_memory()
    with pytest.warns(kernel_cache.CacheWarning, match="damaged entry, compiling again"):
        rebuilt = tile_mlir.compile(SOURCE)
    _same(rebuilt, good)
    kernel_cache.clear_memory()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _same(tile_mlir.compile(SOURCE), good)  # the rebuilt entry is whole again


def _compile_in_child(directory: str) -> tuple[str, bytes]:
    os.environ["TILE_MLIR_CACHE_DIR"] = directory
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a torn entry would warn
        program = tile_mlir.compile(SOURCE)
    return program.ptx["kernels"], program.cubin["kernels"]


def _hammer(directory: str, seed: int) -> int:
    """Store and read one key over and over; count reads that were not whole entries."""
    os.environ["TILE_MLIR_CACHE_DIR"] = directory
    program = Program("sm_90", {}, {"m": "x" * (50_000 + seed)}, {"m": bytes(30_000)},
                      {"tile": "y" * seed})
    torn = 0
    for _ in range(40):
        kernel_cache.store("request", "sm_90", OPTIONS, program)
        kernel_cache.clear_memory()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if kernel_cache.lookup("request", "sm_90", OPTIONS) is None or caught:
                torn += 1
    return torn


def test_concurrent_processes_share_the_cache(cache_dir: Path) -> None:
    spawn = multiprocessing.get_context("spawn")
    with spawn.Pool(4) as pool:
        results = pool.map(_compile_in_child, [str(cache_dir)] * 4)
        torn = pool.starmap(_hammer, [(str(cache_dir), seed) for seed in range(4)])
    assert len(set(results)) == 1
    assert torn == [0, 0, 0, 0]
    assert len(_entries(cache_dir)) == 2
    assert not [p for p in cache_dir.rglob("*") if p.name.endswith(".tmp")]


def test_unwritable_cache_warns_and_still_compiles(cache_dir: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = cache_dir / "file"
    blocker.write_text("")
    monkeypatch.setenv("TILE_MLIR_CACHE_DIR", str(blocker / "cache"))  # under a file
    with pytest.warns(kernel_cache.CacheWarning, match="cannot write"):
        program = tile_mlir.compile(SOURCE)
    assert program.cubin


# ------------------------------------------------------------------ bundles


@pytest.mark.parametrize("directory", [False, True], ids=["file", "directory"])
def test_bundle_round_trip(tmp_path: Path, directory: bool) -> None:
    program = tile_mlir.compile(SOURCE, cache=False)
    path = program.save(tmp_path / "kernels.bundle", directory=directory)
    assert path.is_dir() == directory
    loaded = load_bundle(path)
    _same(loaded, program)
    if directory:
        assert (path / "cubin" / "kernels.sm_90.cubin").read_bytes() == program.cubin["kernels"]
        assert (path / "stages" / "gpu.mlir").read_text() == program.stages["gpu"]


def test_damaged_bundles_are_refused(tmp_path: Path) -> None:
    program = tile_mlir.compile(SOURCE, cache=False)
    one = program.save(tmp_path / "k.bundle")
    one.write_bytes(one.read_bytes()[:-10])
    with pytest.raises(BundleError, match="damaged or truncated"):
        load_bundle(one)
    folder = program.save(tmp_path / "k", directory=True)
    (folder / "ptx" / "kernels.ptx").write_text("// edited\n")
    with pytest.raises(BundleError, match=r"ptx/kernels\.ptx is damaged"):
        load_bundle(folder)
    with pytest.raises(BundleError, match="not a tile-mlir bundle"):
        bundle.decode(b"\x7fELF...")
