// reduction/shared (seed 001) and reduction/gmem: groups of lanes fold rows with xor shuffles.
// RUN: tile-opt %examples/seed_001_shared_sum.mlir --tile-lower --canonicalize --cse | FileCheck %s --check-prefix=SEED
// RUN: tile-opt %examples/seed_001_shared_sum.mlir -p tile-to-ptx --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: tile-opt %s --split-input-file --tile-lower --canonicalize --cse | FileCheck %s

// Seed 001: 8-lane groups, one row each; shuffles with masks 1, 2, 4 in segments of
// 8 lanes (clamp (32 - 8) << 8 | 31 = 6175); lane 0 of each group writes.
// SEED: %[[LANE:.*]] = arith.remui %{{.*}}, %c8 : index
// SEED: %[[GROUP:.*]] = arith.divui %{{.*}}, %c8 : index
// SEED: %[[IN:.*]] = arith.cmpi ult, %[[LANE]], %c8 : index
// SEED: %[[ACC:.*]] = scf.if %[[IN]] -> (f32) {
// SEED: %[[S1:.*]] = nvvm.shfl.sync  bfly %c-1_i32, %[[ACC]], %c1_i32, %c6175_i32 : f32 -> f32
// SEED: %[[A1:.*]] = arith.addf %[[ACC]], %[[S1]] : f32
// SEED: %[[S2:.*]] = nvvm.shfl.sync  bfly %c-1_i32, %[[A1]], %c2_i32, %c6175_i32 : f32 -> f32
// SEED: %[[A2:.*]] = arith.addf %[[A1]], %[[S2]] : f32
// SEED: %[[S3:.*]] = nvvm.shfl.sync  bfly %c-1_i32, %[[A2]], %c4_i32, %c6175_i32 : f32 -> f32
// SEED: %[[A3:.*]] = arith.addf %[[A2]], %[[S3]] : f32
// SEED: %[[FIRST:.*]] = arith.cmpi eq, %[[LANE]], %c0 : index
// SEED: scf.if %[[FIRST]] {
// SEED:   memref.store %[[A3]], %{{.*}}[%[[GROUP]]]
// SEED: gpu.barrier

// PTX-COUNT-3: shfl.sync.bfly.b32
// PTX-NOT: shfl.sync

// One long row over 256 threads: 8 warps share it, each leaving a partial in shared
// memory; after a barrier the first warp folds the 8 partials.
// CHECK-LABEL: gpu.func @split
// CHECK: memref.get_global @__tile_reduce_0 : memref<8xf32, #gpu.address_space<workgroup>>
// CHECK-COUNT-5: nvvm.shfl.sync  bfly
// CHECK: memref.store %{{.*}}, %{{.*}} : memref<8xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK-COUNT-3: nvvm.shfl.sync  bfly
// CHECK: memref.store %{{.*}} : memref<1xf32>
// CHECK: gpu.barrier
gpu.module @m {
  gpu.func @split(%a: memref<5000xf32>, %out: memref<1xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    "tile.reduce"(%out, %a) {kind = "max", scope = "cta"} : (memref<1xf32>, memref<5000xf32>) -> ()
    gpu.return
  }
}

// -----

// A 48-thread CTA: groups of 16 (the largest power of two dividing 48), so every group
// is whole; the second warp's shuffles name its 16 lanes only.
// CHECK-LABEL: gpu.func @odd_threads
// CHECK: arith.remui %{{.*}}, %c16 : index
// CHECK: arith.shli %c1_i32
// CHECK: nvvm.shfl.sync  bfly %[[MASK:.*]], %{{.*}}, %c1_i32, %c4127_i32
// CHECK: nvvm.shfl.sync  bfly %[[MASK]], %{{.*}}, %c8_i32, %c4127_i32
gpu.module @m {
  gpu.func @odd_threads(%a: memref<3x1000xf32>, %out: memref<3xf32>) kernel attributes {known_block_size = array<i32: 48, 1, 1>} {
    "tile.reduce"(%out, %a) {kind = "sum", axes = array<i64: 1>, scope = "cta"} : (memref<3xf32>, memref<3x1000xf32>) -> ()
    gpu.return
  }
}

// -----

// A bf16 row of 14336 (1792 vectors) over 512 threads, 256 a row: each lane's seven
// loads are one round of four, folding into one vector accumulator (four would hold 32
// registers), then the three left (the row is not a whole number of rounds) together,
// under one branch, rather than a loop of one load at a time. Every lane has the same
// rounds (a loop of a static trip count, here one: no loop), their loads issued
// together; only an idle lane skips them (the outer branch).
// CHECK-LABEL: gpu.func @long_rows
// CHECK: scf.if %{{.*}} -> (vector<8xf32>) {
// CHECK-COUNT-4: vector.load {{.*}} : memref<2x14336xbf16>, vector<8xbf16>
// CHECK: scf.if %{{.*}} -> (vector<8xf32>) {
// CHECK-COUNT-3: vector.load {{.*}} : memref<2x14336xbf16>, vector<8xbf16>
// CHECK-NOT: vector.load
// CHECK-NOT: scf.for
// CHECK: nvvm.shfl.sync  bfly
gpu.module @m {
  gpu.func @long_rows(%a: memref<2x14336xbf16>, %out: memref<2xf32>) kernel attributes {known_block_size = array<i32: 512, 1, 1>} {
    "tile.reduce"(%out, %a) {kind = "sum", axes = array<i64: 1>, scope = "cta"} : (memref<2xf32>, memref<2x14336xbf16>) -> ()
    gpu.return
  }
}

// -----

// bf16 sums accumulate in f32 and round once at the end; accum adds the old value.
// Rows read from global memory come 8 halves (16 bytes) a load.
// CHECK-LABEL: gpu.func @bf16
// CHECK: vector.load {{.*}} : memref<16x64xbf16>, vector<8xbf16>
// CHECK: arith.extf %{{.*}} : vector<8xbf16> to vector<8xf32>
// CHECK: nvvm.shfl.sync  bfly {{.*}} : f32 -> f32
// CHECK: memref.load {{.*}} : memref<16xbf16>
// CHECK: arith.truncf %{{.*}} : f32 to bf16
gpu.module @m {
  gpu.func @bf16(%a: memref<16x64xbf16>, %out: memref<16xbf16>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    "tile.reduce"(%out, %a) {kind = "sum", axes = array<i64: -1>, accum = true, scope = "cta"} : (memref<16xbf16>, memref<16x64xbf16>) -> ()
    gpu.return
  }
}

// -----

// Thread scope: the thread loops over rows, each row's two float4s loaded together
// (fewer than a round of four: fold_strided's guarded remainder, resolved here).
// CHECK-LABEL: gpu.func @thread
// CHECK: scf.for %[[ROW:.*]] = %c0 to %c4 step %c1 {
// CHECK-NOT: scf.for
// CHECK-COUNT-2: vector.load {{.*}} : memref<4x8xf32>, vector<4xf32>
// CHECK:     arith.mulf {{.*}} : vector<4xf32>
// CHECK-NOT: nvvm.shfl
gpu.module @m {
  gpu.func @thread(%a: memref<4x8xf32>, %out: memref<4xf32>) kernel attributes {known_block_size = array<i32: 1, 1, 1>} {
    "tile.reduce"(%out, %a) {kind = "prod", axes = array<i64: 1>, scope = "thread"} : (memref<4xf32>, memref<4x8xf32>) -> ()
    gpu.return
  }
}
