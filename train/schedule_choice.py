"""Which schedule a run follows: the planner's plan of a family for the topology and memory.

The emulator's ``choose_plan`` (``emulator/prediction.py``) picks the plan for every name but
the ring: ``best`` is the fastest in-network plan made of cliques (the driver all-reduces
cliques only), ``sharded`` the best sharded family. The ring all-reduce is the planner's ring
plan and runs without the aggregator (gloo).
"""

from __future__ import annotations

from dataclasses import dataclass

from wanreduce import wire
from wanreduce.emulator.prediction import SCHEDULES as IN_NETWORK_SCHEDULES
from wanreduce.emulator.prediction import choose_plan
from wanreduce.planner import plan_report as pr
from wanreduce.planner.group_table import GroupTable, group_table
from wanreduce.planner.optimiser import Plan
from wanreduce.planner.topology import Topology

SCHEDULES = (*IN_NETWORK_SCHEDULES, "ring")


@dataclass(frozen=True)
class Choice:
    name: str  # as asked (best, all-to-all, ...)
    plan: Plan  # the planner's plan of the family run
    table: GroupTable | None  # None: ring all-reduce (no aggregator)


def choose(name: str, topo: Topology, memory: int, nbytes: int,
           elements: int = wire.MAX_ELEMENTS_DEFAULT) -> Choice:
    """The plan of ``name`` for ``topo`` with ``memory`` per FPGA and ``nbytes`` per sync."""
    if name not in SCHEDULES:
        raise ValueError(f"--schedule: {name!r} is not one of {', '.join(SCHEDULES)}")
    if name == "ring":
        res = pr.evaluate(topo, nbytes, memory, elements_per_packet=elements, colocated=False)
        return Choice(name, res.plans["ring"], None)
    plan = choose_plan(topo, name, nbytes, memory, elements)
    return Choice(name, plan, group_table(plan.schedule))
