// Barriers between tile ops that share memory (tile-barriers, lowering/support/sync.py), at
// the needed scope.
// RUN: tile-opt %s --split-input-file --tile-lower | FileCheck %s

// Write then read one shared tile: a CTA barrier between; a barrier the user wrote
// counts; a buffer untouched since needs none.
// CHECK-LABEL: gpu.func @cta
// CHECK: vector.store {{.*}}workgroup
// CHECK-NEXT: }
// CHECK-NEXT: gpu.barrier
// CHECK: vector.store {{.*}} : memref<1024xf32>, vector<4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: gpu.barrier
// CHECK-NOT: gpu.barrier
// CHECK: gpu.return
gpu.module @m {
  gpu.func @cta(%a: memref<1024xf32>, %b: memref<1024xf32>, %c: memref<1024xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %s = "tile.alloc"() {layout = #tile.layout<"S[1024]">} : () -> memref<1024xf32, #gpu.address_space<workgroup>>
    "tile.copy"(%s, %a) {scope = "cta"} : (memref<1024xf32, #gpu.address_space<workgroup>>, memref<1024xf32>) -> ()
    "tile.copy"(%b, %s) {scope = "cta"} : (memref<1024xf32>, memref<1024xf32, #gpu.address_space<workgroup>>) -> ()
    gpu.barrier
    "tile.copy"(%s, %c) {scope = "cta"} : (memref<1024xf32, #gpu.address_space<workgroup>>, memref<1024xf32>) -> ()
    "tile.elementwise"(%a, %a) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<1024xf32>, memref<1024xf32>) -> ()
    gpu.return
  }
}

// -----

// Warpgroup scope: a named barrier of 128 threads, one id per warpgroup (0 is bar.sync 0).
// CHECK-LABEL: gpu.func @warpgroup
// CHECK: vector.store {{.*}}workgroup
// CHECK: %[[WG:.*]] = arith.divui %{{.*}}, %c128{{.*}} : index
// CHECK: %[[I:.*]] = arith.index_cast %[[WG]] : index to i32
// CHECK: %[[ID:.*]] = arith.addi %[[I]], %c1_i32 : i32
// CHECK: nvvm.barrier id = %[[ID]] number_of_threads = %c128_i32
// CHECK: vector.store {{.*}} : memref<512xf32, strided<[1], offset: ?>>
gpu.module @m {
  gpu.func @warpgroup(%a: memref<2x512xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %t = gpu.thread_id x
    %c128 = arith.constant 128 : index
    %wg = arith.divui %t, %c128 : index
    %row = memref.subview %a[%wg, 0] [1, 512] [1, 1] : memref<2x512xf32> to memref<512xf32, strided<[1], offset: ?>>
    %s = "tile.alloc"() {layout = #tile.layout<"S[(2, 512)]">} : () -> memref<2x512xf32, #gpu.address_space<workgroup>>
    %mine = memref.subview %s[%wg, 0] [1, 512] [1, 1] : memref<2x512xf32, #gpu.address_space<workgroup>> to memref<512xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    "tile.copy"(%mine, %row) {scope = "warpgroup"} : (memref<512xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>, memref<512xf32, strided<[1], offset: ?>>) -> ()
    "tile.copy"(%row, %mine) {scope = "warpgroup"} : (memref<512xf32, strided<[1], offset: ?>>, memref<512xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>) -> ()
    gpu.return
  }
}

// -----

// In a loop, the next iteration's write waits for this iteration's read.
// CHECK-LABEL: gpu.func @loop
// CHECK: scf.for
// CHECK:   gpu.barrier
// CHECK:   gpu.barrier
// CHECK: }
gpu.module @m {
  gpu.func @loop(%a: memref<8x256xf32>, %b: memref<256xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %s = "tile.alloc"() {layout = #tile.layout<"S[256]">} : () -> memref<256xf32, #gpu.address_space<workgroup>>
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    scf.for %i = %c0 to %c8 step %c1 {
      %row = memref.subview %a[%i, 0] [1, 256] [1, 1] : memref<8x256xf32> to memref<256xf32, strided<[1], offset: ?>>
      "tile.copy"(%s, %row) {scope = "cta"} : (memref<256xf32, #gpu.address_space<workgroup>>, memref<256xf32, strided<[1], offset: ?>>) -> ()
      "tile.elementwise"(%b, %s, %b) {op = "add", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<256xf32>, memref<256xf32, #gpu.address_space<workgroup>>, memref<256xf32>) -> ()
    }
    gpu.return
  }
}
