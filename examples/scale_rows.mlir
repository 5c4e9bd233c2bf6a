// y = x * s for a 1000x1003 f16 matrix and an f32 scalar s: 125 CTAs of 128
// threads, each taking 8 rows. The rows are contiguous, so each CTA's tile is
// one run of 8024 halves: 1003 vectors of 8 (16 bytes), every CTA's start
// 16-byte aligned. The product is computed in f32 (s keeps its precision),
// then rounded to f16.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @scale_rows(%x: memref<1000x1003xf16> {llvm.noalias, llvm.readonly}, %s: f32,
                         %y: memref<1000x1003xf16> {llvm.noalias})
        kernel attributes {known_block_size = array<i32: 128, 1, 1>,
                           known_grid_size = array<i32: 125, 1, 1>} {
      %bid = gpu.block_id x
      %rows = arith.constant 8 : index
      %first = arith.muli %bid, %rows : index
      %tx = memref.subview %x[%first, 0] [8, 1003] [1, 1]
          : memref<1000x1003xf16> to memref<8x1003xf16, strided<[1003, 1], offset: ?>>
      %ty = memref.subview %y[%first, 0] [8, 1003] [1, 1]
          : memref<1000x1003xf16> to memref<8x1003xf16, strided<[1003, 1], offset: ?>>
      "tile.elementwise"(%ty, %tx, %s) {op = "mul", scope = "cta",
                                        operandSegmentSizes = array<i32: 1, 1, 1, 0>}
          : (memref<8x1003xf16, strided<[1003, 1], offset: ?>>,
             memref<8x1003xf16, strided<[1003, 1], offset: ?>>, f32) -> ()
      gpu.return
    }
  }
}
