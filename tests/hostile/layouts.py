"""Layout notation (tile_mlir/layout.py) from its grammar, valid and broken.

    layout  := part (',' part)*        part := 'S[' iters ']' | 'R[' iters ']' | 'O[' int ']'
    iters   := group (':' group)?      group := elem | '(' elem (',' elem)* ','? ')'
    elem    := int ('@' axis)?         axis := laneid | warpid | wgid | tid

`layout_text` draws a layout from the grammar with hostile leaves (zero,
negative and huge extents and strides, unknown axes, repeated parts) and,
now and then, breaks its text (a character dropped, doubled or replaced).
"""

from __future__ import annotations

import random

AXES = ("laneid", "warpid", "wgid", "tid")
ODD_AXES = ("lane", "LANEID", "warp", "blockid", "x", "")
INTS = ("0", "1", "2", "4", "8", "32", "33", "64", "-1", "-32", "1024", "1048576", "1099511627776",
        "18446744073709551616", "99999999999999999999999999", "007", "+3")
JUNK = ("", " ", ",", "[", "]", "(", ")", ":", "@", "S", "R", "O", "\\22", "\\\\", "\\00", "\\",
        "é", "\u2028", "\t", "#", "1e3", "0x10", "S[]", "S[()]")


def _int(rng: random.Random, small: bool) -> str:
    if small or rng.random() < 0.6:
        return rng.choice(("1", "2", "4", "8", "16", "32", "3", "5"))
    return rng.choice(INTS)


def _elem(rng: random.Random, stride: bool) -> str:
    value = _int(rng, small=rng.random() < 0.7)
    if stride and rng.random() < 0.35:
        axis = rng.choice(AXES) if rng.random() < 0.85 else rng.choice(ODD_AXES)
        return f"{value}@{axis}"
    return value


def _group(rng: random.Random, count: int, stride: bool) -> str:
    items = [_elem(rng, stride) for _ in range(count)]
    if count == 1 and rng.random() < 0.7:
        return items[0]
    trailing = "," if rng.random() < 0.05 else ""
    return f"({', '.join(items)}{trailing})"


def _iters(rng: random.Random, rank: int, strides: bool) -> str:
    extents = _group(rng, rank, stride=False)
    if not strides:
        return extents
    count = rank if rng.random() < 0.9 else max(rank + rng.choice((-1, 1)), 1)
    return f"{extents}:{_group(rng, count, stride=True)}"


def grammar_layout(rng: random.Random) -> str:
    """A layout drawn from the grammar: mostly well formed, with hostile leaves."""
    rank = rng.choice((1, 1, 2, 2, 3, 4))
    parts = [f"S[{_iters(rng, rank, rng.random() < 0.6)}]"]
    if rng.random() < 0.25:
        parts.append(f"R[{_iters(rng, rng.choice((1, 2)), rng.random() < 0.9)}]")
    if rng.random() < 0.2:
        parts.append(f"O[{_int(rng, small=False)}]")
    if rng.random() < 0.05:
        parts.append(rng.choice(parts))  # a part given twice
    if rng.random() < 0.1:
        rng.shuffle(parts)
    return ", ".join(parts)


def break_text(rng: random.Random, text: str) -> str:
    """Drop, double or replace one character, or insert junk."""
    if not text:
        return rng.choice(JUNK)
    i = rng.randrange(len(text))
    how = rng.randrange(4)
    if how == 0:
        return text[:i] + text[i + 1:]
    if how == 1:
        return text[:i] + text[i] + text[i:]
    if how == 2:
        return text[:i] + rng.choice(JUNK) + text[i + 1:]
    return text[:i] + rng.choice(JUNK) + text[i:]


def layout_text(rng: random.Random) -> str:
    text = grammar_layout(rng)
    while rng.random() < 0.3:
        text = break_text(rng, text)
    return text


def _tuple(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"({', '.join(items)})"


def shared_layout(rng: random.Random, shape: list[int]) -> str:
    """A valid memory layout of `shape`: row- or column-major, padded, offset."""
    strides, running = [0] * len(shape), 1
    order = list(range(len(shape)))[::-1]
    if rng.random() < 0.3:
        rng.shuffle(order)
    for dim in order:
        strides[dim] = running
        running *= shape[dim] + (rng.choice((0, 1, 4)) if rng.random() < 0.3 else 0)
    text = f"S[{_tuple([str(e) for e in shape])}:{_tuple([str(s) for s in strides])}]"
    if rng.random() < 0.3:
        text += f", O[{rng.choice((0, 1, 4, 16, 1000))}]"
    return text


def register_layout(rng: random.Random, rows: int, cols: int) -> str:
    """A valid warp register layout of a (rows, cols) tile: lanes over one dimension
    (rows must then be 32), registers over the other, maybe replicated over warps."""
    if rng.random() < 0.5:
        text = f"S[({rows}, {cols}):(1@laneid, 1)]"
    else:
        text = f"S[({rows}, {cols}):({cols}, 1)]" if rows != 32 else \
            f"S[({rows}, {cols}):(1@laneid, {rng.choice((1, 2))})]"
    if rng.random() < 0.2:
        text += f", R[{rng.choice((2, 4))}:1@warpid]"
    if rng.random() < 0.2:
        text += f", O[{rng.choice((1, 8))}]"
    return text


def layout_shape(text: str) -> list[str] | None:
    """The extents of a layout's S part, when it is simple enough to read here."""
    start = text.find("S[")
    if start < 0:
        return None
    body = text[start + 2:].split("]", maxsplit=1)[0].split(":", maxsplit=1)[0].strip().strip("()")
    extents = [e.strip() for e in body.split(",") if e.strip()]
    return extents if extents and all(e.lstrip("-").isdigit() for e in extents) else None
