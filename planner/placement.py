"""Site placement: which site takes which position of a schedule, found by a deterministic search.

A construction (grid, mixed cliques, covering heuristic, one-peer exponential graph) fixes its
groups over positions 0..n-1; the placement maps positions to sites. The search minimises a
latency surrogate that does not depend on the message size or the FPGA memory:

    cost(order) = sum over rounds t of  m_t * (max_g P_g + ALPHA * mean_g P_g),

where P_g is the largest round-trip time between a sender and a receiver of group g on the
placed sites and m_t is how often round t runs before epsilon-consensus. Max_g P_g is what a
memory-bound round pays (time ~ B * P / M, docs/planner.md); the mean term breaks the plateaus
of the max. Swap local search, first improvement in a seeded order, from fixed starts, with a
fixed number of swap evaluations: the result depends on the seed and the budget, never on the
clock or the machine load. Results are memoised per (latency matrix, construction, seed,
budget), so the sweep over memory sizes searches each construction once.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Sequence

import numpy as np

ALPHA = 0.25
#: (receivers, senders) positions of every group, per round.
PositionGroups = Sequence[Sequence[tuple[Sequence[int], Sequence[int]]]]

_CACHE: dict[tuple[object, ...], list[list[int]]] = {}
_CACHE_MAX = 512


def memo(key: tuple[object, ...], compute: Callable[[], list[list[int]]]) -> list[list[int]]:
    """Orders computed once per key (a pure function of the key); copies are returned."""
    if key not in _CACHE:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = compute()
    return [list(o) for o in _CACHE[key]]


def tour(delay: np.ndarray) -> list[int]:
    """A short ring through all sites: nearest neighbour from every start, then 2-opt on latency."""
    d = np.asarray(delay)
    return memo(("tour", d.tobytes(), d.shape), lambda: [_tour(d)])[0]


def _tour(d: np.ndarray) -> list[int]:
    n = len(d)
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


class _Surrogate:
    """Incrementally evaluated latency surrogate of one construction."""

    def __init__(self, rtt: np.ndarray, groups: PositionGroups, mult: Sequence[float]) -> None:
        self.rtt = rtt
        self.mult = [float(m) for m in mult]
        self.rows = rtt.tolist()
        self.groups = [[(np.asarray(r, dtype=int), np.asarray(s, dtype=int)) for r, s in rnd]
                       for rnd in groups]
        # small groups are evaluated in plain Python (faster than a NumPy call)
        self.pairs = [[[(a, b) for a in s for b in r if a != b] if len(r) * len(s) <= 16 else None
                       for r, s in rnd] for rnd in groups]
        n = rtt.shape[0]
        touch: list[set[tuple[int, int]]] = [set() for _ in range(n)]
        for t, rnd in enumerate(groups):
            if self.mult[t] == 0:
                continue
            for gi, (r, s) in enumerate(rnd):
                if len(s) > 1 or any(x not in r for x in s):
                    for p in itertools.chain(r, s):
                        touch[p].add((t, gi))
        self.touch = [sorted(x) for x in touch]

    def group_p(self, order: np.ndarray, listed: list[int], t: int, gi: int) -> float:
        """P of group gi of round t; ``listed`` is ``order`` as a list (same contents)."""
        pairs = self.pairs[t][gi]
        if pairs is not None:
            rows = self.rows
            return max((rows[listed[a]][listed[b]] for a, b in pairs), default=0.0)
        r, s = self.groups[t][gi]
        return float(self.rtt[order[s]][:, order[r]].max())

    def full(self, order: np.ndarray) -> tuple[list[list[float]], float]:
        """Every group's P under ``order`` and the surrogate cost."""
        listed = order.tolist()
        p = [[self.group_p(order, listed, t, gi) for gi in range(len(rnd))] if self.mult[t] else []
             for t, rnd in enumerate(self.groups)]
        return p, self.total(p)

    def round_cost(self, ps: list[float]) -> float:
        """One round's cost from its groups' P values."""
        return max(ps) + ALPHA * sum(ps) / len(ps) if ps else 0.0

    def total(self, p: list[list[float]]) -> float:
        """Surrogate cost: rounds weighted by how often they run before epsilon."""
        return sum(m * self.round_cost(ps) for m, ps in zip(self.mult, p, strict=True))


def search(
    rtt: np.ndarray,
    groups: PositionGroups,
    mult: Sequence[float],
    starts: Sequence[Sequence[int]],
    seed: int,
    swaps: int,
    key: object = None,
) -> list[list[int]]:
    """Local optimum of the surrogate from each start (best first), ``swaps`` evaluations each.

    ``key`` names the construction for the memo (None: not memoised).
    """
    rtt = np.asarray(rtt, dtype=float)

    def compute() -> list[list[int]]:
        sur = _Surrogate(rtt, groups, mult)
        found: dict[tuple[int, ...], float] = {}
        for si, start in enumerate(starts):
            order, cost = _descend(sur, np.array(start, dtype=int), random.Random(f"{seed}:{si}"), swaps)
            found.setdefault(tuple(int(x) for x in order), cost)
        return [list(o) for o, _ in sorted(found.items(), key=lambda kv: kv[1])]

    if key is None:
        return compute()
    ident = (rtt.tobytes(), rtt.shape, key, tuple(mult), tuple(map(tuple, starts)), seed, swaps)
    return memo(ident, compute)


def _descend(sur: _Surrogate, order: np.ndarray, rng: random.Random, swaps: int) -> tuple[np.ndarray, float]:
    """First-improvement swap descent from ``order`` (modified in place), at most ``swaps`` tries."""
    n = len(order)
    p, cost = sur.full(order)
    listed = order.tolist()
    pairs = [(i, j) for i, j in itertools.combinations(range(n), 2) if sur.touch[i] or sur.touch[j]]
    used = 0
    improved = True
    while improved and used < swaps:
        improved = False
        rng.shuffle(pairs)
        for i, j in pairs:
            if used >= swaps:
                break
            used += 1
            order[i], order[j] = order[j], order[i]
            listed[i], listed[j] = listed[j], listed[i]
            affected = sorted(set(sur.touch[i]) | set(sur.touch[j]))
            old = {(t, gi): p[t][gi] for t, gi in affected}
            for t, gi in affected:
                p[t][gi] = sur.group_p(order, listed, t, gi)
            rounds = {t for t, _ in affected}
            new_cost = cost + sum(
                sur.mult[t] * (sur.round_cost(p[t]) - _round_cost_with(sur, p[t], old, t))
                for t in rounds
            )
            if new_cost < cost - 1e-12 * max(1.0, abs(cost)):
                cost, improved = new_cost, True
            else:
                order[i], order[j] = order[j], order[i]
                listed[i], listed[j] = listed[j], listed[i]
                for (t, gi), v in old.items():
                    p[t][gi] = v
    return order, sur.total(p)


def _round_cost_with(sur: _Surrogate, ps: list[float], old: dict[tuple[int, int], float], t: int) -> float:
    """Round t's cost before the swap (``old`` holds the replaced group values)."""
    before = list(ps)
    for (tt, gi), v in old.items():
        if tt == t:
            before[gi] = v
    return sur.round_cost(before)
