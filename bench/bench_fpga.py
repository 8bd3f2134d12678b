"""FPGA timing and utilisation of the core on the ECP5-45F (docs/benchmarks.md, "FPGA timing and
utilisation"): ``wanreduce report`` for each configuration, one markdown row each.

    .venv/bin/python bench/bench_fpga.py                      # default + largest configurations
    .venv/bin/python bench/bench_fpga.py --config slots=64,elements=512 --seeds 3
    .venv/bin/python bench/bench_fpga.py --quick    # one small core (P=1, S=4, E=32): the flow works
    .venv/bin/python bench/bench_fpga.py --config ports=2 --first-seed 6 --seeds 5   # seeds 6-10
    .venv/bin/python bench/bench_fpga.py --netlist OLD/core.json --seeds 5  # place another netlist
    .venv/bin/python bench/bench_fpga.py --slot-memory dram --no-pnr --config slots=64 --config slots=256
        # the core with its sums in DRAM, yosys only: cells per S (docs/large_slots.md)
    .venv/bin/python bench/bench_fpga.py --pending words --config slots=4096,elements=2
        # the reducer's pending bits as block-RAM words (large S), placed
    .venv/bin/python bench/bench_fpga.py --slot-memory dram --elaborate-only --config slots=32768
        # no synthesis: elaboration + RTLIL time, peak memory, register and memory bits
    .venv/bin/python bench/bench_fpga.py --slot-memory records --outstanding 64 --no-pnr --config slots=32768
        # the DRAM engines' in-flight tables at 64 entries instead of 256: their logic cells

Synthesis runs once per configuration, place-and-route once per seed; Fmax is the median over
the seeds (placement noise is several MHz), with the range.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from wanreduce.commands.report import (
    PLACER,
    PLACERS,
    place_and_route,
    rtlil_bits,
    synthesise,
    work_tag,
    yosys_cells,
)
from wanreduce.hdl.core import CoreParams, WanreduceCore
from wanreduce.hdl.params import PENDING_STORES, SLOT_MEMORIES

CONFIGS = [
    {},  # the default configuration
    {"slots": 64, "elements": 256},  # largest slots x elements in the 108 DP16KD (see docs)
]
QUICK = {"ports": 1, "slots": 4, "elements": 32}  # bench/run_all.py: the flow end to end, fast


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", action="append", default=None,
                    help="comma-separated core parameters, e.g. slots=64,elements=512")
    ap.add_argument("--out", type=Path, default=Path("build/bench_fpga"))
    ap.add_argument("--seeds", type=int, default=1, help="number of placement seeds")
    ap.add_argument("--first-seed", type=int, default=1, help="the first seed (seeds F..F+N-1)")
    ap.add_argument("--netlist", type=Path, default=None,
                    help="place this synthesised core.json (e.g. an older commit's) instead of "
                         "synthesising the configuration")
    ap.add_argument("--placer", choices=PLACERS, default=PLACER, help="nextpnr placer")
    ap.add_argument("--jobs", type=int, default=1, help="place-and-route runs at a time")
    ap.add_argument("--quick", action="store_true", help=f"only the small core {QUICK}")
    ap.add_argument("--slot-memory", choices=SLOT_MEMORIES, default="onchip",
                    help="where the core keeps its sums (dram: the AXI4 master port, docs/slot_store.md)")
    ap.add_argument("--pending", choices=PENDING_STORES, default="vector",
                    help="the reducer's pending store (words: block-RAM words, for large S; docs/large_slots.md)")
    ap.add_argument("--outstanding", type=int, default=None,
                    help="the DRAM engines' in-flight table (--slot-memory dram / records; default "
                         "DRAM_STORE_DEFAULTS'): what it costs in logic cells")
    ap.add_argument("--no-pnr", action="store_true",
                    help="yosys only: the cells of synth_ecp5 (LUT4, FF, DP16KD, LUT RAM, carry) and its time")
    ap.add_argument("--elaborate-only", action="store_true",
                    help="no synthesis: elaborate the core and convert it to RTLIL here (seconds, peak "
                         "memory of this process so far, flip-flop and memory bits before synthesis)")
    args = ap.parse_args()
    configs = [QUICK] if args.quick else CONFIGS if not args.config else [
        {k: int(v) for k, v in (kv.split("=") for kv in c.split(","))} for c in args.config]
    if args.elaborate_only:
        print("| slot memory | P | W | S | E | flip-flop bits (RTLIL) | memory bits (RTLIL, one copy) "
              "| elaborate + RTLIL | peak RSS |")
        print("|---|---|---|---|---|---|---|---|---|")
    elif args.no_pnr:
        print("| slot memory | P | W | S | E | LUT4 | FF | DP16KD | LUT RAM (DPR16X4) | CCU2C | synth |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
    else:
        print("| P | W | S | E | LUT4 | FF | DP16KD | Fmax (MHz), median [range] (per seed) | synth + P&R |")
        print("|---|---|---|---|---|---|---|---|---|")
    if args.outstanding is not None and args.slot_memory == "onchip":
        ap.error("--outstanding: only with --slot-memory dram or records (the DRAM engines' table)")
    for cfg in configs:
        p = dict(CoreParams(args.slot_memory, **cfg))
        if args.outstanding is not None:  # checked by the DRAM store (a power of two, 4..1024)
            p["outstanding"] = args.outstanding
        t0 = time.perf_counter()
        tag = work_tag(p, args.slot_memory, args.pending)
        if args.elaborate_only:
            from amaranth.back import rtlil

            regs, mems = rtlil_bits(rtlil.convert(WanreduceCore(slot_memory=args.slot_memory,
                                                                pending=args.pending, **p),
                                                  name="wanreduce_core"))
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB
            print(f"| {args.slot_memory} | {p['ports']} | {p['width']} | {p['slots']} | {p['elements']} "
                  f"| {regs} | {mems} | {time.perf_counter() - t0:.0f} s | {rss:.0f} MiB |", flush=True)
            continue
        if args.no_pnr:
            synthesise(p, args.out / tag, args.slot_memory, args.pending)
            c = yosys_cells(args.out / tag / "yosys_stat.txt")
            print(f"| {args.slot_memory} | {p['ports']} | {p['width']} | {p['slots']} | {p['elements']} "
                  f"| {c.get('LUT4', 0)} | {c.get('TRELLIS_FF', 0)} | {c.get('DP16KD', 0)} "
                  f"| {c.get('TRELLIS_DPR16X4', 0)} | {c.get('CCU2C', 0)} "
                  f"| {time.perf_counter() - t0:.0f} s |", flush=True)
            continue
        if args.netlist is None:
            synthesise(p, args.out / tag, args.slot_memory, args.pending)
        else:  # (the row's P/W/S/E are then the --config given, not read from the netlist)
            (args.out / tag).mkdir(parents=True, exist_ok=True)
            shutil.copy(args.netlist, args.out / tag / "core.json")

        def pnr(seed: int, d: Path = args.out / tag) -> dict:
            sd = d / f"seed{seed}"  # one directory per seed (nextpnr writes its log and report)
            sd.mkdir(exist_ok=True)
            shutil.copy(d / "core.json", sd / "core.json")
            return place_and_route(sd, seed=seed, placer=args.placer)

        seeds = range(args.first_seed, args.first_seed + args.seeds)
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            runs = list(pool.map(pnr, seeds))
        r = runs[-1]
        fmaxes = [min(a for a, _ in x["fmax"].values()) for x in runs]
        fm = f"{statistics.median(fmaxes):.1f}"
        if len(fmaxes) > 1:  # median [range] (seed F / F+1 / ...)
            fm += f" [{min(fmaxes):.1f}-{max(fmaxes):.1f}] ({' / '.join(f'{f:.1f}' for f in fmaxes)})"
        print(f"| {p['ports']} | {p['width']} | {p['slots']} | {p['elements']} | {r['lut4'][0]} "
              f"| {r['ff'][0]} | {r['dp16kd'][0]} / {r['dp16kd'][1]} | {fm} "
              f"| {time.perf_counter() - t0:.0f} s |", flush=True)


if __name__ == "__main__":
    main()
