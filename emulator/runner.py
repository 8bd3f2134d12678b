"""Run rounds of a plan over a site network: one spawned process per site, results checked.

Each site's process builds its synthetic tensor (float32, seeded by site and round), and for every
step of every round (``GroupTable.steps``) waits at a barrier of all sites, then all-reduces
through its ``AggregatorClient(**network.client_kwargs(site), sender_id=site)``; a sharded round
runs as its reduce-scatter/all-gather phases (``host/sharded_allreduce.py``, a barrier between
phases), a ring round as its host-to-host reduce-scatter/all-gather steps
(``host/ring_allreduce.py``), and their result is checked against the all-sites reference. Rounds are
barriers, as the planner models them, and they must be: the groups change between steps, and a
site that ran ahead would send next-step contributions to aggregators still collecting the
previous step (rejected, and no member could resend them). A round's time is from the first
barrier release of its first step to the last site's end of its last step. After the round
every site checks each result bit for bit against the fixed-point reference
(``host/reference.expected_allreduce``, NumPy, from the members' regenerated tensors) and
records its largest error against the float64 sum; a mismatch is an error, never a number.
After the last round the sites meet at a final barrier before closing their clients, so a
contribution lost on a WAN link can still be asked for (NACK, ``host/wan_recovery.py``).

Processes are started and watched by ``site_processes.SiteProcesses`` (shared with
``train/launcher.py``). A process that dies makes the others stop: the barrier is aborted (they
fail the next wait) and a process blocked in an all-reduce fails within the driver's ``timeout``
(ChunksMissing naming the missing member). Every process has a ``lifetime`` and exits by itself.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wanreduce.planner.group_table import GroupTable

from .site_network import SiteNetwork
from .site_processes import SiteProcesses

WARMUP_ROUND = 0xFFFFFFFF  # round id of the warm-up step (configuration look-ups, first RTT)
JOB = 0


def site_tensor(seed: int, site: int, rnd: int, elements: int) -> np.ndarray:
    """The synthetic contribution of ``site`` in round ``rnd``."""
    rng = np.random.default_rng([seed, site, rnd])
    return rng.standard_normal(elements).astype(np.float32)


@dataclass
class SiteReport:
    """What one site's process measured and checked."""

    site: int
    spans: list[tuple[float, float]] = field(default_factory=list)  # per round (monotonic s)
    checked: int = 0  # results compared bit for bit
    max_abs_err: float = 0.0  # largest |result - float64 sum| (quantisation)
    stats: dict[str, int] = field(default_factory=dict)
    error: str | None = None


@dataclass
class RunResult:
    """All sites' reports and the round times derived from them."""

    reports: list[SiteReport]
    rounds: int

    @property
    def errors(self) -> list[str]:
        return [r.error for r in self.reports if r.error]

    def round_times(self) -> list[float]:
        """Per round: last site's end minus first site's start."""
        if self.errors:
            raise RuntimeError("; ".join(self.errors))
        return [max(r.spans[i][1] for r in self.reports) - min(r.spans[i][0] for r in self.reports)
                for i in range(self.rounds)]

    def mean_round_time(self) -> float:
        t = self.round_times()
        return sum(t) / len(t)


def _site_main(site: int, kwargs: dict[str, Any], table: GroupTable, elements: int, rounds: int,
               seed: int, timeout: float, lifetime: float, barrier: Any, die_at: int | None,
               die_after: float, out: Any) -> None:
    """One site's process (module docstring)."""
    timer = threading.Timer(lifetime, os._exit, (3,))  # bounded even if everything else hangs
    timer.daemon = True
    timer.start()
    from wanreduce.host.driver import AggregatorClient
    from wanreduce.host.reference import expected_allreduce
    from wanreduce.host.ring_allreduce import ring_allreduce
    from wanreduce.host.sharded_allreduce import sharded_allreduce

    rep = SiteReport(site)
    wait = lifetime  # a barrier waits at most this long (the launcher aborts it on a death)
    c = None
    try:
        with AggregatorClient(**kwargs, sender_id=site, timeout=timeout) as c:
            e = c.elements
            for st in table.steps(0):
                barrier.wait(wait)
                if site in st:
                    c.allreduce(np.ones(1, np.float32), job=JOB, group=st[site], round=WARMUP_ROUND)
            for r in range(rounds):
                got = []
                start = None
                sh, ring = table.sharded_steps(r), table.ring_steps(r)
                for st in table.steps(r):
                    barrier.wait(wait)
                    if r == die_at:  # fault injection: the process is killed mid-run
                        if not die_after:
                            os._exit(9)
                        threading.Timer(die_after, os._exit, (9,)).start()  # mid-phase
                    start = time.monotonic() if start is None else start
                    if sh is not None:
                        y = sharded_allreduce(c, site_tensor(seed, site, r, elements), sh,
                                              job=JOB, round=r, barrier=lambda: barrier.wait(wait))
                        got.append((sh.everyone, y))
                    elif ring is not None:
                        y = ring_allreduce(c, site_tensor(seed, site, r, elements), ring,
                                           job=JOB, round=r)
                        got.append((ring.everyone, y))
                    elif site in st:
                        y = c.allreduce(site_tensor(seed, site, r, elements), job=JOB,
                                        group=st[site], round=r)
                        got.append((st[site], y))
                rep.spans.append((start, time.monotonic()))
                for gid, y in got:
                    xs = [site_tensor(seed, m, r, elements) for m in table.groups[gid]]
                    want = expected_allreduce(xs, elements=e)
                    bad = int(np.count_nonzero(y.view(np.uint32) != want.view(np.uint32)))
                    if bad:
                        raise RuntimeError(f"round {r} group {gid}: {bad} of {y.size} elements "
                                           "differ from the fixed-point reference")
                    exact = np.sum(np.asarray(xs, np.float64), axis=0)
                    rep.max_abs_err = max(rep.max_abs_err, float(np.abs(y - exact).max()))
                    rep.checked += 1
            # the client stays open until every site is done: another site's aggregator may
            # still lack one of our contributions and ask for it (WAN-link loss recovery)
            barrier.wait(wait)
    except BaseException as exc:  # reported to the launcher, which names the site
        rep.error = f"site {site}: {type(exc).__name__}: {exc}"
        barrier.abort()
    if c is not None:  # the counters, also of a site that failed (what it tried)
        rep.stats = {k: v for k, v in vars(c.stats).items() if isinstance(v, int)}
        if c.wan is not None:  # WAN-link loss recovery: NACKs sent, answered, ignored
            rep.stats.update(vars(c.wan.stats))
    out.put((site, rep))  # flushed by the queue's feeder thread before the process exits


def run_rounds(net: SiteNetwork, table: GroupTable, *, nbytes: int, rounds: int, seed: int = 0,
               timeout: float = 10.0, lifetime: float = 600.0,
               kill: tuple[int, int] | None = None, kill_after: float = 0.0) -> RunResult:
    """Run ``rounds`` rounds of ``table`` over ``net`` with ``nbytes`` per site (module docstring).

    ``kill = (site, round)``: that site's process exits abruptly (code 9) when the round starts,
    or ``kill_after`` s later (mid-phase; fault injection for tests)."""
    if rounds < 1:
        raise ValueError(f"--rounds: must be >= 1, got {rounds}")
    n = net.n_sites
    elements = max(1, nbytes // 4)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(n)
    sites = SiteProcesses(ctx, n, _site_main, lambda s: (
        s, net.client_kwargs(s), table, elements, rounds, seed, timeout, lifetime, barrier,
        kill[1] if kill and kill[0] == s else None, kill_after))
    with sites:
        sites.start()
        got = sites.collect(lifetime=lifetime + 10, is_failure=lambda rep: rep.error is not None,
                            on_failure=barrier.abort)
    reports = dict(got.reports)
    for s, code in got.died.items():
        reports[s] = SiteReport(s, error=f"site {s}: process exited with code {code} without a "
                                         "report")
    for s in got.given_up:
        reports[s] = SiteReport(s, error=f"site {s}: no report within the lifetime "
                                         f"({lifetime:g} s)")
    return RunResult([reports[s] for s in range(n)], rounds)
