"""NACKs one lost contribution costs with several receivers (WAN-link loss recovery by NACKs).

Run: .venv/bin/python bench/bench_nack_burst.py [--drop S,K,R] [--loss P --seeds 1 2 3] [--runs 3]
Config: 4 sites on the SQUARE topology of tests/test_emulator_network.py (two-hop routes),
all-to-all, 64 KiB aggregators, 40 kB per site, ``WanEmulator`` (forwarder process). ``--drop
S,K,R`` (default 2,0,1): exactly one copy lost, sender S's chunk K on its way to site R
(``WanEmulator(drop=)``; chunk 0 is the agreement), one round, ``--runs`` times; ``--loss P``:
instead, random loss P on every WAN link (``--seeds``), two rounds. Prints per run the NACK
names the forwarder carried (in all, and the most for one chunk), the NACKs answered as unknown
(chunks their member had not sent), the resends, and the wall time (process start-up included).
Every result is checked bit for bit (``run_rounds``); a wrong one is an error, never printed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from test_emulator_network import SQUARE  # noqa: E402

from wanreduce.emulator.runner import run_rounds  # noqa: E402
from wanreduce.emulator.wan_emulator import WanEmulator  # noqa: E402
from wanreduce.planner import schedules  # noqa: E402
from wanreduce.planner.group_table import group_table  # noqa: E402
from wanreduce.planner.topology import topology_from_dict  # noqa: E402


def one_run(*, drop: tuple[int, int, int] | None, loss: float, seed: int) -> dict[str, float]:
    """One run of the configuration (module docstring): its NACK counters."""
    table = group_table(schedules.all_to_all(4))
    rounds = 1 if drop else 2
    with WanEmulator(topology_from_dict(SQUARE), memory=64 << 10, loss=loss, seed=seed,
                     drop=(drop,) if drop else (), lifetime=200) as net:
        net.configure(table, jobs=[0])
        t0 = time.monotonic()
        res = run_rounds(net, table, nbytes=40_000, rounds=rounds, timeout=20, lifetime=150)
        wall = time.monotonic() - t0
        c = net.stats()["counters"]
    if res.errors:
        raise RuntimeError("; ".join(res.errors))
    st = {k: sum(r.stats[k] for r in res.reports) for k in ("nack_unknown", "nack_resends")}
    return {"names": c["nack_names"], "most": c["nack_names_max"], **st, "wall_s": wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drop", default="2,0,1", help="S,K,R: sender S's chunk K lost to site R")
    ap.add_argument("--loss", type=float, default=0.0, help="random loss instead of --drop")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    print(f"load average {' / '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    if args.loss:
        runs = [dict(drop=None, loss=args.loss, seed=s) for s in args.seeds]
    else:
        s_, k_, r_ = (int(v) for v in args.drop.split(","))
        runs = [dict(drop=(s_, k_, r_), loss=0.0, seed=i) for i in range(args.runs)]
    for kw in runs:
        r = one_run(**kw)
        print(f"{kw}: NACK names {r['names']} (most for one chunk {r['most']}), unknown "
              f"{r['nack_unknown']}, resends {r['nack_resends']}, {r['wall_s']:.1f} s", flush=True)
    print(f"load average at the end {' / '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
