"""The library's kernel programs: one module per kernel shape, each a function from an
MLIR-free, hashable signature to the kernel's tile IR.

- elementwise.py: one registry row over coalesced strided views (every elementwise op,
  the activations, the gated ops, dropout and the position encodings);
- reduction.py: row and column reductions of strided views, and the passes over their
  partials;
- rope.py: RoPE's rotation of query and key by a cos/sin cache row per token.

The spine (plan.py, kernels.py) sees a program only through `KernelProgram`: the cache
request (a string computed without MLIR: the kernel cache answers from it), the IR
text when the kernel must be compiled, the kernel's name, its threads per CTA and what
each of its arguments is. The front end (tile_mlir.lang) can replace a text writer
with a program of its own behind the same protocol.
"""

from __future__ import annotations

from typing import Protocol


class KernelProgram(Protocol):
    """What the spine needs of a kernel program."""

    @property
    def name(self) -> str:
        """The kernel's symbol."""

    @property
    def threads(self) -> int:
        """Threads per CTA (the kernel's known block size)."""

    def request(self) -> str:
        """The kernel cache's request for this kernel, computed without MLIR: a function of
        the signature (the compiler's fingerprint covers the writers' code)."""

    def ir(self) -> str:
        """The kernel's tile IR (text)."""

    def params(self) -> tuple[str, ...]:
        """Per kernel argument, what the launch passes: "ptr" (a device pointer) or a
        scalar's dtype name (i32, i64, f32, f64, bool)."""
