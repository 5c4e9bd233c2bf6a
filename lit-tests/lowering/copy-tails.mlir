// Tails: a copy between a static tile and a memory view whose extent is dynamic or
// smaller copies the overlap; `padding` fills the tile past the view. Vectors stay
// 16 bytes in the body, one branch each; only a vector that straddles the view's end
// goes lane by lane. tail_fill sets a register tile's elements past a position again.
// RUN: tile-opt %s --split-input-file --verify-diagnostics --tile-lower --canonicalize --cse | FileCheck %s
// RUN: not tile-opt %s --split-input-file -p tile-to-ptx --emit=ptx 2>/dev/null | FileCheck %s --check-prefix=PTX

// A row of 1000 floats in a [256, 4] register tile (the view [250, 4]): threads past
// row 250 take the padding, a whole float4 each; the write back stores the overlap.
// CHECK-LABEL: gpu.func @row
// CHECK-DAG: %[[NEG:.*]] = arith.constant dense<0xFF800000> : vector<4xf32>
// CHECK: %[[T:.*]] = gpu.thread_id x
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[T]], %c250 : index
// CHECK: scf.if %[[IN]] {
// CHECK:   %[[V:.*]] = vector.load %{{.*}}[%[[T]], %c0] {alignment = 16 : i64} : memref<250x4xf32>, vector<4xf32>
// CHECK:   vector.store %[[V]], %{{.*}}[%c0] {alignment = 16 : i64}
// CHECK: } else {
// CHECK:   vector.store %[[NEG]], %{{.*}}[%c0] {alignment = 16 : i64}
// CHECK: scf.if %[[IN]] {
// CHECK:   vector.store %{{.*}}, %{{.*}}[%[[T]], %c0] {alignment = 16 : i64} : memref<250x4xf32>, vector<4xf32>
// CHECK-NOT: else
// PTX-LABEL: .entry row(
// PTX-NOT: .local
// PTX: ld.global.nc.v4.b32
// PTX: st.global.v4.b32
gpu.module @m {
  gpu.func @row(%x: memref<250x4xf32> {llvm.noalias, llvm.readonly}, %y: memref<250x4xf32> {llvm.noalias}) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %r = "tile.alloc"() {layout = #tile.layout<"S[(256, 4):(1@tid, 1)]">} : () -> memref<256x4xf32, #gpu.address_space<private>>
    "tile.copy"(%r, %x) {scope = "cta", padding = 0xFF800000 : f32} : (memref<256x4xf32, #gpu.address_space<private>>, memref<250x4xf32>) -> ()
    "tile.elementwise"(%r, %r) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256x4xf32, #gpu.address_space<private>>, memref<256x4xf32, #gpu.address_space<private>>) -> ()
    "tile.copy"(%y, %r) {scope = "cta"} : (memref<250x4xf32>, memref<256x4xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

// Rows of a dynamic length in a warp's [32, 32] tile (lane i: row i): a float4 where it
// fits; the one that straddles the end element by element, padding past it.
// CHECK-LABEL: gpu.func @columns
// CHECK-SAME: %[[N:arg1]]: index
// CHECK: scf.for %[[J:.*]] = %c0 to %c32 step %c4 {
// CHECK:   %[[END:.*]] = arith.addi %[[J]], %c4 : index
// CHECK:   %[[FITS:.*]] = arith.cmpi ule, %[[END]], %[[N]] : index
// CHECK:   scf.if %[[FITS]] {
// CHECK:     vector.load {{.*}} : memref<32x?xf32, strided<[64, 1]>>, vector<4xf32>
// CHECK:   } else {
// CHECK:     %[[IN:.*]] = arith.cmpi ult, %[[J]], %[[N]] : index
// CHECK:     scf.if %[[IN]] {
// CHECK:       memref.load {{.*}} : memref<32x?xf32, strided<[64, 1]>>
// CHECK:     } else {
// CHECK:       memref.store %cst, {{.*}} : memref<32xf32, #gpu.address_space<private>>
gpu.module @m {
  gpu.func @columns(%p: memref<32x64xf32>, %n: index) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %v = memref.subview %p[0, 0] [32, %n] [1, 1] : memref<32x64xf32> to memref<32x?xf32, strided<[64, 1]>>
    %r = "tile.alloc"() {layout = #tile.layout<"S[(32, 32):(1@laneid, 1)]">} : () -> memref<32x32xf32, #gpu.address_space<private>>
    "tile.copy"(%r, %v) {scope = "warp", padding = 0.0 : f32} : (memref<32x32xf32, #gpu.address_space<private>>, memref<32x?xf32, strided<[64, 1]>>) -> ()
    "tile.copy"(%v, %r) {scope = "warp"} : (memref<32x?xf32, strided<[64, 1]>>, memref<32x32xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

// A shared tile from the first n rows: rows and columns merge into one run whose end,
// n * 64, is a multiple of the float4: one branch per vector, padding in the else.
// CHECK-LABEL: gpu.func @shared
// CHECK: %[[FLAT:.*]] = memref.collapse_shape %{{.*}} {{\[\[}}0, 1]] : memref<?x64xf32, strided<[64, 1]>> into memref<?xf32, strided<[1]>>
// CHECK: %[[END:.*]] = memref.dim %[[FLAT]], %c0
// CHECK: scf.for
// CHECK:   %[[IN:.*]] = arith.cmpi ult, %{{.*}}, %[[END]] : index
// CHECK:   scf.if %[[IN]] {
// CHECK:     vector.load %[[FLAT]]
// CHECK:   } else {
// CHECK:     vector.store %cst, {{.*}} : memref<4096xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// PTX-LABEL: .entry shared(
// PTX: ld.global.v4.b32
// PTX: st.shared.v4.b32
gpu.module @m {
  gpu.func @shared(%p: memref<64x64xf32>, %n: index) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %v = memref.subview %p[0, 0] [%n, 64] [1, 1] : memref<64x64xf32> to memref<?x64xf32, strided<[64, 1]>>
    %s = "tile.alloc"() {layout = #tile.layout<"S[(64, 64)]">} : () -> memref<64x64xf32, #gpu.address_space<workgroup>>
    "tile.copy"(%s, %v) {scope = "cta", padding = 1.0 : f32} : (memref<64x64xf32, #gpu.address_space<workgroup>>, memref<?x64xf32, strided<[64, 1]>>) -> ()
    "tile.elementwise"(%s, %s) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64x64xf32, #gpu.address_space<workgroup>>, memref<64x64xf32, #gpu.address_space<workgroup>>) -> ()
    "tile.copy"(%v, %s) {scope = "cta"} : (memref<?x64xf32, strided<[64, 1]>>, memref<64x64xf32, #gpu.address_space<workgroup>>) -> ()
    gpu.return
  }
}

// -----

// tail_fill(x, value, limit, base): x where base + the element's row-major position in
// the tile is below limit, else value (thread t's register j is at t * 4 + j).
// CHECK-LABEL: gpu.func @tail_fill
// CHECK: %[[T:.*]] = gpu.thread_id x
// CHECK: scf.for %[[J:.*]] = %c0 to %c4 step %c1 {
// CHECK:   %[[ROW:.*]] = arith.muli %[[T]], %c4 : index
// CHECK:   %[[AT:.*]] = arith.addi %[[ROW]], %[[J]] : index
// CHECK:   %[[I:.*]] = arith.index_cast %[[AT]] : index to i64
// CHECK:   %[[POS:.*]] = arith.addi %{{.*}}, %[[I]] : i64
// CHECK:   %[[KEEP:.*]] = arith.cmpi slt, %[[POS]], %{{.*}} : i64
// CHECK:   arith.select %[[KEEP]], %{{.*}}, %{{.*}} : f32
gpu.module @m {
  gpu.func @tail_fill(%x: memref<256x4xf32>, %limit: i64, %base: i64) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %zero = arith.constant 0.0 : f32
    %r = "tile.alloc"() {layout = #tile.layout<"S[(256, 4):(1@tid, 1)]">} : () -> memref<256x4xf32, #gpu.address_space<private>>
    "tile.copy"(%r, %x) {scope = "cta"} : (memref<256x4xf32, #gpu.address_space<private>>, memref<256x4xf32>) -> ()
    "tile.elementwise"(%r, %r, %zero, %limit, %base) {op = "tail_fill", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 2>} : (memref<256x4xf32, #gpu.address_space<private>>, memref<256x4xf32, #gpu.address_space<private>>, f32, i64, i64) -> ()
    "tile.copy"(%x, %r) {scope = "cta"} : (memref<256x4xf32>, memref<256x4xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @errors(%a: memref<250x4xf32>, %b: memref<1000xf32>, %d: memref<?x4xf32>, %i: memref<250x4xi32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %r = "tile.alloc"() {layout = #tile.layout<"S[(256, 4):(1@tid, 1)]">} : () -> memref<256x4xf32, #gpu.address_space<private>>
    %q = "tile.alloc"() {layout = #tile.layout<"S[(128, 4):(1@tid, 1)], R[2:128@tid]">} : () -> memref<128x4xf32, #gpu.address_space<private>>
    %ri = "tile.alloc"() {layout = #tile.layout<"S[(256, 4):(1@tid, 1)]">} : () -> memref<256x4xi32, #gpu.address_space<private>>
    // expected-error@+1 {{copies shape 1000 into 256x4, a tile of another rank}}
    "tile.copy"(%r, %b) {scope = "cta"} : (memref<256x4xf32, #gpu.address_space<private>>, memref<1000xf32>) -> ()
    // expected-error@+1 {{pads dst (250x4), which is smaller than src (256x4) in dim 0: padding fills a dst at least as large as src}}
    "tile.copy"(%a, %r) {scope = "cta", padding = 0.0 : f32} : (memref<250x4xf32>, memref<256x4xf32, #gpu.address_space<private>>) -> ()
    // expected-error@+1 {{pads dst past src's extent, but dst's dim 0 is dynamic: padding fills a static dst}}
    "tile.copy"(%d, %r) {scope = "cta", padding = 0.0 : f32} : (memref<?x4xf32>, memref<256x4xf32, #gpu.address_space<private>>) -> ()
    // expected-error@+1 {{pads a i32 tile with the float}}
    "tile.copy"(%ri, %i) {scope = "cta", padding = 0.0 : f32} : (memref<256x4xi32, #gpu.address_space<private>>, memref<250x4xi32>) -> ()
    // expected-error@+1 {{needs 'padding' as a number}}
    "tile.copy"(%r, %a) {scope = "cta", padding = "zero"} : (memref<256x4xf32, #gpu.address_space<private>>, memref<250x4xf32>) -> ()
    // expected-error@+1 {{register tiles copy whole (only a memory side may end before the tile)}}
    "tile.copy"(%r, %q) {scope = "cta"} : (memref<256x4xf32, #gpu.address_space<private>>, memref<128x4xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}
