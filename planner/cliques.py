"""Clique schedules for any number of sites: mixed clique sizes, exact in a stated number of rounds.

Rotating k-cliques are exact designs only when n = k^m (coordinate classes of Z_k^m) or n = q^2
(the affine plane), and mixed-radix grids need n = k1*...*km. For every other n this module
builds a **hierarchical merge** (a ragged mixed-radix grid): the sites are split into blocks of
about k (10 = 3 + 3 + 4), the blocks into super-blocks of about k blocks, and so on. Round j
averages within the level-j blocks, each child block weighted by the number of sites under it,
so after round j every site holds the exact average of its level-j block and after the last
round the exact average of all n sites.

A level-j block with children c_1..c_b is served in *lanes*: the sites with index l inside their
child receive together, from one sender per child (the child's member l, or member l mod |c_i|
when that child is smaller: it multicasts to several lanes). Every receiver merges b streams,
every sender transmits once, and each sender has one weight per round (|c_i| / |block|), which
it applies to its update before sending (the FPGA only adds). With equal children every lane is
a plain clique and the construction is the mixed-radix grid.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .schedules import Group, Round, Schedule

#: A round in position space: (receivers, senders, weights) per group.
PositionRound = list[tuple[tuple[int, ...], tuple[int, ...], tuple[float, ...]]]


def split(m: int, g: int) -> list[int]:
    """``m`` items in ``g`` near-equal consecutive blocks, larger blocks last (10, 3 -> 3+3+4)."""
    return [m // g + (1 if i >= g - m % g else 0) for i in range(g)]


def levels(n: int, k: int, at_most: bool = True) -> list[list[int]]:
    """Block sizes per level for a hierarchical merge of n sites in blocks of about k.

    ``at_most``: ceil(m / k) blocks per level, so no block exceeds k (more rounds);
    otherwise round(m / k) blocks, sizes k or k + 1 (fewer rounds, e.g. 10 = 3 + 3 + 4 then 3).
    """
    if n < 1 or k < 2:
        raise ValueError(f"levels: need n >= 1 and k >= 2, got n={n}, k={k}")
    out: list[list[int]] = []
    m = n
    while m > 1:
        g = math.ceil(m / k) if at_most else max(1, round(m / k))
        out.append(split(m, g))
        m = g
    return out


def merge_rounds(sizes: Sequence[Sequence[int]]) -> list[PositionRound]:
    """Rounds of the hierarchical merge over positions 0..n-1 (see the module docstring)."""
    nodes: list[list[int]] = [[p] for p in range(sum(sizes[0]))] if sizes else [[0]]
    rounds: list[PositionRound] = []
    for level in sizes:
        if sum(level) != len(nodes):
            raise ValueError(f"level sizes {list(level)} do not cover {len(nodes)} blocks")
        groups: PositionRound = []
        parents: list[list[int]] = []
        start = 0
        for b in level:
            children = nodes[start : start + b]
            start += b
            total = sum(len(c) for c in children)
            weights = tuple(len(c) / total for c in children)
            for lane in range(max(len(c) for c in children)):
                recv = tuple(c[lane] for c in children if lane < len(c))
                send = tuple(c[lane % len(c)] for c in children)
                groups.append((recv, send, weights))
            parents.append([p for c in children for p in c])
        rounds.append(groups)
        nodes = parents
    return rounds


def to_round(groups: PositionRound, order: Sequence[int]) -> Round:
    """Place position-space groups on sites (position p -> site order[p])."""
    return Round(tuple(
        Group(tuple(order[r] for r in recv), tuple(order[s] for s in send), weights)
        for recv, send, weights in groups
    ))


@dataclass(frozen=True)
class Construction:
    """A clique construction in position space and the rounds after which it is exact."""

    name: str
    rounds: tuple[tuple[tuple[tuple[int, ...], tuple[int, ...], tuple[float, ...]], ...], ...]
    exact_rounds: int | None  # None: not exact, converges to epsilon over repeats
    n: int

    def schedule(self, family: str, order: Sequence[int] | None = None) -> Schedule:
        """The schedule with position p on site ``order[p]``."""
        order = list(range(self.n)) if order is None else list(order)
        rounds = tuple(to_round(list(r), order) for r in self.rounds)
        return Schedule(family, self.name, rounds, self.n)


def mixed_cliques(n: int, k: int, at_most: bool = True) -> Construction:
    """Hierarchical merge in blocks of about k: exact in len(levels(n, k)) rounds for any n."""
    sizes = levels(n, k, at_most)
    rounds = merge_rounds(sizes)
    merged = [s for lv in sizes for s in lv if s > 1] or [1]  # a block of one child idles
    lo, hi = min(merged), max(merged)
    first = "+".join(str(s) for s in sizes[0]) if sizes else "1"
    if len(first) > 24:
        first = " + ".join(f"{sizes[0].count(s)}x{s}" for s in sorted(set(sizes[0])))
    span = str(lo) if lo == hi else f"{lo}-{hi}"
    name = f"mixed cliques of {span} ({n} = {first}; exact in {len(sizes)} round{'s' if len(sizes) != 1 else ''})"
    return Construction(name, tuple(tuple(r) for r in rounds), len(sizes), n)


def constructions(n: int, k: int) -> list[Construction]:
    """The distinct exact mixed-clique constructions for blocks of about k sites."""
    out: list[Construction] = []
    seen: set[tuple[tuple[int, ...], ...]] = set()
    for at_most in (True, False):
        key = tuple(tuple(lv) for lv in levels(n, k, at_most))
        if key not in seen:
            seen.add(key)
            out.append(mixed_cliques(n, k, at_most))
    return out
