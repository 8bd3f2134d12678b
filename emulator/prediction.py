"""What the planner predicts for an emulated run: the plan it picks, and the time of what runs.

The plan comes from the planner itself (``plan_report.evaluate``: the same optimiser as
``wanreduce plan``) on the scaled topology at the memory the slots represent. A round of cliques
runs as the GroupTable's step(s); a sharded round runs as its reduce-scatter/all-gather phases
(``host/sharded_allreduce.py``). The prediction of what runs is the planner's round model
(``RoundModel.round_time``) of each step as a round of disjoint cliques, and of the sharded round
itself: for every in-network family exactly the planner's round time (``plan_round_times``). That
round time includes the driver's scale agreement (each step is one ``allreduce`` call, which
starts with it): ``agreement_times`` is only its part, for display.

The ring runs as the hosts' fixed-point ring (``host/ring_allreduce.py``), which starts with the
same scale agreement in the group of all sites; the planner's ring is a float ring (no
agreement). Its prediction is therefore the planner's ring time plus the planner's own
agreement time of the clique of all sites (``RoundModel.agreement_time``): both from the round
model, nothing fitted here; ``plan_round_times`` keeps the planner's ring alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from wanreduce.planner import plan_report as pr
from wanreduce.planner.group_table import GroupTable, group_table
from wanreduce.planner.optimiser import Plan
from wanreduce.planner.roundmodel import RoundModel
from wanreduce.planner.schedules import Round, clique, clique_round
from wanreduce.planner.sharded import FAMILIES as SHARDED_FAMILIES
from wanreduce.planner.topology import Topology

#: ``--schedule`` choices: a family, the best sharded family, or ``best``: the in-network plan
#: made of cliques or sharded rounds (tree and one-peer rounds are weighted, not cliques: the
#: driver cannot run them) that is fastest (each runs as the planner models it); ``ring``: the
#: planner's ring all-reduce, run by the hosts over the same network (``host/ring_allreduce.py``).
SCHEDULES = ("all-to-all", "cliques-3", "sharded", "best", "ring")


@dataclass
class Prediction:
    """The plan and the planner's round times of what runs."""

    plan: Plan
    table: GroupTable
    step_times: list[list[float]]  # per round of the schedule, per step (s), agreement included
    agreement_times: list[list[float]]  # the agreement's part of each step time (s)

    def round_time(self, r: int) -> float:
        """Predicted time of round ``r`` (rounds repeat cyclically), agreements included."""
        return sum(self.step_times[r % len(self.step_times)])

    def agreement_time(self, r: int) -> float:
        """The scale agreements' part of ``round_time(r)``."""
        return sum(self.agreement_times[r % len(self.agreement_times)])

    def mean_round_time(self, rounds: int) -> float:
        """Mean predicted round time over rounds 0..rounds-1."""
        return sum(self.round_time(r) for r in range(rounds)) / rounds

    @property
    def plan_round_times(self) -> list[float]:
        """The planner's own round times of the plan (sharded: its phases)."""
        return [float(t) for t in self.plan.round_times]


def choose_plan(topo: Topology, schedule: str, nbytes: int, memory: int, elements: int) -> Plan:
    """The planner's plan for ``schedule`` (one of :data:`SCHEDULES`) on ``topo`` at ``memory``."""
    if schedule not in SCHEDULES:
        raise ValueError(f"--schedule: must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
    res = pr.evaluate(topo, nbytes, memory, elements_per_packet=elements, colocated=False)
    if schedule == "best":  # the in-network plan whose runnable form (cliques) is fastest
        runnable = []
        for p in (p for f, p in res.plans.items() if pr.is_in_network(f)):
            try:
                group_table(p.schedule)
            except ValueError:
                continue
            runnable.append((p.time, p.rounds or 0, p))
        if not runnable:
            raise ValueError("--schedule best: no in-network plan is made of cliques")
        return min(runnable, key=lambda c: c[:2])[2]
    if schedule == "sharded":
        return res.best_among(SHARDED_FAMILIES)
    if schedule not in res.plans:
        raise ValueError(f"--schedule {schedule}: the planner has no such plan for "
                         f"{topo.n} sites (has {', '.join(sorted(res.plans))})")
    return res.plans[schedule]


def predict(topo: Topology, plan: Plan, nbytes: int, memory: int, elements: int) -> Prediction:
    """Round model time of each GroupTable step of ``plan`` at ``memory`` (module docstring)."""
    table = group_table(plan.schedule)
    model = RoundModel(topo.with_memory(memory), nbytes, elements * pr.ELEMENT_BYTES)
    times, agreements = [], []
    for r in range(len(table.rounds)):
        if table.sharded_steps(r) is not None:  # its phases, as the planner times them
            results = [model.round_time(plan.schedule.rounds[r])]
        elif table.ring_steps(r) is not None:  # the planner's ring + the all-sites agreement
            ring = model.round_time(plan.schedule.rounds[r])
            ring.agreement = model.agreement_time(Round((clique(range(topo.n)),)))
            ring.time += ring.agreement
            results = [ring]
        else:
            results = [model.round_time(clique_round(sorted({table.groups[g] for g in step.values()})))
                       for step in table.steps(r)]
        times.append([float(x.time) for x in results])
        agreements.append([float(x.agreement) for x in results])
    return Prediction(plan, table, times, agreements)
