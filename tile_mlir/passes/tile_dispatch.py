"""tile-dispatch: choose a lowering variant for every tile op and record it on the op.

For each op, every registered variant's predicate answers yes or why not; the
first yes by priority wins and is written to the op as `variant = "<name>"`.
An op that already names a variant (forced by the user) gets that one, or an
error with its reason. The IR must have passed tile-verify (a requirement the
pipeline adds when it is missing). When no variant applies, one error at the op lists
every variant and its reason. With `explain` (tile-opt --tile-explain) each
decision is also reported as a remark at the op.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from tile_mlir import lowering
from tile_mlir.lowering.support.analysis import OpInfo, describe
from tile_mlir.passes import TilePass, op_error, tile_ops


def _subject(info: OpInfo) -> str:
    attrs = info.op.operation.attributes
    detail = attrs.get("op") or attrs.get("kind")
    what = f" {ir.StringAttr(detail).value}" if detail is not None else ""
    return f"{info.name}{what} at scope {info.scope}"


def dispatch(info: OpInfo, explain: TilePass | None = None) -> lowering.Variant | None:
    """Choose and record the op's variant; report an error (and return None) if none applies."""
    forced_attr = info.attr("variant")
    forced = ir.StringAttr(forced_attr).value if forced_attr is not None else None
    decision = lowering.decide(info, forced)
    if explain is not None:
        choice = decision.chosen.name if decision.chosen else "none"
        how = " (forced)" if forced else ""
        explain.remark(f"{_subject(info)}: variant {choice}{how}\n{decision.explain()}",
                       info.location)
    if decision.chosen is None:
        if forced:
            reason = decision.candidates[0][1][1] if decision.candidates else "not registered"
            op_error(info.op, f"cannot use the forced variant '{forced}': {reason}")
        else:
            op_error(info.op, f"has no lowering variant that applies:\n{decision.explain()}")
        return None
    info.op.operation.attributes["variant"] = ir.StringAttr.get(decision.chosen.name)
    return decision.chosen


@dataclass(frozen=True)
class Pass(TilePass):
    NAME = "tile-dispatch"
    SUMMARY = "choose a lowering variant for each tile op"

    REQUIRES = ("tile-verify",)

    explain: bool = False

    def run(self, root: ir.Operation) -> bool:
        ok = True
        for op in tile_ops(root):
            if dispatch(describe(op), self if self.explain else None) is None:
                ok = False
        return ok
