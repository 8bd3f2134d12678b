"""CLI start-up time: ``wanreduce --help``, ``wanreduce plan --help`` and ``wanreduce plan``.

Run: .venv/bin/python bench/bench_startup.py [--runs N] [--quick]

Each command runs N times as a fresh process (the console script's code path, under this
interpreter); the median wall time is printed. For ``plan`` on the shipped nine-city topology
the time is split into interpreter start-up (``python -c pass``), imports (sum of the top-level
entries of ``python -X importtime``, every import of the run) and the rest, which is the
planning work. The five slowest packages to import (self time of their modules) are listed.
Prints the markdown rows recorded in docs/benchmarks.md ("CLI start-up") with the machine's
load average, because start-up time scales with it.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from datetime import date

# The console script (`wanreduce`) is `from wanreduce.cli import main; main()`.
ENTRY = "import sys; sys.argv[0] = 'wanreduce'; from wanreduce.cli import main; main()"
PLAN_ARGS = ["plan", "--topology", "nine-city"]
COMMANDS = {
    "wanreduce --help": ["--help"],
    "wanreduce plan --help": ["plan", "--help"],
    "wanreduce " + " ".join(PLAN_ARGS): PLAN_ARGS,
}
_IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def wall(argv: list[str]) -> float:
    """Seconds for one fresh process running ``argv`` (output discarded)."""
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def import_breakdown(args: list[str]) -> tuple[float, list[tuple[str, float]]]:
    """Seconds spent importing in one run, and per package (self time summed over its modules;
    ``wanreduce`` split by subpackage), slowest first."""
    res = subprocess.run([sys.executable, "-X", "importtime", "-c", ENTRY, *args],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True)
    total, per = 0.0, {}
    for m in _IMPORT_LINE.finditer(res.stderr):
        name = m.group(4)
        parts = name.split(".")
        pkg = ".".join(parts[:2]) if parts[0] == "wanreduce" else parts[0]
        per[pkg] = per.get(pkg, 0.0) + int(m.group(1)) / 1e6
        if len(m.group(3)) == 1:  # imported by the program itself: cumulative time counts
            total += int(m.group(2)) / 1e6
    return total, sorted(per.items(), key=lambda t: -t[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=11, help="runs per command (median)")
    ap.add_argument("--quick", action="store_true", help="5 runs per command")
    args = ap.parse_args()
    runs = 5 if args.quick else args.runs

    base = statistics.median(wall([sys.executable, "-c", "pass"]) for _ in range(runs))
    load = os.getloadavg()
    print(f"date {date.today()}, {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
          f"{runs} runs each; interpreter start-up (python -c pass) {base:.3f} s")
    print("\n| command | median wall | imports | planning work | slowest imports |")
    print("|---|---|---|---|---|")
    for label, cmd in COMMANDS.items():
        med = statistics.median(wall([sys.executable, "-c", ENTRY, *cmd]) for _ in range(runs))
        imports = [import_breakdown(cmd) for _ in range(max(1, runs // 3))]
        imp = statistics.median(total for total, _ in imports)
        slow = ", ".join(f"{name} {s:.2f}" for name, s in imports[0][1][:5])
        work = f"{max(0.0, med - base - imp):.2f} s" if cmd == PLAN_ARGS else "-"
        print(f"| `{label}` | {med:.2f} s | {imp:.2f} s | {work} | {slow} |")
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
