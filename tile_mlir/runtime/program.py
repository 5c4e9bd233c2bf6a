"""Program: compiled kernels as data (PTX, cubins, specs), loadable without MLIR."""

from __future__ import annotations

from dataclasses import dataclass, field

from tile_mlir.runtime import driver
from tile_mlir.runtime.kernel import Kernel, LoadedModule
from tile_mlir.runtime.spec import KernelSpec


@dataclass
class Program:
    """The output of compilation: every gpu.module's PTX and cubin, the kernels' specs,
    and (from the compiler) the IR of each stage."""

    chip: str
    kernels: dict[str, KernelSpec]
    ptx: dict[str, str]  # gpu.module symbol -> PTX text
    cubin: dict[str, bytes] = field(default_factory=dict)  # gpu.module symbol -> cubin
    stages: dict[str, str] = field(default_factory=dict)  # stage name -> IR text
    _loaded: dict[tuple[int, str], LoadedModule] = field(default_factory=dict, repr=False)

    def kernel(self, name: str, device: int = 0) -> Kernel:
        """The kernel, loaded on `device`: the cubin when it was built for this GPU's
        chip, else the PTX, which the driver compiles for it."""
        if name not in self.kernels:
            raise KeyError(f"no kernel '{name}' (kernels: {', '.join(self.kernels)})")
        module = self.kernels[name].module
        key = (device, module)
        if key not in self._loaded:
            specs = {n: s for n, s in self.kernels.items() if s.module == module}
            if module in self.cubin and driver.device_chip(device) == self.chip:
                self._loaded[key] = LoadedModule(self.cubin[module], specs, "cubin")
            else:
                self._loaded[key] = LoadedModule(self.ptx[module].encode(), specs, "ptx")
        return self._loaded[key][name]

    def __getitem__(self, name: str) -> Kernel:
        return self.kernel(name)
