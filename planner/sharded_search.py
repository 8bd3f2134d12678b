"""Optimiser search for the sharded families (``sharded``): flat, and the hierarchical levels.

Flat sharding has no free choice (every site owns one shard; the order does not matter).
Hierarchical sharding chooses the radices (every ordering of every factorisation of n: level 0,
the clusters, carries the most bytes) and the site order (which sites share a cluster, which are
counterparts at the next level):

* starting orders: the optimiser's latency tour cut into consecutive clusters (two rotations);
  for two levels and n <= ``exhaustive_limit`` also every partition into clusters, ranked by the
  sum of the clusters' largest one-way latency (the best ``KEEP``);
* up to ``SEARCH_LIMIT`` sites: swap local search on the round model from each start (first
  improvement), capped at ``MAX_EVALS`` model evaluations shared by the radices: deterministic,
  whatever the load;
* beyond ``SEARCH_LIMIT`` sites (two-level radices only): a model evaluation costs tens of
  milliseconds, so the order is searched once per radices on a latency surrogate that does not
  depend on the memory or the message size (``placement.search`` over the levels' groups, each
  level weighted by the bytes a reduce-scatter moves there, as memory-bound phase time is
  bytes x slot cycle / memory) and memoised across memory sizes, as the placement of the other
  families; at each memory size the round model picks among the surrogate's local optima
  (``CANDIDATES`` per radices). 64 sites: one surrogate search, then ~11 model evaluations per
  memory size instead of ~70.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING

from . import placement
from . import sharded as SH

if TYPE_CHECKING:
    from .optimiser import Optimiser, Plan

#: cluster partitions (n <= exhaustive_limit) kept as starting orders
KEEP = 2
#: round-model evaluations of the hierarchical search (all radices together)
MAX_EVALS = 240
#: largest n searched on the round model; beyond, the memoised surrogate search
SEARCH_LIMIT = 16
#: surrogate optima per radices that the round model compares (beyond ``SEARCH_LIMIT``)
CANDIDATES = 2


def _radices(n: int) -> list[tuple[int, ...]]:
    """Every ordering of every factorisation of n into >= 2 factors >= 2 (two only beyond 16)."""
    from .optimiser import factorisations

    facts = [f for f in factorisations(n) if n <= SEARCH_LIMIT or len(f) == 2]
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


def _surrogate_orders(opt: Optimiser, radices: tuple[int, ...], starts: list[list[int]]) -> list[list[int]]:
    """Local optima (best first) of the levels' latency surrogate, memoised across memory sizes.

    Level j is a round of ``placement``'s surrogate whose groups are the level's groups of
    positions, weighted by 1 / (k_0 ... k_j): the bytes per stream of its reduce-scatter.
    """
    levels = SH.sharded(opt.n, None, radices).rounds[0].levels()  # order = identity: positions
    groups = [[(g, g) for g in lv] for lv in levels]
    mult = [1 / math.prod(radices[: j + 1]) for j in range(len(radices))]
    d = opt.topo.delay
    return placement.search(d + d.T, groups, mult, starts, opt.seed, opt.swaps,
                            key=("hierarchical", radices))


def sharded_plans(opt: Optimiser) -> dict[str, Plan]:
    """Best flat and best hierarchical sharded plan (the latter when n is not prime)."""
    n = opt.n
    if n < 2:
        return {}
    plans = {"sharded": opt.score(SH.sharded(n))}
    options = _radices(n)
    best: Plan | None = None
    budget = MAX_EVALS
    tour = opt.tour()
    for radices in options:
        starts = _starts(opt, radices, tour)
        if n > SEARCH_LIMIT:
            found = [opt.score(SH.sharded(n, order, radices))
                     for order in _surrogate_orders(opt, radices, starts)[:CANDIDATES]]
        else:
            found = [_local_search(opt, radices, order, budget // (len(options) * len(starts)))
                     for order in starts]
        for p in found:
            if best is None or p.time < best.time:
                best = p
    if best is not None:
        plans["hierarchical"] = best
    return plans
