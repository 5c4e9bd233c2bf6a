"""Launching a kernel on arrays: the general path, and the prepared launch of a seen call.
Imports no MLIR.

The general path checks the arguments, specializes the kernel (spec.py), gets
it compiled (through the kernel cache) and loaded, copies NumPy arrays in,
launches on the caller's stream and copies written NumPy arrays out. A call
on torch tensors, CuPy arrays and numbers is also summarized by a key read
off the arguments with plain attribute reads (per array its type, dtype,
shape, strides, device and pointer alignment; per number its type; the
constexprs given); everything the general path derives is a function of that
key, so it records a `Prepared` launch under it, and a later call with the
same key only fills its pointers and numbers into the argument list, checks
that no array it promised `noalias` for overlaps a written one, and launches.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tile_mlir.dtypes import DTYPES
from tile_mlir.lang.arrays import ArrayDesc, Described
from tile_mlir.lang.errors import ArgumentError
from tile_mlir.lang.spec import Bound, byte_range, kernel_values, misalignment

Grid = tuple[int, ...] | Callable[[Mapping[str, Any]], Sequence[int]] | None

_NUMBERS = (int, float, bool)


def fast_key(args: tuple[Any, ...], kwargs: Mapping[str, Any], constants: frozenset[int],
             constexpr_names: frozenset[str]) -> tuple[tuple[Any, ...] | None, list[Any]]:
    """The call's key and its per-argument pointers (or numbers), or (None, []) when an
    argument is of a kind only the general path takes. `constants` are the positions of
    constexpr parameters, whose values (not types) are part of the key."""
    torch = sys.modules.get("torch")
    tensor = torch.Tensor if torch is not None else None
    cupy = sys.modules.get("cupy")
    ndarray = cupy.ndarray if cupy is not None else None
    parts: list[Any] = [len(args)]
    pointers: list[Any] = []
    for i, a in enumerate(args):
        kind = type(a)
        if kind is tensor:
            p = a.data_ptr()
            parts.append((a.dtype, a.shape, a.stride(), p & 15, a.get_device()))
            pointers.append(p)
        elif kind in _NUMBERS:
            parts.append((kind, a) if i in constants else kind)
            pointers.append(a)
        elif kind is ndarray:
            p = a.data.ptr
            parts.append((a.dtype, a.shape, a.strides, p & 15, a.device.id))
            pointers.append(p)
        elif kind is ArrayDesc and a.pointer is not None:
            p = a.pointer
            parts.append((a.dtype, a.shape, a.strides, p & 15, a.device))
            pointers.append(p)
        elif i in constants:
            parts.append((kind, a))
            pointers.append(a)
        else:
            return None, []
    if kwargs:
        if not constexpr_names.issuperset(kwargs):
            return None, []
        parts.append(tuple(kwargs.items()))
    key = tuple(parts)
    try:
        hash(key)  # a constexpr given as a list, say: only the general path takes it
    except TypeError:
        return None, []
    return key, pointers


@dataclass
class Prepared:
    """A launch whose every value but the pointers and numbers is known."""

    kernel: Any  # the runtime Kernel
    template: list[Any]  # the kernel's argument values, pointers and numbers to fill in
    pointers: tuple[tuple[int, int, int], ...]  # (slot, argument position, bytes to subtract)
    numbers: tuple[tuple[int, int], ...]  # (slot, argument position)
    # pairs of arrays that must not overlap: (position, low, high) twice, the byte range
    # relative to each pointer
    disjoint: tuple[tuple[int, int, int, int, int, int], ...]
    grid: tuple[int, int, int] | None  # the kernel's own
    dims: dict[str, Any]  # what a grid callable is given
    stream: Callable[[], int]
    cluster: tuple[int, int, int] | None = None  # the grid must be whole clusters

    def __call__(self, args: tuple[Any, ...], pointers: list[Any], grid: Grid,
                 stream: Any) -> bool:
        """Launch; False (nothing launched) when arrays overlap that the kernel was
        compiled not to expect (the caller takes the general path)."""
        for i, low_i, high_i, j, low_j, high_j in self.disjoint:
            if pointers[i] + low_i < pointers[j] + high_j and \
                    pointers[j] + low_j < pointers[i] + high_i:
                return False
        values = self.template.copy()
        for slot, position, below in self.pointers:
            values[slot] = pointers[position] - below
        if self.numbers:
            for slot, position in self.numbers:
                values[slot] = args[position]
        dims = grid if type(grid) is tuple else resolve_grid(grid, self.grid, self.dims)
        if self.cluster is not None:
            check_clusters(dims, self.cluster)
        if 0 not in dims:
            self.kernel(*values, grid=dims, stream=self.stream() if stream is None else stream)
        return True


def resolve_grid(grid: Grid, known: tuple[int, int, int] | None,
                 dims: Mapping[str, Any]) -> tuple[int, ...]:
    """The launch's grid: given, computed from the bound dims, or the kernel's own."""
    if grid is None:
        if known is None:
            raise ArgumentError("the kernel does not fix its grid: launch it as "
                                "f[grid](...) or f(..., grid=...)")
        return known
    if callable(grid):
        grid = tuple(grid(dims))
    if isinstance(grid, int):
        return (grid,)
    return tuple(grid)


def check_clusters(grid: Sequence[int], cluster: tuple[int, int, int]) -> None:
    """A kernel that runs in clusters launches on whole clusters (ArgumentError if not)."""
    sizes = (*grid, 1, 1)[:3]
    if any(g % c for g, c in zip(sizes, cluster, strict=True)):
        raise ArgumentError(f"the grid {tuple(grid)} is not whole clusters of "
                            f"{'x'.join(map(str, cluster))} CTAs (the kernel's cluster=)")


def prepare(kernel: Any, bound: Bound, positions: Sequence[int], *,
            grid: tuple[int, int, int] | None, dims: dict[str, Any],
            stream: Callable[[], int]) -> Prepared:
    """The prepared launch of a checked call. `positions[n]` is where the n-th
    non-constexpr parameter's value is among the call's arguments."""
    spec = bound.spec
    template = kernel_values(spec, bound.arrays, bound.scalars)
    pointers, numbers = [], []
    for slot, role in enumerate(spec.roles):
        if role.kind == "array":
            d = bound.arrays[role.param]
            pointers.append((slot, positions[role.param],
                             misalignment(d) * DTYPES[d.dtype].bytes))
        elif role.kind == "scalar":
            numbers.append((slot, positions[role.param]))
    return Prepared(kernel, template, tuple(pointers), tuple(numbers),
                    _disjoint(kernel, bound, positions), grid, dims, stream, spec.cluster)


def _disjoint(kernel: Any, bound: Bound, positions: Sequence[int]
              ) -> tuple[tuple[int, int, int, int, int, int], ...]:
    """The pairs of arrays, one of them written, that the kernel promises `noalias` for."""
    spec = bound.spec
    writes = {role.param: param.writes for role, param in
              zip(spec.roles, kernel.spec.params, strict=True) if role.kind == "array"}
    names = [p.name for p in spec.params]
    overlapping = set(spec.overlaps)
    arrays = sorted((n, d) for n, d in bound.arrays.items() if byte_range(d) is not None)
    pairs = []
    for k, (i, a) in enumerate(arrays):
        for j, b in arrays[k + 1:]:
            if (writes[i] or writes[j]) and (names[i], names[j]) not in overlapping:
                pairs.append((positions[i], *_relative(a), positions[j], *_relative(b)))
    return tuple(pairs)


def _relative(d: Described) -> tuple[int, int]:
    found = byte_range(d)
    assert found is not None and d.pointer is not None
    return found[0] - d.pointer, found[1] - d.pointer
