// A row softmax in one kernel, the row in registers (issue 11): a row of 1000 floats is
// a [256, 4] register tile (the view [250, 4], padding -inf past it), read once with
// 16-byte loads; max across the CTA (5 shuffles, one barrier, 8 partials), x - max and
// exp in registers, sum alike, divide, written once with 16-byte stores (the overlap).
// No global store between the reductions and the elementwise ops.
// RUN: tile-opt %s -p tile-to-ptx --emit=ptx | FileCheck %s
// RUN: tile-opt %s -p tile-to-ptx --emit=ptx | grep -c "bar.sync" | FileCheck %s --check-prefix=BARS
// RUN: tile-opt %s -p tile-to-ptx --emit=ptx | grep -c "st.global" | FileCheck %s --check-prefix=STORES

// CHECK-LABEL: .entry softmax(
// CHECK-NOT: .local
// CHECK: ld.global.nc.v4.b32
// CHECK-NOT: st.global
// CHECK-COUNT-5: shfl.sync.bfly.b32
// CHECK: st.shared.b32
// CHECK: bar.sync 0;
// CHECK-COUNT-8: ld.shared.b32
// CHECK: ex2.approx
// CHECK-NOT: st.global
// CHECK-COUNT-5: shfl.sync.bfly.b32
// CHECK: bar.sync 0;
// CHECK-COUNT-8: ld.shared.b32
// CHECK: div.rn.f32
// CHECK: st.global.v4.b32
// CHECK-NOT: .local
// BARS: 2
// STORES: 1
gpu.module @kernels {
  gpu.func @softmax(%x: memref<7x1000xf32> {llvm.noalias, llvm.readonly}, %y: memref<7x1000xf32> {llvm.noalias}) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %bid = gpu.block_id x
    %x_row = memref.subview %x[%bid, 0] [1, 1000] [1, 1] : memref<7x1000xf32> to memref<1000xf32, strided<[1], offset: ?>>
    %x_view = memref.expand_shape %x_row [[0, 1]] output_shape [250, 4] : memref<1000xf32, strided<[1], offset: ?>> into memref<250x4xf32, strided<[4, 1], offset: ?>>
    %y_row = memref.subview %y[%bid, 0] [1, 1000] [1, 1] : memref<7x1000xf32> to memref<1000xf32, strided<[1], offset: ?>>
    %y_view = memref.expand_shape %y_row [[0, 1]] output_shape [250, 4] : memref<1000xf32, strided<[1], offset: ?>> into memref<250x4xf32, strided<[4, 1], offset: ?>>
    %t1 = "tile.alloc"() {layout = #tile.layout<"S[(256, 4):(1@tid, 1)]">} : () -> memref<256x4xf32, #gpu.address_space<private>>
    "tile.copy"(%t1, %x_view) {scope = "cta", padding = 0xFF800000 : f32} : (memref<256x4xf32, #gpu.address_space<private>>, memref<250x4xf32, strided<[4, 1], offset: ?>>) -> ()
    %t2 = "tile.alloc"() {layout = #tile.layout<"S[(1, 1)], R[256:1@tid]">} : () -> memref<1x1xf32, #gpu.address_space<private>>
    %t3 = "tile.alloc"() {layout = #tile.layout<"S[(1, 1)], R[256:1@tid]">} : () -> memref<1x1xf32, #gpu.address_space<private>>
    "tile.reduce"(%t2, %t1) {kind = "max", scope = "cta"} : (memref<1x1xf32, #gpu.address_space<private>>, memref<256x4xf32, #gpu.address_space<private>>) -> ()
    "tile.elementwise"(%t1, %t1, %t2) {op = "sub", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<256x4xf32, #gpu.address_space<private>>, memref<256x4xf32, #gpu.address_space<private>>, memref<1x1xf32, #gpu.address_space<private>>) -> ()
    "tile.elementwise"(%t1, %t1) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256x4xf32, #gpu.address_space<private>>, memref<256x4xf32, #gpu.address_space<private>>) -> ()
    "tile.reduce"(%t3, %t1) {kind = "sum", scope = "cta"} : (memref<1x1xf32, #gpu.address_space<private>>, memref<256x4xf32, #gpu.address_space<private>>) -> ()
    "tile.elementwise"(%t1, %t1, %t3) {op = "div", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<256x4xf32, #gpu.address_space<private>>, memref<256x4xf32, #gpu.address_space<private>>, memref<1x1xf32, #gpu.address_space<private>>) -> ()
    "tile.copy"(%y_view, %t1) {scope = "cta"} : (memref<250x4xf32, strided<[4, 1], offset: ?>>, memref<256x4xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}
