"""gpu tier: the fused row ops (issue 12) on the GPU against float64 NumPy, and against
torch's own error on the same input.

Every op x dtype x row length in LENGTHS (fewer rows for the long ones), with the
planner's strategy (a group of lanes, a CTA, a cluster of CTAs on sm_90, two passes for
2^20); fused_add_rms_norm's residual checked bit for bit; softmax's out= poisoned (NaN)
before the run; rows with a stride, misaligned rows, empty inputs, special values; and
every strategy forced on rows the planner would give another one (the cluster lowering
on a short row, two passes on a row a CTA holds), so that each is run here whatever
the planner picks. Each test prints the errors it measured.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support import rows_check as ref

from tile_mlir import ops
from tile_mlir.ops import rows

pytestmark = pytest.mark.gpu

OPS = ("softmax", "log_softmax", "rms_norm", "layer_norm", "fused_add_rms_norm")
DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
LENGTHS = (1, 7, 1000, 1024, 4097, 65536, 262144, 1 << 20)


def _torch() -> Any:
    return pytest.importorskip("torch")


def rows_for(n: int) -> int:
    """Rows for a length: many short rows (several per CTA, a partial last CTA), a few
    long ones."""
    return max(3, min(301, (1 << 22) // n))


def _host(t: Any) -> np.ndarray:
    return np.asarray(t.detach().double().cpu().numpy())


def _inputs(torch: Any, shape: tuple[int, ...], dtype: str, op: str) -> dict[str, Any]:
    t = getattr(torch, DTYPES[dtype])
    scale = 8.0 if op.endswith("softmax") else 2.0
    x = (torch.randn(shape, device="cuda") * scale).to(t)
    if op == "layer_norm":
        x = (x.float() + 3.0).to(t)  # a mean to take away
    n = shape[-1]
    return {"x": x, "w": torch.randn(n, device="cuda").to(t),
            "b": torch.randn(n, device="cuda").to(t), "r": torch.randn(shape, device="cuda").to(t)}


def _error(got: np.ndarray, want: np.ndarray) -> float:
    """The largest absolute error where a finite value is expected."""
    finite = np.isfinite(want)
    return float(np.abs(got[finite] - want[finite]).max()) if finite.any() else 0.0


def run_op(op: str, dtype: str, shape: tuple[int, ...], eps: float = 1e-5) -> str:
    """One op on fresh inputs: ours against float64 NumPy within its bound, and no worse
    than four times torch's largest error plus an ulp (of the dtype; softmax two) of the
    largest value. Returns a line to print."""
    torch = _torch()
    F = torch.nn.functional
    a = _inputs(torch, shape, dtype, op)
    x, w, b, r = a["x"], a["w"], a["b"], a["r"]
    n = shape[-1]
    x64 = _host(x)
    if op in ("softmax", "log_softmax"):
        out = torch.full_like(x, float("nan"))
        assert getattr(ops, op)(x, dim=-1, out=out) is out
        got, theirs = _host(out), _host(getattr(torch, op)(x, -1))
        want = ref.softmax(x64) if op == "softmax" else ref.log_softmax(x64)
        bound = ref.softmax_bound(want, n, dtype) if op == "softmax" else \
            ref.log_softmax_bound(x64, want, n, dtype)
    elif op == "rms_norm":
        got = _host(ops.rms_norm(x, (n,), w, eps))
        theirs = _host(F.rms_norm(x, (n,), w, eps))
        want = ref.rms_norm(x64, 1, _host(w), eps)
        bound = ref.norm_bound(want, n, dtype)
    elif op == "layer_norm":
        got = _host(ops.layer_norm(x, (n,), w, b, eps))
        theirs = _host(F.layer_norm(x, (n,), w, b, eps))
        want = ref.layer_norm(x64, 1, _host(w), _host(b), eps)
        bound = ref.norm_bound(want, n, dtype, np.abs(_host(b)) + 4.0)
    else:
        got, theirs, want = _fused_add(x, r, w, eps, dtype)
        bound = ref.norm_bound(want, n, dtype)
    worst = ref.check(got, want, bound, f"{op} {dtype} {shape}")
    if op == "softmax":
        ref.sums_to_one(got, n, dtype)
    ours, torch_error = _error(got, want), _error(theirs, want)
    largest = float(np.abs(want[np.isfinite(want)]).max()) if np.isfinite(want).any() else 0.0
    # softmax's largest value is 1 / the row's sum: the sum's error (each exp within 2 ulps)
    # is every output's, and one row's torch error may happen to be far below its bound (a
    # row of 2049 f32: ours 2.1 ulps of 0.71, torch's 0.14): two ulps, docs/ops-accuracy.md
    ulps = 2 if op == "softmax" else 1
    assert ours <= 4 * torch_error + ulps * ref.ULP[dtype] * largest, \
        f"{op} {dtype} {shape}: error {ours:.3g}, torch's {torch_error:.3g}"
    return (f"{op} {dtype} {shape}: max error {ours:.3g} (torch {torch_error:.3g}), "
            f"{worst:.2f} of the bound")


def _fused_add(x: Any, r: Any, w: Any, eps: float, dtype: str
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ours in place; the residual must be x + r in f32 rounded once to the dtype, bit for
    bit; x the RMSNorm of that."""
    torch = _torch()
    n = x.shape[-1]
    theirs = torch.nn.functional.rms_norm(x + r, (n,), w, eps)
    total = (x.cpu().float() + r.cpu().float()).to(x.dtype)
    assert ops.fused_add_rms_norm(x, r, w, eps) is None
    bits = torch.int32 if dtype == "f32" else torch.int16
    assert torch.equal(r.cpu().view(bits), total.view(bits)), \
        "the residual is not x + residual rounded to its dtype"
    want = ref.rms_norm(_host(total), 1, _host(w), eps)
    return _host(x), _host(theirs), want


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("op", OPS)
def test_every_op_dtype_and_length(op: str, dtype: str, n: int) -> None:
    m = rows_for(n)
    plan = rows.plan_for(m, n, rows.vector_width(n, dtype, []), 0,
                         itemsize=2 if dtype != "f32" else 4,
                         inputs=rows.inputs_of(op))
    print(run_op(op, dtype, (m, n)), f"[{plan.geometry.strategy}]")


ONE_VECTOR_TAILS = ((33, "f32"), (260, "f32"), (264, "bf16"), (264, "f16"))
"""Rows whose planned parts end in one vector (4 lanes of 33, 16 of 65 float4s, 16 of 33
8-element vectors), several rows a CTA: the null tier found layer norm's variance
counting that vector in every lane of its part (a slice cut to one element was taken for
a broadcast)."""


@pytest.mark.parametrize(("n", "dtype"), ONE_VECTOR_TAILS, ids=str)
@pytest.mark.parametrize("op", OPS)
def test_rows_ending_in_one_vector(op: str, n: int, dtype: str) -> None:
    m = 37
    plan = rows.plan_for(m, n, rows.vector_width(n, dtype, []), 0,
                         itemsize=2 if dtype != "f32" else 4,
                         inputs=rows.inputs_of(op))
    g = plan.geometry
    assert g.strategy == "warp" and g.rows > 1 and (n // g.vec) % g.lanes == 1, plan.reason
    print(run_op(op, dtype, (m, n)), f"[{g.lanes} lanes, {g.rows} rows a CTA]")


def test_long_rows_take_clusters_of_16_on_a_whole_hopper() -> None:
    """On an H100 or H200 (sm_90, 132 SMs or more) the planner's 2^18-element rows run in
    clusters of 16 CTAs (not portable: the runtime allows them as it loads the kernel)."""
    torch = _torch()
    props = torch.cuda.get_device_properties(0)
    whole = props.major >= 9 and props.multi_processor_count >= rows.SMS
    assert rows.largest_cluster(0) == (16 if whole else 8 if props.major >= 9 else 0)
    plan = rows.plan_for(4, 262144, 8, 0, itemsize=2)
    assert plan.geometry.ctas == (16 if whole else 8 if props.major >= 9 else 1), plan.reason
    for op in OPS:
        print(run_op(op, "bf16", (4, 262144)), plan.reason)


FORCED = [
    ("cluster", {"ctas": 2, "lanes": 128}, 1000),  # two warps a CTA, a partial last part
    ("cluster", {"ctas": 2}, 1000),  # a warp a CTA
    ("cluster", {"ctas": 4}, 4097),  # scalar accesses
    ("cluster", {"ctas": 8}, 65536),
    ("cluster", {"ctas": 16}, 4097),  # 16 CTAs (not portable), scalar accesses
    ("cluster", {"ctas": 16, "lanes": 1024}, 1000),  # most CTAs past the row's end
    ("cluster", {"ctas": 4, "early": 3}, 4097),  # weight parts read early, scalar accesses
    ("cluster", {"ctas": 2, "lanes": 128, "early": 16}, 1000),  # every part early, the last partial
    ("cta", {}, 1000),
    ("cta", {"early": 2}, 1000),
    ("cta", {"lanes": 1024}, 4096),
    ("warp", {"lanes": 4}, 7),
    ("warp", {"lanes": 16}, 1000),
    ("split", {}, 65536),  # chunks that divide the row
    ("split", {"lanes": 64, "parts": 2}, 4097),  # a short last chunk
    ("split", {"lanes": 128}, 1000),
]


@pytest.mark.parametrize(("strategy", "options", "n"), FORCED, ids=str)
@pytest.mark.parametrize("op", OPS)
def test_every_strategy_forced(op: str, strategy: str, options: dict[str, Any], n: int) -> None:
    with rows.forced(strategy, **options):
        for dtype in ("f32", "bf16"):
            print(run_op(op, dtype, (5, n)))


def test_rows_with_a_stride_and_misaligned() -> None:
    torch = _torch()
    for n in (1000, 4096, 65536):
        base = torch.randn(6, n + 72, device="cuda", dtype=torch.bfloat16)
        x = base[:, 8:8 + n]  # a row stride of n + 72; 16-byte aligned rows
        y = base[1:, 3:3 + n]  # misaligned: 2-byte accesses
        for view in (x, y):
            want = ref.softmax(_host(view))
            got = _host(ops.softmax(view, dim=-1))
            ref.check(got, want, ref.softmax_bound(want, n, "bf16"), f"strided {n}")
            w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
            got = _host(ops.rms_norm(view, (n,), w, 1e-6))
            want = ref.rms_norm(_host(view), 1, _host(w), 1e-6)
            ref.check(got, want, ref.norm_bound(want, n, "bf16"), f"strided rms {n}")
        before = _host(base)
        ops.log_softmax(x, out=x)  # in place, strided
        after = _host(base)
        assert np.array_equal(after[:, :8], before[:, :8])
        assert np.array_equal(after[:, 8 + n:], before[:, 8 + n:])


EDGE_LENGTHS = (1025, 4097, 8191, 32001, 50257)
"""Rows of odd length, read with edges (a CTA a row: 1025 to 8191; a cluster: 32001 and
50257, GPT-2's vocabulary)."""


@pytest.mark.parametrize("n", EDGE_LENGTHS)
@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_rows_that_start_unaligned_keep_16_byte_accesses(dtype: str, n: int) -> None:
    """softmax and log_softmax over rows of odd length, contiguous (each row at another
    alignment) and at an odd offset with out= at the same one (edges): against float64,
    out= poisoned, the elements around it untouched, and large logits, -inf and NaN
    placed in the head and tail of a row (its first and last elements)."""
    torch = _torch()
    t = getattr(torch, DTYPES[dtype])
    m = max(9, min(64, (1 << 22) // n))
    width = 16 // (4 if dtype == "f32" else 2)
    assert rows.plan_for(m, n, 1, 0, itemsize=16 // width, wide=width).geometry.edges
    for op in ("softmax", "log_softmax"):
        print(run_op(op, dtype, (m, n)))
    base = (torch.randn(m, n + 16, device="cuda") * 8).to(t)
    base[0, 3], base[1, 3 + n - 1] = 3e4, -3e4  # head and tail elements, large
    base[2, 3] = float("-inf")
    base[3, 3 + n - 1] = float("nan")
    x = base[:, 3:3 + n]  # rows at an odd offset, a stride of n + 16
    for op in ("softmax", "log_softmax"):
        poisoned = torch.full((m, n + 16), float("nan"), device="cuda", dtype=t)
        out = poisoned[:, 3:3 + n]  # the same alignment as x's rows: edges
        getattr(ops, op)(x, dim=-1, out=out)
        got, theirs = _host(out), _host(getattr(torch, op)(x, -1))
        x64 = _host(x)
        with np.errstate(invalid="ignore", over="ignore"):
            want = ref.softmax(x64) if op == "softmax" else ref.log_softmax(x64)
        assert np.array_equal(np.isnan(got), np.isnan(theirs)), f"{op}: NaN where torch's"
        bound = ref.softmax_bound(want, n, dtype) if op == "softmax" else \
            ref.log_softmax_bound(x64, want, n, dtype)
        ref.check(got, want, bound, f"{op} {dtype} {n} at an odd offset")
        around = _host(poisoned)
        assert np.isnan(around[:, :3]).all() and np.isnan(around[:, 3 + n:]).all(), \
            f"{op}: written outside out="


@pytest.mark.parametrize("n", EDGE_LENGTHS)
@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_norms_over_rows_that_start_unaligned(dtype: str, n: int, copies: bool) -> None:
    """The norms over rows of odd length (edges, the weight and bias split as each row
    is, or read from their copies: `copies`): against float64 and torch; then rows at an
    odd offset with the weight at an offset of its own."""
    torch = _torch()
    t = getattr(torch, DTYPES[dtype])
    m = max(9, min(64, (1 << 22) // n))
    width = 16 // (4 if dtype == "f32" else 2)
    plan = rows.plan_for(m, n, 1, 0, itemsize=16 // width,
                         wide=rows.edge_width("rms_norm", 16 // width))
    assert plan.geometry.edges, plan.reason
    assert ("copies" in rows.explain("layer_norm", (m, n), dtype)) == copies
    for op in ("rms_norm", "fused_add_rms_norm", "layer_norm"):
        print(run_op(op, dtype, (m, n)))
    base = torch.randn(m, n + 16, device="cuda", dtype=t)
    x = base[:, 3:3 + n]  # rows at an odd offset, a stride of n + 16
    w = torch.randn(n + 8, device="cuda", dtype=t)[5:5 + n]  # at an offset of its own
    got = _host(ops.rms_norm(x, (n,), w, 1e-5))
    want = ref.rms_norm(_host(x), 1, _host(w), 1e-5)
    ref.check(got, want, ref.norm_bound(want, n, dtype), f"rms_norm {dtype} {n} offsets")
    b = torch.randn(n + 8, device="cuda", dtype=t)[3:3 + n]
    got = _host(ops.layer_norm(x + 3, (n,), w, b, 1e-5))  # a mean to take away
    want = ref.layer_norm(_host(x + 3), 1, _host(w), _host(b), 1e-5)
    ref.check(got, want, ref.norm_bound(want, n, dtype, np.abs(_host(b)) + 4.0),
              f"layer_norm {dtype} {n} offsets")


@pytest.mark.parametrize("stack", [2, 3, 4])
def test_stacks_of_rows_with_edges(stack: int) -> None:
    """A CTA of 64 threads holding `stack` rows of odd length one after another
    (Geometry.stack): softmax, log_softmax, the norms (the fused add's residual bit for
    bit) and a held sum, against float64, row counts no multiple of the stack (the last
    CTA's extra rows are the last row again)."""
    torch = _torch()
    with rows.forced("cta", lanes=64, stack=stack):
        for dtype in ("f32", "bf16"):
            for m, n in ((9, 1025), (stack * 5 + 1, 999), (1, 2049)):
                for op in ("softmax", "log_softmax", "rms_norm", "layer_norm",
                           "fused_add_rms_norm"):
                    print(run_op(op, dtype, (m, n)))
                x = torch.randn(m, n, device="cuda", dtype=getattr(torch, DTYPES[dtype]))
                got = _host(ops.sum(x, dim=-1)).astype(np.float64)
                want = _host(x).astype(np.float64).sum(axis=-1)
                scale = np.abs(_host(x).astype(np.float64)).sum(axis=-1)
                assert np.all(np.abs(got - want) <= (1e-5 if dtype == "f32" else 8e-3) * scale
                              + 1e-6), (dtype, m, n)


@pytest.mark.parametrize(("m", "n", "dtype"), [
    (8195, 1025, "bf16"), (8193, 999, "bf16"), (8197, 257, "bf16"), (8194, 513, "bf16"),
    (8193, 257, "f32")], ids=str)
def test_planned_stacks_of_short_rows(m: int, n: int, dtype: str) -> None:
    """The planner's stacks (rows.STACKS: 4 rows a CTA of 32 or 64 threads, a row count no
    multiple of 4): softmax, log_softmax (poisoned outputs), RMSNorm and layer norm (stacked
    over bf16 rows of 257; f32 rows of 257 a warp a row, rows.SCALAR_WARP) and the held
    reductions against float64."""
    torch = _torch()
    size = 4 if dtype == "f32" else 2
    plan = rows.plan_for(m, n, 1, 0, itemsize=size, wide=16 // size,
                         stacks=rows.STACK_VALUES)
    assert plan.geometry.stack == rows.STACK_ROWS, plan.reason
    for op in ("softmax", "log_softmax", "rms_norm", "layer_norm"):
        print(run_op(op, dtype, (m, n)))
    x = torch.randn(m, n, device="cuda", dtype=getattr(torch, DTYPES[dtype]))
    x64 = _host(x).astype(np.float64)
    scale = np.abs(x64).sum(axis=-1)
    for name, want in (("sum", x64.sum(axis=-1)), ("mean", x64.mean(axis=-1)),
                       ("amax", x64.max(axis=-1)), ("amin", x64.min(axis=-1))):
        got = _host(getattr(ops, name)(x, dim=-1)).astype(np.float64)
        tol = (1e-5 if dtype == "f32" else 8e-3) * (scale / n if name == "mean" else scale)
        exact = name in ("amax", "amin")
        assert np.all(got == want) if exact else np.all(np.abs(got - want) <= tol + 1e-6), \
            (name, dtype, m, n)


@pytest.mark.parametrize(("m", "n", "dtype", "said"), [
    (8193, 257, "f32", "2 rows one after another"), (8194, 513, "f32", "of 64 threads"),
    (8197, 257, "bf16", "a warp, 8"), (8195, 513, "bf16", "a warp, 16"),
    (8195, 1025, "bf16", "of 128 threads"),
    (4099, 4097, "bf16", "of 512 threads"), (1025, 8191, "f32", "of 1024 threads"),
    (515, 32001, "f32", "a cluster of 8 CTAs of 256 threads")], ids=str)
def test_planned_pairs_of_rows(m: int, n: int, dtype: str, said: str) -> None:
    """The fused add + RMSNorm over the planner's rows of two inputs with edges
    (rows.EDGE_PAIR_PARTS; short rows stacked with their prefetch, PAIR_STACK_ROWS, a row
    count no multiple of 2): the residual bit for bit, x against float64."""
    reason = rows.explain("fused_add_rms_norm", (m, n), dtype)
    assert said in reason and "start aligned" in reason, reason
    print(run_op("fused_add_rms_norm", dtype, (m, n)))


def test_empty_inputs_and_dims() -> None:
    torch = _torch()
    for shape in ((0, 1024), (5, 0), (0,)):
        x = torch.empty(shape, device="cuda")
        assert ops.softmax(x, dim=-1).shape == x.shape
        assert ops.layer_norm(x, shape[-1:]).shape == x.shape
    x = torch.randn(4, 5, 300, device="cuda")
    for dim in (0, 1, 2):
        want = ref.softmax(_host(x), dim)
        ref.check(_host(ops.softmax(x, dim=dim)), want,
                  ref.softmax_bound(want, x.shape[dim], "f32"), f"dim {dim}")


def test_special_values() -> None:
    torch = _torch()
    inf, nan = float("inf"), float("nan")
    for n in (1000, 65536):
        x = torch.randn(5, n, device="cuda")
        x[0, :3] = torch.tensor([1e4, -1e4, 3e4])  # large logits
        x[1, 7] = inf
        x[2] = -inf
        x[3, n // 2] = nan
        x[4, :] = -inf
        x[4, n - 1] = 0.0  # one finite element at the row's end
        x64 = _host(x)
        with np.errstate(invalid="ignore"):
            for op, fn in (("softmax", ref.softmax), ("log_softmax", ref.log_softmax)):
                got, want = _host(getattr(ops, op)(x, dim=-1)), fn(x64)
                theirs = _host(getattr(torch, op)(x, -1))
                assert np.array_equal(np.isnan(got), np.isnan(theirs)), op
                bound = ref.softmax_bound(want, n, "f32") if op == "softmax" else \
                    ref.log_softmax_bound(x64, want, n, "f32")
                ref.check(got, want, bound, f"{op} special values")


def test_every_strategy_once() -> None:
    """A small call of each strategy (the sanitizer's subset: memcheck, racecheck,
    synccheck over warps, CTAs, clusters and two passes)."""
    for strategy, options, n in (("warp", {}, 1000), ("cta", {}, 4096),
                                 ("cluster", {"ctas": 2, "lanes": 256}, 4096),
                                 ("split", {}, 16384)):
        with rows.forced(strategy, **options):
            for op in OPS:
                print(run_op(op, "bf16", (3, n)))

