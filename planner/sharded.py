"""Sharded in-network all-reduce: reduce-scatter through the edge FPGAs, all-gather by multicast.

In every clique family each receiver's FPGA merges the whole vector of its g - 1 partners, so
its port ingests (g - 1) B. A sharded round splits the vector instead (flat, one cluster of g):

* **reduce-scatter**: member j's FPGA aggregates shard j (B/g bytes) of every member's vector:
  each member sends shard j to j (g - 1 unicast streams out, g - 1 in, B/g each);
* **all-gather**: member j multicasts its reduced shard to the other g - 1 members.

Each site's port ingests 2 (g - 1)/g B (as a ring all-reduce) but every byte crosses the WAN
once per phase instead of 2(n - 1) hops one after the other, and each FPGA aggregates only B/g.

**Hierarchical** (``clusters``: m equal clusters of k, e.g. regions): reduce-scatter inside each
cluster (B/k per shard), then the j-th members of all clusters (the *counterparts*) all-reduce
their shard, sharded again (reduce-scatter and all-gather of B/(k m)), then all-gather inside the
cluster. Ports still ingest 2 (n - 1)/n B, but only B/k per site crosses between clusters.

Phases are separated by barriers (a phase starts when the previous one has finished at every
site); the hardware does not need to forward an aggregated result (hosts send the all-gather).
The mixing matrix of a sharded round is the clique of all its sites: exact in one round.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .flows import Flow, Phase
from .schedules import Round, Schedule, clique


@dataclass(frozen=True)
class ShardedRound(Round):
    """A sharded all-reduce over ``clusters`` (m clusters of k sites; flat when m = 1)."""

    clusters: tuple[tuple[int, ...], ...] = ()

    @property
    def counterparts(self) -> list[tuple[int, ...]]:
        """The j-th site of every cluster: the groups that all-reduce across clusters."""
        return [tuple(c[j] for c in self.clusters) for j in range(len(self.clusters[0]))]


def _reduce_scatter(name: str, blocks: Sequence[Sequence[int]], nbytes: int) -> Phase:
    """Each block of g sites splits ``nbytes`` into g shards; site j's FPGA aggregates shard j."""
    g = len(blocks[0])
    flows = []
    for blk in blocks:
        for j in blk:
            for s in blk:  # s's shard j: to j over the WAN, or j's own contribution locally
                flows.append(Flow((name, s, j), s, () if s == j else (j,), name, local=s == j))
    merge = frozenset((name, j) for blk in blocks for j in blk)
    return Phase(name, math.ceil(nbytes / g), tuple(flows), merge)


def _all_gather(name: str, blocks: Sequence[Sequence[int]], shard: int) -> Phase:
    """Each site multicasts its ``shard`` bytes to the other sites of its block."""
    flows = tuple(Flow((name, j), j, tuple(r for r in blk if r != j), None)
                  for blk in blocks for j in blk)
    return Phase(name, shard, flows, frozenset())


def phases(rnd: ShardedRound, nbytes: int) -> list[Phase]:
    """The round's phases in order (the single description the model and simulator share)."""
    clusters = [list(c) for c in rnd.clusters]
    k, m = len(clusters[0]), len(clusters)
    out: list[Phase] = []
    held = nbytes  # bytes of the (partial) sum each site holds entering the cross phases
    if k > 1:
        out.append(_reduce_scatter("reduce-scatter", clusters, nbytes))
        held = out[-1].nbytes
    if m > 1:
        across = rnd.counterparts
        out.append(_reduce_scatter("reduce-scatter across", across, held))
        out.append(_all_gather("all-gather across", across, out[-1].nbytes))
    if k > 1:
        out.append(_all_gather("all-gather", clusters, held))
    return out


def _everyone(n: int) -> tuple:
    return (clique(range(n)),)


def sharded(n: int) -> Schedule:
    """Flat sharded all-reduce of all n sites (exact in one round)."""
    rnd = ShardedRound(_everyone(n), None, (tuple(range(n)),))
    return Schedule("sharded", f"sharded all-reduce ({n} shards)", (rnd,), n)


def hierarchical(n: int, clusters: Sequence[Sequence[int]]) -> Schedule:
    """Hierarchical sharded all-reduce over m equal clusters of k (exact in one round)."""
    clusters = tuple(tuple(int(s) for s in c) for c in clusters)
    if len({len(c) for c in clusters}) != 1 or len(clusters) < 2 or len(clusters[0]) < 2:
        raise ValueError(f"clusters must be >= 2 equal clusters of >= 2 sites, got {clusters}")
    if sorted(s for c in clusters for s in c) != list(range(n)):
        raise ValueError("clusters must partition the sites")
    k, m = len(clusters[0]), len(clusters)
    rnd = ShardedRound(_everyone(n), None, clusters)
    return Schedule("hierarchical", f"hierarchical sharded ({m} clusters of {k})", (rnd,), n)


def hardware_rounds(rnd: ShardedRound, nbytes: int, names: Sequence[str]) -> list[dict[str, object]]:
    """Per phase: the group table (merging sites) and multicast groups the edge FPGAs need.

    Each entry: ``phase``, ``shard_bytes``, ``table`` [(site, contributor bitmap, expected,
    shard)], ``multicast`` [(sender, receivers)].
    """
    out: list[dict[str, object]] = []
    for ph in phases(rnd, nbytes):
        table = []
        for site_sink in sorted(ph.merge, key=lambda k: k[1]):
            j = site_sink[1]
            contrib = [f.site for f in ph.flows if f.tag == site_sink[0] and (j in f.dests or
                                                                              (f.local and f.site == j))]
            table.append((names[j], sum(1 << s for s in contrib), len(contrib), f"shard of {names[j]}"))
        mcast = [(names[f.site], [names[r] for r in f.dests]) for f in ph.flows
                 if f.tag is None and f.dests]
        out.append({"phase": ph.name, "shard_bytes": ph.nbytes, "table": table, "multicast": mcast})
    return out
