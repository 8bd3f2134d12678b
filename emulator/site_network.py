"""The interface between a training/all-reduce runner and the network it runs over.

A site network lives in the launching process; per-site processes receive only
``client_kwargs(site)`` (a picklable dict), so they can be spawned. Implemented by
:class:`~wanreduce.emulator.wan_emulator.WanEmulator` (per-site aggregators behind the emulated
WAN) and :class:`~wanreduce.emulator.local_network.LocalNetwork` (no delay, for unit tests).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from wanreduce.planner.group_table import GroupTable


@runtime_checkable
class SiteNetwork(Protocol):
    """Sites, their aggregators and the network between them."""

    n_sites: int

    def configure(self, table: GroupTable, *, jobs: Iterable[int]) -> None:
        """Every aggregator learns every group of ``table`` (GROUPg_MEMBERS) and the jobs."""

    def client_kwargs(self, site: int) -> dict[str, Any]:
        """Keyword arguments for ``AggregatorClient(**kw, sender_id=site, ...)`` at ``site``."""

    def link_bytes(self) -> dict[tuple[int, int], int]:
        """Bytes carried so far per directed link (site index pairs)."""

    def close(self) -> None:
        """Stop every thread and process of the network."""
