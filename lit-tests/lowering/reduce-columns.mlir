// reduction/columns: the innermost axis is kept, so each thread owns a vector of outputs
// and walks the reduced rows with coalesced loads.
// RUN: tile-opt %s --split-input-file --tile-lower --canonicalize --cse | FileCheck %s
// RUN: tile-opt %s --split-input-file --tile-dispatch --tile-explain 2>&1 >/dev/null | FileCheck %s --check-prefix=EXPLAIN

// 512 columns over 128 threads: one float4 of outputs each, all 64 rows walked sixteen
// loads a round (in flight together) folded into one accumulator (GLOBAL_FOLDS of a
// 4-byte source); a scale of 1/64 makes it a mean.
// EXPLAIN: tile.reduce sum at scope cta: variant columns
// EXPLAIN: columns (priority 20): chosen
// EXPLAIN: gmem (priority 10): accepts
// CHECK-LABEL: gpu.func @wide
// CHECK: %[[T:.*]] = gpu.thread_id x
// CHECK-NOT: scf.for %{{.*}} = %[[T]]
// CHECK: %[[ACC:.*]] = scf.for %[[R:.*]] = %c0 to %c49 step %c16 iter_args
// CHECK-COUNT-16: vector.load {{.*}} : memref<64x512xf32>, vector<4xf32>
// CHECK-COUNT-16: arith.addf
// CHECK: %[[MEAN:.*]] = arith.mulf %[[ACC]], %{{.*}} : vector<4xf32>
// CHECK: vector.store %[[MEAN]], %{{.*}} {alignment = 16 : i64} : memref<512xf32>, vector<4xf32>
// CHECK-NOT: gpu.barrier
gpu.module @m {
  gpu.func @wide(%a: memref<64x512xf32>, %out: memref<512xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    "tile.reduce"(%out, %a) {kind = "sum", axes = array<i64: 0>, scope = "cta", scale = 1.562500e-02 : f64} : (memref<512xf32>, memref<64x512xf32>) -> ()
    gpu.return
  }
}

// -----

// A 2-byte source: sixteen loads a round into two accumulators in turn (each load
// converted to f32); 40 rows make two rounds (rows 0-31), then the last 8 rows' loads
// issued together and folded into the first accumulator (the remainder's guarded round,
// its guards resolved here: the walk starts at row 0); the two fold together last.
// CHECK-LABEL: gpu.func @half_words
// CHECK: %[[ACC:.*]]:2 = scf.for %{{.*}} = %c0 to %c25 step %c16 iter_args(%[[A:.*]] = %{{.*}}, %[[B:.*]] = %{{.*}}) -> (vector<8xf32>, vector<8xf32>)
// CHECK-COUNT-16: vector.load {{.*}} : memref<40x1024xbf16>, vector<8xbf16>
// CHECK: arith.addf %[[A]], %{{.*}} : vector<8xf32>
// CHECK-NEXT: arith.addf %[[B]], %{{.*}} : vector<8xf32>
// CHECK: scf.yield
// CHECK-NOT: scf.for
// CHECK: vector.load %{{.*}}[%c32, %{{.*}}]
// CHECK-COUNT-7: vector.load {{.*}} : memref<40x1024xbf16>, vector<8xbf16>
// CHECK-NOT: vector.load
// CHECK: %[[R:.*]] = arith.addf %[[ACC]]#0, %{{.*}} : vector<8xf32>
// CHECK-COUNT-7: arith.addf
// CHECK: %[[SUM:.*]] = arith.addf %{{.*}}, %[[ACC]]#1 : vector<8xf32>
// CHECK: arith.truncf %[[SUM]] : vector<8xf32> to vector<8xbf16>
gpu.module @m {
  gpu.func @half_words(%a: memref<40x1024xbf16>, %out: memref<1024xbf16>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    "tile.reduce"(%out, %a) {kind = "sum", axes = array<i64: 0>, scope = "cta"} : (memref<1024xbf16>, memref<40x1024xbf16>) -> ()
    gpu.return
  }
}

// -----

// A walk of 12 rows, under the sixteen a round of a 4-byte source: four loads a round
// into four accumulators (UNROLL), rather than one load at a time.
// CHECK-LABEL: gpu.func @short_walk
// CHECK: scf.for %{{.*}} = %c0 to %c9 step %c4 iter_args({{.*}}) -> (vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>)
// CHECK-COUNT-4: vector.load {{.*}} : memref<12x512xf32>, vector<4xf32>
gpu.module @m {
  gpu.func @short_walk(%a: memref<12x512xf32>, %out: memref<512xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    "tile.reduce"(%out, %a) {kind = "sum", axes = array<i64: 0>, scope = "cta"} : (memref<512xf32>, memref<12x512xf32>) -> ()
    gpu.return
  }
}

// -----

// 16 output vectors over 256 threads: the rows split into 16 slices whose partials
// meet in shared memory.
// CHECK-LABEL: gpu.func @narrow
// CHECK: memref.get_global @__tile_reduce_0 : memref<1024xf32, #gpu.address_space<workgroup>>
// CHECK: vector.store {{.*}} : memref<1024xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK: gpu.barrier
// CHECK: scf.for %{{.*}} = %c0 to %c16 step %c1 iter_args
// CHECK:   vector.load {{.*}} : memref<1024xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK: vector.store {{.*}} : memref<64xf32>, vector<4xf32>
// CHECK: gpu.barrier
gpu.module @m {
  gpu.func @narrow(%a: memref<4000x64xf32>, %out: memref<64xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    "tile.reduce"(%out, %a) {kind = "max", axes = array<i64: 0>, scope = "cta"} : (memref<64xf32>, memref<4000x64xf32>) -> ()
    gpu.return
  }
}

// -----

// At warp scope in a 96-thread block each of the 3 warps reduces its own slice at once
// (32 threads, a column each, 4 outputs: 8 slices of the rows per column): each warp
// gets its own 32 floats of the scratch (a view at warp * 32), which one buffer for all
// would have let the warps overwrite each other's partials in.
// CHECK: memref.global "private" @__tile_reduce_0 : memref<96xf32, #gpu.address_space<workgroup>>
// CHECK-LABEL: gpu.func @warp_slices
// CHECK: %[[T:.*]] = gpu.thread_id x
// CHECK: %[[WARP:.*]] = arith.divui %[[T]], %c32 : index
// CHECK: %[[AT:.*]] = arith.muli %[[WARP]], %c32 : index
// CHECK: memref.subview %{{.*}}[%[[AT]]] [32] [1] : memref<96xf32, #gpu.address_space<workgroup>> to memref<32xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
// CHECK: nvvm.bar.warp.sync
gpu.module @m {
  gpu.func @warp_slices(%a: memref<500x4xf32, strided<[4, 1], offset: ?>>, %out: memref<4xf32, strided<[1], offset: ?>>) kernel attributes {known_block_size = array<i32: 96, 1, 1>} {
    "tile.reduce"(%out, %a) {kind = "max", axes = array<i64: 0>, scope = "warp"} : (memref<4xf32, strided<[1], offset: ?>>, memref<500x4xf32, strided<[4, 1], offset: ?>>) -> ()
    gpu.return
  }
}
