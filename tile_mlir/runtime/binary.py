"""Which binary runs on which GPU: cubins per chip, PTX as the fallback, `a` chips on demand.

A cubin for `sm_XY` runs on devices of the same major version and a minor of
at least Y; an arch-specific cubin (`sm_90a`) runs only on exactly that chip.
PTX for `sm_XY` is compiled by the driver for any device of at least that
compute capability (an `a` target again only for exactly that chip). Kernels
use the arch-specific target only when they need its instructions (wgmma,
setmaxnreg, tcgen05...), so that a plain `sm_90` cubin stays the default.

No MLIR here: the runtime decides what to load with it, the compiler what to
assemble.
"""

from __future__ import annotations

import re
from functools import cache

from tile_mlir.toolchain import DEFAULT_CHIP


class IncompatibleBinaryError(RuntimeError):
    """A kernel has neither a cubin nor PTX that the GPU in use can run."""


_CHIP = re.compile(r"^sm_(\d+)(\d)([af]?)$")
_TARGET = re.compile(r"^\s*\.target\s+(sm_\w+)", re.M)
# Instructions (PTX) and NVVM ops (the gpu/llvm stages) that exist only on `a` targets.
_ARCH_SPECIFIC = re.compile(r"\b(wgmma|setmaxnreg|setmaxregister|tcgen05)\.?")


def parse_chip(chip: str) -> tuple[int, int, str]:
    """(major, minor, suffix) of `sm_90a` -> (9, 0, "a"); ValueError for other spellings."""
    m = _CHIP.match(chip)
    if not m:
        raise ValueError(f"not a GPU chip name: {chip!r} (expected e.g. sm_80, sm_90, sm_90a)")
    return int(m.group(1)), int(m.group(2)), m.group(3)


def arch_specific_uses(text: str) -> list[str]:
    """The arch-specific instructions or ops that `text` (PTX or IR) uses, sorted."""
    return sorted(set(_ARCH_SPECIFIC.findall(text)))


def specific_chip(chip: str, text: str) -> str:
    """`chip`, or its arch-specific variant (sm_90 -> sm_90a) when `text` needs one."""
    major, minor, suffix = parse_chip(chip)
    if suffix or not arch_specific_uses(text):
        return chip
    return f"sm_{major}{minor}a"


def ptx_target(ptx: str) -> str | None:
    """The `.target` chip of a PTX text."""
    m = _TARGET.search(ptx)
    return m.group(1) if m else None


def cubin_runs_on(cubin_chip: str, device_chip: str) -> bool:
    """Whether a cubin assembled for `cubin_chip` runs on a `device_chip` GPU."""
    major, minor, suffix = parse_chip(cubin_chip)
    dev_major, dev_minor, _ = parse_chip(device_chip)
    if suffix == "a":
        return (major, minor) == (dev_major, dev_minor)
    return major == dev_major and minor <= dev_minor


def ptx_runs_on(target: str, device_chip: str) -> bool:
    """Whether the driver can compile PTX for `target` for a `device_chip` GPU."""
    major, minor, suffix = parse_chip(target)
    dev_major, dev_minor, _ = parse_chip(device_chip)
    if suffix == "a":
        return (major, minor) == (dev_major, dev_minor)
    if suffix == "f":
        return major == dev_major and minor <= dev_minor
    return (major, minor) <= (dev_major, dev_minor)


@cache
def detect_chip(device: int = 0) -> str:
    """The chip of `device` (sm_90 for compute capability 9.0); DEFAULT_CHIP without a GPU."""
    from tile_mlir.runtime import driver

    if not driver.gpu_available():
        return DEFAULT_CHIP
    return driver.device_chip(device)
