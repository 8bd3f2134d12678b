"""Schedule optimiser: pick group sizes and which sites go together to minimise time to consensus.

For every family the optimiser searches the free choices and scores each candidate by the
analytic round model (``roundmodel``) and the consensus metric (``consensus``):

* exact designs (all-to-all, grids Z_k1 x ... x Z_km for every factorisation n = k1*...*km, which
  include rotating k-cliques when all k are equal, AG(2,3) for nine sites): the *assignment* of
  sites to grid positions. Two-level grids with n <= ``exhaustive_limit`` are solved exactly by
  enumerating every pair of orthogonal partitions (each round's time is computed once per
  partition); larger ones by the deterministic placement search (``placement``);
* rotating cliques whose size k gives no exact design for n: the exact mixed-size
  constructions of ``cliques`` (blocks of at most k, and of about k) and the inexact greedy
  covering schedule, all placed by the same search and compared by time to epsilon-consensus;
* ring all-reduce: a latency tour (nearest neighbour + 2-opt); one-peer exponential graphs: the
  placement search;
* tree: the number of clusters (k-medoids on latency; medoids lead);
* sharded all-reduce (flat) and hierarchical sharding: ``sharded_search``.

The search is deterministic: a latency surrogate with a fixed number of swap evaluations
(``swaps``) and a seed, then the round model picks among the surrogate's best local optima; on
up to ``refine_limit`` sites (and for the ring at any size) a fixed number (``refine_evals``) of
round-model evaluations refines the best one. No wall-clock limit decides a result.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from . import cliques as C
from . import placement
from . import schedules as S
from .consensus import rounds_to_consensus
from .roundmodel import RoundModel, RoundResult
from .schedules import Round, Schedule
from .sharded_search import sharded_plans
from .topology import Topology


@dataclass
class Plan:
    """The best schedule of one family and its cost."""

    family: str
    schedule: Schedule
    time: float  # seconds to epsilon-consensus
    rounds: int | None
    round_times: list[float]  # each includes the round's scale agreement
    bounds: list[str] = field(default_factory=list)
    exact_search: bool = False
    agreements: list[float] = field(default_factory=list)  # the agreement part of each round

    @property
    def agreement_time(self) -> float:
        """The scale agreements' part of ``time`` (rounds repeat cyclically)."""
        if not self.rounds or not self.agreements:
            return 0.0 if self.rounds is not None else math.inf
        k = len(self.agreements)
        return sum(self.agreements[t % k] for t in range(self.rounds))


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
        seed: int = 0,
        swaps: int = 2000,
        refine_limit: int = 8,
        refine_evals: int = 120,
    ) -> None:
        self.topo = topo
        self.n = topo.n
        self.eps = eps
        self.model = RoundModel(topo, nbytes, chunk_bytes, memory_model)
        self.exhaustive_limit = exhaustive_limit
        self.seed = seed
        self.swaps = swaps
        self.refine_limit = refine_limit
        self.refine_evals = refine_evals
        self._cache: dict[tuple[tuple[int, ...], ...], float] = {}
        self._round_cache: dict[Round, RoundResult] = {}

    # -- scoring -------------------------------------------------------------------------
    def partition_time(self, blocks: Sequence[Sequence[int]]) -> float:
        """Round time of a round of disjoint cliques (memoised on the canonical partition)."""
        key = tuple(sorted(tuple(sorted(b)) for b in blocks))
        if key not in self._cache:
            self._cache[key] = self.model.round_time(S.clique_round(key)).time
        return self._cache[key]

    def _round_result(self, rnd: Round) -> RoundResult:
        """The round model's result (memoised on the round: every field, subclasses included)."""
        if rnd not in self._round_cache:
            self._round_cache[rnd] = self.model.round_time(rnd)
        return self._round_cache[rnd]

    def round_cost(self, rnd: Round) -> float:
        """Round time under the model (memoised on the round)."""
        return self._round_result(rnd).time

    def score(self, schedule: Schedule) -> Plan:
        """Time to epsilon-consensus of a schedule under the round model."""
        results = [self._round_result(r) for r in schedule.rounds]
        times = [r.time for r in results]
        rounds = rounds_to_consensus(schedule, self.eps)
        total = math.inf if rounds is None else sum(times[t % len(times)] for t in range(rounds))
        return Plan(schedule.family, schedule, total, rounds, times, [r.bound for r in results],
                    agreements=[r.agreement for r in results])

    # -- families ------------------------------------------------------------------------
    def tour(self) -> list[int]:
        """A short ring through all sites: nearest neighbour on latency, then 2-opt."""
        return placement.tour(self.topo.delay)

    def best_grid(self, radices: Sequence[int]) -> tuple[Schedule, bool]:
        """Best site assignment for a grid; exact enumeration when small, else local search."""
        n = self.n
        if len(radices) == 2 and n <= self.exhaustive_limit:
            return self._grid_exhaustive(radices), True
        plan = self.placed(("grid", tuple(radices)), lambda o: self._grid_schedule(radices, o))
        return plan.schedule, False

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

    def placed(self, key: object, build: Callable[[Sequence[int]], Schedule]) -> Plan:
        """Best placement of a construction (deterministic, see the module docstring).

        ``build(order)`` is the construction's schedule with position p on site order[p];
        ``key`` names it for the placement memo.
        """
        n = self.n
        ident = build(list(range(n)))  # site p = position p: the groups in position space
        rounds = rounds_to_consensus(ident, self.eps)  # placement-invariant
        if rounds is None:
            return self.score(ident)
        groups = [[(g.receivers, g.senders) for g in r.groups] for r in ident.rounds]
        period = len(groups)
        mult = [sum(1 for t in range(rounds) if t % period == i) for i in range(period)]
        d = self.topo.delay
        starts = [self.tour(), sorted(range(n), key=lambda s: tuple(d[s])),
                  random.Random(f"{self.seed}:start").sample(range(n), n)]
        rtt = d + d.T
        cands = placement.search(rtt, groups, mult, starts, self.seed, self.swaps, key=(key, n))

        def cost(order: Sequence[int]) -> float:
            sched = build(order)
            return sum(m * self.round_cost(r) for m, r in zip(mult, sched.rounds, strict=True) if m)

        if n <= self.refine_limit:
            cands = [self._refine(cands[0], cost)] + cands[1:]
        best = min(cands[:2], key=cost)
        return self.score(build(best))

    def _refine(self, order: list[int], cost: Callable[[Sequence[int]], float]) -> list[int]:
        """Swap local search on the round model, ``refine_evals`` evaluations, seeded order."""
        n = self.n
        rng = random.Random(f"{self.seed}:refine")
        order = list(order)
        best = cost(order)
        pairs = list(itertools.combinations(range(n), 2))
        used, improved = 0, True
        while improved and used < self.refine_evals:
            improved = False
            rng.shuffle(pairs)
            for i, j in pairs:
                if used >= self.refine_evals:
                    break
                used += 1
                order[i], order[j] = order[j], order[i]
                c = cost(order)
                if c < best - 1e-12:
                    best, improved = c, True
                else:
                    order[i], order[j] = order[j], order[i]
        return order

    def ring_plan(self) -> Plan:
        """Ring all-reduce on the latency tour, then 2-opt on the round model (``refine_evals``).

        The ring uses no FPGA memory, so the order is memoised across memory sizes.
        """
        n, topo, model = self.n, self.topo, self.model
        key = ("ring", topo.delay.tobytes(), topo.dir_bw.tobytes(), topo.line_rate.tobytes(),
               model.nbytes, model.chunk, self.refine_evals)
        (order,) = placement.memo(key, lambda: [self._ring_2opt(self.tour())])
        return self.score(S.ring_allreduce(n, order))

    def _ring_2opt(self, order: list[int]) -> list[int]:
        n = self.n
        best = self.round_cost(S.ring_allreduce(n, order).rounds[0])
        used, improved = 0, n > 3
        while improved and used < self.refine_evals:
            improved = False
            for i, j in itertools.combinations(range(1, n), 2):
                if used >= self.refine_evals:
                    break
                used += 1
                cand = order[:i] + order[i : j + 1][::-1] + order[j + 1 :]
                t = self.round_cost(S.ring_allreduce(n, cand).rounds[0])
                if t < best - 1e-12:
                    best, order, improved = t, cand, True
        return order

    def exponential_plan(self) -> Plan:
        """One-peer exponential graph, placed by the search."""
        return self.placed("exponential", lambda o: S.exponential(self.n, o))

    def cliques_plan(self, k: int) -> Plan:
        """Cliques of about k when n is no power of k: exact mixed sizes vs the covering heuristic."""
        n = self.n
        plans = []
        for cons in C.constructions(n, k):
            plans.append(self.placed(("mixed", cons.name),
                                     lambda o, c=cons: c.schedule(f"cliques-{k}", o)))
        plans.append(self.placed(("covering", k), lambda o: S.rotating_cliques(n, k, o)))
        return min(plans, key=plan_rank)

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
        exact_k: set[int] = set()
        for radices in factorisations(n):
            sched, exact = self.best_grid(radices)
            p = self.score(sched)
            p.exact_search = exact
            plans[sched.family] = p
            if len(set(radices)) == 1:
                exact_k.add(radices[0])
        for k in (2, 3, 4):
            if k < n and k not in exact_k:
                plans[f"cliques-{k}"] = self.cliques_plan(k)
        plans["ring"] = self.ring_plan()
        plans["exponential"] = self.exponential_plan()
        if n >= 4:
            plans["tree"] = self.tree_plan()
        plans.update(sharded_plans(self))
        if families is not None:
            plans = {k: v for k, v in plans.items() if k in families}
        return plans


def plan_rank(p: Plan) -> tuple[float, int]:
    """How plans are ranked everywhere: time to consensus, ties broken by fewer rounds."""
    return (p.time, p.rounds or 0)


def best_plan(plans: dict[str, Plan]) -> Plan:
    """The fastest plan (ties: fewer rounds)."""
    return min(plans.values(), key=plan_rank)
