"""The contract between the compiler, the runtime and the operator library: the target's
constants and the facts each side promises the other. Imports no MLIR.

The lowering assumes what the runtime checks before a launch (kernel pointers are
aligned to KERNEL_ARG_ALIGN bytes), the operator library passes what the lowering can
use (DIVISIBILITY on integer arguments, index widths under INDEX_LIMIT), and all three
size vector accesses the same way (ACCESS_BYTES, `widest_vector`). One module, so that
"16 bytes" or "32 lanes" is written once.
"""

from __future__ import annotations

from collections.abc import Sequence

WARP = 32
"""Threads of a warp (lanes)."""

WARPGROUP = 128
"""Threads of a warpgroup: four consecutive warps."""

SCOPE_THREADS = {"thread": 1, "warp": WARP, "warpgroup": WARPGROUP}
"""Thread count of the fixed-size execution scopes; `cta` takes the kernel's block size
(and `cluster` the block size times the cluster's CTAs)."""

ACCESS_BYTES = 16
"""The widest single access of a thread: Hopper's ld.global.v4.b32 / st.global.v4.b32."""

KERNEL_ARG_ALIGN = 16
"""Bytes of alignment the lowering assumes of every memref argument of a kernel (the
runtime checks it before each launch; the library passes an aligned base and an element
offset for an array that is not)."""

STORAGE_ALIGN = 16
"""Byte alignment of every buffer the compiler allocates (tile.alloc storage, scratch)."""

DIVISIBILITY = "tile.divisibility"
"""Argument attribute on an integer kernel argument: a number that divides every value
passed for it (Triton's tt.divisibility). Strides passed so let the lowering prove its
vector accesses aligned."""

PIECE = "tile.piece"
"""Attribute on a memref.reinterpret_cast: the view is one piece of a split of its source
into pieces that never overlap, a string "<piece>:<split>" (tile_mlir.lang's aligned(V):
"head:V", "body:V" and "tail:V"; a split at another V cuts elsewhere). The barrier
analysis (lowering/support/sync.py) relies on it."""

DIVISIBILITY_CAP = 32
"""The most divisibility an argument is described with: the widest vector is 32 bytes."""

INDEX_LIMIT = 2**31 - 1
"""Indices below this fit a 32-bit index type: a kernel whose every index stays under it
may compute its indices in 32 bits."""


def extent(shape: Sequence[int], strides: Sequence[int]) -> int:
    """Elements from an array's first element to its last (0 for one element): the
    largest offset its view reaches from its base, whatever the strides' signs."""
    return sum((size - 1) * abs(stride) for size, stride in zip(shape, strides, strict=True)
               if size > 0)


def contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether an array's elements lie row-major with no gaps (size-1 dims' strides
    aside): the identity layout."""
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides), strict=True):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def divisibility(value: int) -> int:
    """The largest power of two dividing `value`, at most DIVISIBILITY_CAP (0: the cap)."""
    if value == 0:
        return DIVISIBILITY_CAP
    return min(abs(value) & -abs(value), DIVISIBILITY_CAP)


def widest_vector(elements: int, *divisors: int) -> int:
    """The widest power-of-two vector of at most `elements` that divides every divisor
    (1 when one of them is odd): the vector width an access may take when runs, extents
    and alignments (in elements) must all be whole multiples of it."""
    vec = max(elements, 1)
    vec = 1 << (vec.bit_length() - 1)  # a power of two
    for d in divisors:
        while vec > 1 and d % vec:
            vec //= 2
    return vec
