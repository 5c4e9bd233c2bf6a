# mypy shim: the bindings' `mlir.passmanager` re-exports the typed extension module.
from mlir._mlir_libs._mlir.passmanager import *
