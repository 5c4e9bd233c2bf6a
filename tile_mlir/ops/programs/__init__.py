"""The library's kernel programs: one module per kernel shape, each a tile program written
with tile_mlir.lang (a `tl.kernel`) and the Specialization it makes of an MLIR-free,
hashable signature of the library's.

- elementwise.py: one registry row over coalesced strided views (every elementwise op,
  the activations, the gated ops, dropout and the position encodings);
- reduction.py: row and column reductions of strided views, and the passes over their
  partials;
- rope.py: RoPE's rotation of query and key by a cos/sin cache row per token;
- lang.py: LangProgram, a tl kernel and its specialization behind this protocol.

The spine (plan.py, kernels.py) sees a program only through `KernelProgram`: the cache
request (a string computed without MLIR: the kernel cache answers from it), the IR
text when the kernel must be compiled, the kernel's name, its threads per CTA and what
each of its arguments is.
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
        the signature (the compiler's fingerprint covers the programs' code)."""

    def ir(self) -> str:
        """The kernel's tile IR (text)."""

    def params(self) -> tuple[str, ...]:
        """Per kernel argument, what the launch passes: "ptr" (a device pointer) or a
        scalar's dtype name (i32, i64, f32, f64, bool)."""
