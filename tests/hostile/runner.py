"""Run a corpus through tile-opt and compile() (worker.py) and judge each run (verdict.py).

    python -m hostile.runner --count 20000 --seed 7     (from tests/; prints the failures)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tile_mlir

from . import corpus, verdict
from .corpus import Case

PIPELINES: dict[str, list[str]] = {  # job names: not "gpu", which marks the gpu tier
    "tile-verify": ["--tile-verify"],
    "tile-to-gpu": ["-p", "tile-to-gpu"],
    "tile-to-ptx": ["-p", "tile-to-ptx", "--emit=ptx"],
}
EXTRAS: tuple[list[str], ...] = (
    ["--tile-explain"],
    ["--mlir-print-ir-after-all", "-p", "tile-to-gpu"],
    ["--split-input-file", "--verify-diagnostics", "--tile-verify"],
    ["--split-input-file", "-p", "tile-to-ptx", "--emit=ptx"],
)
TIMEOUT_S = 30
CHIPS = ("sm_90", "sm_80", "sm_90", "sm_89", "sm_90a", "sm_70")
"""Targets of the PTX runs and compile(), in turn: chips without fp8 or wgmma too."""


@dataclass(frozen=True)
class Failure:
    case: Case
    path: Path
    job: dict[str, Any]
    verdict: verdict.Verdict

    def replay(self) -> str:
        """The command line that runs this job again (from the repository root)."""
        if self.job["mode"] == "compile":
            return (f"python -c \"import tile_mlir, pathlib; tile_mlir.compile(pathlib.Path("
                    f"'{self.path}').read_text(), chip='{self.job['chip']}', cubin=False, "
                    "cache=False)\"")
        argv = " ".join(self.job["argv"])
        return f"python -m tile_mlir {argv}" + (f" < {self.path}" if self.job["stdin"] else "")


def jobs_for(case: Case, path: Path, n: int) -> list[dict[str, Any]]:
    """Each pipeline (the first through stdin for every fourth case, PTX for a chip of
    CHIPS in turn), compile() (for another), and every eighth case one of the EXTRAS."""
    base = {"id": case.id, "input": str(path), "timeout": TIMEOUT_S}
    jobs = []
    for name, args in PIPELINES.items():
        stdin = name == "tile-verify" and n % 4 == 3
        chip = ["--chip", CHIPS[n % len(CHIPS)]] if name == "tile-to-ptx" else []
        argv = ["-" if stdin else str(path), *args, *chip]
        jobs.append({**base, "mode": "tile-opt", "name": name, "argv": argv, "stdin": stdin})
    jobs.append({**base, "mode": "compile", "name": "compile", "argv": [], "stdin": False,
                 "chip": CHIPS[(n + 3) % len(CHIPS)]})
    if n % 8 == 0:
        extra = EXTRAS[(n // 8) % len(EXTRAS)]
        jobs.append({**base, "mode": "tile-opt", "name": " ".join(extra),
                     "argv": [str(path), *extra], "stdin": False})
    return jobs


def write_cases(cases: list[Case], directory: Path) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for case in cases:
        paths[case.id] = directory / f"{case.id}.mlir"
        paths[case.id].write_bytes(case.data)
    return paths


def run_jobs(jobs: list[dict[str, Any]], workdir: Path, parallel: int) -> list[dict[str, Any]]:
    """Run the jobs in one worker process (a fresh interpreter, importing the same
    tile_mlir as this one); its children's temporary files stay under workdir."""
    jobs_file, results_file = workdir / "jobs.json", workdir / "results.jsonl"
    jobs_file.write_text(json.dumps(jobs))
    scratch = workdir / "tmp"
    scratch.mkdir(exist_ok=True)
    package_root = str(Path(tile_mlir.__file__).resolve().parent.parent)
    env = {**os.environ, "TMPDIR": str(scratch), "OPENBLAS_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([package_root, os.environ.get("PYTHONPATH", "")])}
    env.pop("TILE_MLIR_TRACEBACK", None)
    worker = Path(__file__).with_name("worker.py")
    subprocess.run([sys.executable, str(worker), str(jobs_file), str(results_file),
                    "--parallel", str(parallel)], check=True, env=env, stdin=subprocess.DEVNULL)
    return [json.loads(line) for line in results_file.read_text().splitlines()]


def parallelism() -> int:
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:
        return os.cpu_count() or 1


def run_corpus(cases: list[Case], workdir: Path, parallel: int | None = None
               ) -> tuple[list[dict[str, Any]], list[Failure]]:
    paths = write_cases(cases, workdir / "cases")
    jobs = [job for n, case in enumerate(cases) for job in jobs_for(case, paths[case.id], n)]
    results = run_jobs(jobs, workdir, parallel or parallelism())
    by_id = {case.id: case for case in cases}
    failures = []
    for result in results:
        judged = verdict.judge(result)
        if not judged.ok:
            case = by_id[result["id"]]
            failures.append(Failure(case, paths[case.id], result, judged))
    return results, failures


def report(failures: list[Failure], seed: int, count: int, examples: int = 3) -> str:
    """The failures by class, with a few examples each: case, how to replay it, output."""
    classes: dict[str, list[Failure]] = defaultdict(list)
    for failure in failures:
        classes[f"{failure.job['name']}: {failure.verdict.kind}"].append(failure)
    lines = [f"{len(failures)} failing runs in {len(classes)} classes "
             f"(seed {seed}, count {count}; regenerate a case with "
             f"`python -m hostile.corpus --seed {seed} --count {count} --id ID` from tests/)"]
    for kind, members in sorted(classes.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"\n== {kind}: {len(members)} run(s)")
        for failure in members[:examples]:
            lines.append(f"-- {failure.case.id} ({failure.case.note[:100]})")
            lines.append(f"   replay: {failure.replay()}")
            lines.extend("   | " + line for line in failure.verdict.detail.splitlines()[:12])
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m hostile.runner")
    p.add_argument("--seed", type=int, default=corpus.DEFAULT_SEED)
    p.add_argument("--count", type=int, default=corpus.DEFAULT_COUNT)
    p.add_argument("--workdir", type=Path, default=Path("hostile-run"))
    p.add_argument("--parallel", type=int)
    p.add_argument("--examples", type=int, default=3)
    args = p.parse_args()
    start = time.monotonic()
    cases = corpus.generate(args.seed, args.count)
    results, failures = run_corpus(cases, args.workdir, args.parallel)
    print(report(failures, args.seed, args.count, args.examples) if failures else "no failures")
    slowest = sorted(results, key=lambda r: -r["seconds"])[:5]
    print(f"\n{len(cases)} cases, {len(results)} runs in {time.monotonic() - start:.0f} s; "
          "slowest: " + ", ".join(f"{r['id']}/{r['name']} {r['seconds']} s" for r in slowest))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
