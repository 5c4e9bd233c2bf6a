// tile.elementwise written without operandSegmentSizes: the attribute is filled in
// from the operand count before parsing (1 dst + n inputs -> 1, min(n,1),
// min(max(n-1,0),1), max(n-2,0)), printed, and read back by upstream mlir-opt.
// RUN: tile-opt %s | FileCheck %s
// RUN: tile-opt %s -p tile-to-ptx --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: tile-opt %s | tile-opt | FileCheck %s
// RUN: %if mlir-opt %{ tile-opt %s | mlir-opt --irdl-file=%dialect | FileCheck %s %}

// CHECK-LABEL: gpu.func @k
// CHECK: "tile.elementwise"(%{{.*}}, %{{.*}}) {op = "sqrt", operandSegmentSizes = array<i32: 1, 1, 0, 0>, scope = "cta"}
// CHECK: "tile.elementwise"(%{{.*}}, %{{.*}}, %{{.*}}) {op = "add", operandSegmentSizes = array<i32: 1, 1, 1, 0>, scope = "cta"}
// CHECK: "tile.elementwise"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {op = "clamp", operandSegmentSizes = array<i32: 1, 1, 1, 1>, scope = "cta"}
// CHECK: "tile.elementwise"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {op = "nan_to_num", operandSegmentSizes = array<i32: 1, 1, 1, 2>, scope = "cta"}
// Written by hand, the attribute is kept as it is.
// CHECK: "tile.elementwise"(%{{.*}}, %{{.*}}) {op = "exp", operandSegmentSizes = array<i32: 1, 1, 0, 0>, scope = "cta"}
// PTX: .visible .entry k(
// PTX: sqrt.rn.f32
// PTX: ex2.approx
gpu.module @m {
  gpu.func @k(%a: memref<64xf32>, %b: memref<64xf32>, %s: f32) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    "tile.elementwise"(%a, %b) {op = "sqrt", scope = "cta"} : (memref<64xf32>, memref<64xf32>) -> ()
    "tile.elementwise"(%a, %a, %b) {op = "add", scope = "cta"} : (memref<64xf32>, memref<64xf32>, memref<64xf32>) -> ()
    // Over several lines, with a comment inside: no line moves.
    "tile.elementwise"(%a, %a, // the destination is also an input
                       %s, %s) {op = "clamp",
                                scope = "cta"}
        : (memref<64xf32>, memref<64xf32>, f32, f32) -> ()
    "tile.elementwise"(%a, %a, %s, %s, %s) {op = "nan_to_num", scope = "cta"} : (memref<64xf32>, memref<64xf32>, f32, f32, f32) -> ()
    "tile.elementwise"(%b, %a) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    gpu.return
  }
}
