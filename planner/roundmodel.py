"""Analytic round model: how long one synchronisation round takes on a WAN topology.

Protocol modelled (and replayed packet-by-packet by ``wanreduce.planner.wansim``):

* every sender cuts its B bytes into N = ceil(B / c) chunks and multicasts each chunk once on a
  shortest-latency tree to all its receivers (each directed link carries one copy per sender);
* each receiving site's edge FPGA merges the chunk's contributions in a slot; a slot is freed when
  the chunk's last contribution has arrived, and the FPGA then acks every contributing sender;
* a sender sends chunk i + S only when every receiver it feeds has acked chunk i (static slot
  indexing as in SwitchML), so with S slots a group's chunks cycle with period
  P = max over (sender, receiver) pairs of RTT + one chunk's serialisation (see docs/planner.md);
* links, sender egress ports and receiver FPGA ingress ports are shared max-min fairly between
  the streams that cross them (progressive filling); a group's senders run at one common rate.

Memory models (``memory_model``, docs/planner.md "FPGA memory"): how many slots a receiver has
(S_r) and how long one chunk holds a slot (H_r); a component's senders run at most at
min_r S_r c / H_r, the most constrained receiver limiting the group.

* ``"shared"`` — one slot holds the running sum of all of a group's senders (the wanreduce
  core), S_r = M_r // c; the slot is held for a round trip (senders wait for acks):
  H_r = max over r's senders of RTT + serialisation;
* ``"per-sender"`` — the FPGA buffers each inbound stream separately, S_r = M_r // (c * m_r),
  same round-trip H_r;
* ``"skew-only"`` — shared slots held only from the first to the last arrival of a chunk:
  senders are paced open-loop at the planned rate from a common start (no acks), and the local
  hosts inject the site's own contribution when the last remote one is due, so
  H_r = max - min over r's m_r remote senders of the one-way arrival time + m_r ingress chunk
  times (a chunk may queue behind one chunk of every other stream at the FPGA port), with one
  of the M_r // c slots kept spare for jitter from queues on shared links: S_r = M_r // c - 1.

**Scale agreement** (``agreement_time``, docs/planner.md, round model item 9): the host driver starts
every all-reduce call (``Driver.allreduce``, the sharded call too) with an all-reduce of the
agreement vector (``host/agreement.py``: ``LANES`` int32 lanes, 1432 B) among the same members,
before the first data chunk leaves. A round's time is therefore that exchange (this model at
``AGREEMENT_BYTES`` on the round's aggregating groups; a sharded round: the clique of all its
sites) followed by the data transfer: ``RoundResult.time = agreement + transfer``. One call per
round, as the driver runs a round; the ring (hosts reduce, exact floats) has none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from wanreduce.host.agreement import LANES as _AGREEMENT_LANES

from .schedules import Round, Schedule, clique
from .sharded import ShardedRound
from .topology import Topology

#: Bytes of the driver's agreement vector on the wire (int32 lanes, like every payload element).
AGREEMENT_BYTES = _AGREEMENT_LANES * 4
MEMORY_MODELS = ("shared", "per-sender", "skew-only")
#: Models whose slot is held for a round trip (senders wait for acks, chunks leave in windows).
ROUND_TRIP_MODELS = ("shared", "per-sender")


@dataclass
class ComponentResult:
    """One coupled set of groups (groups sharing a sender run at one rate)."""

    groups: list[int]
    rate: float  # long-run bytes/s per sender stream
    burst_rate: float  # bytes/s while a window is in flight
    slots: float  # usable S of the most constrained receiver (inf if no aggregation)
    period: float  # its slot hold time H (s): round trip, or arrival skew (skew-only)
    latency: float  # L, last chunk's path delay (s)
    bound: str  # what limits the rate: memory, link, egress, ingress
    time: float
    senders: list[int] = field(default_factory=list)


@dataclass
class RoundResult:
    """Time of one round (= slowest component) with per-component detail.

    ``time`` includes ``agreement``, the driver's scale agreement before the data (0 for the
    ring and for a phase); ``transfer`` is the data part alone (what ``wansim`` replays).
    """

    time: float
    components: list[ComponentResult] = field(default_factory=list)
    agreement: float = 0.0

    @property
    def transfer(self) -> float:
        """The data transfer alone (the round time without the agreement)."""
        return self.time - self.agreement

    def pacing(self) -> dict[int, float]:
        """Sender -> paced rate (bytes/s): what the planner tells each sender to send at."""
        return {s: c.burst_rate for c in self.components for s in c.senders}

    @property
    def bound(self) -> str:
        """What limits the slowest component."""
        if not self.components:
            return "none"
        return max(self.components, key=lambda c: c.time).bound


def _fill(
    upper: np.ndarray, usage: np.ndarray, capacity: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Max-min fair progressive filling.

    ``upper[c]`` per-component cap, ``usage[e, c]`` streams of component c on link e,
    ``capacity[e]`` link bytes/s. Returns (rates, link_saturated_for_component flags).
    """
    k = len(upper)
    x = np.zeros(k)
    active = upper > 0
    by_link = np.zeros(k, dtype=bool)
    used = usage.any(axis=1)
    usage, capacity = usage[used], capacity[used]
    while active.any():
        inc = np.where(active, upper - x, np.inf).min()
        if usage.size:
            act_use = usage @ active.astype(float)
            slack = capacity - usage @ x
            with np.errstate(divide="ignore", invalid="ignore"):
                link_inc = np.where(act_use > 0, slack / act_use, np.inf)
            inc = min(inc, link_inc.min())
        x = x + np.where(active, max(inc, 0.0), 0.0)
        hit_upper = active & (x >= upper * (1 - 1e-12))
        hit_link = np.zeros(k, dtype=bool)
        if usage.size:
            sat = (capacity - usage @ x) <= capacity * 1e-12
            hit_link = active & (usage[sat] > 0).any(axis=0)
        by_link |= hit_link & ~hit_upper
        active &= ~(hit_upper | hit_link)
    return x, by_link


class RoundModel:
    """Evaluates round times for one topology, message size and chunk size."""

    def __init__(
        self,
        topo: Topology,
        nbytes: int,
        chunk_bytes: int = 1996,
        memory_model: str = "shared",
    ) -> None:
        if memory_model not in MEMORY_MODELS:
            raise ValueError(f"memory_model: must be one of {', '.join(MEMORY_MODELS)}, "
                             f"got {memory_model!r}")
        self.topo = topo
        self.nbytes = int(nbytes)
        self.chunk_bytes = int(chunk_bytes)
        self.chunk = int(min(chunk_bytes, max(nbytes, 1)))
        self.memory_model = memory_model
        self._agreement_model: RoundModel | None = None
        self._agreements: dict[tuple, float] = {}
        c = self.chunk
        rate = topo.line_rate
        # one chunk's store-and-forward serialisation after the egress port, per (s, r)
        link_ser = (topo.path_links * (c / (topo.dir_bw / 8))).sum(axis=2)
        self._lat = topo.delay + link_ser + c / rate[None, :]  # last byte at r after leaving s
        self._cycle = self._lat + c / rate[:, None] + topo.delay.T  # chunk out, ack back

    def slot_use(self, r: int, src: list[int]) -> tuple[int, float]:
        """(slots S_r, hold time H_r) of aggregating receiver r fed by remote senders ``src``."""
        c, mem = self.chunk, self.topo.memory[r]
        if self.memory_model == "skew-only":
            # held from first to last arrival, + each stream's chunk queued at the ingress port;
            # one slot is kept spare for arrival jitter from queues on shared links
            arrive = [self._lat[s, r] for s in src]
            hold = max(arrive) - min(arrive) + len(src) * c / self.topo.line_rate[r]
            return math.floor(mem / c) - 1, hold
        per = len(src) if self.memory_model == "per-sender" else 1
        return math.floor(mem / (c * per)), max(self._cycle[s, r] for s in src)

    def transfer_time(self, nbytes: int, slots: float, period: float, x_bw: float, x_mem: float,
                      mem_bound: bool, latency: float) -> tuple[float, float]:
        """(burst rate, time) for ``nbytes`` per sender of a component, per the memory model.

        Round-trip models: senders paced at their max-min fair share, in windows of S slots
        (``window_time``); skew-only: paced open loop at the memory-capped share, no windows.
        """
        if self.memory_model not in ROUND_TRIP_MODELS:
            return x_mem, nbytes / x_mem + latency
        burst = max(x_bw, x_mem) if mem_bound else x_mem
        return burst, self.window_time(nbytes, slots, period, burst, latency)

    def window_time(self, nbytes: int, slots: float, period: float, burst: float,
                    latency: float) -> float:
        """Time to send ``nbytes`` per sender at ``burst`` bytes/s in windows of S slots.

        W = ceil(N / S) windows, one per max(P, S c / burst); the last window's bytes at
        ``burst``; plus the last chunk's flight ``latency`` (docs/planner.md, round model 6).
        """
        c = self.chunk
        big_n = max(1, math.ceil(nbytes / c))
        s_ = min(slots, big_n)
        windows = math.ceil(big_n / s_)
        cyc = max(period, s_ * c / burst)
        last = nbytes - (windows - 1) * s_ * c
        return (windows - 1) * cyc + last / burst + latency

    def round_time(self, rnd: Round) -> RoundResult:
        """Time of one round as the driver runs it: the scale agreement, then the data."""
        res = self.transfer_time_of(rnd)
        res.agreement = self.agreement_time(rnd)
        res.time += res.agreement
        return res

    def agreement_time(self, rnd: Round) -> float:
        """The driver's scale agreement of a round (module docstring): an all-reduce of
        ``AGREEMENT_BYTES`` in every aggregating group of the round (groups that merge one
        stream need no common scale), in the clique of all sites of a sharded round (its
        agreement spans every shard owner), none for the ring (no aggregator)."""
        if rnd.ring is not None:
            return 0.0
        if isinstance(rnd, ShardedRound):
            groups = (clique(sorted({s for g in rnd.groups for s in g.receivers + g.senders})),)
        else:
            groups = tuple(g for g in rnd.groups if g.aggregating)
        if groups not in self._agreements:
            if self._agreement_model is None:
                self._agreement_model = RoundModel(self.topo, AGREEMENT_BYTES, self.chunk_bytes,
                                                   self.memory_model)
            self._agreements[groups] = self._agreement_model.transfer_time_of(Round(groups)).time
        return self._agreements[groups]

    def transfer_time_of(self, rnd: Round) -> RoundResult:
        """The data transfer of one round alone (no agreement)."""
        if rnd.ring is not None:
            return self._ring_time(rnd.ring)
        if isinstance(rnd, ShardedRound):
            from .sharded_model import sharded_round_time  # it builds on this model

            return sharded_round_time(self, rnd)
        topo, n = self.topo, self.topo.n
        rate, c = topo.line_rate, self.chunk
        groups = rnd.groups
        # components: union-find over groups that share a sender
        parent = list(range(len(groups)))

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        owner: dict[int, int] = {}
        feeds = np.zeros((n, n), dtype=bool)  # feeds[s, r]: s's stream must reach r
        for g in groups:
            for s in g.senders:
                for r in g.receivers:
                    if r != s:
                        feeds[s, r] = True
        for gi, g in enumerate(groups):
            for s in g.senders:
                if feeds[s].any():
                    if s in owner:
                        parent[find(gi)] = find(owner[s])
                    else:
                        owner[s] = gi
        comps: dict[int, list[int]] = {}
        for gi, g in enumerate(groups):
            if any(feeds[s, r] for s in g.senders for r in g.receivers):
                comps.setdefault(find(gi), []).append(gi)
        if not comps:
            return RoundResult(0.0)
        keys = list(comps)
        k = len(keys)
        trees = (feeds[:, :, None] & topo.path_links).any(axis=1)  # (n, E)
        usage = np.zeros((len(topo.directed), k))
        upper_bw = np.full(k, np.inf)
        mem_cap = np.full(k, np.inf)
        slots = np.full(k, np.inf)
        period = np.zeros(k)
        latency = np.zeros(k)
        ubound = ["egress"] * k
        for ci, key in enumerate(keys):
            senders = {s for gi in comps[key] for s in groups[gi].senders if feeds[s].any()}
            for s in senders:
                usage[:, ci] += trees[s]
                if rate[s] < upper_bw[ci]:
                    upper_bw[ci], ubound[ci] = rate[s], "egress"
            for gi in comps[key]:
                g = groups[gi]
                for r in g.receivers:
                    src = [s for s in g.senders if feeds[s, r]]
                    if not src:
                        continue
                    ing = rate[r] / len(src)
                    if ing < upper_bw[ci]:
                        upper_bw[ci], ubound[ci] = ing, "ingress"
                    latency[ci] = max(latency[ci], max(self._lat[s, r] for s in src))
                    if g.aggregating:  # the receiver allowing the lowest rate limits K
                        s_r, hold = self.slot_use(r, src)
                        cap = s_r * c / hold
                        if cap < mem_cap[ci]:
                            mem_cap[ci], slots[ci], period[ci] = cap, s_r, hold
        capacity = topo.dir_bw / 8
        x_mem, link_mem = _fill(np.minimum(upper_bw, mem_cap), usage, capacity)
        x_bw, _ = _fill(upper_bw, usage, capacity)
        out: list[ComponentResult] = []
        worst = 0.0
        for ci, key in enumerate(keys):
            if slots[ci] < 1:
                out.append(ComponentResult(comps[key], 0.0, 0.0, slots[ci], period[ci],
                                           latency[ci], "memory", math.inf))
                worst = math.inf
                continue
            mem_bound = (not link_mem[ci]) and mem_cap[ci] <= upper_bw[ci] and np.isfinite(mem_cap[ci])
            bound = "memory" if mem_bound else ("link" if link_mem[ci] else ubound[ci])
            burst, t = self.transfer_time(self.nbytes, slots[ci], period[ci], x_bw[ci], x_mem[ci],
                                          mem_bound, latency[ci])
            senders = sorted({s for gi in comps[key] for s in groups[gi].senders if feeds[s].any()})
            out.append(ComponentResult(comps[key], x_mem[ci], burst, slots[ci], period[ci],
                                       latency[ci], bound, t, senders))
            worst = max(worst, t)
        return RoundResult(worst, out)

    def _ring_time(self, order: tuple[int, ...]) -> RoundResult:
        """Ring all-reduce: 2(n-1) steps of B/n bytes, pipelined; hosts reduce (no FPGA slots).

        T = 2(n-1)/n * B / x + the longest path a byte travels (2(n-1) consecutive hops).
        Transport windows are assumed to cover each hop's bandwidth-delay product.
        """
        topo, n = self.topo, self.topo.n
        if n == 1:
            return RoundResult(0.0)
        hops = [(order[i], order[(i + 1) % n]) for i in range(n)]
        usage = np.zeros((len(topo.directed), 1))
        for s, r in hops:
            usage[:, 0] += topo.path_links[s, r]
        upper = np.array([topo.line_rate.min()])
        x, by_link = _fill(upper, usage, topo.dir_bw / 8)
        hop_lat = [self._lat[s, r] for s, r in hops]
        span = 2 * (n - 1)
        path = max(sum(hop_lat[(i + h) % n] for h in range(span)) for i in range(n))
        t = span / n * self.nbytes / x[0] + path
        comp = ComponentResult([0], x[0], x[0], math.inf, 0.0, path,
                               "link" if by_link[0] else "egress", t, list(order))
        return RoundResult(t, [comp])

    def schedule_round_times(self, schedule: Schedule) -> list[float]:
        """Round time of every round of a schedule."""
        return [self.round_time(r).time for r in schedule.rounds]
