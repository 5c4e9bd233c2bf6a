// elementwise/lut: an op on one fp8 tile (and scalars) reads a shared table of its 256 results.
// RUN: tile-opt %s --split-input-file --tile-dispatch --tile-explain 2>&1 >/dev/null | FileCheck %s --check-prefix=EXPLAIN
// RUN: tile-opt %s --split-input-file --tile-lower --canonicalize --cse | FileCheck %s
// RUN: tile-opt %s --split-input-file -p tile-to-ptx --emit=ptx | FileCheck %s --check-prefix=PTX

// sqrt on f8e4m3: the CTA's 256 threads fill the table, one barrier, then each element
// is its byte's entry (16 bytes an access).
// EXPLAIN: tile.elementwise sqrt at scope cta: variant lut
// EXPLAIN: lut (priority 12): chosen
// CHECK: memref.global "private" @__tile_lut_0 : memref<256xf8E4M3FN, #gpu.address_space<workgroup>>
// CHECK-LABEL: gpu.func @sqrt
// CHECK: %[[TABLE:.*]] = memref.get_global @__tile_lut_0
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: llvm.call_intrinsic "llvm.sqrt.f32"
// CHECK: memref.store %{{.*}}, %[[TABLE]][%[[TID]]]
// CHECK-NEXT: gpu.barrier
// CHECK: vector.load %{{.*}} : memref<4096xf8E4M3FN>, vector<16xf8E4M3FN>
// CHECK-COUNT-16: memref.load %[[TABLE]]
// CHECK: vector.store
// PTX: .shared .align 16 .b8 __tile_lut_0[256];
// PTX: bar.sync 0;
// PTX: ld.global.nc.v4.b32
// PTX-COUNT-16: ld.shared.b8
gpu.module @m {
  gpu.func @sqrt(%x: memref<4096xf8E4M3FN> {llvm.noalias, llvm.readonly}, %y: memref<4096xf8E4M3FN> {llvm.noalias}) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    "tile.elementwise"(%y, %x) {op = "sqrt", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<4096xf8E4M3FN>, memref<4096xf8E4M3FN>) -> ()
    gpu.return
  }
}

// -----

// A scalar beside the tile: the table is of x * s for the run's s. In a loop the op runs
// again: a barrier before the table is written too. 64 threads fill 4 entries each.
// EXPLAIN: tile.elementwise mul at scope cta: variant lut
// CHECK-LABEL: gpu.func @scaled
// CHECK: scf.for
// CHECK: gpu.barrier
// CHECK-COUNT-4: memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<256xf8E5M2, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
gpu.module @m {
  gpu.func @scaled(%x: memref<4x1024xf8E5M2> {llvm.noalias, llvm.readonly}, %s: f32, %y: memref<4x1024xf8E5M2> {llvm.noalias}) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    scf.for %i = %c0 to %c4 step %c1 {
      %xi = memref.subview %x[%i, 0] [1, 1024] [1, 1] : memref<4x1024xf8E5M2> to memref<1x1024xf8E5M2, strided<[1024, 1], offset: ?>>
      %yi = memref.subview %y[%i, 0] [1, 1024] [1, 1] : memref<4x1024xf8E5M2> to memref<1x1024xf8E5M2, strided<[1024, 1], offset: ?>>
      "tile.elementwise"(%yi, %xi, %s) {op = "mul", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<1x1024xf8E5M2, strided<[1024, 1], offset: ?>>, memref<1x1024xf8E5M2, strided<[1024, 1], offset: ?>>, f32) -> ()
    }
    gpu.return
  }
}

// -----

// Not a table: two fp8 tiles, a warp's op, an identity cast.
// EXPLAIN: tile.elementwise add at scope cta: variant gmem
// EXPLAIN: lut (priority 12): rejected: the table takes one fp8 tile input (and scalars)
// EXPLAIN: tile.elementwise sqrt at scope warp: variant gmem
// EXPLAIN: lut (priority 12): rejected: scope warp: the table is a CTA's
// EXPLAIN: tile.elementwise cast at scope cta: variant gmem
// EXPLAIN: lut (priority 12): rejected: a copy: nothing to compute
// CHECK-LABEL: gpu.func @others
// CHECK-NOT: __tile_lut
// CHECK: gpu.return
gpu.module @m {
  gpu.func @others(%a: memref<256xf8E4M3FN>, %b: memref<256xf8E4M3FN>, %c: memref<256xf8E4M3FN>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    "tile.elementwise"(%c, %a, %b) {op = "add", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<256xf8E4M3FN>, memref<256xf8E4M3FN>, memref<256xf8E4M3FN>) -> ()
    "tile.elementwise"(%c, %a) {op = "sqrt", scope = "warp", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf8E4M3FN>, memref<256xf8E4M3FN>) -> ()
    "tile.elementwise"(%c, %a) {op = "cast", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf8E4M3FN>, memref<256xf8E4M3FN>) -> ()
    gpu.return
  }
}
