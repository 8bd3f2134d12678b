"""``wanreduce train``: one training process per site of a topology, averaging as a plan says."""

from __future__ import annotations

import json

import click

from wanreduce import wire
from wanreduce.commands.emulate import RATE_SCALE, TIME_SCALE
from wanreduce.commands.plan import _out_path, _size
from wanreduce.errors import WanreduceError


def _schedules(ctx: click.Context, param: click.Parameter, value: str) -> list[str]:
    from wanreduce.train.schedule_choice import SCHEDULES

    names = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in names if v not in SCHEDULES]
    if not names or bad:
        raise WanreduceError(f"--schedule: {', '.join(bad) or repr(value)} is not one of "
                             f"{', '.join(SCHEDULES)} (a comma-separated list runs each)")
    return names


@click.command("train")
@click.option("--topology", default="nine-city", show_default=True,
              help="Topology YAML file, or a shipped name (nine-city, ...): one site each.")
@click.option("--schedule", "schedules", default="best", show_default=True, callback=_schedules,
              help="best|all-to-all|cliques-3|sharded|ring, or a comma-separated list (one run "
                   "each, on one --plot chart). best: the planner's best in-network plan.")
@click.option("--memory", default="64MiB", show_default=True, callback=_size("fpga_memory"),
              help="Edge-FPGA memory per site, for the planner's choice of plan.")
@click.option("--steps", type=click.IntRange(1, 100_000), default=200, show_default=True,
              help="Local optimiser steps per site.")
@click.option("--local-steps", type=click.IntRange(1, 10_000), default=1, show_default=True,
              help="H: average every H local steps (1: synchronous parameter averaging).")
@click.option("--hidden", type=click.IntRange(1, 16384), default=32, show_default=True,
              help="Width of the MLP (64 -> hidden -> 10): bytes per synchronisation "
                   "4 x (75 x hidden + 10); 32: 9640 B, 3333: 1.0 MB.")
@click.option("--seed", type=click.IntRange(0, 2**31 - 1), default=0, show_default=True,
              help="Seed of the data split, the initial model and the minibatches.")
@click.option("--lr", type=click.FloatRange(0, 10, min_open=True), default=0.1, show_default=True,
              help="Local SGD learning rate (momentum 0.9).")
@click.option("--batch", type=click.IntRange(1, 1024), default=32, show_default=True,
              help="Minibatch size per site.")
@click.option("--timeout", type=click.FloatRange(0.1, 3600), default=10.0, show_default=True,
              help="Seconds without progress before an all-reduce (and the run) fails.")
@click.option("--network", type=click.Choice(["local", "wan"]), default="local", show_default=True,
              help="local: one aggregator per site on loopback, no delay; wan: the emulated WAN "
                   "of the topology (scaled by --rate-scale/--time-scale, as wanreduce emulate).")
@RATE_SCALE
@TIME_SCALE
@click.option("--lifetime", type=click.FloatRange(1, 86400), default=900.0, show_default=True,
              help="The network's threads and processes end by themselves after this many s.")
@click.option("--out", type=click.Path(dir_okay=False), default=None, callback=_out_path,
              help="Write every run's report (rows, bytes per link, plan) as JSON here.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              callback=_out_path, help="Write loss vs wall-clock time of every run to this PNG.")
def train(topology: str, schedules: list[str], memory: int, steps: int, local_steps: int,
          hidden: int, seed: int, lr: float, batch: int, timeout: float, network: str,
          rate_scale: float, time_scale: float, lifetime: float, out: str | None, plot_path: str | None) -> None:
    """Train an MLP on scikit-learn's digits, one process per site, averaging parameters
    with the groups of the planner's schedule every H steps (docs/training.md)."""
    from wanreduce.planner.topology import TopologyError, load_topology

    if local_steps > steps:
        raise WanreduceError(f"--local-steps: {local_steps} is more than --steps {steps}; "
                             f"allowed 1..{steps}")
    try:
        topo = load_topology(topology)
    except TopologyError as exc:
        raise WanreduceError(str(exc)) from None
    if not 2 <= topo.n <= wire.MAX_SENDERS:
        raise WanreduceError(f"--topology: {topo.n} sites; allowed 2..{wire.MAX_SENDERS} "
                             f"(one sender id per site)")
    from wanreduce.emulator.local_network import LocalNetwork
    from wanreduce.emulator.scaling import scale_topology, slot_plan
    from wanreduce.emulator.wan_emulator import WanEmulator

    try:
        slots = slot_plan(memory, wire.MAX_ELEMENTS_DEFAULT)
        if network == "wan":
            topo = scale_topology(topo, rate_scale, time_scale)
    except (TopologyError, ValueError) as exc:
        raise WanreduceError(str(exc)) from None

    def make_network(n: int):
        if network == "wan":
            return WanEmulator(topo, memory=memory, elements=wire.MAX_ELEMENTS_DEFAULT,
                               lifetime=lifetime)
        return LocalNetwork(n, memory=memory, lifetime=lifetime)

    from wanreduce.train import require_torch

    require_torch()
    from wanreduce.train.site_worker import RunSpec
    from wanreduce.train.training_run import train_run

    spec = RunSpec(steps=steps, local_steps=local_steps, hidden=hidden, lr=lr, batch=batch, seed=seed,
                   timeout=timeout)
    runs = []
    for name in schedules:
        try:
            run = train_run(topo, name, slots.planner_memory, spec, network=make_network)
        except ValueError as exc:
            raise WanreduceError(str(exc)) from None
        runs.append(run)
        _echo_run(run)
    if out:
        with open(out, "w") as f:
            json.dump(runs, f, indent=1)
        click.echo(f"report written to {out}")
    if plot_path:
        from wanreduce.train.plot import plot_loss_vs_time

        plot_loss_vs_time(runs, plot_path)
        click.echo(f"plot written to {plot_path}")


def _echo_run(run: dict) -> None:
    rows = run["rows"]
    click.echo(f"\n== {run['schedule']}: {run['label']} on {run['topology']} ({run['sites']} "
               f"sites), {run['model_bytes']} B per sync, {run['outer_steps']} rounds of H = "
               f"{run['local_steps']}, "
               f"{run['wall_s']:.1f} s ==")
    p = run["planner"]
    plan_round = sum(p["round_times_s"]) / len(p["round_times_s"])
    pred = p.get("predicted_round_s", plan_round)
    as_run = (f" ({pred:.3g} s as run, with the scale agreement)"
              if abs(pred - plan_round) > 1e-3 * plan_round else "")
    click.echo(f"planner: {p['rounds_to_consensus']} rounds to consensus in "
               f"{p['time_to_consensus_s']:.3g} s, {plan_round:.3g} s a round{as_run}; measured "
               f"{run['mean_round_s']:.3g} s a round (H local steps, barriers and the "
               f"agreement exchange included)")
    click.echo(f"{'round':>6} {'time s':>8} {'loss':>8} {'acc':>6} {'avg acc':>8} {'consensus':>10}")
    shown = rows if len(rows) <= 8 else [rows[int(i * (len(rows) - 1) / 7)] for i in range(8)]
    for r in shown:
        click.echo(f"{r['outer_step']:>6} {r['time_s']:>8.2f} {r['loss']:>8.4f} "
                   f"{r['accuracy']:>6.3f} {r['mean_model_accuracy']:>8.3f} {r['consensus']:>10.3g}")
    links = {k: v for k, v in run["link_bytes"].items() if v}
    click.echo("bytes per directed link: " + (", ".join(f"{k} {v}" for k, v in links.items())
                                               or "none"))
