"""null tier: tile_mlir.lang kernels that run in thread block clusters: `cluster=` makes the
kernel's specialization hold the cluster shape and its gpu.func nvvm.cluster_dim
(PTX .reqnctapercluster), `tl.cluster` ops spread tiles over the cluster's CTAs, a
kernel without clusters refuses that scope at the op's line, and a launch on a grid of
partial clusters is refused before it reaches the driver."""

from __future__ import annotations

import re
from typing import Annotated

import pytest
from support.cluster_programs import center_then_normalize, normalize_pairs, softmax_persistent

import tile_mlir.lang as tl
from null.test_lang_launch import Driver, Tensor, fake, loaded  # noqa: F401 - the fake driver
from tile_mlir.diagnostics import CompileError

Row = Annotated[tl.Tensor, "f32", ("M", 1024)]


@tl.kernel(threads=128, cluster=2)
def normalize(x: Row, y: Row) -> None:
    """Each row over a cluster of 2 CTAs: 256 threads of 4 floats, divided by its sum."""
    row = tl.block_id() // 2
    t = tl.alloc_reg((256, 4), tl.f32, "S[(256, 4):(1@tid, 1)]")
    s = tl.alloc_reg((1, 1), tl.f32, "S[(1, 1)], R[256:1@tid]")
    tl.cluster.copy(t, x[row].reshape((256, 4)))
    tl.cluster.sum(s, t)
    tl.cluster.div(y[row].reshape((256, 4)), t, s)


@tl.kernel(threads=lambda c: c["T"], cluster=lambda c: (c["C"], 1, 1))
def chosen(x: Row, y: Row, T: tl.constexpr = 64, C: tl.constexpr = 4) -> None:
    tl.cta.copy(y, x)


@tl.kernel(threads=128)
def unclustered(x: Row) -> None:
    tl.cluster.exp(x, x)


def test_the_specialization_holds_the_cluster_and_the_kernel_says_it() -> None:
    desc = tl.ArrayDesc("f32", (8, 1024))
    spec = normalize.signature(desc, desc)
    assert spec.cluster == (2, 1, 1)
    assert "block 128x1x1, cluster 2x1x1" in repr(spec)
    assert "nvvm.cluster_dim = array<i32: 2, 1, 1>" in normalize.ir(spec)
    assert chosen.signature(desc, desc, T=32, C=8).cluster == (8, 1, 1)
    assert chosen.signature(desc, desc, C=1).cluster is None  # one CTA: no clusters
    assert spec.key() != chosen.signature(desc, desc, C=1).key()


def test_a_cluster_kernel_compiles_to_cluster_ptx() -> None:
    desc = tl.ArrayDesc("f32", (8, 1024))
    ptx = normalize.compile([desc, desc], chip="sm_90").ptx["kernels"]
    assert ".reqnctapercluster 2, 1, 1" in ptx
    assert "%cluster_ctarank" in ptx
    # the CTAs' sums through mailboxes: a post to each CTA, an mbarrier wait, no remote
    # read; relaxed cluster arrives only (the entry's, and the close's after the posts)
    assert ptx.count("barrier.cluster.arrive.relaxed;") == 2
    assert "barrier.cluster.arrive;" not in ptx
    assert ptx.count("st.async.shared::cluster") == 1 and "ld.shared::cluster" not in ptx
    assert ptx.count("mbarrier.test_wait.parity.acquire.cluster") == 1


def test_two_rows_a_cluster_meet_through_mailboxes() -> None:
    """Rows 2k and 2k + 1 written by one kernel: their views are apart, so no cluster
    barrier stands between the rows (which would also send the sums over the barriers
    path): a post and a wait per row, the two relaxed arrives only."""
    desc = tl.ArrayDesc("f32", (8, 1024))
    ptx = normalize_pairs.compile([desc, desc], chip="sm_90").ptx["kernels"]
    assert ptx.count("barrier.cluster.arrive.relaxed;") == 2
    assert "barrier.cluster.arrive;" not in ptx
    assert ptx.count("st.async.shared::cluster") == 2 and "ld.shared::cluster" not in ptx
    assert ptx.count("mbarrier.test_wait.parity.acquire.cluster") == 2


def test_a_loop_over_rows_reuses_its_mailboxes() -> None:
    """A persistent kernel's reductions in its loop over rows meet through mailboxes of
    two halves each (no cluster barrier in the loop, no read across the cluster): a post
    and a wait per reduction, each wait on a parity computed from the iteration, thread
    0 arming each mailbox's two mbarriers at the entry and one again per iteration, a
    barrier of the CTA between an iteration's reads and the next one's posts."""
    desc = tl.ArrayDesc("f32", (8, 1024))
    ptx = softmax_persistent.compile([desc, desc], chip="sm_90").ptx["kernels"]
    assert ptx.count("barrier.cluster.arrive.relaxed;") == 2
    assert "barrier.cluster.arrive;" not in ptx
    assert ptx.count("st.async.shared::cluster") == 2 and "ld.shared::cluster" not in ptx
    waits = re.findall(r"mbarrier\.test_wait\.parity\.acquire\.cluster\.shared\.b64"
                       r"\s+%p\d+, \[%rd\d+\], (\S+);", ptx)
    assert len(waits) == 2 and all(w.startswith("%r") for w in waits), waits
    assert ptx.count("mbarrier.init") == 4
    assert ptx.count("mbarrier.arrive.expect_tx") == 6
    # each reduction's barrier before it reads its warps' partials, the second one's
    # also standing between the first one's reads and the next iteration; the last
    # reduction's own after its reads
    assert ptx.count("bar.sync") == 3


def test_a_reduction_before_a_loop_of_them_closes_the_mailboxes_once() -> None:
    """A reduction in the entry block, then one in a loop after it: both through
    mailboxes (one half, then two), and the relaxed arrive that closes them only once,
    after the loop (two arrives with no wait between would be undefined)."""
    desc = tl.ArrayDesc("f32", (8, 1024))
    ptx = center_then_normalize.compile([desc, desc], chip="sm_90").ptx["kernels"]
    assert ptx.count("barrier.cluster.arrive.relaxed;") == 2
    assert ptx.count("barrier.cluster.wait;") == 2
    assert "barrier.cluster.arrive;" not in ptx
    assert ptx.count("st.async.shared::cluster") == 2
    assert ptx.count("mbarrier.init") == 3


def test_the_cluster_scope_needs_a_kernel_with_clusters() -> None:
    with pytest.raises(CompileError, match="at scope 'cluster' needs the kernel's cluster") as e:
        unclustered.compile([tl.ArrayDesc("f32", (8, 1024))], chip="sm_90")
    assert "test_lang_cluster.py" in str(e.value)  # located at the op's line


def test_a_grid_of_partial_clusters_is_refused(fake: Driver,  # noqa: F811 - the fixture
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    loaded(monkeypatch, normalize)
    x, y = Tensor((8, 1024), 0x100000), Tensor((8, 1024), 0x200000)
    normalize[(16,)](x, y)
    assert fake.launches[-1].grid == (16, 1, 1)
    with pytest.raises(tl.ArgumentError, match=r"the grid \(15,\) is not whole clusters of "
                                               "2x1x1 CTAs"):
        normalize[(15,)](x, y)
    with pytest.raises(tl.ArgumentError, match="not whole clusters"):
        normalize[(7,)](x, y)  # the prepared launch checks too
    assert len(fake.launches) == 1
