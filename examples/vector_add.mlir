// c = a + b over 2^20 floats (seed 002's vector add), one tile op per CTA:
// 512 CTAs of 256 threads, each adding a 2048-element slice with float4
// loads (ld.global.nc.v4: a and b are noalias and read-only) and stores.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @vector_add(%a: memref<1048576xf32> {llvm.noalias, llvm.readonly},
                         %b: memref<1048576xf32> {llvm.noalias, llvm.readonly},
                         %c: memref<1048576xf32> {llvm.noalias})
        kernel attributes {known_block_size = array<i32: 256, 1, 1>,
                           known_grid_size = array<i32: 512, 1, 1>} {
      %bid = gpu.block_id x
      %tile = arith.constant 2048 : index
      %offset = arith.muli %bid, %tile : index
      %ta = memref.subview %a[%offset] [2048] [1]
          : memref<1048576xf32> to memref<2048xf32, strided<[1], offset: ?>>
      %tb = memref.subview %b[%offset] [2048] [1]
          : memref<1048576xf32> to memref<2048xf32, strided<[1], offset: ?>>
      %tc = memref.subview %c[%offset] [2048] [1]
          : memref<1048576xf32> to memref<2048xf32, strided<[1], offset: ?>>
      "tile.elementwise"(%tc, %ta, %tb) {op = "add", scope = "cta",
                                         operandSegmentSizes = array<i32: 1, 1, 1, 0>}
          : (memref<2048xf32, strided<[1], offset: ?>>, memref<2048xf32, strided<[1], offset: ?>>,
             memref<2048xf32, strided<[1], offset: ?>>) -> ()
      gpu.return
    }
  }
}
