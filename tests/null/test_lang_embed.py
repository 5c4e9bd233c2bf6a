"""null tier: kernels built inside a host compiler's own Context and module, with no state
of tile_mlir.lang's left behind."""

from __future__ import annotations

from typing import Annotated

import pytest
from mlir import ir

import tile_mlir
import tile_mlir.lang as tl
from tile_mlir.dialects import tile

D = tl.ArrayDesc


@tl.kernel(threads=128)
def axpy(x: Annotated[tl.Tensor, "T", ("N",)], y: Annotated[tl.Tensor, "T", ("N",)],
         a: tl.f32, TILE: tl.constexpr = 512) -> None:
    piece = slice(tl.block_id() * TILE, (tl.block_id() + 1) * TILE)
    tl.cta.elementwise("fma", y[piece], x[piece], a, y[piece])


F32 = axpy.signature(D("f32", (1000,)), D("f32", (1000,)), 2.0)
F16 = axpy.signature(D("f16", (1000,)), D("f16", (1000,)), 2.0, TILE=1024)


def _funcs(module: ir.Module) -> list[str]:
    names = []
    for gpu_module in module.body.operations:
        for op in gpu_module.operation.regions[0].blocks[0].operations:
            names.append(ir.StringAttr(op.operation.attributes["sym_name"]).value)
    return names


def test_two_specializations_in_one_host_module() -> None:
    context = ir.Context()
    with context, ir.Location.unknown():
        module = ir.Module.create()
    assert axpy.emit(F32, into=module) == "axpy"
    assert axpy.emit(F16, into=module) == "axpy_1"
    assert axpy.emit(F32, into=module, name="axpy_f32") == "axpy_f32"
    assert _funcs(module) == ["axpy", "axpy_1", "axpy_f32"]
    assert context.is_registered_operation("tile.elementwise")
    assert "f16" in str(module) and module.operation.verify()
    program = tile_mlir.compile(module, cubin=False)
    assert set(program.kernels) == {"axpy", "axpy_1", "axpy_f32"}
    assert program.ptx["kernels"].count(".entry") == 3


def test_a_gpu_module_keeps_one_index_width() -> None:
    wide = axpy.signature(D("f32", (1000,), (1 << 31,)), D("f32", (1000,)), 2.0)
    assert wide.index_bits == 64
    context = ir.Context()
    with context, ir.Location.unknown():
        module = ir.Module.create()
    axpy.emit(F32, into=module)
    with pytest.raises(ValueError, match=r"gpu\.module @kernels has 32-bit indices"):
        axpy.emit(wide, into=module)
    assert axpy.emit(wide, into=module, gpu_module="wide") == "axpy"
    text = str(module)
    assert "gpu.module @wide {" in text and "gpu.module @kernels attributes" in text


def test_two_contexts() -> None:
    first, second = ir.Context(), ir.Context()
    a = axpy.build(F32, context=first)
    b = axpy.build(F16, context=second)
    assert a.context == first and b.context == second
    assert str(a).count("gpu.func") == 1 and "xf16" in str(b) and "xf16" not in str(a)
    assert a.operation.verify() and b.operation.verify()


def test_a_host_context_with_the_dialect_loaded_already() -> None:
    context = ir.Context()
    tile.load(context)
    module = axpy.build(F32, context=context)
    assert "tile.elementwise" in str(module)


def test_no_state_is_left_behind() -> None:
    axpy.build(F32)
    with pytest.raises(tl.ProgramError, match=r"inside a @tl\.kernel function"):
        tl.block_id()
    assert ir.Location.current is None and ir.Context.current is None  # nothing on the stack


def test_a_specialization_of_another_kernel_is_refused() -> None:
    @tl.kernel
    def other(x: tl.Tensor) -> None:
        tl.cta.sqrt(x, x)

    with pytest.raises(ValueError, match=r"specializes .*axpy, not .*other"):
        other.ir(F32)
