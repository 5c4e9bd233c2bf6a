"""Program: compiled kernels as data (PTX, cubins, specs), loadable without MLIR."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tile_mlir.runtime import binary, driver
from tile_mlir.runtime.kernel import Kernel, LoadedModule
from tile_mlir.runtime.spec import KernelSpec


@dataclass
class Program:
    """The output of compilation: every gpu.module's PTX and cubin, the kernels' specs,
    and (from the compiler) the IR of each stage.

    compile() hands out the same Program for the same request (the kernel cache), so
    that kernels load once: treat it as read-only.
    """

    chip: str  # the chip the cubins were assembled for
    kernels: dict[str, KernelSpec]
    ptx: dict[str, str]  # gpu.module symbol -> PTX text
    cubin: dict[str, bytes] = field(default_factory=dict)  # gpu.module symbol -> cubin
    stages: dict[str, str] = field(default_factory=dict)  # stage name -> IR text
    _loaded: dict[tuple[int, str], LoadedModule] = field(default_factory=dict, repr=False)

    def kernel(self, name: str, device: int = 0) -> Kernel:
        """The kernel, loaded on `device`: the cubin when it runs on this GPU's chip,
        else the PTX, which the driver compiles for it."""
        if name not in self.kernels:
            raise KeyError(f"no kernel '{name}' (kernels: {', '.join(self.kernels)})")
        module = self.kernels[name].module
        key = (device, module)
        if key not in self._loaded:
            specs = {n: s for n, s in self.kernels.items() if s.module == module}
            image, kind = self.image(module, driver.device_chip(device))
            self._loaded[key] = LoadedModule(image, specs, kind, device)
        return self._loaded[key][name]

    def image(self, module: str, device_chip: str) -> tuple[bytes, str]:
        """What to load for `module` on a `device_chip` GPU: (bytes, "cubin" or "ptx")."""
        if module in self.cubin and binary.cubin_runs_on(self.chip, device_chip):
            return self.cubin[module], "cubin"
        ptx = self.ptx.get(module)
        target = binary.ptx_target(ptx) if ptx else None
        if ptx is None or target is None or not binary.ptx_runs_on(target, device_chip):
            have = f"a cubin for {self.chip}" if module in self.cubin else "no cubin"
            raise binary.IncompatibleBinaryError(
                f"gpu.module {module} has {have} and PTX for {target}: neither runs on this "
                f"{device_chip} GPU; compile it with chip='{device_chip}'")
        return ptx.encode(), "ptx"

    def __getitem__(self, name: str) -> Kernel:
        return self.kernel(name)

    def save(self, path: str | Path, *, directory: bool = False,
             meta: Mapping[str, Any] | None = None) -> Path:
        """Export as a bundle (one file, or a directory with directory=True) that
        tile_mlir.runtime.load_bundle() runs without MLIR."""
        from tile_mlir.runtime import bundle

        return bundle.save(self, path, directory=directory, meta=meta)
