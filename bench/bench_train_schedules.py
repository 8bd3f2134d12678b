"""Schedules change time to accuracy: ring, all-to-all, cliques of 3 and the planner's best,
trained on the emulated nine-city WAN at a small and a large FPGA memory.

Every run is one ``wanreduce train --network wan`` (in this process, so the fork server with
torch preloaded is shared by all runs) and writes its JSON report to ``--out``. Per memory, one
plot of training loss and test accuracy against wall-clock time with every schedule
(``--plot-prefix``_<memory>.png) and one table (Markdown, printed): time to ``--target``
accuracy (the sites' mean test accuracy), rounds to it, final loss and accuracy, mean round time
measured vs the planner's prediction, bytes on the busiest directed link, and the ratio of the
time to target to the ring's.

Two runs are shared rather than repeated (same groups, same training): the ring runs once (gloo
all-reduce, no aggregator: memory plays no part), and ``best`` reuses the run of the family the
planner picked when that is all-to-all or cliques-3. The ring's gloo traffic does not cross the
emulated WAN; its row also gives an emulated time: the measured time plus the planner's ring
round time (same scaled topology and bytes) per round, labelled "ring (+planner ring time)".

Run: ``.venv/bin/python bench/bench_train_schedules.py [--memory 64KiB,4MiB] [--hidden 1700]
[--steps 60 --local-steps 6] [--rate-scale 1e-3 --time-scale 4] [--target 0.95] [--reuse]``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from wanreduce.cli import cli
from wanreduce.planner.topology import format_size, parse_size

SCHEDULES = ("ring", "all-to-all", "cliques-3", "best")


def train_once(args: argparse.Namespace, schedule: str, memory: str, out: Path) -> dict[str, Any]:
    """One ``wanreduce train --network wan`` run; its report (raises if the run failed).
    With ``--reuse``, a report already in ``out`` is read instead (re-draw plots and tables)."""
    if args.reuse and out.is_file():
        return json.loads(out.read_text())[0]
    argv = ["train", "--topology", args.topology, "--schedule", schedule, "--memory", memory,
            "--network", "wan", "--rate-scale", str(args.rate_scale),
            "--time-scale", str(args.time_scale), "--hidden", str(args.hidden),
            "--steps", str(args.steps), "--local-steps", str(args.local_steps),
            "--lr", str(args.lr), "--seed", str(args.seed), "--timeout", str(args.timeout),
            "--out", str(out)]
    print(f"\n$ wanreduce {' '.join(argv)}   (load average {os.getloadavg()[0]:.2f})", flush=True)
    code = cli.main(argv, standalone_mode=False)
    if code:
        raise SystemExit(f"run {schedule} at {memory} failed (exit {code})")
    (run,) = json.loads(out.read_text())
    run["load_average"] = os.getloadavg()[0]
    out.write_text(json.dumps([run], indent=1))
    return run


def planner_plan(args: argparse.Namespace, schedule: str, memory: str, nbytes: int) -> Any:
    """The plan ``wanreduce train`` runs for ``schedule`` (the same scaled topology and slots)."""
    from wanreduce.emulator.scaling import scale_topology
    from wanreduce.planner.topology import load_topology
    from wanreduce.train.schedule_choice import choose

    topo = scale_topology(load_topology(args.topology), args.rate_scale, args.time_scale)
    return choose(schedule, topo, planner_memory(memory), nbytes).plan


def planner_memory(memory: str) -> int:
    """The memory the planner is asked about for ``--memory memory`` (the slots' bytes)."""
    from wanreduce.emulator.scaling import slot_plan
    from wanreduce.wire import MAX_ELEMENTS_DEFAULT

    return slot_plan(parse_size(memory), MAX_ELEMENTS_DEFAULT).planner_memory


def with_ring_time(run: dict[str, Any], per_round: float) -> dict[str, Any]:
    """The ring run with the planner's ring round time added per round (the emulated view)."""
    rows = [{**r, "time_s": r["time_s"] + r["outer_step"] * per_round} for r in run["rows"]]
    return {**run, "schedule": "ring (+planner ring time)", "rows": rows}


def to_target(run: dict[str, Any], target: float) -> dict[str, Any] | None:
    """The first row at which the sites' mean test accuracy reaches ``target`` (None: never)."""
    return next((r for r in run["rows"] if r["accuracy"] >= target), None)


def table(runs: list[dict[str, Any]], target: float, ring_key: str) -> list[str]:
    """Markdown rows of one memory's runs; ratios against the run named ``ring_key``."""
    ring_hit = to_target(next(r for r in runs if r["schedule"] == ring_key), target)
    lines = ["| schedule (plan) | time to target | rounds | vs ring | final loss | final acc | "
             "mean round measured | planner's round | measured/planner | busiest link |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for run in runs:
        hit, last, p = to_target(run, target), run["rows"][-1], run["planner"]
        plan_round = sum(p["round_times_s"]) / len(p["round_times_s"])
        ratio = (f"{hit['time_s'] / ring_hit['time_s']:.2f}x" if hit and ring_hit else "-")
        busiest = max(run["link_bytes"].items(), key=lambda kv: kv[1], default=("none", 0))
        measured, agrees = run["mean_round_s"], f"{run['mean_round_s'] / plan_round:.2f}"
        if run["family"] == "ring":  # gloo on loopback: nothing to compare with the planner
            agrees = "- (gloo, loopback)"
            if run["schedule"] == "ring (+planner ring time)":
                measured += plan_round
                agrees = "- (+ planner's ring round)"
        reached = f"{hit['time_s']:.1f} s" if hit else "not reached"
        link = f"{busiest[0]} {busiest[1] / 1e6:.2f} MB" if busiest[1] else "none (gloo)"
        lines.append(
            f"| {run['schedule']} ({run['label']}) | {reached} | "
            f"{hit['outer_step'] if hit else '-'} | {ratio} | {last['loss']:.4f} | "
            f"{last['accuracy']:.3f} | {measured:.2f} s | {plan_round:.2f} s | {agrees} | "
            f"{link} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", default="nine-city")
    ap.add_argument("--memory", default="64KiB,4MiB", help="the small and the large FPGA memory")
    ap.add_argument("--schedules", default=",".join(SCHEDULES))
    ap.add_argument("--hidden", type=int, default=1700, help="MLP width: 1700 -> 0.51 MB a sync")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--local-steps", type=int, default=6)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rate-scale", type=float, default=1e-3)
    ap.add_argument("--time-scale", type=float, default=4.0)
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="s without progress (a round of a slow clique waits at the barrier)")
    ap.add_argument("--target", type=float, default=0.95, help="test accuracy to reach")
    ap.add_argument("--out", type=Path, default=Path("build/bench_train_schedules"))
    ap.add_argument("--plot-prefix", default="docs/img/train_schedules")
    ap.add_argument("--reuse", action="store_true", help="read the reports already in --out")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    memories = [m.strip() for m in args.memory.split(",")]
    schedules = [s.strip() for s in args.schedules.split(",")]
    from wanreduce.train.digits import mlp_bytes
    from wanreduce.train.plot import plot_loss_vs_time

    nbytes = mlp_bytes(args.hidden)
    print(f"{args.topology}, rate x {args.rate_scale:g}, latency x {args.time_scale:g}, hidden "
          f"{args.hidden} ({nbytes} B a sync), {args.steps} steps, H = {args.local_steps}, lr "
          f"{args.lr}, seed {args.seed}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    ring = None
    for memory in memories:
        runs: dict[str, dict[str, Any]] = {}
        for name in schedules:
            if name == "ring" and ring is not None:
                # the same gloo training at every memory
                runs[name] = {**ring, "memory_bytes": planner_memory(memory)}
                continue
            if name == "best":
                same = _same_plan_run(args, memory, nbytes, runs)
                if same is not None:
                    print(f"\nbest at {memory}: {same['label']} (the same exchanges): reused")
                    runs[name] = same
                    continue
            runs[name] = train_once(args, name, memory, args.out / f"{name}_{memory}.json")
            ring = runs[name] if name == "ring" else ring
        shown = list(runs.values())
        if "ring" in runs:  # gloo on loopback: dotted, and drawn with the WAN's ring time too
            shown[list(runs).index("ring")] = {**runs["ring"], "linestyle": ":",
                                               "schedule": "ring (gloo, loopback)"}
            ring_plan = planner_plan(args, "ring", memory, nbytes)
            per_round = sum(ring_plan.round_times) / len(ring_plan.round_times)
            shown.append(with_ring_time(runs["ring"], per_round))
        png = f"{args.plot_prefix}_{memory}.png"
        plot_loss_vs_time(shown, png, accuracy_target=args.target)
        ring_key = "ring (+planner ring time)" if "ring" in runs else shown[0]["schedule"]
        print(f"\n{format_size(parse_size(memory))} per FPGA; target accuracy {args.target}; "
              f"plot {png}; load average {os.getloadavg()[0]:.2f}")
        print("\n".join(table(shown, args.target, ring_key)))


def _same_plan_run(args: argparse.Namespace, memory: str, nbytes: int,
                   runs: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The run already made whose exchanges are those of the plan ``best`` picks at ``memory``
    (the same clique steps), with best's plan; or None."""
    from wanreduce.planner.group_table import group_table

    def exchanges(plan: Any) -> tuple:
        table = group_table(plan.schedule)  # a sharded round runs as its phases: its own run
        return (tuple(tuple(sorted({table.groups[g] for g in step.values()}) for step in rnd)
                      for rnd in table.rounds), table.sharded)

    best = planner_plan(args, "best", memory, nbytes)
    for name, run in runs.items():
        if name != "ring" and exchanges(planner_plan(args, name, memory, nbytes)) == exchanges(best):
            return {**run, "schedule": "best", "family": best.family, "linestyle": "--",
                    "label": f"{best.schedule.label}, runs as {run['label']}",
                    "planner": {"rounds_to_consensus": best.rounds,
                                "round_times_s": [float(t) for t in best.round_times],
                                "time_to_consensus_s": best.time}}
    return None


if __name__ == "__main__":
    main()
