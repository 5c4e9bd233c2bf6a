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
// Optional attributes (IRDL has no optional attributes; tile-verify checks them):
//   variant = "<name>"    on every op: force this lowering variant
//   axes = array<i64: ..> on tile.reduce: reduced axes, negative counts from the end
//                         (default: all axes)
//   accum = true|false    on tile.reduce: combine with the old destination (default false)
//   scale = <float>       on tile.reduce: multiply the result by it before it is stored
//                         (a mean is a sum with scale = 1/L), in the accumulation type
//   vector_bytes = n : i64, stage = n : i64
//                         on tile.elementwise: lowering options of elementwise/gmem
//   padding = <number>    on tile.copy: dst's elements past src's extent get this value
//                         (a float or integer attribute: 0xFF800000 : f32 is -inf);
//                         dst static and at least as large as src in every dim
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
  // promoted as torch promotes them. With register operands the tile is the
  // register tile's shape, and memory operands (dst too) may be dynamic or
  // smaller (the op applies on the overlap). a and b are
  // optional, c is variadic (the third input and any after it, as
  // nan_to_num's), so the generic form carries
  // operandSegmentSizes = array<i32: 1, #a, #b, #c>.
  //   "tile.elementwise"(%c, %a, %b) {op = "add", scope = "cta",
  //       operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (...) -> ()
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

  // dst <- reduce(src) over `axes` with `kind` (sum, max, min, prod).
  //   "tile.reduce"(%dst, %src) {kind = "sum", axes = array<i64: -1>,
  //       accum = false, scope = "cta"} : (memref<4xf32, ..>, memref<4x8xf32, ..>) -> ()
  irdl.operation @reduce {
    %dst = irdl.base "!builtin.memref"
    %src = irdl.base "!builtin.memref"
    %kind = irdl.base "#builtin.string"
    %scope = irdl.base "#builtin.string"
    irdl.operands(dst: %dst, src: %src)
    irdl.attributes {"kind" = %kind, "scope" = %scope}
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
