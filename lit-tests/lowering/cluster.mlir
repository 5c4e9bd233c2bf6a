// Scope "cluster": the threads of a thread block cluster (a kernel with nvvm.cluster_dim,
// sm_90), numbered CTA by CTA: rank * (threads per CTA) + the thread's index in its CTA.
// A register layout over tid at cluster scope spreads a tile over the cluster's CTAs;
// a reduction over it folds each CTA's warps through its shared memory (one bar.sync),
// then the CTAs' partials: through mailboxes where every such reduction of the kernel
// stands in its entry block or in the body of a loop that does (each CTA posts its
// partial into every CTA's shared memory with st.async, which completes its bytes on
// that CTA's mbarrier; each waits for its own; a loop takes two mailboxes in turn), else
// through distributed shared memory between two cluster barriers (mapa.shared::cluster,
// ld.shared::cluster; the second stands for the first of a later reduction where there
// is one); the result is replicated in every thread of the cluster.
// RUN: tile-opt %s --split-input-file --verify-diagnostics --tile-verify --tile-lower --canonicalize --cse | FileCheck %s
// RUN: not tile-opt %s --split-input-file -p tile-to-ptx --emit=ptx 2>/dev/null | FileCheck %s --check-prefix=PTX

// A row of 512 floats over a cluster of 2 CTAs of 64 threads: 4 registers a thread.
// At the entry, after the register tiles' allocas: thread 0 initializes the mailbox's
// mbarrier for one arrival, its own, which expects the 8 bytes of the two posts; then
// the fence and the relaxed cluster arrive. The CTA's part: 5 shuffles, its two warps'
// partials through a shared scratch after one barrier; the cluster wait (every CTA's
// mbarrier is initialized past it); threads 0 and 1 post the CTA's partial to CTAs 0
// and 1 (slot [rank]: st.async, completing its 4 bytes on that CTA's mbarrier); every
// thread waits for its own mbarrier's first phase and folds slots 0 and 1 in that order
// (the same bits everywhere). No second cluster barrier: no CTA reads another's memory.
// CHECK-LABEL: gpu.func @row_sum
// CHECK: memref.alloca
// CHECK: %[[BAR:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr<3>
// CHECK: scf.if
// CHECK-NEXT: nvvm.mbarrier.init %[[BAR]], %c1_i32 : !llvm.ptr<3>, i32
// CHECK-NEXT: nvvm.mbarrier.arrive.expect_tx %[[BAR]], %c8_i32 : !llvm.ptr<3>, i32
// CHECK: nvvm.fence.mbarrier.init
// CHECK-NEXT: nvvm.cluster.arrive.relaxed
// CHECK: %[[RANK:.*]] = nvvm.read.ptx.sreg.cluster.ctarank : i32
// CHECK: %[[R:.*]] = arith.index_castui %[[RANK]] : i32 to index
// CHECK: arith.muli %[[R]], %c64 : index
// CHECK: %[[BOX:.*]] = memref.get_global @__tile_mailbox_0 : memref<2xf32, #gpu.address_space<workgroup>>
// CHECK-COUNT-5: nvvm.shfl.sync  bfly
// CHECK: gpu.barrier
// CHECK: %[[POSTS:.*]] = arith.cmpi ult, %thread_id_x, %c2 : index
// CHECK: nvvm.cluster.wait
// CHECK: scf.if %[[POSTS]] {
// CHECK: %[[PEER:.*]] = arith.index_cast %thread_id_x : index to i32
// CHECK: %[[SLOT:.*]] = nvvm.mapa %{{.*}}, %[[PEER]] : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK-NEXT: %[[THEIRS:.*]] = nvvm.mapa %[[BAR]], %[[PEER]] : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK-NEXT: llvm.inline_asm has_side_effects "st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [$0], $1, [$2];", "l,r,l" %[[SLOT]], %{{.*}}, %[[THEIRS]]
// CHECK-NOT: nvvm.mbarrier.arrive
// CHECK: nvvm.cluster.arrive.relaxed {tile.mailbox}
// CHECK-NEXT: scf.while
// CHECK-NEXT: nvvm.mbarrier.test.wait %[[BAR]], %c0_i32 {scope = #nvvm.mem_scope<cluster>}
// CHECK: %[[A:.*]] = memref.load %[[BOX]][%c0]
// CHECK-NEXT: %[[B:.*]] = memref.load %[[BOX]][%c1]
// CHECK-NEXT: arith.addf %[[A]], %[[B]] : f32
// CHECK-NOT: nvvm.cluster
// CHECK: arith.divf
// CHECK-NOT: nvvm.cluster
// CHECK: vector.store
// CHECK-NEXT: nvvm.cluster.wait
// CHECK-NEXT: gpu.return
// PTX-LABEL: .entry row_sum(
// PTX: .reqnctapercluster 2, 1, 1
// PTX-NOT: .local
// PTX: mbarrier.init.shared.b64
// PTX: fence.mbarrier_init.release.cluster;
// PTX-NEXT: barrier.cluster.arrive.relaxed;
// PTX: %cluster_ctarank
// PTX-COUNT-5: shfl.sync.bfly.b32
// PTX: bar.sync 0;
// PTX: barrier.cluster.wait;
// PTX: st.async.shared::cluster.mbarrier::complete_tx::bytes.b32
// PTX-NOT: mbarrier.arrive
// PTX: barrier.cluster.arrive.relaxed;
// PTX: mbarrier.test_wait.parity.acquire.cluster.shared.b64
// PTX-NOT: ld.shared::cluster
// PTX-NOT: barrier.cluster
// PTX: st.global.v4.b32
// PTX-NEXT: barrier.cluster.wait;
// PTX-NEXT: ret;
gpu.module @m {
  gpu.func @row_sum(%x: memref<512xf32>, %y: memref<512xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>, nvvm.cluster_dim = array<i32: 2, 1, 1>} {
    %xv = memref.expand_shape %x [[0, 1]] output_shape [128, 4] : memref<512xf32> into memref<128x4xf32>
    %yv = memref.expand_shape %y [[0, 1]] output_shape [128, 4] : memref<512xf32> into memref<128x4xf32>
    %t = "tile.alloc"() {layout = #tile.layout<"S[(128, 4):(1@tid, 1)]">} : () -> memref<128x4xf32, #gpu.address_space<private>>
    %s = "tile.alloc"() {layout = #tile.layout<"S[(1, 1)], R[128:1@tid]">} : () -> memref<1x1xf32, #gpu.address_space<private>>
    "tile.copy"(%t, %xv) {scope = "cluster"} : (memref<128x4xf32, #gpu.address_space<private>>, memref<128x4xf32>) -> ()
    "tile.reduce"(%s, %t) {kind = "sum", scope = "cluster"} : (memref<1x1xf32, #gpu.address_space<private>>, memref<128x4xf32, #gpu.address_space<private>>) -> ()
    "tile.elementwise"(%t, %t, %s) {op = "div", scope = "cluster", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<128x4xf32, #gpu.address_space<private>>, memref<128x4xf32, #gpu.address_space<private>>, memref<1x1xf32, #gpu.address_space<private>>) -> ()
    "tile.copy"(%yv, %t) {scope = "cluster"} : (memref<128x4xf32>, memref<128x4xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

// Two reductions (a softmax's max and sum), a mailbox each: both mbarriers initialized
// before the one fence and relaxed arrive at the entry, one cluster wait (before the
// first post), a wait on each mbarrier; the cluster arrive after the second's posts
// only (the last), its wait at the end.
// CHECK-LABEL: gpu.func @two_reductions
// CHECK-COUNT-2: nvvm.mbarrier.init
// CHECK: nvvm.fence.mbarrier.init
// CHECK-NEXT: nvvm.cluster.arrive.relaxed
// CHECK: nvvm.cluster.wait
// CHECK: llvm.inline_asm has_side_effects "st.async
// CHECK-NOT: nvvm.cluster
// CHECK: nvvm.mbarrier.test.wait
// CHECK-NOT: nvvm.cluster
// CHECK: math.exp
// CHECK: llvm.inline_asm has_side_effects "st.async
// CHECK: nvvm.cluster.arrive.relaxed {tile.mailbox}
// CHECK: nvvm.mbarrier.test.wait
// CHECK-NOT: nvvm.cluster.arrive
// CHECK: nvvm.cluster.wait
// CHECK-NEXT: gpu.return
// PTX-LABEL: .entry two_reductions(
// PTX: barrier.cluster.arrive.relaxed;
// PTX-NOT: barrier.cluster
// PTX: barrier.cluster.wait;
// PTX-NOT: barrier.cluster
// PTX: mbarrier.test_wait.parity
// PTX-NOT: barrier.cluster
// PTX: barrier.cluster.arrive.relaxed;
// PTX-NOT: barrier.cluster
// PTX: barrier.cluster.wait;
// PTX-NEXT: ret;
gpu.module @m {
  gpu.func @two_reductions(%x: memref<128x4xf32>, %y: memref<128x4xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>, nvvm.cluster_dim = array<i32: 2, 1, 1>} {
    %t = "tile.alloc"() {layout = #tile.layout<"S[(128, 4):(1@tid, 1)]">} : () -> memref<128x4xf32, #gpu.address_space<private>>
    %m = "tile.alloc"() {layout = #tile.layout<"S[(1, 1)], R[128:1@tid]">} : () -> memref<1x1xf32, #gpu.address_space<private>>
    %s = "tile.alloc"() {layout = #tile.layout<"S[(1, 1)], R[128:1@tid]">} : () -> memref<1x1xf32, #gpu.address_space<private>>
    "tile.copy"(%t, %x) {scope = "cluster"} : (memref<128x4xf32, #gpu.address_space<private>>, memref<128x4xf32>) -> ()
    "tile.reduce"(%m, %t) {kind = "max", scope = "cluster"} : (memref<1x1xf32, #gpu.address_space<private>>, memref<128x4xf32, #gpu.address_space<private>>) -> ()
    "tile.elementwise"(%t, %t, %m) {op = "sub", scope = "cluster", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<128x4xf32, #gpu.address_space<private>>, memref<128x4xf32, #gpu.address_space<private>>, memref<1x1xf32, #gpu.address_space<private>>) -> ()
    "tile.elementwise"(%t, %t) {op = "exp", scope = "cluster", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<128x4xf32, #gpu.address_space<private>>, memref<128x4xf32, #gpu.address_space<private>>) -> ()
    "tile.reduce"(%s, %t) {kind = "sum", scope = "cluster"} : (memref<1x1xf32, #gpu.address_space<private>>, memref<128x4xf32, #gpu.address_space<private>>) -> ()
    "tile.elementwise"(%t, %t, %s) {op = "div", scope = "cluster", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<128x4xf32, #gpu.address_space<private>>, memref<128x4xf32, #gpu.address_space<private>>, memref<1x1xf32, #gpu.address_space<private>>) -> ()
    "tile.copy"(%y, %t) {scope = "cluster"} : (memref<128x4xf32>, memref<128x4xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

// A warp per CTA, 4 CTAs: no warps to fold within a CTA (no bar.sync, no first scratch);
// the lanes' butterfly, then four ranks' posts, folded from slots 0..3. Into global
// memory, one thread of the cluster writes the result (its reduced fields, the CTAs'
// included, at 0).
// CHECK-LABEL: gpu.func @warp_per_cta
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.cluster.wait
// CHECK: llvm.inline_asm has_side_effects "st.async
// CHECK: nvvm.mbarrier.test.wait
// CHECK: memref.load %{{.*}}[%c0] : memref<4xf32, #gpu.address_space<workgroup>>
// CHECK: memref.load %{{.*}}[%c1] : memref<4xf32, #gpu.address_space<workgroup>>
// CHECK: memref.load %{{.*}}[%c2] : memref<4xf32, #gpu.address_space<workgroup>>
// CHECK: memref.load %{{.*}}[%c3] : memref<4xf32, #gpu.address_space<workgroup>>
// CHECK: scf.if
// CHECK: memref.store %{{.*}} : memref<1xf32>
// CHECK-NOT: gpu.barrier
// PTX-LABEL: .entry warp_per_cta(
// PTX: .reqnctapercluster 4, 1, 1
// PTX-NOT: bar.sync
// PTX: st.async.shared::cluster.mbarrier::complete_tx::bytes.b32
// PTX-NOT: ld.shared::cluster
// PTX: ret;
gpu.module @m {
  gpu.func @warp_per_cta(%x: memref<128x2xf32>, %out: memref<1xf32>) kernel attributes {known_block_size = array<i32: 32, 1, 1>, nvvm.cluster_dim = array<i32: 4, 1, 1>} {
    %t = "tile.alloc"() {layout = #tile.layout<"S[(128, 2):(1@tid, 1)]">} : () -> memref<128x2xf32, #gpu.address_space<private>>
    "tile.copy"(%t, %x) {scope = "cluster"} : (memref<128x2xf32, #gpu.address_space<private>>, memref<128x2xf32>) -> ()
    "tile.reduce"(%out, %t) {kind = "max", scope = "cluster"} : (memref<1xf32>, memref<128x2xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

// A reduction in a loop of the entry block runs once an iteration on every thread: it
// meets through mailboxes of two halves, iteration k taking half k % 2 and waiting for
// the phase of parity (k / 2) % 2 of that half's mbarrier. At the entry thread 0 arms
// both mbarriers (8 bytes each: the two CTAs' posts); the cluster wait stands before the
// loop. In the loop: the posts into this iteration's half (slot 2 * half + rank), the
// wait, thread 0 arming the half again for iteration k + 2, the two reads, then a
// barrier of the CTA (every thread's reads before the next iteration's posts). After
// the loop, the relaxed arrive whose wait stands at the end.
// CHECK-LABEL: gpu.func @in_a_loop
// CHECK: scf.if %[[LEADER:.*]] {
// CHECK-NEXT: nvvm.mbarrier.init %[[BAR:.*]], %c1_i32
// CHECK-NEXT: nvvm.mbarrier.arrive.expect_tx %[[BAR]], %c8_i32
// CHECK-NEXT: %[[BAR1:.*]] = llvm.getelementptr %[[BAR]][1]
// CHECK-NEXT: nvvm.mbarrier.init %[[BAR1]], %c1_i32
// CHECK-NEXT: nvvm.mbarrier.arrive.expect_tx %[[BAR1]], %c8_i32
// CHECK: nvvm.cluster.arrive.relaxed
// CHECK-NEXT: nvvm.cluster.wait
// CHECK-NEXT: scf.for %[[K:.*]] = %c0 to %c3 step %c1 {
// CHECK: %[[HALF:.*]] = arith.andi %[[K]], %c1 : index
// CHECK: %[[SHIFTED:.*]] = arith.shrui %[[K]], %c1 : index
// CHECK: %[[PARITY:.*]] = arith.andi %[[SHIFTED]], %c1 : index
// CHECK: %[[PHASE:.*]] = arith.index_cast %[[PARITY]] : index to i32
// CHECK: %[[MINE:.*]] = llvm.getelementptr %[[BAR]][%{{.*}}]
// CHECK: gpu.barrier
// CHECK: arith.muli %[[HALF]], %c2 : index
// CHECK: llvm.inline_asm has_side_effects "st.async
// CHECK: nvvm.mbarrier.test.wait %[[MINE]], %[[PHASE]]
// CHECK: scf.if %[[LEADER]] {
// CHECK-NEXT: nvvm.mbarrier.arrive.expect_tx %[[MINE]], %c8_i32
// CHECK: memref.load
// CHECK: memref.load
// CHECK: gpu.barrier
// CHECK-NOT: nvvm.cluster
// CHECK: vector.store %{{.*}} : memref<128x4xf32, strided<[4, 1], offset: ?>>, vector<4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: nvvm.cluster.arrive.relaxed {tile.mailbox}
// CHECK-NEXT: nvvm.cluster.wait
// CHECK-NEXT: gpu.return
// PTX-LABEL: .entry in_a_loop(
// PTX-NOT: barrier.cluster.arrive;
// PTX-NOT: ld.shared::cluster
// PTX: st.async.shared::cluster.mbarrier::complete_tx::bytes.b32
// PTX: mbarrier.test_wait.parity.acquire.cluster
// PTX: ret;
gpu.module @m {
  gpu.func @in_a_loop(%x: memref<3x128x4xf32>, %y: memref<3x128x4xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>, nvvm.cluster_dim = array<i32: 2, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    %t = "tile.alloc"() {layout = #tile.layout<"S[(128, 4):(1@tid, 1)]">} : () -> memref<128x4xf32, #gpu.address_space<private>>
    %s = "tile.alloc"() {layout = #tile.layout<"S[(1, 1)], R[128:1@tid]">} : () -> memref<1x1xf32, #gpu.address_space<private>>
    scf.for %i = %c0 to %c3 step %c1 {
      %xv = memref.subview %x[%i, 0, 0] [1, 128, 4] [1, 1, 1] : memref<3x128x4xf32> to memref<128x4xf32, strided<[4, 1], offset: ?>>
      %yv = memref.subview %y[%i, 0, 0] [1, 128, 4] [1, 1, 1] : memref<3x128x4xf32> to memref<128x4xf32, strided<[4, 1], offset: ?>>
      "tile.copy"(%t, %xv) {scope = "cluster"} : (memref<128x4xf32, #gpu.address_space<private>>, memref<128x4xf32, strided<[4, 1], offset: ?>>) -> ()
      "tile.reduce"(%s, %t) {kind = "sum", scope = "cluster"} : (memref<1x1xf32, #gpu.address_space<private>>, memref<128x4xf32, #gpu.address_space<private>>) -> ()
      "tile.elementwise"(%t, %t, %s) {op = "div", scope = "cluster", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<128x4xf32, #gpu.address_space<private>>, memref<128x4xf32, #gpu.address_space<private>>, memref<1x1xf32, #gpu.address_space<private>>) -> ()
      "tile.copy"(%yv, %t) {scope = "cluster"} : (memref<128x4xf32, strided<[4, 1], offset: ?>>, memref<128x4xf32, #gpu.address_space<private>>) -> ()
    }
    gpu.return
  }
}

// -----

// A reduction in a nested loop: the mailboxes' turns would need every enclosing loop's
// iteration, so it meets through barriers. Its CTA's leader leaves the partial in a
// scratch; a cluster barrier; every thread reads both CTAs' partials (ranks 0 and 1, in
// that order) through mapa; a second cluster barrier before any CTA may exit or write
// the scratch again.
// CHECK-LABEL: gpu.func @in_a_nested_loop
// CHECK-NOT: nvvm.mbarrier
// CHECK: scf.for
// CHECK: scf.for
// CHECK: gpu.barrier
// CHECK: memref.store %{{.*}} : memref<64xf32, #gpu.address_space<workgroup>>
// CHECK: nvvm.cluster.arrive
// CHECK-NEXT: nvvm.cluster.wait
// CHECK: nvvm.mapa %{{.*}}, %c0_i32 : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK: llvm.load %{{.*}} : !llvm.ptr<7> -> f32
// CHECK: nvvm.mapa %{{.*}}, %c1_i32 : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK: llvm.load %{{.*}} : !llvm.ptr<7> -> f32
// CHECK: nvvm.cluster.arrive
// CHECK-NEXT: nvvm.cluster.wait
// CHECK-NOT: nvvm.mbarrier
// CHECK: gpu.return
// PTX-LABEL: .entry in_a_nested_loop(
// PTX-NOT: mbarrier
// PTX: barrier.cluster.arrive;
// PTX-NEXT: barrier.cluster.wait;
// PTX: ld.shared::cluster.b32
// PTX: ld.shared::cluster.b32
// PTX: barrier.cluster.arrive;
// PTX-NEXT: barrier.cluster.wait;
gpu.module @m {
  gpu.func @in_a_nested_loop(%x: memref<2x3x128x4xf32>, %y: memref<2x3x128x4xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>, nvvm.cluster_dim = array<i32: 2, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %t = "tile.alloc"() {layout = #tile.layout<"S[(128, 4):(1@tid, 1)]">} : () -> memref<128x4xf32, #gpu.address_space<private>>
    %s = "tile.alloc"() {layout = #tile.layout<"S[(1, 1)], R[128:1@tid]">} : () -> memref<1x1xf32, #gpu.address_space<private>>
    scf.for %j = %c0 to %c2 step %c1 {
      scf.for %i = %c0 to %c3 step %c1 {
        %xv = memref.subview %x[%j, %i, 0, 0] [1, 1, 128, 4] [1, 1, 1, 1] : memref<2x3x128x4xf32> to memref<128x4xf32, strided<[4, 1], offset: ?>>
        %yv = memref.subview %y[%j, %i, 0, 0] [1, 1, 128, 4] [1, 1, 1, 1] : memref<2x3x128x4xf32> to memref<128x4xf32, strided<[4, 1], offset: ?>>
        "tile.copy"(%t, %xv) {scope = "cluster"} : (memref<128x4xf32, #gpu.address_space<private>>, memref<128x4xf32, strided<[4, 1], offset: ?>>) -> ()
        "tile.reduce"(%s, %t) {kind = "sum", scope = "cluster"} : (memref<1x1xf32, #gpu.address_space<private>>, memref<128x4xf32, #gpu.address_space<private>>) -> ()
        "tile.elementwise"(%t, %t, %s) {op = "div", scope = "cluster", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<128x4xf32, #gpu.address_space<private>>, memref<128x4xf32, #gpu.address_space<private>>, memref<1x1xf32, #gpu.address_space<private>>) -> ()
        "tile.copy"(%yv, %t) {scope = "cluster"} : (memref<128x4xf32, strided<[4, 1], offset: ?>>, memref<128x4xf32, #gpu.address_space<private>>) -> ()
      }
    }
    gpu.return
  }
}

// -----

// Two rows over a cluster of 2 CTAs of 128 threads: row r in warps 4r..4r+3 of the
// cluster's 8 (the row dim over tid with stride 128 is the CTA rank: each CTA holds one
// row), so the reduction folds within each CTA and needs no cluster barrier at all.
// CHECK-LABEL: gpu.func @row_per_cta
// CHECK: gpu.barrier
// CHECK-NOT: nvvm.cluster.arrive
// CHECK-NOT: nvvm.mapa
// CHECK: gpu.return
gpu.module @m {
  gpu.func @row_per_cta(%x: memref<2x128x4xf32>, %y: memref<2x1x1xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>, nvvm.cluster_dim = array<i32: 2, 1, 1>} {
    %t = "tile.alloc"() {layout = #tile.layout<"S[(2, 128, 4):(128@tid, 1@tid, 1)]">} : () -> memref<2x128x4xf32, #gpu.address_space<private>>
    "tile.copy"(%t, %x) {scope = "cluster"} : (memref<2x128x4xf32, #gpu.address_space<private>>, memref<2x128x4xf32>) -> ()
    "tile.reduce"(%y, %t) {kind = "sum", axes = array<i64: 1, 2>, scope = "cluster"} : (memref<2x1x1xf32>, memref<2x128x4xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

// tile-barriers at cluster scope: one op writes global memory that another reads with
// other threads of the cluster: a cluster barrier between them (a CTA's bar.sync would
// not order the other CTAs).
// CHECK-LABEL: gpu.func @barrier_between
// CHECK: nvvm.cluster.arrive
// CHECK-NEXT: nvvm.cluster.wait
gpu.module @m {
  gpu.func @barrier_between(%a: memref<1024xf32>, %b: memref<1024xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>, nvvm.cluster_dim = array<i32: 2, 1, 1>} {
    "tile.elementwise"(%a, %a) {op = "exp", scope = "cluster"} : (memref<1024xf32>, memref<1024xf32>) -> ()
    %r = "tile.alloc"() {layout = #tile.layout<"S[(256, 4):(1@tid, 1)]">} : () -> memref<256x4xf32, #gpu.address_space<private>>
    %av = memref.expand_shape %a [[0, 1]] output_shape [256, 4] : memref<1024xf32> into memref<256x4xf32>
    %bv = memref.expand_shape %b [[0, 1]] output_shape [256, 4] : memref<1024xf32> into memref<256x4xf32>
    "tile.copy"(%r, %av) {scope = "cluster"} : (memref<256x4xf32, #gpu.address_space<private>>, memref<256x4xf32>) -> ()
    "tile.copy"(%bv, %r) {scope = "cluster"} : (memref<256x4xf32>, memref<256x4xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @no_cluster(%a: memref<256xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    // expected-error@+1 {{at scope 'cluster' needs the kernel's cluster: give the enclosing gpu.func nvvm.cluster_dim = array<i32: x, y, z>}}
    "tile.elementwise"(%a, %a) {op = "exp", scope = "cluster"} : (memref<256xf32>, memref<256xf32>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @shared_operand(%a: memref<256xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>, nvvm.cluster_dim = array<i32: 2, 1, 1>} {
    %s = "tile.alloc"() {layout = #tile.layout<"S[256]">} : () -> memref<256xf32, #gpu.address_space<workgroup>>
    // expected-error@+1 {{operand 0 is in shared memory, which each CTA of a cluster has its own of: at scope 'cluster' operands are in global memory or registers}}
    "tile.copy"(%s, %a) {scope = "cluster"} : (memref<256xf32, #gpu.address_space<workgroup>>, memref<256xf32>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @grid(%a: memref<256xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>, known_grid_size = array<i32: 3, 1, 1>, nvvm.cluster_dim = array<i32: 2, 1, 1>} {
    // expected-error@+1 {{runs on a grid of (3, 1, 1) CTAs, which is not whole clusters of (2, 1, 1)}}
    "tile.elementwise"(%a, %a) {op = "exp", scope = "cluster"} : (memref<256xf32>, memref<256xf32>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @too_many(%a: memref<256xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>, nvvm.cluster_dim = array<i32: 32, 1, 1>} {
    // expected-error@+1 {{runs in clusters of 32 CTAs (nvvm.cluster_dim); at most 16 (sm_90's largest cluster)}}
    "tile.elementwise"(%a, %a) {op = "exp", scope = "cluster"} : (memref<256xf32>, memref<256xf32>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @partial_warps(%a: memref<256xf32>) kernel attributes {known_block_size = array<i32: 48, 1, 1>, nvvm.cluster_dim = array<i32: 2, 1, 1>} {
    // expected-error@+1 {{at scope 'cluster' needs whole warps, but the block has 48 threads}}
    "tile.elementwise"(%a, %a) {op = "exp", scope = "cluster"} : (memref<256xf32>, memref<256xf32>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @reduce_in_shared_memory(%a: memref<256x4xf32>, %b: memref<256xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>, nvvm.cluster_dim = array<i32: 2, 1, 1>} {
    // expected-error@+1 {{has no lowering variant that applies}}
    "tile.reduce"(%b, %a) {kind = "sum", axes = array<i64: 1>, scope = "cluster"} : (memref<256xf32>, memref<256x4xf32>) -> ()
    gpu.return
  }
}
