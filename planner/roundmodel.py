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

Memory accounting (``memory_model``): ``"shared"`` — one slot holds the running sum of all of a
group's senders (SwitchML/ATP, the faithful model of the wanreduce core), S = M // c; or
``"per-sender"`` — the FPGA buffers each inbound stream separately, S = M // (c * senders).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .schedules import Round, Schedule
from .sharded import ShardedRound
from .topology import Topology

MEMORY_MODELS = ("shared", "per-sender")


@dataclass
class ComponentResult:
    """One coupled set of groups (groups sharing a sender run at one rate)."""

    groups: list[int]
    rate: float  # long-run bytes/s per sender stream
    burst_rate: float  # bytes/s while a window is in flight
    slots: float  # S (inf if no aggregation)
    period: float  # P, slot cycle (s)
    latency: float  # L, last chunk's path delay (s)
    bound: str  # what limits the rate: memory, link, egress, ingress
    time: float
    senders: list[int] = field(default_factory=list)


@dataclass
class RoundResult:
    """Time of one round (= slowest component) with per-component detail."""

    time: float
    components: list[ComponentResult] = field(default_factory=list)

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
            raise ValueError(f"memory_model must be one of {MEMORY_MODELS}")
        self.topo = topo
        self.nbytes = int(nbytes)
        self.chunk = int(min(chunk_bytes, max(nbytes, 1)))
        self.memory_model = memory_model
        self.n_chunks = max(1, math.ceil(self.nbytes / self.chunk))
        c = self.chunk
        rate = topo.line_rate
        # one chunk's store-and-forward serialisation after the egress port, per (s, r)
        link_ser = (topo.path_links * (c / (topo.dir_bw / 8))).sum(axis=2)
        self._lat = topo.delay + link_ser + c / rate[None, :]  # last byte at r after leaving s
        self._cycle = self._lat + c / rate[:, None] + topo.delay.T  # chunk out, ack back

    def slot_count(self, r: int, streams: int) -> int:
        """Slots S at receiver r merging ``streams`` inbound streams, per the memory model."""
        per = streams if self.memory_model == "per-sender" else 1
        return math.floor(self.topo.memory[r] / (self.chunk * per))

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
        """Time of one round."""
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
                    if g.aggregating:
                        slots[ci] = min(slots[ci], self.slot_count(r, len(src)))
                        period[ci] = max(period[ci], max(self._cycle[s, r] for s in src))
            if np.isfinite(slots[ci]):
                mem_cap[ci] = slots[ci] * c / period[ci] if period[ci] > 0 else np.inf
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
            burst = max(x_bw[ci], x_mem[ci]) if mem_bound else x_mem[ci]
            bound = "memory" if mem_bound else ("link" if link_mem[ci] else ubound[ci])
            # senders are paced at ``burst`` (their max-min fair share); with S slots, chunks
            # leave in windows of S, one window per max(slot cycle P, S c / burst)
            t = self.window_time(self.nbytes, slots[ci], period[ci], burst, latency[ci])
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
