// The printed tile IR parses again and prints the same.
// RUN: tile-opt %s | tile-opt | FileCheck %s
// RUN: tile-opt %s > %t.1.mlir && tile-opt %t.1.mlir > %t.2.mlir && diff %t.1.mlir %t.2.mlir

// CHECK-LABEL: gpu.func @all_ops
// CHECK: "tile.alloc"() {layout = #tile.layout<"S[(32, 8):(1@laneid, 1)]">} : () -> memref<32x8xf32, #gpu.address_space<private>>
// CHECK: "tile.copy"(%{{.*}}, %{{.*}}) {scope = "warp"}
// CHECK: "tile.elementwise"(%{{.*}}, %{{.*}}, %{{.*}}) {op = "add", operandSegmentSizes = array<i32: 1, 1, 1, 0>, scope = "cta"}
// CHECK: "tile.reduce"(%{{.*}}, %{{.*}}) {accum = true, axes = array<i64: -1>, kind = "max", scope = "cta", variant = "shared"}
gpu.module @m {
  gpu.func @all_ops(%a: memref<32x8xf32>, %b: memref<32xf32>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %r = "tile.alloc"() {layout = #tile.layout<"S[(32, 8):(1@laneid, 1)]">} : () -> memref<32x8xf32, #gpu.address_space<private>>
    "tile.copy"(%r, %a) {scope = "warp"} : (memref<32x8xf32, #gpu.address_space<private>>, memref<32x8xf32>) -> ()
    "tile.elementwise"(%a, %a, %a) {op = "add", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<32x8xf32>, memref<32x8xf32>, memref<32x8xf32>) -> ()
    "tile.reduce"(%b, %a) {kind = "max", axes = array<i64: -1>, accum = true, scope = "cta", variant = "shared"} : (memref<32xf32>, memref<32x8xf32>) -> ()
    gpu.return
  }
}
