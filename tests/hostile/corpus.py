"""The hostile corpus: seeded, so every case can be made again from (seed, count, id).

Families (`Case.family`):
  attributes  every attribute of every tile op given each value of a list of wrong types
  extents     zero, 2^31, 2^32, 2^40, 2^63-1 and dynamic extents on each operand
  blocks      odd, missing and malformed known_block_size
  names       unknown and misplaced scopes, variants, op names and reduction kinds
  operands    each operand dropped, an extra one added, unranked and non-memref operands
  grammar     kernels from the dialect's grammar with 0 to 3 random perturbations
  layouts     tile.alloc with layouts from the notation's grammar (tests/hostile/layouts.py)
  mutations   every examples/*.mlir and lit-tests/**/*.mlir file ('// -----' chunk) in
              turn, with bytes flipped, lines deleted or doubled, tokens swapped or
              replaced, the text truncated
  bytes       binary files, non-UTF-8 text, encodings, NULs, deep nesting, huge lines

The first five are enumerated; the last four are random and fill the rest of `count`.

    python -m hostile.corpus --count 2000 --id grammar-0042 > case.mlir   (from tests/)
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tile_mlir import op_table

from . import grammar, layouts
from .grammar import Kernel

DEFAULT_SEED = 16
DEFAULT_COUNT = 2000
SPLIT_MARKER = re.compile(r"^// -----[ \t]*$", re.M)


@dataclass(frozen=True)
class Case:
    id: str
    family: str
    data: bytes
    note: str = ""


def repo_root() -> Path:
    here = Path(__file__).resolve()
    return next(p for p in here.parents if (p / "pyproject.toml").is_file())


@cache
def seed_files() -> tuple[tuple[str, str], ...]:
    """(name, text) of each example and each '// -----' chunk of each lit test."""
    root = repo_root()
    found = []
    for path in sorted(root.glob("examples/*.mlir")):
        found.append((str(path.relative_to(root)), path.read_text()))
    for path in sorted(root.glob("lit-tests/**/*.mlir")):
        if "Output" in path.relative_to(root).parts:  # lit's scratch files, not tests
            continue
        chunks = SPLIT_MARKER.split(path.read_text())
        found += [(f"{path.relative_to(root)}#{i}", c) for i, c in enumerate(chunks)]
    return tuple(found)


def _rng(seed: int, family: str, index: int) -> random.Random:
    return random.Random(f"{seed}:{family}:{index}")


# --------------------------------------------------------------- enumerated


def _templates(seed: int) -> dict[str, Kernel]:
    """One fresh valid kernel per op under test (fresh each call: cases mutate them)."""
    add = op_table.ELEMENTWISE["add"]
    return {
        "tile.copy": grammar.shared_kernel(_rng(seed, "template", 0)),
        "tile.elementwise": grammar.elementwise_kernel(_rng(seed, "template", 1), add),
        "tile.reduce": grammar.reduce_kernel(_rng(seed, "template", 2)),
        "tile.alloc": grammar.register_kernel(_rng(seed, "template", 3)),
        "tile.prefetch": grammar.shared_kernel(_rng(seed, "template", 4)),
    }


def _first(kernel: Kernel, name: str) -> grammar.Op:
    return next(op for op in kernel.ops if op.name == name)


def attributes(seed: int) -> Iterator[tuple[str, str]]:
    for op_name, attrs in grammar.OP_ATTRIBUTES.items():
        for attr in attrs:
            for value in grammar.BAD_ATTRIBUTE_VALUES:
                kernel = _templates(seed)[op_name]
                _first(kernel, op_name).attrs[attr] = value
                yield grammar.render(kernel), f"{op_name} {attr} = {value}"


def extents(seed: int) -> Iterator[tuple[str, str]]:
    for op_name in ("tile.copy", "tile.elementwise", "tile.reduce", "tile.prefetch",
                    "tile.alloc"):
        for position in range(3):
            for extent in grammar.HOSTILE_EXTENTS:
                kernel = _templates(seed)[op_name]
                op = _first(kernel, op_name)
                values = [op.result] if op.result else op.operands
                value = values[position % len(values)]
                if value is None or not value.shape:
                    continue
                value.shape[position % len(value.shape)] = extent
                yield grammar.render(kernel), f"{op_name} {value.name}: {value.type}"


BLOCKS = ("array<i32: 0, 1, 1>", "array<i32: 1, 1, 1>", "array<i32: 3, 1, 1>",
          "array<i32: 31, 1, 1>", "array<i32: 33, 1, 1>", "array<i32: 48, 1, 1>",
          "array<i32: 96, 1, 1>", "array<i32: 1025, 1, 1>", "array<i32: 2048, 1, 1>",
          "array<i32: 32, 32, 2>", "array<i32: 16, 3, 1>", "array<i32: -1, 1, 1>",
          "array<i32: 2147483647, 2147483647, 2147483647>", "array<i32: 32>", "array<i32: 32, 1>",
          "array<i32>", "array<i32: 32, 1, 1, 1>", "array<i64: 32, 1, 1>", "32 : i32",
          '"256"', "[32, 1, 1]", "dense<[32, 1, 1]> : vector<3xi32>", "unit", None)


def blocks(seed: int) -> Iterator[tuple[str, str]]:
    for op_name in grammar.OP_ATTRIBUTES:
        for text in BLOCKS:
            kernel = _templates(seed)[op_name]
            if text is None:
                kernel.attrs.pop("known_block_size", None)
            else:
                kernel.attrs["known_block_size"] = text
            yield grammar.render(kernel), f"{op_name} in a kernel with known_block_size = {text}"


def names(seed: int) -> Iterator[tuple[str, str]]:
    for op_name in ("tile.copy", "tile.elementwise", "tile.reduce", "tile.prefetch"):
        for scope in (*grammar.SCOPES, *grammar.ODD_SCOPES):
            kernel = _templates(seed)[op_name]
            _first(kernel, op_name).attrs["scope"] = f'"{scope}"'
            yield grammar.render(kernel), f"{op_name} scope {scope!r}"
        for variant in grammar.VARIANTS:
            kernel = _templates(seed)[op_name]
            _first(kernel, op_name).attrs["variant"] = f'"{variant}"'
            yield grammar.render(kernel), f"{op_name} variant {variant!r}"
    for kind in ("mean", "", "argmax", "SUM", "sum\\00"):
        kernel = _templates(seed)["tile.reduce"]
        _first(kernel, "tile.reduce").attrs["kind"] = f'"{kind}"'
        yield grammar.render(kernel), f"tile.reduce kind {kind!r}"
    for name in ("tile.move", "tile.Copy", "tile.", "tile.alloca", "tile.layout", "tile"):
        kernel = _templates(seed)["tile.copy"]
        _first(kernel, "tile.copy").name = name
        yield grammar.render(kernel), f"op {name!r}"


def operands(seed: int) -> Iterator[tuple[str, str]]:
    for op_name in ("tile.copy", "tile.elementwise", "tile.reduce", "tile.prefetch"):
        count = len(_first(_templates(seed)[op_name], op_name).operands)
        for i in range(count + 1):
            kernel = _templates(seed)[op_name]
            op = _first(kernel, op_name)
            if i < count:
                gone = op.operands.pop(i)
                yield grammar.render(kernel), f"{op_name} without operand {i} ({gone.name})"
            else:
                op.operands = []
                yield grammar.render(kernel), f"{op_name} without operands"
        for extra in range(1, 4):
            kernel = _templates(seed)[op_name]
            op = _first(kernel, op_name)
            op.operands += [op.operands[-1]] * extra
            yield grammar.render(kernel), f"{op_name} with {extra} extra operand(s)"
        for raw in ("memref<*xf32>", "memref<f32>", "memref<?xf32>", "memref<?x?xf32>",
                    "tensor<4xf32>", "vector<4xf32>", "f32", "index"):
            kernel = _templates(seed)[op_name]
            for value in _first(kernel, op_name).operands:
                if raw.startswith("memref<?"):
                    value.shape = ["?"] * max(len(value.shape or []), 1)
                else:
                    value.raw = raw
            yield grammar.render(kernel), f"{op_name} on {raw} operands"


ENUMERATED: tuple[tuple[str, Callable[[int], Iterator[tuple[str, str]]]], ...] = (
    ("attributes", attributes), ("extents", extents), ("blocks", blocks), ("names", names),
    ("operands", operands))


# ------------------------------------------------------------------- random


def grammar_case(rng: random.Random, index: int) -> tuple[bytes, str]:
    changes = rng.choice((0, 1, 1, 1, 1, 2, 2, 3))
    text, what = grammar.hostile_kernel(rng, changes)
    return text.encode(), "; ".join(what) or "valid"


def layout_case(rng: random.Random, index: int) -> tuple[bytes, str]:
    """Half from the notation's grammar (mostly wrong), half valid variations of the
    templates' layouts (padded, permuted, offset, replicated) that the lowering sees."""
    maker = rng.choice((grammar.shared_kernel, grammar.register_kernel, grammar.reduce_kernel))
    kernel = maker(rng)
    if rng.random() < 0.5:
        what = grammar.alloc_layout(rng, kernel)
        return grammar.render(kernel).encode(), what
    allocs = [op for op in kernel.ops if op.result is not None and op.result.shape]
    notes = []
    for op in allocs:
        assert op.result is not None and op.result.shape is not None
        shape = [int(d) for d in op.result.shape]
        text = (layouts.register_layout(rng, shape[0], shape[1]) if "@" in op.attrs["layout"]
                else layouts.shared_layout(rng, shape))
        op.attrs["layout"] = f'#tile.layout<"{text}">'
        notes.append(text)
    return grammar.render(kernel).encode(), "; ".join(notes)


INTEGERS = ("0", "-1", "1", "2147483648", "4294967296", "1099511627776", "9223372036854775807",
            "9223372036854775808", "-9223372036854775808", "99999999999999999999", "0x7FFFFFFF")
TOKENS = ("}", "{", "(", ")", ">", "<", ",", ":", "->", "?", "%a0", "%t0", "@k", '"', "x",
          "tile.copy", "tile.reduce", '"tile.elementwise"', "#gpu.address_space<private>",
          "memref<*xf32>", "gpu.return", "gpu.barrier", "// -----", "\\", "^bb1:", "#tile.layout<",
          "array<i32:", "dense<", "loc(unknown)", 'loc("f":0:0)', "unit", "index", "i0", "f8E4M3FN")


def _mutate_text(rng: random.Random, text: str) -> tuple[str, str]:
    lines = text.split("\n")
    how = rng.randrange(7)
    i = rng.randrange(len(lines))
    if how == 0:
        del lines[i]
        return "\n".join(lines), f"line {i + 1} deleted"
    if how == 1:
        lines.insert(i, lines[i])
        return "\n".join(lines), f"line {i + 1} doubled"
    if how == 2:
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
        return "\n".join(lines), f"lines {i + 1} and {j + 1} swapped"
    tokens = list(re.finditer(r"%?[\w.]+|[^\w\s]", text))
    if not tokens:
        return text + rng.choice(TOKENS), "token appended"
    a = rng.choice(tokens)
    if how == 3:
        b = rng.choice(tokens)
        first, second = sorted((a, b), key=lambda m: m.start())
        if first.end() > second.start():
            return text, "tokens overlap"
        return (text[:first.start()] + second.group() + text[first.end():second.start()] +
                first.group() + text[second.end():]), f"{first.group()!r} <-> {second.group()!r}"
    if how == 4:
        numbers = [m for m in tokens if m.group().isdigit()] or [a]
        n = rng.choice(numbers)
        new = rng.choice(INTEGERS)
        return text[:n.start()] + new + text[n.end():], f"{n.group()!r} -> {new}"
    if how == 5:
        new = rng.choice(TOKENS)
        return text[:a.start()] + new + text[a.start():], f"{new!r} inserted"
    return text[:a.start()] + text[a.end():], f"{a.group()!r} deleted"


def _mutate_bytes(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    if not data:
        return bytes([rng.randrange(256)]), "a byte added"
    i = rng.randrange(len(data))
    if rng.random() < 0.5:
        flipped = data[i] ^ (1 << rng.randrange(8))
        return data[:i] + bytes([flipped]) + data[i + 1:], f"byte {i} -> {flipped:#04x}"
    return data[:i], f"truncated to {i} bytes"


def mutation_case(rng: random.Random, index: int) -> tuple[bytes, str]:
    """Every file (chunk) in turn, with one to three mutations."""
    name, text = seed_files()[index % len(seed_files())]
    notes = [name]
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        if rng.random() < 0.8:
            text, note = _mutate_text(rng, text)
            notes.append(note)
        else:
            data, note = _mutate_bytes(rng, text.encode("utf-8", "surrogateescape"))
            notes.append(note)
            text = data.decode("utf-8", "surrogateescape")
    return text.encode("utf-8", "surrogateescape"), "; ".join(notes)


BAD_BYTES = (b"\xff", b"\x80", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf8\x88\x80\x80\x80",
             b"\xfe\xff", b"\xe2\x82", b"\xf4\x90\x80\x80")


def _example(rng: random.Random) -> str:
    return rng.choice([t for n, t in seed_files() if n.startswith("examples/")])


def _bad_byte(rng: random.Random) -> tuple[bytes, str]:
    text = _example(rng).encode()
    newlines = [m.end() for m in re.finditer(b"\n", text)]
    at = rng.choice([rng.randrange(len(text)), *newlines[:3], len(text)])
    bad = rng.choice(BAD_BYTES)
    return text[:at] + bad + text[at:], f"{bad!r} at offset {at}"


def _encoded(rng: random.Random) -> tuple[bytes, str]:
    text = _example(rng)
    how = rng.choice(("utf-16", "utf-16-be", "utf-32", "utf-8-sig", "latin-1-comment", "crlf",
                      "nul", "cp1252"))
    if how == "latin-1-comment":
        return ("// caf\xe9 \xb5s\n" + text).encode("latin-1"), how
    if how == "crlf":
        return text.replace("\n", "\r\n").encode(), how
    if how == "nul":
        at = rng.randrange(len(text))
        return (text[:at] + "\0" + text[at:]).encode(), f"NUL at {at}"
    if how == "cp1252":
        return ("// \u201cquoted\u201d\n" + text).encode("cp1252"), how
    return text.encode(how), how


def _extreme(rng: random.Random) -> tuple[bytes, str]:
    depth = rng.choice((100, 1000, 10000, 100000))
    shapes = {
        "parens": "(" * depth,
        "brackets": f"module attributes {{x = {'[' * depth}{']' * depth}}} {{}}\n",
        "regions": "func.func @f() {\n" + "scf.execute_region {\n" * depth,
        "ops": "module {" + "\n".join(['"test.op"() ({'] * depth) + "\n",
        "layout": ('module { %t = "tile.alloc"() {layout = #tile.layout<"S[' + "(" * depth +
                   ']">} : () -> memref<4xf32, 3> }\n'),
        "long-line": "// " + "a" * depth * 3 + "\n" + _example(rng),
        "long-name": f"module {{ gpu.module @{'m' * depth} {{ }} }}\n",
        "many-lines": "\n" * depth + _example(rng),
    }
    name = rng.choice(sorted(shapes))
    return shapes[name].encode(), f"{name} x{depth}"


def _random_bytes(rng: random.Random) -> tuple[bytes, str]:
    size = rng.choice((0, 1, 2, 16, 300, 4096))
    head = rng.choice((b"", b"\x7fELF\x02\x01\x01", b"\x1f\x8b\x08", b"MLIR\x00", b"\xef\xbb\xbf",
                       b"module {", b"PK\x03\x04"))
    return head + rng.randbytes(size), f"{size} random bytes after {head!r}"


def bytes_case(rng: random.Random, index: int) -> tuple[bytes, str]:
    maker = rng.choice((_bad_byte, _bad_byte, _encoded, _extreme, _random_bytes, _random_bytes))
    return maker(rng)


FIXED_BYTES = ((b"", "empty"), (b"\n\n  \t\n", "whitespace"), (b"// only a comment\n", "comment"),
               (b"\x00", "NUL"), (b"\xff", "0xff"), (b"module {}\n\xff", "0xff on line 2"),
               (b"\xef\xbb\xbfmodule {}\n", "UTF-8 BOM"), (b"module {}\x1a\n", "Ctrl-Z"),
               (b"module {\r}\r", "CR line ends"), (b'module attributes {a = "\xff"} {}\n',
                                                    "0xff in a string"))

RANDOM: tuple[tuple[str, float, Callable[[random.Random, int], tuple[bytes, str]]], ...] = (
    ("grammar", 0.45, grammar_case), ("layouts", 0.15, layout_case),
    ("mutations", 0.32, mutation_case), ("bytes", 0.08, bytes_case))


def generate(seed: int = DEFAULT_SEED, count: int = DEFAULT_COUNT) -> list[Case]:
    """The corpus: the enumerated families, then random ones up to `count` cases."""
    cases = [Case(f"bytes-fixed-{i:02}", "bytes", data, note)
             for i, (data, note) in enumerate(FIXED_BYTES)]
    for family, make in ENUMERATED:
        cases += [Case(f"{family}-{i:04}", family, text.encode(), note)
                  for i, (text, note) in enumerate(make(seed))]
    room = max(count - len(cases), 0)
    for family, share, maker in RANDOM:
        for i in range(round(room * share)):
            data, note = maker(_rng(seed, family, i), i)
            cases.append(Case(f"{family}-{i:04}", family, data, note))
    return cases


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hostile.corpus", description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--count", type=int, default=DEFAULT_COUNT)
    p.add_argument("--id", help="write this case's bytes to stdout (default: list the cases)")
    args = p.parse_args(argv)
    cases = generate(args.seed, args.count)
    if args.id is None:
        for case in cases:
            print(f"{case.id:24} {len(case.data):8}  {case.note[:80]}")
        return 0
    found = [c for c in cases if c.id == args.id]
    if not found:
        print(f"no case {args.id}", file=sys.stderr)
        return 1
    sys.stdout.buffer.write(found[0].data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
