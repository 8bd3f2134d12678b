"""Optimiser search for the sharded families (``sharded``): flat, and the hierarchical clusters.

Flat sharding has no free choice (every site owns one shard). Hierarchical sharding chooses the
cluster size k (every factorisation n = k * m, k, m >= 2), which sites share a cluster and which
sites are counterparts across clusters:

* clusters: for n <= ``exhaustive_limit`` every partition into blocks of k, ranked by the sum of
  the clusters' largest round-trip time (the inner phases' slot cycle); beyond, blocks of k
  consecutive sites along the optimiser's latency tour (every rotation). The best few are kept;
* counterparts: swap local search inside each cluster on the round model, within the budget.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from . import sharded as SH

if TYPE_CHECKING:
    from .optimiser import Optimiser, Plan

#: cluster partitions per cluster size refined by the counterpart search
KEEP = 2


def _candidates(opt: Optimiser, k: int) -> list[list[list[int]]]:
    """Cluster partitions into blocks of k, best (tightest clusters) first."""
    from .optimiser import set_partitions

    n, d = opt.n, opt.topo.delay
    if n <= opt.exhaustive_limit:
        parts = [[list(b) for b in p] for p in set_partitions(list(range(n)), k)]
    else:
        tour = opt.tour()
        parts = [[[tour[(r + i * k + j) % n] for j in range(k)] for i in range(n // k)]
                 for r in range(k)]

    def spread(p: list[list[int]]) -> float:
        return sum(max(d[a, b] for a in blk for b in blk) for blk in p)

    return sorted(parts, key=spread)[:KEEP]


def _align(opt: Optimiser, clusters: list[list[int]], deadline: float) -> Plan:
    """Swap sites inside clusters (changing the counterpart groups) while the plan improves."""
    n = opt.n
    best = opt.score(SH.hierarchical(n, clusters))
    improved = True
    while improved and time.perf_counter() < deadline:
        improved = False
        for c in range(1, len(clusters)):  # cluster 0 fixes the positions
            for i in range(len(clusters[c])):
                for j in range(i + 1, len(clusters[c])):
                    cand = [list(b) for b in clusters]
                    cand[c][i], cand[c][j] = cand[c][j], cand[c][i]
                    p = opt.score(SH.hierarchical(n, cand))
                    if p.time < best.time - 1e-12:
                        best, clusters, improved = p, cand, True
                if time.perf_counter() >= deadline:
                    return best
    return best


def sharded_plans(opt: Optimiser) -> dict[str, Plan]:
    """Best flat and best hierarchical sharded plan (the latter only when n has a factor pair)."""
    n = opt.n
    plans = {"sharded": opt.score(SH.sharded(n))} if n >= 2 else {}
    sizes = [k for k in range(2, n // 2 + 1) if n % k == 0]
    best: Plan | None = None
    for k in sizes:  # an eighth of the optimiser's budget, shared by the cluster sizes
        deadline = time.perf_counter() + opt.time_budget / (8 * len(sizes))
        for clusters in _candidates(opt, k):
            p = _align(opt, clusters, deadline)
            if best is None or p.time < best.time:
                best = p
    if best is not None:
        plans["hierarchical"] = best
    return plans
