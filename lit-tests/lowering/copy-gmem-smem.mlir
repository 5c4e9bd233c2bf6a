// copy/gmem_smem: copies between global and shared tiles; partition synthesized from the scope.
// RUN: tile-opt %s --split-input-file --tile-lower --canonicalize --cse | FileCheck %s
// RUN: tile-opt %s --split-input-file -p tile-to-ptx --emit=ptx | FileCheck %s --check-prefix=PTX

// 32x33 f32, contiguous on both sides: coalesced into one run of 1056, float4s then a tail.
// CHECK-LABEL: gpu.func @in
// CHECK: memref.get_global @__tile_shared_0 : memref<1056xf32, #gpu.address_space<workgroup>>
// CHECK: %[[S:.*]] = memref.collapse_shape %{{.*}} {{\[\[}}0, 1]] : memref<32x33xf32, #gpu.address_space<workgroup>> into memref<1056xf32, #gpu.address_space<workgroup>>
// CHECK: memref.collapse_shape %{{.*}} {{\[\[}}0, 1]] : memref<32x33xf32> into memref<1056xf32>
// CHECK: scf.for
// CHECK:   %[[V:.*]] = vector.load %{{.*}} {alignment = 16 : i64} : memref<1056xf32>, vector<4xf32>
// CHECK:   vector.store %[[V]], %[[S]]
// CHECK: gpu.barrier
// PTX-LABEL: .entry in(
// PTX: ld.global.v4.{{[bf]}}32
// PTX: st.shared.v4.{{[bf]}}32
gpu.module @m {
  gpu.func @in(%g: memref<32x33xf32>, %out: memref<32x33xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %s = "tile.alloc"() {layout = #tile.layout<"S[(32, 33)]">} : () -> memref<32x33xf32, #gpu.address_space<workgroup>>
    "tile.copy"(%s, %g) {scope = "cta"} : (memref<32x33xf32, #gpu.address_space<workgroup>>, memref<32x33xf32>) -> ()
    "tile.copy"(%out, %s) {scope = "cta"} : (memref<32x33xf32>, memref<32x33xf32, #gpu.address_space<workgroup>>) -> ()
    gpu.return
  }
}

// -----

// Shared rows padded to 40 halves: rows stay apart, 8 halves (16 bytes) a vector.
// CHECK-LABEL: gpu.func @padded
// CHECK: memref<1272xbf16, #gpu.address_space<workgroup>>
// CHECK: vector.load {{.*}} vector<8xbf16>
// CHECK: vector.store {{.*}} vector<8xbf16>
// PTX-LABEL: .entry padded(
// PTX: st.shared.v4.b32
gpu.module @m {
  gpu.func @padded(%g: memref<32x32xbf16>) kernel attributes {known_block_size = array<i32: 512, 1, 1>} {
    %s = "tile.alloc"() {layout = #tile.layout<"S[(32, 32):(40, 1)]">} : () -> memref<32x32xbf16, #gpu.address_space<workgroup>>
    "tile.copy"(%s, %g) {scope = "cta"} : (memref<32x32xbf16, #gpu.address_space<workgroup>>, memref<32x32xbf16>) -> ()
    "tile.elementwise"(%s, %s, %s) {op = "mul", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<32x32xbf16, #gpu.address_space<workgroup>>, memref<32x32xbf16, #gpu.address_space<workgroup>>, memref<32x32xbf16, #gpu.address_space<workgroup>>) -> ()
    "tile.copy"(%g, %s) {scope = "cta"} : (memref<32x32xbf16>, memref<32x32xbf16, #gpu.address_space<workgroup>>) -> ()
    gpu.return
  }
}

// -----

// Integer and fp8 tiles copy bits as they are.
// CHECK-LABEL: gpu.func @bits
// CHECK: vector.load {{.*}} vector<4xi32>
// CHECK: vector.load {{.*}} vector<16xf8E4M3FN>
// CHECK-NOT: arith.extf
gpu.module @m {
  gpu.func @bits(%a: memref<256xi32>, %b: memref<256xi32>, %c: memref<512xf8E4M3FN>, %d: memref<512xf8E4M3FN>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    "tile.copy"(%b, %a) {scope = "warp"} : (memref<256xi32>, memref<256xi32>) -> ()
    "tile.copy"(%d, %c) {scope = "warp"} : (memref<512xf8E4M3FN>, memref<512xf8E4M3FN>) -> ()
    gpu.return
  }
}
