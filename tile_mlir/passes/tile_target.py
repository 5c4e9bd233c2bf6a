"""tile-target: what the IR asks of the attached target, checked before LLVM sees it.

Runs after nvvm-attach-target (in pipelines/gpu-to-nvvm.pipeline). A gpu.module
whose target lacks an instruction the lowering emitted would make LLVM abort the
process ("Cannot select: intrinsic ..."); this pass reports it at the tile op the
instruction came from instead. Checked: the fp8 conversions (cvt ... e4m3x2 /
e5m2x2), which need sm_90, or sm_89 with PTX 8.1 (features=+ptx81), as LLVM's
NVPTX backend decides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mlir import ir

from tile_mlir.passes import TilePass, tile_ops

FP8_CONVERSIONS = ("nvvm.convert.f32x2.to.f8x2", "nvvm.convert.f8x2.to.f16x2")
_NVVM_TARGET = re.compile(
    r'#nvvm\.target<.*?chip = "(?P<chip>[^"]*)"(?:.*?features = "(?P<f>[^"]*)")?')


def converts_fp8(chip: str, features: str) -> bool:
    """Whether a target has the fp8 conversions: sm_90 and newer, or sm_89 with PTX 8.1."""
    m = re.fullmatch(r"sm_(\d+)[af]?", chip)
    sm = int(m.group(1)) if m else 0
    ptx = max((int(v) for v in re.findall(r"\+ptx(\d+)", features)), default=0)
    return sm >= 90 or (sm == 89 and ptx >= 81)


@dataclass(frozen=True)
class Pass(TilePass):
    NAME = "tile-target"
    SUMMARY = "check the lowered IR against each gpu.module's target (fp8 needs sm_89+)"

    def run(self, root: ir.Operation) -> bool:
        ok = True
        for gmod in tile_ops(root, ("gpu.module",)):
            targets = gmod.operation.attributes.get("targets")
            m = _NVVM_TARGET.search(str(targets)) if targets is not None else None
            if m is None or converts_fp8(m["chip"], m["f"] or ""):
                continue
            found = tile_ops(gmod.operation, FP8_CONVERSIONS)
            if found:  # one error per module, at the tile op the first conversion lowers
                found[0].operation.location.emit_error(
                    f"fp8 conversions need sm_90, or sm_89 with features=+ptx81; the target "
                    f"is {m['chip']} ({m['f'] or 'default features'})")
                ok = False
        return ok
