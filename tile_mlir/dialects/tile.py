"""The Python view of the tile dialect: loading, op classes, builders, accessors.

The dialect itself is defined once, in dialect/tile.irdl.mlir; this module
loads it into a Context and gives its ops typed Python classes, as the
generated `mlir.dialects.<name>` modules do for upstream dialects. MLIR finds
this module through the dialect search prefix `tile_mlir.dialects`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, cast

from mlir import ir
from mlir._mlir_libs import _mlir as _cext
from mlir.dialects import irdl

from tile_mlir._resources import dialect_file
from tile_mlir.layout import TileLayout

SCOPES: tuple[str, ...] = ("thread", "warp", "warpgroup", "cta", "cluster")
"""Execution scopes, narrowest first (a cluster: the CTAs of a thread block cluster, sm_90)."""

OP_NAMES: tuple[str, ...] = ("tile.copy", "tile.elementwise", "tile.reduce", "tile.prefetch",
                             "tile.alloc")
WRITERS: tuple[str, ...] = ("tile.copy", "tile.elementwise", "tile.reduce")
"""The tile ops whose first operand is the dst they write (tile.prefetch reads its one
operand; tile.alloc makes a buffer)."""
LOWERED: tuple[str, ...] = (*WRITERS, "tile.prefetch")
"""The tile ops tile-dispatch and tile-lower rewrite (a variant each)."""

def load(context: ir.Context) -> None:
    """Register the tile dialect in `context` (idempotent: loading twice would abort)."""
    _register_python_module()
    if context.is_registered_operation("tile.copy"):
        return
    with context, ir.Location.unknown(context):
        irdl.load_dialects(ir.Module.parse(_dialect_source()))


@lru_cache(maxsize=1)
def _register_python_module() -> None:
    """Let MLIR find this module's op classes when it wraps tile ops (once per process)."""
    _cext.globals.append_dialect_search_prefix("tile_mlir.dialects")


@lru_cache(maxsize=1)
def _dialect_source() -> str:
    return dialect_file().read_text()


# ------------------------------------------------------------------ layouts

_LAYOUT_TEXT = re.compile(r'^#tile\.layout<"((?:[^"\\]|\\.)*)">$')


def layout_attr(layout: TileLayout | str, context: ir.Context | None = None) -> ir.Attribute:
    """`#tile.layout<"...">` for a TileLayout (or its text, validated first)."""
    spec = str(layout if isinstance(layout, TileLayout) else TileLayout.parse(layout))
    return ir.Attribute.parse(f'#tile.layout<"{spec}">', context)


def layout_text(attr: ir.Attribute) -> str:
    """The notation inside a `#tile.layout<"...">` attribute."""
    m = _LAYOUT_TEXT.match(str(attr))
    if not m:
        raise ValueError(f"not a tile layout attribute: {attr}")
    return m.group(1).encode().decode("unicode_escape")


@lru_cache(maxsize=4096)
def _parse_layout(text: str) -> TileLayout:
    return TileLayout.parse(text)


def layout_of(attr: ir.Attribute) -> TileLayout:
    """Decode a `#tile.layout` attribute (cached: attributes are uniqued)."""
    return _parse_layout(layout_text(attr))


# ------------------------------------------------------------------ op classes


def _str_attr(op: ir.OpView, name: str) -> str:
    return ir.StringAttr(op.operation.attributes[name]).value


def _opt_str_attr(op: ir.OpView, name: str) -> str | None:
    attrs = op.operation.attributes
    return ir.StringAttr(attrs[name]).value if name in attrs else None


def _build(view: ir.OpView, **kwargs: Any) -> ir.Operation:
    """The op built from its view class's name and segment spec (OpView.build_generic)."""
    return cast(ir.Operation, type(view).build_generic(**kwargs))


def _base_attributes(scope: str, variant: str | None) -> dict[str, ir.Attribute]:
    attributes: dict[str, ir.Attribute] = {"scope": ir.StringAttr.get(scope)}
    if variant is not None:
        attributes["variant"] = ir.StringAttr.get(variant)
    return attributes


@_cext.register_dialect
class _Dialect(ir.Dialect):
    DIALECT_NAMESPACE = "tile"


class ScopedOp(ir.OpView):
    """Accessors of every tile op that runs at a scope (all but tile.alloc)."""

    def _build_scoped(self, operands: list[ir.Value], scope: str, variant: str | None,
                      loc: ir.Location | None, ip: ir.InsertionPoint | None) -> None:
        """Build an op whose attributes are its scope and variant alone."""
        super().__init__(_build(self, results=[], operands=operands,
                                attributes=_base_attributes(scope, variant), loc=loc, ip=ip))

    @property
    def scope(self) -> str:
        return _str_attr(self, "scope")

    @property
    def variant(self) -> str | None:
        """The lowering variant, forced by the user or chosen by tile-dispatch."""
        return _opt_str_attr(self, "variant")


class TileOp(ScopedOp):
    """Accessors shared by the tile ops that write a dst (WRITERS)."""

    @property
    def dst(self) -> ir.Value:
        return self.operation.operands[0]

    @property
    def sources(self) -> list[ir.Value]:
        return list(self.operation.operands)[1:]


@_cext.register_operation(_Dialect)
class CopyOp(TileOp):
    """`tile.copy`: dst <- src."""

    OPERATION_NAME = "tile.copy"
    _ODS_REGIONS = (0, True)

    def __init__(
        self,
        dst: ir.Value,
        src: ir.Value,
        *,
        scope: str = "cta",
        variant: str | None = None,
        loc: ir.Location | None = None,
        ip: ir.InsertionPoint | None = None,
    ):
        self._build_scoped([dst, src], scope, variant, loc, ip)

    @property
    def src(self) -> ir.Value:
        return self.operation.operands[1]


@_cext.register_operation(_Dialect)
class PrefetchOp(ScopedOp):
    """`tile.prefetch`: bring src's cache lines into L2 (a hint: it writes nothing)."""

    OPERATION_NAME = "tile.prefetch"
    _ODS_REGIONS = (0, True)

    def __init__(
        self,
        src: ir.Value,
        *,
        scope: str = "cta",
        variant: str | None = None,
        loc: ir.Location | None = None,
        ip: ir.InsertionPoint | None = None,
    ):
        self._build_scoped([src], scope, variant, loc, ip)

    @property
    def src(self) -> ir.Value:
        return self.operation.operands[0]


@_cext.register_operation(_Dialect)
class ElementwiseOp(TileOp):
    """`tile.elementwise`: dst <- op(inputs...), `op` a row of the op registry."""

    OPERATION_NAME = "tile.elementwise"
    _ODS_REGIONS = (0, True)
    # dst, then the optional inputs a, b and the variadic rest c... (build_generic
    # derives operandSegmentSizes)
    _ODS_OPERAND_SEGMENTS = [1, 0, 0, -1]  # type: ignore[assignment]

    def __init__(
        self,
        op: str,
        dst: ir.Value,
        inputs: Sequence[ir.Value] = (),
        *,
        scope: str = "cta",
        variant: str | None = None,
        loc: ir.Location | None = None,
        ip: ir.InsertionPoint | None = None,
    ):
        attributes = _base_attributes(scope, variant)
        attributes["op"] = ir.StringAttr.get(op)
        # dst, a value or None for a and b, and a list for c and the inputs after it:
        # build_generic derives operandSegmentSizes from it.
        first = [*inputs[:2], *([None] * (2 - len(inputs[:2])))]
        operands = [dst, *first, list(inputs[2:])]
        super().__init__(
            _build(self,
                results=[], operands=operands, attributes=attributes, loc=loc, ip=ip
            )
        )

    @property
    def op_name(self) -> str:
        return _str_attr(self, "op")

    @property
    def inputs(self) -> list[ir.Value]:
        return self.sources


@_cext.register_operation(_Dialect)
class ReduceOp(TileOp):
    """`tile.reduce`: dst <- kind-reduction of src over `axes`."""

    OPERATION_NAME = "tile.reduce"
    _ODS_REGIONS = (0, True)

    def __init__(
        self,
        kind: str,
        dst: ir.Value,
        src: ir.Value,
        *,
        axes: Sequence[int] | None = None,
        accum: bool = False,
        scale: float | None = None,
        scope: str = "cta",
        variant: str | None = None,
        more: Sequence[ir.Value] = (),
        loc: ir.Location | None = None,
        ip: ir.InsertionPoint | None = None,
    ):
        """`more`: a tuple kind's further (dst, src) pairs, flat: dst2, src2, dst3, ..."""
        attributes = _base_attributes(scope, variant)
        attributes["kind"] = ir.StringAttr.get(kind)
        if axes is not None:
            attributes["axes"] = ir.DenseI64ArrayAttr.get(list(axes))
        if accum:
            attributes["accum"] = ir.BoolAttr.get(True)
        if scale is not None:
            attributes["scale"] = ir.FloatAttr.get_f64(scale)
        super().__init__(
            _build(self,
                results=[], operands=[dst, src, *more], attributes=attributes, loc=loc,
                ip=ip
            )
        )

    @property
    def src(self) -> ir.Value:
        return self.operation.operands[1]

    @property
    def dsts(self) -> list[ir.Value]:
        """Every destination: dst, then a tuple kind's others."""
        return list(self.operation.operands)[0::2]

    @property
    def srcs(self) -> list[ir.Value]:
        """Every source: src, then a tuple kind's others."""
        return list(self.operation.operands)[1::2]

    @property
    def kind(self) -> str:
        return _str_attr(self, "kind")

    @property
    def axes(self) -> list[int] | None:
        """The reduced axes as written (may be negative); None means all."""
        attrs = self.operation.attributes
        return list(ir.DenseI64ArrayAttr(attrs["axes"])) if "axes" in attrs else None

    @property
    def accum(self) -> bool:
        attrs = self.operation.attributes
        return bool(ir.BoolAttr(attrs["accum"]).value) if "accum" in attrs else False

    @property
    def scale(self) -> float | None:
        """A factor applied to the result before it is stored (1/L makes a mean)."""
        attrs = self.operation.attributes
        return float(ir.FloatAttr(attrs["scale"]).value) if "scale" in attrs else None


@_cext.register_operation(_Dialect)
class AllocOp(ir.OpView):
    """`tile.alloc`: a shared or register buffer with a layout."""

    OPERATION_NAME = "tile.alloc"
    _ODS_REGIONS = (0, True)

    def __init__(
        self,
        type_: ir.MemRefType,
        layout: TileLayout | str,
        *,
        loc: ir.Location | None = None,
        ip: ir.InsertionPoint | None = None,
    ):
        super().__init__(
            _build(self,
                results=[type_], operands=[], attributes={"layout": layout_attr(layout)},
                loc=loc, ip=ip,
            )
        )

    @property
    def buffer(self) -> ir.Value:
        return self.operation.results[0]

    @property
    def layout(self) -> TileLayout:
        return layout_of(self.operation.attributes["layout"])
