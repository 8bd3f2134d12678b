"""train/schedule_choice.py: --schedule names map to the planner's plans; `best` is the best plan
the driver can run (cliques) when the planner's best is not one; the ring runs in its hop groups."""

from __future__ import annotations

import pytest

from wanreduce.emulator import prediction
from wanreduce.planner import plan_report as pr
from wanreduce.planner import schedules as S
from wanreduce.planner.optimiser import Plan
from wanreduce.planner.topology import load_topology
from wanreduce.train.schedule_choice import choose


def _plan(sched, time: float) -> Plan:
    return Plan(sched.family, sched, time, 2, [time / 2])


def test_best_is_the_planners_best_in_network_plan():
    topo = load_topology("nine-city")
    got = choose("best", topo, 4 << 20, 9640)
    assert got.plan.family == pr.evaluate(topo, 9640, 4 << 20, colocated=False).best_in_network.family
    assert got.table is not None


def test_best_that_is_not_cliques_falls_back_to_the_best_clique_plan(monkeypatch):
    plans = {"tree": _plan(S.tree(9, [[0, 1, 2, 3, 4], [5, 6, 7, 8]], [0, 5]), 1.0),
             "cliques-3": _plan(S.rotating_cliques(9, 3), 2.0),
             "all-to-all": _plan(S.all_to_all(9), 3.0),
             "ring": _plan(S.ring_allreduce(9), 0.5)}
    monkeypatch.setattr(prediction.pr, "evaluate",
                        lambda *a, **k: pr.MemoryResult(None, plans, {}))
    got = choose("best", load_topology("nine-city"), 4 << 20, 9640)
    assert got.plan.family == "cliques-3" and len(got.table.groups) == 12
    ring = choose("ring", load_topology("nine-city"), 4 << 20, 9640)
    assert ring.plan.family == "ring" and ring.table.ring_steps(0).order == ring.plan.schedule.rounds[0].ring


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="--schedule"):
        choose("cliques-5", load_topology("nine-city"), 4 << 20, 9640)
