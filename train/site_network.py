"""The interface between training and the network of aggregators (contract of issue 15).

A copy of emulator/site_network.py (built in parallel by the emulator branch): the launcher holds
the network object, the per-site processes receive only ``client_kwargs(site)`` (picklable).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from wanreduce.planner.group_table import GroupTable


class SiteNetwork(Protocol):
    n_sites: int

    def configure(self, table: GroupTable, *, jobs: Iterable[int]) -> None: ...
        # every aggregator learns every group of the table (GROUPg_MEMBERS) and the jobs

    def client_kwargs(self, site: int) -> dict[str, Any]: ...
        # keyword arguments for host.driver.AggregatorClient(**kw, sender_id=site, ...)

    def link_bytes(self) -> dict[tuple[int, int], int]: ...  # bytes carried per directed link

    def close(self) -> None: ...
