"""tile-target: what the IR asks of the attached target, checked before LLVM sees it.

Runs after nvvm-attach-target (in pipelines/gpu-to-nvvm.pipeline). A gpu.module
whose target lacks an instruction the lowering emitted would make LLVM abort the
process ("Cannot select: intrinsic ...") or ptxas reject the PTX; this pass reports
it at the tile op the instruction came from instead. Checked: the fp8 conversions
(cvt ... e4m3x2 / e5m2x2), which need sm_90, or sm_89 with PTX 8.1 (features=+ptx81),
as LLVM's NVPTX backend decides; and the posts of a reduction across a cluster's CTAs
(support/mailbox.py's st.async, inline PTX), which need PTX 8.1. And one thing it
mends rather than refuses: LLVM selects the L2 prefetch (tile.prefetch's
prefetch.global.L2) only for sm_90 and newer with PTX 8.0 or newer, and a prefetch is a
hint, so on other targets the pass removes them (the kernel computes the same). And a
second: an arith.truncf that names its rounding mode (compute.convert's integer -> f32
-> 16-bit float names to_nearest_even, so that canonicalize keeps the two roundings)
becomes LLVM's constrained fptrunc, which the NVPTX backend cannot select to bf16 below
sm_90 ("unsupported library call operation", an abort); there the pass drops the mode,
which was the plain truncf's own (round to nearest even), after the last canonicalize.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith

from tile_mlir.lowering.support.mailbox import POST
from tile_mlir.passes import TilePass, tile_ops
from tile_mlir.runtime.binary import parse_chip

FP8_CONVERSIONS = ("nvvm.convert.f32x2.to.f8x2", "nvvm.convert.f8x2.to.f16x2")
POSTS_PTX = 81
"""The PTX version (x10) of st.async, the posts of a cluster's mailboxes."""
PREFETCH = "nvvm.prefetch"
NEAREST_EVEN = int(arith.RoundingMode.to_nearest_even)
"""arith.truncf's roundingmode attribute for to_nearest_even (the enum's number)."""
_NVVM_TARGET = re.compile(
    r'#nvvm\.target<.*?chip = "(?P<chip>[^"]*)"(?:.*?features = "(?P<f>[^"]*)")?')


def sm_number(chip: str) -> int:
    """90 for sm_90 or sm_90a (runtime.binary.parse_chip's); 0 for a name that is no chip."""
    try:
        major, minor, _ = parse_chip(chip)
    except ValueError:
        return 0
    return 10 * major + minor


def ptx_version(features: str) -> int:
    """The PTX version (x10) a target's features ask for (0: none, LLVM's least)."""
    return max((int(v) for v in re.findall(r"\+ptx(\d+)", features)), default=0)


def converts_fp8(chip: str, features: str) -> bool:
    """Whether a target has the fp8 conversions: sm_90 and newer, or sm_89 with PTX 8.1."""
    sm = sm_number(chip)
    return sm >= 90 or (sm == 89 and ptx_version(features) >= 81)


def prefetches(chip: str, features: str) -> bool:
    """Whether LLVM selects nvvm.prefetch's L2 prefetch for a target: sm_90 and newer, with
    PTX 8.0 or newer (LLVM's default for sm_90, with no +ptx feature, is 7.8)."""
    return sm_number(chip) >= 90 and ptx_version(features) >= 80


def named_truncf(chip: str) -> bool:
    """Whether LLVM selects a truncf with a named rounding mode (a constrained fptrunc) to
    bf16 for a chip: sm_90 and newer (sm_70 to sm_89 abort)."""
    return sm_number(chip) >= 90


def plain_truncf(root: ir.Operation) -> None:
    """Drop the named to_nearest_even of every arith.truncf under `root` (the plain
    truncf's own rounding): for targets that cannot take the named form (named_truncf),
    and for the test tier's host emulator, whose arith-expand cannot either."""
    for op in tile_ops(root, ("arith.truncf",)):
        attributes = op.operation.attributes
        if "roundingmode" in attributes and isinstance(
                mode := attributes["roundingmode"], ir.IntegerAttr) and \
                ir.IntegerAttr(mode).value == NEAREST_EVEN:
            del attributes["roundingmode"]


def _posts(gmod: ir.OpView) -> list[ir.OpView]:
    return [op for op in tile_ops(gmod.operation, ("llvm.inline_asm",))
            if ir.StringAttr(op.operation.attributes["asm_string"]).value.startswith(POST)]


@dataclass(frozen=True)
class Pass(TilePass):
    NAME = "tile-target"
    SUMMARY = ("check the lowered IR against each gpu.module's target (fp8 needs sm_89+, "
               "cluster posts PTX 8.1; L2 prefetches, hints, and truncf's named "
               "to_nearest_even dropped before sm_90)")

    def run(self, root: ir.Operation) -> bool:
        ok = True
        for gmod in tile_ops(root, ("gpu.module",)):
            targets = gmod.operation.attributes.get("targets")
            m = _NVVM_TARGET.search(str(targets)) if targets is not None else None
            if m is None:
                continue
            chip, features = m["chip"], m["f"] or ""
            target = f"{chip} ({features or 'default features'})"
            # one error per module and check, at the tile op the first instruction lowers
            found = [] if converts_fp8(chip, features) else tile_ops(gmod.operation,
                                                                      FP8_CONVERSIONS)
            if found:
                found[0].operation.location.emit_error(
                    f"fp8 conversions need sm_90, or sm_89 with features=+ptx81; the target "
                    f"is {target}")
                ok = False
            if not prefetches(chip, features):
                for op in tile_ops(gmod.operation, (PREFETCH,)):
                    op.operation.erase()
            if not named_truncf(chip):
                plain_truncf(gmod.operation)
            posts = _posts(gmod) if ptx_version(features) < POSTS_PTX else []
            if posts:
                posts[0].operation.location.emit_error(
                    f"a reduction across a cluster's CTAs posts its partials with st.async, "
                    f"which needs PTX 8.1 (features=+ptx81 or newer); the target is {target}")
                ok = False
        return ok
