// elementwise/smem (seed 000): shared operands; partition [outer, threads, vec] from the scope.
// RUN: tile-opt %s --split-input-file --tile-lower --canonicalize --cse | FileCheck %s
// RUN: tile-opt %examples/seed_000_smem_sqrt.mlir --tile-lower --canonicalize --cse | FileCheck %s --check-prefix=SEED
// RUN: tile-opt %examples/seed_000_smem_sqrt.mlir -p tile-to-ptx --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: tile-opt %examples/seed_000_smem_sqrt.mlir --tile-dispatch --tile-explain 2>&1 >/dev/null | FileCheck %s --check-prefix=EXPLAIN

// Seed 000's generated IR: `A_smem[tid * 4 + vec] = sqrt(A_smem[tid * 4 + vec])`, one round.
// SEED-LABEL: gpu.func @unary_op
// SEED: memref.get_global @__tile_shared_0 : memref<1024xf32, #gpu.address_space<workgroup>>
// SEED: %[[TID:.*]] = gpu.thread_id x
// SEED: %[[SMEM:.*]] = memref.collapse_shape %{{.*}} : memref<32x32xf32, #gpu.address_space<workgroup>> into memref<1024xf32, #gpu.address_space<workgroup>>
// SEED: %[[I:.*]] = arith.muli %[[TID]], %c4 : index
// SEED: vector.store %{{.*}}, %[[SMEM]][%[[I]]] {alignment = 16 : i64}
// SEED: gpu.barrier
// SEED-NOT: scf.for
// SEED: %[[V:.*]] = vector.load %[[SMEM]][%[[I]]] {alignment = 16 : i64} : memref<1024xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// SEED: %[[R:.*]] = llvm.call_intrinsic "llvm.sqrt.v4f32"(%[[V]])
// SEED: vector.store %[[R]], %[[SMEM]][%[[I]]] {alignment = 16 : i64}
// SEED: gpu.barrier

// PTX: .shared .align 16 .b8 __tile_shared_0[4096];
// PTX: bar.sync 0;
// PTX: ld.shared.v4.{{[bf]}}32
// PTX-COUNT-4: sqrt.rn.f32
// PTX: st.shared.v4.{{[bf]}}32
// PTX: bar.sync 0;

// EXPLAIN: tile.elementwise sqrt at scope cta: variant smem
// EXPLAIN-DAG: smem (priority 10): chosen
// EXPLAIN-DAG: reg (priority 10): rejected: operand 0 scope shared != local
// EXPLAIN-DAG: gmem (priority 10): rejected: operand 0 scope shared != global

// 64x64 f32 over 256 threads: four rounds of float4.
// CHECK-LABEL: gpu.func @rounds
// CHECK: scf.for %{{.*}} = %c0 to %c4 step %c1
// CHECK:   vector.load {{.*}} vector<4xf32>
// CHECK:   math.exp
gpu.module @m {
  gpu.func @rounds() kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %s = "tile.alloc"() {layout = #tile.layout<"S[(64, 64)]">} : () -> memref<64x64xf32, #gpu.address_space<workgroup>>
    "tile.elementwise"(%s, %s) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64x64xf32, #gpu.address_space<workgroup>>, memref<64x64xf32, #gpu.address_space<workgroup>>) -> ()
    gpu.return
  }
}

// -----

// Rows padded to 36 floats: each row is a contiguous run of 32 (float4 still fits,
// rows are 144 bytes apart); column-major: nothing contiguous, scalar accesses.
// CHECK-LABEL: gpu.func @strided_layouts
// CHECK: memref.get_global {{.*}} : memref<1148xf32, #gpu.address_space<workgroup>>
// CHECK: vector.load {{.*}} : memref<32x32xf32, strided<[36, 1]>, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK: memref.load {{.*}} : memref<32x32xf32, strided<[1, 32]>, #gpu.address_space<workgroup>>
// CHECK-NOT: vector.load {{.*}}strided<[1, 32]>
gpu.module @m {
  gpu.func @strided_layouts() kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %p = "tile.alloc"() {layout = #tile.layout<"S[(32, 32):(36, 1)]">} : () -> memref<32x32xf32, #gpu.address_space<workgroup>>
    "tile.elementwise"(%p, %p) {op = "neg", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<32x32xf32, #gpu.address_space<workgroup>>, memref<32x32xf32, #gpu.address_space<workgroup>>) -> ()
    %c = "tile.alloc"() {layout = #tile.layout<"S[(32, 32):(1, 32)]">} : () -> memref<32x32xf32, #gpu.address_space<workgroup>>
    "tile.elementwise"(%c, %c) {op = "neg", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<32x32xf32, #gpu.address_space<workgroup>>, memref<32x32xf32, #gpu.address_space<workgroup>>) -> ()
    gpu.return
  }
}

// -----

// f16 in shared memory: 8 halves a vector, native packed arithmetic for add.
// CHECK-LABEL: gpu.func @halves
// CHECK: vector.load {{.*}} vector<8xf16>
// CHECK: arith.addf {{.*}} : vector<8xf16>
// CHECK-NOT: arith.extf
gpu.module @m {
  gpu.func @halves() kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %a = "tile.alloc"() {layout = #tile.layout<"S[(16, 64)]">} : () -> memref<16x64xf16, #gpu.address_space<workgroup>>
    "tile.elementwise"(%a, %a, %a) {op = "add", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<16x64xf16, #gpu.address_space<workgroup>>, memref<16x64xf16, #gpu.address_space<workgroup>>, memref<16x64xf16, #gpu.address_space<workgroup>>) -> ()
    gpu.return
  }
}
