"""LocalNetwork: one software aggregator on loopback, no delay (the cheap network of the tests).

A stand-in for emulator/'s LocalNetwork until the merge. The aggregator releases on completion:
the averager numbers its exchanges' chunks per (round, step, group) (train/averager.py), so
disjoint groups of one round use disjoint chunks and there are gaps, which an in-order head would
wait on forever. There are no WAN links, so ``link_bytes`` is empty.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from wanreduce import wire
from wanreduce.host.softagg import SoftAggregator
from wanreduce.model import ReleaseMode
from wanreduce.planner.group_table import MAX_GROUPS, GroupTable


class LocalNetwork:
    """Every site's client talks to the same SoftAggregator (a daemon thread of this process)."""

    def __init__(self, n_sites: int, *, slots: int = 4096, elements: int = wire.DEFAULT_ELEMENTS,
                 jobs: int = 2) -> None:
        self.n_sites = n_sites
        self.agg = SoftAggregator(slots=slots, elements=elements, groups=MAX_GROUPS, jobs=jobs,
                                  release=ReleaseMode.ON_COMPLETION).start()

    def configure(self, table: GroupTable, *, jobs: Iterable[int]) -> None:
        """Set every group of ``table`` and enable ``jobs``."""
        self.agg.configure(groups=table.groups, jobs=jobs)

    def client_kwargs(self, site: int) -> dict[str, Any]:
        """AggregatorClient arguments of ``site``: the shared aggregator's address."""
        return {"aggregator": self.agg.address, "control_address": self.agg.address}

    def link_bytes(self) -> dict[tuple[int, int], int]:
        """No WAN links on loopback."""
        return {}

    def close(self) -> None:
        self.agg.close()

    def __enter__(self) -> LocalNetwork:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
