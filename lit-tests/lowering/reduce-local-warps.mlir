// reduce/local across warps: each thread folds its registers, the warp butterflies, the
// warps' partials meet in a shared scratch after one barrier and every thread folds all
// of them (the result replicated, as dst's R[...] says), or one thread writes memory.
// RUN: tile-opt %s --split-input-file --verify-diagnostics --tile-lower --canonicalize --cse | FileCheck %s
// RUN: not tile-opt %s --split-input-file -p tile-to-ptx --emit=ptx 2>/dev/null | FileCheck %s --check-prefix=PTX

// A row of 1024 floats over a 256-thread CTA: 4 registers a thread, 5 shuffles, every
// thread leaves its warp's value at its own index, one barrier, 8 partials read from
// the same addresses in every thread (its base: its index with the reduced fields
// cleared), folded as a balanced tree in the same order in every thread (3 levels for
// 8: in a sum a partial meets log2(8) roundings, where a chain gave the first one 7).
// CHECK-LABEL: gpu.func @cta
// CHECK: %[[T:.*]] = gpu.thread_id x
// CHECK: memref.get_global @__tile_reduce_0 : memref<256xf32, #gpu.address_space<workgroup>>
// CHECK: scf.for %{{.*}} = %c1 to %c4 step %c1 iter_args
// CHECK-COUNT-5: nvvm.shfl.sync  bfly %c-1_i32
// CHECK: memref.store %{{.*}}, %{{.*}}[%[[T]]] : memref<256xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT: gpu.barrier
// CHECK: %[[P0:.*]] = memref.load %{{.*}} : memref<256xf32, #gpu.address_space<workgroup>>
// CHECK: %[[P1:.*]] = memref.load %{{.*}} : memref<256xf32, #gpu.address_space<workgroup>>
// CHECK: %[[P2:.*]] = memref.load %{{.*}} : memref<256xf32, #gpu.address_space<workgroup>>
// CHECK: %[[P3:.*]] = memref.load %{{.*}} : memref<256xf32, #gpu.address_space<workgroup>>
// CHECK: %[[P4:.*]] = memref.load %{{.*}} : memref<256xf32, #gpu.address_space<workgroup>>
// CHECK: %[[P5:.*]] = memref.load %{{.*}} : memref<256xf32, #gpu.address_space<workgroup>>
// CHECK: %[[P6:.*]] = memref.load %{{.*}} : memref<256xf32, #gpu.address_space<workgroup>>
// CHECK: %[[P7:.*]] = memref.load %{{.*}} : memref<256xf32, #gpu.address_space<workgroup>>
// CHECK: %[[A:.*]] = arith.maximumf %[[P0]], %[[P1]] : f32
// CHECK: %[[B:.*]] = arith.maximumf %[[P2]], %[[P3]] : f32
// CHECK: %[[AB:.*]] = arith.maximumf %[[A]], %[[B]] : f32
// CHECK: %[[C:.*]] = arith.maximumf %[[P4]], %[[P5]] : f32
// CHECK: %[[D:.*]] = arith.maximumf %[[P6]], %[[P7]] : f32
// CHECK: %[[CD:.*]] = arith.maximumf %[[C]], %[[D]] : f32
// CHECK: %[[ALL:.*]] = arith.maximumf %[[AB]], %[[CD]] : f32
// CHECK-NOT: gpu.barrier
// CHECK: memref.store %[[ALL]], %{{.*}} : memref<1xf32, #gpu.address_space<private>>
// PTX-LABEL: .entry cta(
// PTX-NOT: .local
// PTX-COUNT-5: shfl.sync.bfly.b32
// PTX: st.shared.b32
// PTX: bar.sync 0;
// PTX-NOT: bar.sync
// PTX-COUNT-8: ld.shared.b32
// PTX-NOT: bar.sync
// PTX: ret;
gpu.module @m {
  gpu.func @cta(%g: memref<256x4xf32>, %out: memref<1x1xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %r = "tile.alloc"() {layout = #tile.layout<"S[(256, 4):(1@tid, 1)]">} : () -> memref<256x4xf32, #gpu.address_space<private>>
    %m = "tile.alloc"() {layout = #tile.layout<"S[(1, 1)], R[256:1@tid]">} : () -> memref<1x1xf32, #gpu.address_space<private>>
    "tile.copy"(%r, %g) {scope = "cta"} : (memref<256x4xf32, #gpu.address_space<private>>, memref<256x4xf32>) -> ()
    "tile.reduce"(%m, %r) {kind = "max", scope = "cta"} : (memref<1x1xf32, #gpu.address_space<private>>, memref<256x4xf32, #gpu.address_space<private>>) -> ()
    "tile.copy"(%out, %m) {scope = "cta"} : (memref<1x1xf32>, memref<1x1xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

// A 48-thread CTA: the second warp has 16 lanes; a partner lane past them contributes
// the sum's identity (the shuffles name the existing lanes only).
// CHECK-LABEL: gpu.func @partial_warp
// CHECK: %[[MASK:.*]] = arith.select %{{.*}}, %c-1_i32, %{{.*}} : i32
// CHECK: %[[S:.*]] = nvvm.shfl.sync  bfly %[[MASK]], %{{.*}}, %c16_i32, %c31_i32
// CHECK: %[[P:.*]] = arith.xori %{{.*}}, %c16 : index
// CHECK: %[[OK:.*]] = arith.cmpi ult, %[[P]], %{{.*}} : index
// CHECK: arith.select %[[OK]], %[[S]], %cst : f32
// CHECK: gpu.barrier
// CHECK-COUNT-2: memref.load %{{.*}} : memref<48xf32, #gpu.address_space<workgroup>>
gpu.module @m {
  gpu.func @partial_warp(%g: memref<48x4xf32>, %out: memref<1x1xf32>) kernel attributes {known_block_size = array<i32: 48, 1, 1>} {
    %r = "tile.alloc"() {layout = #tile.layout<"S[(48, 4):(1@tid, 1)]">} : () -> memref<48x4xf32, #gpu.address_space<private>>
    %s = "tile.alloc"() {layout = #tile.layout<"S[(1, 1)], R[48:1@tid]">} : () -> memref<1x1xf32, #gpu.address_space<private>>
    "tile.copy"(%r, %g) {scope = "cta"} : (memref<48x4xf32, #gpu.address_space<private>>, memref<48x4xf32>) -> ()
    "tile.reduce"(%s, %r) {kind = "sum", scope = "cta"} : (memref<1x1xf32, #gpu.address_space<private>>, memref<48x4xf32, #gpu.address_space<private>>) -> ()
    "tile.copy"(%out, %s) {scope = "cta"} : (memref<1x1xf32>, memref<1x1xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

// A 7-thread CTA: one partial warp, and 7 lanes, not a power of two: the butterfly pairs
// 8 lanes (offsets 1, 2, 4), and lane 7, which does not exist, contributes the identity.
// No warp fields, so no barrier.
// CHECK-LABEL: gpu.func @seven_threads
// CHECK: %[[MASK:.*]] = arith.select %{{.*}}, %c-1_i32, %{{.*}} : i32
// CHECK: nvvm.shfl.sync  bfly %[[MASK]], %{{.*}}, %c1_i32, %c31_i32
// CHECK: nvvm.shfl.sync  bfly %[[MASK]], %{{.*}}, %c2_i32, %c31_i32
// CHECK: nvvm.shfl.sync  bfly %[[MASK]], %{{.*}}, %c4_i32, %c31_i32
// CHECK-NOT: nvvm.shfl.sync
// CHECK-NOT: gpu.barrier
// CHECK: gpu.return
// PTX-LABEL: .entry seven_threads(
// PTX-COUNT-3: shfl.sync.bfly.b32
// PTX-NOT: bar.sync
// PTX: ret;
gpu.module @m {
  gpu.func @seven_threads(%g: memref<7x4xf32>, %out: memref<1x1xf32>) kernel attributes {known_block_size = array<i32: 7, 1, 1>} {
    %r = "tile.alloc"() {layout = #tile.layout<"S[(7, 4):(1@tid, 1)]">} : () -> memref<7x4xf32, #gpu.address_space<private>>
    %s = "tile.alloc"() {layout = #tile.layout<"S[(1, 1)], R[7:1@tid]">} : () -> memref<1x1xf32, #gpu.address_space<private>>
    "tile.copy"(%r, %g) {scope = "cta"} : (memref<7x4xf32, #gpu.address_space<private>>, memref<7x4xf32>) -> ()
    "tile.reduce"(%s, %r) {kind = "sum", scope = "cta"} : (memref<1x1xf32, #gpu.address_space<private>>, memref<7x4xf32, #gpu.address_space<private>>) -> ()
    "tile.copy"(%out, %s) {scope = "cta"} : (memref<1x1xf32>, memref<1x1xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

// Into global memory: the thread whose reduced fields are 0 writes each output (here a
// row per warp-pair: rows over warpid 4 apart, kept).
// CHECK-LABEL: gpu.func @into_global
// CHECK: gpu.barrier
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %{{.*}}, %{{.*}} : index
// CHECK-COUNT-4: memref.load %{{.*}} : memref<256xf32, #gpu.address_space<workgroup>>
// CHECK: scf.if %[[FIRST]] {
// CHECK:   memref.store %{{.*}} : memref<2xf32>
// PTX-LABEL: .entry into_global(
// PTX-COUNT-1: bar.sync
// PTX-NOT: bar.sync
gpu.module @m {
  gpu.func @into_global(%g: memref<2x4x32x6xf32>, %out: memref<2xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %r = "tile.alloc"() {layout = #tile.layout<"S[(2, 4, 32, 6):(4@warpid, 1@warpid, 1@laneid, 1)]">} : () -> memref<2x4x32x6xf32, #gpu.address_space<private>>
    "tile.copy"(%r, %g) {scope = "cta"} : (memref<2x4x32x6xf32, #gpu.address_space<private>>, memref<2x4x32x6xf32>) -> ()
    "tile.reduce"(%out, %r) {kind = "sum", axes = array<i64: 1, 2, 3>, scope = "cta"} : (memref<2xf32>, memref<2x4x32x6xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

// In a loop, alone: the next iteration's writes to the scratch wait for this one's reads
// (a second barrier). With another reduction across warps in the body, that one's
// barrier already stands between: one barrier each.
// PTX-LABEL: .entry alone_in_a_loop(
// CHECK-LABEL: gpu.func @alone_in_a_loop
// CHECK: scf.for
// CHECK: gpu.barrier
// CHECK: gpu.barrier
// CHECK-NOT: gpu.barrier
// CHECK-LABEL: gpu.func @two_in_a_loop
// CHECK: scf.for
// CHECK: gpu.barrier
// CHECK: gpu.barrier
// CHECK-NOT: gpu.barrier
// CHECK: gpu.return
gpu.module @m {
  gpu.func @alone_in_a_loop(%g: memref<256x4xf32>, %out: memref<1x1xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %r = "tile.alloc"() {layout = #tile.layout<"S[(256, 4):(1@tid, 1)]">} : () -> memref<256x4xf32, #gpu.address_space<private>>
    %s = "tile.alloc"() {layout = #tile.layout<"S[(1, 1)], R[256:1@tid]">} : () -> memref<1x1xf32, #gpu.address_space<private>>
    "tile.copy"(%r, %g) {scope = "cta"} : (memref<256x4xf32, #gpu.address_space<private>>, memref<256x4xf32>) -> ()
    scf.for %i = %c0 to %c4 step %c1 {
      "tile.reduce"(%s, %r) {kind = "sum", scope = "cta", accum = true} : (memref<1x1xf32, #gpu.address_space<private>>, memref<256x4xf32, #gpu.address_space<private>>) -> ()
    }
    "tile.copy"(%out, %s) {scope = "cta"} : (memref<1x1xf32>, memref<1x1xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
  gpu.func @two_in_a_loop(%g: memref<256x4xf32>, %out: memref<1x1xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %r = "tile.alloc"() {layout = #tile.layout<"S[(256, 4):(1@tid, 1)]">} : () -> memref<256x4xf32, #gpu.address_space<private>>
    %s = "tile.alloc"() {layout = #tile.layout<"S[(1, 1)], R[256:1@tid]">} : () -> memref<1x1xf32, #gpu.address_space<private>>
    "tile.copy"(%r, %g) {scope = "cta"} : (memref<256x4xf32, #gpu.address_space<private>>, memref<256x4xf32>) -> ()
    scf.for %i = %c0 to %c4 step %c1 {
      "tile.reduce"(%s, %r) {kind = "sum", scope = "cta", accum = true} : (memref<1x1xf32, #gpu.address_space<private>>, memref<256x4xf32, #gpu.address_space<private>>) -> ()
      "tile.reduce"(%s, %r) {kind = "max", scope = "cta", accum = true} : (memref<1x1xf32, #gpu.address_space<private>>, memref<256x4xf32, #gpu.address_space<private>>) -> ()
    }
    "tile.copy"(%out, %s) {scope = "cta"} : (memref<1x1xf32>, memref<1x1xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

// Warpgroup scope: each warpgroup's partials in its own part of the scratch (2 slots of
// the CTA's 256 threads), its named barrier (one id per warpgroup) between.
// CHECK-LABEL: gpu.func @warpgroup
// CHECK: memref.get_global @__tile_reduce_0 : memref<512xf32, #gpu.address_space<workgroup>>
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
// CHECK-COUNT-4: memref.load %{{.*}} : memref<512xf32, #gpu.address_space<workgroup>>
gpu.module @m {
  gpu.func @warpgroup(%g: memref<128x2xf32>, %out: memref<2xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %r = "tile.alloc"() {layout = #tile.layout<"S[(128, 2):(1@tid, 1)]">} : () -> memref<128x2xf32, #gpu.address_space<private>>
    %s = "tile.alloc"() {layout = #tile.layout<"S[2], R[128:1@tid]">} : () -> memref<2xf32, #gpu.address_space<private>>
    "tile.copy"(%r, %g) {scope = "warpgroup"} : (memref<128x2xf32, #gpu.address_space<private>>, memref<128x2xf32>) -> ()
    "tile.reduce"(%s, %r) {kind = "sum", axes = array<i64: 0>, scope = "warpgroup"} : (memref<2xf32, #gpu.address_space<private>>, memref<128x2xf32, #gpu.address_space<private>>) -> ()
    "tile.copy"(%out, %s) {scope = "warpgroup"} : (memref<2xf32>, memref<2xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @not_replicated_over_warps() kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %r = "tile.alloc"() {layout = #tile.layout<"S[(8, 32, 4):(1@warpid, 1@laneid, 1)]">} : () -> memref<8x32x4xf32, #gpu.address_space<private>>
    %s = "tile.alloc"() {layout = #tile.layout<"S[4], R[(32, 8):(1@laneid, 32@tid)]">} : () -> memref<4xf32, #gpu.address_space<private>>
    // expected-error@+1 {{must replicate over the reduced warps (R[8:1@warpid])}}
    "tile.reduce"(%s, %r) {kind = "sum", axes = array<i64: 0, 1>, scope = "cta"} : (memref<4xf32, #gpu.address_space<private>>, memref<8x32x4xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @not_bit_fields() kernel attributes {known_block_size = array<i32: 96, 1, 1>} {
    %r = "tile.alloc"() {layout = #tile.layout<"S[(2, 48):(48@tid, 1@tid)]">} : () -> memref<2x48xf32, #gpu.address_space<private>>
    %s = "tile.alloc"() {layout = #tile.layout<"S[2:48@tid], R[48:1@tid]">} : () -> memref<2xf32, #gpu.address_space<private>>
    // expected-error@+1 {{the reduced thread axes do not split into lane and warp fields}}
    "tile.reduce"(%s, %r) {kind = "sum", axes = array<i64: 1>, scope = "cta"} : (memref<2xf32, #gpu.address_space<private>>, memref<2x48xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}
