"""TileLayout: where each element of a tile lives, in the seeds' notation.

A layout maps a logical coordinate of a tile to a memory offset and to the
thread(s) that own it::

    S[(32, 8):(1@laneid, 1)]     lane i owns row i; each lane's 8 elements are
                                 contiguous in its registers (seed 003)
    S[(4, 8)]                    row-major in memory, strides (8, 1) (seed 001)
    S[(32, 8):(1@laneid, 1)], R[4:1@warpid], O[16]
                                 the same tile held by each of 4 warps, stored
                                 from offset 16 of each thread's buffer

`S[shape:strides]` lists one shard iterator per logical dimension: its extent
and a stride, either in memory (no `@`) or over a thread axis (`@laneid`,
`@warpid`, `@wgid`, `@tid`). Without `:strides` the strides are row-major in
memory. `R[...]` adds replication iterators (thread axes only): every element
is owned by all threads they reach. `O[n]` adds a memory offset.

This module is pure Python (no MLIR): the runtime and the op library use it too.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import product

THREAD_AXES: tuple[str, ...] = ("laneid", "warpid", "wgid", "tid")
"""Thread axes a stride may name, with their weight in the flat thread index."""

_AXIS_WEIGHT = {"laneid": 1, "warpid": 32, "wgid": 128, "tid": 1}
_LANES = 32
_INJECTIVITY_LIMIT = 1 << 20  # layouts larger than this are not enumerated
_MAX_INT64 = (1 << 63) - 1


class LayoutError(ValueError):
    """A layout string that does not parse or does not describe a valid layout.

    `position` is the offending character's index in `spec` (or None when the
    error concerns the layout as a whole).
    """

    def __init__(self, message: str, spec: str = "", position: int | None = None):
        self.message = message
        self.spec = spec
        self.position = position
        super().__init__(self._render())

    def _render(self) -> str:
        if not self.spec:
            return self.message
        text = f"{self.message}\n  {self.spec}"
        if self.position is not None:
            text += "\n  " + " " * self.position + "^"
        return text


@dataclass(frozen=True)
class Iter:
    """One shard or replication iterator: `extent:stride` or `extent:stride@axis`."""

    extent: int
    stride: int
    axis: str | None = None  # None: memory

    def __str__(self) -> str:
        return f"{self.stride}@{self.axis}" if self.axis else str(self.stride)


@dataclass(frozen=True)
class TileLayout:
    """A parsed TileLayout. Build with `TileLayout.parse(text)` or `TileLayout.row_major(shape)`."""

    shard: tuple[Iter, ...]
    replicas: tuple[Iter, ...] = ()
    offset: int = 0

    # ----------------------------------------------------------------- building

    @staticmethod
    def parse(text: str) -> TileLayout:
        """Parse the notation; raise LayoutError pointing at the offending character."""
        layout = _Parser(text).parse()
        layout.validate(text)
        return layout

    @staticmethod
    def row_major(shape: Sequence[int], offset: int = 0) -> TileLayout:
        """`S[shape]`: row-major in memory."""
        return TileLayout(_row_major_iters(shape), (), offset)

    # ---------------------------------------------------------------- printing

    def __str__(self) -> str:
        parts = [f"S[{_format_iters(self.shard, omit_row_major=True)}]"]
        if self.replicas:
            parts.append(f"R[{_format_iters(self.replicas, omit_row_major=False)}]")
        if self.offset:
            parts.append(f"O[{self.offset}]")
        return ", ".join(parts)

    def __repr__(self) -> str:
        return f"TileLayout({str(self)!r})"

    # ------------------------------------------------------------------ queries

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(it.extent for it in self.shard)

    @property
    def rank(self) -> int:
        return len(self.shard)

    @property
    def size(self) -> int:
        """Number of logical elements of the tile."""
        return math.prod(self.shape)

    @cached_property
    def thread_axes(self) -> tuple[str, ...]:
        """The thread axes this layout distributes over, in THREAD_AXES order."""
        used = {it.axis for it in (*self.shard, *self.replicas) if it.axis}
        return tuple(a for a in THREAD_AXES if a in used)

    @property
    def thread_axis(self) -> str | None:
        """The single thread axis, None for a memory-only layout.

        Raises ValueError when the layout uses several axes (see thread_axes).
        """
        if len(self.thread_axes) > 1:
            raise ValueError(f"layout {self} uses several thread axes {self.thread_axes}")
        return self.thread_axes[0] if self.thread_axes else None

    @property
    def is_distributed(self) -> bool:
        """True when elements are spread over threads (a register layout)."""
        return bool(self.thread_axes)

    @cached_property
    def thread_count(self) -> int:
        """Threads the layout spans: the largest flat thread index it reaches, plus one."""
        top = sum(
            (it.extent - 1) * it.stride * _AXIS_WEIGHT[it.axis]
            for it in (*self.shard, *self.replicas)
            if it.axis
        )
        return top + 1

    @cached_property
    def storage_size(self) -> int:
        """Elements of storage one thread needs (largest offset + 1)."""
        reach = sum((it.extent - 1) * it.stride for it in self.shard if not it.axis)
        return self.offset + reach + 1

    @property
    def memory_strides(self) -> tuple[int, ...]:
        """Per logical dimension: its memory stride, 0 where the dimension is over threads."""
        return tuple(0 if it.axis else it.stride for it in self.shard)

    def offset_of(self, coord: Sequence[int]) -> int:
        """Memory offset of a logical coordinate (within its owning thread's storage)."""
        self._check_coord(coord)
        pairs = zip(coord, self.shard, strict=True)
        return self.offset + sum(c * it.stride for c, it in pairs if not it.axis)

    def axis_values(self, coord: Sequence[int]) -> dict[str, int]:
        """Value of each thread axis for a coordinate, replication not included."""
        self._check_coord(coord)
        values = dict.fromkeys(self.thread_axes, 0)
        for c, it in zip(coord, self.shard, strict=True):
            if it.axis:
                values[it.axis] += c * it.stride
        return values

    def threads_of(self, coord: Sequence[int]) -> tuple[int, ...]:
        """Flat thread indices (laneid + 32*warpid + 128*wgid + tid) owning a coordinate.

        A memory-only layout is owned by every thread; it returns (0,).
        """
        base = sum(v * _AXIS_WEIGHT[a] for a, v in self.axis_values(coord).items())
        owners = {base}
        for rep in self.replicas:
            step = rep.stride * _AXIS_WEIGHT[rep.axis or "tid"]
            owners = {t + k * step for t in owners for k in range(rep.extent)}
        return tuple(sorted(owners))

    @cached_property
    def contiguous_run(self) -> int:
        """Innermost contiguous run: how many consecutive elements in row-major order
        sit at consecutive offsets of one thread. It bounds the vector width."""
        run = 1
        for it in reversed(self.shard):
            if it.extent == 1:
                continue
            if it.axis or it.stride != run:
                break
            run *= it.extent
        return run

    def vector_width(self, elem_bytes: int, max_bytes: int = 16) -> int:
        """Widest power-of-two element count that the contiguous run and the
        offset allow, capped at `max_bytes` per access."""
        width = max(1, max_bytes // elem_bytes)
        while width > 1 and (self.contiguous_run % width or self.offset % width):
            width //= 2
        return width

    def coords(self) -> Iterator[tuple[int, ...]]:
        """All logical coordinates in row-major order."""
        return product(*(range(e) for e in self.shape))

    # --------------------------------------------------------------- validation

    def validate(self, spec: str = "") -> None:
        """Check the layout is well formed; raise LayoutError if not."""
        text = spec or str(self)
        for it in self.shard:
            if it.extent < 1:
                raise LayoutError(f"extent {it.extent} must be positive", text)
            if it.stride < 0 or (it.stride == 0 and it.extent > 1):
                raise LayoutError(
                    f"stride {it.stride} must be positive (use R[...] to replicate)", text
                )
        for it in self.replicas:
            if not it.axis:
                raise LayoutError("a replication iterator needs a thread axis (stride@axis)", text)
            if it.extent < 1 or it.stride < 1:
                raise LayoutError("replication extent and stride must be positive", text)
        if self.offset < 0:
            raise LayoutError(f"offset {self.offset} must not be negative", text)
        lanes = sum((it.extent - 1) * it.stride for it in self.shard if it.axis == "laneid")
        lanes += sum((it.extent - 1) * it.stride for it in self.replicas if it.axis == "laneid")
        if lanes >= _LANES:
            raise LayoutError(f"laneid reaches {lanes}, past the {_LANES} lanes of a warp", text)
        if max(self.storage_size, self.thread_count) > _MAX_INT64:  # MLIR's sizes are int64
            raise LayoutError(f"layout reaches offset {self.storage_size - 1} and thread "
                              f"{self.thread_count - 1}, past a 64-bit size", text)
        self._check_injective(text)

    def _check_injective(self, text: str) -> None:
        if self.size > _INJECTIVITY_LIMIT or _mixed_radix(self.shard):
            return
        seen: dict[tuple[int, int], tuple[int, ...]] = {}
        for coord in self.coords():
            key = (sum(v * _AXIS_WEIGHT[a] for a, v in self.axis_values(coord).items()),
                   self.offset_of(coord))
            if key in seen:
                raise LayoutError(
                    f"coordinates {seen[key]} and {coord} map to the same thread and offset", text
                )
            seen[key] = coord

    def _check_coord(self, coord: Sequence[int]) -> None:
        if len(coord) != self.rank or any(
                not 0 <= c < e for c, e in zip(coord, self.shape, strict=True)):
            raise IndexError(f"coordinate {tuple(coord)} is outside the tile {self.shape}")


def _mixed_radix(iters: tuple[Iter, ...]) -> bool:
    """Whether the iterators are injective without enumerating them (a million-element
    tile took seconds): within memory and within the flat thread index, sorted by
    stride, each stride is past the reach of the smaller ones."""
    memory = [(it.stride, it.extent) for it in iters if not it.axis]
    threads = [(it.stride * _AXIS_WEIGHT[it.axis], it.extent) for it in iters if it.axis]
    for group in (memory, threads):
        reach = 0
        for stride, extent in sorted(g for g in group if g[1] > 1):
            if stride <= reach:
                return False
            reach += (extent - 1) * stride
    return True


def _row_major_iters(shape: Sequence[int]) -> tuple[Iter, ...]:
    strides = []
    running = 1
    for extent in reversed(shape):
        strides.append(running)
        running *= extent
    return tuple(Iter(e, s) for e, s in zip(shape, reversed(strides), strict=True))


def _format_iters(iters: tuple[Iter, ...], omit_row_major: bool) -> str:
    def tup(items: list[str]) -> str:
        return items[0] if len(items) == 1 else "(" + ", ".join(items) + ")"

    extents = tup([str(it.extent) for it in iters])
    if omit_row_major and iters == _row_major_iters([it.extent for it in iters]):
        return extents
    return f"{extents}:{tup([str(it) for it in iters])}"


# ------------------------------------------------------------------- the parser

_TOKEN = re.compile(r"\s*(?:(?P<int>-?\d+)|(?P<name>[A-Za-z_]\w*)|(?P<punct>[\[\](),:@]))")


class _Parser:
    """Recursive descent over the notation, keeping character positions for errors."""

    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def error(self, message: str, position: int | None = None) -> LayoutError:
        return LayoutError(message, self.text, self.pos if position is None else position)

    def peek(self) -> tuple[str, str, int]:
        """(kind, value, start) of the next token; kind 'end' at the end."""
        rest = self.text[self.pos :]
        if not rest.strip():
            return ("end", "", len(self.text))
        m = _TOKEN.match(self.text, self.pos)
        if not m or m.end() == m.start():
            start = self.pos + len(rest) - len(rest.lstrip())
            return ("bad", self.text[start], start)
        kind = m.lastgroup or "bad"
        return (kind, m.group(kind), m.start(kind))

    def take(self, expected: str | None = None) -> tuple[str, str, int]:
        kind, value, start = self.peek()
        if kind == "bad":
            raise self.error(f"unexpected character {value!r}", start)
        if expected is not None and value != expected:
            shown = "the end" if kind == "end" else repr(value)
            raise self.error(f"expected {expected!r}, found {shown}", start)
        if kind != "end":
            m = _TOKEN.match(self.text, self.pos)
            assert m is not None
            self.pos = m.end()
        return kind, value, start

    def parse(self) -> TileLayout:
        shard: tuple[Iter, ...] | None = None
        replicas: tuple[Iter, ...] = ()
        offset = 0
        seen: set[str] = set()
        while True:
            kind, part, start = self.take()
            if kind != "name" or part not in ("S", "R", "O"):
                raise self.error("expected a layout part S[...], R[...] or O[...]", start)
            if part in seen:
                raise self.error(f"part {part}[...] given twice", start)
            seen.add(part)
            self.take("[")
            if part == "S":
                shard = self.iters(default_row_major=True)
            elif part == "R":
                replicas = self.iters(default_row_major=False)
            else:
                offset = self.integer("offset")
            self.take("]")
            if self.peek()[0] == "end":
                break
            self.take(",")
        if shard is None:
            raise self.error("a layout needs a shard part S[...]", 0)
        return TileLayout(shard, replicas, offset)

    def integer(self, what: str) -> int:
        kind, value, start = self.take()
        if kind != "int":
            raise self.error(f"expected an integer {what}", start)
        return int(value)

    def group(self, item: str) -> tuple[list[tuple[int, str | None]], int]:
        """`n` or `(n, n, ...)` of integers, or of strides `n@axis` when item is 'stride'."""
        start = self.peek()[2]
        if self.peek()[1] != "(":
            return [self.element(item)], start
        self.take("(")
        items = [self.element(item)]
        while self.peek()[1] == ",":
            self.take(",")
            if self.peek()[1] == ")":
                break
            items.append(self.element(item))
        self.take(")")
        return items, start

    def element(self, item: str) -> tuple[int, str | None]:
        value = self.integer(item)
        if item != "stride" or self.peek()[1] != "@":
            return value, None
        self.take("@")
        kind, axis, start = self.take()
        if kind != "name" or axis not in THREAD_AXES:
            raise self.error(
                f"unknown thread axis {axis!r} (expected one of {', '.join(THREAD_AXES)})", start
            )
        return value, axis

    def iters(self, default_row_major: bool) -> tuple[Iter, ...]:
        extents, _ = self.group("extent")
        if self.peek()[1] != ":":
            if not default_row_major:
                raise self.error("replication needs strides over a thread axis "
                                 "(extent:stride@axis)")
            return _row_major_iters([e for e, _ in extents])
        self.take(":")
        strides, start = self.group("stride")
        if len(strides) != len(extents):
            raise self.error(
                f"{len(extents)} extents but {len(strides)} strides", start
            )
        return tuple(Iter(e, s, axis) for (e, _), (s, axis) in zip(extents, strides, strict=True))
