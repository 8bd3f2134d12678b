"""Aggregator groups of a schedule: what the host driver and the per-site aggregators are told.

The driver all-reduces over *cliques* (every member sends, every member receives the sum), each
identified on the wire by a group id (0..255) whose membership the aggregators hold in their
GROUPg_MEMBERS registers. A :class:`GroupTable` numbers the distinct cliques of a schedule once,
so every site and every aggregator agree on the ids before the first round, and lists, for each
round, the steps a site takes: one step for a plain round of cliques; one step per level for a
sharded round (level 0 clusters, then level 1 counterparts, ... — the same averages; the hosts
all-reduce whole tensors, so the traffic is that of cliques, not of the sharded phases).

Rounds that are not cliques (weighted tree/one-peer groups) and ring all-reduce (no aggregator)
are refused with a ValueError naming the family; a site alone in its group skips the step.
"""

from __future__ import annotations

from dataclasses import dataclass

from .schedules import Round, Schedule
from .sharded import ShardedRound

MAX_GROUPS = 256  # the wire's group_id is one byte


@dataclass(frozen=True)
class GroupTable:
    """Group ids of a schedule's cliques and, per round, per step, each site's group id."""

    family: str
    n: int
    groups: dict[int, tuple[int, ...]]  # group id -> sorted members (size >= 2)
    rounds: tuple[tuple[dict[int, int], ...], ...]  # [round][step] site -> group id

    def steps(self, r: int) -> tuple[dict[int, int], ...]:
        """Steps of round ``r`` (rounds repeat cyclically, as the planner runs them)."""
        return self.rounds[r % len(self.rounds)]

    def site_steps(self, r: int, site: int) -> list[tuple[int, tuple[int, ...]]]:
        """(group id, members) of each step of round ``r`` in which ``site`` averages."""
        return [(st[site], self.groups[st[site]]) for st in self.steps(r) if site in st]


def _cliques_of(rnd: Round, family: str) -> list[list[tuple[int, ...]]]:
    if rnd.ring is not None:
        raise ValueError(f"schedule {family!r}: ring all-reduce uses no aggregator groups")
    if isinstance(rnd, ShardedRound):
        return [list(level) for level in rnd.levels() if len(level[0]) > 1]
    blocks = []
    for g in rnd.groups:
        if tuple(sorted(g.senders)) != tuple(sorted(g.receivers)) or len(set(g.weights)) > 1:
            raise ValueError(f"schedule {family!r}: group {g.receivers} is not a clique "
                             "(the driver all-reduces cliques only)")
        blocks.append(tuple(sorted(g.receivers)))
    return [blocks]


def group_table(schedule: Schedule, max_groups: int = MAX_GROUPS) -> GroupTable:
    """Number the schedule's distinct cliques (in order of first use) and list each round's steps."""
    ids: dict[tuple[int, ...], int] = {}
    rounds = []
    for rnd in schedule.rounds:
        steps = []
        for blocks in _cliques_of(rnd, schedule.family):
            step = {}
            for members in blocks:
                if len(members) < 2:
                    continue
                gid = ids.setdefault(members, len(ids))
                step.update({s: gid for s in members})
            steps.append(step)
        rounds.append(tuple(steps))
    if len(ids) > max_groups:
        raise ValueError(f"schedule {schedule.family!r} has {len(ids)} distinct groups; "
                         f"at most {max_groups} fit the wire's group id")
    return GroupTable(schedule.family, schedule.n, {g: m for m, g in ids.items()}, tuple(rounds))
