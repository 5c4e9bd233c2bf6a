// Upstream mlir-opt reads the same dialect definition and parses every example.
// REQUIRES: mlir-opt
// RUN: mlir-opt --irdl-file=%dialect %examples/vector_add.mlir | FileCheck %s
// RUN: mlir-opt --irdl-file=%dialect %s | FileCheck %s --check-prefix=SELF

// CHECK: "tile.elementwise"(%{{.*}}) {op = "add"
// SELF: #tile.layout<"S[(4, 8)]">
gpu.module @m {
  gpu.func @k() kernel {
    %s = "tile.alloc"() {layout = #tile.layout<"S[(4, 8)]">} : () -> memref<4x8xf32, #gpu.address_space<workgroup>>
    gpu.return
  }
}
