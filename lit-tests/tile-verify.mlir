// Valid tile IR passes tile-verify unchanged (invalid.mlir has the errors).
// RUN: tile-opt %s --tile-verify | FileCheck %s

// CHECK-LABEL: gpu.func @valid
// CHECK-COUNT-3: "tile.elementwise"
gpu.module @m {
  gpu.func @valid(%a: memref<37x129xf32>, %x: f32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    "tile.elementwise"(%a, %a, %x) {op = "mul", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<37x129xf32>, memref<37x129xf32>, f32) -> ()
    "tile.elementwise"(%a, %a) {op = "neg", scope = "warpgroup", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<37x129xf32>, memref<37x129xf32>) -> ()
    "tile.elementwise"(%a) {op = "zero", scope = "warp", operandSegmentSizes = array<i32: 1, 0, 0, 0>} : (memref<37x129xf32>) -> ()
    gpu.return
  }
}
