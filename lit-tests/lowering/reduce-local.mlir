// reduction/local: register tiles; a loop over each thread's registers, lane shuffles
// for a reduced axis spread over lanes.
// RUN: tile-opt %s --split-input-file --verify-diagnostics --tile-lower --canonicalize --cse | FileCheck %s

// Rows (registers): each lane folds its 8 registers, no shuffle.
// CHECK-LABEL: gpu.func @rows
// CHECK: scf.for %{{.*}} = %c1 to %c8 step %c1 iter_args
// CHECK:   arith.maximumf
// CHECK-NOT: nvvm.shfl.sync
gpu.module @m {
  gpu.func @rows(%g: memref<32x8xf32>, %out: memref<32xf32>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %r = "tile.alloc"() {layout = #tile.layout<"S[(32, 8):(1@laneid, 1)]">} : () -> memref<32x8xf32, #gpu.address_space<private>>
    %m = "tile.alloc"() {layout = #tile.layout<"S[32:1@laneid]">} : () -> memref<32xf32, #gpu.address_space<private>>
    "tile.copy"(%r, %g) {scope = "warp"} : (memref<32x8xf32, #gpu.address_space<private>>, memref<32x8xf32>) -> ()
    "tile.reduce"(%m, %r) {kind = "max", axes = array<i64: 1>, scope = "warp"} : (memref<32xf32, #gpu.address_space<private>>, memref<32x8xf32, #gpu.address_space<private>>) -> ()
    "tile.copy"(%out, %m) {scope = "warp"} : (memref<32xf32>, memref<32xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

// Columns (across the 32 lanes): per register, a 5-step butterfly over the warp; the
// result is replicated over the lanes, as dst's layout says.
// CHECK-LABEL: gpu.func @columns
// CHECK: scf.for %{{.*}} = %c0 to %c8 step %c1 {
// CHECK:   nvvm.shfl.sync  bfly %c-1_i32, %{{.*}}, %c1_i32, %c31_i32
// CHECK:   nvvm.shfl.sync  bfly %c-1_i32, %{{.*}}, %c16_i32, %c31_i32
// CHECK:   memref.store {{.*}} : memref<8xf32, #gpu.address_space<private>>
gpu.module @m {
  gpu.func @columns(%g: memref<32x8xf32>, %out: memref<8xf32>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %r = "tile.alloc"() {layout = #tile.layout<"S[(32, 8):(1@laneid, 1)]">} : () -> memref<32x8xf32, #gpu.address_space<private>>
    %s = "tile.alloc"() {layout = #tile.layout<"S[8], R[32:1@laneid]">} : () -> memref<8xf32, #gpu.address_space<private>>
    "tile.copy"(%r, %g) {scope = "warp"} : (memref<32x8xf32, #gpu.address_space<private>>, memref<32x8xf32>) -> ()
    "tile.reduce"(%s, %r) {kind = "sum", axes = array<i64: 0>, scope = "warp"} : (memref<8xf32, #gpu.address_space<private>>, memref<32x8xf32, #gpu.address_space<private>>) -> ()
    "tile.copy"(%out, %s) {scope = "warp"} : (memref<8xf32>, memref<8xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @not_replicated() kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %r = "tile.alloc"() {layout = #tile.layout<"S[(32, 8):(1@laneid, 1)]">} : () -> memref<32x8xf32, #gpu.address_space<private>>
    %s = "tile.alloc"() {layout = #tile.layout<"S[8]">} : () -> memref<8xf32, #gpu.address_space<private>>
    // expected-error@+1 {{must replicate over the reduced lanes (R[32:1@laneid])}}
    "tile.reduce"(%s, %r) {kind = "sum", axes = array<i64: 0>, scope = "warp"} : (memref<8xf32, #gpu.address_space<private>>, memref<32x8xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}
