// tile-lower rewrites every tile op with its recorded (or forced) variant;
// none is left. --tile-lower alone runs the passes it requires first (tile-verify,
// tile-dispatch, tile-barriers, tile-buffers).
// RUN: tile-opt %s --split-input-file --tile-lower --verify-diagnostics | FileCheck %s

// CHECK-LABEL: gpu.func @lowered
// CHECK-NOT: tile.
// CHECK: vector.load
// CHECK-NOT: tile.
// CHECK: gpu.return
gpu.module @m {
  gpu.func @lowered(%a: memref<64xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    "tile.elementwise"(%a, %a) {op = "exp", scope = "cta", variant = "gmem", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    "tile.elementwise"(%a, %a, %a) {op = "mul", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<64xf32>, memref<64xf32>, memref<64xf32>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @forced() kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %s = "tile.alloc"() {layout = #tile.layout<"S[64]">} : () -> memref<64xf32, #gpu.address_space<workgroup>>
    // expected-error@+1 {{cannot use the forced variant 'gmem': operand 0 scope shared != global}}
    "tile.elementwise"(%s, %s) {op = "exp", scope = "cta", variant = "gmem", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32, #gpu.address_space<workgroup>>, memref<64xf32, #gpu.address_space<workgroup>>) -> ()
    gpu.return
  }
}
