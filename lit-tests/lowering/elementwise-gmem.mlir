// elementwise/gmem: global-memory operands, 16-byte vectors strided over the scope's threads.
// RUN: tile-opt %s --split-input-file --tile-lower --canonicalize --cse | FileCheck %s
// RUN: tile-opt %s --split-input-file -p tile-to-ptx --emit=ptx | FileCheck %s --check-prefix=PTX
// Below sm_90 (the fp8 split is an error there, so `not`; an abort would fail it):
// RUN: not tile-opt %s --split-input-file -p tile-to-ptx --emit=ptx --chip sm_80 2>&1 | FileCheck %s --check-prefix=SM80
// RUN: not tile-opt %s --split-input-file -p tile-to-ptx --emit=ptx --chip sm_70 2>&1 | FileCheck %s --check-prefix=SM70

// 1024 floats over 256 threads: one round of one float4 each, no loop, no tail.
// CHECK-LABEL: gpu.func @exact
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK-NOT: scf.
// CHECK: %[[OFF:.*]] = arith.muli %[[TID]], %{{.*}} : index
// CHECK: %[[A:.*]] = vector.load %{{.*}}[%[[OFF]]] {alignment = 16 : i64} : memref<1024xf32>, vector<4xf32>
// CHECK: %[[B:.*]] = vector.load %{{.*}}[%[[OFF]]] {alignment = 16 : i64} : memref<1024xf32>, vector<4xf32>
// CHECK: %[[S:.*]] = arith.addf %[[A]], %[[B]] : vector<4xf32>
// CHECK: vector.store %[[S]], %{{.*}}[%[[OFF]]] {alignment = 16 : i64}
// CHECK-NOT: scf.
// CHECK: gpu.return
gpu.module @m {
  gpu.func @exact(%a: memref<1024xf32>, %b: memref<1024xf32>, %c: memref<1024xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    "tile.elementwise"(%c, %a, %b) {op = "add", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<1024xf32>, memref<1024xf32>, memref<1024xf32>) -> ()
    gpu.return
  }
}

// -----

// 1003 elements over 128 threads: 250 float4 vectors (a full round, then 122 threads
// take one more), then threads 0..2 take the last 3 elements one each.
// CHECK-LABEL: gpu.func @tail
// CHECK-DAG: %[[C122:.*]] = arith.constant 122 : index
// CHECK-DAG: %[[C3:.*]] = arith.constant 3 : index
// CHECK: vector.load {{.*}} vector<4xf32>
// CHECK: llvm.call_intrinsic "llvm.sqrt.v4f32"
// CHECK: arith.cmpi ult, %{{.*}}, %[[C122]] : index
// CHECK: scf.if
// CHECK:   llvm.call_intrinsic "llvm.sqrt.v4f32"
// CHECK: arith.cmpi ult, %{{.*}}, %[[C3]] : index
// CHECK: scf.if
// CHECK:   memref.load {{.*}} : memref<1003xf32>
// CHECK:   llvm.call_intrinsic "llvm.sqrt.f32"
// CHECK:   memref.store
gpu.module @m {
  gpu.func @tail(%a: memref<1003xf32>, %b: memref<1003xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    "tile.elementwise"(%b, %a) {op = "sqrt", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<1003xf32>, memref<1003xf32>) -> ()
    gpu.return
  }
}

// -----

// i32 cast into bf16 goes through f32, rounded twice as torch rounds it (sm_90's direct
// cvt.rn.bf16.s32 rounds once: i32 2^30 + 2^22 + 1 would be 2^30 + 2^23, torch's 2^30).
// The truncf names its rounding mode, or canonicalize folds the pair into one sitofp.
// CHECK-LABEL: gpu.func @int_to_bf16
// CHECK: %[[W:.*]] = arith.sitofp %{{.*}} : vector<4xi32> to vector<4xf32>
// CHECK: arith.truncf %[[W]] to_nearest_even : vector<4xf32> to vector<4xbf16>
// PTX-LABEL: .entry int_to_bf16(
// PTX-NOT: cvt.rn.bf16.s32
// PTX: cvt.rn.f32.s32
// PTX: cvt.rn.bf16.f32
// Below sm_90 LLVM cannot select the named mode's constrained fptrunc to bf16 (an abort,
// "unsupported library call operation"): tile-target drops it after canonicalize, and
// the two roundings stay (sm_80's packed cvt, sm_70's rounding in integers).
// SM80-LABEL: .entry int_to_bf16(
// SM80-NOT: cvt.rn.bf16
// SM80: cvt.rn.f32.s32
// SM80: cvt.rn.bf16x2.f32
// SM70-LABEL: .entry int_to_bf16(
// SM70: cvt.rn.f32.s32
// SM70-NOT: cvt.rn.bf16
// SM70-LABEL: .entry coalesced(
gpu.module @m {
  gpu.func @int_to_bf16(%a: memref<1024xi32>, %b: memref<1024xbf16>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    "tile.elementwise"(%b, %a) {op = "cast", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<1024xbf16>, memref<1024xi32>) -> ()
    gpu.return
  }
}

// -----

// A contiguous N-D tile is coalesced into one dimension; f16 takes 8 per vector,
// and an f32 scalar is broadcast (the op runs in f32, as torch computes it).
// CHECK-LABEL: gpu.func @coalesced
// CHECK: memref.collapse_shape %{{.*}} {{\[\[}}0, 1, 2]] : memref<3x37x129xf16> into memref<14319xf16>
// CHECK: vector.load {{.*}} : memref<14319xf16>, vector<8xf16>
// CHECK: arith.extf {{.*}} : vector<8xf16> to vector<8xf32>
// CHECK: vector.broadcast %{{.*}} : f32 to vector<8xf32>
// CHECK: arith.mulf {{.*}} : vector<8xf32>
// CHECK: arith.truncf {{.*}} : vector<8xf32> to vector<8xf16>
gpu.module @m {
  gpu.func @coalesced(%a: memref<3x37x129xf16>, %x: f32) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    "tile.elementwise"(%a, %a, %x) {op = "mul", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<3x37x129xf16>, memref<3x37x129xf16>, f32) -> ()
    gpu.return
  }
}

// -----

// Rows of a strided view stay separate: the item index splits into row and column,
// and vectors still fit because every row starts 16-byte aligned. 256 vectors over
// 64 threads: 4 rounds.
// CHECK-LABEL: gpu.func @rows
// CHECK: scf.for %[[R:.*]] = %{{.*}} to %{{.*}} step
// CHECK:   %[[I:.*]] = arith.addi
// CHECK:   %[[ROW:.*]] = arith.divui %[[I]], %{{.*}} : index
// CHECK:   %[[COL:.*]] = arith.remui %[[I]], %{{.*}} : index
// CHECK:   vector.load %{{.*}}[%[[ROW]], %{{.*}}] {alignment = 16 : i64} : memref<16x64xf32, strided<[128, 1]>>, vector<4xf32>
gpu.module @m {
  gpu.func @rows(%a: memref<16x128xf32>, %b: memref<16x64xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %v = memref.subview %a[0, 0] [16, 64] [1, 1] : memref<16x128xf32> to memref<16x64xf32, strided<[128, 1]>>
    "tile.elementwise"(%b, %v) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<16x64xf32>, memref<16x64xf32, strided<[128, 1]>>) -> ()
    gpu.return
  }
}

// -----

// An offset of 2 floats allows only 8-byte vectors; a strided innermost dim, scalars.
// CHECK-LABEL: gpu.func @narrowed
// CHECK: vector.load {{.*}} {alignment = 8 : i64} : memref<64xf32, strided<[1], offset: 2>>, vector<2xf32>
// CHECK: memref.load {{.*}} : memref<64xf32, strided<[2]>>
gpu.module @m {
  gpu.func @narrowed(%a: memref<128xf32>, %b: memref<64xf32>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %off = memref.subview %a[2] [64] [1] : memref<128xf32> to memref<64xf32, strided<[1], offset: 2>>
    "tile.elementwise"(%b, %off) {op = "neg", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32, strided<[1], offset: 2>>) -> ()
    %str = memref.subview %a[0] [64] [2] : memref<128xf32> to memref<64xf32, strided<[2]>>
    "tile.elementwise"(%b, %str) {op = "neg", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32, strided<[2]>>) -> ()
    gpu.return
  }
}

// -----

// Warp scope: the lane index, 32 at a time; a warp barrier before the next op on
// the same buffer. Thread scope: one thread does all 64 vectors.
// CHECK-LABEL: gpu.func @scopes
// CHECK-DAG: %[[C64:.*]] = arith.constant 64 : index
// CHECK: %[[T:.*]] = gpu.thread_id x
// CHECK: %[[LANE:.*]] = arith.remui %[[T]], %{{.*}} : index
// CHECK: scf.for
// CHECK:   arith.addi %{{.*}}, %[[LANE]] : index
// CHECK: nvvm.bar.warp.sync
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[C64]] step
gpu.module @m {
  gpu.func @scopes(%a: memref<256xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    "tile.elementwise"(%a, %a) {op = "abs", scope = "warp", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf32>, memref<256xf32>) -> ()
    "tile.elementwise"(%a, %a) {op = "abs", scope = "thread", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf32>, memref<256xf32>) -> ()
    gpu.return
  }
}

// -----

// Register staging (stage = 4): each thread's four rounds load first (a and b of every
// round), then compute and store; 1024 floats over 64 threads, no loop.
// CHECK-LABEL: gpu.func @staged
// CHECK-COUNT-8: vector.load {{.*}} vector<4xf32>
// CHECK-NOT: vector.load
// CHECK-COUNT-4: vector.store
gpu.module @m {
  gpu.func @staged(%a: memref<1024xf32>, %b: memref<1024xf32>, %c: memref<1024xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    "tile.elementwise"(%c, %a, %b) {op = "add", scope = "cta", stage = 4 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<1024xf32>, memref<1024xf32>, memref<1024xf32>) -> ()
    gpu.return
  }
}

// -----

// An operand broadcast along the innermost dimension (stride 0, a per-row scale) takes
// one element per vector, repeated; it does not narrow the others' vectors.
// CHECK-LABEL: gpu.func @splat
// CHECK: %[[X:.*]] = vector.load %{{.*}} : memref<4x64xf32>, vector<4xf32>
// CHECK: %[[S:.*]] = memref.load %{{.*}} : memref<4x64xf32, strided<[1, 0]>>
// CHECK: %[[V:.*]] = vector.broadcast %[[S]] : f32 to vector<4xf32>
// CHECK: arith.mulf %[[X]], %[[V]] : vector<4xf32>
gpu.module @m {
  gpu.func @splat(%a: memref<4x64xf32>, %s: memref<4x64xf32, strided<[1, 0]>>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    "tile.elementwise"(%a, %a, %s) {op = "mul", scope = "cta", variant = "gmem", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<4x64xf32>, memref<4x64xf32>, memref<4x64xf32, strided<[1, 0]>>) -> ()
    gpu.return
  }
}

// -----

// A dynamic row stride: vectors where the kernel argument promises its divisibility
// (tile.divisibility = 4, so every row starts 16-byte aligned), scalars where not.
// CHECK-LABEL: gpu.func @divisible
// CHECK: scf.for
// CHECK:   vector.load {{.*}} {alignment = 16 : i64} : memref<?x64xf32, strided<[?, 1]>>, vector<4xf32>
// CHECK: scf.for
// CHECK:   memref.load {{.*}} : memref<?x64xf32, strided<[?, 1]>>
gpu.module @m {
  gpu.func @divisible(%p: memref<1xf32>, %q: memref<1xf32>, %n: i32, %s: i32 {tile.divisibility = 4 : i64}, %t: i32) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %rows = arith.index_cast %n : i32 to index
    %st = arith.index_cast %s : i32 to index
    %tt = arith.index_cast %t : i32 to index
    %a = memref.reinterpret_cast %p to offset: [0], sizes: [%rows, 64], strides: [%st, 1] : memref<1xf32> to memref<?x64xf32, strided<[?, 1]>>
    %b = memref.reinterpret_cast %q to offset: [0], sizes: [%rows, 64], strides: [%tt, 1] : memref<1xf32> to memref<?x64xf32, strided<[?, 1]>>
    "tile.elementwise"(%a, %a) {op = "sqrt", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<?x64xf32, strided<[?, 1]>>, memref<?x64xf32, strided<[?, 1]>>) -> ()
    "tile.elementwise"(%b, %b) {op = "sqrt", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<?x64xf32, strided<[?, 1]>>, memref<?x64xf32, strided<[?, 1]>>) -> ()
    gpu.return
  }
}

// -----

// Bools are a byte each: vectors of them are accessed as 8x as many i1 lanes (LLVM packs
// i1 vectors into bits) and bitcast to bytes; a predicate of f32s stores 4 bools at a time.
// CHECK-LABEL: gpu.func @bools
// CHECK: arith.cmpf uno, %{{.*}} : vector<4xf32>
// CHECK: vector.bitcast %{{.*}} : vector<4xi8> to vector<32xi1>
// CHECK: vector.store {{.*}} {alignment = 4 : i64} : memref<256xi1>, vector<32xi1>
// CHECK: vector.load {{.*}} {alignment = 16 : i64} : memref<256xi1>, vector<128xi1>
// CHECK: vector.bitcast %{{.*}} : vector<128xi1> to vector<16xi8>
// CHECK: arith.cmpi ne, %{{.*}} : vector<16xi8>
gpu.module @m {
  gpu.func @bools(%x: memref<256xf32>, %m: memref<256xi1>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    "tile.elementwise"(%m, %x) {op = "isnan", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xi1>, memref<256xf32>) -> ()
    "tile.elementwise"(%m, %m) {op = "logical_not", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xi1>, memref<256xi1>) -> ()
    gpu.return
  }
}

// -----

// fp8 computes in f32: it widens with the packed cvt (pairs of bytes) and narrows with
// the saturating one (the second of each pair as its first operand); e5m2 keeps Inf:
// what saturated (|x| >= 61440) moves up one step, added to a word of the bytes (here
// the pair's i16; four bytes' i32 in wider accesses). vector_bytes = 1: one element per
// access, its pair padded with a zero. (gmem forced: by default one fp8 input and a
// scalar take elementwise/lut, lowering/elementwise-lut.mlir.)
// CHECK-LABEL: gpu.func @fp8
// CHECK: vector.load {{.*}} vector<16xf8E4M3FN>
// CHECK-COUNT-8: nvvm.convert.f8x2.to.f16x2
// CHECK: arith.mulf {{.*}} : vector<16xf32>
// CHECK: nvvm.convert.f32x2.to.f8x2 %[[HI:.*]], %[[LO:.*]] {rnd = #nvvm.fp_rnd_mode<rn>, sat = #nvvm.sat_mode<satfinite>} : vector<2xi8>(f8E4M3FN)
// CHECK: vector.store {{.*}} vector<16xf8E4M3FN>
// CHECK: scf.for
// CHECK:   memref.load {{.*}} : memref<1024xf8E5M2>
// CHECK:   nvvm.convert.f8x2.to.f16x2 {{.*}}(f8E5M2)
// CHECK:   %[[X:.*]] = arith.mulf
// CHECK:   %[[PAIR:.*]] = nvvm.convert.f32x2.to.f8x2 %{{.*}}, %[[X]] {{.*}}(f8E5M2)
// CHECK:   %[[BIG:.*]] = arith.cmpf oge
// CHECK:   %[[WORD:.*]] = vector.bitcast %[[PAIR]] : vector<2xi8> to vector<1xi16>
// CHECK:   %[[STEP:.*]] = arith.ori
// CHECK:   arith.addi %[[WORD]], {{.*}} : vector<1xi16>
// CHECK:   memref.store {{.*}} : memref<1024xf8E5M2>
gpu.module @m {
  gpu.func @fp8(%a: memref<1024xf8E4M3FN>, %b: memref<1024xf8E5M2>, %s: f32) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    "tile.elementwise"(%a, %a, %s) {op = "mul", scope = "cta", variant = "gmem", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<1024xf8E4M3FN>, memref<1024xf8E4M3FN>, f32) -> ()
    "tile.elementwise"(%b, %b, %s) {op = "mul", scope = "cta", variant = "gmem", vector_bytes = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<1024xf8E5M2>, memref<1024xf8E5M2>, f32) -> ()
    gpu.return
  }
}
