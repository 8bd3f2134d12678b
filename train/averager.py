"""Schedule-driven parameter averaging (DiLoCo-style outer step with outer learning rate 1).

Every outer step ``k`` a site replaces its parameter vector by the average over the members of
its group in each step of round ``k`` of the plan (``GroupTable.site_steps``): x <- W_k x, the
planner's mixing matrices, so consensus follows ``planner/consensus.py``. A sharded round
averages over all sites by its reduce-scatter/all-gather phases (``host/sharded_allreduce.py``,
the same barrier between phases); a ring round by the hosts' ring all-reduce over the same site
network (``host/ring_allreduce.py``: the scale agreement through the aggregator, then host to
host around the planner's ring order, no barrier between its steps).

Each site talks to its own aggregator (emulator/: one per site, in-order release), so chunk
numbers are the driver's per-job counter, which moves by ``stride`` chunks per exchange (the
agreement's ceil(LANES / E) and the tensor's ceil(L / E); the client refuses overflow redo,
``on_overflow="raise"``: safe headroom cannot overflow). Two rules keep every member's counter
and every aggregator's head in step (docs/emulator.md, "Rounds are barriers"):

* every step starts with a barrier of all sites, so no site contributes to a step while an
  aggregator is still collecting the previous one;
* a site alone in a step skips the exchange but still moves its counter by ``stride`` and
  resets its own aggregator's job head to it (JOBj_HEAD; nothing reaches that aggregator during
  the step: the site is in none of its groups), as if it had exchanged with itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from wanreduce import regs
from wanreduce.host import agreement
from wanreduce.host.control import ControlClient
from wanreduce.host.driver import AggregatorClient
from wanreduce.host.ring_allreduce import ring_allreduce
from wanreduce.host.sharded_allreduce import sharded_allreduce
from wanreduce.planner.group_table import GroupTable

AVERAGER_JOB = 1  # the DDP hook uses job 0
_U32 = 0xFFFFFFFF


class ScheduleAverager:
    """Averages one site's flat float32 vector with its groups, round after round."""

    def __init__(self, site: int, n_elements: int, *, table: GroupTable,
                 client: AggregatorClient, control: ControlClient,
                 barrier: Callable[[], None], job: int = AVERAGER_JOB) -> None:
        """``client``: the site's AggregatorClient; ``control``: a ControlClient of its
        aggregator; ``barrier``: waits for every site."""
        self.site, self.table, self.client, self.job = site, table, client, job
        self.control, self.barrier = control, barrier
        e = client.elements
        self.stride = math.ceil(agreement.LANES / e) + math.ceil(n_elements / e)
        self.exchanges = 0  # exchanges this site took part in (steps not skipped)
        self.skipped = 0  # steps in which it was alone

    def average(self, x: np.ndarray, outer_step: int) -> np.ndarray:
        """Average ``x`` (float32, C-contiguous, in place) with round ``outer_step``'s groups."""
        sh = self.table.sharded_steps(outer_step)
        if sh is not None:  # every site, phase by phase (its chunk counter moves per phase)
            self.barrier()
            sharded_allreduce(self.client, x, sh, job=self.job, round=outer_step & _U32, out=x,
                              barrier=self.barrier)
            x /= np.float32(self.table.n)
            self.exchanges += 1
            return x
        ring = self.table.ring_steps(outer_step)
        if ring is not None:  # every site, host to host after the agreement
            self.barrier()
            ring_allreduce(self.client, x, ring, job=self.job, round=outer_step & _U32, out=x)
            x /= np.float32(self.table.n)
            self.exchanges += 1
            return x
        for step in self.table.steps(outer_step):
            self.barrier()
            gid = step.get(self.site)
            if gid is None:
                self._skip()
                continue
            before = self.client.next_chunk.get(self.job)
            self.client.allreduce(x, job=self.job, group=gid, round=outer_step & _U32, out=x)
            x /= np.float32(len(self.table.groups[gid]))
            used = (self.client.next_chunk[self.job] - before) & _U32 if before is not None else None
            if used is not None and used != self.stride:
                raise RuntimeError(f"job {self.job}: an exchange used {used} chunks, expected "
                                   f"{self.stride}; the sites' chunk counters may now disagree")
            self.exchanges += 1
        return x

    def _skip(self) -> None:
        """Alone in this step: move the counter and this site's aggregator's head by ``stride``."""
        head = self.client.next_chunk.get(self.job)
        if head is None:  # no exchange yet: the aggregator's head is where the job starts
            head = self.control.read(regs.job_head(self.job))
        new = (head + self.stride) & _U32
        self.control.reset_window(self.job, new)
        self.client.set_next_chunk(self.job, new)
        self.skipped += 1
