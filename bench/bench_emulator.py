"""The planner predicts reality: ``wanreduce emulate`` rounds vs ``wanreduce plan``; forwarder capacity.

``--part predict`` runs ``wanreduce emulate --json`` for every schedule x memory (each a fresh
set of processes), ``--runs`` times, on the scaled topology and prints one Markdown row per run: measured mean
round time, the planner's prediction of what runs (its round time, the driver's scale agreement
included; the agreement's part shown), their ratio, measured and predicted time to consensus (the plan's rounds), and the ranking of the
schedules by each; then the medians (min-max) over the runs and how often the ranking held.
``--part capacity`` measures how many datagram copies per second the forwarder
alone delivers (9-site all-to-all tree on nine-city, links too fast to limit, zero delay): one
host socket blasts contributions, plain sockets stand in for the aggregators. ``--part loss``
measures the cost of WAN-link loss recovered by NACKs: the mean round time at each of
``--losses`` for each ``--loss-configs`` schedule@memory, ``--runs`` times (medians, ratios).

Run: ``.venv/bin/python bench/bench_emulator.py [--part predict|capacity|both]
[--memory 64KiB,4MiB] [--schedules all-to-all,cliques-3,sharded] [--bytes 1MB] [--rounds 2]
[--rate-scale 1e-3] [--time-scale 4] [--runs 3] [--losses 0,0.01,0.05 --loss-configs cliques-3@4MiB,...]``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

from wanreduce import wire
from wanreduce.emulator.forwarder import ForwarderConfig, Routes, serve
from wanreduce.emulator.scaling import scale_topology
from wanreduce.packetize import AGG_HEADER_STRUCT
from wanreduce.planner.topology import load_topology


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def predict_part(a: argparse.Namespace) -> None:
    """Every schedule x memory, ``--runs`` times (the runs interleaved, so load drift hits every
    row alike): one row per run and the ranking per run and memory; then medians (min-max)."""
    print(f"topology {a.topology}, rate x{a.rate_scale:g}, time x{a.time_scale:g}, "
          f"{a.bytes} per site, {a.rounds} rounds, {a.runs} runs; load at start {load()}")
    print("| run | memory | schedule | plan | measured mean | predicted | ratio | of which agreement | "
          "measured to consensus | planner's time to consensus | late mean/max ms | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    got: dict[tuple[str, str], list[tuple[dict, float]]] = {}
    held: dict[str, list[bool]] = {}
    for k in range(a.runs):
        for mem in a.memory.split(","):
            rows = []
            for sched in a.schedules.split(","):
                before = load()
                d = emulate_json(a, sched, mem)
                if isinstance(d, str):
                    print(f"| {k} | {mem} | {sched} | FAILED: {d} |")
                    continue
                got.setdefault((mem, sched), []).append((d, os.getloadavg()[0]))
                k_eps = d["plan_rounds"]
                measured_eps = (sum(d["round_times"][:k_eps]) if k_eps <= len(d["round_times"])
                                else None)
                rows.append((sched, measured_eps, d["plan_time"],
                             sum(d["predicted_round_times"][:k_eps])))
                print(f"| {k} | {mem} | {sched} | {d['plan']} | {d['mean_round_time']:.3f} s | "
                      f"{d['predicted_mean']:.3f} s | {d['mean_round_time'] / d['predicted_mean']:.3f} | "
                      f"{sum(d['predicted_agreement']) / len(d['predicted_agreement']):.3f} s | "
                      f"{measured_eps:.3f} s ({k_eps} rounds) | {d['plan_time']:.3f} s | "
                      f"{d['late_mean'] * 1e3:.1f}/{d['late_max'] * 1e3:.0f} | {before} |"
                      if measured_eps is not None else f"| {k} | {mem} | {sched} | rounds < {k_eps} |",
                      flush=True)
            done = [r for r in rows if r[1] is not None]
            by_meas = [r[0] for r in sorted(done, key=lambda r: r[1])]
            by_plan = [r[0] for r in sorted(done, key=lambda r: r[2])]
            by_runs = [r[0] for r in sorted(done, key=lambda r: r[3])]
            held.setdefault(mem, []).append(by_meas == by_plan)
            print(f"\nrun {k}, {mem}: ranking by time to consensus: measured {' < '.join(by_meas)}; "
                  f"planner (its plans) {' < '.join(by_plan)} "
                  f"({'holds' if by_meas == by_plan else 'DIFFERS'}); planner's model of what runs "
                  f"{' < '.join(by_runs)} ({'holds' if by_meas == by_runs else 'DIFFERS'})\n",
                  flush=True)
    if a.runs > 1:
        predict_medians(got, held)


def predict_medians(got: dict[tuple[str, str], list[tuple[dict, float]]],
                    held: dict[str, list[bool]]) -> None:
    """Median (min-max) over the runs of each schedule x memory, and how often the ranking held."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_train_schedules import spread  # the same median (min–max) as the training tables

    print("| memory | schedule | plan | runs | measured mean round | predicted | ratio | "
          "measured to consensus | planner's time to consensus | late max ms | load after |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (mem, sched), runs in got.items():
        ds = [d for d, _ in runs]
        eps = [sum(d["round_times"][:d["plan_rounds"]]) for d in ds
               if d["plan_rounds"] <= len(d["round_times"])]
        d0 = ds[0]
        print(f"| {mem} | {sched} | {d0['plan']} | {len(ds)} | "
              f"{spread([d['mean_round_time'] for d in ds], '{:.2f}')} s | "
              f"{d0['predicted_mean']:.3f} s | "
              f"**{spread([d['mean_round_time'] / d['predicted_mean'] for d in ds], '{:.3f}')}** | "
              f"{spread(eps, '{:.2f}') + ' s' if eps else '-'} | {d0['plan_time']:.2f} s | "
              f"{min(d['late_max'] for d in ds) * 1e3:.0f}–{max(d['late_max'] for d in ds) * 1e3:.0f} | "
              f"{min(x for _, x in runs):.1f}–{max(x for _, x in runs):.1f} |")
    for mem, ok in held.items():
        print(f"{mem}: the planner's ranking held in {sum(ok)}/{len(ok)} runs")


def emulate_json(a: argparse.Namespace, sched: str, mem: str, *extra: str) -> dict | str:
    """One ``wanreduce emulate --json`` run in a fresh process: its JSON, or its error text."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "run.json")
        res = subprocess.run(
            [sys.executable, "-m", "wanreduce.cli", "emulate", "--topology", a.topology,
             "--schedule", sched, "--memory", mem, "--bytes", a.bytes, "--rounds",
             str(a.rounds), "--rate-scale", str(a.rate_scale), "--time-scale",
             str(a.time_scale), "--json", out, *extra], capture_output=True, text=True,
            check=False)
        if res.returncode != 0 or not os.path.exists(out):  # the errors that are not echoes
            why = [e for e in res.stderr.strip().split("; ") if "BrokenBarrierError" not in e]
            return "; ".join(why)[:400]
        return json.load(open(out))


def loss_part(a: argparse.Namespace) -> list[dict]:
    """Cost of WAN-link loss recovered by NACKs: mean round time at each ``--losses`` rate,
    ``--runs`` times, the rates interleaved within each repetition (so load drifts hit all);
    also how many NACKs one lost contribution cost (``bench_loss.py --wan``). Returns the rows."""
    losses = [float(x) for x in a.losses.split(",")]
    rows: list[dict] = []
    for spec in a.loss_configs.split(","):
        sched, mem = spec.split("@")
        print(f"\n{sched} at {mem}, {a.bytes} per site, {a.rounds} rounds, rate x{a.rate_scale:g}, "
              f"time x{a.time_scale:g}; load at start {load()}")
        print("| run | loss | mean round | lost copies | NACKs sent | contributions resent | "
              "NACK names per chunk asked (mean / max) | named before sent | checked | load |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        got: dict[float, list[dict]] = {x: [] for x in losses}
        for k in range(a.runs):
            for x in losses:
                before = load()
                d = emulate_json(a, sched, mem, "--loss", str(x), "--seed", str(k))
                if isinstance(d, str):
                    print(f"| {k} | {x:g} | FAILED: {d} | | | | | | | {before} |", flush=True)
                    continue
                fw, st = d["forwarder"], d["site_stats"]
                r = {"schedule": sched, "memory": mem, "loss": x, "run": k,
                     "round_s": d["mean_round_time"], "lost": d["lost"],
                     # NACK bursts (issue 15): names the forwarder carried per (member, chunk)
                     "per_chunk": fw.get("nack_names", 0) / max(1, fw.get("nacked_pairs", 0)),
                     "per_chunk_max": fw.get("nack_names_max", 0),
                     **{y: sum(s.get(y, 0) for s in st)
                        for y in ("nacks_sent", "nack_resends", "nack_unknown")},
                     "checked": d["checked"], "load": before}
                got[x].append(r)
                print(f"| {k} | {x:g} | {r['round_s']:.3f} s | {r['lost']} | {r['nacks_sent']} | "
                      f"{r['nack_resends']} | {r['per_chunk']:.2f} / {r['per_chunk_max']} | "
                      f"{r['nack_unknown']} | {r['checked']} | {before} |", flush=True)
        base = statistics.median(r["round_s"] for r in got[losses[0]]) if got[losses[0]] else None
        for x in losses:
            if got[x]:
                t = [r["round_s"] for r in got[x]]
                m = statistics.median(t)
                print(f"{sched} {mem} loss {x:g}: median {m:.3f} s (min {min(t):.3f}, max "
                      f"{max(t):.3f}, {len(t)} runs)"
                      + (f", {m / base:.2f}x loss {losses[0]:g}" if base else "")
                      + f"; NACK names per chunk asked: median "
                      f"{statistics.median(r['per_chunk'] for r in got[x]):.2f}, most for one "
                      f"{statistics.median(r['per_chunk_max'] for r in got[x]):g}", flush=True)
            rows += got[x]
    return rows


def capacity_part(a: argparse.Namespace, datagrams: int = 20000) -> None:
    topo = scale_topology(load_topology("nine-city"), 1e3, 1e-9)  # 10 Tb/s links, ~no delay
    sinks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(topo.n)]
    for s in sinks:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        s.bind(("127.0.0.1", 0))
        s.settimeout(0.2)
    cfg = ForwarderConfig([s.getsockname() for s in sinks],
                          [(u, v, float(bw) / 8, float(lat)) for (u, v), bw, lat
                           in zip(topo.directed, topo.dir_bw, topo.dir_latency, strict=True)],
                          [float(r) for r in topo.line_rate], lifetime=300)
    conn, child = multiprocessing.Pipe()
    proc = multiprocessing.get_context("spawn").Process(target=serve, args=(cfg, child), daemon=True)
    proc.start()
    _, edges = conn.recv()
    members = tuple(range(topo.n))
    conn.send(("routes", Routes({0: members}, {(0, s): topo.multicast_tree(s, [m for m in members if m != s])
                                                for s in members})))
    conn.recv()
    counts = [0] * topo.n
    stop = threading.Event()

    def drain(i: int) -> None:
        while not stop.is_set():
            try:
                sinks[i].recv(65536)
                counts[i] += 1
            except (TimeoutError, OSError):
                pass

    threads = [threading.Thread(target=drain, args=(i,), daemon=True) for i in range(topo.n)]
    for t in threads:
        t.start()
    host = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    payload = struct.pack("<499i", *range(499))
    t0 = time.perf_counter()
    for c in range(datagrams):
        # closed loop: at most 256 not yet read by the forwarder (its local copy is the receipt),
        # so the measure is the forwarder's rate, not the kernel dropping a blast
        while c - counts[0] >= 256:
            time.sleep(0.0005)
        host.sendto(AGG_HEADER_STRUCT.pack(wire.MAGIC, wire.VERSION, 1, 0, 0, 0, 0, c, 0, 0, 499, 0)
                    + payload, tuple(edges[0]))
    want = datagrams * topo.n
    end = time.monotonic() + 120
    while sum(counts) < want and time.monotonic() < end:
        time.sleep(0.01)
    took = time.perf_counter() - t0
    conn.send(("stop",))
    st = conn.recv()[1]
    proc.join(10)
    stop.set()
    got = sum(counts)
    print(f"forwarder capacity: {datagrams} contributions of 2018 B from one site to 8 others "
          f"(+ own): {got}/{want} datagrams delivered in {took:.2f} s = "
          f"{(got - counts[0]) / took:,.0f} remote copies/s ({(got - counts[0]) * 2018 / took / 1e6:.1f} "
          f"MB/s), {datagrams / took:,.0f} contributions/s; late mean "
          f"{st['late_mean'] * 1e3:.2f} ms; load {load()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["predict", "capacity", "both", "loss"], default="both")
    ap.add_argument("--topology", default="nine-city")
    ap.add_argument("--memory", default="64KiB,4MiB")
    ap.add_argument("--schedules", default="all-to-all,cliques-3,sharded")
    ap.add_argument("--bytes", default="1MB")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rate-scale", type=float, default=1e-3)
    ap.add_argument("--time-scale", type=float, default=4.0)
    ap.add_argument("--losses", default="0,0.01,0.05", help="--part loss: WAN loss rates")
    ap.add_argument("--loss-configs", default="cliques-3@4MiB,all-to-all@64KiB",
                    help="--part loss: schedule@memory, comma-separated")
    ap.add_argument("--runs", type=int, default=3,
                    help="--part predict and loss: repetitions (medians)")
    a = ap.parse_args()
    if a.part in ("capacity", "both"):
        capacity_part(a)
    if a.part in ("predict", "both"):
        predict_part(a)
    if a.part == "loss":
        loss_part(a)


if __name__ == "__main__":
    main()
