// elementwise/reg_mem: a register tile with memory operands beside it. The register
// layout induces the partition; memory operands are read and written at each element's
// coordinates, in 16-byte vectors where the register run and the memory side allow.
// RUN: tile-opt %s --split-input-file --verify-diagnostics --tile-lower --canonicalize --cse | FileCheck %s
// RUN: not tile-opt %s --split-input-file -p tile-to-ptx --emit=ptx 2>/dev/null | FileCheck %s --check-prefix=PTX
// RUN: not tile-opt %s --split-input-file --tile-dispatch --tile-explain 2>&1 >/dev/null | FileCheck %s --check-prefix=EXPLAIN

// y_global = x_reg * w_global (an RMSNorm's last step) on a row of 1000 floats in a
// [256, 4] tile: the row's view ends at 250, so threads past it neither read nor write.
// EXPLAIN: tile.elementwise mul at scope cta: variant reg_mem
// EXPLAIN: reg (priority 10): rejected: operand 0 scope global != local
// EXPLAIN: reg_mem (priority 8): chosen
// CHECK-LABEL: gpu.func @rmsnorm_tail
// CHECK: %[[T:.*]] = gpu.thread_id x
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[T]], %c250 : index
// CHECK: scf.if %[[IN]] {
// CHECK:   %[[X:.*]] = vector.load %{{.*}}[%c0] {alignment = 16 : i64} : memref<4xf32, #gpu.address_space<private>>, vector<4xf32>
// CHECK:   %[[W:.*]] = vector.load %{{.*}}[%[[T]], %c0] {alignment = 16 : i64} : memref<250x4xf32>, vector<4xf32>
// CHECK:   %[[Y:.*]] = arith.mulf %[[X]], %[[W]] : vector<4xf32>
// CHECK:   vector.store %[[Y]], %{{.*}}[%[[T]], %c0] {alignment = 16 : i64} : memref<250x4xf32>, vector<4xf32>
// PTX-LABEL: .entry rmsnorm_tail(
// PTX-NOT: .local
// PTX-COUNT-2: ld.global.nc.v4.b32
// PTX: st.global.v4.b32
gpu.module @m {
  gpu.func @rmsnorm_tail(%x: memref<250x4xf32> {llvm.noalias, llvm.readonly}, %w: memref<250x4xf32> {llvm.noalias, llvm.readonly}, %y: memref<250x4xf32> {llvm.noalias}) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %r = "tile.alloc"() {layout = #tile.layout<"S[(256, 4):(1@tid, 1)]">} : () -> memref<256x4xf32, #gpu.address_space<private>>
    "tile.copy"(%r, %x) {scope = "cta", padding = 0.0 : f32} : (memref<256x4xf32, #gpu.address_space<private>>, memref<250x4xf32>) -> ()
    "tile.elementwise"(%y, %r, %w) {op = "mul", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<250x4xf32>, memref<256x4xf32, #gpu.address_space<private>>, memref<250x4xf32>) -> ()
    gpu.return
  }
}

// -----

// f32 registers cast into a bf16 row: 8 registers (one 32-byte register vector, which
// claims no more alignment than a 16-byte access needs) per 16-byte store.
// CHECK-LABEL: gpu.func @cast_bf16
// CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<8xf32, #gpu.address_space<private>>, vector<8xf32>
// CHECK: arith.truncf %{{.*}} : vector<8xf32> to vector<8xbf16>
// CHECK: vector.store %{{.*}} {alignment = 16 : i64} : memref<128x8xbf16>, vector<8xbf16>
// PTX-LABEL: .entry cast_bf16(
// PTX: st.global.v4.b32
gpu.module @m {
  gpu.func @cast_bf16(%y: memref<128x8xbf16>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %r = "tile.alloc"() {layout = #tile.layout<"S[(128, 8):(1@tid, 1)]">} : () -> memref<128x8xf32, #gpu.address_space<private>>
    "tile.elementwise"(%r) {op = "zero", scope = "cta", operandSegmentSizes = array<i32: 1, 0, 0, 0>} : (memref<128x8xf32, #gpu.address_space<private>>) -> ()
    "tile.elementwise"(%y, %r) {op = "cast", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<128x8xbf16>, memref<128x8xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

// A register tile replicated over 4 warps, a shared operand beside it, a global dst:
// every warp holds the tile, warp 0 alone writes.
// CHECK-LABEL: gpu.func @replicated
// CHECK: %[[W:.*]] = arith.divui %{{.*}}, %c32 : index
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[W]], %c0 : index
// CHECK: scf.if %[[FIRST]] {
// CHECK:   vector.load %{{.*}} : memref<32x4xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK:   vector.store %{{.*}} : memref<32x4xf32>, vector<4xf32>
gpu.module @m {
  gpu.func @replicated(%g: memref<32x4xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %s = "tile.alloc"() {layout = #tile.layout<"S[(32, 4)]">} : () -> memref<32x4xf32, #gpu.address_space<workgroup>>
    %r = "tile.alloc"() {layout = #tile.layout<"S[(32, 4):(1@laneid, 1)], R[4:1@warpid]">} : () -> memref<32x4xf32, #gpu.address_space<private>>
    "tile.copy"(%s, %g) {scope = "cta"} : (memref<32x4xf32, #gpu.address_space<workgroup>>, memref<32x4xf32>) -> ()
    "tile.copy"(%r, %s) {scope = "cta"} : (memref<32x4xf32, #gpu.address_space<private>>, memref<32x4xf32, #gpu.address_space<workgroup>>) -> ()
    "tile.elementwise"(%g, %r, %s) {op = "add", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<32x4xf32>, memref<32x4xf32, #gpu.address_space<private>>, memref<32x4xf32, #gpu.address_space<workgroup>>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @too_big(%big: memref<300x4xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %r = "tile.alloc"() {layout = #tile.layout<"S[(256, 4):(1@tid, 1)]">} : () -> memref<256x4xf32, #gpu.address_space<private>>
    // expected-error@+1 {{input 1 has shape 300x4, but the register tile has shape 256x4 (each extent must be equal, 1 for an input (a broadcast) or, for a memory operand, dynamic or smaller (the overlap))}}
    "tile.elementwise"(%r, %r, %big) {op = "add", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<256x4xf32, #gpu.address_space<private>>, memref<256x4xf32, #gpu.address_space<private>>, memref<300x4xf32>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @no_anchor(%y: memref<256x4xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %m = "tile.alloc"() {layout = #tile.layout<"S[(1, 4)], R[256:1@tid]">} : () -> memref<1x4xf32, #gpu.address_space<private>>
    %c = "tile.alloc"() {layout = #tile.layout<"S[(256, 1):(1@tid, 1)]">} : () -> memref<256x1xf32, #gpu.address_space<private>>
    // expected-error@+1 {{no register operand has the tile's shape 256x4 (each broadcasts): make dst or an input a whole register tile}}
    "tile.elementwise"(%y, %m, %c) {op = "add", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<256x4xf32>, memref<1x4xf32, #gpu.address_space<private>>, memref<256x1xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}
