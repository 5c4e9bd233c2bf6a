// tile-target: an fp8 conversion for a target without it is an error at the tile op
// (LLVM would abort the process: "Cannot select: intrinsic llvm.nvvm.ff.to.e4m3x2.rn").
// RUN: not tile-opt %s -p tile-to-ptx --emit=ptx --chip sm_80 2>&1 | FileCheck %s
// RUN: not tile-opt %s -p "tile-to-ptx{chip=sm_89 features=+ptx80}" --emit=ptx 2>&1 | FileCheck %s --check-prefix=SM89
// RUN: tile-opt %s -p "tile-to-ptx{chip=sm_89 features=+ptx81}" --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: tile-opt %s -p "tile-to-ptx{chip=sm_89}" --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: tile-opt %s -p tile-to-ptx --emit=ptx --chip sm_90 | FileCheck %s --check-prefix=PTX

// CHECK: tile-target.mlir:[[@LINE+6]]:5: error: fp8 conversions need sm_90, or sm_89 with features=+ptx81; the target is sm_80 (+ptx81)
// CHECK-NOT: LLVM ERROR
// SM89: error: fp8 conversions need sm_90, or sm_89 with features=+ptx81; the target is sm_89 (+ptx80)
// PTX: cvt.rn.satfinite.e4m3x2.f32
gpu.module @m {
  gpu.func @k(%a: memref<64xf8E4M3FN>, %b: memref<64xf8E4M3FN>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    "tile.elementwise"(%a, %b) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf8E4M3FN>, memref<64xf8E4M3FN>) -> ()
    gpu.return
  }
}
