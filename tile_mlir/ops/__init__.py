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

The elementwise ops are seed 004's family: each is a row of the registry
(tile_mlir.op_table) and runs as a tile program generated for it
(ops/program.py); `python -m tile_mlir.ops --list` prints them. Results follow
torch: type promotion, broadcasting, NaN and Inf behaviour, and the rounding of
each op (see docs/ops.md for the exceptions).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tile_mlir import op_table
from tile_mlir.ops.activations import *  # noqa: F403 - activations, fused gated ones
from tile_mlir.ops.activations import __all__ as _activations
from tile_mlir.ops.functions import *  # noqa: F403 - the elementwise functions
from tile_mlir.ops.functions import __all__ as _functions
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

if TYPE_CHECKING:
    from tile_mlir.ops.torch_library import TorchOps


def list_ops() -> list[op_table.EwOp | op_table.Composite]:
    """The library's elementwise ops (registry rows and composites), family by family."""
    return op_table.library_ops()


def torch_ops() -> TorchOps:
    """The library's ops as torch custom ops (`torch.ops.tile_mlir.*`), which
    torch.compile(fullgraph=True) traces through; registered on the first call (needs
    torch). See ops/torch_library.py."""
    from tile_mlir.ops import torch_library

    return torch_library.torch_ops()


__all__ = [*_functions, *_activations, "alibi", "amax", "amin",  # noqa: PLE0604
           "dropout", "get_rng_state", "list_ops", "manual_seed", "mean", "prod",
           "rope_cache", "rope_llama31", "rope_longrope", "rope_neox", "rope_non_neox",
           "rope_yarn", "set_rng_state", "sinusoidal", "sum", "torch_ops"]
