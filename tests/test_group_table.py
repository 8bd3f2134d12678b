"""planner/group_table.py: the cliques of a schedule numbered once, per-round steps per site."""

import itertools

import pytest

from wanreduce.planner import schedules as S
from wanreduce.planner import sharded
from wanreduce.planner.group_table import group_table


@pytest.mark.parametrize("sched", [S.rotating_cliques(9, 3), S.all_to_all(6), S.grid(12, (3, 4)),
                                   sharded.sharded(9, radices=(3, 3)), sharded.sharded(5)])
def test_every_step_partitions_sites_into_known_cliques(sched):
    t = group_table(sched)
    assert len(t.rounds) == len(sched.rounds)
    cliques = [m for g, m in t.groups.items() if g not in t.reduce_owner and g not in t.gather_owner]
    assert len(set(cliques)) == len(cliques)  # each clique numbered once
    for r in range(len(t.rounds)):
        for step in t.steps(r):
            for gid, members in itertools.groupby(sorted(step, key=step.get), key=step.get):
                assert tuple(sorted(members)) == t.groups[gid]


def test_round_steps_repeat_cyclically_and_name_the_site_group():
    t = group_table(S.rotating_cliques(9, 3))
    assert t.steps(len(t.rounds) + 1) == t.steps(1)
    for r in range(4):
        [(gid, members)] = t.site_steps(r, 4)
        assert 4 in members and len(members) == 3 and t.groups[gid] == members


@pytest.mark.parametrize("sched,word", [(S.exponential(8), "clique")])
def test_non_clique_schedules_are_refused_by_name(sched, word):
    with pytest.raises(ValueError, match=word):
        group_table(sched)


def test_too_many_groups_is_refused():
    with pytest.raises(ValueError, match="at most 3"):
        group_table(S.rotating_cliques(9, 3), max_groups=3)
