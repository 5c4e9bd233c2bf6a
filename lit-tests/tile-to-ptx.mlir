// The whole path, tile IR to PTX: 128-bit non-coherent loads and 128-bit stores.
// RUN: tile-opt %examples/vector_add.mlir -p tile-to-ptx --emit=ptx | FileCheck %s
// RUN: tile-opt %examples/vector_add.mlir -p 'tile-to-ptx{chip=sm_80}' --emit=ptx | FileCheck %s --check-prefix=SM80
// RUN: tile-opt %examples/vector_add.mlir -p tile-to-ptx --emit=cubin -o %t.cubin && test -s %t.cubin

// CHECK: .target sm_90
// CHECK: .visible .entry vector_add(
// CHECK: .maxntid 256, 1, 1
// CHECK: ld.global.nc.v4.{{[bf]}}32
// CHECK: ld.global.nc.v4.{{[bf]}}32
// CHECK: add.{{(rn.)?}}f32
// CHECK: st.global.v4.{{[bf]}}32
// SM80: .target sm_80
