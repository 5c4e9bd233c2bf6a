// elementwise/reg (seed 003): register operands; the register layout induces the partition.
// RUN: tile-opt %s --split-input-file --verify-diagnostics --tile-lower --canonicalize --cse | FileCheck %s
// RUN: not tile-opt %s --split-input-file -p tile-to-ptx --emit=ptx 2>/dev/null | FileCheck %s --check-prefix=PACKED
// RUN: tile-opt %examples/seed_003_reg_sqrt.mlir --tile-lower --canonicalize --cse | FileCheck %s --check-prefix=SEED
// RUN: tile-opt %examples/seed_003_reg_sqrt.mlir -p tile-to-ptx --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: tile-opt %examples/seed_003_reg_sqrt.mlir -p tile-to-ptx --emit=ptx | grep -c "sqrt.rn.f32" | FileCheck %s --check-prefix=SQRTS
// RUN: tile-opt %examples/seed_003_reg_sqrt.mlir -p tile-to-ptx --emit=ptx | grep -c "ld.shared.v4" | FileCheck %s --check-prefix=LOADS

// Seed 003: lane i holds row i in 8 registers; sqrt is an 8-register loop per lane.
// SEED-LABEL: gpu.func @reg_sqrt
// SEED: %[[R:.*]] = memref.alloca() {alignment = 32 : i64} : memref<8xf32, #gpu.address_space<private>>
// SEED: scf.for %[[F:.*]] = %c0 to %c8 step %c1 {
// SEED-NEXT:   %[[X:.*]] = memref.load %[[R]][%[[F]]] : memref<8xf32, #gpu.address_space<private>>
// SEED-NEXT:   %[[Y:.*]] = llvm.call_intrinsic "llvm.sqrt.f32"(%[[X]]) : (f32) -> f32
// SEED-NEXT:   memref.store %[[Y]], %[[R]][%[[F]]] : memref<8xf32, #gpu.address_space<private>>
// SEED-NEXT: }

// The registers stay registers (no local memory); each lane reads its row as two
// 16-byte shared loads (and two more for the final copy out), 8 correctly rounded sqrts.
// PTX-NOT: .local
// PTX: ld.shared.v4.{{[bf]}}32
// PTX: sqrt.rn.f32
// PTX: st.shared.v4.{{[bf]}}32
// PTX-NOT: .local
// SQRTS: 8
// LOADS: 4

// f16 registers go two at a time, so the arithmetic is packed (add.rn.f16x2).
// PACKED-LABEL: .entry packed(
// PACKED: add.rn.f16x2
// PACKED-LABEL: .entry packed_bf16(
// PACKED: mul.rn.bf16x2
// PACKED: add.rn.bf16x2
// CHECK-LABEL: gpu.func @packed
// CHECK: scf.for %{{.*}} = %c0 to %c8 step %c2
// CHECK:   %[[A:.*]] = vector.load {{.*}} : memref<8xf16, #gpu.address_space<private>>, vector<2xf16>
// CHECK:   arith.addf %[[A]], %[[A]] : vector<2xf16>
gpu.module @m {
  gpu.func @packed(%g: memref<32x8xf16>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %r = "tile.alloc"() {layout = #tile.layout<"S[(32, 8):(1@laneid, 1)]">} : () -> memref<32x8xf16, #gpu.address_space<private>>
    "tile.copy"(%r, %g) {scope = "warp"} : (memref<32x8xf16, #gpu.address_space<private>>, memref<32x8xf16>) -> ()
    "tile.elementwise"(%r, %r, %r) {op = "add", scope = "warp", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<32x8xf16, #gpu.address_space<private>>, memref<32x8xf16, #gpu.address_space<private>>, memref<32x8xf16, #gpu.address_space<private>>) -> ()
    "tile.copy"(%g, %r) {scope = "warp"} : (memref<32x8xf16>, memref<32x8xf16, #gpu.address_space<private>>) -> ()
    gpu.return
  }
  gpu.func @packed_bf16(%g: memref<32x8xbf16>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %r = "tile.alloc"() {layout = #tile.layout<"S[(32, 8):(1@laneid, 1)]">} : () -> memref<32x8xbf16, #gpu.address_space<private>>
    "tile.copy"(%r, %g) {scope = "warp"} : (memref<32x8xbf16, #gpu.address_space<private>>, memref<32x8xbf16>) -> ()
    "tile.elementwise"(%r, %r, %r) {op = "mul", scope = "warp", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<32x8xbf16, #gpu.address_space<private>>, memref<32x8xbf16, #gpu.address_space<private>>, memref<32x8xbf16, #gpu.address_space<private>>) -> ()
    "tile.elementwise"(%r, %r, %r) {op = "add", scope = "warp", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<32x8xbf16, #gpu.address_space<private>>, memref<32x8xbf16, #gpu.address_space<private>>, memref<32x8xbf16, #gpu.address_space<private>>) -> ()
    "tile.copy"(%g, %r) {scope = "warp"} : (memref<32x8xbf16>, memref<32x8xbf16, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

// A warpgroup's tile: warp w, lane l holds row 32w + l; the coordinates come from
// the thread index within the warpgroup.
// CHECK-LABEL: gpu.func @warpgroup
// CHECK: scf.for %{{.*}} = %c0 to %c4 step %c1
// CHECK: %[[T:.*]] = gpu.thread_id x
// CHECK: %[[WT:.*]] = arith.remui %[[T]], %c128 : index
// CHECK-DAG: %[[LANE:.*]] = arith.remui %[[WT]], %c32 : index
// CHECK-DAG: %[[WARP:.*]] = arith.divui %[[WT]], %c32 : index
// CHECK: vector.store {{.*}}[%[[WARP]], %[[LANE]], %c0] {alignment = 16 : i64} : memref<4x32x4xf32, strided<[128, 4, 1], offset: ?>>, vector<4xf32>
gpu.module @m {
  gpu.func @warpgroup(%out: memref<2x4x32x4xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %r = "tile.alloc"() {layout = #tile.layout<"S[(4, 32, 4):(1@warpid, 1@laneid, 1)]">} : () -> memref<4x32x4xf32, #gpu.address_space<private>>
    "tile.elementwise"(%r) {op = "zero", scope = "warpgroup", operandSegmentSizes = array<i32: 1, 0, 0, 0>} : (memref<4x32x4xf32, #gpu.address_space<private>>) -> ()
    %t = gpu.thread_id x
    %c128 = arith.constant 128 : index
    %wg = arith.divui %t, %c128 : index
    %o = memref.subview %out[%wg, 0, 0, 0] [1, 4, 32, 4] [1, 1, 1, 1] : memref<2x4x32x4xf32> to memref<4x32x4xf32, strided<[128, 4, 1], offset: ?>>
    "tile.copy"(%o, %r) {scope = "warpgroup"} : (memref<4x32x4xf32, strided<[128, 4, 1], offset: ?>>, memref<4x32x4xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @forced(%g: memref<32x32xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %s = "tile.alloc"() {layout = #tile.layout<"S[(32, 32)]">} : () -> memref<32x32xf32, #gpu.address_space<workgroup>>
    // expected-error@+1 {{cannot use the forced variant 'reg': operand 0 scope shared != local}}
    "tile.elementwise"(%s, %s) {op = "sqrt", scope = "cta", variant = "reg", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<32x32xf32, #gpu.address_space<workgroup>>, memref<32x32xf32, #gpu.address_space<workgroup>>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @unlike() kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %a = "tile.alloc"() {layout = #tile.layout<"S[(8, 4, 8):(4@laneid, 1@laneid, 1)]">} : () -> memref<8x4x8xf32, #gpu.address_space<private>>
    %b = "tile.alloc"() {layout = #tile.layout<"S[(8, 4, 8):(1@laneid, 8@laneid, 1)]">} : () -> memref<8x4x8xf32, #gpu.address_space<private>>
    // expected-error@+1 {{register operand 1 (S[(8, 4, 8):(1@laneid, 8@laneid, 1)]) is distributed unlike operand 0}}
    "tile.elementwise"(%a, %b) {op = "neg", scope = "warp", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<8x4x8xf32, #gpu.address_space<private>>, memref<8x4x8xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}
