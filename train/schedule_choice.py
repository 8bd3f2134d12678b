"""Which schedule a run follows: the planner's plan of a family for the topology and memory.

Reuses the planner (``plan_report.evaluate``: the optimiser's best plan per family) and never
plans itself. ``best`` is the planner's best in-network plan; if that plan's rounds are not
cliques (tree, exponential: the driver all-reduces cliques only), the best in-network plan
among the families the driver can run, and the reason is kept in ``note``.
"""

from __future__ import annotations

from dataclasses import dataclass

from wanreduce.planner import plan_report as pr
from wanreduce.planner.group_table import GroupTable, group_table
from wanreduce.planner.optimiser import Plan
from wanreduce.planner.topology import Topology

SCHEDULES = ("best", "all-to-all", "cliques-3", "sharded", "ring")


@dataclass(frozen=True)
class Choice:
    name: str  # as asked (best, all-to-all, ...)
    plan: Plan  # the planner's plan of the family run
    table: GroupTable | None  # None: ring all-reduce (no aggregator)
    note: str = ""


def _table(plan: Plan) -> GroupTable | None:
    return None if plan.family == "ring" else group_table(plan.schedule)


def choose(name: str, topo: Topology, memory: int, nbytes: int) -> Choice:
    """The plan of ``name`` for ``topo`` with ``memory`` per FPGA and ``nbytes`` per sync."""
    if name not in SCHEDULES:
        raise ValueError(f"--schedule: {name!r} is not one of {', '.join(SCHEDULES)}")
    res = pr.evaluate(topo, nbytes, memory, colocated=False)
    if name != "best":
        if name not in res.plans:
            raise ValueError(f"--schedule: the planner has no {name!r} plan for {topo.n} sites "
                             f"(it has {', '.join(sorted(res.plans))})")
        return Choice(name, res.plans[name], _table(res.plans[name]))
    best = res.best_in_network
    try:
        return Choice(name, best, _table(best))
    except ValueError as exc:
        runnable = {}
        for fam, plan in res.plans.items():
            try:
                runnable[fam] = _table(plan)
            except ValueError:
                continue
        fam = res.best_among([f for f in runnable if f != "ring"]).family
        return Choice(name, res.plans[fam], runnable[fam],
                      note=f"the planner's best, {best.family}, cannot run on the driver ({exc}); "
                           f"ran the best clique plan, {fam}")
