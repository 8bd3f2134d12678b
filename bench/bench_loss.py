"""All-reduce time and resends under datagram loss: 3 site processes, ``wanreduce serve``.

For each loss rate (default 0, 1 %, 10 %, applied independently per datagram in both directions
by a ``host/faults.py`` ``FaultProxy`` in this process; the loss-free baseline goes through the
same proxy), ``--sites`` site processes all-reduce a ``--mib`` MiB float32 tensor ``--runs``
times (scale agreement included, as a default call does). Before each call the sites meet at a
barrier; a call's time is the slowest site's ``allreduce`` wall time. Prints per loss rate the
median call time, its ratio to the loss-free median, the resent fraction (retransmissions /
contributions sent for the first time), the proxy's lost datagrams and any failures.

Run: ``.venv/bin/python bench/bench_loss.py [--runs 5] [--mib 1] [--slots S] [--json FILE]``
(``--slots``: the server's ``--slots``; default: serve's own default).

``--wan SCHEDULE@MEMORY,...``: instead, WAN-link loss recovered by NACKs over the emulator
(``wanreduce emulate --json`` on ``--topology``, rate x ``--rate-scale``, latency x
``--time-scale``, ``--bytes`` per site, ``--rounds``; loss per WAN link copy, seed = run
index): per loss rate and run the mean round time, the NACK names the forwarder carried per
(member, chunk) asked for (mean and most for one: the start-up bursts of issue 15), NACKs sent,
chunks named that their member had not sent (``nack_unknown``) and resends; medians of
``--runs``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time

import numpy as np
from bench_driver import write_json  # the same --json report

from wanreduce.emulator.site_processes import SiteProcesses, exit_reason
from wanreduce.host.faults import FaultProxy, FaultSpec


def start_server(sites: int, slots: int | None) -> tuple[subprocess.Popen, tuple[str, int]]:
    """``wanreduce serve`` with one group of ``sites`` members and job 0 enabled."""
    extra = ["--slots", str(slots)] if slots else []
    p = subprocess.Popen(
        [sys.executable, "-c", "from wanreduce.cli import main; main()", "serve", "--port", "0",
         "--group", "0:" + ",".join(map(str, range(sites))), "--job", "0", "--quiet", *extra],
        stdout=subprocess.PIPE, text=True,
    )
    host, port = p.stdout.readline().strip().split(":")
    return p, (host, int(port))


def _site(i: int, addr, elements: int, runs: int, barrier, client_kw: dict, q) -> None:
    """One site process (``SiteProcesses`` target): ``runs`` timed calls, then one report."""
    from wanreduce.host.driver import AggregatorClient

    try:
        rng = np.random.default_rng(i)
        times, err = [], None
        with AggregatorClient(addr, sender_id=i, **client_kw) as c:
            for r in range(runs):
                x = rng.standard_normal(elements).astype(np.float32)
                try:
                    barrier.wait(timeout=600)  # broken if another site failed
                    t = time.perf_counter()
                    c.allreduce(x, job=0, group=0, round=r, out=x)
                except Exception as exc:  # noqa: BLE001 - reported by the parent
                    err = f"{type(exc).__name__}: {exc}"
                    break
                times.append(time.perf_counter() - t)
            st = c.stats
            q.put((i, (times, st.chunks, st.retransmissions, err,
                       (getattr(st, "fast_resends", None), getattr(st, "timer_resends", None),
                        getattr(st, "recovery_resends", None), getattr(st, "sack_resends", None),
                        getattr(st, "probes", None), c.timer.rto, c.timer.srtt,
                        getattr(c.timer, "min_rtt", None)))))  # (None: a driver before these)
    except Exception as exc:  # noqa: BLE001
        q.put((i, ([], 0, 0, f"{type(exc).__name__}: {exc}", ())))


def run_case(addr, loss: float, *, sites: int, mib: float, runs: int, seed: int,
             client_kw: dict) -> dict:
    """One loss rate: ``runs`` calls of every site through a fresh proxy; medians and counts.
    The site processes are started and watched by the emulator's one launcher
    (``emulator/site_processes.py``): a site that fails or dies aborts the barrier."""
    spec = FaultSpec(loss=loss)
    elements = int(mib * (1 << 20)) // 4
    ctx = mp.get_context("spawn")
    with FaultProxy(addr, to_aggregator=spec, to_client=spec, seed=seed) as px:
        barrier = ctx.Barrier(sites)
        with SiteProcesses(ctx, sites, _site, lambda i: (
                i, px.address, elements, runs, barrier, client_kw), name="loss-site") as procs:
            procs.start()
            got = procs.collect(lifetime=600 + runs * 2 * client_kw["timeout"],
                                after_failure=4 * client_kw["timeout"] + 10,
                                is_failure=lambda rep: rep[3] is not None,
                                on_failure=barrier.abort)
        lost = px.counts["up_lost"] + px.counts["down_lost"]
    outs = [got.reports[i] for i in sorted(got.reports)]
    errs = [o[3] for o in outs if o[3]]
    errs += [f"site {i}: died ({exit_reason(c)})" for i, c in got.died.items()]
    errs += [f"site {i}: no report ({why})" for i, why in got.given_up.items()]
    per_call = ([max(o[0][k] for o in outs) for k in range(min(len(o[0]) for o in outs))]
                if outs and len(outs) == sites else [])
    chunks = sum(o[1] for o in outs)
    retx = sum(o[2] for o in outs)
    return {"loss": loss, "calls_s": per_call,
            "median_s": statistics.median(per_call) if per_call else float("nan"),
            "chunks": chunks, "retransmissions": retx, "resent": retx / max(1, chunks),
            "lost": lost, "errors": errs,
            "fast_timer_recovery_sack_probes_rto_srtt_minrtt": [o[4] for o in outs]}


def wan_part(args: argparse.Namespace) -> list[dict]:
    """NACKs per recovered chunk over the emulated WAN (module docstring, ``--wan``): the
    emulator benchmark's loss part (``bench_emulator.loss_part``) for these configurations."""
    from bench_emulator import loss_part

    args.loss_configs = args.wan
    args.losses = ",".join(f"{x:g}" for x in args.loss)
    return loss_part(args)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--mib", type=float, default=1.0)
    ap.add_argument("--sites", type=int, default=3)
    ap.add_argument("--slots", type=int, default=None, help="serve --slots (default: serve's)")
    ap.add_argument("--loss", type=float, nargs="+", default=[0.0, 0.01, 0.10])
    ap.add_argument("--json", default=None)
    ap.add_argument("--wan", default=None, help="SCHEDULE@MEMORY,...: NACKs over the emulator")
    ap.add_argument("--topology", default="nine-city")
    ap.add_argument("--bytes", default="1MB")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rate-scale", type=float, default=1e-3)
    ap.add_argument("--time-scale", type=float, default=4.0)
    args = ap.parse_args()
    if args.wan:
        rows = wan_part(args)
        print(f"load average {os.getloadavg()}")
        write_json(args.json, {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                               "loadavg": os.getloadavg(), "args": vars(args)}, rows)
        return
    rows = []
    for k, loss in enumerate(args.loss):
        srv, addr = start_server(args.sites, args.slots)  # fresh: every site's chunks start at 0
        try:
            row = run_case(addr, loss, sites=args.sites, mib=args.mib, runs=args.runs,
                           seed=k + 1, client_kw={"timeout": 30.0})
        finally:
            srv.terminate()
            srv.wait(10)
        rows.append(row)
        base = rows[0]["median_s"]
        print(f"loss {loss:5.1%}: median {row['median_s'] * 1e3:8.1f} ms "
              f"({row['median_s'] / base:5.2f}x loss-free), resent {row['resent']:6.1%} "
              f"({row['retransmissions']} of {row['chunks']}), lost {row['lost']}, "
              f"calls {[round(t * 1e3) for t in row['calls_s']]} ms"
              + (f", FAILED: {row['errors']}" if row["errors"] else ""), flush=True)
        print("  per site (fast, timer, recovery, sack resends, probe rounds, final RTO, SRTT, min RTT):",
              [tuple(round(v, 4) if isinstance(v, float) else v for v in o)
               for o in row["fast_timer_recovery_sack_probes_rto_srtt_minrtt"]], flush=True)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpus": os.cpu_count(),
            "loadavg": os.getloadavg(), "args": vars(args)}
    print(f"load average {os.getloadavg()}")
    write_json(args.json, meta, rows)


if __name__ == "__main__":
    main()
