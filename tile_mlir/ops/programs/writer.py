"""The IR text writer the library's kernel programs share: SSA names, memref types, the
kernel's arguments and its module. Pure Python: writing a program imports no MLIR.

(The front end, tile_mlir.lang, will take over from these writers program by program;
the spine only sees programs through the protocol of programs/__init__.py.)
"""

from __future__ import annotations

from dataclasses import dataclass

from tile_mlir.contract import DIVISIBILITY
from tile_mlir.dtypes import DTYPES

DYNAMIC = "?"
MODULE = "ops"
"""The gpu.module every library kernel lives in."""


@dataclass(frozen=True)
class KernelArg:
    """One argument of a kernel: its SSA name, its type and its attributes' text; `kind`
    is "ptr" for a pointer (a memref<1xT>), else the scalar's dtype name."""

    name: str
    type_: str
    attrs: str = ""
    kind: str = "ptr"


class Writer:
    """IR lines with fresh SSA names, and the kernel's arguments as they are made."""

    def __init__(self, index_bits: int):
        self.lines: list[str] = []
        self.count = 0
        self.int = f"i{index_bits}"
        self.args: list[KernelArg] = []

    def op(self, text: str) -> str:
        self.count += 1
        name = f"%v{self.count}"
        self.lines.append(f"      {name} = {text}")
        return name

    def const(self, value: int) -> str:
        return self.op(f"arith.constant {value} : index")

    def index(self, argument: str) -> str:
        return self.op(f"arith.index_cast {argument} : {self.int} to index")

    def int_arg(self, name: str, divisibility: int = 1) -> str:
        """An integer argument (an index-width number: a size, a stride, an offset) as an
        index value; `divisibility` > 1 promises what divides it (tile.divisibility)."""
        attrs = f" {{{DIVISIBILITY} = {divisibility} : i64}}" if divisibility > 1 else ""
        self.args.append(KernelArg(f"%{name}", self.int, attrs, self.int))
        return self.index(f"%{name}")

    def scalar_arg(self, name: str, dtype: str) -> str:
        self.args.append(KernelArg(f"%{name}", DTYPES[dtype].mlir, "", dtype))
        return f"%{name}"

    def pointer_arg(self, name: str, dtype: str, promises: list[str]) -> str:
        attrs = f" {{{', '.join(promises)}}}" if promises else ""
        self.args.append(KernelArg(f"%{name}", memref_type(["1"], dtype, None), attrs))
        return f"%{name}"

    def params(self) -> tuple[str, ...]:
        """What the launch passes for each argument: "ptr" or a scalar's dtype name."""
        return tuple(a.kind for a in self.args)


def memref_type(shape: list[str], dtype: str, strides: list[str] | None, offset: str = "") -> str:
    """memref<...> with the identity layout (strides None) or a strided one."""
    elem = DTYPES[dtype].mlir
    dims = "x".join(shape)
    if strides is None:
        return f"memref<{dims}x{elem}>"
    layout = f"strided<[{', '.join(strides)}]{', offset: ' + offset if offset else ''}>"
    return f"memref<{dims}x{elem}, {layout}>"


def module_text(summary: str, name: str, args: list[KernelArg], lines: list[str], *,
                threads: int, index_bits: int, attributes: str = "") -> str:
    """A library kernel's module: its one-line summary as a comment, the gpu.module (its
    index width in the data layout) and the kernel with its arguments and body lines."""
    params = ",\n        ".join(f"{a.name}: {a.type_}{a.attrs}" for a in args)
    layout = "" if index_bits == 64 else \
        " attributes {dlti.dl_spec = #dlti.dl_spec<#dlti.dl_entry<index, 32 : i32>>}"
    extra = f", {attributes}" if attributes else ""
    body = "\n".join(lines)
    return (f"// {summary}\n"
            "module attributes {gpu.container_module} {\n"
            f"  gpu.module @{MODULE}{layout} {{\n"
            f"    gpu.func @{name}({params}) kernel attributes "
            f"{{known_block_size = array<i32: {threads}, 1, 1>{extra}}} {{\n"
            f"{body}\n      gpu.return\n    }}\n  }}\n}}\n")
