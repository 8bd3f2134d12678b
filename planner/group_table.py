"""Aggregator groups of a schedule: what the host driver and the per-site aggregators are told.

The driver all-reduces over *cliques* (every member sends, every member receives the sum), each
identified on the wire by a group id (0..255) whose membership the aggregators hold in their
GROUPg_MEMBERS registers. A :class:`GroupTable` numbers the distinct cliques of a schedule once,
so every site and every aggregator agree on the ids before the first round, and lists, for each
round, the steps a site takes: one step for a plain round of cliques.

A sharded round (``planner/sharded.py``) runs as its reduce-scatter and all-gather phases
(:class:`ShardedSteps`, ``host/sharded_allreduce.py``): one step whose group is the clique of all
sites (the scale agreement, and the warm-up), and per level per block per shard owner two more
groups: a *reduce* group (the block's members; contributions are routed to the owner's aggregator
only, which merges them) and a *gather* group (the owner multicasts its reduced shard; the other
members' FPGAs pass it through to their hosts). ``reduce_owner`` / ``gather_owner`` name the
owner of each such group (the emulator's routes follow them).

A ring all-reduce round (``planner/schedules.ring_allreduce``) runs on the hosts
(:class:`RingSteps`, ``host/ring_allreduce.py``): the clique of all sites (the scale agreement,
and the warm-up) and, per site, a *hop* group {site, its successor in the ring order} whose only
sender is the site (``gather_owner``): its copies pass through the successor's FPGA to its hosts,
like a sharded all-gather's, so the aggregators merge nothing of the ring's data.

Rounds that are not cliques (weighted tree/one-peer groups) are refused with a ValueError naming
the family; a site alone in its group skips the step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .schedules import Round, Schedule
from .sharded import ShardedRound

MAX_GROUPS = 256  # the wire's group_id is one byte


@dataclass(frozen=True)
class ShardBlock:
    """Sites that reduce-scatter together at one level of a sharded round, in shard order: shard
    k is merged by the aggregator of ``sites[k]`` (group ``reduce[k]``) and multicast back by
    ``sites[k]`` (group ``gather[k]``)."""

    sites: tuple[int, ...]
    reduce: tuple[int, ...]
    gather: tuple[int, ...]


@dataclass(frozen=True)
class ShardedSteps:
    """A sharded round as the sites run it: the scale agreement's group, then per level the
    blocks (reduce-scatter level 0, 1, ..., all-gather back down)."""

    everyone: int  # group id of the clique of all sites
    levels: tuple[tuple[ShardBlock, ...], ...]

    def site_blocks(self, site: int) -> list[ShardBlock]:
        """Per level, the block ``site`` belongs to."""
        return [next(b for b in level if site in b.sites) for level in self.levels]


@dataclass(frozen=True)
class RingSteps:
    """A ring all-reduce round as the sites run it: the scale agreement's group, the ring order
    and, per site, the hop group it sends to its successor in (``hop[site]``)."""

    everyone: int  # group id of the clique of all sites
    order: tuple[int, ...]  # the planner's ring order (a permutation of the sites)
    hop: dict[int, int]  # site -> group id of {site, successor}, sent by site only

    def successor(self, site: int) -> int:
        """The site after ``site`` in the ring order."""
        return self.order[(self.order.index(site) + 1) % len(self.order)]

    def predecessor(self, site: int) -> int:
        """The site before ``site`` in the ring order."""
        return self.order[self.order.index(site) - 1]


@dataclass(frozen=True)
class GroupTable:
    """Group ids of a schedule's cliques and, per round, per step, each site's group id."""

    family: str
    n: int
    groups: dict[int, tuple[int, ...]]  # group id -> sorted members (size >= 2)
    rounds: tuple[tuple[dict[int, int], ...], ...]  # [round][step] site -> group id
    sharded: tuple[ShardedSteps | None, ...] = ()  # per round: its phases, or None (cliques)
    reduce_owner: dict[int, int] = field(default_factory=dict)  # reduce group -> merging site
    gather_owner: dict[int, int] = field(default_factory=dict)  # gather group -> sending site
    ring: tuple[RingSteps | None, ...] = ()  # per round: its ring steps, or None

    def sharded_steps(self, r: int) -> ShardedSteps | None:
        """The phases of round ``r`` if it is a sharded round (rounds repeat cyclically)."""
        return self.sharded[r % len(self.sharded)] if self.sharded else None

    def ring_steps(self, r: int) -> RingSteps | None:
        """The ring of round ``r`` if it is a ring all-reduce round (rounds repeat cyclically)."""
        return self.ring[r % len(self.ring)] if self.ring else None

    def steps(self, r: int) -> tuple[dict[int, int], ...]:
        """Steps of round ``r`` (rounds repeat cyclically, as the planner runs them)."""
        return self.rounds[r % len(self.rounds)]

    def site_steps(self, r: int, site: int) -> list[tuple[int, tuple[int, ...]]]:
        """(group id, members) of each step of round ``r`` in which ``site`` averages."""
        return [(st[site], self.groups[st[site]]) for st in self.steps(r) if site in st]


def _cliques_of(rnd: Round, family: str) -> list[list[tuple[int, ...]]]:
    blocks = []
    for g in rnd.groups:
        if tuple(sorted(g.senders)) != tuple(sorted(g.receivers)) or len(set(g.weights)) > 1:
            raise ValueError(f"schedule {family!r}: group {g.receivers} is not a clique "
                             "(the driver all-reduces cliques only)")
        blocks.append(tuple(sorted(g.receivers)))
    return [blocks]


def _sharded_steps(rnd: ShardedRound, n: int, ids: dict, members: dict, reduce_owner: dict,
                   gather_owner: dict) -> ShardedSteps:
    """Number the groups of a sharded round (module docstring)."""
    everyone = tuple(range(n))
    eid = ids.setdefault(everyone, len(ids))
    members[eid] = everyone
    levels = []
    for level in (lv for lv in rnd.levels() if len(lv[0]) > 1):
        blocks = []
        for sites in level:
            red, gat = [], []
            for owner in sites:
                for kind, out, owners in (("reduce", red, reduce_owner),
                                          ("gather", gat, gather_owner)):
                    gid = ids.setdefault((kind, owner, tuple(sites)), len(ids))
                    members[gid] = tuple(sorted(sites))
                    owners[gid] = owner
                    out.append(gid)
            blocks.append(ShardBlock(tuple(sites), tuple(red), tuple(gat)))
        levels.append(tuple(blocks))
    return ShardedSteps(eid, tuple(levels))


def _ring_steps(order: tuple[int, ...], n: int, ids: dict, members: dict,
                gather_owner: dict) -> RingSteps:
    """Number the groups of a ring round (module docstring)."""
    everyone = tuple(range(n))
    eid = ids.setdefault(everyone, len(ids))
    members[eid] = everyone
    hop = {}
    for i, s in enumerate(order):
        pair = tuple(sorted((s, order[(i + 1) % n])))
        gid = hop[s] = ids.setdefault(("hop", s, pair), len(ids))
        members[gid] = pair
        gather_owner[gid] = s
    return RingSteps(eid, tuple(order), hop)


def group_table(schedule: Schedule, max_groups: int = MAX_GROUPS) -> GroupTable:
    """Number the schedule's distinct groups (in order of first use) and list each round's steps."""
    ids: dict[tuple, int] = {}
    members: dict[int, tuple[int, ...]] = {}
    reduce_owner: dict[int, int] = {}
    gather_owner: dict[int, int] = {}
    rounds = []
    sharded: list[ShardedSteps | None] = []
    ring: list[RingSteps | None] = []
    for rnd in schedule.rounds:
        if rnd.ring is not None:
            rs = _ring_steps(rnd.ring, schedule.n, ids, members, gather_owner)
            ring.append(rs)
            sharded.append(None)
            rounds.append(({s: rs.everyone for s in range(schedule.n)},))
            continue
        ring.append(None)
        if isinstance(rnd, ShardedRound):
            sh = _sharded_steps(rnd, schedule.n, ids, members, reduce_owner, gather_owner)
            sharded.append(sh)
            rounds.append(({s: sh.everyone for s in range(schedule.n)},))
            continue
        sharded.append(None)
        steps = []
        for blocks in _cliques_of(rnd, schedule.family):
            step = {}
            for clq in blocks:
                if len(clq) < 2:
                    continue
                gid = ids.setdefault(clq, len(ids))
                members[gid] = clq
                step.update({s: gid for s in clq})
            steps.append(step)
        rounds.append(tuple(steps))
    if len(ids) > max_groups:
        raise ValueError(f"schedule {schedule.family!r} has {len(ids)} distinct groups; "
                         f"at most {max_groups} fit the wire's group id")
    return GroupTable(schedule.family, schedule.n, dict(sorted(members.items())), tuple(rounds),
                      tuple(sharded) if any(sharded) else (), reduce_owner, gather_owner,
                      tuple(ring) if any(ring) else ())
