"""NACKs one lost contribution costs with several receivers (WAN-link loss recovery by NACKs).

Run: .venv/bin/python bench/bench_nack_burst.py [--drop S,K,R] [--loss P --seeds 1 2 3] [--runs 3]
     .venv/bin/python bench/bench_nack_burst.py --cpu [--runs 5]
Config: 4 sites on the SQUARE topology of tests/test_emulator_network.py (two-hop routes),
all-to-all, 64 KiB aggregators, 40 kB per site, ``WanEmulator`` (forwarder process). ``--drop
S,K,R`` (default 2,0,1): exactly one copy lost, sender S's chunk K on its way to site R
(``WanEmulator(drop=)``; chunk 0 is the agreement), one round, ``--runs`` times; ``--loss P``:
instead, random loss P on every WAN link (``--seeds``), two rounds. Prints per run the NACK
names the forwarder carried (in all, and the most for one chunk), the NACKs answered as unknown
(chunks their member had not sent), the resends, and the wall time (process start-up included).
Every result is checked bit for bit (``run_rounds``); a wrong one is an error, never printed.

``--cpu``: instead, the CPU of the requester's per-probe-answer path, ``WanRecovery.missing``
(thread CPU per call, median of ``--runs`` runs of 300 calls), on 32-row answers of a 4-member
group against a software aggregator: ``held`` (every member holds every row; 992 records of
earlier NACKs linger, all already timed: the case where the requester has no NACK round trip to
time) and ``lacking`` (member 1 lacks rows 0-30 and holds row 31: NACKs by the gap, paced).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from test_emulator_network import SQUARE  # noqa: E402
from test_nack_pacing import _Window  # noqa: E402

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


def missing_cpu(runs: int, calls: int = 300) -> dict[str, float]:
    """Microseconds of thread CPU per ``WanRecovery.missing`` call, per scenario (module
    docstring), median of ``runs``."""
    from wanreduce.host.chunk_probe import ProbeAnswer
    from wanreduce.host.driver import AggregatorClient
    from wanreduce.host.softagg import SoftAggregator

    rows = list(range(32))
    gap = [0b1101] * 31 + [0b1111]  # member 1's rows 0-30 lost: its row 31 shows the gap
    out: dict[str, list[float]] = {"held": [], "lacking": []}
    with SoftAggregator(slots=64, elements=16, groups=2, jobs=1) as agg:
        agg.configure(groups={0: (0, 1, 2, 3)}, jobs=[0])
        for _ in range(runs):
            with AggregatorClient(agg.address, sender_id=0, elements_per_packet=16, window=4,
                                  rtt=0.002, timeout=20, wan_recovery=True) as c:
                win = _Window()  # what missing() reads of a SendWindow: 32 rows, ours held
                win.done, win.held = bytearray(32), bytearray(b"\1" * 32)
                for k in range(32):  # 992 earlier copies NACKed once, then come: all timed
                    for bms in (gap, [0b1111] * 32):
                        c.wan.missing(ProbeAnswer(rows, bms, 0, time.monotonic()), win,
                                      job=0, group=0, round_id=0, first=10_000 + 32 * k)
                for name, bms in (("held", [0b1111] * 32), ("lacking", gap)):
                    ans = ProbeAnswer(rows, bms, 0, time.monotonic())
                    t0 = time.thread_time_ns()
                    for _ in range(calls):
                        c.wan.missing(ans, win, job=0, group=0, round_id=0, first=50)
                    out[name].append((time.thread_time_ns() - t0) / calls / 1e3)
    return {k: statistics.median(v) for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drop", default="2,0,1", help="S,K,R: sender S's chunk K lost to site R")
    ap.add_argument("--loss", type=float, default=0.0, help="random loss instead of --drop")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cpu", action="store_true", help="WanRecovery.missing's CPU per call")
    args = ap.parse_args()
    print(f"load average {' / '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    if args.cpu:
        got = missing_cpu(args.runs)
        print("WanRecovery.missing, us of thread CPU per call (median of "
              f"{args.runs} x 300): " + ", ".join(f"{k} {v:.1f}" for k, v in got.items()))
        return
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
