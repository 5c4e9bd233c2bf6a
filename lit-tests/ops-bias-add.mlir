// The tile program the operator library generates for a bias add,
// tile_mlir.ops.add(x, bias) with x (4097, 4096) and bias (4096,) in bf16
// (tests/null/test_ops_compile.py checks that ops/programs/elementwise.py, a
// tile_mlir.lang program, still makes exactly this).
// Each CTA takes a piece of 2 rows (the blocks mode), the last one a partial
// piece of 1: the scf.if's first branch is the static tile op, staged 4 rounds
// deep, the second the dynamic one; the bias has stride 0 along the rows, so its
// loads are shared by both rows of the piece. (With an even number of rows the
// kernel is specialized on whole pieces: the first branch alone.)
// RUN: tile-opt %s -p tile-to-ptx --emit=ptx | FileCheck %s
// CHECK: .visible .entry kernel(
// CHECK: .maxntid 256, 1, 1
// The whole piece: 4 loads of x and 2 of the bias (4 rounds of 2048 bf16 over 2 rows),
// all before the first store.
// CHECK: $L__BB0_1:
// CHECK-COUNT-6: ld.global.nc.v4.b32
// CHECK-NOT: ld.global
// CHECK: add.rn.bf16x2
// CHECK-COUNT-4: st.global.v4.b32
// CHECK-NOT: ld.global
// CHECK: ret;
module attributes {gpu.container_module} {
  gpu.module @kernels attributes {dlti.dl_spec = #dlti.dl_spec<index = 32 : i32>} {
    gpu.func @kernel(%d0: i32, %d1: i32, %out: memref<1xbf16> {llvm.noalias}, %out_s0: i32 {tile.divisibility = 32 : i64}, %x1: memref<1xbf16> {llvm.noalias, llvm.readonly}, %x1_s0: i32 {tile.divisibility = 32 : i64}, %x2: memref<1xbf16> {llvm.noalias, llvm.readonly}) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
      %0 = arith.index_cast %d0 : i32 to index
      %1 = arith.index_cast %out_s0 : i32 to index
      %2 = arith.index_cast %x1_s0 : i32 to index
      %reinterpret_cast = memref.reinterpret_cast %out to offset: [0], sizes: [%0, 4096], strides: [%1, 1] : memref<1xbf16> to memref<?x4096xbf16, strided<[?, 1]>>
      %reinterpret_cast_0 = memref.reinterpret_cast %x1 to offset: [0], sizes: [%0, 4096], strides: [%2, 1] : memref<1xbf16> to memref<?x4096xbf16, strided<[?, 1]>>
      %reinterpret_cast_1 = memref.reinterpret_cast %x2 to offset: [0], sizes: [%0, 4096], strides: [0, 1] : memref<1xbf16> to memref<?x4096xbf16, strided<[0, 1]>>
      %block_id_x = gpu.block_id  x
      %c2 = arith.constant 2 : index
      %3 = arith.ceildivui %0, %c2 : index
      %4 = arith.divui %block_id_x, %3 : index
      %5 = arith.remui %block_id_x, %3 : index
      %c2_2 = arith.constant 2 : index
      %6 = arith.muli %5, %c2_2 : index
      %c2_3 = arith.constant 2 : index
      %7 = arith.addi %6, %c2_3 : index
      %8 = arith.cmpi ule, %7, %0 : index
      scf.if %8 {
        %subview = memref.subview %reinterpret_cast[%6, 0] [2, 4096] [1, 1] : memref<?x4096xbf16, strided<[?, 1]>> to memref<2x4096xbf16, strided<[?, 1], offset: ?>>
        %subview_4 = memref.subview %reinterpret_cast_0[%6, 0] [2, 4096] [1, 1] : memref<?x4096xbf16, strided<[?, 1]>> to memref<2x4096xbf16, strided<[?, 1], offset: ?>>
        %subview_5 = memref.subview %reinterpret_cast_1[%6, 0] [2, 4096] [1, 1] : memref<?x4096xbf16, strided<[0, 1]>> to memref<2x4096xbf16, strided<[0, 1]>>
        "tile.elementwise"(%subview, %subview_4, %subview_5) {op = "add", operandSegmentSizes = array<i32: 1, 1, 1, 0>, scope = "cta", stage = 4 : i64, vector_bytes = 16 : i64} : (memref<2x4096xbf16, strided<[?, 1], offset: ?>>, memref<2x4096xbf16, strided<[?, 1], offset: ?>>, memref<2x4096xbf16, strided<[0, 1]>>) -> ()
      } else {
        %9 = arith.subi %0, %6 : index
        %subview = memref.subview %reinterpret_cast[%6, 0] [%9, 4096] [1, 1] : memref<?x4096xbf16, strided<[?, 1]>> to memref<?x4096xbf16, strided<[?, 1], offset: ?>>
        %subview_4 = memref.subview %reinterpret_cast_0[%6, 0] [%9, 4096] [1, 1] : memref<?x4096xbf16, strided<[?, 1]>> to memref<?x4096xbf16, strided<[?, 1], offset: ?>>
        %subview_5 = memref.subview %reinterpret_cast_1[%6, 0] [%9, 4096] [1, 1] : memref<?x4096xbf16, strided<[0, 1]>> to memref<?x4096xbf16, strided<[0, 1]>>
        "tile.elementwise"(%subview, %subview_4, %subview_5) {op = "add", operandSegmentSizes = array<i32: 1, 1, 1, 0>, scope = "cta", stage = 1 : i64, vector_bytes = 16 : i64} : (memref<?x4096xbf16, strided<[?, 1], offset: ?>>, memref<?x4096xbf16, strided<[?, 1], offset: ?>>, memref<?x4096xbf16, strided<[0, 1]>>) -> ()
      }
      gpu.return
    }
  }
}
