"""null tier: the body API's IR: views (slices, picks, windows, reshapes, broadcasts),
index arithmetic, loops and branches, buffers, numbers as inputs, op options, reductions,
scalars and ids. Each kernel's IR must also pass the MLIR verifier (ir() builds it)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any

import pytest

import tile_mlir
import tile_mlir.lang as tl
from tile_mlir.diagnostics import CompileError

D = tl.ArrayDesc
Vec = Annotated[tl.Tensor, "f32", ("N",)]
Mat = Annotated[tl.Tensor, "f32", ("M", "N")]


def ir(body: Callable[..., None], *args: Any, threads: Any = 64, **kwargs: Any) -> str:
    return tl.kernel(threads=threads)(body).ir(*args, **kwargs)


def types(text: str, op: str) -> list[str]:
    """The result types of every `op` in the IR, in order."""
    return re.findall(rf"= {re.escape(op)} .* to (memref<.*>)$", text, re.M)


def test_picks_and_slices_of_a_static_matrix() -> None:
    def body(x: Annotated[tl.Tensor, "f32", (16, 32)]) -> None:
        tl.cta.sqrt(x[3], x[-1])
        tl.cta.sqrt(x[2:6, ::4], x[0:40:1, 1:30:4][:4])

    assert types(ir(body, D("f32", (16, 32))), "memref.subview") == [
        "memref<32xf32, strided<[1], offset: 96>>",
        "memref<32xf32, strided<[1], offset: 480>>",
        "memref<4x8xf32, strided<[32, 4], offset: 64>>",
        "memref<16x8xf32, strided<[32, 4], offset: 1>>",
        "memref<4x8xf32, strided<[32, 4], offset: 1>>",
    ]
    # strided: a pointer and a stride argument, so the offsets are known at run time
    assert types(ir(body, D("f32", (16, 32), (64, 1))), "memref.subview")[0] == \
        "memref<32xf32, strided<[1], offset: ?>>"


def test_slices_of_dynamic_dims_are_clamped() -> None:
    def body(x: Vec) -> None:
        start = tl.block_id() * 64
        tl.cta.sqrt(x[start:start + 64], x[tl.ds(start, 64)])
        tl.cta.sqrt(x[start:], x[start:])
        tl.cta.sqrt(x[:], x[...])

    text = ir(body, D("f32", (1000,)))
    assert types(text, "memref.subview") == [
        "memref<?xf32, strided<[1], offset: ?>>", "memref<64xf32, strided<[1], offset: ?>>",
        "memref<?xf32, strided<[1], offset: ?>>", "memref<?xf32, strided<[1], offset: ?>>"]
    assert text.count("arith.minsi") == 1 and text.count("arith.maxsi") == 3
    assert text.count("memref.subview") == 4  # x[:] and x[...] are x itself


def test_a_pick_drops_its_dim_and_a_window_keeps_a_static_size() -> None:
    def body(x: Mat, y: Mat) -> None:
        row = tl.block_id()
        tl.cta.add(y[row, tl.ds(0, 8)], x[row, :8], x[row, tl.ds(8, 8, 2)])

    text = ir(body, D("f32", (4, 100)), D("f32", (4, 100)))
    assert types(text, "memref.subview") == [
        "memref<8xf32, strided<[1], offset: ?>>", "memref<?xf32, strided<[1], offset: ?>>",
        "memref<8xf32, strided<[2], offset: ?>>"]


def test_reshape_and_broadcast() -> None:
    def body(x: Annotated[tl.Tensor, "f32", (4, 8)], b: Annotated[tl.Tensor, "f32", (8,)],
             y: Annotated[tl.Tensor, "f32", (2, 2, 8)]) -> None:
        tl.cta.add(y.reshape(4, 8), x, b.broadcast_to((4, 8)))
        tl.cta.copy(y, x.reshape((2, 2, 8)))
        tl.cta.copy(x.reshape(32), y.reshape(32))
        tl.cta.copy(x[:1, :].broadcast_to((4, 8)), x)

    text = ir(body, D("f32", (4, 8)), D("f32", (8,)), D("f32", (2, 2, 8)))
    assert "memref.collapse_shape %y [[0, 1], [2]] : memref<2x2x8xf32> into memref<4x8xf32>" \
        in text
    assert re.search(r"memref.expand_shape %b \[\[0, 1\]\] output_shape \[1, 8\] : "
                     r"memref<8xf32> into memref<1x8xf32>", text)
    assert "to memref<4x8xf32, strided<[0, 1]>>" in text
    assert "memref<32xf32>" in text
    assert "to memref<4x8xf32, strided<[0, 1]>>" in text.split("memref<32xf32>")[-1]


def test_reshape_errors() -> None:
    def merges_strided(x: Annotated[tl.Tensor, "f32", (4, 8)]) -> None:
        tl.cta.copy(x.reshape(32), x.reshape(32))

    with pytest.raises(tl.ProgramError, match="reshape merges dims that are not contiguous"):
        ir(merges_strided, D("f32", (4, 8), (16, 1)))

    def mismatched(x: Annotated[tl.Tensor, "f32", (4, 8)]) -> None:
        tl.cta.copy(x.reshape(5, 6), x.reshape(5, 6))

    with pytest.raises(tl.ProgramError, match="reshape"):
        ir(mismatched, D("f32", (4, 8)))


def test_index_arithmetic() -> None:
    def body(x: Vec) -> None:
        n = x.shape[0]
        assert isinstance(n, tl.Index)
        i = tl.block_id() * 1 + 0  # folded away
        j = (7 + i * 3 - 1) // 2 % n
        k = tl.cdiv(n, 4) + tl.minimum(i, 5) + tl.maximum(j, n)
        tl.cta.sqrt(x[k:], x[j:])

    text = ir(body, D("f32", (100,)))
    for op in ("muli", "addi", "subi", "divui", "remui", "ceildivui", "minsi", "maxsi"):
        assert f"arith.{op}" in text, op
    assert "%c0 " not in text.split("arith.muli")[0]
    assert tl.cdiv(10, 4) == 3 and tl.minimum(2, 5) == 2 and tl.maximum(2, 5) == 5


def test_unsigned_index_compares() -> None:
    def body(x: Vec) -> None:
        i = tl.block_id() - 1
        with tl.if_(i.ult(x.shape[0]) & (i + 1).ule(8)):
            tl.cta.sqrt(x, x)

    text = ir(body, D("f32", (100,)))
    assert "arith.cmpi ult" in text and "arith.cmpi ule" in text


def test_reshape_of_a_strided_view_keeps_its_layout() -> None:
    """A view with a strided layout reshapes into one (MLIR infers the identity layout only
    from the identity), its strides row-major or not."""
    @tl.kernel(threads=32)
    def body(x: tl.Tensor, y: tl.Tensor) -> None:
        tl.cta.copy(y, x.reshape(4, 2, 4))

    x = tl.TensorSpec("x", "f32", (4, 8), (None, None), ("8", "1"))
    y = tl.TensorSpec("y", "f32", (4, 2, 4), (None,) * 3, ("8", "4", "1"))
    spec = tl.Specialization(body.info.qualname, (x, y), (), (), (32, 1, 1), 32)
    assert "into memref<4x2x4xf32, strided<[8, 4, 1]>>" in body.ir(spec)


def test_loops_and_branches() -> None:
    def body(x: Vec) -> None:
        n = x.shape[0]
        for i in tl.range(tl.block_id(), tl.cdiv(n, 128), tl.num_blocks()):
            start = i * 128
            with tl.if_((start + 128 <= n) & (i >= 0)) as whole:
                tl.cta.sqrt(x[tl.ds(start, 128)], x[tl.ds(start, 128)])
            with whole.otherwise():
                tl.cta.sqrt(x[start:], x[start:])
        for _ in tl.range(4):
            tl.barrier()
        with tl.if_(~(n < 4)):
            tl.cta.sqrt(x, x)

    text = ir(body, D("f32", (1000,)))
    assert text.count("scf.for") == 2 and text.count("scf.if") == 2
    assert text.count("} else {") == 1 and "gpu.grid_dim  x" in text
    assert "gpu.barrier" in text and "arith.andi" in text and "arith.xori" in text
    tile_mlir.compile(tl.kernel(threads=64)(body).build(
        tl.kernel(threads=64)(body).signature(D("f32", (1000,)))), cubin=False)


def test_otherwise_needs_its_if() -> None:
    def body(x: Vec) -> None:
        with tl.if_(tl.block_id() < 1) as branch, branch.otherwise():
            tl.cta.sqrt(x, x)

    with pytest.raises(tl.ProgramError, match=r"branch.otherwise\(\) follows"):
        ir(body, D("f32", (8,)))


def test_buffers() -> None:
    def body(x: Annotated[tl.Tensor, "f32", (32, 8)]) -> None:
        smem = tl.alloc_shared((32, 8), tl.f32)
        padded = tl.alloc_shared((32, 8), "f32", "S[(32, 8):(9, 1)]")
        regs = tl.alloc_reg((32, 8), tl.f32, "S[(32, 8):(1@laneid, 1)]")
        tl.warp.copy(smem, x)
        tl.warp.copy(padded[:, 1:5], smem[:, 4:])
        tl.warp.copy(regs, smem)

    text = ir(body, D("f32", (32, 8)), threads=32)
    assert '%smem = "tile.alloc"() {layout = #tile.layout<"S[(32, 8)]">} : () -> ' \
           "memref<32x8xf32, #gpu.address_space<workgroup>>" in text
    assert "-> memref<32x8xf32, strided<[9, 1]>, #gpu.address_space<workgroup>>" in text
    assert "#gpu.address_space<private>>" in text and "%regs = " in text


def test_prefetch_of_a_row_ahead() -> None:
    """tl.<scope>.prefetch(view): one tile.prefetch of the view (a row picked at a clamped
    index), lowered to one prefetch.global.L2 per 16 bytes a thread: 32 floats over 8
    threads, one each."""
    def body(x: Annotated[tl.Tensor, "f32", ("M", 32)]) -> None:
        ahead = tl.minimum(tl.block_id() + 4, x.shape[0] - 1)
        tl.cta.prefetch(x[ahead])

    kernel = tl.kernel(threads=8)(body)
    text = kernel.ir(D("f32", (100, 32)))
    assert re.search(r'"tile.prefetch"\(%\w+\) \{scope = "cta"\} : '
                     r"\(memref<32xf32, strided<\[1\], offset: \?>>\) -> \(\)", text), text
    ptx = tile_mlir.compile(text, chip="sm_90", cache=False).ptx["kernels"]
    assert ptx.count("prefetch.global.L2") == 1
    assert re.search(r"^\s*(ld|st)\.global", ptx, re.M) is None  # it reads nothing itself


def test_numbers_take_types_the_verifier_accepts() -> None:
    def body(h: Annotated[tl.Tensor, "f16", ("N",)], i: Annotated[tl.Tensor, "i32", ("N",)],
             m: Annotated[tl.Tensor, "bool", ("N",)]) -> None:
        tl.cta.mul(h, h, 2)
        tl.cta.add(i, i, 3)
        tl.cta.gt(m, h, 0.5)
        tl.cta.where(h, True, h, 1.5)
        tl.cta.maximum(i, i, 7)

    args = (D("f16", (64,)), D("i32", (64,)), D("bool", (64,)))
    text = ir(body, *args)
    for constant in ("2.000000e+00 : f32", "3 : i32", "5.000000e-01 : f32", "true",
                     "1.500000e+00 : f32", "7 : i32"):
        assert f"arith.constant {constant}" in text, constant
    kernel = tl.kernel(threads=64)(body)
    tile_mlir.compile(kernel.build(kernel.signature(*args)), cubin=False)  # tile-verify agrees

    def wide(d: Annotated[tl.Tensor, "f64", ("N",)]) -> None:
        tl.cta.fill(d, 0.1)

    assert "arith.constant 1.000000e-01 : f64" in ir(wide, D("f64", (8,)))


def test_options_and_reductions() -> None:
    def body(x: Mat, out: Vec) -> None:
        tl.cta.add(x, x, x, vector_bytes=8, stage=2, variant="gmem")
        tl.cta.sum(out, x, axes=0)
        tl.cta.amax(out, x, axes=(0,), accum=True, scale=0.5)
        tl.cta.reduce("min", out, x, axes=[-2])
        tl.warp.max(out, out, out)

    text = ir(body, D("f32", (4, 8)), D("f32", (8,)))
    assert "stage = 2 : i64" in text and "vector_bytes = 8 : i64" in text
    assert 'variant = "gmem"' in text
    assert '{axes = array<i64: 0>, kind = "sum", scope = "cta"}' in text
    assert 'accum = true, axes = array<i64: 0>, kind = "max", scale = 5.000000e-01 : f64' in text
    assert '{axes = array<i64: -2>, kind = "min", scope = "cta"}' in text
    assert 'op = "maximum"' in text and 'scope = "warp"' in text


def test_fused_ops() -> None:
    """A fused elementwise op (op_table/fusion.py) with its steps; tile-verify checks them
    when the kernel compiles."""
    def body(x: Vec, y: Vec, s: tl.f32) -> None:
        tl.cta.fused(y, x, s, expr=["mul(%0, %1) : f32", "exp($0) : f32"])
        tl.cta.elementwise("fused", x, y, expr=("neg(%0) : f32",))

    kernel = tl.kernel(threads=64)(body)
    spec = kernel.signature(D("f32", (256,)), D("f32", (256,)), 2.0)
    text = kernel.ir(spec)
    assert 'expr = ["mul(%0, %1) : f32", "exp($0) : f32"]' in text
    assert text.count('op = "fused"') == 2
    tile_mlir.compile(kernel.build(spec), cubin=False)

    def unknown_step(x: Vec) -> None:
        tl.cta.fused(x, x, expr=["sqr(%0) : f32"])

    with pytest.raises(CompileError, match="sqr"):
        tile_mlir.compile(tl.kernel(threads=64)(unknown_step).build(
            tl.kernel(threads=64)(unknown_step).signature(D("f32", (256,)))), cubin=False)

    def no_steps(x: Vec) -> None:
        tl.cta.fused(x, x, 1.0, expr="exp(%0) : f32")

    with pytest.raises(tl.ProgramError, match="a fused op takes expr="):
        ir(no_steps, D("f32", (256,)))

    def number(x: Vec) -> None:
        tl.cta.fused(x, x, 1.0, expr=["add(%0, %1) : f32"])

    with pytest.raises(tl.ProgramError, match=r"input 1 of a fused op is a tl\.Tensor or "
                                              r"a typed scalar"):
        ir(number, D("f32", (256,)))


def test_reduction_errors() -> None:
    def bad_axis(x: Mat, out: Vec) -> None:
        tl.cta.sum(out, x, axes=(2,))

    with pytest.raises(tl.ProgramError, match="axis 2 is not an axis of a 2-d tensor"):
        ir(bad_axis, D("f32", (4, 8)), D("f32", (8,)))

    def bad_kind(x: Mat, out: Vec) -> None:
        tl.cta.reduce("mean", out, x)

    with pytest.raises(tl.ProgramError, match="unknown reduction 'mean'"):
        ir(bad_kind, D("f32", (4, 8)), D("f32", (8,)))


def test_scalars_loads_and_stores() -> None:
    def body(pos: Annotated[tl.Tensor, "i64", ("T",)], x: Vec, limit: tl.i64, s: tl.f32,
             flag: tl.bool_) -> None:
        p = pos.load(tl.block_id())
        inside = (p >= 0) & p.ult(limit)
        with tl.if_(inside & flag):
            i = p.index()
            tl.cta.mul(x[i:], x[i:], s * 2.0 + 1.0)
            x.store(s.to(tl.f32) / 3.0, i)
            x.store(p.to("f32"), 0)
        tl.cta.mul(x, x, (tl.block_id() + 1).to(tl.i64).to(tl.f32))

    text = ir(body, D("i64", (16,)), D("f32", (100,)), 100, 2.0, True)
    assert "memref.load" in text and text.count("memref.store") == 2
    assert "arith.cmpi ult" in text and "arith.sitofp" in text and "arith.divf" in text
    assert "arith.index_cast %" in text and "%flag" in text


def test_scalar_mistakes() -> None:
    def mixed(x: Vec, s: tl.f32, n: tl.i32) -> None:
        tl.cta.mul(x, x, s * n)

    with pytest.raises(tl.ProgramError, match="mixing f32 and i32"):
        ir(mixed, D("f32", (8,)), 1.0, 2)

    def index_input(x: Vec) -> None:
        tl.cta.mul(x, x, tl.block_id())

    with pytest.raises(tl.ProgramError, match=r"input 1 is a tl\.Index"):
        ir(index_input, D("f32", (8,)))


def test_ids() -> None:
    def body(x: Annotated[tl.Tensor, "f32", (4096,)]) -> None:
        tl.grid(8, 2)
        assert tl.num_blocks(1) == 2
        t = tl.thread_id() + tl.warp_id() + tl.lane_id() + tl.block_id(1)
        tl.cta.sqrt(x[t:], x[t:])

    text = ir(body, D("f32", (4096,)), threads=(32, 4))
    assert "known_block_size = array<i32: 32, 4, 1>" in text
    assert "known_grid_size = array<i32: 8, 2, 1>" in text
    assert "gpu.thread_id  y" in text and "gpu.block_id  y" in text

    def twice(x: Vec) -> None:
        tl.grid(2)
        tl.grid(3)

    with pytest.raises(tl.ProgramError, match=r"the grid is already fixed to \(2, 1, 1\)"):
        ir(twice, D("f32", (8,)))


def test_threads_from_constexprs() -> None:
    def body(x: Vec, WARPS: tl.constexpr) -> None:
        tl.cta.sqrt(x, x)

    kernel = tl.kernel(threads=lambda c: (32 * c["WARPS"],))(body)
    assert kernel.signature(D("f32", (8,)), WARPS=3).block == (96, 1, 1)
    with pytest.raises(tl.ArgumentError, match="threads must be a positive int"):
        kernel.signature(D("f32", (8,)), WARPS=0)
