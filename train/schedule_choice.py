"""Which schedule a run follows: the planner's plan of a family for the topology and memory.

The emulator's ``choose_plan`` (``emulator/prediction.py``) picks the plan for every name:
``best`` is the fastest in-network plan made of cliques or sharded rounds (what the driver runs),
``sharded`` the best sharded family, ``ring`` the planner's ring all-reduce, which the hosts run
over the same site network (``host/ring_allreduce.py``; the aggregators only agree on the scale).
"""

from __future__ import annotations

from dataclasses import dataclass

from wanreduce import wire
from wanreduce.emulator.prediction import SCHEDULES, choose_plan
from wanreduce.planner.group_table import GroupTable, group_table
from wanreduce.planner.optimiser import Plan
from wanreduce.planner.topology import Topology

__all__ = ["SCHEDULES", "Choice", "choose"]


@dataclass(frozen=True)
class Choice:
    name: str  # as asked (best, all-to-all, ...)
    plan: Plan  # the planner's plan of the family run
    table: GroupTable  # its groups (a ring: the agreement's and the hop groups)


def choose(name: str, topo: Topology, memory: int, nbytes: int,
           elements: int = wire.MAX_ELEMENTS_DEFAULT) -> Choice:
    """The plan of ``name`` for ``topo`` with ``memory`` per FPGA and ``nbytes`` per sync."""
    if name not in SCHEDULES:
        raise ValueError(f"--schedule: {name!r} is not one of {', '.join(SCHEDULES)}")
    plan = choose_plan(topo, name, nbytes, memory, elements)
    return Choice(name, plan, group_table(plan.schedule))
