"""Benchmark the whole core with its slots in DRAM: reducer beats per cycle and result latency
vs memory latency and vs memory bandwidth (simulated cycles; docs/benchmarks.md, "Aggregator
core with DRAM slots: beats per cycle vs memory latency and bandwidth").

bench_core.py's traffic and cocotb bench (``sim/tb_core_perf.py``) on the core built with
``slot_memory="dram"`` inside ``CoreDramHarness`` (delay lines of ``latency`` cycles on the AXI R
and B channels) with cocotbext-axi's ``AxiRam`` on ``m_axi_mem_*``. Throughput: every port sends
back-to-back contributions (one per port per chunk), egress always ready; the figure is the
steady-state rate of ``reducer.s_msg`` transfers (middle half of the beats) and, as bench_core
prints it, first to last beat; every result is checked against the sum of its contributions.
Bandwidth: R and W each move on that share of the cycles (random pauses in runs of 1..8; the
median over ``--seeds``; at full bandwidth nothing is random but the data: one seed). Latency:
cycles from the completing contribution's last beat in to its result's first beat out.

    .venv/bin/python bench/bench_core_dram.py --quick              # W 64, latency 20 and 200
    .venv/bin/python bench/bench_core_dram.py                      # W 64 and 256, full sweeps
    .venv/bin/python bench/bench_core_dram.py --width 64 --outstanding 512,1024 --bandwidth 1
    .venv/bin/python bench/bench_core_dram.py --slot-memory records --width 64 --latency 100 \
        --bandwidth 1 --pattern spread                             # the record path (records in DRAM too)
    .venv/bin/python bench/bench_core_dram.py --slot-memory records --width 64 --latency 100 \
        --bandwidth 1 --pattern spread --breakdown                 # ... and where its cycles go

``--breakdown`` (the record path): a second table from cocotb probes on the record path's
handshakes (``sim/tb_core_perf.py``'s ``Probes``), from the first beat into the reducer to the
last result: the sums store's commands per cycle and, of the cycles its command port was offered
a command and did not take it, how many its in-flight table was full and how many
``StoreReadSplit`` had no room; how often the payload gate's FIFO was full (its beats not taken:
the input's stall) and the gate's commands waited for the arbiter's FIFO; the record engine's
candidates in flight and the arbiter FIFO's level (mean / peak).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

from wanreduce.hdl.layouts import payload_beats
from wanreduce.hdl.params import DRAM_STORE_DEFAULTS

sys.path.insert(0, str(Path(__file__).parent))
from bench_core import CONFIGS, chunks_for, run  # noqa: E402 - the core bench's traffic and runner


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


R, P = "inner.reducer.", "inner.reducer.path."  # CoreDramHarness -> core -> RecordReducer -> DecisionOnRecords
RECORD_PROBES = {  # --breakdown: name -> the signal's path from the bench's top
    "gate_full": R + "request.beats__ready",  # low while offered: the payload gate's FIFO full
    "beats_valid": R + "request.beats__valid",
    "gate_cmd_valid": P + "sums.gate.cmd__valid", "gate_cmd_ready": P + "sums.gate.cmd__ready",
    "store_valid": P + "sums.arbiter.cmd__valid", "store_ready": P + "sums.arbiter.cmd__ready",
    "store_accept": P + "sums.store.accept", "store_full": P + "sums.store.full",
    "split_room": P + "sums.split.room", "emitter_reads": P + "sums.arbiter.e_valid",
    "c0_hold": P + "records.engine.c0_hold",
    "cands": P + "cands", "arbiter_level": P + "sums.arbiter.level", "store_used": P + "sums.store.used",
}


def breakdown(probes: dict) -> str:
    """One Markdown row of ``--breakdown`` from the bench's probe counts (module docstring)."""
    c, high, combos = probes["cycles"], probes["high"], probes["stall_combos"]
    offered = sum(n for bits, n in combos if "beats_valid" in bits.split())
    full = sum(n for bits, n in combos if "gate_full" not in bits.split() and "beats_valid" in bits.split())
    return (f"{probes['stalled']} | {full} of {offered} | {high.get('store_accept', 0) / c:.3f} | "
            f"{high.get('store_valid', 0) - high.get('store_accept', 0)} | {c - high.get('split_room', 0)} | "
            f"{high.get('store_full', 0)} | {high.get('emitter_reads', 0)} | "
            f"{high.get('gate_cmd_valid', 0) - high.get('gate_cmd_ready', 0)} | {high.get('c0_hold', 0)} | "
            f"{probes['mean']['cands']:.1f} / {probes['peak']['cands']} | "
            f"{probes['mean']['arbiter_level']:.1f} / {probes['peak']['arbiter_level']} | "
            f"{probes['mean']['store_used']:.0f} / {probes['peak']['store_used']} | {c}")


def point(cfg: dict, dram: dict, count: int, latency: int, bandwidth: float, spread: bool, seeds: int,
          beats: int, probes: dict | None = None) -> dict:
    """Throughput (median over seeds where the bandwidth throttle is random) and, at full
    bandwidth with the contributions together, the result latency (it does not depend on the
    pattern: one chunk at a time), at one memory latency and bandwidth."""
    chunks = chunks_for(count, cfg["width"], cfg["ports"], cfg["slots"], beats)
    mem = {"latency": latency, "bandwidth": bandwidth} | ({"probes": probes} if probes else {})
    runs = [run(cfg, "throughput", {"count": count, "chunks": chunks, "seed": s, "spread": spread} | mem, dram)
            for s in range(1, (seeds if bandwidth < 1 else 1) + 1)]
    steady = [r["steady_beats_per_cycle"] for r in runs]
    mid = runs[steady.index(statistics.median_low(steady))]
    lat = None
    if bandwidth == 1 and not spread:
        lat = run(cfg, "latency", {"count": count, "latency": latency, "bandwidth": bandwidth}, dram)["latency_cycles"]
    return {"steady": steady, "run": mid, "latency": lat}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="W 64, latency 200, bandwidth 1 and 0.5, one seed")
    ap.add_argument("--width", type=_ints, default=[64, 256], help="configurations of bench_core.py by width")
    ap.add_argument("--outstanding", type=_ints, default=[DRAM_STORE_DEFAULTS["outstanding"]],
                    help="the DRAM store's in-flight table sizes")
    ap.add_argument("--latency", type=_ints, default=[20, 50, 100, 200], help="memory latency (cycles, R and B each)")
    ap.add_argument("--bandwidth", type=_floats, default=[1.0, 0.75, 0.5],
                    help="R/W duty cycles below 1, swept at each --bandwidth-latency")
    ap.add_argument("--bandwidth-latency", type=_ints, default=[50])
    ap.add_argument("--payload", type=_ints, default=[1024], help="payload bytes per contribution")
    ap.add_argument("--pattern", type=lambda t: t.split(","), default=["together", "spread"],
                    help="together: a chunk's contributions arrive back to back (ADDs forward in the "
                         "store); spread: thousands of cycles apart, as over a WAN (every ADD reads memory)")
    ap.add_argument("--beats", type=int, default=8192, help="payload beats per throughput run (about)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--slot-memory", choices=["dram", "records"], default="dram",
                    help="dram: the sums in DRAM; records: the per-slot records too (the record path)")
    ap.add_argument("--breakdown", action="store_true",
                    help="--slot-memory records: where the cycles go (probes on the record path; module docstring)")
    args = ap.parse_args()
    if args.breakdown and args.slot_memory != "records":
        ap.error("--breakdown: only with --slot-memory records (it probes the record path)")
    if args.quick:
        args.width, args.latency, args.bandwidth, args.bandwidth_latency, args.seeds = [64], [200], [0.5], [200], 1
    if bad := set(args.pattern) - {"together", "spread"}:
        ap.error(f"--pattern: must be together and/or spread, got {', '.join(sorted(bad))}")
    os.environ.setdefault("COCOTB_LOG_LEVEL", "WARNING")
    print("| W | P+1 | N | contributions | memory latency | bandwidth | payload | reducer beats/cycle (steady, "
          "median) | per seed | first to last | stalled cycles | rows read / written per beat | latency (cycles) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []  # --breakdown's
    for width, ports, slots, e, _ in (c for c in CONFIGS if c[0] in args.width):
        cfg = dict(width=width, ports=ports, slots=slots, elements=e)
        for n in args.outstanding:
            dram = {} if n == DRAM_STORE_DEFAULTS["outstanding"] else {"outstanding": n}
            if args.slot_memory != "dram":  # "dram" left out: the Verilog (and build) cached before
                dram["slot_memory"] = args.slot_memory
            points = [(lat, 1.0) for lat in args.latency]
            points += [(lat, bw) for lat in args.bandwidth_latency for bw in args.bandwidth if bw < 1]
            for size, pattern, (lat, bw) in ((s, pt, x) for s in args.payload for pt in args.pattern for x in points):
                count = size // 4
                r = point(cfg, dram, count, lat, bw, pattern == "spread", args.seeds, args.beats,
                          RECORD_PROBES if args.breakdown else None)
                t = r["run"]
                if args.breakdown:
                    rows.append(f"| {width} | {n} | {pattern} | {lat} | {bw:g} | {breakdown(t['probes'])} |")
                beats = payload_beats(count, width)
                latency = "—" if r["latency"] is None else \
                    f"{max(r['latency'])} = {max(r['latency']) - beats} + {beats} payload beats"
                print(f"| {width} | {ports + 1} | {n} | {pattern} | {lat} | {bw:g} | {size} B | "
                      f"{statistics.median_low(r['steady']):.3f} | {', '.join(f'{x:.3f}' for x in r['steady'])} | "
                      f"{t['beats_per_cycle']:.3f} | {t['stall_cycles']} of {t['cycles']} | "
                      f"{t['row_reads'] / t['beats']:.2f} / {t['row_writes'] / t['beats']:.2f} | {latency} |",
                      flush=True)
    if rows:
        print("\n| W | N | contributions | memory latency | bandwidth | input stalled | of which the gate's FIFO "
              "full (of cycles offered) | store commands/cycle | store port offered, not taken | split no room "
              "| store table full | emitter's READ phase | gate commands waiting (arbiter FIFO full) | record "
              "C0 held | record candidates in flight (mean / peak) | arbiter FIFO (mean / peak) | store table "
              "used (mean / peak) | cycles probed |")
        print("|" + "---|" * 18)
        print("\n".join(rows))


if __name__ == "__main__":
    main()
