"""A tile program written with tile_mlir.lang, behind programs.KernelProgram: the one way
the library's kernels are made. Imports no MLIR (the IR is built on first use).

A library kernel is a `tl.kernel` function plus the `Specialization` its program makes
from the library's own signature (the tensors' dtypes, dynamic sizes, stride classes and
offsets, the scalars, the constexprs, the block and the index width), with no arrays to
specialize on: the library chose all that already. Such kernels take `**operands` where
their parameters vary with the signature (tile_mlir.lang's open kernels).

`LangProgram(kernel, spec, summary)` is what the spine sees: the request is the kernel's
cache request for the specialization (its function, its file's hash, the
specialization: no MLIR needed), the IR the kernel's printed build (after the summary,
a comment line saying what the library made it for), and the arguments the
specialization's roles, in order. A kernel that runs in clusters needs nothing more of the
spine: its `.reqnctapercluster` makes a plain cuLaunchKernel launch clusters, on a grid the
caller makes whole clusters (`cluster` says how many CTAs each has).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cached_property
from typing import Any

from tile_mlir.lang.kernel import KernelFunction
from tile_mlir.lang.spec import ScalarSpec, Specialization, TensorSpec


class LangProgram:
    """A tl kernel and its specialization, as the spine runs them (programs.KernelProgram)."""

    def __init__(self, kernel: KernelFunction, spec: Specialization, summary: str = ""):
        if spec.kernel != kernel.info.qualname:
            raise ValueError(f"{spec!r} specializes {spec.kernel}, not {kernel.info.qualname}")
        self.kernel = kernel
        self.spec = spec
        self.summary = summary  # the IR's first line, a comment: what the kernel is for

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec!r}>"

    @property
    def name(self) -> str:
        return self.kernel.name

    @property
    def threads(self) -> int:
        return math.prod(self.spec.block)

    @property
    def cluster(self) -> int:
        """CTAs per thread block cluster (1: the kernel does not run in clusters)."""
        return math.prod(self.spec.cluster) if self.spec.cluster else 1

    def request(self) -> str:
        return self.kernel.request(self.spec)

    @cached_property
    def _ir(self) -> str:
        text = self.kernel.ir(self.spec)
        return f"// {self.summary}\n{text}" if self.summary else text

    def ir(self) -> str:
        return self._ir

    @cached_property
    def _params(self) -> tuple[str, ...]:
        index = f"i{self.spec.index_bits}"
        kinds = []
        for role in self.spec.roles:
            if role.kind == "array":
                kinds.append("ptr")
            elif role.kind == "scalar":
                kinds.append(self.spec.params[role.param].dtype)
            else:  # a size, a stride or an offset: an index-width number
                kinds.append(index)
        return tuple(kinds)

    def params(self) -> tuple[str, ...]:
        return self._params


def specialization(kernel: KernelFunction, params: Sequence[TensorSpec | ScalarSpec], *,
                   constexprs: Sequence[tuple[str, Any]] = (), threads: int,
                   index_bits: int, overlaps: Sequence[tuple[str, str]] = ()
                   ) -> Specialization:
    """The Specialization of `kernel` that a library program chose: `params` in the order
    of the kernel's arguments; `overlaps`, the pairs of arrays that may share memory (a
    written one among them loses its noalias promise)."""
    return Specialization(kernel.info.qualname, tuple(params), tuple(constexprs), (),
                          (threads, 1, 1), index_bits, tuple(overlaps))
