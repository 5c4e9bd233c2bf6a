// Loops carrying register accumulators: an online softmax over 4 tiles of [256, 4] per
// row. The first loop keeps the running max m and sum s in registers (reductions with
// accum = true, s rescaled by exp(m_old - m)); the second writes exp(x - m) / s. Each
// reduction's barrier stands between the other's reads and next writes of its scratch,
// so no second barrier; each iteration's tile of the row is its own, so no barrier
// around the back edge either; the register tiles stay in registers.
// RUN: tile-opt %s --tile-lower --canonicalize --cse | FileCheck %s
// RUN: tile-opt %s -p tile-to-ptx --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: tile-opt %s -p tile-to-ptx --emit=ptx | grep -c "bar.sync" | FileCheck %s --check-prefix=BARS

// CHECK-LABEL: gpu.func @online_softmax
// CHECK: scf.for
// CHECK:   vector.load {{.*}} : memref<256x4xf32, strided<[4, 1], offset: ?>>, vector<4xf32>
// CHECK:   nvvm.shfl.sync  bfly
// CHECK:   gpu.barrier
// CHECK:   math.exp
// CHECK:   nvvm.shfl.sync  bfly
// CHECK:   gpu.barrier
// CHECK-NOT: gpu.barrier
// CHECK: scf.for
// CHECK:   math.exp
// CHECK:   arith.divf
// CHECK:   vector.store {{.*}} : memref<256x4xf32, strided<[4, 1], offset: ?>>, vector<4xf32>
// CHECK-NOT: gpu.barrier
// CHECK: gpu.return
// PTX-NOT: .local
// PTX: ld.global.nc.v4.b32
// PTX: shfl.sync.bfly.b32
// PTX: st.global.v4.b32
// BARS: 2
gpu.module @kernels {
  gpu.func @online_softmax(%x: memref<3x4096xf32> {llvm.noalias, llvm.readonly}, %y: memref<3x4096xf32> {llvm.noalias}) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %bid = gpu.block_id x
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %ctiles = arith.constant 4 : index
    %neg_inf = arith.constant 0xFF800000 : f32
    %zero = arith.constant 0.0 : f32
    %x_row = memref.subview %x[%bid, 0] [1, 4096] [1, 1] : memref<3x4096xf32> to memref<4096xf32, strided<[1], offset: ?>>
    %x_view = memref.expand_shape %x_row [[0, 1, 2]] output_shape [4, 256, 4] : memref<4096xf32, strided<[1], offset: ?>> into memref<4x256x4xf32, strided<[1024, 4, 1], offset: ?>>
    %y_row = memref.subview %y[%bid, 0] [1, 4096] [1, 1] : memref<3x4096xf32> to memref<4096xf32, strided<[1], offset: ?>>
    %y_view = memref.expand_shape %y_row [[0, 1, 2]] output_shape [4, 256, 4] : memref<4096xf32, strided<[1], offset: ?>> into memref<4x256x4xf32, strided<[1024, 4, 1], offset: ?>>
    %t1 = "tile.alloc"() {layout = #tile.layout<"S[(1, 1)], R[256:1@tid]">} : () -> memref<1x1xf32, #gpu.address_space<private>>
    %t2 = "tile.alloc"() {layout = #tile.layout<"S[(1, 1)], R[256:1@tid]">} : () -> memref<1x1xf32, #gpu.address_space<private>>
    %t3 = "tile.alloc"() {layout = #tile.layout<"S[(1, 1)], R[256:1@tid]">} : () -> memref<1x1xf32, #gpu.address_space<private>>
    %t4 = "tile.alloc"() {layout = #tile.layout<"S[(256, 4):(1@tid, 1)]">} : () -> memref<256x4xf32, #gpu.address_space<private>>
    "tile.elementwise"(%t1, %neg_inf) {op = "fill", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<1x1xf32, #gpu.address_space<private>>, f32) -> ()
    "tile.elementwise"(%t3, %zero) {op = "fill", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<1x1xf32, #gpu.address_space<private>>, f32) -> ()
    scf.for %i = %c0 to %ctiles step %c1 {
    %x_tile = memref.subview %x_view[%i, 0, 0] [1, 256, 4] [1, 1, 1] : memref<4x256x4xf32, strided<[1024, 4, 1], offset: ?>> to memref<256x4xf32, strided<[4, 1], offset: ?>>
    "tile.copy"(%t4, %x_tile) {scope = "cta", padding = 0xFF800000 : f32} : (memref<256x4xf32, #gpu.address_space<private>>, memref<256x4xf32, strided<[4, 1], offset: ?>>) -> ()
    "tile.copy"(%t2, %t1) {scope = "cta"} : (memref<1x1xf32, #gpu.address_space<private>>, memref<1x1xf32, #gpu.address_space<private>>) -> ()
    "tile.reduce"(%t1, %t4) {kind = "max", scope = "cta", accum = true} : (memref<1x1xf32, #gpu.address_space<private>>, memref<256x4xf32, #gpu.address_space<private>>) -> ()
    "tile.elementwise"(%t2, %t2, %t1) {op = "sub", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<1x1xf32, #gpu.address_space<private>>, memref<1x1xf32, #gpu.address_space<private>>, memref<1x1xf32, #gpu.address_space<private>>) -> ()
    "tile.elementwise"(%t2, %t2) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<1x1xf32, #gpu.address_space<private>>, memref<1x1xf32, #gpu.address_space<private>>) -> ()
    "tile.elementwise"(%t3, %t3, %t2) {op = "mul", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<1x1xf32, #gpu.address_space<private>>, memref<1x1xf32, #gpu.address_space<private>>, memref<1x1xf32, #gpu.address_space<private>>) -> ()
    "tile.elementwise"(%t4, %t4, %t1) {op = "sub", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<256x4xf32, #gpu.address_space<private>>, memref<256x4xf32, #gpu.address_space<private>>, memref<1x1xf32, #gpu.address_space<private>>) -> ()
    "tile.elementwise"(%t4, %t4) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256x4xf32, #gpu.address_space<private>>, memref<256x4xf32, #gpu.address_space<private>>) -> ()
    "tile.reduce"(%t3, %t4) {kind = "sum", scope = "cta", accum = true} : (memref<1x1xf32, #gpu.address_space<private>>, memref<256x4xf32, #gpu.address_space<private>>) -> ()
    }
    scf.for %i = %c0 to %ctiles step %c1 {
    %x_tile = memref.subview %x_view[%i, 0, 0] [1, 256, 4] [1, 1, 1] : memref<4x256x4xf32, strided<[1024, 4, 1], offset: ?>> to memref<256x4xf32, strided<[4, 1], offset: ?>>
    "tile.copy"(%t4, %x_tile) {scope = "cta", padding = 0xFF800000 : f32} : (memref<256x4xf32, #gpu.address_space<private>>, memref<256x4xf32, strided<[4, 1], offset: ?>>) -> ()
    "tile.elementwise"(%t4, %t4, %t1) {op = "sub", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<256x4xf32, #gpu.address_space<private>>, memref<256x4xf32, #gpu.address_space<private>>, memref<1x1xf32, #gpu.address_space<private>>) -> ()
    "tile.elementwise"(%t4, %t4) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256x4xf32, #gpu.address_space<private>>, memref<256x4xf32, #gpu.address_space<private>>) -> ()
    "tile.elementwise"(%t4, %t4, %t3) {op = "div", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<256x4xf32, #gpu.address_space<private>>, memref<256x4xf32, #gpu.address_space<private>>, memref<1x1xf32, #gpu.address_space<private>>) -> ()
    %y_tile = memref.subview %y_view[%i, 0, 0] [1, 256, 4] [1, 1, 1] : memref<4x256x4xf32, strided<[1024, 4, 1], offset: ?>> to memref<256x4xf32, strided<[4, 1], offset: ?>>
    "tile.copy"(%y_tile, %t4) {scope = "cta"} : (memref<256x4xf32, strided<[4, 1], offset: ?>>, memref<256x4xf32, #gpu.address_space<private>>) -> ()
    }
    gpu.return
  }
}
