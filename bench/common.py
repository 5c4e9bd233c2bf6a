"""What the benchmarks share besides timing (bench/timing.py): where results go, a
markdown table, the machine and software a run was made on."""

from __future__ import annotations

import importlib.metadata
import platform
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the package and tests/support, uninstalled


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def cpu_name() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
        m = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
        if m:
            return m.group(1).strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()


def save(name: str, machine: str, text: str, results: Path = RESULTS) -> Path:
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{name}-{slug(machine)}.md"
    path.write_text(text)
    return path


def package_version(*names: str, named: bool = False) -> str:
    """The installed version of the first of `names` found (with its name if `named`),
    else "absent"."""
    for name in names:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        return f"{name} {version}" if named else version
    return "absent"


def driver_version() -> str:
    """The NVIDIA driver's version (nvidia-smi's), else the CUDA driver API's."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True)
        return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        pass
    try:
        from cuda.bindings import driver

        err, version = driver.cuDriverGetVersion()
        return f"CUDA {version // 1000}.{version % 1000 // 10}" if not err else "unknown"
    except ImportError:
        return "unknown"


def environment(torch: Any = None) -> dict[str, str]:
    """What a result depends on: the device, the driver and the software's versions, the
    host, the date. Without torch (a dry run): the device is named as fake."""
    env = {"device": "dry run (fake timings, no GPU)", "driver": "none"}
    if torch is not None:
        env = {"device": torch.cuda.get_device_name(0), "driver": driver_version()}
    return env | {
        "torch": package_version("torch") + (f" (CUDA {torch.version.cuda})" if torch else ""),
        "triton": package_version("triton"),
        "cuda-python": package_version("cuda-python", "cuda-bindings", named=True),
        "python": platform.python_version(),
        "host": cpu_name(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def environment_line(env: dict[str, str]) -> str:
    return "; ".join(f"{k}: {v}" for k, v in env.items())
