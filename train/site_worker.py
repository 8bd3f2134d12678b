"""One site's training process (spawned by train/launcher.py): train, average, report.

Modes: ``average`` (local SGD, every ``local_steps`` steps the schedule-driven averager with the
plan's ``table``; the ring too runs through the site network), ``ddp`` (synchronous data parallel,
gradients through the aggregator by the DDP hook) and ``ddp-gloo`` (the same with gloo's exact
float all-reduce: the baseline). The process only trains and communicates; it sends its
parameter snapshots (with wall-clock times since the common start) to the launcher, which
evaluates them afterwards, so measuring never adds synchronisation between sites.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np

from wanreduce.planner.group_table import GroupTable

from . import require_torch
from .averager import ScheduleAverager
from .ddp_hook import HookState, aggregator_hook, session_from_store
from .digits import HIDDEN, make_mlp

MODES = ("average", "ddp", "ddp-gloo")
# Client defaults for loopback; a network's client_kwargs (e.g. a WAN's rtt) override them.
CLIENT_DEFAULTS: dict[str, Any] = {"rtt": 0.01, "rate_bps": 1e9}


@dataclass(frozen=True)
class RunSpec:
    """What every site of one run does (the same at every site)."""

    mode: str = "average"
    table: GroupTable | None = None  # average mode: the plan's groups (any family, ring too)
    ddp_group: int = 0  # ddp mode: the aggregator group of all sites
    steps: int = 60  # local optimiser steps per site
    local_steps: int = 1  # H: average every H steps (outer step)
    hidden: int = HIDDEN  # the MLP's width (bytes per synchronisation: digits.mlp_bytes)
    lr: float = 0.1
    momentum: float = 0.9
    batch: int = 32
    seed: int = 0
    timeout: float = 10.0  # driver and gloo timeout (s)
    start_timeout: float = 300.0  # every site up and connected (torch import on a busy machine)
    snapshot_every: int = 1  # outer steps between parameter snapshots
    kill: tuple[int, int] | None = None  # fault injection: (site, outer step) SIGKILLs itself


@dataclass(frozen=True)
class SiteConfig:
    site: int
    n_sites: int
    store_port: int
    spec: RunSpec
    shard: tuple[np.ndarray, np.ndarray]  # this site's training data (x, y), from the launcher
    client_kwargs: dict[str, Any] = field(default_factory=dict)
    launcher_pid: int = field(default_factory=os.getpid)  # made in the launcher


def _exit_with(launcher: int) -> None:
    """End this process once the launcher is gone (its lifetime bounds every site's). Its pid
    is watched, not our parent's: the parent is multiprocessing's fork server."""
    while True:
        try:
            with open(f"/proc/{launcher}/stat") as f:
                if f.read().rpartition(")")[2].split()[0] in ("Z", "X"):
                    break
        except FileNotFoundError:
            break
        except OSError:  # no /proc: ask the kernel whether the pid exists
            try:
                os.kill(launcher, 0)
            except ProcessLookupError:
                break
        time.sleep(0.5)
    os._exit(3)


def run_site(cfg: SiteConfig, queue: Any) -> None:
    """Process entry point: (site, ("done", payload)) or (site, ("error", one line)) on
    ``queue`` (the report ``emulator/site_processes.py`` collects)."""
    threading.Thread(target=_exit_with, args=(cfg.launcher_pid,), daemon=True).start()
    try:
        queue.put((cfg.site, ("done", _train(cfg))))
    except BaseException as exc:  # noqa: BLE001 - reported to the launcher, then exit
        text = str(exc).strip().splitlines()
        queue.put((cfg.site, ("error", f"{type(exc).__name__}: {text[0] if text else ''}")))


def _rendezvous(cfg: SiteConfig) -> Any:
    """Connect to the launcher's store, wait for every site, join the gloo group."""
    require_torch()
    import torch.distributed as dist

    spec = cfg.spec
    store = dist.TCPStore("127.0.0.1", cfg.store_port, None, is_master=False,
                          timeout=timedelta(seconds=spec.start_timeout))
    store.add("ready", 1)
    store.wait(["go"])
    dist.init_process_group("gloo", store=dist.PrefixStore("pg", store), rank=cfg.site,
                            world_size=cfg.n_sites, timeout=timedelta(seconds=spec.timeout))
    return store


def _train(cfg: SiteConfig) -> dict[str, Any]:
    torch = require_torch()
    import torch.distributed as dist
    from torch.nn.utils import parameters_to_vector, vector_to_parameters

    from wanreduce.host.control import ControlClient
    from wanreduce.host.driver import AggregatorClient

    torch.set_num_threads(1)
    spec, site, n = cfg.spec, cfg.site, cfg.n_sites
    store = _rendezvous(cfg)
    # every site is up before anything with the (short) run timeout: DDP's broadcast, averaging
    dist.monitored_barrier(timeout=timedelta(seconds=spec.start_timeout))
    session = session_from_store(dist.PrefixStore("wanreduce", store), site)
    xs, ys = (torch.from_numpy(a) for a in cfg.shard)
    rng = np.random.default_rng((spec.seed, site))
    model = make_mlp(spec.seed, spec.hidden)
    client = None
    if spec.mode == "average" and spec.table is None:
        raise ValueError("RunSpec.table: average mode needs the plan's GroupTable")
    if spec.mode != "ddp-gloo":
        client = AggregatorClient(**{**CLIENT_DEFAULTS, **cfg.client_kwargs}, sender_id=site,
                                  session=session, timeout=spec.timeout, on_overflow="raise")
    net = model
    if spec.mode in ("ddp", "ddp-gloo"):
        net = torch.nn.parallel.DistributedDataParallel(model)
        if spec.mode == "ddp":
            net.register_comm_hook(HookState(client, spec.ddp_group, n), aggregator_hook)
    opt = torch.optim.SGD(net.parameters(), lr=spec.lr, momentum=spec.momentum)
    params = list(model.parameters())

    def flat() -> np.ndarray:
        return parameters_to_vector(params).detach().numpy().copy()

    def barrier() -> None:  # names a site that does not arrive (e.g. its process died)
        dist.monitored_barrier(timeout=timedelta(seconds=spec.timeout))

    averager = control = None
    if spec.mode == "average":
        kw = cfg.client_kwargs
        control = ControlClient(kw.get("control_address") or kw["aggregator"],
                                timeout=spec.timeout)
        averager = ScheduleAverager(site, sum(p.numel() for p in params), table=spec.table,
                                    client=client, control=control, barrier=barrier)
    h = spec.local_steps if spec.mode == "average" else 1
    # the clock starts when every site is set up (sites leave a barrier within milliseconds)
    dist.barrier()
    t0 = time.time()
    snapshots = [(0, 0.0, flat())]
    for k in range(spec.steps // h):
        for _ in range(h):
            idx = torch.from_numpy(rng.integers(0, len(ys), spec.batch))
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(xs[idx]), ys[idx]).backward()
            opt.step()
        if spec.kill is not None and spec.kill == (site, k):
            os.kill(os.getpid(), signal.SIGKILL)
        if averager is not None:
            x = flat()
            averager.average(x, k)
            vector_to_parameters(torch.from_numpy(x), params)
        if (k + 1) % spec.snapshot_every == 0:
            snapshots.append((k + 1, time.time() - t0, flat()))
    if client is not None:  # open until every site is done: a lost contribution of ours
        barrier()  # may still be asked for (WAN-link loss recovery, host/wan_recovery.py)
    stats = dataclasses.asdict(client.stats) if client is not None else {}
    for c in (client, control):
        if c is not None:
            c.close()
    dist.destroy_process_group()
    return {"snapshots": snapshots, "exchanges": averager.exchanges if averager else spec.steps,
            "skipped": averager.skipped if averager else 0, "driver": stats}
