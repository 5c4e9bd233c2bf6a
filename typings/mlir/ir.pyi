# mypy shim: the bindings' `mlir.ir` re-exports their typed extension module and
# adds MLIRError at run time (mlir/_mlir_libs/__init__.py).
from mlir._mlir_libs._mlir.ir import *
from mlir._mlir_libs._mlir.ir import DiagnosticInfo

class MLIRError(Exception):
    message: str
    error_diagnostics: list[DiagnosticInfo]
