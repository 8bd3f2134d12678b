"""Synchronisation schedules: which sites average together in each round.

A :class:`Round` partitions the sites into :class:`Group` s by *receiver*: every site receives in
exactly one group and ends the round holding the weighted sum of that group's senders' values.
A clique is a group whose senders are its receivers with uniform weights. A sender may feed
several groups in one round (one-peer graphs, tree broadcast); it still transmits once, on one
multicast tree covering all its receivers. Ring all-reduce, which uses no in-network
aggregation, is a round with ``ring`` set (its result is the exact average).

Families: all-to-all, rotating k-cliques (grids over Z_k^m / the affine plane AG(2,3) when
n = k^m, a greedy pair-covering heuristic otherwise), mixed-radix grids (n = k1*k2*...),
ring all-reduce, a two-level tree (cluster, leaders, broadcast), one-peer exponential graphs.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Group:
    """Receivers that end the round with ``sum(w_s * x_s for s in senders)``."""

    receivers: tuple[int, ...]
    senders: tuple[int, ...]
    weights: tuple[float, ...]

    @property
    def aggregating(self) -> bool:
        """True when receivers merge more than one stream (needs FPGA slots)."""
        return len(self.senders) > 1


@dataclass(frozen=True)
class Round:
    """One synchronisation round: receiver groups (a partition) or a ring all-reduce."""

    groups: tuple[Group, ...]
    ring: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Schedule:
    """A family's schedule: rounds repeated cyclically until epsilon-consensus."""

    family: str
    label: str
    rounds: tuple[Round, ...]
    n: int


def clique(members: Sequence[int]) -> Group:
    """A clique: every member sends, every member receives the uniform average."""
    m = tuple(sorted(members))
    return Group(m, m, tuple([1.0 / len(m)] * len(m)))


def clique_round(blocks: Sequence[Sequence[int]]) -> Round:
    """A round made of disjoint cliques."""
    return Round(tuple(clique(b) for b in blocks))


def _relabel(blocks: Sequence[Sequence[int]], order: Sequence[int]) -> list[list[int]]:
    return [[order[p] for p in b] for b in blocks]


def all_to_all(n: int) -> Schedule:
    """One clique of all sites: exact average in one round."""
    return Schedule("all-to-all", "all-to-all", (clique_round([list(range(n))]),), n)


def grid_partitions(radices: Sequence[int]) -> list[list[list[int]]]:
    """Coordinate classes of the mixed-radix grid Z_k1 x ... x Z_km (position p <-> digits).

    Round j groups positions that differ only in digit j; averaging each class once in turn
    gives the exact average after m rounds (the projections commute, product = J/n).
    """
    n = math.prod(radices)
    digits = list(itertools.product(*[range(k) for k in radices]))
    parts = []
    for j in range(len(radices)):
        blocks: dict[tuple[int, ...], list[int]] = {}
        for p, d in enumerate(digits):
            blocks.setdefault(d[:j] + d[j + 1 :], []).append(p)
        parts.append(list(blocks.values()))
    assert all(sum(len(b) for b in part) == n for part in parts)
    return parts


def affine_plane_classes(q: int) -> list[list[list[int]]]:
    """The q+1 parallel classes of the affine plane AG(2,q), q prime; point (x,y) = x*q + y."""
    classes = [[[x * q + y for y in range(q)] for x in range(q)]]  # vertical lines x = b
    for m in range(q):  # lines y = m x + b
        classes.append([[x * q + (m * x + b) % q for x in range(q)] for b in range(q)])
    return classes


def grid(n: int, radices: Sequence[int], order: Sequence[int] | None = None) -> Schedule:
    """Mixed-radix grid schedule (exact in len(radices) rounds) with sites placed by ``order``."""
    if math.prod(radices) != n:
        raise ValueError(f"radices {radices} do not multiply to {n}")
    order = list(range(n)) if order is None else list(order)
    rounds = tuple(clique_round(_relabel(p, order)) for p in grid_partitions(radices))
    label = "grid " + "x".join(map(str, radices))
    return Schedule(f"grid-{'x'.join(map(str, radices))}", label, rounds, n)


def _is_power(n: int, k: int) -> int:
    m, v = 0, 1
    while v < n:
        v *= k
        m += 1
    return m if v == n else 0


def _is_prime(q: int) -> bool:
    return q >= 2 and all(q % d for d in range(2, int(q**0.5) + 1))


def covering_partitions(n: int, k: int, rounds: int | None = None) -> list[list[list[int]]]:
    """Greedy resolvable-design stand-in: rounds of groups of ~k covering unmet pairs first.

    Each round partitions the sites into floor(n/k) groups (the remainder spread over them);
    sites are placed greedily into the group where they meet the most not-yet-met partners.
    Deterministic, so schedules are reproducible.
    """
    g = max(1, n // k)
    sizes = [n // g + (1 if i < n % g else 0) for i in range(g)]
    met = np.zeros((n, n), dtype=bool)
    np.fill_diagonal(met, True)
    out: list[list[list[int]]] = []
    target = rounds if rounds is not None else max(2, math.ceil(math.log(n) / math.log(max(k, 2))) + 2)
    for r in range(target):
        blocks: list[list[int]] = [[] for _ in range(g)]
        for s in sorted(range(n), key=lambda s: (met[s].sum(), (s * 7919 + r) % n)):
            best = max(
                (i for i in range(g) if len(blocks[i]) < sizes[i]),
                key=lambda i: (sum(not met[s, t] for t in blocks[i]), -len(blocks[i])),
            )
            blocks[best].append(s)
        for b in blocks:
            for x, y in itertools.combinations(b, 2):
                met[x, y] = met[y, x] = True
        out.append(blocks)
    return out


def rotating_cliques(n: int, k: int, order: Sequence[int] | None = None) -> Schedule:
    """Rotating cliques of size k.

    n = q^2 with q prime: all q+1 parallel classes of AG(2,q) in turn (any two consecutive
    classes average exactly). n = k^m: the coordinate classes of Z_k^m (exact in m rounds).
    Otherwise a greedy covering heuristic (not exact; converges to epsilon over repeats).
    """
    order = list(range(n)) if order is None else list(order)
    m = _is_power(n, k)
    if m == 2 and _is_prime(k):
        parts = affine_plane_classes(k)
        label = f"cliques of {k} (AG(2,{k}), {len(parts)} classes)"
    elif m >= 1:
        parts = grid_partitions([k] * m)
        label = f"cliques of {k} (Z_{k}^{m})"
    else:
        parts = covering_partitions(n, k)
        label = f"cliques of ~{k} (covering heuristic)"
    rounds = tuple(clique_round(_relabel(p, order)) for p in parts)
    return Schedule(f"cliques-{k}", label, rounds, n)


def ring_allreduce(n: int, order: Sequence[int] | None = None) -> Schedule:
    """Ring all-reduce over ``order`` with no in-network aggregation (today's baseline)."""
    order = tuple(range(n)) if order is None else tuple(order)
    everyone = tuple(range(n))
    g = Group(everyone, everyone, tuple([1.0 / n] * n))
    return Schedule("ring", "ring all-reduce (no FPGA)", (Round((g,), ring=order),), n)


def tree(n: int, clusters: Sequence[Sequence[int]], leaders: Sequence[int]) -> Schedule:
    """Two-level tree: average in clusters, leaders average (weighted by cluster size), broadcast."""
    clusters = [sorted(c) for c in clusters]
    if sorted(itertools.chain(*clusters)) != list(range(n)):
        raise ValueError("clusters must partition the sites")
    r1 = clique_round(clusters)
    lead = tuple(sorted(leaders))
    size = {ld: len(c) for c in clusters for ld in c if ld in lead}
    weights = tuple(size[ld] / n for ld in lead)
    others = [s for s in range(n) if s not in lead]
    r2 = Round((Group(lead, lead, weights),) + tuple(Group((s,), (s,), (1.0,)) for s in others))
    groups = []
    for c in clusters:
        ld = next(x for x in c if x in lead)
        groups.append(Group((ld,), (ld,), (1.0,)))
        rest = tuple(x for x in c if x != ld)
        if rest:
            groups.append(Group(rest, (ld,), (1.0,)))
    r3 = Round(tuple(groups))
    return Schedule("tree", f"tree ({len(clusters)} clusters)", (r1, r2, r3), n)


def exponential(n: int, order: Sequence[int] | None = None) -> Schedule:
    """One-peer exponential graph: round t, position p averages with position p - 2^t (mod n).

    Exact in log2(n) rounds when n is a power of two; otherwise converges over repeats.
    """
    order = list(range(n)) if order is None else list(order)
    tau = max(1, math.ceil(math.log2(n)))
    rounds = []
    for t in range(tau):
        h = 2**t % n
        groups = []
        for p in range(n):
            src = (p - h) % n
            if src == p:
                groups.append(Group((order[p],), (order[p],), (1.0,)))
            else:
                groups.append(Group((order[p],), (order[p], order[src]), (0.5, 0.5)))
        rounds.append(Round(tuple(groups)))
    return Schedule("exponential", "one-peer exponential", tuple(rounds), n)


def validate(schedule: Schedule) -> None:
    """Raise ValueError unless every round's receivers partition the sites and weights sum to 1."""
    n = schedule.n
    for t, rnd in enumerate(schedule.rounds):
        recv = sorted(itertools.chain(*(g.receivers for g in rnd.groups)))
        if recv != list(range(n)):
            raise ValueError(f"round {t}: receivers do not partition the {n} sites")
        for g in rnd.groups:
            if len(g.senders) != len(g.weights) or abs(sum(g.weights) - 1) > 1e-9:
                raise ValueError(f"round {t}: group {g.receivers} weights do not sum to 1")
            if any(not 0 <= s < n for s in g.senders):
                raise ValueError(f"round {t}: sender out of range in {g.senders}")
        if rnd.ring is not None and sorted(rnd.ring) != list(range(n)):
            raise ValueError(f"round {t}: ring is not a permutation of the sites")
