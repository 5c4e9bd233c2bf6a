// The tile dialect: tile-level data movement and compute on memrefs.
//
// This file is the dialect's single source of truth. The Python package loads
// it with `mlir.dialects.irdl.load_dialects`; upstream tools read it with
// `mlir-opt --irdl-file=dialect/tile.irdl.mlir`.
//
// IRDL checks structure only (operand kinds, required attributes). The
// semantic rules (shapes, dtypes, scopes, layouts, op names) live in the
// `tile-verify` pass, which reports them at the op's location.
//
// Ops are destination-passing: the first operand is written, the others are
// read. Every op runs at an execution scope, the `scope` attribute: "thread",
// "warp", "warpgroup" or "cta": all threads of that scope execute the op
// together, as `Tx.cta.sqrt(dst, src)` in the seeds. Memory scope is the
// memref's memory space: global (none), shared (#gpu.address_space<workgroup>)
// or registers (#gpu.address_space<private>).
//
// Scopes and thread counts. "thread" is each thread alone. "cta" is every thread
// of the block, however many: a block of 100 threads (or 10x10x1) has a last warp
// of 4 lanes, which gets its share of the elements, and the lanes it lacks take
// part in no shuffle. "warp" (32 threads) and "warpgroup" (4 consecutive warps, 128
// threads) need the kernel's known_block_size and a block of whole warps or whole
// warpgroups: tile-verify refuses the others (a block of 100 threads at warpgroup
// scope, or of 48 at warp scope) rather than shrink the scope to the threads there
// are. A warpgroup of 100 threads would be another op than the one written (its
// elements over fewer threads, its named barrier counting 128 threads, the
// hardware's warpgroup instructions needing all four warps), and scope "cta"
// already is the op over the threads there are. Register layouts span exactly
// their scope's threads (over laneid and warpid, a partial last warp's lanes:
// S[(4, 4, 8):(1@laneid, 1@warpid, 1)] in a block of 100).
//
// Optional attributes (IRDL has no optional attributes; tile-verify checks them):
//   variant = "<name>"    on every op: force this lowering variant
//   axes = array<i64: ..> on tile.reduce: reduced axes, negative counts from the end
//                         (default: all axes)
//   accum = true|false    on tile.reduce: combine with the old destination (default false)
//   scale = <float>       on tile.reduce: multiply the result by it before it is stored
//                         (a mean is a sum with scale = 1/L), in the accumulation type
//   vector_bytes = n : i64, stage = n : i64
//                         on tile.elementwise: lowering options of elementwise/gmem
//   expr = ["row(args) : dtype", ...]
//                         on tile.elementwise with op = "fused": the steps of a fused
//                         op (below)
//   padding = <number>    on tile.copy: dst's elements past src's extent get this value
//                         (a float or integer attribute: 0xFF800000 : f32 is -inf);
//                         dst static and at least as large as src in every dim
//
// A discardable attribute on an upstream op:
//   tile.piece = "<piece>:<split>"
//                         on memref.reinterpret_cast: the view is one piece of a split of
//                         its source into pieces that never overlap (tile_mlir.lang's
//                         aligned(V): "head:V", "body:V", "tail:V"); tile-barriers puts
//                         no barrier between touches of two pieces of one split of one
//                         source. A promise the IR makes, as a noalias argument is:
//                         nothing checks it.
irdl.dialect @tile {
  // A TileLayout in the notation of the seeds, e.g.
  //   #tile.layout<"S[(32, 8):(1@laneid, 1)]">
  // Each shard iterator is `extent:stride` in memory or `extent:stride@axis`
  // over a thread axis (laneid, warpid, wgid, tid). Optional parts:
  // replication `R[extent:stride@axis, ...]` and a memory offset `O[n]`.
  irdl.attribute @layout {
    %spec = irdl.base "#builtin.string"
    irdl.parameters(spec: %spec)
  }

  // dst <- src, element by element. Both of one rank; where their extents differ
  // (a dynamic or smaller memory view beside a static register or shared tile) the
  // overlap is copied, and with `padding` dst's other elements get the padding.
  //   "tile.copy"(%dst, %src) {scope = "cta"} : (memref<..>, memref<..>) -> ()
  irdl.operation @copy {
    %dst = irdl.base "!builtin.memref"
    %src = irdl.base "!builtin.memref"
    %scope = irdl.base "#builtin.string"
    irdl.operands(dst: %dst, src: %src)
    irdl.attributes {"scope" = %scope}
  }

  // dst <- op(a, b, c...) element by element; `op` names a row of the op
  // registry (add, mul, sqrt, exp, fma, where, ...), which fixes the arity.
  // Inputs are memrefs of dst's shape (with any strides, 0 for a broadcast
  // dimension, or size 1 where dst has more: read at index 0) or scalars,
  // promoted together with dst as torch promotes them; the result, computed in
  // that type, is stored into dst as torch's out= stores it (narrowed within a
  // kind: f32 into bf16; never a float into an integer or bool tile). With
  // register operands the tile is the
  // register tile's shape, and memory operands (dst too) may be dynamic or
  // smaller (the op applies on the overlap). a and b are
  // optional, c is variadic (the third input and any after it, as
  // nan_to_num's), so the generic form carries
  // operandSegmentSizes = array<i32: 1, #a, #b, #c>.
  //   "tile.elementwise"(%c, %a, %b) {op = "add", scope = "cta",
  //       operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (...) -> ()
  //
  // A fused op (tile-fuse makes them from chains through temporaries) has
  // op = "fused" and its steps in `expr`, an array of strings: each step a
  // registry row applied to the op's inputs %i (%0 is operand a) and earlier
  // steps' results $k, its result rounded to `dtype` as the unfused op would
  // round it into a buffer of that type; the last step's dtype is dst's.
  //   "tile.elementwise"(%out, %x, %y, %z) {op = "fused", scope = "cta",
  //       expr = ["add(%0, %1) : bf16", "gelu($0) : bf16", "mul($1, %2) : bf16"],
  //       operandSegmentSizes = array<i32: 1, 1, 1, 1>} : (...) -> ()
  // computes out = bf16(bf16(gelu(bf16(x + y))) * z), each step in the type
  // its unfused op computes in. The variadic slot c takes operands of one type
  // (an IRDL constraint binds one type), so a fused op's inputs are ordered
  // with at most two of other types first (tile_mlir/op_table/fusion.py).
  irdl.operation @elementwise {
    %dst = irdl.base "!builtin.memref"
    %a = irdl.any
    %b = irdl.any
    %c = irdl.any
    %op = irdl.base "#builtin.string"
    %scope = irdl.base "#builtin.string"
    irdl.operands(dst: %dst, a: optional %a, b: optional %b, c: variadic %c)
    irdl.attributes {"op" = %op, "scope" = %scope}
  }

  // dst <- reduce(src) over `axes` with `kind` (sum, max, min, prod). Its tiles have
  // static extents (tile-verify rejects a dynamic one: the lowering walks the shapes).
  //   "tile.reduce"(%dst, %src) {kind = "sum", axes = array<i64: -1>,
  //       accum = false, scope = "cta"} : (memref<4xf32, ..>, memref<4x8xf32, ..>) -> ()
  // A kind that reduces tuples of k values takes k (dst, src) pairs of register
  // tiles of one type, the i-th elements of the sources making the i-th tuple
  // (online_softmax's (m, s) pairs, welford's (n, mean, M2) triples); each
  // element of a dst takes the result of its position's reduced axes.
  //   "tile.reduce"(%M, %m, %S, %s) {kind = "online_softmax", axes = array<i64: 0>,
  //       scope = "cta"} : (memref<64x1xf32, ..>, memref<64x1xf32, ..>, ...) -> ()
  irdl.operation @reduce {
    %dst = irdl.base "!builtin.memref"
    %src = irdl.base "!builtin.memref"
    %kind = irdl.base "#builtin.string"
    %scope = irdl.base "#builtin.string"
    irdl.operands(dst: %dst, src: %src, more: variadic %src)
    irdl.attributes {"kind" = %kind, "scope" = %scope}
  }

  // A hint: src's elements will be read soon; bring the cache lines that hold
  // them into L2. Nothing is written and nothing waits: the program means the
  // same without it. src is in global memory, of any shape and strides; where it
  // is empty (a dynamic extent of 0, say a row past the end) nothing is fetched.
  // The scope's threads share the lines.
  //   "tile.prefetch"(%src) {scope = "cluster"} : (memref<1x?xbf16, strided<..>>) -> ()
  irdl.operation @prefetch {
    %src = irdl.base "!builtin.memref"
    %scope = irdl.base "#builtin.string"
    irdl.operands(src: %src)
    irdl.attributes {"scope" = %scope}
  }

  // A shared-memory or register buffer that carries a layout. Its memref
  // type is the logical tile; the layout says where each element lives.
  //   %s = "tile.alloc"() {layout = #tile.layout<"S[(32, 32)]">}
  //          : () -> memref<32x32xf32, #gpu.address_space<workgroup>>
  irdl.operation @alloc {
    %buffer = irdl.base "!builtin.memref"
    %layout = irdl.base @tile::@layout
    irdl.results(buffer: %buffer)
    irdl.attributes {"layout" = %layout}
  }
}
