"""Schedules change time to accuracy: ring, all-to-all, cliques of 3, sharded and the planner's
best, trained on the emulated nine-city WAN at a small and a large FPGA memory, ``--repeats``
times (medians).

Every run is one ``wanreduce train --network wan`` (in this process, so the fork server with
torch preloaded is shared by all runs) and writes its JSON report to ``--out``/run<k>/. The
repeats are interleaved (repeat k runs every schedule at every memory before repeat k + 1), so
a drift in the machine's load hits every schedule alike. Per memory, one plot of training loss
and test accuracy against wall-clock time with every schedule's median run
(``--plot-prefix``_<memory>.png), one line naming the schedule that reaches ``--target``
accuracy (the sites' mean test accuracy) first and by how much (ratio to the runner-up and to
the ring, medians of the per-repeat ratios), and one Markdown table: median (min-max) time to
target, rounds to it, ratio to the ring, mean round time measured vs the planner's prediction,
the forwarder's lateness (the emulator's own timing error, to hold against the scaled delays),
final loss and accuracy, the load average at the runs' starts.

Two runs are shared rather than repeated (same groups, same training): the ring runs once per
repeat (host to host over the emulated WAN, ``host/ring_allreduce.py``: the aggregators only do
the scale agreement, one chunk, so memory plays no part in its round), and ``best`` reuses the
run of the schedule whose exchanges the planner's pick has (all-to-all, cliques-3 or sharded).
"planner's round" is the prediction of what runs (``emulator/prediction.py``: the planner's
round time; for the ring the planner's ring plus the all-sites agreement it starts with).

Bounded: every run's emulator and site processes end by themselves (``--timeout`` without
progress, the emulator's ``--lifetime``); a failed run stops the benchmark with its error.

Run: ``.venv/bin/python bench/bench_train_schedules.py [--repeats 3] [--memory 64KiB,4MiB]
[--hidden 1700] [--steps 60 --local-steps 6] [--rate-scale 1e-3 --time-scale 4]
[--target 0.95] [--reuse]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from pathlib import Path
from typing import Any

from wanreduce.cli import cli
from wanreduce.planner.topology import format_size, parse_size

SCHEDULES = ("ring", "all-to-all", "cliques-3", "sharded", "best")


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
            "--lifetime", str(args.lifetime), "--out", str(out)]
    load = os.getloadavg()[0]
    print(f"\n$ wanreduce {' '.join(argv)}   (load average {load:.2f}, "
          f"{time.strftime('%H:%M:%S UTC', time.gmtime())})", flush=True)
    code = cli.main(argv, standalone_mode=False)
    if code:
        raise SystemExit(f"run {schedule} at {memory} failed (exit {code})")
    (run,) = json.loads(out.read_text())
    run["load_average"] = load
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


def to_target(run: dict[str, Any], target: float) -> dict[str, Any] | None:
    """The first row at which the sites' mean test accuracy reaches ``target`` (None: never)."""
    return next((r for r in run["rows"] if r["accuracy"] >= target), None)


def target_time(run: dict[str, Any], target: float) -> float:
    """Seconds to ``target`` (infinity: never reached)."""
    hit = to_target(run, target)
    return hit["time_s"] if hit else float("inf")


def spread(values: list[float], fmt: str = "{:.1f}") -> str:
    """``median (min–max)`` of ``values`` formatted by ``fmt`` (one value: just it); infinite
    values (never reached) are said as such instead of entering the median."""
    reached = [v for v in values if math.isfinite(v)]
    if not reached:
        return "not reached"
    if len(reached) < len(values):
        return f"reached in {len(reached)}/{len(values)} runs"
    med = fmt.format(statistics.median(values))
    return med if len(values) == 1 else f"{med} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def median_run(runs: list[dict[str, Any]], target: float) -> dict[str, Any]:
    """The repeat whose time to target is the median (the lower median of an even count)."""
    return sorted(runs, key=lambda r: target_time(r, target))[(len(runs) - 1) // 2]


def ratios(a: list[dict[str, Any]], b: list[dict[str, Any]], target: float) -> list[float]:
    """Per repeat: time to target of ``a`` over that of ``b`` (the same repeat)."""
    return [target_time(x, target) / target_time(y, target) for x, y in zip(a, b, strict=True)]


def planner_round(run: dict[str, Any]) -> float:
    """The predicted mean round time of what ran (``wanreduce train``'s report; reports from
    before it had the prediction: the planner's round times of the plan)."""
    if "predicted_round_s" in run["planner"]:
        return run["planner"]["predicted_round_s"]
    times = run["planner"]["round_times_s"]
    return sum(times) / len(times)


def verdict(by_name: dict[str, list[dict[str, Any]]], target: float) -> str:
    """Which schedule reaches ``target`` first (by median time) and by how much: the median of
    the per-repeat ratios to the runner-up and to the ring over the WAN (min-max)."""
    ranked = sorted((statistics.median(target_time(r, target) for r in runs), name)
                    for name, runs in by_name.items() if not runs[0].get("reused_from"))
    (t1, first), (t2, second) = ranked[0], ranked[1]
    line = (f"first to {target:g}: **{first}** ({t1:.1f} s), then {second} ({t2:.1f} s): "
            f"{spread(ratios(by_name[first], by_name[second], target), '{:.2f}')}x the "
            f"runner-up's time")
    if first != "ring" and "ring" in by_name:
        line += (f", {spread(ratios(by_name[first], by_name['ring'], target), '{:.2f}')}x "
                 f"the ring's (over the same WAN)")
    return line + "; order " + " < ".join(name for _, name in ranked)


def table(by_name: dict[str, list[dict[str, Any]]], target: float) -> list[str]:
    """Markdown rows, one per schedule: medians (min-max) over the repeats."""
    lines = ["| schedule (plan) | time to target | rounds | vs ring (WAN) | mean round measured | "
             "planner's round | measured/planner | forwarder late mean/max | final loss | "
             "final acc | load |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    ring = by_name.get("ring")
    for name, runs in by_name.items():
        first = runs[0]
        hits = [to_target(r, target) for r in runs]
        rounds = sorted({h["outer_step"] for h in hits if h})
        vs_ring = spread(ratios(runs, ring, target), "{:.2f}") + "x" if ring else "-"
        plan_round = planner_round(first)
        measured = [r["mean_round_s"] for r in runs]
        agrees = spread([m / plan_round for m in measured], "{:.2f}")
        late = [r.get("forwarder_late_s") for r in runs]
        late_s = ("-" if None in late else
                  f"{statistics.median(x['mean'] for x in late) * 1e3:.1f}/"
                  f"{max(x['max'] for x in late) * 1e3:.0f} ms")
        loads = [r.get("load_average", float("nan")) for r in runs]
        label = first["label"] + (f", = {first['reused_from']} run" if first.get("reused_from")
                                  else "")
        lines.append(
            f"| {name} ({label}) | {spread([target_time(r, target) for r in runs])} s | "
            f"{'/'.join(map(str, rounds)) or '-'} | {vs_ring} | {spread(measured, '{:.2f}')} s | "
            f"{plan_round:.2f} s | {agrees} | {late_s} | {first['rows'][-1]['loss']:.4f} | "
            f"{first['rows'][-1]['accuracy']:.3f} | {min(loads):.1f}–{max(loads):.1f} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", default="nine-city")
    ap.add_argument("--memory", default="64KiB,4MiB", help="the small and the large FPGA memory")
    ap.add_argument("--schedules", default=",".join(SCHEDULES))
    ap.add_argument("--repeats", type=int, default=3, help="runs per (schedule, memory)")
    ap.add_argument("--hidden", type=int, default=1700, help="MLP width: 1700 -> 0.51 MB a sync")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--local-steps", type=int, default=6)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rate-scale", type=float, default=1e-3)
    ap.add_argument("--time-scale", type=float, default=4.0)
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="s without progress (a round of a slow clique waits at the barrier)")
    ap.add_argument("--lifetime", type=float, default=900.0,
                    help="s after which a run's emulator closes itself (bounds every run)")
    ap.add_argument("--target", type=float, default=0.95, help="test accuracy to reach")
    ap.add_argument("--out", type=Path, default=Path("build/bench_train_schedules"))
    ap.add_argument("--plot-prefix", default="docs/img/train_schedules")
    ap.add_argument("--reuse", action="store_true", help="read the reports already in --out")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error(f"--repeats: must be >= 1, got {args.repeats}")
    memories = [m.strip() for m in args.memory.split(",")]
    schedules = [s.strip() for s in args.schedules.split(",")]
    from wanreduce.train.digits import mlp_bytes
    from wanreduce.train.plot import plot_loss_vs_time

    nbytes = mlp_bytes(args.hidden)
    print(f"{args.topology}, rate x {args.rate_scale:g}, latency x {args.time_scale:g}, hidden "
          f"{args.hidden} ({nbytes} B a sync), {args.steps} steps, H = {args.local_steps}, lr "
          f"{args.lr}, seed {args.seed}, {args.repeats} repeats; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()}")
    # results[memory][schedule] = one report per repeat
    results: dict[str, dict[str, list[dict[str, Any]]]] = {m: {} for m in memories}
    for k in range(args.repeats):
        out = args.out / f"run{k}"
        out.mkdir(parents=True, exist_ok=True)
        ring = None
        for memory in memories:
            runs = results[memory]
            for name in schedules:
                if name == "ring" and ring is not None:  # the same ring training at every memory
                    run = {**ring, "memory_bytes": planner_memory(memory)}
                elif name == "best" and (same := _same_plan_run(args, memory, nbytes, {
                        n: r[k] for n, r in runs.items() if len(r) > k})) is not None:
                    print(f"\nbest at {memory}: {same['label']}: reused", flush=True)
                    run = same
                else:
                    run = train_once(args, name, memory, out / f"{name}_{memory}.json")
                    ring = run if name == "ring" else ring
                runs.setdefault(name, []).append(run)
    for memory in memories:
        by_name = dict(results[memory])
        shown = [{**median_run(runs, args.target), "schedule": name}
                 for name, runs in by_name.items()]
        for run in shown:
            if run["schedule"] == "ring":
                run.update(linestyle=":")
        png = f"{args.plot_prefix}_{memory}.png"
        plot_loss_vs_time(shown, png, accuracy_target=args.target)
        print(f"\n{format_size(parse_size(memory))} per FPGA; target accuracy {args.target}; "
              f"{args.repeats} repeats, median (min–max); plot {png} (each schedule's median "
              f"run); load average now {os.getloadavg()[0]:.2f}")
        print(verdict(by_name, args.target))
        print("\n".join(table(by_name, args.target)), flush=True)


def _same_plan_run(args: argparse.Namespace, memory: str, nbytes: int,
                   runs: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The run already made whose exchanges are those of the plan ``best`` picks at ``memory``
    (the same clique steps, or the same sharded round), with best's plan; or None."""
    from wanreduce.planner.group_table import group_table

    def exchanges(plan: Any) -> tuple:
        table = group_table(plan.schedule)
        return (tuple(tuple(sorted({table.groups[g] for g in step.values()}) for step in rnd)
                      for rnd in table.rounds), table.sharded)

    best = planner_plan(args, "best", memory, nbytes)
    for name, run in runs.items():
        if name != "ring" and exchanges(planner_plan(args, name, memory, nbytes)) == exchanges(best):
            return {**run, "schedule": "best", "family": best.family, "linestyle": "--",
                    "reused_from": name, "label": best.schedule.label,
                    "planner": {"rounds_to_consensus": best.rounds,
                                "round_times_s": [float(t) for t in best.round_times],
                                "time_to_consensus_s": best.time}}
    return None


if __name__ == "__main__":
    main()
