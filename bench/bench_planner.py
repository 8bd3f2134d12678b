"""Planner benchmark: optimiser time (9 and 64 sites), simulator vs analytic, crossovers, plots,
cliques for 10/16/32/64 sites, and the sharded families against the ring all-reduce over
bytes x memory.

Run: .venv/bin/python bench/bench_planner.py [--quick]
         [--section all|optimiser|cliques|sim|findings|sharded|agreement]
     .venv/bin/python bench/bench_planner.py --write-synthetic 8x8 FILE   (topology YAML for
     ``wanreduce plan --topology FILE``)
Writes docs/img/plan_*.png and prints the markdown tables recorded in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import random
import time
from pathlib import Path

from wanreduce.planner import placement
from wanreduce.planner import plan_report as pr
from wanreduce.planner import schedules as S
from wanreduce.planner import sharded as SH
from wanreduce.planner.optimiser import Optimiser, best_plan
from wanreduce.planner.roundmodel import RoundModel
from wanreduce.planner.topology import format_size, load_topology, topology_from_dict
from wanreduce.planner.wansim import simulate_round

ROOT = Path(__file__).resolve().parents[1]
IMG = ROOT / "docs" / "img"


def synthetic_doc(n_regions: int = 8, per_region: int = 8, seed: int = 7) -> dict:
    """Synthetic WAN as a topology document: metro regions of sites (0.5-3 ms links, 100 Gb/s),
    each region linked to its 3 nearest regions (great-circle km x 1.5 at 5 us/km, 10 Gb/s)."""
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
            a, b = f"r{r}s{k % per_region}", f"r{q}s{(k + 4) % per_region}"
            if not any({lk["a"], lk["b"]} == {a, b} for lk in links):
                links.append({"a": a, "b": b, "latency_ms": round(dist * 1.5 * 0.005, 3),
                              "bandwidth_gbps": 10})
    return {"name": f"synthetic-{len(sites)}", "sites": sites, "links": links,
            "defaults": {"fpga_memory": "64MiB", "line_rate_gbps": 10}}


def synthetic(n_regions: int = 8, per_region: int = 8, seed: int = 7):
    """Synthetic WAN topology (default 64 sites: 8 regions x 8), see :func:`synthetic_doc`."""
    return topology_from_dict(synthetic_doc(n_regions, per_region, seed))


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
    placement._CACHE.clear()  # the first size pays the placement search, later ones reuse it
    for mem in ((64 * 2**20,) if quick else (4 * 2**20, 64 * 2**20, 2**30)):
        t0 = time.perf_counter()
        plans = Optimiser(big.with_memory(mem), 10**7).run()
        el = time.perf_counter() - t0
        b = best_plan(plans)
        rows.append(f"| 64 | 10 MB | {format_size(mem)} | shared | {el:.1f} s | {b.family} ({b.schedule.label}) | {b.time:.3f} s |")
    return rows


#: synthetic WANs for the cliques table: (regions, sites per region)
CLIQUE_WANS = ((5, 2), (4, 4), (8, 4), (8, 8))


def bench_cliques(quick: bool) -> list[str]:
    """Cliques of ~k: the old covering heuristic against the optimiser's choice (exact mixed
    sizes or the heuristic, whichever reaches epsilon first), rounds and time to epsilon."""
    rows = ["| sites | k | memory | covering heuristic: rounds, time to eps | optimiser's cliques-k: rounds, time to eps | schedule |",
            "|---|---|---|---|---|---|"]
    for regions, per in CLIQUE_WANS[:2] if quick else CLIQUE_WANS:
        topo = synthetic(regions, per)
        n = topo.n
        for mem in (4 * 2**20, 64 * 2**20):
            opt = Optimiser(topo.with_memory(mem), 10**7)
            for k in (2, 3, 4):
                if S.rotating_cliques(n, k).label.endswith("(covering heuristic)"):
                    old = opt.score(S.rotating_cliques(n, k, opt.tour()))  # what the planner did
                    new = opt.cliques_plan(k)
                    rows.append(f"| {n} | {k} | {format_size(mem)} | {old.rounds}, {old.time:.3f} s | "
                                f"{new.rounds}, {new.time:.3f} s | {new.schedule.label} |")
    return rows


def write_synthetic(spec: str, path: str) -> None:
    """Write the synthetic WAN ``RxP`` (regions x sites per region) as a topology YAML file."""
    import yaml

    regions, per = (int(x) for x in spec.lower().split("x"))
    Path(path).write_text(yaml.safe_dump(synthetic_doc(regions, per), sort_keys=False), encoding="utf-8")


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
                            err = s.time / a.transfer - 1  # the simulator replays the data
                            errs.setdefault((fam, model, "paced"), []).append(err)
                            un, uerr, queue = "-", "-", "-"
                            if model != "skew-only":
                                u = simulate_round(topo, rnd, nbytes, chunk, model)
                                e = u.time / a.transfer - 1
                                errs.setdefault((fam, model, "unpaced"), []).append(e)
                                un, uerr, queue = f"{u.time:.4f} s", f"{e:+.1%}", format_size(u.peak_queue)
                            if fam in ("all-to-all", "cliques-3"):
                                rows.append(f"| {name} | {format_size(nbytes)} | {format_size(mem)} | {model} | "
                                            f"{fam} | {i + 1} | {a.transfer:.4f} s ({a.bound}) | {s.time:.4f} s | "
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
    rows = ["| topology | bytes | model | best in-network family over memory (intervals) | paper's finding "
            "| between cliques-3 and all-to-all only |",
            "|---|---|---|---|---|---|"]
    for name in ("nine-city",) if quick else ("nine-city", "nine-city-public-rtt"):
        topo = load_topology(name)
        bdp = topo.long_haul_bdp()
        for nbytes in (10**7,) if quick else (10**6, 10**7, 10**8, 10**9):
            for model in MODELS:
                cache: dict = {}
                ivs = pr.winner_intervals(topo, nbytes, 4 * 2**20, 16 * 2**30, memory_model=model,
                                          cache=cache)
                own = pr.winner_intervals(topo, nbytes, 4 * 2**20, 16 * 2**30, memory_model=model,
                                          families=pr.PAPER_FINDING, cache=cache)
                verdict = "reproduced" if pr.paper_verdict(ivs) else "not reproduced"
                mark = "**reproduced**" if pr.paper_verdict(own) else "not reproduced"
                rows.append(f"| {name} | {format_size(nbytes)} | {model} | "
                            f"{pr.format_intervals(ivs, bdp)} | {verdict} | "
                            f"{mark}: {pr.format_intervals(own, bdp)} |")
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


SWEEP_TOPOLOGIES = ("nine-city", "aws-ten-region-rtt", "geant-2012")
SWEEP_BYTES = [10**6, 3 * 10**6, 10**7, 3 * 10**7, 10**8, 3 * 10**8, 10**9]
SWEEP_MEMORY = [4 * 2**20, 16 * 2**20, 64 * 2**20, 256 * 2**20, 2**30, 4 * 2**30, 16 * 2**30]
ABBR = {"sharded": "S", "hierarchical": "H", "all-to-all": "A", "tree": "T", "exponential": "E"}


def _abbr(family: str) -> str:
    return ABBR.get(family, family.replace("cliques-", "c").replace("grid-", "g"))


def bench_sharded(quick: bool) -> list[str]:
    """Best in-network plan / ring all-reduce at every bytes x memory point (shared slots).

    Cell: ratio with the sharded families (letter = winning in-network family), then in
    parentheses the ratio without them (the families before issue 14); > 1 means the ring wins.
    """
    byte_sizes = [10**6, 10**8, 10**9] if quick else SWEEP_BYTES
    memories = [4 * 2**20, 2**30, 16 * 2**30] if quick else SWEEP_MEMORY
    rows: list[str] = []
    losses: list[str] = []
    for name in SWEEP_TOPOLOGIES:
        topo = load_topology(name)
        t0 = time.perf_counter()
        rows += [f"\n**{name}** ({topo.n} sites, {len(topo.links)} links)\n",
                 "| bytes | " + " | ".join(format_size(m) for m in memories) + " |",
                 "|---|" + "---|" * len(memories)]
        for b in byte_sizes:
            cells = []
            for m in memories:
                res = pr.evaluate(topo, b, m, colocated=False)
                ring = res.plans["ring"].time
                best = res.best_in_network
                old = min(p.time for f, p in res.plans.items()
                          if pr.is_in_network(f) and f not in SH.FAMILIES)
                mark = "**" if best.time > ring else ""
                cells.append(f"{mark}{best.time / ring:.2f} {_abbr(best.family)}{mark} ({old / ring:.2f})")
                if best.time > ring:
                    losses.append(f"| {name} | {format_size(b)} | {format_size(m)} | {best.family} "
                                  f"{best.time:.3f} s ({'/'.join(sorted(set(best.bounds)))}) | "
                                  f"{ring:.3f} s | {best.time / ring:.2f} |")
            rows.append(f"| {format_size(b)} | " + " | ".join(cells) + " |")
        rows.append(f"\n({time.perf_counter() - t0:.0f} s for {name})")
    rows += ["\nPoints where the ring all-reduce is faster than every in-network plan:\n",
             "| topology | bytes | memory | best in-network (bound) | ring | ratio |",
             "|---|---|---|---|---|---|"] + (losses or ["| none | | | | | |"])
    rows += ["\nSimulator (simpy, 100 chunks per sender) against the model, sharded families:\n",
             "| topology | bytes | memory | family | model | paced | error | unpaced | error |",
             "|---|---|---|---|---|---|---|---|---|"]
    worst = 0.0
    for name in SWEEP_TOPOLOGIES:
        base = load_topology(name)
        for b in ((10**7,) if quick else (10**7, 10**8)):
            for mem in (4 * 2**20, 2**30):
                topo = base.with_memory(mem)
                chunk = min(b // 100, mem // 16)
                plans = Optimiser(topo, b, chunk_bytes=chunk).run()
                m = RoundModel(topo, b, chunk)
                for fam in SH.FAMILIES:
                    rnd = plans[fam].schedule.rounds[0]
                    a = m.round_time(rnd)
                    paced = simulate_round(topo, rnd, b, chunk, pacing=a.pacing()).time
                    free = simulate_round(topo, rnd, b, chunk).time
                    a_t = a.transfer  # the simulator replays the phases, not the agreement
                    worst = max(worst, abs(paced / a_t - 1))
                    rows.append(f"| {name} | {format_size(b)} | {format_size(mem)} | {plans[fam].schedule.label} "
                                f"| {a_t:.4f} s ({a.bound}) | {paced:.4f} s | {paced / a_t - 1:+.1%} "
                                f"| {free:.4f} s | {free / a_t - 1:+.1%} |")
    rows.append(f"\nworst |paced error|: {worst:.1%}")
    return rows


def bench_agreement(quick: bool) -> list[str]:
    """Where the scale agreement in the round time changes the planner's choice: best plan and
    best in-network plan with it (the planner) and without it (``agreement_time`` patched to 0,
    the planner before issue 15's fix), nine-city at ``wanreduce plan``'s default memories, and
    the scaled nine-city that ``bench_emulator.py`` measures."""
    from wanreduce.emulator.scaling import scale_topology

    def plans(topo, b: int, m: int, chunk_elements: int = pr._MAX_ELEMENTS):
        res = pr.evaluate(topo, b, m, elements_per_packet=chunk_elements, colocated=False)
        return res.best, res.best_in_network

    real = RoundModel.agreement_time
    cases = [("nine-city", load_topology("nine-city"), b, m)
             for b in ((10**6, 10**8) if quick else (10**6, 10**7, 10**8, 10**9))
             for m in (4 * 2**20, 64 * 2**20, 2**30, 16 * 2**30)]
    scaled = scale_topology(load_topology("nine-city"), 1e-3, 4.0)
    cases += [("nine-city x1e-3 rate, x4 latency", scaled, 10**6, m) for m in (32 * 1996, 2048 * 1996)]
    rows = ["| topology | bytes | memory | best (in-network) with agreement | without | changed |",
            "|---|---|---|---|---|---|"]
    for name, topo, b, m in cases:
        with_ = plans(topo, b, m)
        RoundModel.agreement_time = lambda self, rnd: 0.0  # type: ignore[method-assign]
        try:
            without = plans(topo, b, m)
        finally:
            RoundModel.agreement_time = real  # type: ignore[method-assign]
        cell = ["; ".join(f"{p.schedule.label} {p.time:.3f} s" for p in (x if x[0] is not x[1] else x[:1]))
                for x in (with_, without)]
        changed = [w.schedule.label != o.schedule.label for w, o in zip(with_, without, strict=True)]
        rows.append(f"| {name} | {format_size(b)} | {format_size(m)} | {cell[0]} | {cell[1]} | "
                    f"{'best' if changed[0] else ''}{' in-network' if changed[1] else ''}"
                    f"{'-' if not any(changed) else ''} |")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--section", "--part", dest="section",
                    choices=("all", "optimiser", "cliques", "sim", "findings", "sharded", "agreement"),
                    default="all", help="run one section only")
    ap.add_argument("--write-synthetic", nargs=2, metavar=("RxP", "FILE"),
                    help="write the synthetic WAN of R regions x P sites as YAML and exit")
    args = ap.parse_args()
    if args.write_synthetic:
        write_synthetic(*args.write_synthetic)
        return
    print(f"# planner bench, {time.strftime('%Y-%m-%d %H:%M')}, "
          f"{platform.processor() or platform.machine()}, python {platform.python_version()}, "
          f"load average at start {os.getloadavg()[0]:.2f}\n")
    for key, title, fn in (("optimiser", "optimiser", bench_optimiser),
                           ("cliques", "cliques for any number of sites", bench_cliques),
                           ("sim", "simulator vs analytic", bench_sim),
                           ("sharded", "sharded families vs ring all-reduce", bench_sharded),
                           ("findings", "findings", bench_findings),
                           ("agreement", "the scale agreement and the planner's choice", bench_agreement)):
        if args.section in ("all", key):
            t0 = time.perf_counter()
            print(f"## {title}\n")
            print("\n".join(fn(args.quick)))
            print(f"\n({key}: {time.perf_counter() - t0:.0f} s)\n", flush=True)
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
