// Upstream mlir-opt reads the same dialect definition and parses every example.
// REQUIRES: mlir-opt
// RUN: mlir-opt --irdl-file=%dialect %examples/vector_add.mlir | FileCheck %s
// RUN: mlir-opt --irdl-file=%dialect %s | FileCheck %s --check-prefix=SELF
// RUN: tile-opt %S/tile-fuse.mlir --split-input-file --tile-fuse | mlir-opt --irdl-file=%dialect --split-input-file | FileCheck %s --check-prefix=FUSED

// CHECK: "tile.elementwise"(%{{.*}}) {op = "add"
// SELF: #tile.layout<"S[(4, 8)]">
// Fused ops (op = "fused", expr = [...]) are generic attributes upstream reads too.
// FUSED: "tile.elementwise"({{.*}}) {expr = ["copy(%0) : bf16", "copy(%1) : bf16", "add($0, $1) : bf16", "gelu($2) : bf16", "mul($3, $0) : bf16"], op = "fused"
gpu.module @m {
  gpu.func @k() kernel {
    %s = "tile.alloc"() {layout = #tile.layout<"S[(4, 8)]">} : () -> memref<4x8xf32, #gpu.address_space<workgroup>>
    gpu.return
  }
}
