"""IR helpers of the lowering: decoding ops, addressing operands, alignment, values, barriers."""
