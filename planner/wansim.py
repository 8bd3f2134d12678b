"""Discrete-event WAN simulator (simpy) at chunk granularity.

Replays one round of a schedule over a topology, chunk by chunk, with the protocol the analytic
round model (``wanreduce.planner.roundmodel``) assumes, so the two can be checked against each other:

* each sender's chunk is serialised by its egress port, then store-and-forwarded along its
  multicast tree; every directed link is a FIFO server (``simpy.Resource``) of its bandwidth
  followed by its propagation delay; the copy is replicated where the tree branches;
* at a receiver the chunk is serialised through the FPGA ingress port, then added into slot
  (chunk mod S); when all contributions (remote ones and the site's own) are in, the slot is
  freed and an ack travels back to every remote contributor (acks are tiny: delay only);
* a sender may send chunk i once every aggregating receiver r it feeds has acked chunk i - S_r;
* ``memory_model="skew-only"``: no acks; senders are paced open loop from a common start, the
  site's own contribution is injected by its hosts when the last remote one has arrived, and a
  slot is held from the start of a chunk's first remote arrival to its last. The simulator
  counts the slots held at once (``SimResult.peak_slots``) and the arrivals that found all S_r
  slots busy (``SimResult.overflows``, which a real FPGA would have to drop).

Ring all-reduce rounds (no in-network aggregation) are not simulated here.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

import simpy

from .schedules import Round
from .topology import Topology


@dataclass
class SimResult:
    """Simulated round: completion time (s) and per-site completion times."""

    time: float
    completion: dict[int, float]
    events: int
    peak_slots: dict[int, int] = field(default_factory=dict)  # receiver -> most slots held at once
    overflows: int = 0  # chunk starts that found every slot busy (skew-only: paced too fast)
    peak_queue: int = 0  # largest backlog (bytes) waiting at any one link or FPGA ingress port


def simulate_round(
    topo: Topology,
    rnd: Round,
    nbytes: int,
    chunk_bytes: int,
    memory_model: str = "shared",
    pacing: dict[int, float] | None = None,
) -> SimResult:
    """Simulate one round; returns when the last receiver holds its last aggregated chunk.

    ``pacing`` maps sender -> bytes/s: the sender spaces its chunks at that rate (the planner's
    max-min fair share, ``RoundResult.pacing()``). Without it senders send at line rate and
    bottleneck queues (FIFO, unbounded) absorb the excess.
    """
    if rnd.ring is not None:
        raise NotImplementedError("ring all-reduce rounds are analytic only")
    open_loop = memory_model == "skew-only"
    if open_loop and pacing is None:
        raise ValueError("memory_model: skew-only senders are paced open loop; pass pacing "
                         "(RoundResult.pacing())")
    env = simpy.Environment()
    n = topo.n
    c = int(min(chunk_bytes, max(nbytes, 1)))
    n_chunks = max(1, math.ceil(nbytes / c))
    last_bytes = nbytes - (n_chunks - 1) * c
    rate = topo.line_rate
    bw = topo.dir_bw / 8
    link_lat = {}
    for k, (u, v) in enumerate(topo.directed):
        link_lat[k] = topo.delay[u, v] if topo.hops[u, v] == 1 else None
    # per-link latency from the link list (delay[u, v] may be a shorter multi-hop route)
    for lk in topo.links:
        a, b = topo.index[lk.a], topo.index[lk.b]
        for k, e in enumerate(topo.directed):
            if e in ((a, b), (b, a)):
                link_lat[k] = lk.latency_s
    links = [simpy.Resource(env, capacity=1) for _ in topo.directed]
    egress = [simpy.Resource(env, capacity=1) for _ in range(n)]
    ingress = [simpy.Resource(env, capacity=1) for _ in range(n)]
    eidx = {e: k for k, e in enumerate(topo.directed)}

    # who feeds whom, expected contributions, slots
    feeds: dict[int, set[int]] = defaultdict(set)
    expected: dict[int, int] = {}
    local: dict[int, bool] = {}
    aggregating: dict[int, bool] = {}
    sources: dict[int, list[int]] = {}
    for g in rnd.groups:
        for r in g.receivers:
            src = [s for s in g.senders if s != r]
            sources[r] = src
            local[r] = r in g.senders
            # open loop: the hosts add the site's own contribution as the last remote one lands
            expected[r] = len(src) + (1 if local[r] and not open_loop else 0)
            aggregating[r] = g.aggregating and bool(src)
            for s in src:
                feeds[s].add(r)
    slots: dict[int, int] = {}
    for r, agg in aggregating.items():
        if agg:
            per = len(sources[r]) if memory_model == "per-sender" else 1
            slots[r] = int(topo.memory[r] // (c * per))
            if slots[r] < 1:
                return SimResult(math.inf, {}, 0)
    # multicast tree children per sender
    children: dict[int, dict[int, list[tuple[int, int]]]] = {}
    for s, dests in feeds.items():
        ch: dict[int, set[tuple[int, int]]] = defaultdict(set)
        for r in dests:
            path = topo.paths[s][r]
            for u, v in zip(path, path[1:], strict=False):
                ch[u].add((eidx[(u, v)], v))
        children[s] = {u: sorted(x) for u, x in ch.items()}

    pace = dict(pacing or {})
    counts: dict[tuple[int, int], int] = defaultdict(int)
    done_at: dict[int, float] = {}
    acks: dict[tuple[int, int, int], simpy.Event] = {}
    stats = {"events": 0, "overflows": 0, "queue": 0}
    held: dict[int, int] = defaultdict(int)  # receiver -> slots held now
    peak: dict[int, int] = defaultdict(int)
    started: set[tuple[int, int]] = set()  # (receiver, chunk) whose slot is held

    def ack_event(r: int, s: int, i: int) -> simpy.Event:
        key = (r, s, i)
        if key not in acks:
            acks[key] = env.event()
        return acks[key]

    def size(i: int) -> int:
        return last_bytes if i == n_chunks - 1 else c

    def send_ack(r: int, s: int, i: int, delay: float):
        yield env.timeout(delay)
        ack_event(r, s, i).succeed()

    def hold(r: int, i: int) -> None:
        if aggregating.get(r) and (r, i) not in started:
            started.add((r, i))
            held[r] += 1
            peak[r] = max(peak[r], held[r])
            if held[r] > slots[r]:
                stats["overflows"] += 1

    def contribute(r: int, i: int) -> None:
        hold(r, i)
        counts[(r, i)] += 1
        if counts[(r, i)] == expected[r]:
            del counts[(r, i)]
            if (r, i) in started:
                started.discard((r, i))
                held[r] -= 1
            if i == n_chunks - 1:
                done_at[r] = env.now
            if aggregating.get(r):
                for s in sources[r]:
                    env.process(send_ack(r, s, i, topo.delay[r, s]))
                if local[r]:
                    ack_event(r, r, i).succeed()

    def queued(res: simpy.Resource, i: int) -> None:
        stats["queue"] = max(stats["queue"], len(res.queue) * size(i))

    def deliver(r: int, i: int):
        with ingress[r].request() as req:
            queued(ingress[r], i)
            yield req
            hold(r, i)  # the slot is written from the chunk's first byte
            yield env.timeout(size(i) / rate[r])
        contribute(r, i)

    def hop(s: int, i: int, k: int, v: int):
        stats["events"] += 1
        with links[k].request() as req:
            queued(links[k], i)
            yield req
            yield env.timeout(size(i) / bw[k])
        yield env.timeout(link_lat[k])
        arrive(s, i, v)

    def arrive(s: int, i: int, v: int) -> None:
        if v in feeds[s]:
            env.process(deliver(v, i))
        for k, w in children[s].get(v, ()):
            env.process(hop(s, i, k, w))

    def sender(s: int):
        agg_targets = [r for r in feeds.get(s, ()) if aggregating.get(r)]
        own = aggregating.get(s) and local.get(s)
        for i in range(n_chunks):
            waits = [] if open_loop else [
                ack_event(r, s, i - slots[r]) for r in agg_targets if i >= slots[r]]
            if own and i >= slots[s] and not open_loop:
                waits.append(ack_event(s, s, i - slots[s]))
            if waits:
                yield simpy.AllOf(env, waits)
            if local.get(s) and expected.get(s, 0) > 0 and not open_loop:
                contribute(s, i)
            if s in feeds:
                with egress[s].request() as req:
                    yield req
                    yield env.timeout(size(i) / rate[s])
                arrive(s, i, s)
                if pace.get(s, rate[s]) < rate[s]:
                    yield env.timeout(size(i) / pace[s] - size(i) / rate[s])

    active = set()
    for g in rnd.groups:
        for s in g.senders:
            active.add(s)
    for s in sorted(active):
        env.process(sender(s))
    env.run()
    waiting = [r for r in expected if expected[r] > 0 and r not in done_at and sources[r]]
    if waiting:
        raise RuntimeError(f"simulation deadlocked; receivers {waiting} incomplete")
    finish = max((t for r, t in done_at.items() if sources.get(r)), default=0.0)
    return SimResult(finish, done_at, stats["events"], dict(peak), stats["overflows"],
                     stats["queue"])
