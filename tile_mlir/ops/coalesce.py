"""Broadcasting and dimension coalescing (seed 004, section 5.1), on plain tuples.

The operands of an op are broadcast to the output's shape with torch's rules
(shapes aligned on the right, a size-1 dimension stretches); each operand is
then described by its strides over the output's dimensions, 0 where it is
broadcast, so no operand is ever copied to a full-size array. Dimensions are
then coalesced: size-1 dimensions go, and two neighbours merge wherever every
operand steps through them as through one (stride[i] == stride[i+1] *
size[i+1]). What is left is what the kernel indexes:

    same shape        (B, S, D) + (B, S, D)   -> (B*S*D,)        strides (1) (1)
    bias add          (B, S, D) + (1, 1, D)   -> (B*S, D)        strides (D, 1) (0, 1)
    scaling           (B, S, D) + (B, S, 1)   -> (B*S, D)        strides (D, 1) (1, 0)
    attention mask    (B,H,S,S) + (1,1,S,S)   -> (B*H, S*S)      strides (S*S, 1) (0, 1)
    interleaved       (B,H,S,S) + (B,1,1,S)   -> (B, H*S, S)     (H*S*S, S, 1) (S, 0, 1)
    outer product     (M, 1) + (1, N)         -> (M, N)          (1, 0) (0, 1)

Strides are in elements and may be anything an array allows (a transposed or
sliced input keeps its own), so non-contiguous inputs need no copy either.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tile_mlir.contract import divisibility, extent
from tile_mlir.ops.args import fits_32_bits as _fits

Shape = tuple[int, ...]
Strides = tuple[int, ...]


class BroadcastError(ValueError):
    """Shapes that do not broadcast together."""


def broadcast_shapes(shapes: Sequence[Shape], names: Sequence[str] | None = None) -> Shape:
    """torch.broadcast_shapes, with an error that names the arguments."""
    rank = max((len(s) for s in shapes), default=0)
    result = [1] * rank
    owner = [""] * rank
    for n, shape in enumerate(shapes):
        for dim, size in enumerate(shape, start=rank - len(shape)):
            if size == 1 or size == result[dim]:
                continue
            if result[dim] != 1:
                who = names[n] if names else f"operand {n}"
                raise BroadcastError(
                    f"the shape of {who} {tuple(shape)} does not broadcast with "
                    f"{owner[dim] or 'the others'} at dimension {dim - rank} "
                    f"({size} against {result[dim]})")
            result[dim] = size
            owner[dim] = f"{names[n]} {tuple(shape)}" if names else f"operand {n}"
    return tuple(result)


def expand_strides(shape: Shape, strides: Strides, out: Shape) -> Strides:
    """An operand's strides over the output's dimensions: 0 where it is broadcast."""
    pad = len(out) - len(shape)
    expanded = [0] * pad
    for size, stride, target in zip(shape, strides, out[pad:], strict=True):
        expanded.append(stride if size == target else 0)
    return tuple(expanded)


def contiguous_strides(shape: Shape) -> Strides:
    return tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))


@dataclass(frozen=True)
class Coalesced:
    """The view a kernel indexes: sizes, and each operand's strides over them."""

    shape: Shape
    strides: tuple[Strides, ...]  # per operand, output first

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def coalesce(shape: Shape, strides: Sequence[Strides]) -> Coalesced:
    """Drop size-1 dimensions, then merge neighbours that every operand steps through
    as one. A tensor of one element (or none left) becomes a view of shape (1,)."""
    dims = [d for d, size in enumerate(shape) if size != 1]
    sizes = [shape[d] for d in dims]
    steps = [[s[d] for d in dims] for s in strides]
    merged_sizes: list[int] = []
    merged_steps: list[list[int]] = [[] for _ in strides]
    for i, size in enumerate(sizes):
        if merged_sizes and all(
                op[-1] == step[i] * size for op, step in zip(merged_steps, steps, strict=True)):
            merged_sizes[-1] *= size
            for op, step in zip(merged_steps, steps, strict=True):
                op[-1] = step[i]
            continue
        merged_sizes.append(size)
        for op, step in zip(merged_steps, steps, strict=True):
            op.append(step[i])
    if not merged_sizes:
        return Coalesced((1,), tuple((1,) for _ in strides))
    return Coalesced(tuple(merged_sizes), tuple(tuple(op) for op in merged_steps))


def stride_classes(strides: Strides) -> tuple[str, ...]:
    """How a kernel is specialized on an operand's strides: "0" and "1" are built in
    (the innermost stride only may be "1"), any other is "?n", given at launch and
    known to be a multiple of n."""
    classes = []
    last = len(strides) - 1
    for dim, stride in enumerate(strides):
        if stride == 0 or (stride == 1 and dim == last):
            classes.append(str(stride))
        else:
            classes.append(f"?{divisibility(stride)}")
    return tuple(classes)


def fits_32_bits(view: Coalesced, offsets: Sequence[int], chunk: int) -> bool:
    """Whether every index a kernel computes over the view stays below 2^31: the
    furthest element of every operand, and the end of the last piece. A negative stride
    takes 64 bits: 32-bit offsets below the base are widened unsigned where LLVM proves
    their parts non-negative (an address 2^32 elements past the array: found on the H100
    with a reversed CuPy view)."""
    if any(s < 0 for strides in view.strides for s in strides):
        return False
    reaches = [view.numel + chunk]
    for strides, offset in zip(view.strides, offsets, strict=True):
        reaches.append(offset + extent(view.shape, strides) + chunk)
        reaches.extend(abs(s) for s in strides)
    return _fits(reaches)


def merge_run(dims: Sequence[tuple[int, int]]) -> tuple[int, int] | None:
    """(size, stride) of dims (outer first, size-1 dims dropped) that step through memory
    as one run, or None: how the reductions and the row ops fold dims into [A, R, B] and
    [M, N] views."""
    dims = [(size, stride) for size, stride in dims if size != 1]
    if not dims:
        return 1, 0
    size, stride = dims[-1]
    for outer_size, outer_stride in reversed(dims[:-1]):
        if outer_stride != stride * size:
            return None
        size *= outer_size
    return size, stride


BLOCK_ROWS_LIMIT = 4
"""Rows of up to this many chunks are taken whole (blocks); longer ones are cut (rows)."""


def pieces(view: Coalesced, chunk: int) -> tuple[str, int]:
    """The kernel's way to cut the view into CTA pieces, and the static row width it
    is specialized on ("blocks" only): see programs/elementwise.py."""
    if view.rank == 1:
        return "flat", 0
    width = view.shape[-1]
    if width <= BLOCK_ROWS_LIMIT * chunk:
        return "blocks", width
    return "rows", 0


def grid(view: Coalesced, mode: str, piece: Shape) -> int:
    """The number of CTAs: one per piece."""
    if mode == "flat":
        return -(-view.numel // piece[0])
    if mode == "rows":
        return math.prod(view.shape[:-1]) * -(-view.shape[-1] // piece[0])
    return math.prod(view.shape[:-2]) * -(-view.shape[-2] // piece[0])
