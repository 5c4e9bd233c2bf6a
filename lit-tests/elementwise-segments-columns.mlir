// An error after a filled-in operandSegmentSizes, on the same line, is reported at
// its column in this file, not in the rewritten text.
// RUN: not tile-opt %s 2>&1 | FileCheck %s

// CHECK: elementwise-segments-columns.mlir:[[@LINE+5]]:102: error: {{.*}}'bogus'
// CHECK-NEXT: {{^}}    "tile.elementwise"(%a, %a) {op = "sqrt", scope = "cta"} : (memref<64xf32>, memref<64xf32>) -> () bogus
// CHECK-NEXT: {{^}}                                                                                                     ^
gpu.module @m {
  gpu.func @k(%a: memref<64xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    "tile.elementwise"(%a, %a) {op = "sqrt", scope = "cta"} : (memref<64xf32>, memref<64xf32>) -> () bogus
    gpu.return
  }
}
