// tile-dispatch records the chosen variant on each op; --tile-explain reports why.
// RUN: not tile-opt %s --split-input-file --tile-dispatch 2>/dev/null | FileCheck %s
// RUN: tile-opt %s --split-input-file --tile-dispatch --tile-explain --verify-diagnostics

// CHECK-LABEL: gpu.func @chosen
// CHECK: "tile.elementwise"{{.*}}variant = "gmem"
gpu.module @m {
  gpu.func @chosen(%a: memref<64xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    // expected-remark@+1 {{tile.elementwise exp at scope cta: variant gmem}}
    "tile.elementwise"(%a, %a) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    gpu.return
  }
}

// -----

// Shared and register integer operands mixed: every variant says why not.
gpu.module @m {
  gpu.func @none() kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %s = "tile.alloc"() {layout = #tile.layout<"S[(32, 2)]">} : () -> memref<32x2xi32, #gpu.address_space<workgroup>>
    %r = "tile.alloc"() {layout = #tile.layout<"S[(32, 2):(1@laneid, 1)]">} : () -> memref<32x2xi32, #gpu.address_space<private>>
    // expected-remark@+2 {{variant none}}
    // expected-error@+1 {{has no lowering variant that applies}}
    "tile.elementwise"(%s, %r) {op = "neg", scope = "warp", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<32x2xi32, #gpu.address_space<workgroup>>, memref<32x2xi32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}
