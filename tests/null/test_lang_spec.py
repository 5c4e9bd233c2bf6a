"""null tier: what a kernel is specialized on, computed from descriptions of arrays (no
MLIR, no memory): dtypes, stride classes, offsets, index width, static dims, constexprs,
overlaps; the kernel's argument list; and the argument checks, which name the argument."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Annotated, Any

import pytest

import tile_mlir.lang as tl
from tile_mlir.lang.spec import Role

D = tl.ArrayDesc


@tl.kernel(threads=128)
def scale(x: Annotated[tl.Tensor, "T", ("M", "N")], y: Annotated[tl.Tensor, "T", ("M", "N")],
          s: tl.f32, TILE: tl.constexpr = 64) -> None:
    tl.cta.mul(y, x, s)


@tl.kernel(threads=lambda c: c["W"] * 32, static=("N",), index_bits=None)
def rows(x: Annotated[tl.Tensor, "f16", ("M", "N")], out: Annotated[tl.Tensor, "f32", ("M",)],
         W: tl.constexpr = 4) -> None:
    tl.cta.sum(out, x, axes=(-1,))


def test_contiguous_aligned_arrays() -> None:
    spec = scale.signature(D("f32", (8, 100)), D("f32", (8, 100)), 2.0)
    x, _, s = spec.params
    assert isinstance(x, tl.TensorSpec) and isinstance(s, tl.ScalarSpec)
    assert (x.dtype, x.shape, x.dims, x.strides, x.offset, x.memref) == \
        ("f32", (None, None), ("M", "N"), ("?4", "1"), False, False)
    assert s.dtype == "f32"
    assert spec.constexprs == (("TILE", 64),) and spec.static == ()
    assert spec.block == (128, 1, 1) and spec.index_bits == 32 and spec.overlaps == ()


def test_stride_classes() -> None:
    transposed = D("f32", (8, 100), (1, 8))
    broadcast = D("f32", (8, 100), (0, 1))
    column = D("f32", (8, 1), (6, 7))  # a size-1 dim's stride never matters: class 0
    assert scale.signature(transposed, transposed, 1.0).params[0].strides == ("1", "?8")  # type: ignore[union-attr]
    assert scale.signature(broadcast, broadcast, 1.0).params[0].strides == ("0", "1")  # type: ignore[union-attr]
    spec = scale.signature(column, D("f32", (8, 1)), 1.0)
    assert spec.params[0].strides == ("?2", "0")  # type: ignore[union-attr]
    assert spec.params[1].strides == ("1", "0")  # type: ignore[union-attr]
    # divisibility: the largest power of two dividing the stride, at most 32
    for stride, cls in ((6, "?2"), (12, "?4"), (1024, "?32"), (3, "?1")):
        got = scale.signature(D("f32", (4, 4), (stride, 1)), D("f32", (4, 4)), 1.0)
        assert got.params[0].strides == (cls, "1")  # type: ignore[union-attr]


def test_misaligned_pointer_gets_an_offset() -> None:
    aligned = scale.signature(D("f32", (4, 4), pointer=0x1000), D("f32", (4, 4)), 1.0)
    shifted = scale.signature(D("f32", (4, 4), pointer=0x1004), D("f32", (4, 4)), 1.0)
    assert not aligned.params[0].offset and shifted.params[0].offset  # type: ignore[union-attr]
    assert aligned != shifted and hash(aligned) != hash(shifted)
    assert scale.arguments(D("f32", (4, 4), pointer=0x100C), D("f32", (4, 4), pointer=0x2000),
                           1.5) == [0x1000, 4, 4, 4, 3, 0x2000, 4, 1.5]


def test_roles_share_a_named_dim() -> None:
    spec = scale.signature(D("f32", (4, 4), pointer=0x1004), D("f32", (4, 4)), 1.0)
    assert spec.roles == (
        Role("array", 0, name="x"), Role("size", 0, 0, name="M"), Role("size", 0, 1, name="N"),
        Role("stride", 0, 0, 4, "x_s0"), Role("offset", 0, name="x_offset"),
        Role("array", 1, name="y"), Role("stride", 1, 0, 4, "y_s0"),
        Role("scalar", 2, name="s"))


def test_index_width() -> None:
    big = 1 << 31
    assert scale.signature(D("f32", (2, 8)), D("f32", (2, 8)), 1.0).index_bits == 32
    assert scale.signature(D("f32", (2, big // 2)), D("f32", (2, big // 2)), 1.0).index_bits == 64
    far = D("f32", (2, 8), (big, 1))  # a small array whose last element is far away
    assert scale.signature(far, D("f32", (2, 8)), 1.0).index_bits == 64
    backwards = D("f32", (2, 8), (-8, 1))  # a reversed view: offsets below its base
    assert scale.signature(backwards, D("f32", (2, 8)), 1.0).index_bits == 64


def test_static_dims_and_constexprs() -> None:
    spec = rows.signature(D("f16", (10, 256)), D("f32", (10,)), W=2)
    x, out = spec.params
    assert spec.static == (("N", 256),) and spec.block == (64, 1, 1)
    assert x.shape == (None, 256) and x.dims == ("M", None)  # type: ignore[union-attr]
    assert out.shape == (None,) and out.dims == ("M",)  # type: ignore[union-attr]
    assert rows.signature(D("f16", (10, 512)), D("f32", (10,))) != \
        rows.signature(D("f16", (10, 256)), D("f32", (10,)))
    assert rows.signature(D("f16", (10, 256)), D("f32", (10,)), 4) == \
        rows.signature(D("f16", (10, 256)), D("f32", (10,)), W=4)


def test_fully_static_contiguous_arrays_are_memrefs() -> None:
    @tl.kernel(threads=32)
    def fixed(a: Annotated[tl.Tensor, "f32", (4, 8)]) -> None:
        tl.cta.sqrt(a, a)

    assert fixed.signature(D("f32", (4, 8))).params[0].memref  # type: ignore[union-attr]
    strided = fixed.signature(D("f32", (4, 8), (16, 1)))
    assert not strided.params[0].memref and strided.params[0].shape == (4, 8)  # type: ignore[union-attr]
    assert not fixed.signature(D("f32", (4, 8), pointer=8)).params[0].memref  # type: ignore[union-attr]


def test_overlapping_arrays() -> None:
    base = 0x10000
    spec = scale.signature(D("f32", (4, 4), pointer=base), D("f32", (4, 4), pointer=base + 32),
                           1.0)
    assert spec.overlaps == (("x", "y"),)
    apart = scale.signature(D("f32", (4, 4), pointer=base), D("f32", (4, 4), pointer=base + 64),
                            1.0)
    assert apart.overlaps == ()


def test_repr_is_readable_and_key_complete() -> None:
    spec = scale.signature(D("f32", (4, 4), pointer=4), D("f32", (4, 4)), 1.0, TILE=32)
    assert repr(spec) == ("<scale: x: f32[M, N] strides(?4, 1) +offset, y: f32[M, N] "
                          "strides(?4, 1), s: f32; TILE=32; block 128x1x1, i32>")
    assert "TILE', 32" in spec.key() and "'+offset'" not in spec.key()
    request = scale.request(spec)
    assert request.startswith(f"tile_mlir.lang kernel {scale.info.qualname} @scale\n")
    assert scale.info.qualname.endswith("test_lang_spec.scale")
    assert spec.key() in request


@pytest.mark.parametrize(("args", "kwargs", "message"), [
    ((D("f32", (4, 4)), D("f32", (4, 5)), 1.0), {},
     "argument 'y': dim 1 (N) is 5, but N is 4 from argument 'x'"),
    ((D("f32", (4, 4)), D("f16", (4, 4)), 1.0), {},
     "argument 'y': has dtype f16, but T is f32 from argument 'x'"),
    ((D("f32", (4, 4)), D("f32", (4, 4, 1)), 1.0), {},
     "argument 'y': expected 2 dims ('M', 'N'), got shape (4, 4, 1)"),
    ((D("f32", (4, 4)), D("f32", (4, 4))), {}, "scale(): missing argument 's'"),
    ((D("f32", (4, 4)),) * 2 + (1.0, 8, 9), {},
     "scale() takes 4 arguments (x, y, s, TILE), got 5"),
    ((D("f32", (4, 4)),) * 2 + (1.0,), {"tile": 8}, "scale() has no parameter 'tile'"),
    ((D("f32", (4, 4)), 3.0, 1.0), {}, "argument 'y': expected an array, got float"),
    ((D("f32", (4, 4)),) * 2 + ("x",), {}, "argument 's': expected a f32 scalar, got str"),
    ((D("f32", (4, 4)),) * 2 + (1.0,), {"TILE": [1, object()]},
     "argument 'TILE': a constexpr is an int, float, bool, str or a tuple of them"),
    ((D("f32", (4, 4), pointer=2),) * 2 + (1.0,), {},
     "argument 'x': the pointer 0x2 is not aligned to its 4-byte elements"),
])
def test_argument_errors_name_the_argument(args: tuple[object, ...], kwargs: dict[str, object],
                                           message: str) -> None:
    with pytest.raises(tl.ArgumentError) as info:
        scale.signature(*args, **kwargs)  # the call
    assert message in str(info.value)
    head, line = str(info.value).splitlines()[:2]
    assert head.startswith(f"{Path(__file__).resolve()}:")
    assert head.split(": error: ", 1)[1].startswith(("argument '", "scale()"))
    assert line.endswith("# the call") and isinstance(info.value, tl.ProgramError)
    assert info.value.__traceback__ is not None
    assert len(list(_frames(info.value.__traceback__))) <= 2  # no frames from tile_mlir


def _frames(tb: object) -> list[object]:
    frames = []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next  # type: ignore[attr-defined]
    return frames


def test_fixed_dims_and_dtypes_are_checked() -> None:
    with pytest.raises(tl.ArgumentError, match="argument 'x': expected f16 elements, got f32"):
        rows.signature(D("f32", (4, 256)), D("f32", (4,)))
    with pytest.raises(tl.ArgumentError, match=r"argument 'out': dim 0 \(M\) is 5"):
        rows.signature(D("f16", (4, 256)), D("f32", (5,)))


def test_bad_annotations_are_refused_when_used() -> None:
    def unannotated(x) -> None:  # type: ignore[no-untyped-def]
        pass

    with pytest.raises(TypeError, match="parameter 'x' needs an annotation"):
        tl.kernel(unannotated).signature(D("f32", (1,)))
    with pytest.raises(TypeError, match="unknown dtype 'f23'"):
        tl.Tensor["f23", ("N",)]
    with pytest.raises(TypeError, match="static dim 'K' is not a dim name"):
        tl.kernel(static=("K",))(scale.fn).signature(D("f32", (1, 1)), D("f32", (1, 1)), 1.0)


@tl.kernel(threads=64)
def sized(n: tl.i32, x: Annotated[tl.Tensor, "f32", ("n",)],
          y: Annotated[tl.Tensor, "f32", ("n",)]) -> None:
    tl.cta.copy(y, x)


def test_an_integer_parameter_named_like_a_dim_is_its_size() -> None:
    """Sizes may come as arguments of their own, ahead of the arrays: no size argument is
    added for the dim, and the arrays are checked against the number."""
    x = D("f32", (10,), (2,), pointer=0x1004)
    spec = sized.signature(10, x, D("f32", (10,)))
    assert spec.roles == (Role("scalar", 0, name="n"), Role("array", 1, name="x"),
                          Role("stride", 1, 0, 2, "x_s0"), Role("offset", 1, name="x_offset"),
                          Role("array", 2, name="y"))
    assert sized.arguments(10, x, D("f32", (10,), pointer=0x2000)) == \
        [10, 0x1000, 2, 1, 0x2000]
    assert "%0 = arith.index_cast %n : i32 to index" in sized.ir(10, x, D("f32", (10,)))
    with pytest.raises(tl.ArgumentError, match=r"argument 'x': dim 0 \(n\) is 10, but n is 9 "
                                               "from argument 'n'"):
        sized.signature(9, x, D("f32", (10,)))

    @tl.kernel
    def after(x: Annotated[tl.Tensor, "f32", ("n",)], n: tl.i64) -> None:
        tl.cta.sqrt(x, x)

    with pytest.raises(tl.ArgumentError, match="argument 'n' is 9, but n is 10 from argument "
                                               "'x'"):
        after.signature(x, 9)
    assert [r.kind for r in after.signature(x, 10).roles] == \
        ["array", "stride", "offset", "scalar"]


def test_a_size_parameter_is_an_integer_and_not_static() -> None:
    def floating(x: Annotated[tl.Tensor, "f32", ("n",)], n: tl.f32) -> None:
        tl.cta.sqrt(x, x)

    with pytest.raises(TypeError, match="parameter 'n' is named like a dim, so it gives that "
                                        "dim's size: an integer"):
        tl.kernel(floating).signature(D("f32", (4,)), 4.0)
    with pytest.raises(TypeError, match="dim 'n' is given by its parameter"):
        tl.kernel(static=("n",))(sized.fn).signature(4, D("f32", (4,)), D("f32", (4,)))


@tl.kernel(threads=32)
def open_kernel(*, SCALE: tl.constexpr, **arrays: Any) -> None:
    for copy in arrays["y"]:
        tl.cta.mul(copy, arrays["x"], SCALE)


def _open_spec(pointers: int) -> tl.Specialization:
    x = tl.TensorSpec("x", "f32", (None,), ("n",), ("1",))
    y = tl.TensorSpec("y", "f32", (None,), ("n",), ("?4",), offset=True, pointers=pointers)
    return tl.Specialization(open_kernel.info.qualname, (x, y), (("SCALE", 2.0),), (),
                             (32, 1, 1), 32)


def test_open_kernels_take_the_parameters_their_specialization_names() -> None:
    """A `**` kernel is built from Specializations its caller makes (the library's
    kernels); a tensor there may come with several pointers, its layout passed once."""
    spec = _open_spec(2)
    assert [(r.kind, r.name) for r in spec.roles] == [
        ("array", "x"), ("size", "n"), ("array", "y"), ("array", "y_1"), ("stride", "y_s0"),
        ("offset", "y_offset")]
    assert "y: f32[n] strides(?4) +offset x2" in repr(spec)
    assert open_kernel.request(spec).startswith("tile_mlir.lang kernel ")
    text = open_kernel.ir(spec)
    assert text.count("memref.reinterpret_cast") == 3 and text.count("tile.elementwise") == 2
    assert "%y: memref<1xf32> {llvm.noalias}, %y_1: memref<1xf32> {llvm.noalias}" in text
    with pytest.raises(tl.ArgumentError, match="open_kernel\\(\\) takes the parameters its "
                                               "Specialization names"):
        open_kernel.signature(D("f32", (4,)), D("f32", (4,)), SCALE=1.0)
    assert _open_spec(1) != spec and "x2" not in repr(_open_spec(1))


def test_kernels_pickle_by_reference() -> None:
    """A kernel (and what holds one: a library program) goes to worker processes."""
    assert pickle.loads(pickle.dumps(scale)) is scale
    assert pickle.loads(pickle.dumps(_open_spec(2))) == _open_spec(2)

    @tl.kernel
    def local(x: tl.Tensor) -> None:
        tl.cta.sqrt(x, x)

    with pytest.raises(pickle.PicklingError, match=r"it is not the kernel .*<locals>\.local "
                                                   r"names"):
        pickle.dumps(local)


SHORT_FORM = '''
from __future__ import annotations
import tile_mlir.lang as tl

@tl.kernel(threads=64, static=("N",))
def copy(src: tl.Tensor["f32", ("N",)], dst: tl.Tensor["f32", ("N",)]):
    tl.cta.copy(dst, src)
'''


def test_short_form_annotations(tmp_path: object) -> None:
    """`tl.Tensor["f32", ("N",)]`, as docs and examples write it, means what Annotated says."""
    namespace: dict[str, object] = {}
    exec(compile(SHORT_FORM, "<short form>", "exec"), namespace)
    kernel = namespace["copy"]
    assert isinstance(kernel, tl.KernelFunction)
    spec = kernel.signature(D("f32", (64,)), D("f32", (64,)))
    assert spec.static == (("N", 64),) and spec.params[0].memref  # type: ignore[union-attr]
    with pytest.raises(tl.ArgumentError, match="argument 'dst': expected f32"):
        kernel.signature(D("f32", (64,)), D("f16", (64,)))


NO_MLIR = textwrap.dedent("""
    import sys
    sys.modules["mlir"] = None  # any import of MLIR now fails
    from typing import Annotated, Any
    import tile_mlir.lang as tl

    @tl.kernel(threads=64)
    def k(x: Annotated[tl.Tensor, "f32", ("N",)], TILE: tl.constexpr = 8):
        tl.cta.sqrt(x, x)

    spec = k.signature(tl.ArrayDesc("f32", (100,)))
    print(repr(spec))
    print(k.request(spec).splitlines()[0])
    print(tl.cdiv(100, 8))
    assert not [m for m in sys.modules if m.startswith("mlir") and sys.modules[m]]
    assert "tile_mlir.lang.builder" not in sys.modules
    print("ok")
""")


def test_importing_and_specializing_need_no_mlir() -> None:
    result = subprocess.run([sys.executable, "-c", NO_MLIR], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "<k: x: f32[N] strides(1); TILE=8; block 64x1x1, i32>",
        "tile_mlir.lang kernel __main__.k @k", "13", "ok"]
