// Where operandSegmentSizes cannot be inferred from the text, the error says so at the
// op (elementwise-segments-columns.mlir: columns of other errors).
// RUN: tile-opt %s --split-input-file --verify-diagnostics --tile-verify

gpu.module @m {
  gpu.func @k(%a: memref<64xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    // expected-error@+1 {{cannot infer operandSegmentSizes of 'tile.elementwise': properties (<{...}>) are not supported by IRDL ops; write operandSegmentSizes = array<i32: 1, #a, #b, #c> in its attribute dictionary}}
    "tile.elementwise"(%a, %a) <{op = "sqrt", scope = "cta"}> : (memref<64xf32>, memref<64xf32>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @k(%a: memref<64xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    // expected-error@+1 {{cannot infer operandSegmentSizes of 'tile.elementwise': no attribute dictionary after the operands}}
    "tile.elementwise"(%a, %a) : (memref<64xf32>, memref<64xf32>) -> ()
    // expected-error@+1 {{cannot infer operandSegmentSizes of 'tile.elementwise': regions after the operands}}
    "tile.elementwise"(%a, %a) ({}) {op = "sqrt", scope = "cta"} : (memref<64xf32>, memref<64xf32>) -> ()
    // expected-error@+1 {{cannot infer operandSegmentSizes of 'tile.elementwise': it has no operands}}
    "tile.elementwise"() {op = "sqrt", scope = "cta"} : () -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @k(%a: memref<64xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    // The filled-in attribute does not hide tile-verify's errors.
    // expected-error@+1 {{'add' takes 2 input(s), got 1}}
    "tile.elementwise"(%a, %a) {op = "add", scope = "cta"} : (memref<64xf32>, memref<64xf32>) -> ()
    gpu.return
  }
}
