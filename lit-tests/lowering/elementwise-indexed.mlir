// Indexed rows (the generators): the body gets, in place of the last input (the index
// base, an i64 scalar), base + the element's row-major index in dst, in every variant.
// RUN: tile-opt %s --split-input-file --tile-lower --canonicalize --cse | FileCheck %s
// RUN: tile-opt %s --split-input-file -p tile-to-ptx --emit=ptx | FileCheck %s --check-prefix=PTX

// gmem: a 3x37 tile coalesces to 111 elements; thread t's float4 starts at 4t, lanes
// at base + 4t + [0, 1, 2, 3]; the scalar tail at base + 108 + t. Philox's 32x32-bit
// products are mul.lo/mul.hi.u32, never 64-bit multiplies.
// CHECK-LABEL: gpu.func @gmem
// CHECK-SAME: %[[BASE:arg6]]: i64
// CHECK: %[[T:.*]] = gpu.thread_id x
// CHECK: %[[START:.*]] = arith.muli %[[T]], %c4 : index
// CHECK: %[[I:.*]] = arith.index_cast %[[START]] : index to i64
// CHECK: %[[P:.*]] = arith.addi %[[BASE]], %[[I]] : i64
// CHECK: %[[PV:.*]] = vector.broadcast %[[P]] : i64 to vector<4xi64>
// CHECK: arith.addi %[[PV]], %cst : vector<4xi64>
// CHECK: llvm.call_intrinsic "llvm.nvvm.mulhi.ui"
// CHECK: vector.store {{.*}} : memref<111xf32, strided<[1]>>, vector<4xf32>
// CHECK: %[[TAIL:.*]] = arith.addi %[[T]], %c108 : index
// CHECK: %[[J:.*]] = arith.index_cast %[[TAIL]] : index to i64
// CHECK: arith.addi %[[BASE]], %[[J]] : i64
// PTX-LABEL: .entry gmem(
// PTX: mul.hi.u32
// PTX-NOT: mul.lo.s64
// PTX: st.global.v4.b32
gpu.module @m {
  gpu.func @gmem(%dst: memref<3x37xf32, strided<[37, 1]>> {llvm.noalias}, %x: memref<3x37xf32, strided<[37, 1]>> {llvm.noalias, llvm.readonly}, %scale: f32, %seed: i64, %offset: i64, %threshold: i64, %base: i64) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    "tile.elementwise"(%dst, %x, %scale, %seed, %offset, %threshold, %base) {op = "dropout_philox", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 4>} : (memref<3x37xf32, strided<[37, 1]>>, memref<3x37xf32, strided<[37, 1]>>, f32, i64, i64, i64, i64) -> ()
    gpu.return
  }
}

// -----

// smem: a 16x8 tile in a column-major shared buffer: the index still counts dst's
// logical row-major order (row * 8 + column), not the storage's.
// CHECK-LABEL: gpu.func @smem
// CHECK-SAME: %[[BASE:arg0]]: i64
// CHECK: %[[T:.*]] = gpu.thread_id x
// CHECK: %[[ROW:.*]] = arith.divui %[[T]], %c8 : index
// CHECK: %[[COL:.*]] = arith.remui %[[T]], %c8 : index
// CHECK: %[[R8:.*]] = arith.muli %[[ROW]], %c8 : index
// CHECK: %[[LIN:.*]] = arith.addi %[[R8]], %[[COL]] : index
// CHECK: %[[I:.*]] = arith.index_cast %[[LIN]] : index to i64
// CHECK: arith.addi %[[BASE]], %[[I]] : i64
// the head and column by the length's magic (a multiply-high, no division), and the
// slope's 2^t in f64 (bodies._exp2_near's Horner steps)
// CHECK: arith.mului_extended {{.*}} : i64
// CHECK-NOT: arith.divui {{.*}} : i64
// CHECK: math.fma {{.*}} : f64
gpu.module @m {
  gpu.func @smem(%base: i64, %length: i64, %pow2: i64, %magic: i64) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %s = "tile.alloc"() {layout = #tile.layout<"S[(16, 8):(1, 16)]">} : () -> memref<16x8xf32, #gpu.address_space<workgroup>>
    "tile.elementwise"(%s, %length, %pow2, %magic, %base) {op = "alibi_bias", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 2>} : (memref<16x8xf32, #gpu.address_space<workgroup>>, i64, i64, i64, i64) -> ()
    gpu.return
  }
}

// -----

// reg: lane i holds row i of a 32x8 register tile; its registers j are at i * 8 + j.
// CHECK-LABEL: gpu.func @reg
// CHECK-SAME: %[[BASE:arg1]]: i64
// CHECK: %[[LANE:.*]] = gpu.thread_id x
// CHECK: scf.for %[[J:.*]] = %c0 to %c8 step %c1 {
// CHECK:   %[[R:.*]] = arith.muli %[[LANE]], %c8 : index
// CHECK:   %[[LIN:.*]] = arith.addi %[[R]], %[[J]] : index
// CHECK:   %[[I:.*]] = arith.index_cast %[[LIN]] : index to i64
// CHECK:   arith.addi %[[BASE]], %[[I]] : i64
// CHECK:   math.sin {{.*}} : f64
gpu.module @m {
  gpu.func @reg(%out: memref<32x8xf32>, %base: i64, %dim: i64, %step: f64, %ratio: f64) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %r = "tile.alloc"() {layout = #tile.layout<"S[(32, 8):(1@laneid, 1)]">} : () -> memref<32x8xf32, #gpu.address_space<private>>
    "tile.elementwise"(%r, %step, %ratio, %dim, %base) {op = "sinusoidal_pe", scope = "warp", operandSegmentSizes = array<i32: 1, 1, 1, 2>} : (memref<32x8xf32, #gpu.address_space<private>>, f64, f64, i64, i64) -> ()
    "tile.copy"(%out, %r) {scope = "warp"} : (memref<32x8xf32>, memref<32x8xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}
