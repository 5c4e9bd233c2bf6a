// copy/reg: copies with a register side; the register layout induces the partition.
// RUN: tile-opt %s --split-input-file --tile-lower --canonicalize --cse | FileCheck %s
// RUN: tile-opt %s --split-input-file -p tile-to-ptx --emit=ptx | FileCheck %s --check-prefix=PTX

// global -> registers -> global: lane i moves its row of 8 floats as two float4s,
// and the register side needs no barrier.
// CHECK-LABEL: gpu.func @through_registers
// CHECK: %[[R:.*]] = memref.alloca() {alignment = 32 : i64} : memref<8xf32, #gpu.address_space<private>>
// CHECK: %[[LANE:.*]] = gpu.thread_id x
// CHECK: scf.for %[[J:.*]] = %c0 to %c8 step %c4 {
// CHECK:   %[[V:.*]] = vector.load %{{.*}}[%[[LANE]], %[[J]]] {alignment = 16 : i64} : memref<32x8xf32>, vector<4xf32>
// CHECK:   vector.store %[[V]], %[[R]][%[[J]]] {alignment = 16 : i64}
// CHECK-NOT: barrier
// CHECK: scf.for
// CHECK:   vector.store {{.*}} : memref<32x8xf32>, vector<4xf32>
// PTX-LABEL: .entry through_registers(
// PTX-NOT: .local
// PTX-COUNT-2: ld.global.nc.v4.{{[bf]}}32
// PTX-COUNT-2: st.global.v4.{{[bf]}}32
gpu.module @m {
  gpu.func @through_registers(%a: memref<32x8xf32> {llvm.noalias, llvm.readonly}, %b: memref<32x8xf32> {llvm.noalias}) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %r = "tile.alloc"() {layout = #tile.layout<"S[(32, 8):(1@laneid, 1)]">} : () -> memref<32x8xf32, #gpu.address_space<private>>
    "tile.copy"(%r, %a) {scope = "warp"} : (memref<32x8xf32, #gpu.address_space<private>>, memref<32x8xf32>) -> ()
    "tile.copy"(%b, %r) {scope = "warp"} : (memref<32x8xf32>, memref<32x8xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

// A tile replicated over 4 warps: every warp loads it, only warp 0 writes it back.
// CHECK-LABEL: gpu.func @replicated
// CHECK: %[[T:.*]] = gpu.thread_id x
// CHECK: math.exp
// CHECK: gpu.barrier
// CHECK: %[[W:.*]] = arith.divui %[[T]], %c32 : index
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[W]], %c0 : index
// CHECK: scf.if %[[FIRST]] {
// CHECK:   vector.store {{.*}} : memref<32x4xf32, #gpu.address_space<workgroup>>
gpu.module @m {
  gpu.func @replicated(%a: memref<32x4xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %s = "tile.alloc"() {layout = #tile.layout<"S[(32, 4)]">} : () -> memref<32x4xf32, #gpu.address_space<workgroup>>
    "tile.copy"(%s, %a) {scope = "cta"} : (memref<32x4xf32, #gpu.address_space<workgroup>>, memref<32x4xf32>) -> ()
    %r = "tile.alloc"() {layout = #tile.layout<"S[(32, 4):(1@laneid, 1)], R[4:1@warpid]">} : () -> memref<32x4xf32, #gpu.address_space<private>>
    "tile.copy"(%r, %s) {scope = "cta"} : (memref<32x4xf32, #gpu.address_space<private>>, memref<32x4xf32, #gpu.address_space<workgroup>>) -> ()
    "tile.elementwise"(%r, %r) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<32x4xf32, #gpu.address_space<private>>, memref<32x4xf32, #gpu.address_space<private>>) -> ()
    "tile.copy"(%s, %r) {scope = "cta"} : (memref<32x4xf32, #gpu.address_space<workgroup>>, memref<32x4xf32, #gpu.address_space<private>>) -> ()
    "tile.copy"(%a, %s) {scope = "cta"} : (memref<32x4xf32>, memref<32x4xf32, #gpu.address_space<workgroup>>) -> ()
    gpu.return
  }
}
