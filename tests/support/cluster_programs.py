"""tile_mlir.lang cluster programs for both tiers: the null tier checks their PTX, the gpu
tier runs them against float64 NumPy."""

from __future__ import annotations

from typing import Annotated

import numpy as np

import tile_mlir.lang as tl

Rows = Annotated[tl.Tensor, "f32", ("M", 1024)]


@tl.kernel(threads=128, cluster=2)
def normalize_pairs(x: Rows, y: Rows) -> None:
    """Two rows a cluster of 2 CTAs (rows 2k and 2k + 1, each one's offset built on its
    own), each divided by its sum: 256 threads of 4 floats a row. The rows' writes are
    apart (tile-barriers tells 2k from 2k + 1), so their sums meet through mailboxes,
    one round each, with no cluster barrier between."""
    for i in range(2):
        row = tl.block_id() // 2 * 2 + i
        t = tl.alloc_reg((256, 4), tl.f32, "S[(256, 4):(1@tid, 1)]")
        s = tl.alloc_reg((1, 1), tl.f32, "S[(1, 1)], R[256:1@tid]")
        tl.cluster.copy(t, x[row].reshape((256, 4)))
        tl.cluster.sum(s, t)
        tl.cluster.div(y[row].reshape((256, 4)), t, s)


def normalize_pairs_reference(x: np.ndarray) -> np.ndarray:
    """Each row divided by its sum, in float64."""
    wide = x.astype(np.float64)
    quotient: np.ndarray = wide / wide.sum(axis=1, keepdims=True)
    return quotient


@tl.kernel(threads=128, cluster=2)
def softmax_persistent(x: Rows, y: Rows) -> None:
    """A persistent cluster kernel: cluster c of K (the grid's CTAs / 2) takes rows c,
    c + K, c + 2K, ...: softmax over rows of 1024, 256 threads of 4 floats a row. Its
    max and sum meet across the 2 CTAs through mailboxes that a loop reuses (two halves
    each, taken in turn); the rows of the loop's iterations are its own slices of x and
    y, so tile-barriers puts no barrier across the loop's back edge."""
    for row in tl.range(tl.block_id() // 2, x.shape[0], tl.num_blocks() // 2):
        t = tl.alloc_reg((256, 4), tl.f32, "S[(256, 4):(1@tid, 1)]")
        top = tl.alloc_reg((1, 1), tl.f32, "S[(1, 1)], R[256:1@tid]")
        total = tl.alloc_reg((1, 1), tl.f32, "S[(1, 1)], R[256:1@tid]")
        tl.cluster.copy(t, x[row].reshape((256, 4)))
        tl.cluster.amax(top, t)
        tl.cluster.sub(t, t, top)
        tl.cluster.exp(t, t)
        tl.cluster.sum(total, t)
        tl.cluster.div(y[row].reshape((256, 4)), t, total)


def softmax_reference(x: np.ndarray) -> np.ndarray:
    """Softmax of each row, in float64."""
    wide = x.astype(np.float64)
    e = np.exp(wide - wide.max(axis=1, keepdims=True))
    result: np.ndarray = e / e.sum(axis=1, keepdims=True)
    return result


@tl.kernel(threads=128, cluster=2)
def center_then_normalize(x: Rows, y: Rows) -> None:
    """Rows of 1024 on K clusters of 2 CTAs (M >= K): cluster c centers row c by its
    mean (a reduction in the entry block), then divides rows c + K, c + 2K, ... by their
    sums (a reduction in a loop): both meet through mailboxes, closed once after the
    loop."""
    first = tl.block_id() // 2
    t = tl.alloc_reg((256, 4), tl.f32, "S[(256, 4):(1@tid, 1)]")
    mean = tl.alloc_reg((1, 1), tl.f32, "S[(1, 1)], R[256:1@tid]")
    tl.cluster.copy(t, x[first].reshape((256, 4)))
    tl.cluster.sum(mean, t, scale=1.0 / 1024)
    tl.cluster.sub(y[first].reshape((256, 4)), t, mean)
    clusters = tl.num_blocks() // 2
    for row in tl.range(first + clusters, x.shape[0], clusters):
        r = tl.alloc_reg((256, 4), tl.f32, "S[(256, 4):(1@tid, 1)]")
        s = tl.alloc_reg((1, 1), tl.f32, "S[(1, 1)], R[256:1@tid]")
        tl.cluster.copy(r, x[row].reshape((256, 4)))
        tl.cluster.sum(s, r)
        tl.cluster.div(y[row].reshape((256, 4)), r, s)


def center_then_normalize_reference(x: np.ndarray, clusters: int) -> np.ndarray:
    """Rows 0..clusters-1 minus their means, the others divided by their sums, in
    float64."""
    wide = x.astype(np.float64)
    result: np.ndarray = wide / wide.sum(axis=1, keepdims=True)
    result[:clusters] = wide[:clusters] - wide[:clusters].mean(axis=1, keepdims=True)
    return result
