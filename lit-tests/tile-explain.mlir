// --tile-explain with neither tile-dispatch nor tile-fuse in the pipeline (nothing
// that explains) runs tile-dispatch itself, at the end: alone (the IR printed with
// each op's variant) or after the other passes; a pass that needs tile-dispatch
// (tile-lower) gets an explaining one before it.
// RUN: tile-opt %s --tile-explain 2>&1 | FileCheck %s
// RUN: tile-opt %s --tile-lower --tile-explain 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK
// RUN: tile-opt %s -p tile-verify,canonicalize --tile-explain 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK
// RUN: tile-opt %s --tile-verify --tile-explain --verify-diagnostics
// An explicit tile-dispatch explains once, not twice.
// RUN: tile-opt %s --tile-dispatch --tile-explain 2>&1 >/dev/null | FileCheck %s --check-prefix=ONCE

// CHECK: tile-explain.mlir:[[@LINE+10]]:5: remark: tile.elementwise sqrt at scope cta: variant gmem
// CHECK-NEXT: lut (priority 12): rejected: the table takes one fp8 tile input (and scalars)
// CHECK-NEXT: gmem (priority 10): chosen
// CHECK: "tile.elementwise"{{.*}}variant = "gmem"
// REMARK: remark: tile.elementwise sqrt at scope cta: variant gmem
// ONCE-COUNT-1: remark: tile.elementwise
// ONCE-NOT: remark:
gpu.module @m {
  gpu.func @k(%a: memref<64xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    // expected-remark@+1 {{tile.elementwise sqrt at scope cta: variant gmem}}
    "tile.elementwise"(%a, %a) {op = "sqrt", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    gpu.return
  }
}
