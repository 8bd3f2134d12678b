"""Traffic of one round phase as flows: what the round model and the simulator both evaluate.

A :class:`Flow` is one sender's stream: ``nbytes`` cut into chunks and multicast once on the
shortest-latency tree to ``dests`` (one copy per directed link of the tree). At each destination
d the copy is a contribution to the *sink* ``(tag, d)``; a flow with ``local`` set also
contributes at its own site, to ``(tag, site)``, without crossing the network. A sink in
:attr:`Phase.merge` merges its contributions in FPGA slots (freed when the last contribution is
in, then acked); any other sink just delivers. A flow whose ``tag`` is None delivers to its own
sink ``(key, d)`` at each destination (an all-gather copy).

Plain rounds (``schedules.Round``) are one phase with one flow per sender; sharded rounds
(``sharded.ShardedRound``) are a sequence of reduce-scatter and all-gather phases.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass


@dataclass(frozen=True)
class Flow:
    """One stream: ``site`` sends to ``dests``; contributes to sinks ``(tag, d)``."""

    key: Hashable  # names the flow (pacing is given per key)
    site: int
    dests: tuple[int, ...]
    tag: Hashable | None
    local: bool = False

    def sink(self, dest: int) -> tuple[Hashable, int]:
        """The sink this flow's copy feeds at ``dest`` (or at its own site when local)."""
        return (self.key if self.tag is None else self.tag, dest)


@dataclass(frozen=True)
class Phase:
    """Flows that run together; the phase ends when every sink holds every chunk."""

    name: str
    nbytes: int  # bytes per flow
    flows: tuple[Flow, ...]
    merge: frozenset[tuple[Hashable, int]]  # sinks that aggregate in FPGA slots
