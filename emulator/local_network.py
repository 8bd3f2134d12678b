"""LocalNetwork: n sites on loopback with no delay and no rate limit (the cheap network for tests).

Why not one SoftAggregator for all sites: the groups of one round (e.g. {0, 1, 2} and {3, 4, 5}
of cliques-3) run the same job with the same chunk numbers (every member's counter moves with
every all-reduce), so on one aggregator they would claim the same slots (REJECT_MISMATCH). Each
site therefore has its own aggregator, as on the WAN, and an in-process forwarder thread
replicates contributions to the other members' aggregators at once: a
:class:`~wanreduce.emulator.wan_emulator.WanEmulator` over a full mesh with zero latency and
1e5 Gb/s links (0.16 us per 2 KB datagram).
"""

from __future__ import annotations

from wanreduce import wire
from wanreduce.planner.topology import Link, Site, Topology

from .wan_emulator import WanEmulator

FAST_BPS = 1e14  # 100 Tb/s: the largest rate a topology accepts


def instant_topology(n_sites: int, memory: int) -> Topology:
    """A full mesh of ``n_sites`` with zero latency and 100 Tb/s links and ports."""
    if not 1 <= n_sites <= wire.MAX_SENDERS:
        raise ValueError(f"n_sites: must be 1..{wire.MAX_SENDERS}, got {n_sites}")
    sites = [Site(f"site{i}", memory, FAST_BPS) for i in range(n_sites)]
    links = [Link(a.name, b.name, 0.0, FAST_BPS)
             for i, a in enumerate(sites) for b in sites[i + 1:]]
    return Topology("local", sites, links)


class LocalNetwork(WanEmulator):
    """``n_sites`` sites, one aggregator each, no delay; the forwarder is a thread of this process."""

    def __init__(self, n_sites: int, *, memory: int = 4 << 20,
                 elements: int = wire.MAX_ELEMENTS_DEFAULT, lifetime: float = 600.0) -> None:
        super().__init__(instant_topology(n_sites, memory), memory=memory, elements=elements,
                         lifetime=lifetime, in_thread=True)
