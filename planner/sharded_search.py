"""Optimiser search for the sharded families (``sharded``): flat, and the hierarchical levels.

Flat sharding has no free choice (every site owns one shard; the order does not matter).
Hierarchical sharding chooses the radices (every ordering of every factorisation of n: level 0,
the clusters, carries the most bytes) and the site order (which sites share a cluster, which are
counterparts at the next level):

* starting orders: the optimiser's latency tour cut into consecutive clusters (every rotation);
  for two levels and n <= ``exhaustive_limit`` also every partition into clusters, ranked by the
  sum of the clusters' largest one-way latency (the best ``KEEP``);
* swap local search on the round model from each start (first improvement), capped at
  ``MAX_EVALS`` model evaluations shared by the radices (scaled by 16/n beyond 16 sites, where
  an evaluation costs more): deterministic, whatever the load. Beyond 16 sites only two-level
  radices are tried (64 sites: ~60 evaluations, a few seconds).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from . import sharded as SH

if TYPE_CHECKING:
    from .optimiser import Optimiser, Plan

#: cluster partitions (n <= exhaustive_limit) kept as starting orders
KEEP = 2
#: round-model evaluations of the hierarchical search (all radices together)
MAX_EVALS = 240


def _radices(n: int) -> list[tuple[int, ...]]:
    """Every ordering of every factorisation of n into >= 2 factors >= 2 (two only beyond 16)."""
    from .optimiser import factorisations

    facts = [f for f in factorisations(n) if n <= 16 or len(f) == 2]
    return sorted({p for f in facts for p in itertools.permutations(f)})


def _starts(opt: Optimiser, radices: tuple[int, ...], tour: list[int]) -> list[list[int]]:
    """Starting site orders: tour rotations, and the tightest cluster partitions when small."""
    from .optimiser import set_partitions

    n, k, d = opt.n, radices[0], opt.topo.delay
    starts = [tour[r:] + tour[:r] for r in range(min(k, 2))]
    if len(radices) == 2 and n <= opt.exhaustive_limit:
        parts = sorted(set_partitions(list(range(n)), k),
                       key=lambda p: sum(max(d[a, b] for a in blk for b in blk) for blk in p))
        starts += [[s for blk in p for s in blk] for p in parts[:KEEP]]
    return starts


def _local_search(opt: Optimiser, radices: tuple[int, ...], order: list[int],
                  evals: int) -> Plan:
    """Swap two sites' positions while the plan improves (first improvement), ``evals`` at most."""
    n = opt.n
    best = opt.score(SH.sharded(n, order, radices))
    improved = True
    while improved and evals > 0:
        improved = False
        for i, j in itertools.combinations(range(n), 2):
            if evals <= 0:
                break
            evals -= 1
            cand = list(order)
            cand[i], cand[j] = cand[j], cand[i]
            p = opt.score(SH.sharded(n, cand, radices))
            if p.time < best.time - 1e-12:
                best, order, improved = p, cand, True
    return best


def sharded_plans(opt: Optimiser) -> dict[str, Plan]:
    """Best flat and best hierarchical sharded plan (the latter when n is not prime)."""
    n = opt.n
    if n < 2:
        return {}
    plans = {"sharded": opt.score(SH.sharded(n))}
    options = _radices(n)
    best: Plan | None = None
    budget = MAX_EVALS * min(1.0, 16 / n)
    tour = opt.tour()
    for radices in options:
        starts = _starts(opt, radices, tour)
        for order in starts:
            p = _local_search(opt, radices, order, int(budget // (len(options) * len(starts))))
            if best is None or p.time < best.time:
                best = p
    if best is not None:
        plans["hierarchical"] = best
    return plans
