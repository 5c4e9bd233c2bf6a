// Scope "cluster": the threads of a thread block cluster (a kernel with nvvm.cluster_dim,
// sm_90), numbered CTA by CTA: rank * (threads per CTA) + the thread's index in its CTA.
// A register layout over tid at cluster scope spreads a tile over the cluster's CTAs;
// a reduction over it folds each CTA's warps through its shared memory (one bar.sync),
// then the CTAs' partials through distributed shared memory between two cluster
// barriers (mapa.shared::cluster, ld.shared::cluster; the second stands for the first
// of a later reduction where there is one); the result is replicated in every thread of
// the cluster.
// RUN: tile-opt %s --split-input-file --verify-diagnostics --tile-verify --tile-lower --canonicalize --cse | FileCheck %s
// RUN: not tile-opt %s --split-input-file -p tile-to-ptx --emit=ptx 2>/dev/null | FileCheck %s --check-prefix=PTX

// A row of 512 floats over a cluster of 2 CTAs of 64 threads: 4 registers a thread.
// The CTA's part: 5 shuffles, its two warps' partials through a shared scratch after
// one barrier; its leader (thread 0) leaves the CTA's partial in a second scratch; a
// cluster barrier; every thread reads both CTAs' partials (ranks 0 and 1, in that
// order: the same bits everywhere) through mapa; a second cluster barrier before any
// CTA may exit (its shared memory must outlive its readers).
// CHECK-LABEL: gpu.func @row_sum
// CHECK: %[[RANK:.*]] = nvvm.read.ptx.sreg.cluster.ctarank : i32
// CHECK: %[[R:.*]] = arith.index_castui %[[RANK]] : i32 to index
// CHECK: arith.muli %[[R]], %c64 : index
// CHECK-COUNT-5: nvvm.shfl.sync  bfly
// CHECK: gpu.barrier
// CHECK: scf.if
// CHECK: memref.store %{{.*}} : memref<64xf32, #gpu.address_space<workgroup>>
// CHECK: nvvm.cluster.arrive
// CHECK-NEXT: nvvm.cluster.wait
// CHECK: nvvm.mapa %{{.*}}, %c0_i32 : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK: llvm.load %{{.*}} : !llvm.ptr<7> -> f32
// CHECK: nvvm.mapa %{{.*}}, %c1_i32 : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK: llvm.load %{{.*}} : !llvm.ptr<7> -> f32
// CHECK: nvvm.cluster.arrive
// CHECK-NEXT: nvvm.cluster.wait
// CHECK: arith.divf
// PTX-LABEL: .entry row_sum(
// PTX: .reqnctapercluster 2, 1, 1
// PTX-NOT: .local
// PTX: %cluster_ctarank
// PTX-COUNT-5: shfl.sync.bfly.b32
// PTX: bar.sync 0;
// PTX: barrier.cluster.arrive;
// PTX-NEXT: barrier.cluster.wait;
// PTX: mapa.shared::cluster.u64
// PTX: ld.shared::cluster.b32
// PTX: mapa.shared::cluster.u64
// PTX: ld.shared::cluster.b32
// PTX: barrier.cluster.arrive;
// PTX-NEXT: barrier.cluster.wait;
// PTX: st.global.v4.b32
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

// Two reductions (a softmax's max and sum): the second's first cluster barrier keeps the
// first's scratch alive until every CTA has read it, so the first needs no trailing one:
// three cluster barriers, not four.
// CHECK-LABEL: gpu.func @two_reductions
// CHECK: nvvm.cluster.arrive
// CHECK: nvvm.mapa
// CHECK-NOT: nvvm.cluster.arrive
// CHECK: math.exp
// CHECK: nvvm.cluster.arrive
// CHECK: nvvm.mapa
// CHECK: nvvm.cluster.arrive
// CHECK-NOT: nvvm.cluster.arrive
// CHECK: gpu.return
// PTX-LABEL: .entry two_reductions(
// PTX-COUNT-3: barrier.cluster.arrive;
// PTX-NOT: barrier.cluster.arrive;
// PTX: ret;
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
// the lanes' butterfly, then four ranks' partials. Into global memory, one thread of the
// cluster writes the result (its reduced fields, the CTAs' included, at 0).
// CHECK-LABEL: gpu.func @warp_per_cta
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.cluster.arrive
// CHECK: nvvm.mapa %{{.*}}, %c0_i32
// CHECK: nvvm.mapa %{{.*}}, %c1_i32
// CHECK: nvvm.mapa %{{.*}}, %c2_i32
// CHECK: nvvm.mapa %{{.*}}, %c3_i32
// CHECK: scf.if
// CHECK: memref.store %{{.*}} : memref<1xf32>
// CHECK: nvvm.cluster.arrive
// PTX-LABEL: .entry warp_per_cta(
// PTX: .reqnctapercluster 4, 1, 1
// PTX-NOT: bar.sync
// PTX-COUNT-4: ld.shared::cluster.b32
gpu.module @m {
  gpu.func @warp_per_cta(%x: memref<128x2xf32>, %out: memref<1xf32>) kernel attributes {known_block_size = array<i32: 32, 1, 1>, nvvm.cluster_dim = array<i32: 4, 1, 1>} {
    %t = "tile.alloc"() {layout = #tile.layout<"S[(128, 2):(1@tid, 1)]">} : () -> memref<128x2xf32, #gpu.address_space<private>>
    "tile.copy"(%t, %x) {scope = "cluster"} : (memref<128x2xf32, #gpu.address_space<private>>, memref<128x2xf32>) -> ()
    "tile.reduce"(%out, %t) {kind = "max", scope = "cluster"} : (memref<1xf32>, memref<128x2xf32, #gpu.address_space<private>>) -> ()
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
