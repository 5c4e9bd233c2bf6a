"""What the runtime needs to know about a compiled kernel, as plain data.

Made by the compiler from the kernel's signature, stored beside the cubin as
JSON, and read back by a runtime that imports no MLIR.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Param:
    """One kernel parameter: a memref (passed as a bare pointer) or a scalar."""

    name: str
    kind: str  # "memref" or "scalar"
    dtype: str  # a tile_mlir.dtypes name; scalars of type index are "i64"
    shape: tuple[int, ...] = ()
    writes: bool = False  # the kernel may write the memref
    align: int = 1  # bytes the pointer must be aligned to

    @property
    def is_memref(self) -> bool:
        return self.kind == "memref"


@dataclass(frozen=True)
class KernelSpec:
    name: str  # the gpu.func symbol: the kernel's entry name in the cubin
    module: str  # the gpu.module symbol it lives in
    params: tuple[Param, ...]
    block: tuple[int, int, int] | None = None  # known_block_size
    grid: tuple[int, int, int] | None = None  # known_grid_size

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(data: dict[str, Any]) -> KernelSpec:
        def triple(value: list[int] | None) -> tuple[int, int, int] | None:
            return (value[0], value[1], value[2]) if value else None

        return KernelSpec(
            name=data["name"],
            module=data["module"],
            params=tuple(Param(**{**p, "shape": tuple(p["shape"])}) for p in data["params"]),
            block=triple(data.get("block")),
            grid=triple(data.get("grid")),
        )

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)
