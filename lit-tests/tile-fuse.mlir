// tile-fuse: chains of elementwise ops through temporaries become one fused op;
// --tile-explain says what fused and why each other candidate did not.
// RUN: tile-opt %s --split-input-file --tile-fuse | FileCheck %s
// RUN: tile-opt %s --split-input-file --tile-fuse --tile-explain --verify-diagnostics
// The fused ops verify again, and lower: one load per input, one store.
// RUN: tile-opt %s --split-input-file --tile-fuse --tile-verify --tile-lower --canonicalize --cse | FileCheck %s --check-prefix=LOWER
// RUN: tile-opt %s --split-input-file -p tile-to-ptx --emit=ptx | FileCheck %s --check-prefix=PTX

// Three ops in registers: add, gelu, mul through bf16 temporaries become one op; each
// intermediate keeps its bf16 rounding. The copies into registers fuse too
// (elementwise/reg_mem reads global operands beside a register tile): the fused op reads
// the inputs from global memory, 16 bytes a lane, and only the copy out stays.
// CHECK-LABEL: gpu.func @registers
// CHECK: %[[R:.*]] = "tile.alloc"()
// CHECK-NOT: "tile.alloc"
// CHECK: "tile.elementwise"(%[[R]], %arg0, %arg1) {expr = ["copy(%0) : bf16", "copy(%1) : bf16", "add($0, $1) : bf16", "gelu($2) : bf16", "mul($3, $0) : bf16"], op = "fused", operandSegmentSizes = array<i32: 1, 1, 1, 0>, scope = "warp"}
// CHECK-NOT: "tile.elementwise"
// CHECK: "tile.copy"(%{{.*}}, %[[R]])
// LOWER-LABEL: gpu.func @registers
// LOWER: vector.load %arg0{{.*}} : memref<32x8xbf16>, vector<8xbf16>
// LOWER: vector.load %arg1{{.*}} : memref<32x8xbf16>, vector<8xbf16>
// LOWER-NOT: vector.load
// LOWER: arith.addf {{.*}} : vector<8xbf16>
// LOWER: math.erf
// LOWER: arith.truncf {{.*}} : vector<8xf32> to vector<8xbf16>
// LOWER: arith.mulf {{.*}} : vector<8xbf16>
// LOWER: vector.store {{.*}} : memref<8xbf16, #gpu.address_space<private>>, vector<8xbf16>
// LOWER: gpu.return
// PTX-LABEL: .entry registers(
// PTX-NOT: .local
// PTX: ret;
gpu.module @m {
  gpu.func @registers(%g: memref<32x8xbf16>, %h: memref<32x8xbf16>, %o: memref<32x8xbf16>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %x = "tile.alloc"() {layout = #tile.layout<"S[(32, 8):(1@laneid, 1)]">} : () -> memref<32x8xbf16, #gpu.address_space<private>>
    %y = "tile.alloc"() {layout = #tile.layout<"S[(32, 8):(1@laneid, 1)]">} : () -> memref<32x8xbf16, #gpu.address_space<private>>
    "tile.copy"(%x, %g) {scope = "warp"} : (memref<32x8xbf16, #gpu.address_space<private>>, memref<32x8xbf16>) -> ()
    "tile.copy"(%y, %h) {scope = "warp"} : (memref<32x8xbf16, #gpu.address_space<private>>, memref<32x8xbf16>) -> ()
    %t1 = "tile.alloc"() {layout = #tile.layout<"S[(32, 8):(1@laneid, 1)]">} : () -> memref<32x8xbf16, #gpu.address_space<private>>
    // expected-remark@+1 {{tile.elementwise add: fused the tile.copy at 37:5 into it: expr ["copy(%0) : bf16", "add(%1, $0) : bf16"]}}
    "tile.elementwise"(%t1, %x, %y) {op = "add", scope = "warp", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<32x8xbf16, #gpu.address_space<private>>, memref<32x8xbf16, #gpu.address_space<private>>, memref<32x8xbf16, #gpu.address_space<private>>) -> ()
    %t2 = "tile.alloc"() {layout = #tile.layout<"S[(32, 8):(1@laneid, 1)]">} : () -> memref<32x8xbf16, #gpu.address_space<private>>
    // expected-remark@+1 {{tile.elementwise gelu: fused the tile.elementwise fused(copy, add) at 40:5 into it}}
    "tile.elementwise"(%t2, %t1) {op = "gelu", scope = "warp", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<32x8xbf16, #gpu.address_space<private>>, memref<32x8xbf16, #gpu.address_space<private>>) -> ()
    %r = "tile.alloc"() {layout = #tile.layout<"S[(32, 8):(1@laneid, 1)]">} : () -> memref<32x8xbf16, #gpu.address_space<private>>
    // expected-remark@+2 {{tile.elementwise mul: fused the tile.elementwise fused(copy, add, gelu) at 43:5 into it}}
    // expected-remark@+1 {{tile.elementwise fused(copy, add, gelu, mul): fused the tile.copy at 36:5 into it: expr ["copy(%0) : bf16", "copy(%1) : bf16", "add($0, $1) : bf16", "gelu($2) : bf16", "mul($3, $0) : bf16"]}}
    "tile.elementwise"(%r, %t2, %x) {op = "mul", scope = "warp", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<32x8xbf16, #gpu.address_space<private>>, memref<32x8xbf16, #gpu.address_space<private>>, memref<32x8xbf16, #gpu.address_space<private>>) -> ()
    // expected-remark@+1 {{tile.copy: not fused with the tile.elementwise fused(copy, copy, add, gelu, mul) at 47:5 that writes its input 0: the consumer's dst may overlap what the producer reads}}
    "tile.copy"(%o, %r) {scope = "warp"} : (memref<32x8xbf16>, memref<32x8xbf16, #gpu.address_space<private>>) -> ()
    gpu.return
  }
}

// -----

// Through a shared buffer: global -> shared (mem variant) -> global becomes one op on
// global memory (gmem), with the scalar and the per-row bias (stride 0 innermost: one
// element per vector, repeated) as they were; the
// shared buffer goes, and with it the barrier between the two ops.
// CHECK-LABEL: gpu.func @shared
// CHECK-NOT: "tile.alloc"
// CHECK: "tile.elementwise"(%arg3, %arg0, %arg1, %arg2) {expr = ["mul(%0, %1) : f32", "add($0, %2) : f32", "silu($1) : f32"], op = "fused", operandSegmentSizes = array<i32: 1, 1, 1, 1>, scope = "cta"}
// CHECK-NEXT: gpu.return
// LOWER-LABEL: gpu.func @shared
// LOWER-NOT: gpu.barrier
// LOWER: vector.load %arg0{{.*}} vector<4xf32>
// LOWER-NEXT: memref.load %arg2
// LOWER-NOT: load
// LOWER: arith.mulf
// LOWER-NEXT: vector.broadcast
// LOWER-NEXT: arith.addf
// LOWER: math.exp
// LOWER: vector.store {{.*}} %arg3{{.*}} vector<4xf32>
// LOWER-NOT: gpu.barrier
// LOWER: gpu.return
// PTX-LABEL: .entry shared(
// PTX-NOT: bar.sync
// PTX-NOT: .shared
// PTX: ret;
gpu.module @m {
  gpu.func @shared(%x: memref<64x128xf32>, %s: f32, %bias: memref<64x128xf32, strided<[1, 0]>>, %out: memref<64x128xf32> {llvm.noalias}) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %t = "tile.alloc"() {layout = #tile.layout<"S[(64, 128)]">} : () -> memref<64x128xf32, #gpu.address_space<workgroup>>
    "tile.elementwise"(%t, %x, %s) {op = "mul", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<64x128xf32, #gpu.address_space<workgroup>>, memref<64x128xf32>, f32) -> ()
    %u = "tile.alloc"() {layout = #tile.layout<"S[(64, 128)]">} : () -> memref<64x128xf32, #gpu.address_space<workgroup>>
    // expected-remark@+1 {{tile.elementwise add: fused the tile.elementwise mul at 83:5 into it: expr ["mul(%0, %1) : f32", "add($0, %2) : f32"]}}
    "tile.elementwise"(%u, %t, %bias) {op = "add", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<64x128xf32, #gpu.address_space<workgroup>>, memref<64x128xf32, #gpu.address_space<workgroup>>, memref<64x128xf32, strided<[1, 0]>>) -> ()
    // expected-remark@+1 {{tile.elementwise silu: fused the tile.elementwise fused(mul, add) at 86:5 into it}}
    "tile.elementwise"(%out, %u) {op = "silu", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<64x128xf32>, memref<64x128xf32, #gpu.address_space<workgroup>>) -> ()
    gpu.return
  }
}

// -----

// A copy into a temporary is a pure data move: the consumer reads the source instead.
// CHECK-LABEL: gpu.func @copy_in
// CHECK-NEXT: "tile.elementwise"(%arg1, %arg0) {expr = ["copy(%0) : f16", "exp($0) : f16"], op = "fused"
gpu.module @m {
  gpu.func @copy_in(%x: memref<256xf16>, %out: memref<256xf16> {llvm.noalias}) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %t = memref.alloca() : memref<256xf16>
    "tile.copy"(%t, %x) {scope = "cta"} : (memref<256xf16>, memref<256xf16>) -> ()
    // expected-remark@+1 {{tile.elementwise exp: fused the tile.copy at 101:5 into it}}
    "tile.elementwise"(%out, %t) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf16>, memref<256xf16>) -> ()
    gpu.return
  }
}

// -----

// Refused: the intermediate is a kernel argument (observable), or a view of one; read
// elsewhere; written by an op between; at another scope; forced to other variants; the
// producer reads its own dst.
// CHECK-LABEL: gpu.func @argument
// CHECK-NOT: op = "fused"
// CHECK-LABEL: gpu.func @overlap
// CHECK-COUNT-2: "tile.elementwise"(%{{.*}}) {op =
// CHECK: "tile.elementwise"(%arg0, %arg0) {expr = ["exp(%0) : f32", "neg($0) : f32"], op = "fused"
// CHECK-LABEL: gpu.func @scopes
// CHECK-NOT: op = "fused"
// CHECK-LABEL: gpu.func @own_dst
// CHECK-NOT: op = "fused"
// CHECK: gpu.return
gpu.module @m {
  gpu.func @argument(%a: memref<256xf32>, %b: memref<256xf32>, %o: memref<256xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    "tile.elementwise"(%b, %a) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf32>, memref<256xf32>) -> ()
    // expected-remark@+1 {{tile.elementwise neg: not fused with the tile.elementwise exp at 125:5 that writes its input 0: the intermediate is a kernel argument, observable after the kernel}}
    "tile.elementwise"(%o, %b) {op = "neg", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf32>, memref<256xf32>) -> ()
    gpu.return
  }
  gpu.func @view(%a: memref<256xf32>, %c: memref<512xf32>, %o: memref<256xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %v = memref.subview %c[0] [256] [1] : memref<512xf32> to memref<256xf32, strided<[1]>>
    "tile.elementwise"(%v, %a) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf32, strided<[1]>>, memref<256xf32>) -> ()
    // expected-remark@+1 {{the intermediate is a view of a kernel argument, observable through it}}
    "tile.elementwise"(%o, %v) {op = "neg", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf32>, memref<256xf32, strided<[1]>>) -> ()
    gpu.return
  }
  gpu.func @read_twice(%a: memref<256xf32>, %o: memref<256xf32>, %p: memref<256xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %t = memref.alloca() : memref<256xf32>
    "tile.elementwise"(%t, %a) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf32>, memref<256xf32>) -> ()
    "tile.elementwise"(%o, %t) {op = "neg", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf32>, memref<256xf32>) -> ()
    // expected-remark@+1 {{tile.elementwise sqrt: not fused with the tile.elementwise exp at 139:5 that writes its input 0: the intermediate is read elsewhere (by tile.elementwise neg at 140:5)}}
    "tile.elementwise"(%p, %t) {op = "sqrt", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf32>, memref<256xf32>) -> ()
    gpu.return
  }
  gpu.func @between(%a: memref<256xf32>, %b: memref<256xf32>, %o: memref<256xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %t = memref.alloca() : memref<256xf32>
    "tile.elementwise"(%t, %a) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf32>, memref<256xf32>) -> ()
    "tile.elementwise"(%a, %b) {op = "abs", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf32>, memref<256xf32>) -> ()
    // expected-remark@+1 {{not fused with the tile.elementwise exp at 147:5 that writes its input 0: the tile.elementwise abs at 148:5 between them writes memory the producer reads}}
    "tile.elementwise"(%o, %t) {op = "neg", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf32>, memref<256xf32>) -> ()
    gpu.return
  }
  gpu.func @overlap(%a: memref<256xf32>, %o: memref<256xf32>, %c: memref<512xf32> {llvm.noalias}) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %t = memref.alloca() : memref<256xf32>
    "tile.elementwise"(%t, %a) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf32>, memref<256xf32>) -> ()
    // expected-remark@+1 {{not fused with the tile.elementwise exp at 155:5 that writes its input 0: the consumer's dst may overlap what the producer reads (the same buffer through another view, or kernel arguments not marked llvm.noalias)}}
    "tile.elementwise"(%o, %t) {op = "neg", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf32>, memref<256xf32>) -> ()
    %low = memref.subview %c[0] [256] [1] : memref<512xf32> to memref<256xf32, strided<[1]>>
    %high = memref.subview %c[256] [256] [1] : memref<512xf32> to memref<256xf32, strided<[1], offset: 256>>
    %u = memref.alloca() : memref<256xf32>
    "tile.elementwise"(%u, %low) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf32>, memref<256xf32, strided<[1]>>) -> ()
    // expected-remark@+1 {{not fused with the tile.elementwise exp at 161:5 that writes its input 0: the consumer's dst may overlap what the producer reads}}
    "tile.elementwise"(%high, %u) {op = "neg", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf32, strided<[1], offset: 256>>, memref<256xf32>) -> ()
    // in place: each element is read where it is written, as unfused
    %w = memref.alloca() : memref<256xf32>
    "tile.elementwise"(%w, %a) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf32>, memref<256xf32>) -> ()
    // expected-remark@+1 {{tile.elementwise neg: fused the tile.elementwise exp at 166:5 into it: expr ["exp(%0) : f32", "neg($0) : f32"]}}
    "tile.elementwise"(%a, %w) {op = "neg", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf32>, memref<256xf32>) -> ()
    gpu.return
  }
  gpu.func @scopes(%a: memref<256xf32>, %o: memref<256xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %t = memref.alloca() : memref<256xf32>
    "tile.elementwise"(%t, %a) {op = "exp", scope = "warp", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf32>, memref<256xf32>) -> ()
    // expected-remark@+1 {{their scopes differ (warp and cta)}}
    "tile.elementwise"(%o, %t) {op = "neg", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf32>, memref<256xf32>) -> ()
    gpu.return
  }
  gpu.func @variants(%a: memref<256xf32>, %o: memref<256xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %t = memref.alloca() : memref<256xf32>
    "tile.elementwise"(%t, %a) {op = "exp", scope = "cta", variant = "gmem", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf32>, memref<256xf32>) -> ()
    // expected-remark@+1 {{they force a different lowering variant ("gmem" and "mem")}}
    "tile.elementwise"(%o, %t) {op = "neg", scope = "cta", variant = "mem", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf32>, memref<256xf32>) -> ()
    gpu.return
  }
  gpu.func @own_dst(%a: memref<256xf32>, %o: memref<256xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %t = memref.alloca() : memref<256xf32>
    "tile.elementwise"(%t, %a) {op = "exp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf32>, memref<256xf32>) -> ()
    // expected-remark@+1 {{not fused with the tile.elementwise exp at 187:5 that writes its input 0: the consumer writes the intermediate too}}
    "tile.elementwise"(%t, %t) {op = "neg", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf32>, memref<256xf32>) -> ()
    // expected-remark@+1 {{not fused with the tile.elementwise neg at 189:5 that writes its input 0: the producer reads its own dst (the intermediate's old value)}}
    "tile.elementwise"(%o, %t) {op = "sqrt", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 0, 0>} : (memref<256xf32>, memref<256xf32>) -> ()
    gpu.return
  }
}

// -----

// Refused: the fused op's inputs would not fit tile.elementwise's operand slots (four
// inputs of four types: the third slot on takes one type).
// CHECK-LABEL: gpu.func @slots
// CHECK-NOT: op = "fused"
// CHECK: gpu.return
gpu.module @m {
  gpu.func @slots(%a: memref<64xf16>, %b: memref<64xbf16>, %c: memref<64xi32>, %s: f32, %o: memref<64xf32> {llvm.noalias}) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
    %t = memref.alloca() : memref<64xf32>
    "tile.elementwise"(%t, %a, %b) {op = "add", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (memref<64xf32>, memref<64xf16>, memref<64xbf16>) -> ()
    // expected-remark@+1 {{the fused op cannot be written: its 4 inputs have types f32, memref<64xbf16>, memref<64xf16>, memref<64xi32>: tile.elementwise's operands after the second must share one type}}
    "tile.elementwise"(%o, %t, %c, %s) {op = "lerp", scope = "cta", operandSegmentSizes = array<i32: 1, 1, 1, 1>} : (memref<64xf32>, memref<64xf32>, memref<64xi32>, f32) -> ()
    gpu.return
  }
}
