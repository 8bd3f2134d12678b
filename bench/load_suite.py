"""Run the whole test suite while busy-loop processes load the cores; repeat; report.

CI runs on shared machines: a test whose outcome depends on wall-clock speed passes on an idle
machine and fails on a loaded one. This script makes the loaded machine on purpose: it starts
``--load`` N processes that spin on the CPU, runs ``python -m pytest -n JOBS`` ``--repeat`` R
times in a row, and prints each run's result and duration. Exit status 0 only if every run
passed.

The busy loops are bounded: each stops by itself after ``--max-time`` seconds or as soon as
this script's process is gone (they watch their parent), and the script stops them when the
runs are done. Usage (``make test-under-load`` runs the defaults)::

    .venv/bin/python bench/load_suite.py [--load 4] [--repeat 3] [--jobs 2] [-- PYTEST ARGS]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# One busy loop: spins until its deadline or until its parent (this script) is gone.
BUSY_LOOP = """
import os, sys, time
end, parent = time.monotonic() + float(sys.argv[1]), int(sys.argv[2])
x = 0
while os.getppid() == parent and time.monotonic() < end:
    for _ in range(200_000):
        x += 1
"""


def start_load(n: int, max_time: float) -> list[subprocess.Popen]:
    """``n`` busy-loop processes, each ending by itself after ``max_time`` s at the latest."""
    return [
        subprocess.Popen([sys.executable, "-c", BUSY_LOOP, f"{max_time:g}", str(os.getpid())],
                         stdin=subprocess.DEVNULL)
        for _ in range(n)
    ]


def stop_load(procs: list[subprocess.Popen]) -> None:
    """End the busy loops this script started (by their process ids)."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def run_suite(jobs: int, pytest_args: list[str], log: Path) -> tuple[int, float, str]:
    """One whole-suite run; returns (exit status, wall seconds, pytest's summary line)."""
    cmd = [sys.executable, "-m", "pytest", "-n", str(jobs), *pytest_args]
    t0 = time.monotonic()
    with log.open("w") as f:
        # Its own process group: if this script is stopped, the run and everything it started
        # (xdist workers, simulators) are stopped with it.
        p = subprocess.Popen(cmd, cwd=REPO, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = p.wait()
        except BaseException:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
            raise
    dt = time.monotonic() - t0
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    summary = next((ln.strip("= ") for ln in reversed(lines) if " in " in ln and ("passed" in ln
                    or "failed" in ln or "error" in ln)), lines[-1] if lines else "(no output)")
    return code, dt, summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--load", type=int, default=4, help="busy-loop processes (default 4)")
    ap.add_argument("--repeat", type=int, default=3, help="whole-suite runs in a row (default 3)")
    ap.add_argument("--jobs", type=int, default=2, help="pytest-xdist workers (default 2)")
    ap.add_argument("--max-time", type=float, default=4 * 3600,
                    help="seconds after which a busy loop stops by itself (default 4 h)")
    ap.add_argument("--logs", type=Path, default=REPO / "build" / "load-suite",
                    help="folder for each run's pytest output (default build/load-suite)")
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    a = ap.parse_args(argv)
    for name, v, lo in (("--load", a.load, 0), ("--repeat", a.repeat, 1), ("--jobs", a.jobs, 1)):
        if v < lo:
            ap.error(f"{name} must be >= {lo}, got {v}")
    if not a.max_time > 0:
        ap.error(f"--max-time must be > 0 s, got {a.max_time}")
    a.logs.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    print(f"load suite: {a.load} busy loops on {os.cpu_count()} CPUs, {a.repeat} run(s) of "
          f"pytest -n {a.jobs} {' '.join(a.pytest_args)}; logs in {a.logs}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))  # clean up below
    load = start_load(a.load, a.max_time)
    results = []
    try:
        for k in range(1, a.repeat + 1):
            log = a.logs / f"{stamp}-run{k}.log"
            code, dt, summary = run_suite(a.jobs, a.pytest_args, log)
            results.append(code)
            print(f"run {k}/{a.repeat}: {'PASS' if code == 0 else f'FAIL (exit {code})'} in "
                  f"{dt:.0f} s, load average {load_average()}: {summary}  [{log.name}]", flush=True)
    finally:
        stop_load(load)
    passed = sum(c == 0 for c in results)
    print(f"load suite: {passed}/{len(results)} runs passed with {a.load} busy loops")
    return 0 if passed == len(results) == a.repeat else 1


if __name__ == "__main__":
    sys.exit(main())
