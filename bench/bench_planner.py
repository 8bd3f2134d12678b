"""Planner benchmark: optimiser time (9 and 64 sites), simulator vs analytic, crossovers, plots.

Run: .venv/bin/python bench/bench_planner.py [--quick]
Writes docs/img/plan_*.png and prints the markdown tables recorded in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import math
import platform
import random
import time
from pathlib import Path

from wanreduce.planner import plan_report as pr
from wanreduce.planner.optimiser import Optimiser, best_plan
from wanreduce.planner.roundmodel import RoundModel
from wanreduce.planner.topology import format_size, load_topology, topology_from_dict
from wanreduce.planner.wansim import simulate_round

ROOT = Path(__file__).resolve().parents[1]
IMG = ROOT / "docs" / "img"


def synthetic(n_regions: int = 8, per_region: int = 8, seed: int = 7):
    """64-site WAN: 8 metro regions of 8 sites (3 ms apart), regions joined by long-haul links."""
    rng = random.Random(seed)
    centres = [(rng.uniform(-60, 60), rng.uniform(-180, 180)) for _ in range(n_regions)]

    def km(a, b):
        la1, lo1, la2, lo2 = map(math.radians, (*a, *b))
        h = math.sin((la2 - la1) / 2) ** 2 + math.cos(la1) * math.cos(la2) * math.sin((lo2 - lo1) / 2) ** 2
        return 2 * 6371 * math.asin(math.sqrt(h))

    sites, links = [], []
    for r in range(n_regions):
        names = [f"r{r}s{i}" for i in range(per_region)]
        sites += names
        for i in range(per_region):  # metro ring + chords
            for j in (i + 1, i + 3):
                if j < per_region:
                    links.append({"a": names[i], "b": names[j],
                                  "latency_ms": round(rng.uniform(0.5, 3), 3), "bandwidth_gbps": 100})
    for r in range(n_regions):  # each region to its 3 nearest regions, via different sites
        near = sorted((km(centres[r], centres[q]), q) for q in range(n_regions) if q != r)[:3]
        for k, (dist, q) in enumerate(near):
            a, b = f"r{r}s{k}", f"r{q}s{(k + 4) % per_region}"
            if not any({lk["a"], lk["b"]} == {a, b} for lk in links):
                links.append({"a": a, "b": b, "latency_ms": round(dist * 1.5 * 0.005, 3),
                              "bandwidth_gbps": 10})
    return topology_from_dict({"name": "synthetic-64", "sites": sites, "links": links,
                               "defaults": {"fpga_memory": "64MiB", "line_rate_gbps": 10}})


def bench_optimiser(quick: bool) -> list[str]:
    rows = ["| sites | bytes | memory | model | optimiser time | best family | time to eps |",
            "|---|---|---|---|---|---|---|"]
    nine = load_topology("nine-city")
    for mem in (4 * 2**20, 64 * 2**20, 2**30, 16 * 2**30):
        for model in ("shared", "per-sender"):
            t0 = time.perf_counter()
            plans = Optimiser(nine.with_memory(mem), 10**7, memory_model=model).run()
            el = time.perf_counter() - t0
            b = best_plan(plans)
            rows.append(f"| 9 | 10 MB | {format_size(mem)} | {model} | {el:.2f} s | {b.family} | {b.time:.3f} s |")
    big = synthetic()
    for mem in ((64 * 2**20,) if quick else (4 * 2**20, 2**30)):
        t0 = time.perf_counter()
        plans = Optimiser(big.with_memory(mem), 10**7, time_budget=30 if quick else 45).run()
        el = time.perf_counter() - t0
        b = best_plan(plans)
        rows.append(f"| 64 | 10 MB | {format_size(mem)} | shared | {el:.1f} s | {b.family} ({b.schedule.label}) | {b.time:.3f} s |")
    return rows


MODELS = ("shared", "per-sender", "skew-only")
SIM_FAMILIES = ("all-to-all", "cliques-3", "tree", "exponential", "cliques-2", "cliques-4")


def bench_sim(quick: bool) -> list[str]:
    """Analytic round time against the simulator, paced at the planner's rates and unpaced.

    Unpaced (line-rate senders, unbounded FIFO queues) is run for the round-trip models only:
    skew-only senders are open loop and must be paced. Per family the range of errors.
    """
    rows = ["| topology | bytes | memory | model | family | round | analytic | paced sim | error "
            "| unpaced sim | error | peak queue |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    errs: dict[tuple[str, str, str], list[float]] = {}
    for name in ("nine-city", "nine-city-public-rtt"):
        for nbytes in ((10**7,) if quick else (10**7, 10**8)):
            for mem in ((4 * 2**20, 2**30) if quick else (4 * 2**20, 64 * 2**20, 2**30)):
                for model in MODELS:
                    topo = load_topology(name).with_memory(mem)
                    chunk = min(nbytes // 150, mem // 16)
                    plans = Optimiser(topo, nbytes, chunk_bytes=chunk, memory_model=model).run(SIM_FAMILIES)
                    m = RoundModel(topo, nbytes, chunk, model)
                    for fam in SIM_FAMILIES:
                        for i, rnd in enumerate(plans[fam].schedule.rounds[:2]):
                            a = m.round_time(rnd)
                            s = simulate_round(topo, rnd, nbytes, chunk, model, pacing=a.pacing())
                            err = s.time / a.time - 1
                            errs.setdefault((fam, model, "paced"), []).append(err)
                            un, uerr, queue = "-", "-", "-"
                            if model != "skew-only":
                                u = simulate_round(topo, rnd, nbytes, chunk, model)
                                e = u.time / a.time - 1
                                errs.setdefault((fam, model, "unpaced"), []).append(e)
                                un, uerr, queue = f"{u.time:.4f} s", f"{e:+.1%}", format_size(u.peak_queue)
                            if fam in ("all-to-all", "cliques-3"):
                                rows.append(f"| {name} | {format_size(nbytes)} | {format_size(mem)} | {model} | "
                                            f"{fam} | {i + 1} | {a.time:.4f} s ({a.bound}) | {s.time:.4f} s | "
                                            f"{err:+.1%} | {un} | {uerr} | {queue} |")
    rows += ["", "| family | model | paced sim vs analytic (min .. max) | unpaced sim vs analytic "
             "(min .. max) | rounds |", "|---|---|---|---|---|"]
    for fam in SIM_FAMILIES:
        for model in MODELS:
            p = errs.get((fam, model, "paced"), [])
            u = errs.get((fam, model, "unpaced"), [])
            us = f"{min(u):+.1%} .. {max(u):+.1%}" if u else "- (open loop needs pacing)"
            if p:
                rows.append(f"| {fam} | {model} | {min(p):+.1%} .. {max(p):+.1%} | {us} | {len(p)} |")
    worst = max(abs(e) for k, v in errs.items() if k[2] == "paced" for e in v)
    rows.append(f"\nworst |error| of the paced simulator over all families/rounds: {worst:.1%}")
    return rows


def bench_findings(quick: bool) -> list[str]:
    """Winner intervals over 4 MiB..16 GiB per topology, size and memory model; sweep plots."""
    nine = load_topology("nine-city")
    mems = [2**k for k in range(20, 35)]
    rows = ["| topology | bytes | model | best in-network family over memory (intervals) | paper's finding |",
            "|---|---|---|---|---|"]
    for name in ("nine-city",) if quick else ("nine-city", "nine-city-public-rtt"):
        topo = load_topology(name)
        for nbytes in (10**7,) if quick else (10**6, 10**7, 10**8, 10**9):
            for model in MODELS:
                ivs = pr.winner_intervals(topo, nbytes, 4 * 2**20, 16 * 2**30, memory_model=model)
                verdict = "reproduced" if pr.paper_verdict(ivs) else "not reproduced"
                rows.append(f"| {name} | {format_size(nbytes)} | {model} | "
                            f"{pr.format_intervals(ivs, topo.long_haul_bdp())} | {verdict} |")
    if quick:
        return rows
    IMG.mkdir(parents=True, exist_ok=True)
    map_bytes = [10**6, 3 * 10**6, 10**7, 3 * 10**7, 10**8, 3 * 10**8, 10**9]
    for model in MODELS:
        results = [pr.evaluate(nine, 10**7, m, memory_model=model) for m in mems]
        pr.plot_memory_sweep(results, str(IMG / f"plan_sweep_{model}.png"),
                             f"nine-city, 10 MB/sync, {model} slots", nine.long_haul_bdp())
        fams, ring = pr.winner_map(nine, map_bytes, mems, memory_model=model)
        pr.plot_map(map_bytes, mems, fams, ring, str(IMG / f"plan_map_{model}.png"),
                    f"nine-city, {model} slots")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--part", choices=("all", "optimiser", "sim", "findings"), default="all",
                    help="run one part only")
    args = ap.parse_args()
    print(f"# planner bench, {time.strftime('%Y-%m-%d')}, {platform.processor() or platform.machine()}, "
          f"python {platform.python_version()}\n")
    parts = (("optimiser", bench_optimiser), ("sim", bench_sim), ("findings", bench_findings))
    for title, fn in parts:
        if args.part in ("all", title):
            t0 = time.perf_counter()
            print(f"## {title}\n")
            print("\n".join(fn(args.quick)))
            print(f"\n({title}: {time.perf_counter() - t0:.0f} s)\n", flush=True)


if __name__ == "__main__":
    main()
