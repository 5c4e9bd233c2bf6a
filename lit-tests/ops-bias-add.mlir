// The tile program the operator library generates for a bias add,
// tile_mlir.ops.add(x, bias) with x (16*4096, 4096) and bias (4096,) in bf16
// (tests/test_ops_compile.py checks that program.py still makes exactly this).
// Each CTA takes a whole piece of 2 rows (the blocks mode): the scf.if's first
// branch is the static tile op, staged 4 rounds deep; the bias has stride 0 along
// the rows, so its loads are shared by both rows of the piece.
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
  gpu.module @ops attributes {dlti.dl_spec = #dlti.dl_spec<#dlti.dl_entry<index, 32 : i32>>} {
    gpu.func @kernel(%d0: i32,
        %d1: i32,
        %a0: memref<1xbf16> {llvm.noalias},
        %s0_0: i32 {tile.divisibility = 32 : i64},
        %a1: memref<1xbf16> {llvm.noalias, llvm.readonly},
        %s1_0: i32 {tile.divisibility = 32 : i64},
        %a2: memref<1xbf16> {llvm.noalias, llvm.readonly}) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
      %v1 = arith.index_cast %d0 : i32 to index
      %v2 = arith.index_cast %d1 : i32 to index
      %v3 = arith.index_cast %s0_0 : i32 to index
      %v4 = memref.reinterpret_cast %a0 to offset: [0], sizes: [%v1, 4096], strides: [%v3, 1] : memref<1xbf16> to memref<?x4096xbf16, strided<[?, 1], offset: 0>>
      %v5 = arith.index_cast %s1_0 : i32 to index
      %v6 = memref.reinterpret_cast %a1 to offset: [0], sizes: [%v1, 4096], strides: [%v5, 1] : memref<1xbf16> to memref<?x4096xbf16, strided<[?, 1], offset: 0>>
      %v7 = memref.reinterpret_cast %a2 to offset: [0], sizes: [%v1, 4096], strides: [0, 1] : memref<1xbf16> to memref<?x4096xbf16, strided<[0, 1], offset: 0>>
      %v8 = gpu.block_id x
      %v9 = arith.constant 2 : index
      %v10 = arith.ceildivui %v1, %v9 : index
      %v11 = arith.divui %v8, %v10 : index
      %v12 = arith.remui %v8, %v10 : index
      %v13 = arith.muli %v12, %v9 : index
      %v14 = arith.constant 2 : index
      %v15 = arith.addi %v13, %v14 : index
      %v16 = arith.cmpi ule, %v15, %v1 : index
      scf.if %v16 {
      %v17 = memref.subview %v4[%v13, 0] [2, 4096] [1, 1] : memref<?x4096xbf16, strided<[?, 1], offset: 0>> to memref<2x4096xbf16, strided<[?, 1], offset: ?>>
      %v18 = memref.subview %v6[%v13, 0] [2, 4096] [1, 1] : memref<?x4096xbf16, strided<[?, 1], offset: 0>> to memref<2x4096xbf16, strided<[?, 1], offset: ?>>
      %v19 = memref.subview %v7[%v13, 0] [2, 4096] [1, 1] : memref<?x4096xbf16, strided<[0, 1], offset: 0>> to memref<2x4096xbf16, strided<[0, 1], offset: 0>>
        "tile.elementwise"(%v17, %v18, %v19) {op = "add", scope = "cta", vector_bytes = 16 : i64, stage = 4 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<2x4096xbf16, strided<[?, 1], offset: ?>>, memref<2x4096xbf16, strided<[?, 1], offset: ?>>, memref<2x4096xbf16, strided<[0, 1], offset: 0>>) -> ()
      } else {
      %v20 = arith.subi %v1, %v13 : index
      %v21 = memref.subview %v4[%v13, 0] [%v20, 4096] [1, 1] : memref<?x4096xbf16, strided<[?, 1], offset: 0>> to memref<?x4096xbf16, strided<[?, 1], offset: ?>>
      %v22 = memref.subview %v6[%v13, 0] [%v20, 4096] [1, 1] : memref<?x4096xbf16, strided<[?, 1], offset: 0>> to memref<?x4096xbf16, strided<[?, 1], offset: ?>>
      %v23 = memref.subview %v7[%v13, 0] [%v20, 4096] [1, 1] : memref<?x4096xbf16, strided<[0, 1], offset: 0>> to memref<?x4096xbf16, strided<[0, 1], offset: 0>>
        "tile.elementwise"(%v21, %v22, %v23) {op = "add", scope = "cta", vector_bytes = 16 : i64, stage = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<?x4096xbf16, strided<[?, 1], offset: ?>>, memref<?x4096xbf16, strided<[?, 1], offset: ?>>, memref<?x4096xbf16, strided<[0, 1], offset: 0>>) -> ()
      }
      gpu.return
    }
  }
}
