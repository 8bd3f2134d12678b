"""Start one training process per site, collect their results, stop them all on a failure.

The network object stays here; each process (from the fork server, torch preloaded) gets
``network.client_kwargs(site)`` and the port of this process's rendezvous store (torch's
TCPStore). Starting, death detection and the bounded wait are ``emulator/site_processes.py``'s
(shared with the emulator's rounds). Every process's lifetime is bounded: a site ends on its own
(driver and gloo timeouts), and once one site has failed or died, the others are given
``4 x timeout + 10 s`` to stop with their own errors, then killed.
"""

from __future__ import annotations

import multiprocessing as mp
import queue as queue_mod
import time
from datetime import timedelta
from typing import Any

from wanreduce.emulator.site_network import SiteNetwork
from wanreduce.emulator.site_processes import SiteProcesses, exit_reason
from wanreduce.errors import WanreduceError

from . import require_torch
from .digits import Digits
from .site_worker import RunSpec, SiteConfig, run_site


class TrainingFailed(WanreduceError):
    """A site failed or died; the message names it (and what the other sites said)."""


def run_sites(spec: RunSpec, network: SiteNetwork, data: Digits) -> list[dict[str, Any]]:
    """Run ``spec`` at every site of ``network`` (site s trains on ``data.shard(s, n)``); each
    site's payload, in site order. The data set is loaded once, here, not in every process."""
    require_torch()
    from torch.distributed import TCPStore

    n = network.n_sites
    store = TCPStore("127.0.0.1", 0, None, is_master=True, wait_for_workers=False,
                     timeout=timedelta(seconds=spec.start_timeout))
    ctx = mp.get_context("forkserver")  # a clean server process with torch imported once
    ctx.set_forkserver_preload(["torch", "torch.distributed", "wanreduce.train.site_worker"])
    sites = SiteProcesses(ctx, n, run_site, lambda s: (
        SiteConfig(s, n, store.port, spec, data.shard(s, n), network.client_kwargs(s)),),
        name="wanreduce-site")
    with sites:
        sites.start()
        _wait_ready(store, sites, spec.start_timeout)
        store.set("go", "1")
        got = sites.collect(after_failure=4 * spec.timeout + 10,
                            is_failure=lambda rep: rep[0] != "done")
    errors = {s: msg for s, (kind, msg) in got.reports.items() if kind != "done"}
    dead = {s: exit_reason(code) for s, code in got.died.items()}
    dead |= dict.fromkeys(got.given_up, "did not stop after the failure: killed by the launcher")
    if errors or dead:
        raise TrainingFailed(_failure_message(errors, dead))
    return [got.reports[s][1] for s in range(n)]


def _wait_ready(store: Any, sites: SiteProcesses, limit: float) -> None:
    """Until every site has connected; a site that exits first, or the limit, is an error."""
    procs = sites.procs
    n = len(procs)
    deadline = time.monotonic() + limit
    while store.add("ready", 0) < n:
        gone = [s for s, p in enumerate(procs) if p.exitcode is not None]
        if gone:
            try:
                site, (_, why) = sites.queue.get(timeout=1)
            except queue_mod.Empty:
                site, why = gone[0], exit_reason(procs[gone[0]].exitcode)
            raise TrainingFailed(f"site {site} ended before training started: {why}")
        if time.monotonic() > deadline:
            raise TrainingFailed(f"only {store.add('ready', 0)} of {n} sites started within "
                                 f"{limit:g} s (a very busy machine? raise start_timeout)")
        time.sleep(0.05)


def _failure_message(errors: dict[int, str], dead: dict[int, str]) -> str:
    parts = [f"site {s}'s process died ({why})" for s, why in sorted(dead.items())]
    parts += [f"site {s} stopped: {msg}" for s, msg in sorted(errors.items())]
    return "training failed: " + "; ".join(parts)
