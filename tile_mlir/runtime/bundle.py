"""Bundles: a Program as files that a process without MLIR loads and runs.

One format serves the kernel cache and ahead-of-time exports. A bundle is a
manifest (JSON: chip, every kernel's spec, metadata, and a list of sections
with their sizes and sha256) plus the sections themselves: `ptx/<module>.ptx`,
`cubin/<module>.<chip>.cubin` and `stages/<stage>.mlir` (the IR of every
stage). It is stored either as a directory (`manifest.json` beside the section
files, easy to read and diff) or as one file:

    tile-mlir bundle 1\\n
    <manifest length> <manifest sha256>\\n
    <manifest JSON><section bytes, in manifest order>

Every byte is covered by a checksum, so a damaged or truncated bundle is
detected (BundleError) instead of loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tile_mlir.runtime.program import Program
from tile_mlir.runtime.spec import KernelSpec

MAGIC = b"tile-mlir bundle 1\n"
MANIFEST = "manifest.json"
FORMAT = 1


class BundleError(ValueError):
    """A bundle that is missing, damaged, truncated or of another format."""


def _sha(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def _sections(program: Program) -> dict[str, bytes]:
    sections = {f"ptx/{m}.ptx": text.encode() for m, text in program.ptx.items()}
    sections.update({f"cubin/{m}.{program.chip}.cubin": data for m, data in program.cubin.items()})
    sections.update({f"stages/{s}.mlir": text.encode() for s, text in program.stages.items()})
    return sections


def _manifest(program: Program, sections: Mapping[str, bytes],
              meta: Mapping[str, Any]) -> bytes:
    manifest = {
        "format": FORMAT,
        "chip": program.chip,
        "kernels": {name: spec.to_json() for name, spec in program.kernels.items()},
        "stages": list(program.stages),
        "meta": dict(meta),
        "sections": [{"name": n, "size": len(d), "sha256": _sha(d)} for n, d in sections.items()],
    }
    return json.dumps(manifest, indent=1, sort_keys=True).encode()


def encode(program: Program, meta: Mapping[str, Any] | None = None) -> bytes:
    """The one-file form of a bundle."""
    sections = _sections(program)
    manifest = _manifest(program, sections, meta or {})
    head = MAGIC + f"{len(manifest)} {_sha(manifest)}\n".encode()
    return b"".join([head, manifest, *sections.values()])


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save(program: Program, path: str | Path, *, directory: bool = False,
         meta: Mapping[str, Any] | None = None) -> Path:
    """Export `program` as one file, or with directory=True as a directory of files."""
    path = Path(path)
    if not directory:
        write_atomic(path, encode(program, meta))
        return path
    sections = _sections(program)
    for name, data in sections.items():
        write_atomic(path / name, data)
    write_atomic(path / MANIFEST, _manifest(program, sections, meta or {}))  # last: complete
    return path


# ------------------------------------------------------------------ reading


def _split_file(data: bytes, where: str) -> tuple[dict[str, Any], memoryview]:
    """The manifest and the section bytes of a one-file bundle, checked."""
    if not data.startswith(MAGIC):
        raise BundleError(f"{where}: not a tile-mlir bundle (or of another format version)")
    line_end = data.find(b"\n", len(MAGIC))
    try:
        length_text, digest = data[len(MAGIC):line_end].decode().split()
        start = line_end + 1
        manifest_bytes = data[start:start + int(length_text)]
    except ValueError:
        raise BundleError(f"{where}: damaged bundle header") from None
    if _sha(manifest_bytes) != digest:
        raise BundleError(f"{where}: manifest checksum mismatch (damaged or truncated)")
    return json.loads(manifest_bytes), memoryview(data)[start + len(manifest_bytes):]


def _file_sections(manifest: Mapping[str, Any], body: memoryview,
                   where: str) -> dict[str, bytes]:
    sections, offset = {}, 0
    for entry in manifest["sections"]:
        chunk = body[offset:offset + entry["size"]]
        offset += entry["size"]
        sections[entry["name"]] = _checked(chunk, entry, where)
    if offset != len(body):
        raise BundleError(f"{where}: {len(body) - offset} bytes beyond the last section")
    return sections


def _dir_sections(manifest: Mapping[str, Any], root: Path) -> dict[str, bytes]:
    sections = {}
    for entry in manifest["sections"]:
        try:
            data = (root / entry["name"]).read_bytes()
        except OSError as e:
            raise BundleError(f"{root}: section {entry['name']} unreadable: {e}") from None
        sections[entry["name"]] = _checked(data, entry, str(root))
    return sections


def _checked(data: bytes | memoryview, entry: Mapping[str, Any], where: str) -> bytes:
    if len(data) != entry["size"] or _sha(data) != entry["sha256"]:
        raise BundleError(f"{where}: section {entry['name']} is damaged or truncated "
                          f"({len(data)} of {entry['size']} bytes, checksum mismatch)")
    return bytes(data)


def _program(manifest: Mapping[str, Any], sections: Mapping[str, bytes]) -> Program:
    chip = manifest["chip"]
    ptx, cubin, stages = {}, {}, {}
    for name, data in sections.items():
        folder, _, file = name.partition("/")
        if folder == "ptx":
            ptx[file.removesuffix(".ptx")] = data.decode()
        elif folder == "cubin" and file.endswith(f".{chip}.cubin"):
            cubin[file.removesuffix(f".{chip}.cubin")] = data
        elif folder == "stages":
            stages[file.removesuffix(".mlir")] = data.decode()
    kernels = {n: KernelSpec.from_json(s) for n, s in manifest["kernels"].items()}
    ordered = {s: stages[s] for s in manifest.get("stages", stages) if s in stages}
    return Program(chip, kernels, ptx, cubin, ordered)


def decode(data: bytes, where: str = "<bundle>") -> tuple[Program, dict[str, Any]]:
    """The Program and metadata in one-file bundle bytes; BundleError when damaged."""
    manifest, body = _split_file(data, where)
    return _decoded(manifest, lambda: _file_sections(manifest, body, where), where)


def _decoded(manifest: Mapping[str, Any], read: Any, where: str
             ) -> tuple[Program, dict[str, Any]]:
    if manifest.get("format") != FORMAT:
        raise BundleError(f"{where}: bundle format {manifest.get('format')}, expected {FORMAT}")
    try:
        return _program(manifest, read()), dict(manifest.get("meta", {}))
    except (KeyError, TypeError, UnicodeDecodeError) as e:
        raise BundleError(f"{where}: malformed bundle ({type(e).__name__}: {e})") from None


def load(path: str | Path) -> Program:
    """Load a bundle (a file or a directory) written by Program.save; needs no MLIR."""
    return load_with_meta(path)[0]


def load_with_meta(path: str | Path) -> tuple[Program, dict[str, Any]]:
    path = Path(path)
    if path.is_dir():
        try:
            manifest = json.loads((path / MANIFEST).read_bytes())
        except (OSError, ValueError) as e:
            raise BundleError(f"{path}: no readable {MANIFEST}: {e}") from None
        return _decoded(manifest, lambda: _dir_sections(manifest, path), str(path))
    try:
        data = path.read_bytes()
    except OSError as e:
        raise BundleError(f"{path}: {e}") from None
    return decode(data, str(path))
