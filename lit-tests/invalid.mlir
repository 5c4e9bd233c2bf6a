// RUN: tile-opt %s --split-input-file --verify-diagnostics --tile-verify

gpu.module @m {
  gpu.func @k(%a: memref<64xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    // expected-error@+1 {{has scope 'grid', expected one of thread, warp, warpgroup, cta}}
    "tile.elementwise"(%a, %a) {op = "sqrt", scope = "grid", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @k(%a: memref<64xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    // expected-error@+1 {{has unknown op 'sqr' (did you mean 'sqrt'?)}}
    "tile.elementwise"(%a, %a) {op = "sqr", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @k(%a: memref<64xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    // expected-error@+1 {{'add' takes 2 input(s), got 1}}
    "tile.elementwise"(%a, %a) {op = "add", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @k(%a: memref<64xf32>, %b: memref<32xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    // expected-error@+1 {{input 1 has shape 32, but dst has shape 64}}
    "tile.elementwise"(%a, %a, %b) {op = "add", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<64xf32>, memref<64xf32>, memref<32xf32>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @k(%a: memref<64xf32>, %b: memref<64xf16>, %i: memref<64xi32>, %p: memref<64xi1>, %d: memref<64xf64>, %s: f32) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    // Inputs promote together with dst as torch promotes (f16 -> f32, i32 -> f32); the
    // result is stored as torch's out= stores it: narrowed within a kind (f32 into f16),
    // never into a lower kind (a float into an integer tile).
    "tile.elementwise"(%a, %b, %i) {op = "add", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<64xf32>, memref<64xf16>, memref<64xi32>) -> ()
    "tile.elementwise"(%b, %a) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf16>, memref<64xf32>) -> ()
    // expected-error@+1 {{input 1 has element type f32, whose float results cannot be stored into dst's i32}}
    "tile.elementwise"(%i, %i, %a) {op = "add", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<64xi32>, memref<64xi32>, memref<64xf32>) -> ()
    // expected-error@+1 {{scalar input 1 of type f32 does not match the i32 tile}}
    "tile.elementwise"(%i, %i, %s) {op = "mul", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<64xi32>, memref<64xi32>, f32) -> ()
    // expected-error@+1 {{'lt' produces bool, not f32}}
    "tile.elementwise"(%a, %a, %a) {op = "lt", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<64xf32>, memref<64xf32>, memref<64xf32>) -> ()
    // expected-error@+1 {{input 1 has element type f32, whose float results cannot be stored into dst's bool}}
    "tile.elementwise"(%p, %p, %a) {op = "bitwise_and", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<64xi1>, memref<64xi1>, memref<64xf32>) -> ()
    // expected-error@+1 {{'isnan' is not defined on f64}}
    "tile.elementwise"(%p, %d) {op = "isnan", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xi1>, memref<64xf64>) -> ()
    // expected-error@+1 {{input 1 of 'nan_to_num' must be a scalar}}
    "tile.elementwise"(%a, %a, %a, %s, %s) {op = "nan_to_num", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 2>} : (memref<64xf32>, memref<64xf32>, memref<64xf32>, f32, f32) -> ()
    // expected-error@+1 {{needs 'stage' as an integer in [1, 64], got 0 : i64}}
    "tile.elementwise"(%a, %a) {op = "exp", scope = "cta", stage = 0 : i64, operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    // expected-error@+1 {{must fill its input slots in order}}
    "tile.elementwise"(%a, %a, %s, %s) {op = "clamp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 2>} : (memref<64xf32>, memref<64xf32>, f32, f32) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @k(%a: memref<64xf32>) kernel {
    // expected-error@+1 {{at scope 'cta' needs the kernel's thread count}}
    "tile.elementwise"(%a, %a) {op = "sqrt", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @k(%a: memref<64xf32>) kernel attributes {known_block_size = array<i32: 48, 1, 1>} {
    // expected-error@+1 {{at scope 'warpgroup' needs whole warpgroups, but the block has 48 threads}}
    "tile.elementwise"(%a, %a) {op = "sqrt", scope = "warpgroup", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    gpu.return
  }
}

// -----

func.func @host(%a: memref<64xf32>) {
  // expected-error@+1 {{must be inside a gpu.func}}
  "tile.elementwise"(%a, %a) {op = "sqrt", scope = "thread", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
  return
}

// -----

gpu.module @m {
  gpu.func @k(%a: memref<64xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    // expected-error@+1 {{has unknown attribute 'scpoe' (did you mean 'scope'?)}}
    "tile.elementwise"(%a, %a) {op = "sqrt", scope = "cta", scpoe = "warp", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @k(%a: memref<64xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    // expected-error@+1 {{names unknown variant 'fast' (variants: lut, gmem}}
    "tile.elementwise"(%a, %a) {op = "sqrt", scope = "cta", variant = "fast", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @k(%a: memref<64xi32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    // expected-error@+1 {{'sqrt' cannot produce i32}}
    "tile.elementwise"(%a, %a) {op = "sqrt", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xi32>, memref<64xi32>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @k(%a: memref<64xf32>, %b: memref<8x8xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    // expected-error@+1 {{copies shape 8x8 into 64}}
    "tile.copy"(%a, %b) {scope = "cta"} : (memref<64xf32>, memref<8x8xf32>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @k(%a: memref<4xf32>, %b: memref<4x8xf32>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    // expected-error@+1 {{reduces 4x8 over axes [0] to 8, but dst has shape 4}}
    "tile.reduce"(%a, %b) {kind = "sum", axes = array<i64: 0>, scope = "cta"} : (memref<4xf32>, memref<4x8xf32>) -> ()
    // expected-error@+1 {{has unknown kind 'avg' (kinds: sum, prod, max, min, online_softmax, welford)}}
    "tile.reduce"(%a, %b) {kind = "avg", axes = array<i64: -1>, scope = "cta"} : (memref<4xf32>, memref<4x8xf32>) -> ()
    // expected-error@+1 {{has a non-float 'scale' attribute}}
    "tile.reduce"(%a, %b) {kind = "sum", axes = array<i64: -1>, scope = "cta", scale = 2} : (memref<4xf32>, memref<4x8xf32>) -> ()
    // expected-error@+1 {{has axes [2], not distinct axes of a rank-2 tile}}
    "tile.reduce"(%a, %b) {kind = "sum", axes = array<i64: 2>, scope = "cta"} : (memref<4xf32>, memref<4x8xf32>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @k() kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    // expected-error@+1 {{has layout of shape 4x4 for a 4x8 buffer}}
    %s = "tile.alloc"() {layout = #tile.layout<"S[(4, 4)]">} : () -> memref<4x8xf32, #gpu.address_space<workgroup>>
    // expected-error@+1 {{unknown thread axis 'lane'}}
    %r = "tile.alloc"() {layout = #tile.layout<"S[(32, 8):(1@lane, 1)]">} : () -> memref<32x8xf32, #gpu.address_space<private>>
    // expected-error@+1 {{makes shared (#gpu.address_space<workgroup>) or register (#gpu.address_space<private>) buffers, not global}}
    %g = "tile.alloc"() {layout = #tile.layout<"S[4]">} : () -> memref<4xf32>
    // expected-error@+1 {{puts a thread-distributed layout (S[(32, 8):(1@laneid, 1)]) on shared memory}}
    %t = "tile.alloc"() {layout = #tile.layout<"S[(32, 8):(1@laneid, 1)]">} : () -> memref<32x8xf32, #gpu.address_space<workgroup>>
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @k() kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %r = "tile.alloc"() {layout = #tile.layout<"S[(32, 8):(1@laneid, 1)]">} : () -> memref<32x8xf32, #gpu.address_space<private>>
    // expected-error@+1 {{operand 0 has layout S[(32, 8):(1@laneid, 1)] over 32 threads, but scope 'cta' has 64}}
    "tile.elementwise"(%r, %r) {op = "sqrt", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<32x8xf32, #gpu.address_space<private>>, memref<32x8xf32, #gpu.address_space<private>>) -> ()
    // expected-error@+1 {{operand 0 has layout S[(32, 8):(1@laneid, 1)] over laneid, which scope 'thread' does not have}}
    "tile.elementwise"(%r, %r) {op = "sqrt", scope = "thread", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<32x8xf32, #gpu.address_space<private>>, memref<32x8xf32, #gpu.address_space<private>>) -> ()
    %w = "tile.alloc"() {layout = #tile.layout<"S[(2, 32, 8):(1@warpid, 1@laneid, 1)]">} : () -> memref<2x32x8xf32, #gpu.address_space<private>>
    // expected-error@+1 {{over warpid, which scope 'warp' does not have}}
    "tile.elementwise"(%w, %w) {op = "sqrt", scope = "warp", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<2x32x8xf32, #gpu.address_space<private>>, memref<2x32x8xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @k(%out: memref<4xf32>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %p = memref.alloca() : memref<4xf32, #gpu.address_space<private>>
    // expected-error@+1 {{operand 1 is a register buffer without a layout, which only scope 'thread' can use}}
    "tile.copy"(%out, %p) {scope = "warp"} : (memref<4xf32>, memref<4xf32, #gpu.address_space<private>>) -> ()
    // expected-error@+1 {{is used by memref.load: only tile ops understand a register layout}}
    %r = "tile.alloc"() {layout = #tile.layout<"S[(32, 4):(1@laneid, 1)]">} : () -> memref<32x4xf32, #gpu.address_space<private>>
    %c0 = arith.constant 0 : index
    %x = memref.load %r[%c0, %c0] : memref<32x4xf32, #gpu.address_space<private>>
    // expected-error@+1 {{is used by memref.load, so its type must spell its layout: memref<4x4xf32, strided<[8, 1]>, #gpu.address_space<workgroup>>}}
    %s = "tile.alloc"() {layout = #tile.layout<"S[(4, 4):(8, 1)]">} : () -> memref<4x4xf32, #gpu.address_space<workgroup>>
    %y = memref.load %s[%c0, %c0] : memref<4x4xf32, #gpu.address_space<workgroup>>
    %t = "tile.alloc"() {layout = #tile.layout<"S[(4, 4):(8, 1)]">} : () -> memref<4x4xf32, strided<[8, 1]>, #gpu.address_space<workgroup>>
    %z = memref.load %t[%c0, %c0] : memref<4x4xf32, strided<[8, 1]>, #gpu.address_space<workgroup>>
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @k(%a: memref<64xf32>, %n: i64, %base: i32) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    // an index base of another type (as a fused step: the plain op's variadic slot, which
    // holds the length's magic and the base, binds one type)
    // expected-error@+1 {{step 0 'alibi_bias(%1, %2, %3, %0) : f32': input 3 of 'alibi_bias' is its index base: an i64 scalar, not i32}}
    "tile.elementwise"(%a, %base, %n, %n, %n) {op = "fused", expr = ["alibi_bias(%1, %2, %3, %0) : f32"], scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 2>} : (memref<64xf32>, i32, i64, i64, i64) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @shared(%x: memref<64xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %s = memref.alloca() : memref<64xf32, #gpu.address_space<workgroup>>
    // expected-error@+1 {{prefetches a tile in shared memory: only global memory goes through the L2 cache}}
    "tile.prefetch"(%s) {scope = "cta"} : (memref<64xf32, #gpu.address_space<workgroup>>) -> ()
    gpu.return
  }
}

// -----

// A memory space LLVM has no address space for (-1 and -2 abort its lowering)
gpu.module @m {
  // expected-error@+1 {{argument 1 has type memref<64xf32, -1>, whose memory space -1 is no address space (0 to 16777215)}}
  gpu.func @k(%a: memref<64xf32>, %b: memref<64xf32, -1 : i64>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    "tile.elementwise"(%a, %a) {op = "sqrt", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    gpu.return
  }
}
