"""End-to-end RTL loopback throughput: simulated cycles per element.

Run: .venv/bin/python bench/bench_loopback.py [--quick]
N host-driver processes all-reduce through the generated core under cocotb (Verilator) with the
UDP bridge of sim/tb_loopback.py. Cycles are simulated clock cycles from the bridge's start to
its stop, so they include cycles the core idled while Python drivers and the bridge were busy:
an upper bound on what the core itself needs (bench/bench_core.py measures the core alone).
"""

from __future__ import annotations

import argparse
import os

from wanreduce.host.loopback import run_loopback

CASES = [
    dict(sites=3, elements=100_000, core=dict(ports=2, width=64, slots=16, elements=256, groups=4, jobs=2)),
    dict(sites=8, elements=100_000, core=dict(ports=8, width=512, slots=16, elements=256, groups=4, jobs=4)),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="first case only, 10 000 elements")
    args = ap.parse_args()
    cases = [{**CASES[0], "elements": 10_000}] if args.quick else CASES
    os.environ.setdefault("COCOTB_LOG_LEVEL", "WARNING")
    print("| sites | core | elements | packets | retransmissions | cycles | cycles/element | wall |")
    print("|---|---|---|---|---|---|---|---|")
    for c in cases:
        r = run_loopback(sites=c["sites"], elements=c["elements"], core=c["core"], seed=3)
        assert r.verified, r.mismatches
        core = f"W={r.core['width']} P={r.core['ports']} S={r.core['slots']} E={r.core['elements']}"
        print(f"| {r.sites} | {core} | {r.elements:,} | {r.packets_sent:,} | {r.retransmissions} | "
              f"{r.cycles:,} | {r.cycles_per_element:.2f} | {r.wall_s:.1f} s |", flush=True)


if __name__ == "__main__":
    main()
