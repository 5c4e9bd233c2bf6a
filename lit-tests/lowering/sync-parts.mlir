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

// -----

// Two rows of a tensor at offsets known at run time, 2b and 2b + 1 (b the block's
// id, each offset built on its own): apart, so the second row's read by other threads
// than the first row's write needs no barrier.
// CHECK-LABEL: gpu.func @rows_apart
// CHECK-NOT: gpu.barrier
// CHECK: gpu.return
gpu.module @m {
  gpu.func @rows_apart(%x: memref<8x32x32xf32>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %c2 = arith.constant 2 : index
    %bid = gpu.block_id x
    %r0 = arith.muli %bid, %c2 : index
    %two = arith.constant 2 : index
    %one = arith.constant 1 : index
    %again = gpu.block_id x
    %twice = arith.muli %again, %two : index
    %r1 = arith.addi %twice, %one : index
    %v0 = memref.subview %x[%r0, 0, 0] [1, 32, 32] [1, 1, 1] : memref<8x32x32xf32> to memref<32x32xf32, strided<[32, 1], offset: ?>>
    %v1 = memref.subview %x[%r1, 0, 0] [1, 32, 32] [1, 1, 1] : memref<8x32x32xf32> to memref<32x32xf32, strided<[32, 1], offset: ?>>
    %a = "tile.alloc"() {layout = #tile.layout<"S[(32, 32):(1@tid, 1)]">} : () -> memref<32x32xf32, #gpu.address_space<private>>
    %b = "tile.alloc"() {layout = #tile.layout<"S[(32, 32):(1, 1@tid)]">} : () -> memref<32x32xf32, #gpu.address_space<private>>
    "tile.copy"(%v0, %a) {scope = "cta"} : (memref<32x32xf32, strided<[32, 1], offset: ?>>, memref<32x32xf32, #gpu.address_space<private>>) -> ()
    "tile.copy"(%b, %v1) {scope = "cta"} : (memref<32x32xf32, #gpu.address_space<private>>, memref<32x32xf32, strided<[32, 1], offset: ?>>) -> ()
    gpu.return
  }
}

// -----

// The same row (2b and 2b + 0, built apart): a barrier.
// CHECK-LABEL: gpu.func @rows_same
// CHECK: "tile.copy"
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: "tile.copy"
gpu.module @m {
  gpu.func @rows_same(%x: memref<8x32x32xf32>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %c2 = arith.constant 2 : index
    %c0 = arith.constant 0 : index
    %bid = gpu.block_id x
    %r0 = arith.muli %bid, %c2 : index
    %again = gpu.block_id x
    %twice = arith.muli %again, %c2 : index
    %r1 = arith.addi %twice, %c0 : index
    %v0 = memref.subview %x[%r0, 0, 0] [1, 32, 32] [1, 1, 1] : memref<8x32x32xf32> to memref<32x32xf32, strided<[32, 1], offset: ?>>
    %v1 = memref.subview %x[%r1, 0, 0] [1, 32, 32] [1, 1, 1] : memref<8x32x32xf32> to memref<32x32xf32, strided<[32, 1], offset: ?>>
    %a = "tile.alloc"() {layout = #tile.layout<"S[(32, 32):(1@tid, 1)]">} : () -> memref<32x32xf32, #gpu.address_space<private>>
    %b = "tile.alloc"() {layout = #tile.layout<"S[(32, 32):(1, 1@tid)]">} : () -> memref<32x32xf32, #gpu.address_space<private>>
    "tile.copy"(%v0, %a) {scope = "cta"} : (memref<32x32xf32, strided<[32, 1], offset: ?>>, memref<32x32xf32, #gpu.address_space<private>>) -> ()
    "tile.copy"(%b, %v1) {scope = "cta"} : (memref<32x32xf32, #gpu.address_space<private>>, memref<32x32xf32, strided<[32, 1], offset: ?>>) -> ()
    gpu.return
  }
}

// -----

// Rows at a thread's id t and t + 1: each thread's own number, so nothing is claimed
// (a barrier).
// CHECK-LABEL: gpu.func @rows_by_thread
// CHECK: "tile.copy"
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: "tile.copy"
gpu.module @m {
  gpu.func @rows_by_thread(%x: memref<64x32x32xf32>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %c1 = arith.constant 1 : index
    %tid = gpu.thread_id x
    %next = arith.addi %tid, %c1 : index
    %v0 = memref.subview %x[%tid, 0, 0] [1, 32, 32] [1, 1, 1] : memref<64x32x32xf32> to memref<32x32xf32, strided<[32, 1], offset: ?>>
    %v1 = memref.subview %x[%next, 0, 0] [1, 32, 32] [1, 1, 1] : memref<64x32x32xf32> to memref<32x32xf32, strided<[32, 1], offset: ?>>
    %a = "tile.alloc"() {layout = #tile.layout<"S[(32, 32):(1@tid, 1)]">} : () -> memref<32x32xf32, #gpu.address_space<private>>
    %b = "tile.alloc"() {layout = #tile.layout<"S[(32, 32):(1, 1@tid)]">} : () -> memref<32x32xf32, #gpu.address_space<private>>
    "tile.copy"(%v0, %a) {scope = "cta"} : (memref<32x32xf32, strided<[32, 1], offset: ?>>, memref<32x32xf32, #gpu.address_space<private>>) -> ()
    "tile.copy"(%b, %v1) {scope = "cta"} : (memref<32x32xf32, #gpu.address_space<private>>, memref<32x32xf32, strided<[32, 1], offset: ?>>) -> ()
    gpu.return
  }
}

// -----

// Parts of two rows (2b, 2b + 1), each row reshaped and cut in two: the parts are
// subviews of different views, but their rows are apart: no barrier.
// CHECK-LABEL: gpu.func @parts_of_rows
// CHECK-NOT: gpu.barrier
// CHECK: gpu.return
gpu.module @m {
  gpu.func @parts_of_rows(%x: memref<8x2048xf32>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %bid = gpu.block_id x
    %r0 = arith.muli %bid, %c2 : index
    %r1 = arith.addi %r0, %c1 : index
    %row0 = memref.subview %x[%r0, 0] [1, 2048] [1, 1] : memref<8x2048xf32> to memref<2048xf32, strided<[1], offset: ?>>
    %row1 = memref.subview %x[%r1, 0] [1, 2048] [1, 1] : memref<8x2048xf32> to memref<2048xf32, strided<[1], offset: ?>>
    %w0 = memref.expand_shape %row0 [[0, 1]] output_shape [64, 32] : memref<2048xf32, strided<[1], offset: ?>> into memref<64x32xf32, strided<[32, 1], offset: ?>>
    %w1 = memref.expand_shape %row1 [[0, 1]] output_shape [64, 32] : memref<2048xf32, strided<[1], offset: ?>> into memref<64x32xf32, strided<[32, 1], offset: ?>>
    %p0 = memref.subview %w0[0, 0] [32, 32] [1, 1] : memref<64x32xf32, strided<[32, 1], offset: ?>> to memref<32x32xf32, strided<[32, 1], offset: ?>>
    %p1 = memref.subview %w1[32, 0] [32, 32] [1, 1] : memref<64x32xf32, strided<[32, 1], offset: ?>> to memref<32x32xf32, strided<[32, 1], offset: ?>>
    %a = "tile.alloc"() {layout = #tile.layout<"S[(32, 32):(1@tid, 1)]">} : () -> memref<32x32xf32, #gpu.address_space<private>>
    %b = "tile.alloc"() {layout = #tile.layout<"S[(32, 32):(1, 1@tid)]">} : () -> memref<32x32xf32, #gpu.address_space<private>>
    "tile.copy"(%p0, %a) {scope = "cta"} : (memref<32x32xf32, strided<[32, 1], offset: ?>>, memref<32x32xf32, #gpu.address_space<private>>) -> ()
    "tile.copy"(%b, %p1) {scope = "cta"} : (memref<32x32xf32, #gpu.address_space<private>>, memref<32x32xf32, strided<[32, 1], offset: ?>>) -> ()
    gpu.return
  }
}

// -----

// A loop over rows: iteration i reads part 0 of row i into registers and writes part 1
// through another layout. The parts lie in row i's slice of %x (a subview at the
// induction variable, one row thick, of a view made outside the loop), so around the
// back edge they never meet the next iteration's: no barrier.
// CHECK-LABEL: gpu.func @loop_rows
// CHECK-NOT: gpu.barrier
// CHECK: gpu.return
gpu.module @m {
  gpu.func @loop_rows(%x: memref<8x2048xf32>, %n: index) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %c1 = arith.constant 1 : index
    %first = gpu.block_id x
    scf.for %i = %first to %n step %c1 {
      %row = memref.subview %x[%i, 0] [1, 2048] [1, 1] : memref<8x2048xf32> to memref<2048xf32, strided<[1], offset: ?>>
      %w = memref.expand_shape %row [[0, 1]] output_shape [64, 32] : memref<2048xf32, strided<[1], offset: ?>> into memref<64x32xf32, strided<[32, 1], offset: ?>>
      %p0 = memref.subview %w[0, 0] [32, 32] [1, 1] : memref<64x32xf32, strided<[32, 1], offset: ?>> to memref<32x32xf32, strided<[32, 1], offset: ?>>
      %p1 = memref.subview %w[32, 0] [32, 32] [1, 1] : memref<64x32xf32, strided<[32, 1], offset: ?>> to memref<32x32xf32, strided<[32, 1], offset: ?>>
      %a = "tile.alloc"() {layout = #tile.layout<"S[(32, 32):(1@tid, 1)]">} : () -> memref<32x32xf32, #gpu.address_space<private>>
      %b = "tile.alloc"() {layout = #tile.layout<"S[(32, 32):(1, 1@tid)]">} : () -> memref<32x32xf32, #gpu.address_space<private>>
      "tile.copy"(%a, %p0) {scope = "cta"} : (memref<32x32xf32, #gpu.address_space<private>>, memref<32x32xf32, strided<[32, 1], offset: ?>>) -> ()
      "tile.copy"(%p1, %b) {scope = "cta"} : (memref<32x32xf32, strided<[32, 1], offset: ?>>, memref<32x32xf32, #gpu.address_space<private>>) -> ()
    }
    gpu.return
  }
}

// -----

// The same loop, but the row's source is made in the loop, at 4 - i: row i of it is
// row 4 of %x in every iteration, so the slice rule claims nothing and the next
// iteration's read waits at the loop's top for this one's write.
// CHECK-LABEL: gpu.func @loop_moving_source
// CHECK: scf.for
// CHECK: gpu.barrier
// CHECK-NEXT: "tile.copy"
gpu.module @m {
  gpu.func @loop_moving_source(%x: memref<8x2048xf32>, %n: index) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %first = gpu.block_id x
    scf.for %i = %first to %n step %c1 {
      %at = arith.subi %c4, %i : index
      %rows = memref.subview %x[%at, 0] [4, 2048] [1, 1] : memref<8x2048xf32> to memref<4x2048xf32, strided<[2048, 1], offset: ?>>
      %row = memref.subview %rows[%i, 0] [1, 2048] [1, 1] : memref<4x2048xf32, strided<[2048, 1], offset: ?>> to memref<2048xf32, strided<[1], offset: ?>>
      %w = memref.expand_shape %row [[0, 1]] output_shape [64, 32] : memref<2048xf32, strided<[1], offset: ?>> into memref<64x32xf32, strided<[32, 1], offset: ?>>
      %p0 = memref.subview %w[0, 0] [32, 32] [1, 1] : memref<64x32xf32, strided<[32, 1], offset: ?>> to memref<32x32xf32, strided<[32, 1], offset: ?>>
      %p1 = memref.subview %w[32, 0] [32, 32] [1, 1] : memref<64x32xf32, strided<[32, 1], offset: ?>> to memref<32x32xf32, strided<[32, 1], offset: ?>>
      %a = "tile.alloc"() {layout = #tile.layout<"S[(32, 32):(1@tid, 1)]">} : () -> memref<32x32xf32, #gpu.address_space<private>>
      %b = "tile.alloc"() {layout = #tile.layout<"S[(32, 32):(1, 1@tid)]">} : () -> memref<32x32xf32, #gpu.address_space<private>>
      "tile.copy"(%a, %p0) {scope = "cta"} : (memref<32x32xf32, #gpu.address_space<private>>, memref<32x32xf32, strided<[32, 1], offset: ?>>) -> ()
      "tile.copy"(%p1, %b) {scope = "cta"} : (memref<32x32xf32, strided<[32, 1], offset: ?>>, memref<32x32xf32, #gpu.address_space<private>>) -> ()
    }
    gpu.return
  }
}

// -----

// Pieces of one split (tile.piece on reinterpret_casts of one source: tile_mlir.lang's
// aligned() makes a row's head, body and tail so) never meet: the head written after the
// body is read (other views, which might overlap but for the marks) needs no barrier.
// CHECK-LABEL: gpu.func @pieces
// CHECK-NOT: gpu.barrier
// CHECK: gpu.return
gpu.module @m {
  gpu.func @pieces(%x: memref<1030xf32>, %h: index, %k: index, %t: index) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %head = memref.reinterpret_cast %x to offset: [1], sizes: [%h, 1], strides: [1, 1] {tile.piece = "head:4"} : memref<1030xf32> to memref<?x1xf32, strided<[1, 1], offset: 1>>
    %body = memref.reinterpret_cast %x to offset: [4], sizes: [%k, 4], strides: [4, 1] {tile.piece = "body:4"} : memref<1030xf32> to memref<?x4xf32, strided<[4, 1], offset: 4>>
    %a = "tile.alloc"() {layout = #tile.layout<"S[(32, 4):(1@tid, 1)]">} : () -> memref<32x4xf32, #gpu.address_space<private>>
    %b = "tile.alloc"() {layout = #tile.layout<"S[(32, 4):(1@tid, 1)]">} : () -> memref<32x4xf32, #gpu.address_space<private>>
    "tile.copy"(%a, %body) {scope = "cta"} : (memref<32x4xf32, #gpu.address_space<private>>, memref<?x4xf32, strided<[4, 1], offset: 4>>) -> ()
    "tile.copy"(%head, %b) {scope = "cta"} : (memref<?x1xf32, strided<[1, 1], offset: 1>>, memref<32x4xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

// The same views without the marks, two marked alike, or pieces of two splits (at 8 and
// at 4 elements: they cut the row elsewhere) may overlap: a barrier each.
// CHECK-LABEL: gpu.func @unmarked
// CHECK: "tile.copy"
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: "tile.copy"
// CHECK: "tile.copy"
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: "tile.copy"
// CHECK: "tile.copy"
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: "tile.copy"
gpu.module @m {
  gpu.func @unmarked(%x: memref<1030xf32>, %h: index, %k: index) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %head = memref.reinterpret_cast %x to offset: [1], sizes: [%h, 1], strides: [1, 1] : memref<1030xf32> to memref<?x1xf32, strided<[1, 1], offset: 1>>
    %body = memref.reinterpret_cast %x to offset: [4], sizes: [%k, 4], strides: [4, 1] : memref<1030xf32> to memref<?x4xf32, strided<[4, 1], offset: 4>>
    %twin = memref.reinterpret_cast %x to offset: [1], sizes: [%h, 1], strides: [1, 1] {tile.piece = "body:4"} : memref<1030xf32> to memref<?x1xf32, strided<[1, 1], offset: 1>>
    %marked = memref.reinterpret_cast %x to offset: [4], sizes: [%k, 4], strides: [4, 1] {tile.piece = "body:4"} : memref<1030xf32> to memref<?x4xf32, strided<[4, 1], offset: 4>>
    %a = "tile.alloc"() {layout = #tile.layout<"S[(32, 4):(1@tid, 1)]">} : () -> memref<32x4xf32, #gpu.address_space<private>>
    %b = "tile.alloc"() {layout = #tile.layout<"S[(32, 4):(1@tid, 1)]">} : () -> memref<32x4xf32, #gpu.address_space<private>>
    "tile.copy"(%a, %body) {scope = "cta"} : (memref<32x4xf32, #gpu.address_space<private>>, memref<?x4xf32, strided<[4, 1], offset: 4>>) -> ()
    "tile.copy"(%head, %b) {scope = "cta"} : (memref<?x1xf32, strided<[1, 1], offset: 1>>, memref<32x4xf32, #gpu.address_space<private>>) -> ()
    "tile.copy"(%a, %marked) {scope = "cta"} : (memref<32x4xf32, #gpu.address_space<private>>, memref<?x4xf32, strided<[4, 1], offset: 4>>) -> ()
    "tile.copy"(%twin, %b) {scope = "cta"} : (memref<?x1xf32, strided<[1, 1], offset: 1>>, memref<32x4xf32, #gpu.address_space<private>>) -> ()
    %other = memref.reinterpret_cast %x to offset: [1], sizes: [%h, 1], strides: [1, 1] {tile.piece = "head:8"} : memref<1030xf32> to memref<?x1xf32, strided<[1, 1], offset: 1>>
    "tile.copy"(%a, %marked) {scope = "cta"} : (memref<32x4xf32, #gpu.address_space<private>>, memref<?x4xf32, strided<[4, 1], offset: 4>>) -> ()
    "tile.copy"(%other, %b) {scope = "cta"} : (memref<?x1xf32, strided<[1, 1], offset: 1>>, memref<32x4xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}
