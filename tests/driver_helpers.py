"""Shared helpers of the host-driver tests: run N sites in threads and the golden expectation."""

from __future__ import annotations

import threading

from wanreduce.host.driver import AggregatorClient
from wanreduce.host.reference import expected_allreduce

FAST = dict(rtt=0.002, initial_rto=0.05, min_rto=0.01, max_rto=0.2, timeout=10.0)


def run_sites(addr, xs_per_call, *, n_sites, group=0, job=0, rounds=None, client_kw=None,
              call_kw=None, per_site_kw=None):
    """Each site i all-reduces xs_per_call[k][i] for each call k; returns (results, stats, errors)."""
    results = [[None] * len(xs_per_call) for _ in range(n_sites)]
    stats, errors = [None] * n_sites, [None] * n_sites
    rounds = rounds or list(range(len(xs_per_call)))

    def site(i):
        kw = {**FAST, **(client_kw or {}), **((per_site_kw or {}).get(i, {}))}
        try:
            with AggregatorClient(addr, sender_id=i, **kw) as c:
                for k, xs in enumerate(xs_per_call):
                    j = job[k] if isinstance(job, list) else job
                    results[i][k] = c.allreduce(xs[i], job=j, group=group, round=rounds[k],
                                                **(call_kw or {}))
                stats[i] = c.stats
        except Exception as exc:  # noqa: BLE001 - reported to the test
            errors[i] = exc

    threads = [threading.Thread(target=site, args=(i,)) for i in range(n_sites)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results, stats, errors


def golden(xs, e, n, dtype, elements, headroom="safe"):
    """Expected all-reduce of the site tensors xs at scale e (see wanreduce.host.reference)."""
    assert n == len(xs)
    return expected_allreduce(xs, elements=elements, dtype=dtype, headroom=headroom, exp=e)
