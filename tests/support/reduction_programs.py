"""tile.reduce programs for both tiers: odd lengths and thread counts, every kind,
several axes, accum, narrow floats, every scope and variant.

Each program's kernel `k` takes the source tensor (and, with accum, the old
destination values) and writes the destination, its last parameter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tile_mlir import op_table
from tile_mlir.dtypes import DTYPES


@dataclass(frozen=True)
class Reduce:
    kind: str
    shape: tuple[int, ...]
    axes: tuple[int, ...] = (-1,)
    threads: int = 128
    scope: str = "cta"
    dtype: str = "f32"
    out_dtype: str = ""
    memory: str = "shared"  # where the source tile sits: shared, global or registers
    into: str = ""  # "global": a register source reduced straight into the output
    keepdims: bool = False
    accum: bool = False
    layout: str = ""  # register layouts: "src|dst"
    nan: bool = False  # sprinkle NaNs into the input
    scale: float | None = None  # tile.reduce's scale (1/L: a mean)
    name: str = field(default="")
    block: tuple[int, int, int] | None = None  # the CTA's shape (default: threads x 1 x 1)

    @property
    def id(self) -> str:
        dims = "x".join(map(str, self.shape))
        axes = ",".join(map(str, self.axes))
        extra = "-accum" if self.accum else ""
        extra += "-keep" if self.keepdims else ""
        extra += "-nan" if self.nan else ""
        extra += "-scaled" if self.scale is not None else ""
        extra += f"-into-{self.into}" if self.into else ""
        threads = "x".join(map(str, self.block)) if self.block and self.block[1:] != (1, 1) \
            else str(self.threads)
        return (self.name or f"{self.kind}-{self.dtype}-{dims}-ax{axes}-{self.scope}"
                f"{threads}-{self.memory}{extra}")

    @property
    def dst_dtype(self) -> str:
        return self.out_dtype or self.dtype

    @property
    def normalized_axes(self) -> tuple[int, ...]:
        return tuple(sorted(a % len(self.shape) for a in self.axes))

    @property
    def out_shape(self) -> tuple[int, ...]:
        axes = self.normalized_axes
        if self.keepdims:
            return tuple(1 if i in axes else d for i, d in enumerate(self.shape))
        kept = tuple(d for i, d in enumerate(self.shape) if i not in axes)
        return kept or (1,)

    def _types(self) -> tuple[str, str]:
        src = f"{'x'.join(map(str, self.shape))}x{DTYPES[self.dtype].mlir}"
        dst = f"{'x'.join(map(str, self.out_shape))}x{DTYPES[self.dst_dtype].mlir}"
        return src, dst

    def mlir(self) -> str:
        src, dst = self._types()
        space = {"shared": "#gpu.address_space<workgroup>",
                 "registers": "#gpu.address_space<private>"}.get(self.memory)
        axes = ", ".join(map(str, self.axes))
        attrs = f'kind = "{self.kind}", axes = array<i64: {axes}>, scope = "{self.scope}"'
        attrs += ", accum = true" if self.accum else ""
        if self.scale is not None:  # in hex: exact, and MLIR's syntax takes no 1e-06
            attrs += f", scale = 0x{np.float64(self.scale).view(np.uint64):016X} : f64"
        if space is None:
            body = (f'    "tile.reduce"(%out, %a) {{{attrs}}} : (memref<{dst}>, memref<{src}>) -> ()\n')
        else:
            body = self._staged(src, dst, space, attrs)
        x, y, z = self.block or (self.threads, 1, 1)
        return f"""gpu.module @kernels {{
  gpu.func @k(%a: memref<{src}>, %out: memref<{dst}>) kernel attributes {{known_block_size = array<i32: {x}, {y}, {z}>, known_grid_size = array<i32: 1, 1, 1>}} {{
{body}    gpu.return
  }}
}}
"""

    def _staged(self, src: str, dst: str, space: str, attrs: str) -> str:
        """Copy the source (and dst, under accum) into shared or register tiles, reduce
        there, copy the result out."""
        if self.layout:
            src_layout, dst_layout = self.layout.split("|")
        else:
            src_layout = "S[(" + ", ".join(map(str, self.shape)) + ",)]"
            dst_layout = "S[(" + ", ".join(map(str, self.out_shape)) + ",)]"
        ts, td = f"memref<{src}, {space}>", f"memref<{dst}, {space}>"
        scope = self.scope
        lines = [
            f'    %s = "tile.alloc"() {{layout = #tile.layout<"{src_layout}">}} : () -> {ts}',
            f'    "tile.copy"(%s, %a) {{scope = "{scope}"}} : ({ts}, memref<{src}>) -> ()',
        ]
        if self.into == "global":
            lines.append(f'    "tile.reduce"(%out, %s) {{{attrs}}} : (memref<{dst}>, {ts}) -> ()')
            return "".join(line + "\n" for line in lines)
        lines.insert(1, f'    %d = "tile.alloc"() {{layout = #tile.layout<"{dst_layout}">}} '
                        f': () -> {td}')
        if self.accum:
            lines.append(f'    "tile.copy"(%d, %out) {{scope = "{scope}"}} : ({td}, memref<{dst}>) -> ()')
        lines += [
            f'    "tile.reduce"(%d, %s) {{{attrs}}} : ({td}, {ts}) -> ()',
            f'    "tile.copy"(%out, %d) {{scope = "{scope}"}} : (memref<{dst}>, {td}) -> ()',
        ]
        return "".join(line + "\n" for line in lines)

    # ---------------------------------------------------------------- data

    def inputs(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(source, initial destination)."""
        low, high = (0.5, 1.5) if self.kind == "prod" else (-4.0, 4.0)
        src = rng.uniform(low, high, self.shape)
        if self.nan:
            src.flat[rng.choice(src.size, max(1, src.size // 50), replace=False)] = np.nan
        dst = rng.uniform(-4.0, 4.0, self.out_shape)
        return (src.astype(DTYPES[self.dtype].np_dtype()),
                dst.astype(DTYPES[self.dst_dtype].np_dtype()))

    def reference(self, src: np.ndarray, old: np.ndarray) -> np.ndarray:
        kind = op_table.REDUCE_KINDS[self.kind]
        result = kind.ref(src.astype(np.float64), axis=self.normalized_axes, keepdims=True)
        result = result.reshape(self.out_shape)
        if self.scale is not None:
            result = result * self.scale
        if self.accum:
            combine = {"sum": np.add, "prod": np.multiply, "max": np.maximum,
                       "min": np.minimum}[self.kind]
            result = combine(old.astype(np.float64), result)
        return np.asarray(result)

    def tolerance(self, src: np.ndarray) -> np.ndarray | float:
        """Allowed |error| per output: exact for max/min; for sums and products the
        accumulation order differs from NumPy's, so a bound in the number of terms."""
        if self.kind in ("max", "min"):
            return 0.0
        length = math.prod(self.shape[a] for a in self.normalized_axes)
        f32 = float(np.finfo(np.float32).eps)
        scale = np.abs(src.astype(np.float64)).sum(axis=self.normalized_axes)
        if self.kind == "prod":
            scale = np.abs(np.prod(src.astype(np.float64), axis=self.normalized_axes))
        bound = np.asarray(2 * length * f32 * scale).reshape(self.out_shape)
        if self.accum:
            bound = bound + 2 * f32 * 4
        out = DTYPES[self.dst_dtype]
        if out.bits < 32:  # one rounding to the narrow type at the end
            ulp = 2.0 ** -7 if out.name == "bf16" else 2.0 ** -10
            bound = bound + ulp * np.abs(self.reference(src, np.zeros(self.out_shape)))
        return bound


REDUCTIONS: list[Reduce] = [
    # seed 001's program is examples/seed_001_shared_sum.mlir (tested on its own)
    Reduce("sum", (48,), threads=48, name="sum-48-threads"),  # TileLang's dropped lanes
    Reduce("sum", (5, 37), threads=96),
    Reduce("sum", (3, 1000), threads=160),
    Reduce("sum", (64, 3), threads=128),  # rows shorter than a warp
    Reduce("max", (7, 333), threads=64, nan=True),
    Reduce("min", (2, 4097), threads=256, nan=True, memory="global"),
    Reduce("prod", (16, 20), threads=32, scope="warp"),
    Reduce("sum", (4, 6, 10), axes=(0, 2), threads=64),
    Reduce("max", (9, 130), axes=(0, 1), threads=128, memory="global"),
    Reduce("sum", (4, 50), threads=128, keepdims=True),
    Reduce("sum", (6, 77), threads=128, accum=True),
    Reduce("sum", (6, 50), threads=64, scale=1 / 50, memory="global", dtype="f16"),  # a mean
    Reduce("sum", (40, 24), axes=(0,), threads=64, scale=0.025, memory="global"),
    Reduce("sum", (8, 512), threads=256, dtype="bf16", memory="global"),
    Reduce("sum", (8, 300), threads=128, dtype="f16", out_dtype="f32"),
    Reduce("max", (4, 1000), threads=256, dtype="bf16"),
    Reduce("sum", (1, 5000), threads=256, memory="global"),  # one row split over 8 warps
    Reduce("sum", (12, 40), threads=128, scope="warpgroup"),
    Reduce("sum", (3, 17), threads=1, scope="thread"),
    # the innermost axis kept: reduction/columns (a thread per output vector)
    Reduce("sum", (1000, 37), axes=(0,), threads=128, memory="global"),
    Reduce("max", (300, 64), axes=(0,), threads=256, memory="global", nan=True),
    Reduce("sum", (7, 5, 48), axes=(0, 1), threads=64),
    Reduce("sum", (64, 96), axes=(0,), threads=128, dtype="bf16", memory="global"),
    Reduce("min", (33, 20), axes=(0,), threads=64, memory="global", keepdims=True),
    Reduce("sum", (50, 128), axes=(0,), threads=32, scope="warp", memory="global", accum=True),
    # registers: reduction/local
    Reduce("max", (32, 8), axes=(1,), threads=32, scope="warp", memory="registers",
           layout="S[(32, 8):(1@laneid, 1)]|S[32:1@laneid]"),
    Reduce("sum", (32, 8), axes=(0,), threads=32, scope="warp", memory="registers",
           layout="S[(32, 8):(1@laneid, 1)]|S[8], R[32:1@laneid]"),
    Reduce("sum", (4, 8, 6), axes=(1, 2), threads=32, scope="warp", memory="registers",
           layout="S[(4, 8, 6):(8@laneid, 1@laneid, 1)]|S[4:8@laneid], R[8:1@laneid]"),
    # registers across warps: lanes butterfly, warps meet in shared memory (one barrier)
    Reduce("max", (256, 4), axes=(0, 1), threads=256, memory="registers", keepdims=True,
           nan=True, layout="S[(256, 4):(1@tid, 1)]|S[(1, 1)], R[256:1@tid]"),
    Reduce("sum", (2, 4, 32, 3), axes=(1, 2, 3), threads=256, memory="registers",
           layout="S[(2, 4, 32, 3):(4@warpid, 1@warpid, 1@laneid, 1)]|"
                  "S[2:4@warpid], R[(4, 32):(1@warpid, 1@laneid)]"),
    Reduce("sum", (8, 32, 5), axes=(0,), threads=256, memory="registers",
           layout="S[(8, 32, 5):(1@warpid, 1@laneid, 1)]|S[(32, 5):(1@laneid, 1)], R[8:1@warpid]"),
    Reduce("min", (96, 3), axes=(0, 1), threads=96, memory="registers", keepdims=True,
           layout="S[(96, 3):(1@tid, 1)]|S[(1, 1)], R[96:1@tid]"),
    Reduce("sum", (48, 4), axes=(0, 1), threads=48, memory="registers", keepdims=True,
           layout="S[(48, 4):(1@tid, 1)]|S[(1, 1)], R[48:1@tid]"),  # a partial last warp
    Reduce("sum", (2, 24), axes=(0, 1), threads=48, memory="registers",
           layout="S[(2, 24):(1@tid, 2@tid)]|S[1], R[(2, 24):(1@tid, 2@tid)]"),
    Reduce("max", (3, 32, 2), axes=(0, 1, 2), threads=96, memory="registers", into="global",
           layout="S[(3, 32, 2):(1@warpid, 1@laneid, 1)]|"),
    Reduce("sum", (4, 128), axes=(1,), threads=128, memory="registers", into="global",
           layout="S[(4, 128):(1, 1@tid)]|", accum=True),
    Reduce("max", (2, 4, 32, 2), axes=(0, 1, 2, 3), threads=256, memory="registers",
           layout="S[(2, 4, 32, 2):(1@wgid, 1@warpid, 1@laneid, 1)]|"
                  "S[1], R[(2, 4, 32):(1@wgid, 1@warpid, 1@laneid)]"),
    Reduce("sum", (128, 2), axes=(0,), threads=256, scope="warpgroup", memory="registers",
           dtype="bf16", layout="S[(128, 2):(1@tid, 1)]|S[2], R[128:1@tid]"),
]
