"""RoPE's tile program: a CTA per token (or per few), the rotation as `tile.elementwise` ops.

The kernel rotates the query and key of `tokens` tokens, (tokens, heads,
head_dim) each (the key may have fewer heads), by the angles of their
positions: CTA b takes tokens b*T .. b*T + T - 1 and, for each,
- loads its position p = positions[t] (the gather happens in the kernel);
- views the cache row p (vLLM's layout: rotary_dim/2 cos, then as many sin)
  as two (heads, rotary_dim/2) memrefs whose head stride is 0, so that one
  row serves every head;
- views the pairs of each head: neox, the halves x1 = x[..., :R/2] and
  x2 = x[..., R/2:R] (unit stride); GPT-J ("gptj"), the even and odd
  elements (stride 2);
- runs two `tile.elementwise` ops per array at CTA scope, `rope_first`
  (x1 cos - x2 sin) into out's first slot of each pair and `rope_second`
  (x2 cos + x1 sin) into the second, and a `copy` of the dimensions past
  rotary_dim;
- a position outside the cache (p < 0 or p >= max_position) reads nothing
  and fills the token's outputs with NaN (a `fill`), so a bad index shows
  instead of reading past the cache.
elementwise/gmem lowers every op: 16-byte vectors along the halves (neox;
their alignment follows from the strides' `tile.divisibility` and the cache
row's offset p * row_stride), scalar accesses along the stride-2 views.

The out-of-place form only: the first op overwrites what the second reads
when out is the input (in place would need both outputs of a pair computed
from one load, a two-destination op or a staging copy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import tile_mlir.lang as tl
from tile_mlir.contract import ACCESS_BYTES
from tile_mlir.dtypes import DTYPES
from tile_mlir.lang.spec import ScalarSpec, Specialization, TensorSpec
from tile_mlir.ops.programs import lang
from tile_mlir.ops.programs.elementwise import ArraySpec
from tile_mlir.ops.programs.writer import DYNAMIC, Writer, memref_type, module_text

KERNEL = "rope"

STYLES = ("neox", "gptj")
ARRAYS = ("query_out", "query", "key_out", "key", "cache", "positions")
"""The kernel's array arguments in order (the key's two absent without a key)."""


@dataclass(frozen=True)
class RopeSignature:
    """Everything a RoPE kernel is specialized on (its IR text is a function of it).
    The q/k arrays' strides are (token, head, 1), the cache's (row, 1), the
    positions' (token,): the elementwise program's stride classes ("?n": a multiple of n, given
    at launch; "1")."""

    style: str  # "neox" or "gptj"
    query: ArraySpec
    key: ArraySpec | None
    query_out: ArraySpec
    key_out: ArraySpec | None
    cache: ArraySpec
    positions: ArraySpec
    heads: int
    key_heads: int
    head_dim: int
    rotary_dim: int
    threads: int = 128
    tokens_per_cta: int = 1
    index_bits: int = 64

    def arrays(self) -> list[tuple[str, ArraySpec]]:
        specs = [self.query_out, self.query, self.key_out, self.key, self.cache,
                 self.positions]
        return [(name, spec) for name, spec in zip(ARRAYS, specs, strict=True)
                if spec is not None]


def describe(sig: RopeSignature) -> str:
    """A one-line summary (the first line of the kernel's text)."""
    key = f", key {sig.key_heads} heads" if sig.key is not None else ""
    arrays = " ".join(f"{name}={spec.dtype}[{','.join(spec.strides)}]"
                      f"{'+offset' if spec.offset else ''}" for name, spec in sig.arrays())
    return (f"tile_mlir.ops rope {sig.style}: query {sig.heads} heads{key}, head_dim "
            f"{sig.head_dim}, rotary_dim {sig.rotary_dim}; {arrays}; i{sig.index_bits}, "
            f"{sig.threads} threads, {sig.tokens_per_cta} token(s) per CTA")


class _View(NamedTuple):
    """An array's whole view: its SSA name, its spec (the cache's with its broadcast head
    dim) and its static sizes past the first."""

    value: str
    spec: ArraySpec
    dims: tuple[int, ...]


Role = tuple[str, ...]
"""What a kernel argument is, for the launch to fill in: ("tokens",), ("max_position",),
("pointer", array), ("stride", array, dim) or ("offset", array)."""


def slots(sig: RopeSignature) -> tuple[str, ...]:
    """The regions each output is written in by one tile op each: the pairs' first and
    second elements, and the dims past rotary_dim."""
    return ("first", "second", "rest") if sig.rotary_dim < sig.head_dim else \
        ("first", "second")


class _RopeKernel:
    def __init__(self, sig: RopeSignature):
        self.sig = sig
        self.w = Writer(sig.index_bits)
        self.roles: list[Role] = []

    # ------------------------------------------------------------ arguments

    def _int_arg(self, name: str, role: Role, divisibility: int = 1) -> str:
        self.roles.append(role)
        return self.w.int_arg(name, divisibility)

    def _pointer(self, name: str, spec: ArraySpec, array: str, written: bool) -> str:
        promises = ["llvm.noalias"] if written else ["llvm.noalias", "llvm.readonly"]
        self.roles.append(("pointer", array))
        return self.w.pointer_arg(name, spec.dtype, promises)

    def _views(self, n: int, array: str, spec: ArraySpec, sizes: list[str],
               copies: int) -> list[str]:
        """The array's whole view, `copies` times from as many pointer arguments (the
        launch passes one pointer to each): its pointer re-viewed with its sizes and
        strides; `sizes` are SSA names or numbers, a stride class "0" broadcasts."""
        written = array.endswith("_out")
        pointers = [self._pointer(f"a{n}" + (f"_{c}" if c else ""), spec, array, written)
                    for c in range(copies)]
        strides = [self._int_arg(f"s{n}_{dim}", ("stride", array, str(dim)), int(stride[1:]))
                   if stride.startswith(DYNAMIC) else stride
                   for dim, stride in enumerate(spec.strides)]
        offset = self._int_arg(f"o{n}", ("offset", array)) if spec.offset else "0"
        shape = [DYNAMIC if s.startswith("%") else s for s in sizes]
        type_ = memref_type(shape, spec.dtype, spec.static_strides(),
                        DYNAMIC if spec.offset else "0")
        return [self.w.op(
            f"memref.reinterpret_cast {pointer} to offset: [{offset}], "
            f"sizes: [{', '.join(sizes)}], strides: [{', '.join(strides)}] "
            f": {memref_type(['1'], spec.dtype, None)} to {type_}") for pointer in pointers]

    # ---------------------------------------------------------------- body

    def build(self) -> str:
        sig, w = self.sig, self.w
        tokens = self._int_arg("tokens", ("tokens",))
        max_position = self._int_arg("max_position", ("max_position",))
        views: dict[str, _View] = {}
        for n, (name, given) in enumerate(sig.arrays()):
            spec, copies = given, 1
            if name == "cache":  # (max_position, heads, rotary_dim): the heads broadcast
                dims: tuple[int, ...] = (max(sig.heads, sig.key_heads), sig.rotary_dim)
                spec = ArraySpec(spec.dtype, (spec.strides[0], "0", spec.strides[1]),
                                 spec.offset)
                first_dim = max_position
            elif name == "positions":
                dims, first_dim = (), tokens
            else:
                dims = (sig.heads if name.startswith("query") else sig.key_heads, sig.head_dim)
                first_dim = tokens
                copies = len(slots(sig)) if name.endswith("_out") else 1
            made = self._views(n, name, spec, [first_dim, *map(str, dims)], copies)
            if copies == 1:
                views[name] = _View(made[0], spec, dims)
            for slot, value in zip(slots(sig), made, strict=False) if copies > 1 else ():
                views[f"{name}.{slot}"] = _View(value, spec, dims)
        first = w.op(f"arith.muli {w.op('gpu.block_id x')}, "
                     f"{w.const(sig.tokens_per_cta)} : index")
        for i in range(sig.tokens_per_cta):
            token = w.op(f"arith.addi {first}, {w.const(i)} : index") if i else first
            self._token(views, token, tokens)
        return self._text()

    def _token(self, views: dict[str, _View], token: str, tokens: str) -> None:
        """Token `token` (if there is one): its position, then the rotation or NaN."""
        w = self.w
        w.lines.append(f"      scf.if {w.op(f'arith.cmpi ult, {token}, {tokens} : index')} {{")
        view, spec, _ = views["positions"]
        source = memref_type([DYNAMIC], spec.dtype, spec.static_strides(),
                         DYNAMIC if spec.offset else "0")
        loaded = w.op(f"memref.load {view}[{token}] : {source}")
        inside = self._inside(loaded, DTYPES[spec.dtype].mlir)
        position = w.op(f"arith.index_cast {loaded} : {DTYPES[spec.dtype].mlir} to index")
        w.lines.append(f"      scf.if {inside} {{")
        for which, heads in (("query", self.sig.heads), ("key", self.sig.key_heads)):
            if which in views:
                self._rotate(views, which, heads, token, position)
        w.lines.append("      } else {")
        nan = w.op("arith.constant 0x7FC00000 : f32")
        for which, heads in (("query", self.sig.heads), ("key", self.sig.key_heads)):
            if which in views:
                out = self._subview(views[f"{which}_out.first"], [token, "0", "0"],
                                    [heads, self.sig.head_dim], 1)
                self._tile_op("fill", out, [(nan, "f32")])
        w.lines.append("      }")
        w.lines.append("      }")

    def _inside(self, position: str, type_: str) -> str:
        """0 <= position < max_position, compared in the wider of the positions' type and
        the index arguments' (a 64-bit position is not cut to a 32-bit index before)."""
        w = self.w
        bits = max(int(type_[1:]), int(w.int[1:]))
        wide = f"i{bits}"
        if type_ != wide:
            position = w.op(f"arith.extsi {position} : {type_} to {wide}")
        limit = "%max_position"
        if w.int != wide:
            limit = w.op(f"arith.extui {limit} : {w.int} to {wide}")
        return w.op(f"arith.cmpi ult, {position}, {limit} : {wide}")

    def _rotate(self, views: dict[str, _View], which: str, heads: int,
                token: str, position: str) -> None:
        """One array's rotation at one token: the pairs' two ops and the pass-through."""
        sig = self.sig
        half = sig.rotary_dim // 2
        x = views[which]
        second, step = (str(half), 1) if sig.style == "neox" else ("1", 2)
        x1, x2 = (self._subview(x, [token, "0", start], [heads, half], step)
                  for start in ("0", second))
        o1 = self._subview(views[f"{which}_out.first"], [token, "0", "0"], [heads, half], step)
        o2 = self._subview(views[f"{which}_out.second"], [token, "0", second], [heads, half],
                           step)
        cos, sin = (self._subview(views["cache"], [position, "0", start], [heads, half], 1)
                    for start in ("0", str(half)))
        self._tile_op("rope_first", o1, [x1, x2, cos, sin])
        self._tile_op("rope_second", o2, [x1, x2, cos, sin])
        rest = sig.head_dim - sig.rotary_dim
        if rest:
            start = str(sig.rotary_dim)
            out = self._subview(views[f"{which}_out.rest"], [token, "0", start], [heads, rest], 1)
            self._tile_op("copy", out, [self._subview(x, [token, "0", start], [heads, rest], 1)])

    def _subview(self, view: _View, offsets: list[str], shape: list[int],
                 step: int) -> tuple[str, str]:
        """The (shape) piece of a 3-d view at `offsets`, its first dim dropped, every
        `step`-th element along the last."""
        name, spec, dims = view
        strides = spec.static_strides()
        source = memref_type([DYNAMIC, *(str(d) for d in dims)], spec.dtype, strides,
                         DYNAMIC if spec.offset else "0")
        kept = [strides[1], _times(strides[2], step)]
        result = memref_type([str(d) for d in shape], spec.dtype, kept, DYNAMIC)
        sizes = ["1", *(str(d) for d in shape)]
        value = self.w.op(f"memref.subview {name}[{', '.join(offsets)}] [{', '.join(sizes)}] "
                          f"[1, 1, {step}] : {source} to {result}")
        return value, result

    def _tile_op(self, op: str, dst: tuple[str, str], inputs: list[tuple[str, str]]) -> None:
        count = len(inputs)
        segments = [1, min(count, 1), min(max(count - 1, 0), 1), max(count - 2, 0)]
        names = ", ".join(name for name, _ in [dst, *inputs])
        types = ", ".join(type_ for _, type_ in [dst, *inputs])
        self.w.lines.append(
            f'        "tile.elementwise"({names}) {{op = "{op}", scope = "cta", '
            f"vector_bytes = {ACCESS_BYTES} : i64, stage = 1 : i64, "
            f"operandSegmentSizes = array<i32: {', '.join(map(str, segments))}>}} "
            f": ({types}) -> ()")

    def _text(self) -> str:
        return module_text(describe(self.sig), KERNEL, self.w.args, self.w.lines,
                           threads=self.sig.threads, index_bits=self.sig.index_bits)


def _times(stride: str, step: int) -> str:
    """A static or dynamic ("?") stride times a step."""
    return stride if stride == DYNAMIC or step == 1 else str(int(stride) * step)


# ------------------------------------------------------------------ the tile program


@tl.kernel(name=KERNEL)
def rope(*, STYLE: tl.constexpr, ROTARY_DIM: tl.constexpr, TOKENS_PER_CTA: tl.constexpr,
         **operands: Any) -> None:
    """Rotate the query's and key's pairs of each of this CTA's tokens. `operands`: the
    counts tokens and max_position (integers), the arrays (without a key, no key or
    key_out): an output has a pointer per slot it is written in (its views: the pairs'
    first elements, their second ones, the dims past rotary_dim), so that the slots' ops
    share no buffer and need no barrier between them; the cache is (max_position, heads,
    rotary_dim), the heads broadcast."""
    first = tl.block_id() * TOKENS_PER_CTA
    for i in range(TOKENS_PER_CTA):
        _token(operands, first + i, (STYLE, ROTARY_DIM))


def _token(operands: dict[str, Any], token: tl.Index, rotation: tuple[str, int]) -> None:
    """Token `token` (if there is one): its position, then the rotation or NaN."""
    positions = operands["positions"]
    with tl.if_(token.ult(positions.shape[0])):
        loaded = positions.load(token)
        inside = _inside(loaded, operands["max_position"])
        position = loaded.index()
        arrays = [a for a in ("query", "key") if a in operands]
        with tl.if_(inside) as known:
            for which in arrays:
                _rotate(operands, which, token, position, rotation)
        with known.otherwise():  # a position outside the cache: NaN, not a read past it
            for which in arrays:
                out = operands[f"{which}_out"][0]
                tl.cta.fill(out[token, :, :], float("nan"), vector_bytes=ACCESS_BYTES,
                            stage=1)


def _inside(position: tl.Scalar, limit: tl.Scalar) -> tl.Bool:
    """0 <= position < max_position, compared in the wider of the positions' type and the
    index arguments' (a 64-bit position is not cut to a 32-bit index before)."""
    wide = max(position.dtype, limit.dtype, key=lambda d: int(d[1:]))
    return position.to(wide).ult(limit.to(wide))


def _rotate(operands: dict[str, Any], which: str, token: tl.Index, position: tl.Index,
            rotation: tuple[str, int]) -> None:
    """One array's rotation at one token: the pairs' two ops and the pass-through."""
    style, rotary_dim = rotation
    half = rotary_dim // 2
    x = operands[which]
    heads, head_dim = x.shape[1:]
    second, step = (half, 1) if style == "neox" else (1, 2)
    x1, x2 = (x[token, :, tl.ds(start, half, step)] for start in (0, second))
    out = operands[f"{which}_out"]
    o1 = out[0][token, :, tl.ds(0, half, step)]
    o2 = out[1][token, :, tl.ds(second, half, step)]
    cos, sin = (operands["cache"][position, tl.ds(0, heads), tl.ds(start, half)]
                for start in (0, half))
    options = {"vector_bytes": ACCESS_BYTES, "stage": 1}
    tl.cta.rope_first(o1, x1, x2, cos, sin, **options)
    tl.cta.rope_second(o2, x1, x2, cos, sin, **options)
    if rotary_dim < head_dim:
        rest = tl.ds(rotary_dim, head_dim - rotary_dim)
        tl.cta.elementwise("copy", out[2][token, :, rest], x[token, :, rest], **options)


def specialization(sig: RopeSignature) -> Specialization:
    """The RoPE kernel's specialization: the counts (index-width integers), then the arrays
    at their stride classes (an output with a pointer per slot)."""
    index = f"i{sig.index_bits}"
    params: list[TensorSpec | ScalarSpec] = [ScalarSpec("tokens", index),
                                             ScalarSpec("max_position", index)]
    for name, spec in sig.arrays():
        if name == "cache":  # (max_position, heads, rotary_dim): the heads broadcast
            params.append(TensorSpec(name, spec.dtype, (None, max(sig.heads, sig.key_heads),
                                                        sig.rotary_dim),
                                     ("max_position", None, None),
                                     (spec.strides[0], "0", spec.strides[1]), spec.offset))
        elif name == "positions":
            params.append(TensorSpec(name, spec.dtype, (None,), ("tokens",), spec.strides,
                                     spec.offset))
        else:
            heads = sig.heads if name.startswith("query") else sig.key_heads
            pointers = len(slots(sig)) if name.endswith("_out") else 1
            params.append(TensorSpec(name, spec.dtype, (None, heads, sig.head_dim),
                                     ("tokens", None, None), spec.strides, spec.offset,
                                     pointers=pointers))
    constexprs = (("STYLE", sig.style), ("ROTARY_DIM", sig.rotary_dim),
                  ("TOKENS_PER_CTA", sig.tokens_per_cta))
    return lang.specialization(rope, params, constexprs=constexprs, threads=sig.threads,
                               index_bits=sig.index_bits)


class RopeProgram(lang.LangProgram):
    """The RoPE kernel of a signature, behind programs.KernelProgram; `roles` says what
    each argument is, for the launch to fill in."""

    def __init__(self, sig: RopeSignature):
        if sig.style not in STYLES:
            raise ValueError(f"unknown RoPE style {sig.style!r} (styles: "
                             f"{', '.join(STYLES)})")
        super().__init__(rope, specialization(sig), describe(sig))
        self.sig = sig

    def roles(self) -> tuple[Role, ...]:
        """Per argument: ("tokens",), ("max_position",), ("pointer", array), ("stride",
        array, dim) or ("offset", array)."""
        found: list[Role] = []
        for role in self.spec.roles:
            array = self.spec.params[role.param].name
            if role.kind == "scalar":
                found.append((array,))
            elif role.kind == "array":
                found.append(("pointer", array))
            elif role.kind == "stride":  # the cache's dims past its broadcast one: its own
                dim = role.dim - 1 if array == "cache" and role.dim > 1 else role.dim
                found.append(("stride", array, str(dim)))
            else:
                found.append(("offset", array))
        return tuple(found)
