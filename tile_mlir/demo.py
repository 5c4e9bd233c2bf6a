"""`make demo`: lower every program in examples/ to PTX and a cubin with tile-opt, say
what came out, and where a GPU is present run the kernels and check them against NumPy.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tile_mlir._resources import dialect_file
from tile_mlir.dtypes import DTYPES

ROOT = dialect_file().parent.parent
EXAMPLES = ROOT / "examples"
OUT = ROOT / "build" / "demo"

# How to check each example kernel on the GPU: its float64 reference on the inputs,
# and the range of the random inputs.
REFERENCES: dict[str, tuple[Callable[..., np.ndarray], tuple[float, float]]] = {
    "vector_add": (lambda a, b: a + b, (-4.0, 4.0)),
    "scale_rows": (lambda x, s: x * s, (-4.0, 4.0)),
    "unary_op": (np.sqrt, (0.0, 100.0)),  # seed 000
    "reg_sqrt": (np.sqrt, (0.0, 100.0)),  # seed 003
}

_MEMORY_OPS = re.compile(r"\b((?:ld|st)\.(?:global|shared|local)(?:\.nc)?(?:\.v[248])?)\.")


def tile_opt(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tile_mlir", *args]
    print("  $ tile-opt " + " ".join(args))
    return subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)


def summarize_ptx(ptx: str) -> list[str]:
    lines = []
    for entry in re.finditer(r"\.entry\s+(\w+)\((.*?)\n\}", ptx, re.S):
        counts = Counter(_MEMORY_OPS.findall(entry.group(2)))
        memory = ", ".join(f"{n}x {op}" for op, n in sorted(counts.items())) or "no memory ops"
        lines.append(f"kernel {entry.group(1)}: {memory}")
    return lines


def lower(example: Path) -> Path | None:
    print(f"{example.relative_to(ROOT)}")
    ptx_path, cubin_path = OUT / f"{example.stem}.ptx", OUT / f"{example.stem}.cubin"
    source = str(example.relative_to(ROOT))
    for emit, path in (("ptx", ptx_path), ("cubin", cubin_path)):
        result = tile_opt(source, "-p", "tile-to-ptx", f"--emit={emit}", "-o",
                          str(path.relative_to(ROOT)))
        if result.returncode != 0:
            print(result.stderr, file=sys.stderr)
            return None
    ptx = ptx_path.read_text()
    target = re.search(r"^\.target\s+(\S+)", ptx, re.M)
    for line in summarize_ptx(ptx):
        print(f"  {line}")
    print(f"  PTX {len(ptx.splitlines())} lines for {target.group(1) if target else '?'}; "
          f"cubin {cubin_path.stat().st_size} bytes -> {cubin_path.relative_to(ROOT)}")
    return example


def run_on_gpu(example: Path, rng: np.random.Generator) -> bool:
    import tile_mlir

    program = tile_mlir.compile(example)
    ok = True
    for name, spec in program.kernels.items():
        if name not in REFERENCES:
            print(f"  {name}: no reference in tile_mlir/demo.py; not run")
            continue
        reference, (low, high) = REFERENCES[name]
        in_place = len(spec.params) == 1  # seed 000 works on its one argument
        args: list[np.ndarray | float] = [
            rng.uniform(low, high, p.shape).astype(DTYPES[p.dtype].np_dtype()) if p.is_memref
            and (in_place or not p.writes) else np.full(p.shape, np.nan, DTYPES[p.dtype].np_dtype())
            if p.is_memref else float(rng.uniform(0.5, 2.0)) for p in spec.params]
        inputs = [np.array(a, copy=True) for a, p in zip(args, spec.params, strict=True)
                  if in_place or not p.writes]
        outputs = [a for a, p in zip(args, spec.params, strict=True) if p.writes]
        program.kernel(name)(*args)
        expected = reference(*(np.asarray(a, np.float64) for a in inputs))
        assert isinstance(outputs[0], np.ndarray)
        error = np.abs(outputs[0].astype(np.float64) - expected).max()
        eps = float(np.finfo(outputs[0].dtype).eps) if outputs[0].dtype.itemsize > 2 \
            else 2.0 ** -7 if outputs[0].dtype.name == "bfloat16" else 2.0 ** -10
        good = bool(np.isfinite(outputs[0]).all() and error <= eps * np.abs(expected).max())
        ok &= good
        print(f"  {name}: ran on {outputs[0].size} random elements, max |error| {error:.3g} "
              f"vs float64 NumPy: {'OK' if good else 'MISMATCH'}")
    return ok


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    lowered = [e for e in sorted(EXAMPLES.glob("*.mlir")) if lower(e)]
    failed = len(list(EXAMPLES.glob("*.mlir"))) - len(lowered)
    from tile_mlir.runtime.driver import device_name, gpu_available

    if not gpu_available():
        print(f"\nno GPU here: lowered {len(lowered)} programs; run `make demo` on a GPU "
              "machine to also run them")
        return 1 if failed else 0
    print(f"\nrunning on {device_name()}:")
    rng = np.random.default_rng()
    results = []
    for example in lowered:
        print(f"{example.relative_to(ROOT)}")
        results.append(run_on_gpu(example, rng))
    return 0 if all(results) and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
