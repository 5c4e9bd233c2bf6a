"""`make demo`: lower every program in examples/ to PTX and a cubin with tile-opt, say
what came out, and where a GPU is present run every kernel of every example, check it
against its float64 NumPy reference (OK or MISMATCH) and time it.

The examples are the .mlir files; each kernel is checked by the entry of REFERENCES
under its name. A kernel without one is an error (the demo fails), so a new example
must bring its reference.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tile_mlir._resources import dialect_file
from tile_mlir.dtypes import DTYPES
from tile_mlir.runtime.spec import KernelSpec

ROOT = dialect_file().parent.parent
EXAMPLES = ROOT / "examples"
OUT = ROOT / "build" / "demo"
TIMED_RUNS = 21


@dataclass(frozen=True)
class Reference:
    """How to check one example kernel.

    `compute` takes the kernel's inputs in parameter order (memrefs as float64 arrays,
    scalars as floats) and returns what it writes (an array, or a tuple in parameter
    order). Inputs are uniform in [low, high). The result passes when every element is
    written (finite) and within `ulps` machine epsilons of the output type, relative to
    the largest expected magnitude. `in_place`: the kernel reads the parameters it
    writes (seed 000 takes the sqrt of its one argument in place)."""

    compute: Callable[..., Any]
    low: float = -4.0
    high: float = 4.0
    ulps: float = 1.0
    in_place: bool = False


REFERENCES: dict[str, Reference] = {
    "vector_add": Reference(lambda a, b: a + b),
    "scale_rows": Reference(lambda x, s: x * s),
    "unary_op": Reference(np.sqrt, 0.0, 100.0, in_place=True),  # seed 000
    # seed 001: row sums of 8 non-negative terms, within 7 roundings of the sum
    "test_reduction": Reference(lambda a: a.sum(axis=-1), 0.0, 1.0, ulps=8.0),
    "reg_sqrt": Reference(np.sqrt, 0.0, 100.0),  # seed 003
}


class MissingReference(KeyError):
    """A kernel of examples/ that REFERENCES does not cover."""


def reference(name: str) -> Reference:
    """The kernel's reference; MissingReference (naming the table) when it has none."""
    try:
        return REFERENCES[name]
    except KeyError:
        raise MissingReference(
            f"kernel '{name}' has no reference: add it to REFERENCES in tile_mlir/demo.py "
            f"(have: {', '.join(sorted(REFERENCES))})") from None


# ------------------------------------------------------------------ lowering

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


# ------------------------------------------------------------------ checking


@dataclass
class Arguments:
    """One launch's arguments (host arrays and scalars) and which of them are read/written."""

    values: list[Any]
    reads: list[int]  # positions the kernel reads (memrefs and scalars)
    writes: list[int]  # positions of the memrefs it writes

    @property
    def traffic_bytes(self) -> int:
        """Bytes in (memrefs read) plus bytes out (memrefs written)."""
        arrays = [self.values[i] for i in (*self.reads, *self.writes)]
        return sum(a.nbytes for a in arrays if isinstance(a, np.ndarray))


def arguments(spec: KernelSpec, ref: Reference, rng: np.random.Generator) -> Arguments:
    """Random inputs in the reference's range; outputs poisoned with NaN (in-place ones
    random, as they are read first)."""
    values: list[Any] = []
    reads, writes = [], []
    for i, param in enumerate(spec.params):
        if not param.is_memref:
            values.append(float(rng.uniform(0.5, 2.0)))
            reads.append(i)
            continue
        dtype = DTYPES[param.dtype].np_dtype()
        read = ref.in_place or not param.writes
        values.append(rng.uniform(ref.low, ref.high, param.shape).astype(dtype) if read
                      else np.full(param.shape, np.nan, dtype))
        reads += [i] if read else []
        writes += [i] if param.writes else []
    return Arguments(values, reads, writes)


@dataclass(frozen=True)
class Verdict:
    ok: bool
    error: float  # the largest |output - reference|
    bound: float  # what it had to stay within


def _eps(dtype: np.dtype) -> float:
    """Machine epsilon of a float type (ml_dtypes knows bfloat16 and fp8 too); 0 for
    integers and bool, which must match exactly."""
    if dtype.kind in "biu":
        return 0.0
    import ml_dtypes

    return float(ml_dtypes.finfo(dtype).eps)  # type: ignore[no-untyped-call]


def judge(spec: KernelSpec, ref: Reference, args: Arguments, inputs: Sequence[Any]) -> Verdict:
    """Compare what the kernel wrote into `args` with the reference on `inputs` (copies of
    the inputs taken before the launch)."""
    expected = ref.compute(*(np.asarray(v, np.float64) if isinstance(v, np.ndarray) else v
                             for v in inputs))
    expected = expected if isinstance(expected, tuple) else (expected,)
    if len(expected) != len(args.writes):
        raise ValueError(f"{spec.name}: the reference gives {len(expected)} outputs, the "
                         f"kernel writes {len(args.writes)}")
    ok, worst, bound = True, 0.0, 0.0
    for position, result in zip(args.writes, expected, strict=True):
        got = args.values[position]
        want = np.broadcast_to(np.asarray(result, np.float64), got.shape)
        limit = ref.ulps * _eps(got.dtype) * float(np.abs(want).max(initial=0.0))
        error = float(np.abs(got.astype(np.float64) - want).max(initial=0.0))
        ok &= bool(np.isfinite(got.astype(np.float64)).all()) and error <= limit
        worst, bound = max(worst, error), max(bound, limit)
    return Verdict(ok, worst, bound)


def check(spec: KernelSpec, launch: Callable[..., object], rng: np.random.Generator
          ) -> Verdict:
    """Run the kernel once on fresh random host arrays through `launch` and judge it."""
    ref = reference(spec.name)
    args = arguments(spec, ref, rng)
    inputs = [np.array(args.values[i], copy=True) if isinstance(args.values[i], np.ndarray)
              else args.values[i] for i in args.reads]
    launch(*args.values)
    return judge(spec, ref, args, inputs)


# ------------------------------------------------------------------ on the GPU


def _elapsed_ms(launch: Callable[[], object]) -> float:
    """One launch timed with CUDA events on the legacy default stream (the kernels'
    stream for device buffers)."""
    from tile_mlir.runtime.driver import check as cu
    from tile_mlir.runtime.driver import cuda

    drv = cuda()
    start, end = (cu("cuEventCreate", drv.cuEventCreate(0)) for _ in range(2))
    try:
        cu("cuEventRecord", drv.cuEventRecord(start, 0))
        launch()
        cu("cuEventRecord", drv.cuEventRecord(end, 0))
        cu("cuEventSynchronize", drv.cuEventSynchronize(end))
        return float(cu("cuEventElapsedTime", drv.cuEventElapsedTime(start, end)))
    finally:
        for event in (start, end):
            cu("cuEventDestroy", drv.cuEventDestroy(event))


def time_kernel(kernel: Callable[..., object], args: Arguments, runs: int = TIMED_RUNS
                ) -> float:
    """The median time of `runs` launches, in seconds, on device copies of the arguments
    (after one untimed launch)."""
    from tile_mlir.runtime.memory import DeviceBuffer

    device = [DeviceBuffer.from_array(v) if isinstance(v, np.ndarray) else v
              for v in args.values]
    try:
        kernel(*device)
        return statistics.median(_elapsed_ms(lambda: kernel(*device))
                                 for _ in range(runs)) / 1e3
    finally:
        for buffer in device:
            if isinstance(buffer, DeviceBuffer):
                buffer.close()


def run_on_gpu(example: Path, rng: np.random.Generator) -> bool:
    """Check and time every kernel of the example; False on any mismatch."""
    import tile_mlir

    program = tile_mlir.compile(example)
    ok = True
    for name, spec in program.kernels.items():
        try:
            verdict = check(spec, program.kernel(name), rng)
        except MissingReference as e:
            print(f"  {name}: MISSING REFERENCE: {e.args[0]}")
            ok = False
            continue
        args = arguments(spec, reference(name), rng)
        seconds = time_kernel(program.kernel(name), args)
        print(f"  {name}: {'OK' if verdict.ok else 'MISMATCH'}  max |error| "
              f"{verdict.error:.3g} (bound {verdict.bound:.3g}) vs float64 NumPy; "
              f"{seconds * 1e6:.1f} us median of {TIMED_RUNS}, "
              f"{args.traffic_bytes / seconds / 1e9:.1f} GB/s")
        ok &= verdict.ok
    return ok


# ------------------------------------------------------------------ main


def uncovered(examples: Sequence[Path]) -> list[str]:
    """'example: kernel' for every kernel of the examples without a reference."""
    from mlir import ir

    import tile_mlir

    missing = []
    for example in examples:
        module = tile_mlir.parse(example.read_text(), ir.Context(), name=str(example))
        specs = tile_mlir.kernel_specs(module)
        missing += [f"{example.name}: {name}" for name in specs if name not in REFERENCES]
    return missing


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    examples = sorted(EXAMPLES.glob("*.mlir"))
    lowered = [e for e in examples if lower(e)]
    failed = len(examples) - len(lowered)
    missing = uncovered(examples)
    for line in missing:
        print(f"MISSING REFERENCE: {line}: add it to REFERENCES in tile_mlir/demo.py")
    from tile_mlir.runtime.driver import device_name, gpu_available

    if not gpu_available():
        print(f"\nno GPU here: lowered {len(lowered)} programs; run `make demo` on a GPU "
              "machine to also run them")
        return 1 if failed or missing else 0
    print(f"\nrunning on {device_name()}:")
    rng = np.random.default_rng()
    results = []
    for example in lowered:
        print(f"{example.relative_to(ROOT)}")
        results.append(run_on_gpu(example, rng))
    return 0 if all(results) and not failed and not missing else 1


if __name__ == "__main__":
    sys.exit(main())

