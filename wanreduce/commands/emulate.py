"""``wanreduce emulate``: run a plan's rounds over the emulated WAN and compare with the planner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from wanreduce import wire
from wanreduce.commands.plan import _out_path, _size
from wanreduce.errors import WanreduceError

DEFAULT_ELEMENTS = wire.MAX_ELEMENTS_DEFAULT  # the planner's chunk


# The emulated WAN's scaling, shared with every command that runs over it (wanreduce train).
RATE_SCALE = click.option(
    "--rate-scale", type=click.FloatRange(1e-9, 1e3), default=1e-3, show_default=True,
    help="Every link and port rate x this (the planner sees the same scaled network).")
TIME_SCALE = click.option("--time-scale", type=click.FloatRange(1e-9, 1e3), default=1.0,
                          show_default=True, help="Every link latency x this.")


@click.command("emulate")
@click.option("--topology", default="nine-city", show_default=True,
              help="Topology YAML file or shipped name (wanreduce plan --help).")
@click.option("--schedule", type=click.Choice(["all-to-all", "cliques-3", "sharded", "best", "ring"]),
              default="best", show_default=True,
              help="Plan to run: a family, the best sharded plan, the planner's best in-network "
                   "plan, or the ring all-reduce (hosts, after the scale agreement).")
@click.option("--memory", default="256KiB", show_default=True, callback=_size("fpga_memory"),
              help="Edge-FPGA memory per site: S = M / 4E slots (power of two); W/2 = S/2 in flight.")
@click.option("--bytes", "nbytes", default="1MB", show_default=True, callback=_size("bytes"),
              help="Bytes per site per synchronisation (float32 tensors).")
@click.option("--rounds", type=click.IntRange(1, 10000), default=2, show_default=True,
              help="Rounds to run (the plan's rounds repeat cyclically).")
@RATE_SCALE
@TIME_SCALE
@click.option("--loss", type=click.FloatRange(0.0, 1.0), default=0.0, show_default=True,
              help="Random loss per WAN link copy (seeded; recovered by NACKs, docs/emulator.md).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of tensors and loss.")
@click.option("--queue", "queue", default="64MiB", show_default=True,
              callback=_size("bytes"), help="FIFO bound of every link and port.")
@click.option("--timeout", type=click.FloatRange(0.1, 3600), default=20.0, show_default=True,
              help="Driver timeout: an all-reduce fails after this long without progress.")
@click.option("--lifetime", type=click.FloatRange(1, 86400), default=900.0, show_default=True,
              help="Every process and thread started ends by itself after this many seconds.")
@click.option("--json", "json_path", default=None, callback=_out_path,
              help="Write the measurement, prediction and link bytes to this JSON file.")
def emulate(topology: str, schedule: str, memory: int, nbytes: int, rounds: int,
            rate_scale: float, time_scale: float, loss: float, seed: int, queue: int,
            timeout: float, lifetime: float, json_path: str | None) -> None:
    """Run ROUNDS rounds of a plan over the emulated WAN; measured vs predicted round time.

    Every site has its own software aggregator and one client process; every result is checked
    bit for bit against the fixed-point reference (docs/emulator.md).
    """
    from wanreduce.emulator.prediction import choose_plan, predict
    from wanreduce.emulator.runner import run_rounds
    from wanreduce.emulator.scaling import scale_topology, slot_plan
    from wanreduce.emulator.wan_emulator import WanEmulator
    from wanreduce.planner.topology import TopologyError, format_size, load_topology

    try:
        topo = scale_topology(load_topology(topology), rate_scale, time_scale)
        slots = slot_plan(memory, DEFAULT_ELEMENTS)
    except (TopologyError, ValueError) as exc:
        raise WanreduceError(str(exc)) from None
    try:
        plan = choose_plan(topo, schedule, nbytes, slots.planner_memory, DEFAULT_ELEMENTS)
        pred = predict(topo, plan, nbytes, slots.planner_memory, DEFAULT_ELEMENTS)
    except ValueError as exc:
        raise WanreduceError(str(exc)) from None
    click.echo(f"topology {topo.name}: {topo.n} sites, {len(topo.links)} links; {slots.describe()}")
    click.echo(f"plan ({schedule}): {plan.schedule.label}; {format_size(nbytes)} per site, "
               f"{rounds} round(s), loss {loss:g}, seed {seed}")
    with WanEmulator(topo, memory=memory, elements=DEFAULT_ELEMENTS, loss=loss, seed=seed,
                     queue_bytes=queue, lifetime=lifetime) as net:
        net.configure(pred.table, jobs=[0])
        res = run_rounds(net, pred.table, nbytes=nbytes, rounds=rounds, seed=seed,
                         timeout=timeout, lifetime=lifetime)
        stats = net.stats()
    out = _summary(topo, res, pred, stats, rounds)
    out.update(topology=topo.name, schedule=schedule, plan=plan.schedule.label,
               plan_time=float(plan.time), plan_rounds=plan.rounds,
               memory=memory, planner_memory=slots.planner_memory, slots=slots.slots,
               bytes=nbytes, rate_scale=rate_scale, time_scale=time_scale, loss=loss, seed=seed)
    if json_path:
        Path(json_path).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    if res.errors:
        raise WanreduceError("; ".join(res.errors))


def _summary(topo, res, pred, stats: dict[str, Any], rounds: int) -> dict[str, Any]:
    """Print the comparison and return it as a JSON-able dict."""
    names = topo.names
    out: dict[str, Any] = {"errors": res.errors}
    if not res.errors:
        times = res.round_times()
        click.echo(f"{'round':>5}  {'measured':>9}  {'predicted':>9}  ratio  {'agreement':>9}")
        for r, t in enumerate(times):
            p = pred.round_time(r)
            click.echo(f"{r:>5}  {t:8.3f}s  {p:8.3f}s  {t / p:5.3f}  {pred.agreement_time(r):8.3f}s")
        mean, pmean = sum(times) / len(times), pred.mean_round_time(rounds)
        click.echo(f"{'mean':>5}  {mean:8.3f}s  {pmean:8.3f}s  {mean / pmean:5.3f}")
        click.echo("(predicted: the planner's round time of the steps that run, the driver's scale "
                   "agreement included; agreement: its part; the planner's own round times of "
                   f"the plan: {', '.join(f'{t:.3f}s' for t in pred.plan_round_times)})")
        checked = sum(r.checked for r in res.reports)
        err = max(r.max_abs_err for r in res.reports)
        click.echo(f"results: {checked} checked bit for bit against the fixed-point reference; "
                   f"max |result - float64 sum| = {err:.3g}")
        out.update(round_times=times, mean_round_time=mean, predicted_round_times=[
            pred.round_time(r) for r in range(rounds)], predicted_mean=pmean,
            predicted_agreement=[pred.agreement_time(r) for r in range(rounds)],
            plan_round_times=pred.plan_round_times, checked=checked, max_abs_err=err)
    links = {f"{names[u]}->{names[v]}": row for (u, v), row in stats["links"].items()}
    busy = {k: row for k, row in links.items() if row["bytes"]}
    click.echo("bytes per directed link: " + ", ".join(
        f"{k} {row['bytes'] / 1e6:.2f}MB" for k, row in sorted(busy.items())))
    drops = sum(r["dropped"] for r in stats["links"].values())
    drops += sum(r["dropped"] for r in stats["egress"] + stats["ingress"])
    lost = sum(r["lost"] for r in stats["links"].values())
    click.echo(f"forwarder: {stats['counters']['copies_delivered']} copies delivered, "
               f"{drops} dropped (queue full), {lost} lost (random); delivery late by "
               f"{stats['late_mean'] * 1e3:.2f} ms mean, {stats['late_max'] * 1e3:.1f} ms max")
    nacks = {k: sum(r.stats.get(k, 0) for r in res.reports)
             for k in ("nacks_sent", "nacked_chunks", "nack_resends", "nack_ignored")}
    if lost or nacks["nacks_sent"]:
        click.echo(f"WAN-link loss recovery: {nacks['nacks_sent']} NACKs sent for "
                   f"{nacks['nacked_chunks']} missing contributions (or all-gather copies), "
                   f"{nacks['nack_resends']} resent, {nacks['nack_ignored']} NACK datagrams "
                   "ignored")
    out.update(link_bytes={k: row["bytes"] for k, row in links.items()}, dropped=drops, lost=lost,
               late_mean=stats["late_mean"], late_max=stats["late_max"],
               forwarder=stats["counters"], site_stats=[r.stats for r in res.reports])
    return out
