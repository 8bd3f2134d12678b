"""FPGA timing and utilisation of the core on the ECP5-45F (docs/benchmarks.md, "FPGA timing and
utilisation"): ``wanreduce report`` for each configuration, one markdown row each.

    .venv/bin/python bench/bench_fpga.py                      # default + largest configurations
    .venv/bin/python bench/bench_fpga.py --config slots=64,elements=512
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from wanreduce.commands.report import run_report
from wanreduce.hdl.core import CoreParams

CONFIGS = [
    {},  # the default configuration
    {"slots": 128, "elements": 256},  # largest slots x elements in the 108 DP16KD (see docs)
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", action="append", default=None,
                    help="comma-separated core parameters, e.g. slots=64,elements=512")
    ap.add_argument("--out", type=Path, default=Path("build/bench_fpga"))
    args = ap.parse_args()
    configs = CONFIGS if not args.config else [
        {k: int(v) for k, v in (kv.split("=") for kv in c.split(","))} for c in args.config]
    print("| P | W | S | E | LUT4 | FF | DP16KD | Fmax (MHz) | synth + P&R |")
    print("|---|---|---|---|---|---|---|---|---|")
    for cfg in configs:
        p = dict(CoreParams(**cfg))
        t0 = time.perf_counter()
        tag = "-".join(f"{k[0]}{v}" for k, v in p.items())
        r = run_report(p, args.out / tag)
        fmax = min(a for a, _ in r["fmax"].values())
        print(f"| {p['ports']} | {p['width']} | {p['slots']} | {p['elements']} | {r['lut4'][0]} "
              f"| {r['ff'][0]} | {r['dp16kd'][0]} / {r['dp16kd'][1]} | {fmax:.1f} "
              f"| {time.perf_counter() - t0:.0f} s |", flush=True)


if __name__ == "__main__":
    main()
