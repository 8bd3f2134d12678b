"""Run every benchmark in bench/ in its quick configuration (``make bench``).

Run: .venv/bin/python bench/run_all.py [--list] [--only NAME ...] [--out DIR]

Each script runs as its own process with this interpreter; its output streams through, preceded
by the section of docs/benchmarks.md its figures belong in. Quick configurations check that
every benchmark works end to end and give the order of magnitude; the figures recorded in
docs/benchmarks.md come from the full command named in each section. A summary of exit status
and wall time per script closes the run; the exit status is 1 if any script failed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
DOCS = BENCH.parent / "docs" / "benchmarks.md"


@dataclass(frozen=True)
class Bench:
    script: str
    section: str  # heading in docs/benchmarks.md
    args: Callable[[Path], list[str]]  # quick arguments, given the output directory


BENCHES = (
    Bench("bench_startup.py", "CLI start-up", lambda out: ["--quick"]),
    Bench("bench_quantize.py", "Golden model: quantise and dequantise",
          lambda out: ["--mib", "16", "--repeats", "3"]),
    Bench("bench_planner.py", "Planner", lambda out: ["--quick"]),
    Bench("bench_driver.py", "Host driver", lambda out: ["--runs", "2", "--mib", "2"]),
    Bench("bench_receive.py", "Host driver", lambda out: ["--chunks", "1024", "--reps", "3"]),
    Bench("bench_softagg.py", "Software aggregator alone (serve --backend model)",
          lambda out: ["--runs", "2", "--mib", "4"]),
    Bench("bench_model_fast.py", "Software aggregator alone (serve --backend model)",
          lambda out: ["--runs", "200", "--reps", "2"]),
    Bench("bench_agreement.py", "Agreement exchange (every call, also with max_abs)",
          lambda out: ["--runs", "3"]),
    Bench("bench_loss.py", "Host driver under loss", lambda out: ["--runs", "2"]),
    Bench("bench_nack_burst.py", "NACK bursts with several receivers (issue 15 review)",
          lambda out: ["--runs", "1"]),
    Bench("bench_emulator.py", "WAN emulator: the planner predicts reality",
          lambda out: ["--memory", "256KiB", "--schedules", "all-to-all", "--bytes", "200KB",
                       "--rounds", "1", "--time-scale", "1", "--runs", "1"]),
    Bench("bench_train_fixedpoint.py", "Training: fixed point vs float all-reduce (DDP hook)",
          lambda out: ["--seeds", "0", "--steps", "30"]),
    Bench("bench_train_schedules.py", "Training: schedules change time to accuracy",
          lambda out: ["--memory", "64KiB", "--schedules", "ring,cliques-3", "--hidden", "200",
                       "--steps", "4", "--local-steps", "2", "--time-scale", "1",
                       "--target", "0.1", "--out", str(out / "train_schedules"),
                       "--plot-prefix", str(out / "train_schedules")]),
    Bench("bench_core.py", "Aggregator core: throughput and latency (simulated cycles)",
          lambda out: ["--quick"]),
    Bench("bench_core_dram.py", "Aggregator core with DRAM slots: beats per cycle vs memory latency and bandwidth",
          lambda out: ["--quick"]),
    Bench("bench_loopback.py", "RTL loopback: end to end through the simulated core",
          lambda out: ["--quick"]),
    Bench("bench_fpga.py", "FPGA timing and utilisation",
          lambda out: ["--quick", "--out", str(out / "fpga")]),
    # the routed delays of the bench_fpga run just before
    Bench("timing_paths.py", "FPGA timing and utilisation",
          lambda out: [str(next((out / "fpga").glob("*/seed1/core.sdf"), out / "fpga/missing.sdf")),
                       "--period", "8", "--paths", "3"]),
    Bench("bench_fpga_modules.py", "Per-module Fmax (everything but the reducer)",
          lambda out: ["demux", "--quiet-paths", "--out", str(out / "fpga_modules")]),
    Bench("bench_pending_words.py", "Pending words vs the S-wide release scan (issue 16)",
          lambda out: ["--words", "256", "--vector", "256", "--out", str(out / "pending_words")]),
    Bench("bench_slot_store.py", "Reducer split and on-chip slot store (issue 16)",
          lambda out: ["--config", "16,256", "--out", str(out / "slot_store")]),
    Bench("bench_dram_store.py", "DRAM slot store: commands per cycle vs memory latency and bandwidth (issue 16)",
          lambda out: ["--latency", "20,200", "--bandwidth", "0.5", "--seeds", "1"]),
    Bench("bench_dram.py", "DRAM controller on the boards (LiteDRAM)", lambda out: ["--slots", "2"]),
    Bench("bench_rmw_engine.py",
          "The read-modify-write engine's row width: a 256-bit record on the 64-bit port (issue 16, large S step 4)",
          lambda out: ["--outstanding", "16", "--slots", "256"]),
    Bench("engine_cells.py", "The in-flight index as a component (session 33)",
          lambda out: [str(out / "engine_cells.json")]),
    Bench("bench_payload_gate.py",
          "The payload gate: a message waits for its record's decision (issue 16, large S step 4)",
          lambda out: ["--config", "64:256", "--messages", "16", "--records", "64:20", "--rate-messages", "40"]),
    Bench("bench_rmw_engine.py",
          "The read-modify-write engine's late operand and DecisionState (issue 16, large S step 4)",
          lambda out: ["--row-width", "256", "--side-width", "8", "--late", "--jobs", "2",
                       "--outstanding", "16", "--slots", "256"]),
    Bench("bench_rmw_engine.py",
          "The record decision as the engine's modify (issue 16, large S step 4)",
          lambda out: ["--late", "--modify", "decision", "--jobs", "2", "--outstanding", "16", "--slots", "256"]),
    Bench("bench_free_sweep.py",
          "The FREE sweep: a window reset as record WRITEs (issue 16, large S step 4)",
          lambda out: ["--width", "64", "--log2-window", "4", "--slots", "256"]),
    Bench("bench_record_emitter.py",
          "The record emitter: released runs read back as result rows (issue 16, large S step 4)",
          lambda out: ["--latency", "20", "--beats", "4", "--prefetch", "4", "--chunks", "8"]),
    Bench("bench_record_results.py",
          "The record path's results per cycle: the release candidates' admission (issue 16, large S step 4)",
          lambda out: ["--depths", "8", "--groups", "1", "--messages", "60"]),
    Bench("bench_slot_store_litedram.py",
          "DRAM slot store through LiteDRAM's controller (issue 16 item 5)",
          lambda out: ["--burst-beats", "16", "--commands", "1500"]),
    Bench("bench_engines_litedram.py",
          "Two engines, two AXI IDs, through LiteDRAM's controller (issue 16, large S step 4)",
          lambda out: ["--commands", "1500"]),
)


# Scripts in bench/ that are not benchmarks: this runner, and the suite-under-load check
# (`make test-under-load`, docs/simulation.md), which runs the whole test suite three times.
NOT_BENCHMARKS = ("run_all.py", "load_suite.py")


def check_catalogue() -> list[str]:
    """Problems with :data:`BENCHES`: a script in bench/ not listed, or a section not in the docs."""
    listed = {b.script for b in BENCHES}
    problems = [f"bench/{p.name} is not in bench/run_all.py" for p in sorted(BENCH.glob("*.py"))
                if p.name not in NOT_BENCHMARKS and p.name not in listed]
    problems += [f"bench/{b.script} is listed but does not exist" for b in BENCHES
                 if not (BENCH / b.script).is_file()]
    headings = {ln.lstrip("#").strip() for ln in DOCS.read_text().splitlines() if ln.startswith("#")}
    problems += [f"docs/benchmarks.md has no section {b.section!r} (for {b.script})"
                 for b in BENCHES if b.section not in headings]
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print script, quick arguments, section")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="scripts to run (e.g. bench_core.py)")
    ap.add_argument("--out", type=Path, default=Path("build/bench_quick"),
                    help="work directory for the place-and-route benchmarks")
    args = ap.parse_args()
    problems = check_catalogue()
    if problems:
        print("\n".join(f"run_all: {p}" for p in problems), file=sys.stderr)
        return 2
    benches = [b for b in BENCHES if not args.only or b.script in args.only]
    if args.list:
        for b in benches:
            print(f"bench/{b.script} {' '.join(b.args(args.out))}  ->  docs/benchmarks.md, {b.section!r}")
        return 0
    summary = []
    t_all = time.perf_counter()
    for b in benches:
        cmd = [sys.executable, str(BENCH / b.script), *b.args(args.out)]
        print(f"\n==== bench/{b.script} {' '.join(cmd[2:])}\n==== figures belong in "
              f"docs/benchmarks.md, section \"{b.section}\"", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.run(cmd).returncode
        summary.append((b, rc, time.perf_counter() - t0))
    print(f"\n==== summary ({(time.perf_counter() - t_all) / 60:.1f} min)")
    for b, rc, s in summary:
        print(f"{'ok    ' if rc == 0 else f'FAILED ({rc})'}  {s:6.0f} s  bench/{b.script}  ->  "
              f"\"{b.section}\"")
    return 1 if any(rc for _, rc, _ in summary) else 0


if __name__ == "__main__":
    sys.exit(main())
