// Seed 003 (TIRx elementwise -> reg): a warp takes the sqrt of a 32x8 f32 register
// tile with layout S[(32, 8):(1@laneid, 1)]: lane i holds row i in 8 registers.
// A goes to shared memory, into registers, through sqrt (a loop over each lane's
// 8 registers), back to shared memory and out to B.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @reg_sqrt(%A: memref<32x8xf32> {llvm.noalias, llvm.readonly},
                       %B: memref<32x8xf32> {llvm.noalias})
        kernel attributes {known_block_size = array<i32: 32, 1, 1>,
                           known_grid_size = array<i32: 1, 1, 1>} {
      %A_smem = "tile.alloc"() {layout = #tile.layout<"S[(32, 8)]">}
          : () -> memref<32x8xf32, #gpu.address_space<workgroup>>
      "tile.copy"(%A_smem, %A) {scope = "warp"}
          : (memref<32x8xf32, #gpu.address_space<workgroup>>, memref<32x8xf32>) -> ()
      %R = "tile.alloc"() {layout = #tile.layout<"S[(32, 8):(1@laneid, 1)]">}
          : () -> memref<32x8xf32, #gpu.address_space<private>>
      "tile.copy"(%R, %A_smem) {scope = "warp"}
          : (memref<32x8xf32, #gpu.address_space<private>>,
             memref<32x8xf32, #gpu.address_space<workgroup>>) -> ()
      "tile.elementwise"(%R, %R) {op = "sqrt", scope = "warp",
                                  operandSegmentSizes = array<i32: 1, 1, 0, 0>}
          : (memref<32x8xf32, #gpu.address_space<private>>,
             memref<32x8xf32, #gpu.address_space<private>>) -> ()
      "tile.copy"(%A_smem, %R) {scope = "warp"}
          : (memref<32x8xf32, #gpu.address_space<workgroup>>,
             memref<32x8xf32, #gpu.address_space<private>>) -> ()
      "tile.copy"(%B, %A_smem) {scope = "warp"}
          : (memref<32x8xf32>, memref<32x8xf32, #gpu.address_space<workgroup>>) -> ()
      gpu.return
    }
  }
}
