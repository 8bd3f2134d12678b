"""Schedule-driven parameter averaging (DiLoCo-style outer step with outer learning rate 1).

Every outer step ``k`` a site replaces its parameter vector by the average over the members of
its group in each step of round ``k`` of the plan (``GroupTable.site_steps``): x <- W_k x, the
planner's mixing matrices, so consensus follows ``planner/consensus.py``. Sites alone in a step
skip it. The ring all-reduce uses no aggregator: ``exact_average`` (gloo) averages over all sites.

Chunk numbers are explicit, a function of (outer step, step, group id) that every site computes
alike: disjoint groups of one round never share a chunk (one shared aggregator serves them
all), and a site that skips a step cannot fall out of step with the others. Each exchange gets
``stride`` chunks: the agreement's ceil(LANES / E) plus the tensor's ceil(L / E); the site's
client refuses redo passes (``on_overflow="raise"``: safe headroom cannot overflow, so a redo
would be a bug, and its chunks would run into the next group's). The aggregators must release
on completion (a gap would stall an in-order head).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from wanreduce.host import agreement
from wanreduce.host.driver import AggregatorClient
from wanreduce.planner.group_table import GroupTable

AVERAGER_JOB = 1  # the DDP hook uses job 0
_U32 = 0xFFFFFFFF


class ScheduleAverager:
    """Averages one site's flat float32 vector with its groups, round after round."""

    def __init__(self, site: int, n_elements: int, *, table: GroupTable | None = None,
                 client: AggregatorClient | None = None,
                 exact_average: Callable[[np.ndarray], None] | None = None,
                 job: int = AVERAGER_JOB) -> None:
        if (table is None) == (exact_average is None):
            raise ValueError("give either table= (cliques through the aggregator) or "
                             "exact_average= (ring all-reduce), not both or neither")
        if table is not None and client is None:
            raise ValueError("table= needs client= (the site's AggregatorClient)")
        self.site, self.table, self.client, self.job = site, table, client, job
        self.exact_average = exact_average
        if table is not None and client is not None:
            e = client.elements
            self.stride = math.ceil(agreement.LANES / e) + math.ceil(n_elements / e)
            self.steps_per_round = max(len(steps) for steps in table.rounds)
            self.n_groups = max(len(table.groups), 1)
        self.exchanges = 0  # exchanges this site took part in (steps not skipped)

    def chunk_of(self, outer_step: int, step: int, gid: int) -> int:
        """First chunk of group ``gid``'s exchange in ``step`` of outer step ``outer_step``."""
        slot = (outer_step * self.steps_per_round + step) * self.n_groups + gid
        return slot * self.stride & _U32

    def average(self, x: np.ndarray, outer_step: int) -> np.ndarray:
        """Average ``x`` (float32, C-contiguous, in place) with round ``outer_step``'s groups."""
        if self.exact_average is not None:
            self.exact_average(x)
            self.exchanges += 1
            return x
        assert self.table is not None and self.client is not None
        steps = self.table.steps(outer_step)
        for i, st in enumerate(steps):
            gid = st.get(self.site)
            if gid is None:
                continue  # alone in this step
            members = self.table.groups[gid]
            self.client.set_next_chunk(self.job, self.chunk_of(outer_step, i, gid))
            self.client.allreduce(x, job=self.job, group=gid, round=outer_step & _U32, out=x)
            x /= np.float32(len(members))
            self.exchanges += 1
        return x
