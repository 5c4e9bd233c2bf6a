"""Run many tile-opt / compile() jobs, each in a forked child of one warm process.

    python worker.py JOBS.json RESULTS.jsonl [--parallel N]

A fresh interpreter per input costs ~0.4 s (importing MLIR and tile_mlir); a
fork of this process, which has imported both but made no MLIR Context (so no
MLIR thread exists yet), costs a few milliseconds. Each child makes its own
Context, runs one job with stdout and stderr sent to files, and exits; this
process records how it ended (exit status or signal) with what it printed.
A child that runs past its time limit is killed by SIGALRM; one that asks
for more than the memory limit fails its allocation (MemoryError or abort).

Job (JSON object): id, mode ("tile-opt", "compile", "abort", "hang"), input
(a file), argv (tile-opt's arguments), stdin (feed input on fd 0), timeout, chip
(compile()'s, named so that no child spends ~40 ms probing for a GPU).
Result (one JSON line per job): the job's fields, exit or signal, stdout
(its head), stdout_traceback (a traceback anywhere in stdout), stderr, seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import resource
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, NoReturn

STDOUT_HEAD = 4096
STDERR_LIMIT = 1 << 20
MEMORY_LIMIT = 16 << 30  # address space per child: far above a normal compile (~1.5 GiB)
TRACEBACK = "Traceback (most recent call last)"


def _warm_imports() -> None:
    """Import everything a job needs before forking, so children share it (no Context)."""
    import tile_mlir.compiler
    import tile_mlir.tools.tile_opt  # noqa: F401
    from tile_mlir import lowering, passes, pipeline

    for name in passes.PASSES:
        passes.get(name)
    for op in ("tile.copy", "tile.elementwise", "tile.reduce"):
        lowering.variants_for(op)
    pipeline.named_pipelines()


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # not Linux: trust the import-only setup
        return 1


# ------------------------------------------------------------------- children


def _run_tile_opt(job: dict[str, Any]) -> int:
    from tile_mlir.tools import tile_opt

    try:
        return tile_opt.main(job["argv"])
    except SystemExit as e:  # argparse's own exits
        return e.code if isinstance(e.code, int) else 2


def _run_compile(job: dict[str, Any]) -> int:
    """compile() the input: text when it is UTF-8, else the file. The verdict goes to
    stdout as JSON; any exception but CompileError escapes (a traceback: a failure)."""
    from tile_mlir import compile as compile_
    from tile_mlir.diagnostics import CompileError

    path = Path(job["input"])
    try:
        source: str | Path = path.read_bytes().decode()
    except UnicodeDecodeError:
        source = path
    if isinstance(source, str) and "\n" not in source and source.endswith(".mlir"):
        source = path  # compile() would take the text for a path
    try:
        compile_(source, chip=job.get("chip", "sm_90"), cubin=False, cache=False)
        verdict: dict[str, Any] = {"result": "ok"}
    except CompileError as e:
        diagnostics = [{"severity": d.severity, "loc": str(d.loc) if d.loc else None,
                        "message": d.message} for d in e.diagnostics]
        verdict = {"result": "compile-error", "diagnostics": diagnostics}
    print(json.dumps(verdict))
    return 0


def _child(job: dict[str, Any], out: str, err: str) -> NoReturn:
    code = 70
    try:
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(int(job.get("timeout", 30)))
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
        os.dup2(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
        os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
        os.dup2(os.open(job["input"] if job.get("stdin") else os.devnull, os.O_RDONLY), 0)
        mode = job["mode"]
        if mode == "abort":
            os.abort()
        if mode == "hang":
            time.sleep(3600)
        code = _run_compile(job) if mode == "compile" else _run_tile_opt(job)
    except BaseException:  # noqa: BLE001 - anything that escapes is what we look for
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed pipe must not hide the status
                stream.flush()
        os._exit(code)


# -------------------------------------------------------------------- parent


def _read(path: str, limit: int) -> tuple[str, bool]:
    data = Path(path).read_bytes()
    return data[:limit].decode(errors="replace"), TRACEBACK.encode() in data


def _result(job: dict[str, Any], status: int, seconds: float, out: str, err: str
            ) -> dict[str, Any]:
    stdout, stdout_traceback = _read(out, STDOUT_HEAD)
    stderr, _ = _read(err, STDERR_LIMIT)
    os.unlink(out)
    os.unlink(err)
    return {**job, "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            "stdout": stdout, "stdout_traceback": stdout_traceback, "stderr": stderr,
            "seconds": round(seconds, 3)}


def run(jobs: list[dict[str, Any]], results: Path, parallel: int) -> None:
    _warm_imports()
    gc.collect()
    gc.freeze()  # the children's collections leave the shared pages alone
    scratch = tempfile.mkdtemp(prefix="tile-mlir-hostile-io-")
    running: dict[int, tuple[dict[str, Any], float, str, str]] = {}
    with results.open("w") as sink:
        def reap() -> None:
            pid, status = os.wait()
            job, start, out, err = running.pop(pid)
            sink.write(json.dumps(_result(job, status, time.monotonic() - start, out, err)) + "\n")

        for n, job in enumerate(jobs):
            while len(running) >= parallel:
                reap()
            if _threads() != 1:
                raise SystemExit("worker: a thread is running; forking would not be safe")
            out, err = f"{scratch}/{n}.out", f"{scratch}/{n}.err"
            pid = os.fork()
            if pid == 0:
                _child(job, out, err)
            running[pid] = (job, time.monotonic(), out, err)
        while running:
            reap()
    os.rmdir(scratch)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("jobs", type=Path)
    p.add_argument("results", type=Path)
    p.add_argument("--parallel", type=int, default=2)
    args = p.parse_args()
    run(json.loads(args.jobs.read_text()), args.results, args.parallel)


if __name__ == "__main__":
    main()
