// tile-verify on fused elementwise ops (op = "fused", expr = [...]): each step is checked
// as its unfused op would be, errors at the op.
// RUN: tile-opt %s --split-input-file --verify-diagnostics --tile-verify

gpu.module @m {
  gpu.func @k(%a: memref<64xf32>, %b: memref<64xbf16>, %i: memref<64xi32>, %s: f32) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    // A valid one: bf16 rounding between the steps, a scalar, a kept predicate.
    "tile.elementwise"(%a, %b, %a, %s) {op = "fused", expr = ["mul(%0, %2) : bf16", "gt($0, %1) : bool", "where($1, %1, $0) : f32"], scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 1>} : (memref<64xf32>, memref<64xbf16>, memref<64xf32>, f32) -> ()
    // expected-error@+1 {{needs 'expr', its steps as an array of strings}}
    "tile.elementwise"(%a, %a) {op = "fused", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    // expected-error@+1 {{needs 'expr', its steps as an array of strings}}
    "tile.elementwise"(%a, %a) {op = "fused", expr = "exp(%0) : f32", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    // expected-error@+1 {{has a malformed 'expr': step 1: 'neg $0 : f32' is not of the form row(arguments) : dtype}}
    "tile.elementwise"(%a, %a) {op = "fused", expr = ["exp(%0) : f32", "neg $0 : f32"], scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    // expected-error@+1 {{has a malformed 'expr': step 0: argument 'x' of 'exp(x) : f32' is neither an input %i nor a step's result $k}}
    "tile.elementwise"(%a, %a) {op = "fused", expr = ["exp(x) : f32"], scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    // expected-error@+1 {{step 0 'expo(%0) : f32': 'expo' is not a registry row}}
    "tile.elementwise"(%a, %a) {op = "fused", expr = ["expo(%0) : f32"], scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    // expected-error@+1 {{step 0 'add(%0) : f32': 'add' takes 2 argument(s), got 1}}
    "tile.elementwise"(%a, %a) {op = "fused", expr = ["add(%0) : f32"], scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    // expected-error@+2 {{step 0 'add(%0, $0) : f32': $0 is not an earlier step's result}}
    // expected-error@+1 {{step 1 'exp(%1) : f32': %1 is past the op's 1 input(s)}}
    "tile.elementwise"(%a, %a) {op = "fused", expr = ["add(%0, $0) : f32", "exp(%1) : f32"], scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    // expected-error@+2 {{step 0 'exp(%0) : f32': its result is never used}}
    // expected-error@+1 {{input %1 is not used by any step}}
    "tile.elementwise"(%a, %a, %a) {op = "fused", expr = ["exp(%0) : f32", "neg(%0) : f32"], scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<64xf32>, memref<64xf32>, memref<64xf32>) -> ()
    // expected-error@+1 {{step 0 'exp(%0) : f24': 'f24' is not an element type}}
    "tile.elementwise"(%a, %a) {op = "fused", expr = ["exp(%0) : f24"], scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    // expected-error@+1 {{computes bf16 in its last step, but dst is f32}}
    "tile.elementwise"(%a, %a) {op = "fused", expr = ["exp(%0) : bf16"], scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    // expected-error@+1 {{has 'expr', which only op = "fused" takes}}
    "tile.elementwise"(%a, %a) {op = "exp", expr = ["exp(%0) : f32"], scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    gpu.return
  }
}

// -----

// Each step passes its unfused op's checks: the row's types, promotion into the step's
// dtype, scalar-only arguments (a step's result is a tile), index bases.
gpu.module @m {
  gpu.func @k(%a: memref<64xf32>, %b: memref<64xbf16>, %i: memref<64xi32>, %s: f32, %n: i64, %c: memref<32xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    // expected-error@+1 {{step 1 'gelu($0) : i32': 'gelu' cannot produce i32}}
    "tile.elementwise"(%a, %i) {op = "fused", expr = ["neg(%0) : i32", "gelu($0) : i32", "cast($1) : f32"], scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xi32>) -> ()
    // expected-error@+1 {{step 1 'add($0, %1) : i32': input 0 has element type f32, whose float results cannot be stored into dst's i32}}
    "tile.elementwise"(%a, %a, %i) {op = "fused", expr = ["exp(%0) : f32", "add($0, %1) : i32", "cast($1) : f32"], scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<64xf32>, memref<64xf32>, memref<64xi32>) -> ()
    // expected-error@+1 {{step 1 'leaky_relu(%0, $0) : f32': input 1 of 'leaky_relu' must be a scalar}}
    "tile.elementwise"(%a, %a) {op = "fused", expr = ["exp(%0) : f32", "leaky_relu(%0, $0) : f32"], scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    // expected-error@+1 {{step 0 'lt(%0, %1) : f32': 'lt' produces bool, not f32}}
    "tile.elementwise"(%a, %a, %s) {op = "fused", expr = ["lt(%0, %1) : f32"], scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<64xf32>, memref<64xf32>, f32) -> ()
    // expected-error@+1 {{step 1 'alibi_bias(%1, %1, %1, $0) : f32': input 3 of 'alibi_bias' is its index base: an i64 scalar, not a tile}}
    "tile.elementwise"(%a, %a, %n) {op = "fused", expr = ["exp(%0) : f32", "alibi_bias(%1, %1, %1, $0) : f32"], scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<64xf32>, memref<64xf32>, i64) -> ()
    // expected-error@+1 {{input 1 has shape 32, but dst has shape 64}}
    "tile.elementwise"(%a, %a, %c) {op = "fused", expr = ["add(%0, %1) : f32"], scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<64xf32>, memref<64xf32>, memref<32xf32>) -> ()
    gpu.return
  }
}
