# mypy shim: the bindings' `mlir.runtime` (NumPy arrays as memref descriptors).
from typing import Any

def get_ranked_memref_descriptor(nparray: Any) -> Any: ...
