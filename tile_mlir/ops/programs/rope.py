"""RoPE's tile program: a CTA per token (or per few, or per op of a token), the rotation as
`tile.elementwise` ops.

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
  and fills the token's outputs with NaN (a `fill`, in a spread kernel by the
  CTA of each array's first op), so a bad index shows instead of reading past
  the cache.
A *spread* kernel (few tokens: a decode step) runs each of a token's ops, one
array's one slot, in a CTA of its own, grid axis 1 (`parts`): with one CTA per
token its ops ran one after another, each waiting for its loads, while most SMs
had nothing to do.
elementwise/gmem lowers every op: 16-byte vectors along the halves (neox;
their alignment follows from the strides' `tile.divisibility` and the cache
row's offset p * row_stride), scalar accesses along the stride-2 views.

The out-of-place form only: the first op overwrites what the second reads
when out is the input (in place would need both outputs of a pair computed
from one load, a two-destination op or a staging copy).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import tile_mlir.lang as tl
from tile_mlir.contract import ACCESS_BYTES
from tile_mlir.lang.spec import ScalarSpec, Specialization, TensorSpec
from tile_mlir.ops.programs import lang
from tile_mlir.ops.programs.elementwise import ArraySpec

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
    spread: bool = False  # each op of a token in a CTA of its own (grid axis 1: parts())

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
            f"{sig.threads} threads, "
            + (f"a CTA per op of a token ({len(parts(sig))})" if sig.spread else
               f"{sig.tokens_per_cta} token(s) per CTA"))


Role = tuple[str, ...]
"""What a kernel argument is, for the launch to fill in: ("tokens",), ("max_position",),
("pointer", array), ("stride", array, dim) or ("offset", array)."""


def slots(sig: RopeSignature) -> tuple[str, ...]:
    """The regions each output is written in by one tile op each: the pairs' first and
    second elements, and the dims past rotary_dim."""
    return ("first", "second", "rest") if sig.rotary_dim < sig.head_dim else \
        ("first", "second")


def parts(sig: RopeSignature) -> tuple[tuple[str, str], ...]:
    """A token's ops, (array, slot) each, in the order of a spread kernel's grid axis 1."""
    arrays = ("query", "key") if sig.key is not None else ("query",)
    return tuple((array, slot) for array in arrays for slot in slots(sig))


# ------------------------------------------------------------------ the tile program


@tl.kernel(name=KERNEL)
def rope(*, STYLE: tl.constexpr, ROTARY_DIM: tl.constexpr, TOKENS_PER_CTA: tl.constexpr,
         SPREAD: tl.constexpr, **operands: Any) -> None:
    """Rotate the query's and key's pairs of each of this CTA's tokens (SPREAD: only the
    op of the token that grid axis 1 names). `operands`: the counts tokens and
    max_position (integers), the arrays (without a key, no key or key_out): an output
    has a pointer per slot it is written in (its views: the pairs' first elements, their
    second ones, the dims past rotary_dim), so that the slots' ops share no buffer and
    need no barrier between them; the cache is (max_position, heads, rotary_dim), the
    heads broadcast."""
    first = tl.block_id() * TOKENS_PER_CTA
    part = tl.block_id(1) if SPREAD else None
    for i in range(TOKENS_PER_CTA):
        _token(operands, first + i, (STYLE, ROTARY_DIM), part)


def _token(operands: dict[str, Any], token: tl.Index, rotation: tuple[str, int],
           part: tl.Index | None) -> None:
    """Token `token` (if there is one): its position, then the rotation or NaN; `part`
    (a spread kernel): the index of the one op to run, in parts()'s order."""
    positions = operands["positions"]
    with tl.if_(token.ult(positions.shape[0])):
        loaded = positions.load(token)
        inside = _inside(loaded, operands["max_position"])
        ops = _ops(operands, token, loaded.index(), rotation)
        with tl.if_(inside) as known:
            _run(ops, part, 0)
        with known.otherwise():  # a position outside the cache: NaN, not a read past it
            _run(ops, part, 1)


def _inside(position: tl.Scalar, limit: tl.Scalar) -> tl.Bool:
    """0 <= position < max_position, compared in the wider of the positions' type and the
    index arguments' (a 64-bit position is not cut to a 32-bit index before)."""
    wide = max(position.dtype, limit.dtype, key=lambda d: int(d[1:]))
    return position.to(wide).ult(limit.to(wide))


Build = Callable[[], None]
Op = tuple[Build, Build | None]
"""One op of a token: what builds it, and what builds in its place for a position outside
the cache (an array's first op: NaN over the array's whole row; the others: nothing)."""


def _run(ops: list[Op], part: tl.Index | None, which: int) -> None:
    """Each op's `which` (0: the op, 1: its fill); only the part's in a spread kernel."""
    for index, op in enumerate(ops):
        build = op[which]
        if build is None:
            continue
        if part is None:
            build()
        else:
            with tl.if_(part == index):
                build()


def _ops(operands: dict[str, Any], token: tl.Index, position: tl.Index,
         rotation: tuple[str, int]) -> list[Op]:
    """A token's ops in parts()'s order: per array, the pairs' first elements, their
    second ones, and the dims past rotary_dim (a copy) where there are some."""
    style, rotary_dim = rotation
    half = rotary_dim // 2
    options = {"vector_bytes": ACCESS_BYTES, "stage": 1}
    found: list[Op] = []
    for which in ("query", "key"):
        if which not in operands:
            continue
        x = operands[which]
        heads, head_dim = x.shape[1:]
        second, step = (half, 1) if style == "neox" else (1, 2)
        x1, x2 = (x[token, :, tl.ds(start, half, step)] for start in (0, second))
        out = operands[f"{which}_out"]
        o1 = out[0][token, :, tl.ds(0, half, step)]
        o2 = out[1][token, :, tl.ds(second, half, step)]
        cos, sin = (operands["cache"][position, tl.ds(0, heads), tl.ds(start, half)]
                    for start in (0, half))
        nan = partial(tl.cta.fill, out[0][token, :, :], float("nan"), **options)
        found += [(partial(tl.cta.rope_first, o1, x1, x2, cos, sin, **options), nan),
                  (partial(tl.cta.rope_second, o2, x1, x2, cos, sin, **options), None)]
        if rotary_dim < head_dim:
            rest = tl.ds(rotary_dim, head_dim - rotary_dim)
            found.append((partial(tl.cta.elementwise, "copy", out[2][token, :, rest],
                                  x[token, :, rest], **options), None))
    return found


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
                  ("TOKENS_PER_CTA", sig.tokens_per_cta), ("SPREAD", sig.spread))
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
