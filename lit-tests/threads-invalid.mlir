// Thread counts that do not divide evenly: what tile-verify and tile-dispatch refuse,
// each at its op with the reason (issue 16 part 5; dialect/tile.irdl.mlir, "Scopes and
// thread counts"). Scope "cta" takes any block; these are the rest.
// RUN: tile-opt %s --split-input-file --verify-diagnostics --tile-verify --tile-dispatch

// A warp-scope op in a block of 100 threads: the last warp has 4 lanes.
gpu.module @m {
  gpu.func @k(%a: memref<64xf32>) kernel attributes {known_block_size = array<i32: 100, 1, 1>} {
    // expected-error@+1 {{at scope 'warp' needs whole warps, but the block has 100 threads: its last warp would have 4 of 32 threads (scope 'cta' spreads the op over the block's threads)}}
    "tile.elementwise"(%a, %a) {op = "sqrt", scope = "warp", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    gpu.return
  }
}

// -----

// The same 100 threads as a 10x10x1 block.
gpu.module @m {
  gpu.func @k(%a: memref<64xf32>) kernel attributes {known_block_size = array<i32: 10, 10, 1>} {
    // expected-error@+1 {{at scope 'warp' needs whole warps, but the block has 100 threads}}
    "tile.copy"(%a, %a) {scope = "warp"} : (memref<64xf32>, memref<64xf32>) -> ()
    gpu.return
  }
}

// -----

// Fewer threads than a warp.
gpu.module @m {
  gpu.func @k(%a: memref<4x8xf32>, %b: memref<4xf32>) kernel attributes {known_block_size = array<i32: 7, 1, 1>} {
    // expected-error@+1 {{at scope 'warp' needs whole warps, but the block has 7 threads: its last warp would have 7 of 32 threads}}
    "tile.reduce"(%b, %a) {kind = "sum", axes = array<i64: -1>, scope = "warp"} : (memref<4xf32>, memref<4x8xf32>) -> ()
    gpu.return
  }
}

// -----

// Warp scope without the block size: a launch with a partial warp would go wrong, and
// nothing checks the launch.
gpu.module @m {
  gpu.func @k(%a: memref<64xf32>) kernel {
    // expected-error@+1 {{at scope 'warp' needs the kernel's thread count: give the enclosing gpu.func known_block_size = array<i32: x, y, z> (launched with a partial warp, the lanes it lacks would leave their part of the op undone)}}
    "tile.elementwise"(%a, %a) {op = "neg", scope = "warp", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    gpu.return
  }
}

// -----

// A warpgroup of fewer than 128 threads: refused, not shrunk to the threads there are.
gpu.module @m {
  gpu.func @k(%a: memref<64xf32>) kernel attributes {known_block_size = array<i32: 96, 1, 1>} {
    // expected-error@+1 {{at scope 'warpgroup' needs whole warpgroups, but the block has 96 threads: its last warpgroup would have 96 of 128 threads (scope 'cta' spreads the op over the block's threads)}}
    "tile.elementwise"(%a, %a) {op = "sqrt", scope = "warpgroup", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    gpu.return
  }
}

// -----

// Whole warps but not whole warpgroups: a last warpgroup of 122 threads.
gpu.module @m {
  gpu.func @k(%a: memref<64xf32>) kernel attributes {known_block_size = array<i32: 250, 1, 1>} {
    // expected-error@+1 {{at scope 'warpgroup' needs whole warpgroups, but the block has 250 threads: its last warpgroup would have 122 of 128 threads}}
    "tile.elementwise"(%a, %a) {op = "sqrt", scope = "warpgroup", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    gpu.return
  }
}

// -----

// A 7x3x2 block has 42 threads: no whole warpgroup.
gpu.module @m {
  gpu.func @k(%a: memref<64xf32>) kernel attributes {known_block_size = array<i32: 7, 3, 2>} {
    %s = "tile.alloc"() {layout = #tile.layout<"S[64]">} : () -> memref<64xf32, #gpu.address_space<workgroup>>
    // expected-error@+1 {{at scope 'warpgroup' needs whole warpgroups, but the block has 42 threads}}
    "tile.copy"(%s, %a) {scope = "warpgroup"} : (memref<64xf32, #gpu.address_space<workgroup>>, memref<64xf32>) -> ()
    gpu.return
  }
}

// -----

// Whole warps' lanes in a block of 100: the layout reaches threads 100..127.
gpu.module @m {
  gpu.func @k() kernel attributes {known_block_size = array<i32: 100, 1, 1>} {
    // expected-error@+1 {{layout spans 128 threads, the block has 100}}
    %r = "tile.alloc"() {layout = #tile.layout<"S[(4, 32, 8):(1@warpid, 1@laneid, 1)]">} : () -> memref<4x32x8xf32, #gpu.address_space<private>>
    gpu.return
  }
}

// -----

// A register reduction over 24 lanes of warps whose other 8 lanes hold other elements:
// the butterfly pairs lanes by xor over 32 and cannot leave those out (over 7 lanes of a
// 7-thread block it can: the lanes past them do not exist).
gpu.module @m {
  gpu.func @k(%out: memref<2xf32>) kernel attributes {known_block_size = array<i32: 48, 1, 1>} {
    %r = "tile.alloc"() {layout = #tile.layout<"S[(24, 2):(1@tid, 24@tid)]">} : () -> memref<24x2xf32, #gpu.address_space<private>>
    // expected-error@+1 {{local (priority 10): rejected: reduced axis 0 (24:1@tid) spans 24 lanes, not a power of two: the shuffles pair 32 lanes by xor, and only lanes the scope lacks (a partial last warp) may fill the rest}}
    "tile.reduce"(%out, %r) {kind = "sum", axes = array<i64: 0>, scope = "cta"} : (memref<2xf32>, memref<24x2xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

// Groups of 10 threads: the shuffles pair lanes by xor, 10 apart is no bit of the lane.
gpu.module @m {
  gpu.func @k(%out: memref<10xf32>) kernel attributes {known_block_size = array<i32: 100, 1, 1>} {
    %r = "tile.alloc"() {layout = #tile.layout<"S[(10, 10):(1@tid, 10@tid)]">} : () -> memref<10x10xf32, #gpu.address_space<private>>
    // expected-error@+1 {{local (priority 10): rejected: reduced axis 1 (10:10@tid) steps 10 threads, not a power of two}}
    "tile.reduce"(%out, %r) {kind = "max", axes = array<i64: 1>, scope = "cta"} : (memref<10xf32>, memref<10x10xf32, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

// More threads than a CTA can have: the kernel could not be launched.
gpu.module @m {
  gpu.func @k(%a: memref<64xf32>) kernel attributes {known_block_size = array<i32: 2000, 1, 1>} {
    // expected-error@+1 {{is in a kernel whose block (2000x1x1) is larger than a CTA can be (at most 1024x1024x64, 1024 threads): it could not be launched}}
    "tile.elementwise"(%a, %a) {op = "neg", scope = "thread", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @k(%a: memref<64xf32>) kernel attributes {known_block_size = array<i32: 1, 1, 65>} {
    // expected-error@+1 {{is in a kernel whose block (1x1x65) is larger than a CTA can be}}
    "tile.elementwise"(%a, %a) {op = "neg", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64xf32>, memref<64xf32>) -> ()
    gpu.return
  }
}
