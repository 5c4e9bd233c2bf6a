// Seed 000 (TIRx elementwise -> smem): a 256-thread CTA copies a 32x32 f32 tile
// into shared memory, takes its sqrt there, and copies it back. With all operands
// shared, the partition [outer, threads, vec] comes from the scope: 1024 floats
// over 256 threads is one round of one float4 per thread.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @unary_op(%A: memref<32x32xf32>)
        kernel attributes {known_block_size = array<i32: 256, 1, 1>,
                           known_grid_size = array<i32: 1, 1, 1>} {
      %A_smem = "tile.alloc"() {layout = #tile.layout<"S[(32, 32)]">}
          : () -> memref<32x32xf32, #gpu.address_space<workgroup>>
      "tile.copy"(%A_smem, %A) {scope = "cta"}
          : (memref<32x32xf32, #gpu.address_space<workgroup>>, memref<32x32xf32>) -> ()
      "tile.elementwise"(%A_smem, %A_smem) {op = "sqrt", scope = "cta",
                                            operandSegmentSizes = array<i32: 1, 1, 0, 0>}
          : (memref<32x32xf32, #gpu.address_space<workgroup>>,
             memref<32x32xf32, #gpu.address_space<workgroup>>) -> ()
      "tile.copy"(%A, %A_smem) {scope = "cta"}
          : (memref<32x32xf32>, memref<32x32xf32, #gpu.address_space<workgroup>>) -> ()
      gpu.return
    }
  }
}
