// tile-barriers between ops on parts of one row (lowering/support/sync.py): subviews of
// one view that are disjoint along a dim never meet (a row written part by part); the
// very same view read and written back through one register layout held once is touched
// by the same thread at each element; anything else that may meet gets its barrier.
// RUN: tile-opt %s --split-input-file --tile-barriers | FileCheck %s

// Two parts of a row: each read into registers and written back in place, then both
// written again: no barrier anywhere.
// CHECK-LABEL: gpu.func @parts
// CHECK-NOT: gpu.barrier
// CHECK: gpu.return
gpu.module @m {
  gpu.func @parts(%x: memref<256x4xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %p0 = memref.subview %x[0, 0] [128, 4] [1, 1] : memref<256x4xf32> to memref<128x4xf32, strided<[4, 1]>>
    %p1 = memref.subview %x[128, 0] [128, 4] [1, 1] : memref<256x4xf32> to memref<128x4xf32, strided<[4, 1], offset: 512>>
    %r0 = "tile.alloc"() {layout = #tile.layout<"S[(128, 4):(1@tid, 1)]">} : () -> memref<128x4xf32, #gpu.address_space<private>>
    %r1 = "tile.alloc"() {layout = #tile.layout<"S[(128, 4):(1@tid, 1)]">} : () -> memref<128x4xf32, #gpu.address_space<private>>
    "tile.copy"(%r0, %p0) {scope = "cta"} : (memref<128x4xf32, #gpu.address_space<private>>, memref<128x4xf32, strided<[4, 1]>>) -> ()
    "tile.copy"(%r1, %p1) {scope = "cta"} : (memref<128x4xf32, #gpu.address_space<private>>, memref<128x4xf32, strided<[4, 1], offset: 512>>) -> ()
    "tile.elementwise"(%p0, %r0) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<128x4xf32, strided<[4, 1]>>, memref<128x4xf32, #gpu.address_space<private>>) -> ()
    "tile.elementwise"(%p1, %r1) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<128x4xf32, strided<[4, 1], offset: 512>>, memref<128x4xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

// Overlapping subviews (rows 0..127 and 64..191): the second write waits for the first
// read of the rows they share.
// CHECK-LABEL: gpu.func @overlap
// CHECK: "tile.copy"
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: "tile.elementwise"
gpu.module @m {
  gpu.func @overlap(%x: memref<256x4xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %p0 = memref.subview %x[0, 0] [128, 4] [1, 1] : memref<256x4xf32> to memref<128x4xf32, strided<[4, 1]>>
    %p1 = memref.subview %x[64, 0] [128, 4] [1, 1] : memref<256x4xf32> to memref<128x4xf32, strided<[4, 1], offset: 256>>
    %r0 = "tile.alloc"() {layout = #tile.layout<"S[(128, 4):(1@tid, 1)]">} : () -> memref<128x4xf32, #gpu.address_space<private>>
    "tile.copy"(%r0, %p0) {scope = "cta"} : (memref<128x4xf32, #gpu.address_space<private>>, memref<128x4xf32, strided<[4, 1]>>) -> ()
    "tile.elementwise"(%p1, %r0) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<128x4xf32, strided<[4, 1], offset: 256>>, memref<128x4xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

// The same view read and written, but through a layout that puts element (i, j) in
// another thread than the read did: a barrier.
// CHECK-LABEL: gpu.func @other_threads
// CHECK: "tile.copy"
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: "tile.copy"
gpu.module @m {
  gpu.func @other_threads(%x: memref<32x32xf32>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %a = "tile.alloc"() {layout = #tile.layout<"S[(32, 32):(1@tid, 1)]">} : () -> memref<32x32xf32, #gpu.address_space<private>>
    %b = "tile.alloc"() {layout = #tile.layout<"S[(32, 32):(1, 1@tid)]">} : () -> memref<32x32xf32, #gpu.address_space<private>>
    "tile.copy"(%a, %x) {scope = "cta"} : (memref<32x32xf32, #gpu.address_space<private>>, memref<32x32xf32>) -> ()
    "tile.copy"(%x, %b) {scope = "cta"} : (memref<32x32xf32>, memref<32x32xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}
