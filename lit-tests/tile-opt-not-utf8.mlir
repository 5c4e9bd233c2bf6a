// Input that is not UTF-8 text is an input error located at its first bad byte,
// from a file and from stdin (exit status 1, no traceback); UTF-16 gets a hint.
// RUN: printf 'module {\n}\n// caf\351\n' > %t.latin1.mlir
// RUN: not tile-opt %t.latin1.mlir --tile-verify 2>&1 | FileCheck %s --check-prefix=FILE
// RUN: not tile-opt - -p tile-to-ptx --emit=ptx < %t.latin1.mlir 2>&1 | FileCheck %s --check-prefix=STDIN
// RUN: printf '\377\376m\000o\000' > %t.utf16.mlir
// RUN: not tile-opt %t.utf16.mlir 2>&1 | FileCheck %s --check-prefix=UTF16

// FILE: latin1.mlir:3:7: error: input is not UTF-8 text (byte 0xe9 at offset 17)
// FILE-NOT: Traceback
// FILE-NOT: internal error
// STDIN: <stdin>:3:7: error: input is not UTF-8 text (byte 0xe9 at offset 17)
// STDIN-NOT: Traceback
// UTF16: utf16.mlir:1:1: error: input is not UTF-8 text (byte 0xff at offset 0) (UTF-16? save it as UTF-8)
