// Broadcast inputs of tile.elementwise (numpy's rule, same rank): an input of size 1 on a
// dim where dst has more is read at index 0 there. Memory operands take it as a stride 0
// (one element per vector, repeated, when the dim is innermost); a register operand must
// be held by every thread that reads it (its layout replicates where the tile spreads).
// RUN: tile-opt %s --split-input-file --verify-diagnostics --tile-lower --canonicalize --cse | FileCheck %s

// Global memory: b (1, 64) keeps its float4s at row 0; c (4, 1) is one element per
// vector, broadcast.
// CHECK-LABEL: gpu.func @gmem
// CHECK: %[[ROW:.*]] = arith.divui %{{.*}}, %c16 : index
// CHECK: %[[COL:.*]] = arith.muli %{{.*}}, %c4 : index
// CHECK: %[[A:.*]] = vector.load %{{.*}}[%[[ROW]], %[[COL]]] {alignment = 16 : i64} : memref<4x64xf32>, vector<4xf32>
// CHECK: %[[B:.*]] = vector.load %{{.*}}[%c0, %[[COL]]] {alignment = 16 : i64} : memref<1x64xf32>, vector<4xf32>
// CHECK: %[[C1:.*]] = memref.load %{{.*}}[%[[ROW]], %c0] : memref<4x1xf32>
// CHECK: %[[C:.*]] = vector.broadcast %[[C1]] : f32 to vector<4xf32>
// CHECK: math.fma %[[A]], %[[B]], %[[C]] : vector<4xf32>
gpu.module @m {
  gpu.func @gmem(%a: memref<4x64xf32>, %b: memref<1x64xf32>, %c: memref<4x1xf32>, %out: memref<4x64xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    "tile.elementwise"(%out, %a, %b, %c) {op = "fma", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 1>} : (memref<4x64xf32>, memref<4x64xf32>, memref<1x64xf32>, memref<4x1xf32>) -> ()
    gpu.return
  }
}

// -----

// Shared memory: a (1, 1, 32) bias over a 4x8x32 tile: the broadcast dims merge with
// each other, not with the row; the bias is indexed at 0 there.
// CHECK-LABEL: gpu.func @smem
// CHECK: %[[BIAS:.*]] = memref.collapse_shape %{{.*}} {{\[\[}}0, 1], [2]] : memref<1x1x32xf32, #gpu.address_space<workgroup>> into memref<1x32xf32, #gpu.address_space<workgroup>>
// CHECK: vector.load %[[BIAS]][%c0, %{{.*}}] {alignment = 16 : i64} : memref<1x32xf32, #gpu.address_space<workgroup>>, vector<4xf32>
gpu.module @m {
  gpu.func @smem() kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %t = "tile.alloc"() {layout = #tile.layout<"S[(4, 8, 32)]">} : () -> memref<4x8x32xf32, #gpu.address_space<workgroup>>
    %b = "tile.alloc"() {layout = #tile.layout<"S[(1, 1, 32)]">} : () -> memref<1x1x32xf32, #gpu.address_space<workgroup>>
    "tile.elementwise"(%t, %t, %b) {op = "add", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<4x8x32xf32, #gpu.address_space<workgroup>>, memref<4x8x32xf32, #gpu.address_space<workgroup>>, memref<1x1x32xf32, #gpu.address_space<workgroup>>) -> ()
    gpu.return
  }
}

// -----

// Registers: a row's maximum m (1, 1), held by every thread of the CTA (R[256:1@tid]), is
// read from the thread's own register 0 beside each of its 4 registers of x.
// CHECK-LABEL: gpu.func @registers
// CHECK: %[[M:.*]] = memref.alloca() {alignment = 32 : i64} : memref<1xf32, #gpu.address_space<private>>
// CHECK: %[[X:.*]] = memref.alloca() {alignment = 32 : i64} : memref<4xf32, #gpu.address_space<private>>
// CHECK: scf.for %[[J:.*]] = %c0 to %c4 step %c1 {
// CHECK:   %[[XJ:.*]] = memref.load %[[X]][%[[J]]]
// CHECK:   %[[M0:.*]] = memref.load %[[M]][%c0]
// CHECK:   arith.subf %[[XJ]], %[[M0]] : f32
gpu.module @m {
  gpu.func @registers(%g: memref<256x4xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %x = "tile.alloc"() {layout = #tile.layout<"S[(256, 4):(1@tid, 1)]">} : () -> memref<256x4xf32, #gpu.address_space<private>>
    %m = "tile.alloc"() {layout = #tile.layout<"S[(1, 1)], R[256:1@tid]">} : () -> memref<1x1xf32, #gpu.address_space<private>>
    "tile.copy"(%x, %g) {scope = "cta"} : (memref<256x4xf32, #gpu.address_space<private>>, memref<256x4xf32>) -> ()
    "tile.reduce"(%m, %x) {kind = "max", scope = "cta"} : (memref<1x1xf32, #gpu.address_space<private>>, memref<256x4xf32, #gpu.address_space<private>>) -> ()
    "tile.elementwise"(%x, %x, %m) {op = "sub", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<256x4xf32, #gpu.address_space<private>>, memref<256x4xf32, #gpu.address_space<private>>, memref<1x1xf32, #gpu.address_space<private>>) -> ()
    "tile.copy"(%g, %x) {scope = "cta"} : (memref<256x4xf32>, memref<256x4xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @not_replicated() kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %x = "tile.alloc"() {layout = #tile.layout<"S[(8, 32):(1@warpid, 1@laneid)]">} : () -> memref<8x32xf32, #gpu.address_space<private>>
    %r = "tile.alloc"() {layout = #tile.layout<"S[(8, 1):(4@laneid, 1)], R[(4, 8):(1@laneid, 1@warpid)]">} : () -> memref<8x1xf32, #gpu.address_space<private>>
    // expected-error@+1 {{register operand 2 (S[(8, 1):(4@laneid, 1)], R[(4, 8):(1@laneid, 1@warpid)]) is distributed unlike operand 0 (S[(8, 32):(1@warpid, 1@laneid)]): thread 4 holds element (0, 4) of the tile but not element (0, 0) of this operand}}
    "tile.elementwise"(%x, %x, %r) {op = "mul", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<8x32xf32, #gpu.address_space<private>>, memref<8x32xf32, #gpu.address_space<private>>, memref<8x1xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @shapes(%a: memref<4x64xf32>, %b: memref<2x64xf32>, %c: memref<64xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    // expected-error@+1 {{input 1 has shape 2x64, but dst has shape 4x64 (each extent must be equal, or 1 (a broadcast))}}
    "tile.elementwise"(%a, %a, %b) {op = "add", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<4x64xf32>, memref<4x64xf32>, memref<2x64xf32>) -> ()
    // expected-error@+1 {{input 1 has shape 64, but dst has shape 4x64 (a rank of its own)}}
    "tile.elementwise"(%a, %a, %c) {op = "add", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<4x64xf32>, memref<4x64xf32>, memref<64xf32>) -> ()
    gpu.return
  }
}
