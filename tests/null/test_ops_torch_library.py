"""torch.compile support (ops/torch_library.py), null tier.

Without torch: the op table covers the library, the custom ops' names and schemas,
and `import tile_mlir.ops` leaves torch alone. With torch (a CPU build will do;
these skip without it): the fake implementations against torch's own results'
meta on fake CUDA tensors, torch.compile(fullgraph=True) tracing the ops into one
graph (a backend that records the graph and runs nothing), and, in a namespace of
their own with torch stand-ins for the library functions, every form end to end
(torch.library.opcheck, and compiled against eager), the part-2 forms included.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tile_mlir import op_table, ops
from tile_mlir.ops import torch_library as tl
from tile_mlir.ops.torch_library import OPS, Entry, variants

# ----------------------------------------------------------- without torch


def test_importing_the_library_imports_no_torch() -> None:
    code = "import sys, tile_mlir.ops\nprint('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0 and result.stdout.strip() == "False", result.stderr


def test_torch_ops_without_torch_says_so() -> None:
    code = ("import sys; sys.modules['torch'] = None\n"
            "import tile_mlir.ops as ops\n"
            "try:\n    ops.torch_ops()\nexcept ImportError as e:\n    print('ImportError')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=False)
    assert result.stdout.strip() == "ImportError", result.stderr


def test_the_table_covers_the_library() -> None:
    names = [e.name for e in OPS]
    # + the reductions and the fused row ops
    assert len(names) == len(set(names)) == len(op_table.library_ops()) + 10
    assert set(names) == set(ops.__all__) - {"list_ops", "torch_ops", "rope_cache", "manual_seed",
                                             "get_rng_state", "set_rng_state", "fuse",
                                             "FuseError"}
    assert all(callable(getattr(ops, n)) for n in names)


def _schemas(entry: Entry) -> dict[str, str]:
    form = entry.form
    return {v.name: v.schema(form.selected_returns if v.selected else form.returns)
            for v in variants(entry)}


def _entry(name: str) -> Entry:
    return next(e for e in OPS if e.name == name)


def test_a_number_operand_makes_a_custom_op_of_its_own() -> None:
    assert _schemas(_entry("add")) == {
        "add": "(Tensor input, Tensor other, Scalar alpha=1) -> Tensor",
        "add_ts": "(Tensor input, Scalar other, Scalar alpha=1) -> Tensor",
        "add_st": "(Scalar input, Tensor other, Scalar alpha=1) -> Tensor",
    }
    assert sorted(_schemas(_entry("where"))) == ["where", "where_ss", "where_st", "where_ts"]
    assert _schemas(_entry("clamp"))["clamp_ts"] == \
        "(Tensor input, Tensor? min=None, Scalar? max=None) -> Tensor"
    assert _schemas(_entry("lerp")) == {
        "lerp": "(Tensor input, Tensor end, Tensor weight) -> Tensor",
        "lerp_s": "(Tensor input, Tensor end, Scalar weight) -> Tensor",
    }
    assert _schemas(_entry("sum")) == {
        "sum": "(Tensor input, int[1]? dim=None, bool keepdim=False, ScalarType? dtype=None) "
               "-> Tensor"}
    assert _schemas(_entry("div"))["div_ts"] == \
        "(Tensor input, Scalar other, str? rounding_mode=None) -> Tensor"


def test_part_2_forms() -> None:
    assert _schemas(_entry("gelu")) == {"gelu": "(Tensor input, str approximate='none') -> Tensor"}
    assert _schemas(_entry("silu_and_mul")) == {"silu_and_mul": "(Tensor input) -> Tensor"}
    assert _schemas(_entry("rope_neox")) == {"rope_neox": (
        "(Tensor query, Tensor key, Tensor positions, Tensor cos_sin_cache, int rotary_dim)"
        " -> (Tensor, Tensor)")}
    assert _schemas(_entry("dropout")) == {
        "dropout": "(Tensor input, float p=0.5, bool training=True, int? seed=None, "
                   "int offset=0) -> Tensor",
        "dropout_mask": "(Tensor input, float p=0.5, bool training=True, int? seed=None, "
                        "int offset=0) -> (Tensor, Tensor)",
    }
    assert _schemas(_entry("alibi")) == {"alibi": (
        "(int num_heads, int seq_len, ScalarType dtype, Tensor device) -> Tensor")}


# -------------------------------------------------------------- with torch


@pytest.fixture(scope="module")
def torch() -> Any:
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tops(torch: Any) -> Any:
    return ops.torch_ops()


@pytest.fixture
def fake(torch: Any) -> Iterator[Any]:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        yield mode


def _t(torch: Any, shape: tuple[int, ...], dtype: str) -> Any:
    return torch.empty(shape, dtype=getattr(torch, dtype), device="cuda")


# (op, args as (shape, dtype) for tensors or numbers, kwargs): torch gives the same meta
CASES: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("exp", (((4, 8), "bfloat16"),), {}),
    ("exp", (((4, 8), "int32"),), {}),  # integers: float32
    ("sqrt", (((3,), "int64"),), {}),
    ("abs", (((4, 8), "int32"),), {}),
    ("round", (((4, 8), "float16"),), {}),
    ("isnan", (((4, 8), "float16"),), {}),
    ("logical_not", (((4, 8), "int32"),), {}),
    ("bitwise_not", (((4, 8), "bool"),), {}),
    ("add", (((4, 8), "bfloat16"), ((8,), "float32")), {}),
    ("add", (((4, 8), "float16"), 2.5), {"alpha": 2}),
    ("add", (((4, 8), "int32"), 2.5), {}),  # a float number makes integers float32
    ("add", (((4, 8), "float16"), ((), "float32")), {}),  # 0-d: lower priority
    ("add", (((4, 1), "int32"), ((1, 8), "int64")), {}),
    ("sub", (((4, 8), "float32"), ((4, 8), "float32")), {"alpha": 0.5}),
    ("mul", (((2, 4, 8), "bfloat16"), ((4, 1), "bfloat16")), {}),
    ("div", (((4, 8), "int32"), 2), {}),
    ("div", (((4, 8), "int32"), ((8,), "int32")), {"rounding_mode": "trunc"}),
    ("div", (((4, 8), "int64"), 3), {"rounding_mode": "floor"}),
    ("remainder", (((4, 8), "float16"), 3), {}),
    ("pow", (((4, 8), "int32"), 2.5), {}),
    ("pow", (2, ((4, 8), "float16")), {}),
    ("pow", (((4, 8), "bfloat16"), ((4, 8), "float32")), {}),
    ("floor_divide", (((4, 8), "int32"), 2), {}),
    ("lerp", (((4, 8), "float16"), ((4, 8), "float16"), 0.25), {}),
    ("lerp", (((4, 8), "float32"), ((4, 8), "float32"), ((8,), "float32")), {}),
    ("maximum", (((4, 8), "float16"), ((4, 8), "float32")), {}),
    ("minimum", (((4, 8), "bool"), ((4, 8), "bool")), {}),
    ("eq", (((4, 8), "bfloat16"), 0.5), {}),
    ("lt", (((4, 8), "int32"), ((4, 8), "float32")), {}),
    ("bitwise_xor", (((4, 8), "int32"), 7), {}),
    ("logical_or", (((4, 8), "float32"), ((4, 8), "int64")), {}),
    ("where", (((4, 8), "bool"), ((4, 8), "float16"), 0.0), {}),
    ("where", (((4, 1), "bool"), 1.0, ((8,), "bfloat16")), {}),
    ("where", (((4, 8), "bool"), ((4, 8), "int32"), ((4, 8), "float32")), {}),
    ("clamp", (((4, 8), "float16"),), {"min": -1.0, "max": 1}),
    ("clamp", (((4, 8), "int32"),), {"max": 3}),
    ("clamp", (((4, 8), "bfloat16"), ((8,), "float32"), ((4, 1), "float32")), {}),
    ("masked_fill", (((4, 8), "float16"), ((4, 8), "bool"), 2), {}),
    ("nan_to_num", (((4, 8), "bfloat16"),), {"posinf": 1.0}),
    ("sum", (((4, 8, 16), "bfloat16"),), {"dim": -1}),
    ("mean", (((4, 8, 16), "float32"),), {"dim": (0, 2), "keepdim": True}),
    ("amax", (((4, 8, 16), "float16"),), {}),
    ("prod", (((4, 8), "float32"),), {"dim": 0}),
    ("amin", (((4, 8), "float32"),), {"dim": [1], "keepdim": True}),
]


def _args(torch: Any, spec: tuple[Any, ...]) -> list[Any]:
    return [_t(torch, *a) if isinstance(a, tuple) else a for a in spec]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_fake_results_have_torchs_meta(torch: Any, tops: Any, fake: Any,
                                       case: tuple[str, tuple[Any, ...], dict[str, Any]]) -> None:
    op, spec, kwargs = case
    args = _args(torch, spec)
    got = getattr(tops, op)(*args, **kwargs)
    want = getattr(torch, op)(*args, **kwargs)
    print(op, [getattr(a, "dtype", a) for a in args], kwargs, "->", got.dtype, tuple(got.shape))
    assert (got.dtype, got.shape, got.device) == (want.dtype, want.shape, want.device)
    assert got.is_contiguous()


def test_fake_results_follow_the_library_where_torch_has_no_rule(torch: Any, tops: Any,
                                                                  fake: Any) -> None:
    x = _t(torch, (4, 8), "bfloat16")
    e4m3 = _t(torch, (4, 8), "float8_e4m3fn")
    assert tops.add(e4m3, x).dtype == torch.bfloat16  # torch refuses fp8 with another float
    assert tops.exp(e4m3).dtype == torch.float8_e4m3fn
    assert tops.maximum(x, 0.0).dtype == torch.bfloat16  # a number where torch takes tensors
    assert tops.gt(2, x).dtype == torch.bool
    host = torch.tensor(2.0).to("cpu")  # a 0-d host tensor: a number beside CUDA tensors
    assert tops.mul(host, x).device.type == "cuda"


def test_fake_errors_name_the_argument(torch: Any, tops: Any, fake: Any) -> None:
    with pytest.raises(TypeError, match="exp is not defined on float64"):
        tops.exp(_t(torch, (3,), "float64"))
    with pytest.raises(TypeError, match="argument 'input': element type uint8"):
        tops.neg(_t(torch, (3,), "uint8"))
    with pytest.raises(TypeError, match="bitwise_and is not defined on float32"):
        tops.bitwise_and(_t(torch, (3,), "float32"), _t(torch, (3,), "int32"))
    with pytest.raises(TypeError, match="reductions take"):
        tops.sum(_t(torch, (3,), "int32"))
    with pytest.raises(ValueError, match="argument 'dim': 2 is out of range"):
        tops.sum(_t(torch, (3, 4), "float32"), dim=2)


def test_wrappers_check_their_arguments(torch: Any, tops: Any, fake: Any) -> None:
    x = _t(torch, (3,), "float32")
    with pytest.raises(TypeError, match="needs at least one tensor"):
        tops.add(1.0, 2.0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'beta'"):
        tops.add(x, x, beta=2)
    with pytest.raises(TypeError, match="missing required argument 'other'"):
        tops.mul(x)
    with pytest.raises(TypeError, match="takes 2 positional arguments"):
        tops.add(x, x, 2)  # alpha is keyword-only, as in torch
    with pytest.raises(AttributeError, match="not an op registered"):
        tops.conv2d  # noqa: B018


def _recording_backend(torch: Any, graphs: list[Any]) -> Callable[..., Any]:
    """Records the graph and runs no kernel: the compiled function runs the graph on fake
    tensors and returns empty tensors of the results' meta (CPU tests cannot run the
    CUDA kernels)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    def backend(gm: Any, example_inputs: list[Any]) -> Callable[..., Any]:
        graphs.append(gm)

        def run(*args: Any) -> tuple[Any, ...]:
            with FakeTensorMode() as mode:
                metas = gm(*(mode.from_tensor(a) if isinstance(a, torch.Tensor) else a
                             for a in args))
            return tuple(torch.empty(m.shape, dtype=m.dtype, device=m.device) for m in metas)

        return run

    return backend


def _targets(gm: Any) -> list[str]:
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def test_compile_traces_every_form_into_one_graph(torch: Any, tops: Any) -> None:
    def block(x: Any, bias: Any, mask: Any) -> tuple[Any, ...]:
        y = tops.where(tops.gt(x, 0), tops.exp(x), tops.add(x, bias, alpha=2))
        y = tops.lerp(tops.clamp(y, min=-4.0, max=4.0), x, 0.25)
        y = tops.masked_fill(tops.nan_to_num(y), mask, 0.0)
        z = tops.div(tops.pow(y, 2), 3, rounding_mode="floor")
        return tops.sum(y, dim=-1), tops.amax(z, -1, keepdim=True), tops.logical_not(mask)

    graphs: list[Any] = []
    compiled = torch.compile(block, backend=_recording_backend(torch, graphs), fullgraph=True)
    x, bias, mask = torch.randn(4, 8), torch.randn(8), torch.rand(4, 8) < 0.5
    total, peak, inverse = compiled(x, bias, mask)
    assert len(graphs) == 1
    targets = _targets(graphs[0])
    print("\n".join(targets))
    assert all(t.startswith("tile_mlir.") for t in targets), targets
    assert len(targets) == 13
    assert (total.shape, peak.shape, inverse.dtype) == ((4,), (4, 1), torch.bool)


def test_compile_with_dynamic_shapes(torch: Any, tops: Any) -> None:
    def f(x: Any, y: Any) -> Any:
        return tops.mean(tops.mul(tops.add(x, y, alpha=2), 0.5), dim=0)

    graphs: list[Any] = []
    compiled = torch.compile(f, backend=_recording_backend(torch, graphs), fullgraph=True,
                             dynamic=True)
    assert compiled(torch.randn(5, 3), torch.randn(3)).shape == (3,)
    assert compiled(torch.randn(7, 6), torch.randn(6)).shape == (6,)
    assert len(graphs) == 1  # one graph for every shape


# ------------------------------------------ every form, run, with stand-ins


def _stand_ins(torch: Any) -> dict[str, Callable[..., Any]]:
    """torch versions of library functions, with the library's signatures, so that the
    custom ops run on CPU tensors."""
    return {**_part_1_stand_ins(torch), **_part_2_stand_ins(torch)}


def _part_1_stand_ins(torch: Any) -> dict[str, Callable[..., Any]]:

    def add(input: Any, other: Any, *, alpha: Any = 1) -> Any:  # noqa: A002
        return input + alpha * other

    def where(condition: Any, input: Any, other: Any) -> Any:  # noqa: A002
        return torch.where(condition, input, other)

    def clamp(input: Any, min: Any = None, max: Any = None) -> Any:  # noqa: A002
        return torch.clamp(input, min, max)

    def total(x: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
        return torch.sum(x, dim=dim, keepdim=keepdim, dtype=dtype) if dim is not None else \
            torch.sum(x, dtype=dtype).reshape([1] * x.dim() if keepdim else [])

    return {"add": add, "where": where, "clamp": clamp, "sum": total}


def _part_2_stand_ins(torch: Any) -> dict[str, Callable[..., Any]]:
    F = torch.nn.functional

    def gelu(input: Any, approximate: str = "none") -> Any:  # noqa: A002
        return F.gelu(input, approximate=approximate)

    def silu_and_mul(x: Any) -> Any:
        n = x.shape[-1] // 2
        return F.silu(x[..., :n]) * x[..., n:]

    def rope_neox(query: Any, key: Any, positions: Any, *, cos_sin_cache: Any,
                  rotary_dim: int) -> Any:
        return _rope_reference(torch, query, key, positions=positions, cache=cos_sin_cache,
                               rotary_dim=rotary_dim)

    def dropout(x: Any, p: float = 0.5, training: bool = True,  # noqa: PLR0917 - its signature
                seed: Any = None, offset: int = 0, return_mask: bool = False) -> Any:
        if not training or p == 0:
            mask = torch.ones_like(x, dtype=torch.bool)
            return (x, mask) if return_mask else x  # x itself: the op must copy it
        generator = torch.Generator().manual_seed((seed or 0) + offset)
        mask = torch.rand(x.shape, generator=generator) >= p
        out = torch.where(mask, x / (1 - p), 0.0).to(x.dtype)
        return (out, mask) if return_mask else out

    def alibi(num_heads: int, seq_len: int, dtype: Any, device: Any) -> Any:
        slopes = 2.0 ** (-8.0 * torch.arange(1, num_heads + 1) / num_heads)
        return (slopes[:, None] * torch.arange(seq_len)).to(dtype=dtype, device=device)

    def prelu(input: Any, weight: Any) -> Any:  # noqa: A002
        return F.prelu(input, weight)

    return {"gelu": gelu, "silu_and_mul": silu_and_mul, "rope_neox": rope_neox, "dropout": dropout,
            "alibi": alibi, "prelu": prelu}


def _rope_reference(torch: Any, query: Any, key: Any, *, positions: Any, cache: Any,
                    rotary_dim: int) -> tuple[Any, Any]:
    """NeoX rotation of (tokens, heads * rotary_dim) arrays by cache rows [cos | sin]."""
    cos, sin = cache[positions].float().chunk(2, dim=-1)

    def rotate(x: Any) -> Any:
        x1, x2 = x.view(x.shape[0], -1, rotary_dim).float().chunk(2, dim=-1)
        c, s = cos[:, None, :], sin[:, None, :]
        return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).to(x.dtype).view(x.shape)

    return rotate(query), rotate(key)


STAND_IN_NAMESPACE = "tile_mlir_torch_library_test"


@pytest.fixture(scope="module")
def stand_ins(torch: Any) -> Any:
    functions = _stand_ins(torch)
    entries = [e for e in OPS if e.name in functions]
    return tl.register(entries, STAND_IN_NAMESPACE, functions.get)


def _opcheck_cases(torch: Any) -> list[tuple[str, list[Any], dict[str, Any]]]:
    x = torch.randn(4, 8)
    cache = torch.randn(16, 8)
    return [
        ("add", [x, torch.randn(8)], {}),
        ("add_ts", [x, 2], {}),
        ("add_st", [1.5, x, 3], {}),
        ("where_ss", [x > 0, 1.0, 0.0], {}),
        ("where_ts", [x > 0, x, 0], {}),
        ("clamp_ss", [x, -0.5, None], {}),
        ("clamp", [x, torch.zeros(8), torch.ones(4, 1)], {}),
        ("sum", [x, [1], True], {}),
        ("sum", [x], {}),
        ("gelu", [x, "tanh"], {}),
        ("silu_and_mul", [torch.randn(3, 4, 16)], {}),
        ("rope_neox", [torch.randn(5, 2 * 8), torch.randn(5, 8), torch.tensor([0, 3, 1, 9, 15]),
                       cache, 8], {}),
        ("dropout", [x, 0.25, True, 7, 0], {}),
        ("dropout", [x, 0.25, False, 7, 0], {}),
        ("dropout_mask", [x, 0.5, True, 3, 1], {}),
        ("dropout_mask", [x, 0.5, False, 3, 1], {}),
        ("alibi", [4, 6, torch.float16, torch.empty(0)], {}),
        ("prelu", [torch.randn(2, 3, 5), torch.rand(3)], {}),
    ]


def test_every_form_passes_opcheck(torch: Any, stand_ins: Any) -> None:
    """Schema, fake against real, autograd registration, AOT dispatch: torch's own checks."""
    for name, args, kwargs in _opcheck_cases(torch):
        op = getattr(stand_ins.ops, name).default
        print(name, op._schema)
        torch.library.opcheck(op, args, kwargs)


def test_every_form_compiles_to_eagers_results(torch: Any, stand_ins: Any) -> None:
    t = stand_ins
    cache = torch.randn(32, 8)

    def block(x: Any, q: Any, k: Any, positions: Any) -> tuple[Any, ...]:
        h = t.silu_and_mul(t.add(x, 1.0, alpha=0.5))
        h = t.where(t.gelu(h, approximate="tanh") > 0, h, 0.0)
        h = t.clamp(h, max=2.0)
        q2, k2 = t.rope_neox(q, k, positions, cos_sin_cache=cache, rotary_dim=8)
        out, mask = t.dropout(h, 0.5, True, 11, 0, return_mask=True)
        bias = t.alibi(2, 5, torch.float32, q.device)
        w = t.prelu(h[None], torch.full((3,), 0.1))
        return t.sum(out, dim=-1), mask, q2, k2, bias, w, t.dropout(h, training=False)

    args = (torch.randn(3, 6), torch.randn(5, 16), torch.randn(5, 8), torch.tensor([0, 1, 2, 30, 4]))
    want = block(*args)
    got = torch.compile(block, backend="aot_eager", fullgraph=True)(*args)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g, w)


def test_traced_numbers_reach_the_fakes(torch: Any, stand_ins: Any) -> None:
    """A number that changes between calls is traced (a SymFloat), not specialized."""
    compiled = torch.compile(lambda x, s: stand_ins.add(x, s, alpha=s), backend="aot_eager",
                             fullgraph=True)
    x = torch.randn(3)
    for s in (2.0, 3.0, 4.0):
        torch.testing.assert_close(compiled(x, s), x + s * s)


# ------------------------------------------------------------ fused functions


def test_a_fused_function_makes_a_custom_op_per_choice() -> None:
    def chain(x: Any, b: Any, s: Any = 0.5, *, approximate: str = "none") -> Any:
        return ops.mul(ops.gelu(ops.add(x, b), approximate=approximate), s)

    fused = ops.fuse(chain)
    call, schema = tl.fused_entries(fused)
    name = fused.spec_name
    schemas = _schemas(schema)
    assert len(schemas) == 7  # a tensor or a number for each of x, b, s; one tensor at least
    assert schemas[name] == "(Tensor x, Tensor b, Tensor s, str approximate='none') -> Tensor"
    assert schemas[f"{name}_tts"] == \
        "(Tensor x, Tensor b, Scalar s, str approximate='none') -> Tensor"
    assert [p.default for p in call.params][2:] == [0.5, "none"]  # the wrapper fills them


def test_fused_functions_the_schemas_cannot_take() -> None:
    with pytest.raises(TypeError, match="at most 6"):
        tl.fused_entries(ops.fuse(lambda a, b, c, d, e, f, g: ops.add(a, b)))
    def untyped(x: Any, *, mode: Any = None) -> Any:
        return ops.exp(x)

    with pytest.raises(TypeError, match="parameter 'mode' has no default of bool"):
        tl.fused_entries(ops.fuse(untyped))


def test_a_fused_op_is_one_node_of_the_graph(torch: Any, tops: Any) -> None:
    fused = ops.fuse(lambda x, b: ops.mul(ops.silu(ops.add(x, b)), 2), name="silu_chain")
    op = tops.fuse(fused)
    assert tops.fuse(fused) is op and fused.torch_op is op  # registered once
    def block(x: Any, b: Any) -> Any:
        return op(x, b)

    graphs: list[Any] = []
    compiled = torch.compile(block, backend=_recording_backend(torch, graphs), fullgraph=True)
    result = compiled(torch.randn(4, 8, dtype=torch.bfloat16), torch.randn(8))
    assert (result.dtype, tuple(result.shape)) == (torch.float32, (4, 8))  # bf16 + f32
    assert _targets(graphs[0]) == [f"tile_mlir.{fused.spec_name}.default"]


def test_a_fused_fake_follows_shapes_and_numbers(torch: Any, tops: Any, fake: Any) -> None:
    op = tops.fuse(lambda x, s: ops.gt(ops.silu_and_mul(x), s))
    got = op(_t(torch, (3, 5, 16), "float16"), 0.25)
    assert (got.dtype, tuple(got.shape)) == (torch.bool, (3, 5, 8))
    got = op(_t(torch, (2, 4), "bfloat16"), _t(torch, (2, 1), "float32"))
    assert (got.dtype, tuple(got.shape)) == (torch.bool, (2, 2))
    with pytest.raises(ops.FuseError, match="sum cannot be fused"):
        tops.fuse(lambda x: ops.sum(ops.exp(x)))(_t(torch, (3,), "float32"))


def test_a_fused_op_with_dynamic_shapes(torch: Any, tops: Any) -> None:
    op = tops.fuse(lambda x, y: ops.add(ops.mul(x, 0.5), y))
    def block(x: Any, y: Any) -> Any:
        return op(x, y)

    graphs: list[Any] = []
    compiled = torch.compile(block, backend=_recording_backend(torch, graphs), fullgraph=True,
                             dynamic=True)
    assert compiled(torch.randn(5, 3), torch.randn(3)).shape == (5, 3)
    assert compiled(torch.randn(7, 6), torch.randn(6)).shape == (7, 6)
    assert len(graphs) == 1
