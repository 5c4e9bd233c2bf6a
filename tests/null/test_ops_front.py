"""null tier: the operator library's front end: the registry's listing, broadcasting and
coalescing, type promotion, and argument errors that name the argument."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.emulated import Device

from tile_mlir import op_table, ops
from tile_mlir.ops import coalesce as layout
from tile_mlir.ops import promotion, strategy
from tile_mlir.ops.activations import __all__ as activations
from tile_mlir.ops.coalesce import Coalesced, coalesce, contiguous_strides, expand_strides
from tile_mlir.ops.functions import __all__ as functions
from tile_mlir.ops.programs.elementwise import Strategy
from tile_mlir.ops.promotion import SCALAR, TENSOR, ZERO_DIM, Typed, result_type
from tile_mlir.ops.rope import __all__ as rope_functions

ROPE_OPS = [name for name in rope_functions if name != "rope_cache"]

# --------------------------------------------------------------- the registry


LIBRARY_SIZE = 82
"""Seed 004's whole family: part 1's 47, the 14 activations, 3 fused gated ones, RoPE's five,
dropout, alibi and sinusoidal; the five reductions; the five fused row ops (issue 12)."""
REDUCTIONS = ["sum", "amax", "amin", "prod", "mean"]
ROW_OPS = ["softmax", "log_softmax", "rms_norm", "layer_norm", "fused_add_rms_norm"]


def test_list_prints_every_op() -> None:
    out = subprocess.run([sys.executable, "-m", "tile_mlir.ops", "--list"], check=True,
                         capture_output=True, text=True).stdout.splitlines()
    assert len(out) == LIBRARY_SIZE
    names = [line.split()[0] for line in out]
    assert names == [op.name for op in ops.list_ops()]
    assert names[:72] == [op.name for op in op_table.library_ops()]
    assert sorted(names) == sorted([*functions, *activations, *ROPE_OPS, "dropout", "alibi",
                                    "sinusoidal", *REDUCTIONS, *ROW_OPS])
    add = next(line for line in out if line.startswith("add "))
    assert "arity=2" in add and "float8_e4m3fn" in add and "int64" in add
    families = [op.family for op in op_table.library_ops()]
    assert families == sorted(families, key=op_table.FAMILIES.index)
    assert all(line.split()[2] == "family=reduction" for line in out[72:77])
    assert all(line.split()[2] == "family=rows" for line in out[77:])


def test_every_listed_op_is_a_function() -> None:
    for op in ops.list_ops():
        assert callable(getattr(ops, op.name)), op.name
        assert ops.__all__.count(op.name) == 1


# ------------------------------------------------------------- broadcasting


def _view(*shapes: tuple[int, ...]) -> Coalesced:
    out = layout.broadcast_shapes(shapes)
    strides = [contiguous_strides(out)] + [
        expand_strides(s, contiguous_strides(s), out) for s in shapes]
    return coalesce(out, strides)


B, H, S, D, M, N = 2, 3, 5, 7, 11, 13


@pytest.mark.parametrize(("shapes", "shape", "strides"), [
    # seed 004's table: what each broadcast pattern coalesces to
    (((B, S, D), (B, S, D)), (B * S * D,), ((1,), (1,), (1,))),
    (((B, S, D), (1, 1, D)), (B * S, D), ((D, 1), (D, 1), (0, 1))),
    (((B, S, D), (B, S, 1)), (B * S, D), ((D, 1), (D, 1), (1, 0))),
    (((B, H, S, S), (1, 1, S, S)), (B * H, S * S), ((S * S, 1), (S * S, 1), (0, 1))),
    (((B, H, S, S), (B, 1, 1, S)), (B, H * S, S),
     ((H * S * S, S, 1), (H * S * S, S, 1), (S, 0, 1))),
    (((M, 1), (1, N)), (M, N), ((N, 1), (1, 0), (0, 1))),
    # a scalar-like operand, and a tensor of one element
    (((M, N), ()), (M * N,), ((1,), (1,), (0,))),
    (((1, 1), (1,)), (1,), ((1,), (1,), (1,))),
])
def test_coalescing(shapes: tuple[tuple[int, ...], ...], shape: tuple[int, ...],
                    strides: tuple[tuple[int, ...], ...]) -> None:
    view = _view(*shapes)
    assert view.shape == shape
    assert view.strides == strides


def test_coalescing_keeps_a_transposed_input_strided() -> None:
    out = (M, N)
    transposed = (1, M)  # x.T of an (N, M) array
    view = coalesce(out, [contiguous_strides(out), transposed])
    assert view.shape == (M, N) and view.strides == ((N, 1), (1, M))
    sliced = coalesce((M, N), [(N, 1), (2 * N, 1)])  # every other row
    assert sliced.shape == (M, N) and sliced.strides[1] == (2 * N, 1)


def test_broadcast_error_names_the_argument() -> None:
    with pytest.raises(layout.BroadcastError, match=r"argument 'other' \(3, 4\)"):
        layout.broadcast_shapes([(2, 3), (3, 4)], ["argument 'input'", "argument 'other'"])


def test_stride_classes_and_index_width() -> None:
    assert layout.stride_classes((4096, 1)) == ("?32", "1")
    assert layout.stride_classes((6, 0)) == ("?2", "0")
    assert layout.stride_classes((3,)) == ("?1",)  # a strided innermost dim
    small = Coalesced((1000,), ((1,), (1,)))
    assert layout.fits_32_bits(small, [0, 0], 4096)
    big = Coalesced((1 << 31,), ((1,), (1,)))
    assert not layout.fits_32_bits(big, [0, 0], 4096)
    reaching = Coalesced((8, 8), ((8, 1), (1 << 29, 1)))  # a stride that reaches past 2^31
    assert not layout.fits_32_bits(reaching, [0, 0], 4096)
    reversed_rows = Coalesced((300, 63), ((63, 1), (-64, 1)))  # CuPy's x[::-1, 1:]
    assert not layout.fits_32_bits(reversed_rows, [0, 19137], 4096)


def test_pieces() -> None:
    assert layout.pieces(Coalesced((1 << 20,), ((1,),)), 4096) == ("flat", 0)
    assert layout.pieces(Coalesced((64, 4096), ((4096, 1),)), 8192) == ("blocks", 4096)
    assert layout.pieces(Coalesced((4, 1 << 20), ((1 << 20, 1),)), 4096) == ("rows", 0)


# --------------------------------------------------------------- promotion


@pytest.mark.parametrize(("operands", "dtype"), [
    # what torch.result_type gives
    ([Typed("f16", TENSOR), Typed("f32", SCALAR)], "f16"),
    ([Typed("i32", TENSOR), Typed("f32", SCALAR)], "f32"),
    ([Typed("i32", TENSOR), Typed("i64", SCALAR)], "i32"),
    ([Typed("bool", TENSOR), Typed("i64", SCALAR)], "i64"),
    ([Typed("bool", TENSOR), Typed("bool", SCALAR)], "bool"),
    ([Typed("f16", TENSOR), Typed("bf16", TENSOR)], "f32"),
    ([Typed("i32", TENSOR), Typed("i64", ZERO_DIM)], "i32"),
    ([Typed("f16", TENSOR), Typed("f32", ZERO_DIM)], "f16"),
    ([Typed("i64", TENSOR), Typed("f16", ZERO_DIM)], "f16"),
    ([Typed("i32", TENSOR), Typed("i64", TENSOR)], "i64"),
    ([Typed("i32", ZERO_DIM), Typed("f32", SCALAR)], "f32"),
    ([Typed("f8e4m3", TENSOR), Typed("f32", SCALAR)], "f8e4m3"),
])
def test_result_type(operands: list[Typed], dtype: str) -> None:
    assert result_type(operands) == dtype


def test_scalar_dtypes() -> None:
    assert [promotion.scalar_dtype(v) for v in (True, 3, 2.5)] == ["bool", "i64", "f32"]


# ----------------------------------------------------------- argument errors


def test_errors_name_the_argument(device: Device) -> None:
    x = device.array(np.ones((3, 4), np.float32))
    y = device.array(np.ones((2, 4), np.float32))
    with pytest.raises(ValueError, match="argument 'other'"):
        ops.add(x, y)
    with pytest.raises(TypeError, match="argument 'other' must be an array or a number"):
        ops.mul(x, "2")
    with pytest.raises(TypeError, match="bitwise_and is not defined on float32"):
        ops.bitwise_and(x, x)
    with pytest.raises(TypeError, match="argument 'condition' must be a bool array"):
        ops.where(x, x, 0.0)
    with pytest.raises(TypeError, match="argument 'mask' must be a bool array"):
        ops.masked_fill(x, x, 1.0)
    with pytest.raises(ValueError, match="argument 'out' has shape"):
        ops.exp(x, out=y)
    with pytest.raises(ValueError, match="at least one of 'min' or 'max'"):
        ops.clamp(x)
    with pytest.raises(ValueError, match="rounding_mode"):
        ops.div(x, x, rounding_mode="nearest")
    with pytest.raises(TypeError, match=r"exp is not defined on float64 \(argument 'input'"):
        ops.exp(np.ones(3))
    mask = device.array(np.ones((3, 4), bool))
    ops.sub(x, 1)
    ops.sub(x, 1)  # a plan for a Python int, on the fast path: True is an int to Python
    for a, b, name in ((x, True, "other"), (mask, 1.5, "input"), (x, mask, "other"),
                       (False, x, "input")):
        with pytest.raises(TypeError, match=f"sub: argument '{name}' is a bool"):
            ops.sub(a, b)
    out = device.array(np.full((3, 4), 7.0, np.float32))
    with pytest.raises(TypeError, match="sub: argument 'other' is a bool"):
        ops.sub(x, True, out=out)
    assert (out.numpy() == 7.0).all()


def test_integer_errors(device: Device) -> None:
    i = device.array(np.arange(6, dtype=np.int32))
    with pytest.raises(ValueError, match="negative integer powers"):
        ops.pow(i, -1)
    with pytest.raises(OverflowError, match="argument 'other'"):
        ops.add(i, 1 << 40)
    with pytest.raises(TypeError, match="argument 'out' is int32"):
        ops.exp(i, out=device.array(np.zeros(6, np.int32)))


def test_overlapping_out_is_refused(device: Device) -> None:
    x = device.array(np.arange(16, dtype=np.float32))
    shifted = x.view((15,), (1,), offset=1)
    head = x.view((15,), (1,))
    with pytest.raises(ValueError, match="overlaps argument 'input'"):
        ops.neg(head, out=shifted)


# ---------------------------------------------------------------- strategies


def test_tuned_choices_are_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's file over the package's shipped one over the default."""
    monkeypatch.setenv("TILE_MLIR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(strategy, "SHIPPED", tmp_path / "shipped")
    strategy._choices.cache_clear()
    choice = Strategy(128, 32, 8, 8)
    assert strategy.choose("binary_arith", "bf16", 1 << 24, "sm_90") == strategy.default(1 << 24)
    shipped = Strategy(512, 16, 1, 1)
    strategy.save("sm_90", {strategy.key("binary_arith", "bf16", 1 << 25): shipped},
                  {"device": "test"}, shipped=True)
    assert (tmp_path / "shipped" / "sm_90.json").exists()
    assert strategy.choose("binary_arith", "bf16", 1 << 24, "sm_90") == shipped
    path = strategy.save("sm_90", {strategy.key("binary_arith", "bf16", 1 << 25): choice},
                         {"device": "test"})
    assert path.parent == tmp_path and path.name == "ops-tuning-sm_90.json"
    assert strategy.choose("binary_arith", "bf16", 1 << 24, "sm_90") == choice  # same class
    assert strategy.choose("binary_arith", "bf16", 1 << 20, "sm_90") != choice
    assert strategy.choose("binary_arith", "f32", 1 << 24, "sm_90") != choice
    assert strategy.choose("binary_arith", "bf16", 1 << 24, "sm_80") != choice
    strategy.force(Strategy(256, 1, 1, 1))
    try:
        assert strategy.choose("unary_math", "f32", 10, None).vector_bytes == 1
    finally:
        strategy.force(None)
    strategy._choices.cache_clear()


def test_a_devices_choices_are_read_over_its_chips(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The package's file for a device model over its chip's; the user's over both; a
    device of the same chip without a file of its own reads the chip's."""
    monkeypatch.setenv("TILE_MLIR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(strategy, "SHIPPED", tmp_path / "shipped")
    strategy._choices.cache_clear()
    h200 = strategy.target("sm_90", "NVIDIA H200")
    h100 = strategy.target("sm_90", "NVIDIA H100 80GB HBM3")
    assert (h200, h100) == ("sm_90-nvidia-h200", "sm_90-nvidia-h100-80gb-hbm3")
    assert strategy.chip_of(h200) == strategy.chip_of("sm_90") == "sm_90"
    assert strategy.target("sm_90", "  ") == "sm_90"
    chip, model, mine = Strategy(512, 16, 1, 1), Strategy(256, 8, 2, 2), Strategy(128, 16, 8, 8)
    add, exp = strategy.key("binary_arith", "bf16", 1 << 24), strategy.key("unary_math",
                                                                            "f32", 1 << 24)
    strategy.save("sm_90", {add: chip, exp: chip}, {"device": "test"}, shipped=True)
    strategy.save(h200, {add: model}, {"device": "test"}, shipped=True)
    assert (tmp_path / "shipped" / "sm_90-nvidia-h200.json").is_file()
    assert strategy.choose("binary_arith", "bf16", 1 << 24, h200) == model
    assert strategy.choose("unary_math", "f32", 1 << 24, h200) == chip  # the chip's below
    assert strategy.choose("binary_arith", "bf16", 1 << 24, h100) == chip
    assert strategy.choose("binary_arith", "bf16", 1 << 24, "sm_80-nvidia-a100") == \
        strategy.default(1 << 24)
    path = strategy.save(h200, {exp: mine}, {"device": "test"})
    assert path.name == "ops-tuning-sm_90-nvidia-h200.json"
    assert strategy.choose("unary_math", "f32", 1 << 24, h200) == mine
    assert strategy.choose("unary_math", "f32", 1 << 24, h100) == chip  # not the H100's
    # a user's file for the chip alone (tunings before the files named the model) is
    # kept: over the package's files, under the user's for the target
    legacy, older = Strategy(256, 16, 8, 8), Strategy(512, 8, 2, 2)
    strategy.save("sm_90", {add: legacy, exp: older}, {"device": "test"})
    assert strategy.find("binary_arith", "bf16", 1 << 24, h200) == \
        strategy.Found(legacy, add, tmp_path / "ops-tuning-sm_90.json")
    assert strategy.choose("unary_math", "f32", 1 << 24, h200) == mine
    assert strategy.choose("binary_arith", "bf16", 1 << 24, h100) == legacy
    assert strategy.choose("binary_arith", "bf16", 1 << 24, "sm_90") == legacy
    strategy._choices.cache_clear()


def test_explain_names_an_elementwise_ops_strategy_and_its_source(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The strategy `choose` gives, and the key and file it came from (the package's file
    for the device, the chip's, the user's), or that it is the default or forced."""
    from tile_mlir.ops import elementwise

    monkeypatch.setenv("TILE_MLIR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(strategy, "SHIPPED", tmp_path / "shipped")
    strategy._choices.cache_clear()
    h200 = "sm_90-nvidia-h200"
    try:
        strategy.save("sm_90", {"binary_arith/bf16/2^24": Strategy(512, 16, 1, 1),
                                "op:softplus/bf16/2^24": Strategy(128, 16, 4, 4)},
                      {"device": "test"}, shipped=True)
        strategy.save(h200, {"binary_arith/bf16/2^24": Strategy(128, 16, 2, 2)},
                      {"device": "test"}, shipped=True)
        text = elementwise.explain("add", (4096, 4096), "bf16", h200)
        assert text.startswith("add bf16 4096x4096: staged 128x2 of 16 B on "
                               "sm_90-nvidia-h200: 128 threads a CTA, 2 round(s)")
        assert text.endswith("size class 2^24; tuned: binary_arith/bf16/2^24 in the "
                             "package's shipped/sm_90-nvidia-h200.json")
        assert elementwise.explain("add", (4096, 4096), "bf16", "sm_90").startswith(
            "add bf16 4096x4096: vector 512x1 of 16 B on sm_90")
        assert elementwise.explain("softplus", (1 << 24,), "bf16", h200).endswith(
            "tuned: op:softplus/bf16/2^24 in the package's shipped/sm_90.json")
        # a gated op's result is half its input: 2^24 of it, not 2^25
        gated = elementwise.explain("silu_and_mul", (4096, 8192), "bf16", h200)
        assert "16777216 elements, size class 2^24; the default" in gated
        mine = strategy.save(h200, {"unary_math/f32/2^16": Strategy(256, 8, 1, 1)}, {})
        assert elementwise.explain("exp", (1 << 16,), "f32", h200).endswith(
            f"tuned: unary_math/f32/2^16 in {mine}")
        assert elementwise.explain("exp", (300,), "f32", None).endswith(
            "without a GPU (no tuned choices): 128 threads a CTA, 1 round(s) of 16-byte "
            "accesses a thread; 300 elements, size class <2^14; the default for its size "
            "(no tuned choice)")
        assert elementwise.explain("exp", (0, 5), "f32", h200).endswith("nothing is launched")
        strategy.force(Strategy(256, 1, 1, 1))
        try:
            assert elementwise.explain("exp", (300,), "f32", h200).endswith(
                "forced (strategy.force: the autotuner's candidates)")
        finally:
            strategy.force(None)
        for op, shape, dtype, message in [
                ("fill", (4,), "f32", "is not one of the library's elementwise ops"),
                ("add", (4,), "i8", "add takes f32, f16, bf16"),
                ("add", (4, -1), "f32", "has a negative size"),
                ("silu_and_mul", (4, 7), "f32", "must be even; got shape [4, 7]")]:
            with pytest.raises(ValueError, match=re.escape(message)):
                elementwise.explain(op, shape, dtype, h200)
    finally:
        strategy._choices.cache_clear()


def test_the_command_line_explains_an_elementwise_op(capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    """--explain for an elementwise op with --target (the package's own files), and
    errors that name the option."""
    from tile_mlir.ops.__main__ import main

    assert main(["--explain", "add:4096x4096:bf16", "--target", "sm_90-nvidia-h200"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("add bf16 4096x4096: ") and "on sm_90-nvidia-h200" in out
    assert "binary_arith/bf16/2^24 in the package's tuned/" in out
    for argv, message in [(["--explain", "add:4:bf16", "--target", "h200"],
                           "--target: 'h200' is not a chip (sm_90)"),
                          (["--explain", "addd:4:bf16"],
                           "--explain: 'addd' is neither a fused row op"),
                          (["--explain", "add:4:i8", "--target", "sm_90"],
                           "explain: add takes f32")]:
        with pytest.raises(SystemExit):
            main(argv)
        assert message in capsys.readouterr().err


def test_the_command_line_explains_a_row_op_for_a_target(capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    """--explain for a fused row op takes --target's device model: an H200's largest CTAs
    of 16-bit rows prefetch the rows ahead (rows.CTA_AHEAD_BYTES), an H100's do not."""
    from tile_mlir.ops.__main__ import main

    said = {}
    for target in ("sm_90-nvidia-h200", "sm_90-nvidia-h100-80gb-hbm3"):
        assert main(["--explain", "softmax:8192x16384:bf16", "--target", target]) == 0
        said[target] = capsys.readouterr().out
    assert "a row of 16384 fits one CTA of 512 threads" in said["sm_90-nvidia-h200"]
    assert "prefetches the row 256 rows on" in said["sm_90-nvidia-h200"]
    assert "prefetches" not in said["sm_90-nvidia-h100-80gb-hbm3"]


def test_the_shipped_choices_are_candidates_of_known_keys() -> None:
    """Each file under ops/tuned names real (family, dtype, size class) keys (or a
    family's rows keys), or (op, dtype, size class) keys of an op of the registry, each
    with a strategy the autotuner tries, and says where it came from."""
    import json

    from tile_mlir.dtypes import DTYPES
    from tile_mlir.ops import tune

    files = sorted(strategy.SHIPPED.glob("*.json"))
    assert files, "the package ships tuned choices (ops/tuned/<chip>.json)"
    families = {row.family for row in op_table.ELEMENTWISE.values()}
    classes = {name for _, name in strategy.SIZE_CLASSES}
    for path in files:
        data = json.loads(path.read_text())
        assert {"device", "command"} <= set(data["meta"]), path
        choices = strategy._read(path)
        assert choices and len(choices) == len(data["choices"]), path
        for key, choice in choices.items():
            family, dtype, size = key.split("/")
            if family.startswith(strategy.OP_PREFIX):
                row = op_table.ELEMENTWISE[family.removeprefix(strategy.OP_PREFIX)]
                assert dtype in row.dtypes, key
            else:
                assert family.removesuffix(strategy.ROWS) in families, key
            assert dtype in DTYPES and size in classes, key
            assert choice in tune.CANDIDATES, (key, choice)


def test_size_classes_and_defaults() -> None:
    sizes = (1, (1 << 14) - 1, 1 << 14, 1 << 16, (1 << 20) - 1, (1 << 24) - 1, 1 << 24,
             (1 << 26) - 1, 1 << 26, 1 << 30)
    assert [strategy.size_class(n) for n in sizes] \
        == ["<2^14", "<2^14", "2^14", "2^16", "2^19", "2^23", "2^24", "2^24", "2^26", "2^26"]
    assert strategy.default(1 << 28) == Strategy(256, 16, 4, 4)  # staged
    assert strategy.default(1 << 20) == Strategy(256, 16, 2, 2)
    assert strategy.default((1 << 24) - 1) == Strategy(256, 16, 2, 2)  # 4 rounds: slower
    assert strategy.default(1 << 24) == Strategy(256, 16, 4, 4)
    assert strategy.default(1 << 16) == Strategy(128, 16, 1, 1)  # 128 CTAs of f32


def test_a_call_is_tuned_under_its_inputs_dtype() -> None:
    """The key the autotuner times an op under (family, the inputs' dtype): a comparison
    of fp8 tensors is an fp8 key, not its bool result's; mixed inputs, the promoted one."""
    import ml_dtypes

    from tile_mlir.ops import args
    from tile_mlir.ops.elementwise import In, resolve

    f8 = args.describe(np.zeros(4, ml_dtypes.float8_e4m3fn), "input")
    f32 = args.describe(np.zeros(4, np.float32), "other")
    flags = args.describe(np.zeros(4, bool), "condition")
    assert f8 is not None and f32 is not None and flags is not None
    lt = resolve("lt", [In(f8), In(f8)])
    assert (lt.result, lt.tuned_dtype) == ("bool", "f8e4m3")
    assert resolve("add", [In(f8), In(f32)]).tuned_dtype == "f32"
    assert resolve("where", [In(flags), In(f8), In(f8)]).tuned_dtype == "f8e4m3"


def test_float64_is_refused_by_every_path() -> None:
    """Whatever form a call takes (a division by a number multiplies, pow by a number),
    float64 is refused with a TypeError before any kernel is made."""
    x, mask = np.ones(4), np.ones(4, bool)
    with pytest.raises(TypeError, match="float64"):
        ops.div(x, 2.0)
    with pytest.raises(TypeError, match="float64"):
        ops.pow(x, 0.5)
    with pytest.raises(TypeError, match="float64"):
        ops.add(x, x)
    with pytest.raises(TypeError, match="float64"):
        ops.masked_fill(x, mask, 1.0)


def test_importing_the_library_imports_no_mlir() -> None:
    """`import tile_mlir.ops` (and what needs no kernel: listing, a host RoPE cache, an
    error from the argument checks) works where any import of MLIR fails."""
    code = ("import sys; sys.modules['mlir'] = None\n"
            "import numpy as np\n"
            "import tile_mlir.ops as ops\n"
            "ops.list_ops(); ops.rope_cache('neox', rotary_dim=8, max_position=4, base=1e4)\n"
            "try:\n    ops.exp(np.ones(3))\nexcept TypeError:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('mlir') and sys.modules[m]))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout.strip()
    assert out == "[]"
