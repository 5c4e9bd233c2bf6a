"""Compile time: cold compile (tile IR to cubin) and kernel-cache hits, with a breakdown.

    python3 bench/compile_time.py [--repeats 20]

For a typical elementwise kernel (tests/support/cases.py: a 4x1031 fma and a 2048-element
add split over 8 CTAs) it measures
- the first compile in a fresh process (imports, the MLIR context, pipelines),
- a cold compile in a warm process (cache=False: parse, passes, PTX, ptxas),
- its parts: the MLIR pipeline to PTX, printing the IR of every stage, ptxas,
- a disk-cache hit (the in-process dict cleared first) and an in-process hit,
- the first disk hit of a fresh process (hashing the compiler's files included).
Prints a markdown table and saves it as bench/results/compile_time-<machine>.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time

from common import ROOT, cpu_name, save, table
from timing import once_ms, percentiles


def _fresh_process_ms(code: str) -> float:
    """Milliseconds that `code` reports for itself in a new interpreter."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                             [str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])})
    return float(out.stdout.strip().splitlines()[-1])


FIRST = textwrap.dedent("""
    import time
    from support.cases import Case
    source = {case}.mlir()
    start = time.perf_counter()
    import tile_mlir
    tile_mlir.compile(source, cache={cache})
    print((time.perf_counter() - start) * 1e3)
""")


def _parts(source: str, repeats: int) -> list[tuple[str, list[float]]]:
    """The cold compile's parts, timed through the compiler's own pieces."""
    from tile_mlir import compiler, pipeline
    from tile_mlir.context import parse
    from tile_mlir.diagnostics import DiagnosticSink
    from tile_mlir.toolchain import assemble

    chip = "sm_90"
    stages = ("tile-to-gpu", "gpu-to-nvvm", "gpu-module-to-binary{format=isa}")
    printing: list[float] = []

    def to_ptx() -> None:
        module = parse(source, "bench", compiler._shared_context())
        for text in stages:
            pipeline.run(module, list(compiler._steps(text, chip)), DiagnosticSink())
            start = time.perf_counter()
            str(module)  # what keeping the stage costs
            printing.append((time.perf_counter() - start) * 1e3)

    pipeline_ms = once_ms(to_ptx, repeats)
    per_compile_printing = [sum(printing[i:i + 3]) for i in range(0, len(printing), 3)]
    ptx = compiler.compile(source, cache=False, cubin=False).ptx["kernels"]
    return [("MLIR pipeline to PTX (incl. printing)", pipeline_ms),
            ("  of which printing every stage's IR", per_compile_printing),
            ("ptxas (PTX to cubin, a subprocess)", once_ms(lambda: assemble(ptx, chip), repeats))]


def measure(name: str, case: str, repeats: int) -> list[tuple[str, str, list[float]]]:
    from support.cases import Case  # noqa: F401 - the eval below names it

    import tile_mlir
    from tile_mlir.runtime import cache as kernel_cache

    source = eval(case).mlir()  # case: the Case(...) expression, also run in subprocesses
    rows = [(name, "first compile in a fresh process",
             [_fresh_process_ms(FIRST.format(case=case, cache=False)) for _ in range(3)])]
    tile_mlir.compile(source, cache=False)  # warm the process
    rows.append((name, "cold compile, tile IR to cubin (cache=False)",
                 once_ms(lambda: tile_mlir.compile(source, cache=False), repeats)))
    rows += [(name, part, samples) for part, samples in _parts(source, repeats)]
    tile_mlir.compile(source)  # stores the entry
    rows.append((name, "disk-cache hit (in-process dict cleared)",
                 once_ms(lambda: tile_mlir.compile(source), repeats, kernel_cache.clear_memory)))
    rows.append((name, "in-process cache hit",
                 once_ms(lambda: tile_mlir.compile(source), repeats)))
    rows.append((name, "first disk hit in a fresh process (incl. hashing the compiler)",
                 [_fresh_process_ms(FIRST.format(case=case, cache=True)) for _ in range(3)]))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tile-mlir-bench-cache-") as cache_dir:
        os.environ["TILE_MLIR_CACHE_DIR"] = cache_dir  # cold: nothing from earlier runs
        rows = []
        for name, case in (("fma 4x1031 f32", 'Case("fma", (4, 1031), block=128)'),
                           ("add 2048 f32, 8 CTAs", 'Case("add", (2048,), form="rows", split=8)')):
            for kernel, what, samples in measure(name, case, args.repeats):
                median, low, high = percentiles(samples)
                rows.append((kernel, what, f"{median:.3f}", f"{low:.3f}", f"{high:.3f}"))
    from tile_mlir.runtime.driver import device_name, gpu_available

    machine = device_name() if gpu_available() else f"cpu {cpu_name()}"
    text = "\n".join([
        "# Compile time: cold compile and kernel-cache hits",
        "",
        f"machine: {machine}; host CPU: {cpu_name()}; python {sys.version.split()[0]}",
        f"{args.repeats} samples per row (3 for fresh processes); targets: cold <= 50 ms, "
        "disk-cache hit <= 2 ms",
        "",
        table(["kernel", "what", "median ms", "p10", "p90"], rows),
        "",
    ])
    print(text)
    print(f"saved to {save('compile_time', machine, text)}")


if __name__ == "__main__":
    main()
