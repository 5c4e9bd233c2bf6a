// Seed 001 (TIRx reduction -> shared): a 32-thread CTA reduces each row of a 4x8
// f32 shared tile (axis -1) to a 4-vector. Groups of min(next_pow2(8), 32, 32) = 8
// lanes, one row each: each lane loads one element, three xor shuffles (masks 1,
// 2 and 4, width 8) fold the row, and lane 0 of each group writes.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @test_reduction(%A: memref<4x8xf32> {llvm.noalias, llvm.readonly},
                             %B: memref<4xf32> {llvm.noalias})
        kernel attributes {known_block_size = array<i32: 32, 1, 1>,
                           known_grid_size = array<i32: 1, 1, 1>} {
      %A_smem = "tile.alloc"() {layout = #tile.layout<"S[(4, 8)]">}
          : () -> memref<4x8xf32, #gpu.address_space<workgroup>>
      %B_smem = "tile.alloc"() {layout = #tile.layout<"S[4]">}
          : () -> memref<4xf32, #gpu.address_space<workgroup>>
      "tile.copy"(%A_smem, %A) {scope = "cta"}
          : (memref<4x8xf32, #gpu.address_space<workgroup>>, memref<4x8xf32>) -> ()
      "tile.reduce"(%B_smem, %A_smem) {kind = "sum", axes = array<i64: -1>, accum = false,
                                        scope = "cta"}
          : (memref<4xf32, #gpu.address_space<workgroup>>,
             memref<4x8xf32, #gpu.address_space<workgroup>>) -> ()
      "tile.copy"(%B, %B_smem) {scope = "cta"}
          : (memref<4xf32>, memref<4xf32, #gpu.address_space<workgroup>>) -> ()
      gpu.return
    }
  }
}
