// tile.prefetch: a view of global memory brought into L2 (prefetch.global.L2), the
// scope's threads sharing it 16 bytes at a time (variant prefetch/vectors): the innermost
// dim unrolled where its extent is static, a guard only on a last, partial round; the
// outer dims, and a dynamic innermost extent, in loops; one element a prefetch where the
// innermost dim is strided. Nothing is written, so no barrier goes around it.
// RUN: tile-opt %s --split-input-file --verify-diagnostics --tile-verify --tile-barriers --tile-lower --canonicalize --cse | FileCheck %s
// RUN: tile-opt %s --split-input-file -p tile-to-ptx --emit=ptx | FileCheck %s --check-prefix=PTX
// Before sm_90 (or PTX 8.0) LLVM has no L2 prefetch: tile-target drops the hints (the
// cluster kernel, @tail, is refused on sm_80 for its cluster).
// RUN: not tile-opt %s --split-input-file -p "tile-to-ptx{chip=sm_80}" --emit=ptx 2>/dev/null | FileCheck %s --check-prefix=SM80
// SM80-LABEL: .entry rows(
// SM80-NOT: prefetch
// SM80-LABEL: .entry long(
// SM80-NOT: prefetch
// SM80-LABEL: .entry strided(
// SM80-NOT: prefetch

// Rows of 4096 bf16 (8 KiB: 512 vectors of 16 bytes), a CTA of 256 threads: 2 a thread
// per row, thread t's at elements 8t and 8t + 2048; the rows (a dynamic count: the
// clamped slice of one row, empty past the end) in a loop. The address is 64-bit: the
// base pointer, then the element's byte offset (an index of 32 bits in this module).
// CHECK-LABEL: gpu.func @rows
// CHECK: %[[T:.*]] = gpu.thread_id x
// CHECK: %[[FIRST:.*]] = arith.muli %[[T]], %c8 : index
// CHECK: scf.for %[[R:.*]] = %c0 to %{{.*}} step %c1 {
// CHECK:   llvm.getelementptr
// CHECK:   nvvm.prefetch level = L2, %{{.*}} : !llvm.ptr<1>
// CHECK:   arith.addi %[[FIRST]], %c2048 : index
// CHECK:   nvvm.prefetch level = L2
// CHECK-NOT: nvvm.prefetch
// CHECK: gpu.return
// PTX-LABEL: .entry rows(
// PTX: prefetch.global.L2 [%rd{{[0-9]+}}];
gpu.module @m attributes {dlti.dl_spec = #dlti.dl_spec<index = 32 : i32>} {
  gpu.func @rows(%x: memref<8x4096xbf16> {llvm.noalias, llvm.readonly}, %row: index) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c8 = arith.constant 8 : index
    %c1 = arith.constant 1 : index
    %end = arith.addi %row, %c1 : index
    %hi = arith.minui %end, %c8 : index
    %lo = arith.minui %row, %hi : index
    %n = arith.subi %hi, %lo : index
    %v = memref.subview %x[%lo, 0] [%n, 4096] [1, 1] : memref<8x4096xbf16> to memref<?x4096xbf16, strided<[4096, 1], offset: ?>>
    "tile.prefetch"(%v) {scope = "cta"} : (memref<?x4096xbf16, strided<[4096, 1], offset: ?>>) -> ()
    gpu.return
  }
}

// -----

// 1000 floats (250 vectors) over 256 threads: one round, guarded (threads 250..255 have
// none). A cluster of 2 CTAs of 128 threads takes them as one scope of 256.
// CHECK-LABEL: gpu.func @tail
// CHECK: nvvm.read.ptx.sreg.cluster.ctarank
// CHECK: %[[AT:.*]] = arith.muli %{{.*}}, %c4 : index
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[AT]], %c1000 : index
// CHECK: scf.if %[[IN]] {
// CHECK:   nvvm.prefetch level = L2
// CHECK-NOT: nvvm.prefetch
// PTX-LABEL: .entry tail(
// PTX: .reqnctapercluster 2
// PTX-COUNT-1: prefetch.global.L2
// PTX-NOT: prefetch
gpu.module @m {
  gpu.func @tail(%x: memref<1000xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>, nvvm.cluster_dim = array<i32: 2, 1, 1>} {
    "tile.prefetch"(%x) {scope = "cluster"} : (memref<1000xf32>) -> ()
    gpu.return
  }
}

// -----

// A long static row (2^20 floats, 1024 rounds of a CTA's 256 threads) takes a loop, not
// straight-line code.
// CHECK-LABEL: gpu.func @long
// CHECK: scf.for %{{.*}} = %{{.*}} to %c1048576 step %c1024 {
// CHECK-COUNT-1: nvvm.prefetch
// CHECK-NOT: nvvm.prefetch
// CHECK: gpu.return
// PTX-LABEL: .entry long(
// PTX: prefetch.global.L2
gpu.module @m {
  gpu.func @long(%x: memref<1048576xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    "tile.prefetch"(%x) {scope = "cta"} : (memref<1048576xf32>) -> ()
    gpu.return
  }
}

// -----

// A strided row (every other float) of dynamic length: an element a prefetch, in a loop
// from the lane's index by 32.
// CHECK-LABEL: gpu.func @strided
// CHECK: %[[L:.*]] = arith.remui %{{.*}}, %c32 : index
// CHECK: scf.for %[[I:.*]] = %[[L]] to %{{.*}} step %c32 {
// CHECK:   arith.muli %[[I]], %c2 : index
// PTX-LABEL: .entry strided(
// PTX: prefetch.global.L2
// CHECK:   nvvm.prefetch level = L2
gpu.module @m {
  gpu.func @strided(%x: memref<128xf32>, %n: index) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %v = memref.subview %x[0] [%n] [2] : memref<128xf32> to memref<?xf32, strided<[2]>>
    "tile.prefetch"(%v) {scope = "warp"} : (memref<?xf32, strided<[2]>>) -> ()
    gpu.return
  }
}
