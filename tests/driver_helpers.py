"""Shared helpers of the host-driver tests: run N sites in threads, the golden expectation, and
waiting for a condition on a loaded machine."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from wanreduce.host.driver import AggregatorClient
from wanreduce.host.reference import expected_allreduce

# Timers of a driver on 127.0.0.1: the retransmission timer starts low and adapts (host/rtt.py);
# a call fails only after 30 s without any progress, so a loaded machine slows tests down but
# does not fail them (tests of failures set their own, shorter ``timeout``).
FAST = dict(rtt=0.002, initial_rto=0.05, min_rto=0.01, timeout=30.0, max_retries=40)


def run_sites(addr, xs_per_call, *, n_sites, group=0, job=0, rounds=None, client_kw=None,
              call_kw=None, per_site_kw=None, after_call=None, delays=None):
    """Each site i all-reduces xs_per_call[k][i] for each call k; returns (results, stats, errors).

    ``after_call(i, k, client)`` runs after site i's call k (e.g. to snapshot its counters);
    ``delays[i]``: seconds site i waits before it creates its client. Every
    site ends by itself (its driver's ``timeout`` bounds a call without progress), so the threads
    are joined without a wall-clock limit."""
    results = [[None] * len(xs_per_call) for _ in range(n_sites)]
    stats, errors = [None] * n_sites, [None] * n_sites
    rounds = rounds or list(range(len(xs_per_call)))

    def site(i):
        time.sleep((delays or {}).get(i, 0.0))
        kw = {**FAST, **(client_kw or {}), **((per_site_kw or {}).get(i, {}))}
        try:
            with AggregatorClient(addr, sender_id=i, **kw) as c:
                for k, xs in enumerate(xs_per_call):
                    j = job[k] if isinstance(job, list) else job
                    results[i][k] = c.allreduce(xs[i], job=j, group=group, round=rounds[k],
                                                **(call_kw or {}))
                    if after_call is not None:
                        after_call(i, k, c)
                stats[i] = c.stats
        except Exception as exc:  # noqa: BLE001 - reported to the test
            errors[i] = exc

    threads = [threading.Thread(target=site, args=(i,)) for i in range(n_sites)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, stats, errors


def golden(xs, e, n, dtype, elements, headroom="safe"):
    """Expected all-reduce of the site tensors xs at scale e (see wanreduce.host.reference)."""
    assert n == len(xs)
    return expected_allreduce(xs, elements=elements, dtype=dtype, headroom=headroom, exp=e)


def wait_until(cond: Callable[[], bool], timeout: float = 60.0, poll: float = 0.005) -> bool:
    """Poll ``cond`` until it holds (True) or ``timeout`` s passed (False). For events another
    thread or process will cause: the bound is generous because it only costs time on failure."""
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() >= end:
            return cond()
        time.sleep(poll)
    return True
