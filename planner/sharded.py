"""Sharded in-network all-reduce: reduce-scatter through the edge FPGAs, all-gather by multicast.

In every clique family each receiver's FPGA merges the whole vector of its g - 1 partners, so
its port ingests (g - 1) B. A sharded round splits the vector instead (flat, one cluster of g):

* **reduce-scatter**: member j's FPGA aggregates shard j (B/g bytes) of every member's vector:
  each member sends shard j to j (g - 1 unicast streams out, g - 1 in, B/g each);
* **all-gather**: member j multicasts its reduced shard to the other g - 1 members.

Each site's port ingests 2 (g - 1)/g B (as a ring all-reduce) but every byte crosses the WAN
once per phase instead of 2(n - 1) hops one after the other, and each FPGA aggregates only B/g.

**Hierarchical** (radices k_0 x k_1 x ..., e.g. m clusters of k): reduce-scatter inside each
cluster (B/k per shard), then the j-th members of all clusters (the *counterparts*) reduce-scatter
their shard again (B/(k m)), ... ; then all-gather level by level back down. Ports still ingest
2 (n - 1)/n B, but only B/k per site crosses between clusters (a multi-level reduce-scatter, as
hierarchical all-reduce in collective libraries, with the FPGAs doing every reduction).

Phases are separated by barriers (a phase starts when the previous one has finished at every
site); the hardware does not need to forward an aggregated result (hosts send the all-gather).
The mixing matrix of a sharded round is the clique of all its sites: exact in one round.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from .flows import Flow, Phase
from .schedules import Round, Schedule, clique


@dataclass(frozen=True)
class ShardedRound(Round):
    """A sharded all-reduce: sites placed by ``order`` on a mixed-radix grid ``radices``.

    Position p has digits d_0 (fastest) ... d_{L-1}; the level-j groups are the positions that
    differ only in digit j, so level-0 groups are consecutive positions (the tight clusters).
    Flat sharding is one level (radices = (n,)); two levels are clusters and counterparts.
    """

    order: tuple[int, ...] = ()
    radices: tuple[int, ...] = ()

    def levels(self) -> list[list[tuple[int, ...]]]:
        """Per level, the groups of sites that reduce-scatter (and all-gather) together."""
        out = []
        stride = 1
        for k in self.radices:
            span = stride * k
            groups = []
            for base in range(len(self.order)):
                if (base // stride) % k == 0:  # digit j of ``base`` is 0: one group per such base
                    groups.append(tuple(self.order[base + i * stride] for i in range(k)))
            out.append(groups)
            stride = span
        return out


def _reduce_scatter(name: str, blocks: Sequence[Sequence[int]], nbytes: int) -> Phase:
    """Each block of g sites splits ``nbytes`` into g shards; site j's FPGA aggregates shard j."""
    g = len(blocks[0])
    flows = []
    for blk in blocks:
        for j in blk:
            for s in blk:  # s's shard j: to j over the WAN, or j's own contribution locally
                flows.append(Flow(("rs", s, j), s, () if s == j else (j,), "rs", local=s == j))
    merge = frozenset(("rs", j) for blk in blocks for j in blk)
    return Phase(name, math.ceil(nbytes / g), tuple(flows), merge)


def _all_gather(name: str, blocks: Sequence[Sequence[int]], shard: int) -> Phase:
    """Each site multicasts its ``shard`` bytes to the other sites of its block."""
    flows = tuple(Flow(("ag", j), j, tuple(r for r in blk if r != j), None)
                  for blk in blocks for j in blk)
    return Phase(name, shard, flows, frozenset())


def phases(rnd: ShardedRound, nbytes: int) -> list[Phase]:
    """Reduce-scatter level 0, 1, ..., then all-gather back down (the description the model and
    simulator share). Level j moves B / (k_0 ... k_j) bytes per flow."""
    return list(_phases(rnd, nbytes))


@lru_cache(maxsize=64)
def _phases(rnd: ShardedRound, nbytes: int) -> tuple[Phase, ...]:
    """``phases``, memoised: the optimiser scores the same rounds at every memory size (a
    64-site round has thousands of flows; 64 rounds of them are a few tens of MB at most)."""
    levels = [lv for lv in rnd.levels() if len(lv[0]) > 1]
    down: list[Phase] = []
    held = nbytes  # bytes of the partial sum each site holds entering a level
    for j, groups in enumerate(levels):
        down.append(_reduce_scatter(f"reduce-scatter L{j}", groups, held))
        held = down[-1].nbytes
    up = [_all_gather(f"all-gather L{j}", groups, ph.nbytes)
          for j, (groups, ph) in enumerate(zip(levels, down, strict=True))]
    return (*down, *up[::-1])


def _everyone(n: int) -> tuple:
    return (clique(range(n)),)


def sharded(n: int, order: Sequence[int] | None = None,
            radices: Sequence[int] | None = None) -> Schedule:
    """Sharded all-reduce of all n sites, exact in one round.

    ``radices`` (product n) gives the hierarchy: one level is flat sharding (family
    ``sharded``), more levels are hierarchical (family ``hierarchical``, clusters first).
    """
    order = tuple(range(n)) if order is None else tuple(int(s) for s in order)
    radices = (n,) if radices is None else tuple(radices)
    if sorted(order) != list(range(n)):
        raise ValueError("order must be a permutation of the sites")
    if math.prod(radices) != n or any(k < 2 for k in radices) and n > 1:
        raise ValueError(f"radices {radices} must be >= 2 and multiply to {n}")
    rnd = ShardedRound(_everyone(n), None, order, radices)
    if len(radices) == 1:
        return Schedule("sharded", f"sharded all-reduce ({n} shards)", (rnd,), n)
    label = "x".join(map(str, radices))
    return Schedule("hierarchical", f"hierarchical sharded {label} (clusters of {radices[0]})",
                    (rnd,), n)


#: the families built here (the paper's comparison, cliques vs all-to-all, excludes them)
FAMILIES = ("sharded", "hierarchical")


def hardware_phases(rnd: ShardedRound, names: Sequence[str], base: int = 0) -> list[tuple[str, list, list]]:
    """Per phase: (label, group table, multicast groups) in ``plan_report.HardwarePlan``'s form.

    Reduce-scatter: every site's FPGA merges its own shard (a fraction of the vector: its byte
    range is the shard's offset, so chunk ids are per shard) from the contributors in the bitmap;
    the result goes to its local hosts. All-gather: the hosts multicast the reduced shard; FPGAs
    pass it through (no slots). ``base`` numbers the multicast addresses after earlier rounds.
    """
    out = []
    frac = 1
    levels = [lv for lv in rnd.levels() if len(lv[0]) > 1]
    for j, groups in enumerate(levels):
        frac *= len(groups[0])
        table = [{"site": names[r], "bitmap": sum(1 << s for s in g), "expected": len(g),
                  "group": f"shard of {names[r]} (1/{frac} of B)"} for g in groups for r in g]
        sends = [(f"unicast x{len(g) - 1}", names[s], [names[r] for r in g if r != s])
                 for g in groups for s in g]
        out.append((f"reduce-scatter level {j}", table, sends))
    for j in range(len(levels) - 1, -1, -1):
        share = math.prod(len(lv[0]) for lv in levels[: j + 1])
        table = [{"site": names[r], "bitmap": 0, "expected": 0, "group": "all-gather (pass-through)"}
                 for g in levels[j] for r in g]
        mcast = [(f"239.{(base + len(out)) % 256}.{s // 256}.{s % 256}", names[s],
                  [names[r] for r in g if r != s]) for g in levels[j] for s in g]
        out.append((f"all-gather level {j} (1/{share} of B per site)", table, mcast))
    return out
