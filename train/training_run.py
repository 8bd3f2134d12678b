"""One ``wanreduce train`` run: pick the schedule, set up the site network, train at every site,
and gather what the run reports (progress rows, bytes per link, the planner's prediction)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from wanreduce import wire
from wanreduce.emulator.local_network import LocalNetwork
from wanreduce.emulator.prediction import predict
from wanreduce.emulator.site_network import SiteNetwork
from wanreduce.planner.topology import Topology

from .averager import AVERAGER_JOB
from .digits import load_digits_split, mlp_bytes
from .launcher import run_sites
from .metrics import progress_rows
from .schedule_choice import choose
from .site_worker import RunSpec

MAX_SNAPSHOTS = 200  # parameter snapshots per site and run (evaluated afterwards)
MAX_SNAPSHOT_BYTES = 32 << 20  # ... and their bytes per site (a wide --hidden has fewer)


def train_run(topo: Topology, schedule: str, memory: int, spec: RunSpec,
              network: Callable[[int], SiteNetwork] = LocalNetwork) -> dict[str, Any]:
    """Train ``spec`` over ``topo``'s sites following the plan of ``schedule`` for ``memory``
    (bytes per FPGA as the planner sees it); ``network(n_sites)`` makes the site network."""
    nbytes, elements = mlp_bytes(spec.hidden), wire.MAX_ELEMENTS_DEFAULT
    choice = choose(schedule, topo, memory, nbytes, elements)
    outer = spec.steps // spec.local_steps
    snapshots = max(2, min(MAX_SNAPSHOTS, MAX_SNAPSHOT_BYTES // nbytes))
    spec = replace(spec, mode="average", table=choice.table,
                   snapshot_every=max(1, -(-outer // snapshots)))
    data = load_digits_split(spec.seed)
    net = network(topo.n)
    try:
        # the averager's job only: it gets every slot, the memory the planner was asked
        # about (with the DDP job enabled too it had half, and memory-bound rounds took 2x)
        net.configure(choice.table, jobs=[AVERAGER_JOB])
        start = time.monotonic()
        window = net.client_kwargs(0).get("window")
        payloads = run_sites(spec, net, data)
        wall = time.monotonic() - start
        links = net.link_bytes()
        lateness = _lateness(net)
    finally:
        net.close()
    plan = choice.plan
    rows = progress_rows(payloads, data, spec.seed, spec.local_steps, spec.hidden)
    return {
        "schedule": schedule, "family": plan.family, "label": plan.schedule.label,
        "topology": topo.name, "sites": topo.n, "memory_bytes": memory,
        "steps": spec.steps, "local_steps": spec.local_steps, "outer_steps": outer,
        "hidden": spec.hidden, "model_bytes": nbytes, "seed": spec.seed, "lr": spec.lr,
        "batch": spec.batch, "wall_s": wall,
        "planner": {"rounds_to_consensus": plan.rounds, "round_times_s": plan.round_times,
                    "time_to_consensus_s": plan.time,
                    "predicted_round_s": predict(topo, plan, nbytes, memory, elements)
                    .mean_round_time(len(plan.round_times))},
        "rows": rows,
        "mean_round_s": (rows[-1]["time_s"] - rows[0]["time_s"]) / max(rows[-1]["outer_step"], 1),
        "link_bytes": {f"{topo.names[a]}->{topo.names[b]}": v for (a, b), v in sorted(links.items())},
        "exchanges_per_site": [p["exchanges"] for p in payloads],
        "driver_window": window,  # chunks in flight per site (W/2 of the averager's slots)
        "retransmissions": sum(p["driver"].get("retransmissions", 0) for p in payloads),
        "forwarder_late_s": lateness,
    }


def _lateness(net: SiteNetwork) -> dict[str, float] | None:
    """How late the emulated WAN delivered against its schedule (mean, max seconds): the
    emulator's own timing error, to hold against the scaled delays; None for a network
    without a forwarder."""
    stats = getattr(net, "stats", None)
    if stats is None:
        return None
    st = stats()
    return {"mean": float(st["late_mean"]), "max": float(st["late_max"])}
