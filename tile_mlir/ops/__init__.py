"""tile_mlir.ops: the operator library, on torch tensors, CuPy arrays and NumPy arrays,
every op made of tile programs compiled through the tile passes (and cached).

    import torch, tile_mlir.ops as ops
    x = torch.randn(16, 4096, 4096, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    y = ops.add(x, bias)                       # broadcast by strides, never copied
    m = ops.gt(x, 0.5)                         # bool, as torch.gt
    z = ops.where(m, x, 0.0, out=torch.empty_like(x))
    s = ops.sum(x, dim=-1)                     # reductions (ops/reductions.py)
    h = ops.silu_and_mul(torch.cat([x, x], -1))  # activations (ops/activations.py)
    d = ops.dropout(x, 0.1)                    # Philox in the kernel (ops/generators.py)
    tops = ops.torch_ops()                     # the same as torch custom ops, for
    f = torch.compile(lambda x: tops.exp(x), fullgraph=True)  # torch.compile
    q, k = ops.rope_neox(query, key, positions)  # RoPE (ops/rope.py)
    p = ops.softmax(x, dim=-1)                 # fused row ops (ops/rows.py)
    h = ops.rms_norm(x, (4096,), weight, eps=1e-6)
    f = ops.fuse(lambda x, b: ops.mul(ops.gelu(ops.add(x, b)), 0.5))  # one kernel
    y = f(x, bias)                             # (ops/fuse.py); f.torch_op for torch.compile

Every op runs on one spine: its front-end module says what a call means (promotion,
broadcasting, shapes, defaults, checks), args.py describes the arguments, the
programs/ modules write the kernels, plan.py makes each kind of call a generated
launcher and entry.py finds it again for a call like it (docs/ops.md, "How a call
runs"). `python -m tile_mlir.ops --list` prints the ops. Results follow torch: type
promotion, broadcasting, NaN and Inf behaviour, and the rounding of each op (see
docs/ops.md for the exceptions). Importing the package imports neither MLIR nor torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tile_mlir import op_table
from tile_mlir.ops.activations import *  # noqa: F403 - activations, fused gated ones
from tile_mlir.ops.activations import __all__ as _activations
from tile_mlir.ops.functions import *  # noqa: F403 - the elementwise functions
from tile_mlir.ops.functions import __all__ as _functions
from tile_mlir.ops.fuse import FuseError, fuse
from tile_mlir.ops.generators import (
    alibi,
    dropout,
    get_rng_state,
    manual_seed,
    set_rng_state,
    sinusoidal,
)
from tile_mlir.ops.reductions import amax, amin, mean, prod, sum  # noqa: A004 - torch's names
from tile_mlir.ops.rope import (
    rope_cache,
    rope_llama31,
    rope_longrope,
    rope_neox,
    rope_non_neox,
    rope_yarn,
)
from tile_mlir.ops.rows import fused_add_rms_norm, layer_norm, log_softmax, rms_norm, softmax

if TYPE_CHECKING:
    from tile_mlir.ops.torch_library import TorchOps

REDUCTIONS: tuple[op_table.Composite, ...] = tuple(
    op_table.Composite(name, "reduction", ("f32", "f16", "bf16"), (), summary)
    for name, summary in (("sum", "the sum over dim (all by default)"),
                          ("amax", "the maximum over dim, NaN propagating"),
                          ("amin", "the minimum over dim, NaN propagating"),
                          ("prod", "the product over dim"),
                          ("mean", "the mean over dim")))
"""The reductions, listed beside the registry's ops (tile.reduce kernels, no row)."""

ROW_OPS: tuple[op_table.Composite, ...] = tuple(
    op_table.Composite(name, "rows", ("f32", "f16", "bf16"), (), summary)
    for name, summary in (("softmax", "softmax along dim, in one read and one write"),
                          ("log_softmax", "log_softmax along dim"),
                          ("rms_norm", "RMSNorm over the normalized dims"),
                          ("layer_norm", "layer norm over the normalized dims"),
                          ("fused_add_rms_norm", "vLLM's residual add + RMSNorm, in place")))
"""The fused row ops (ops/rows.py: tile programs of tile_mlir.lang)."""


def list_ops() -> list[op_table.EwOp | op_table.Composite]:
    """Every public op of the library, family by family: the registry's elementwise
    ops and composites, then the reductions and the fused row ops."""
    return [*op_table.library_ops(), *REDUCTIONS, *ROW_OPS]


def torch_ops() -> TorchOps:
    """The library's ops as torch custom ops (`torch.ops.tile_mlir.*`), which
    torch.compile(fullgraph=True) traces through; registered on the first call (needs
    torch). See ops/torch_library.py."""
    from tile_mlir.ops import torch_library

    return torch_library.torch_ops()


__all__ = [*_functions, *_activations, "FuseError", "alibi", "amax",  # noqa: PLE0604
           "amin", "dropout", "fuse", "fused_add_rms_norm", "get_rng_state", "layer_norm",
           "list_ops", "log_softmax", "manual_seed", "mean", "prod", "rms_norm",
           "rope_cache", "rope_llama31", "rope_longrope", "rope_neox", "rope_non_neox",
           "rope_yarn", "set_rng_state", "sinusoidal", "softmax", "sum", "torch_ops"]
