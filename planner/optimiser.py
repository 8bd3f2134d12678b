"""Schedule optimiser: pick group sizes and which sites go together to minimise time to consensus.

For every family the optimiser searches the free choices and scores each candidate by the
analytic round model (``roundmodel``) and the consensus metric (``consensus``):

* exact designs (all-to-all, grids Z_k1 x ... x Z_km for every factorisation n = k1*...*km, which
  include rotating k-cliques when all k are equal, AG(2,3) for nine sites): the *assignment* of
  sites to grid positions. Two-level grids with n <= ``exhaustive_limit`` are solved exactly by
  enumerating every pair of orthogonal partitions (each round's time is computed once per
  partition); larger ones by multi-start local search (swap two sites, keep improvements);
* rotating cliques whose size does not give an exact design: the greedy covering schedule on a
  latency-sorted site order;
* ring all-reduce and one-peer exponential graphs: the site order (nearest-neighbour tour + 2-opt
  on the round model);
* tree: the number of clusters (k-medoids on latency; medoids lead);
* sharded all-reduce (flat) and hierarchical sharding: ``sharded_search``.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from . import schedules as S
from .consensus import rounds_to_consensus
from .roundmodel import RoundModel
from .schedules import Schedule
from .sharded_search import sharded_plans
from .topology import Topology


@dataclass
class Plan:
    """The best schedule of one family and its cost."""

    family: str
    schedule: Schedule
    time: float  # seconds to epsilon-consensus
    rounds: int | None
    round_times: list[float]
    bounds: list[str] = field(default_factory=list)
    exact_search: bool = False


def factorisations(n: int, min_factor: int = 2) -> list[tuple[int, ...]]:
    """Non-increasing factorisations of n into >= 2 factors each >= min_factor (n=12: (6,2), (4,3), (3,2,2))."""
    out: list[tuple[int, ...]] = []

    def rec(rest: int, maxf: int, acc: tuple[int, ...]) -> None:
        if rest == 1:
            if len(acc) >= 2:
                out.append(acc)
            return
        for f in range(min(rest, maxf), min_factor - 1, -1):
            if rest % f == 0:
                rec(rest // f, f, acc + (f,))

    rec(n, n, ())
    return out


def set_partitions(items: Sequence[int], size: int) -> Iterator[list[tuple[int, ...]]]:
    """All partitions of ``items`` into blocks of exactly ``size`` (canonical: first item leads)."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for mates in itertools.combinations(rest, size - 1):
        left = [x for x in rest if x not in mates]
        for tail in set_partitions(left, size):
            yield [(first, *mates)] + tail


class Optimiser:
    """Searches every family for one topology / bytes / memory setting."""

    def __init__(
        self,
        topo: Topology,
        nbytes: int,
        eps: float = 1e-3,
        chunk_bytes: int = 1996,
        memory_model: str = "shared",
        exhaustive_limit: int = 9,
        time_budget: float = 30.0,
        seed: int = 0,
    ) -> None:
        self.topo = topo
        self.n = topo.n
        self.eps = eps
        self.model = RoundModel(topo, nbytes, chunk_bytes, memory_model)
        self.exhaustive_limit = exhaustive_limit
        self.time_budget = time_budget
        self.rng = random.Random(seed)
        self._cache: dict[tuple[tuple[int, ...], ...], float] = {}
        self._grid_budget = time_budget / 4

    # -- scoring -------------------------------------------------------------------------
    def partition_time(self, blocks: Sequence[Sequence[int]]) -> float:
        """Round time of a round of disjoint cliques (memoised on the canonical partition)."""
        key = tuple(sorted(tuple(sorted(b)) for b in blocks))
        if key not in self._cache:
            self._cache[key] = self.model.round_time(S.clique_round(key)).time
        return self._cache[key]

    def score(self, schedule: Schedule) -> Plan:
        """Time to epsilon-consensus of a schedule under the round model."""
        results = [self.model.round_time(r) for r in schedule.rounds]
        times = [r.time for r in results]
        rounds = rounds_to_consensus(schedule, self.eps)
        total = math.inf if rounds is None else sum(times[t % len(times)] for t in range(rounds))
        return Plan(schedule.family, schedule, total, rounds, times, [r.bound for r in results])

    # -- families ------------------------------------------------------------------------
    def tour(self) -> list[int]:
        """A short ring through all sites: nearest neighbour on latency, then 2-opt."""
        d = self.topo.delay
        n = self.n
        best: list[int] = []
        best_len = math.inf
        for start in range(n):
            order, left = [start], set(range(n)) - {start}
            while left:
                nxt = min(left, key=lambda j: d[order[-1], j])
                order.append(nxt)
                left.remove(nxt)
            improved = True
            while improved:
                improved = False
                for i in range(1, n - 1):
                    for j in range(i + 1, n):
                        a, b, c, e = order[i - 1], order[i], order[j], order[(j + 1) % n]
                        if d[a, c] + d[b, e] < d[a, b] + d[c, e] - 1e-12:
                            order[i : j + 1] = reversed(order[i : j + 1])
                            improved = True
            length = sum(d[order[i], order[(i + 1) % n]] for i in range(n))
            if length < best_len:
                best, best_len = order, length
        return best

    def best_grid(self, radices: Sequence[int]) -> tuple[Schedule, bool]:
        """Best site assignment for a grid; exact enumeration when small, else local search."""
        n = self.n
        if len(radices) == 2 and n <= self.exhaustive_limit:
            return self._grid_exhaustive(radices), True
        return self._grid_local_search(radices), False

    def _grid_exhaustive(self, radices: Sequence[int]) -> Schedule:
        k1, k2 = radices
        n = self.n
        # round 0 groups of size k1 (digit 0 varies), round 1 groups of size k2
        parts_a = list(set_partitions(list(range(n)), k1))
        parts_b = parts_a if k2 == k1 else list(set_partitions(list(range(n)), k2))
        ta = [self.partition_time(p) for p in parts_a]
        tb = ta if parts_b is parts_a else [self.partition_time(p) for p in parts_b]
        masks_a = [[sum(1 << x for x in b) for b in p] for p in parts_a]
        masks_b = masks_a if parts_b is parts_a else [[sum(1 << x for x in b) for b in p] for p in parts_b]
        order_b = sorted(range(len(parts_b)), key=lambda j: tb[j])
        best, best_pair = math.inf, (0, 0)
        for i in sorted(range(len(parts_a)), key=lambda i: ta[i]):
            if ta[i] + tb[order_b[0]] >= best:
                break
            for j in order_b:
                if ta[i] + tb[j] >= best:
                    break
                if all((ma & mb).bit_count() == 1 for ma in masks_a[i] for mb in masks_b[j]):
                    best, best_pair = ta[i] + tb[j], (i, j)
                    break
        pa, pb = parts_a[best_pair[0]], parts_b[best_pair[1]]
        # grid position p = x * k2 + y holds the site in column-block x of pb and row-block y
        # of pa: round 0 (digit x varies) averages pa's blocks, round 1 (digit y) pb's blocks
        order = [0] * n
        for x, blk_b in enumerate(pb):
            for y, blk_a in enumerate(pa):
                (site,) = set(blk_a) & set(blk_b)
                order[x * k2 + y] = site
        return self._grid_schedule([k1, k2], order)

    def _grid_schedule(self, radices: Sequence[int], order: Sequence[int]) -> Schedule:
        if len(set(radices)) == 1:
            return S.rotating_cliques(self.n, radices[0], order)
        return S.grid(self.n, radices, order)

    def _grid_cost(self, radices: Sequence[int], order: Sequence[int]) -> float:
        parts = S.grid_partitions(radices)
        return sum(self.partition_time([[order[p] for p in b] for b in part]) for part in parts)

    def _grid_local_search(self, radices: Sequence[int]) -> Schedule:
        n = self.n
        deadline = time.perf_counter() + self._grid_budget
        starts = [self.tour(), sorted(range(n), key=lambda s: tuple(self.topo.delay[s]))]
        starts += [self.rng.sample(range(n), n) for _ in range(2)]
        best_order, best_cost = starts[0], math.inf
        for order in starts:
            order = list(order)
            cost = self._grid_cost(radices, order)
            improved = True
            while improved and time.perf_counter() < deadline:
                improved = False
                pairs = list(itertools.combinations(range(n), 2))
                self.rng.shuffle(pairs)
                for i, j in pairs:
                    if time.perf_counter() >= deadline:
                        break
                    order[i], order[j] = order[j], order[i]
                    c = self._grid_cost(radices, order)
                    if c < cost - 1e-12:
                        cost, improved = c, True
                    else:
                        order[i], order[j] = order[j], order[i]
            if cost < best_cost:
                best_order, best_cost = list(order), cost
        return self._grid_schedule(radices, best_order)

    def best_order(self, build: callable, order: list[int]) -> Plan:  # type: ignore[valid-type]
        """2-opt over a site order for order-dependent families (ring, exponential)."""
        n = self.n
        best = self.score(build(order))
        deadline = time.perf_counter() + self.time_budget / 8
        improved = True
        while improved and time.perf_counter() < deadline and n > 3:
            improved = False
            for i in range(1, n - 1):
                for j in range(i + 1, n):
                    cand = order[:i] + order[i : j + 1][::-1] + order[j + 1 :]
                    p = self.score(build(cand))
                    if p.time < best.time - 1e-12:
                        best, order, improved = p, cand, True
                if time.perf_counter() >= deadline:
                    break
        return best

    def tree_plan(self) -> Plan:
        """Best two-level tree over k = 2..sqrt(2n)+1 clusters (k-medoids on latency)."""
        d = self.topo.delay
        n = self.n
        best: Plan | None = None
        for k in range(2, max(3, int(math.sqrt(2 * n)) + 2)):
            if k >= n:
                break
            medoids = list(np.argsort(d.sum(axis=1))[:1])
            while len(medoids) < k:  # farthest-point seeding
                medoids.append(int(np.argmax(d[:, medoids].min(axis=1))))
            for _ in range(20):
                assign = np.argmin(d[:, medoids], axis=1)
                new = []
                for c in range(k):
                    members = np.flatnonzero(assign == c)
                    new.append(int(members[np.argmin(d[np.ix_(members, members)].sum(axis=1))]))
                if new == medoids:
                    break
                medoids = new
            assign = np.argmin(d[:, medoids], axis=1)
            clusters = [list(np.flatnonzero(assign == c)) for c in range(k)]
            clusters = [[int(x) for x in c] for c in clusters if c]
            leaders = [m for m in medoids if any(m in c for c in clusters)]
            p = self.score(S.tree(n, clusters, leaders))
            if best is None or p.time < best.time:
                best = p
        assert best is not None
        return best

    # -- driver --------------------------------------------------------------------------
    def run(self, families: Sequence[str] | None = None) -> dict[str, Plan]:
        """Best plan per family (keys: all-to-all, cliques-k, grid-..., ring, tree, exponential)."""
        n = self.n
        plans: dict[str, Plan] = {}
        plans["all-to-all"] = self.score(S.all_to_all(n))
        tour = self.tour()
        facts = factorisations(n)
        # local searches share half the budget; ring and exponential 2-opt an eighth each
        self._grid_budget = self.time_budget / (2 * max(1, len(facts)))
        exact_k: set[int] = set()
        for radices in facts:
            sched, exact = self.best_grid(radices)
            p = self.score(sched)
            p.exact_search = exact
            plans[sched.family] = p
            if len(set(radices)) == 1:
                exact_k.add(radices[0])
        for k in (2, 3, 4):
            if k < n and k not in exact_k:
                p = self.score(S.rotating_cliques(n, k, tour))
                plans[f"cliques-{k}"] = p
        plans["ring"] = self.best_order(lambda o: S.ring_allreduce(n, o), list(tour))
        plans["exponential"] = self.best_order(lambda o: S.exponential(n, o), list(tour))
        if n >= 4:
            plans["tree"] = self.tree_plan()
        plans.update(sharded_plans(self))
        if families is not None:
            plans = {k: v for k, v in plans.items() if k in families}
        return plans


def best_plan(plans: dict[str, Plan]) -> Plan:
    """The fastest plan (ties: fewer rounds)."""
    return min(plans.values(), key=lambda p: (p.time, p.rounds or 0))
