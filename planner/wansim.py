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

Ring all-reduce rounds (no in-network aggregation) are not simulated here. The engine runs the
flows of one phase (``flows.Phase``): a plain round is one phase with one flow per sender, a
sharded round (``sharded.ShardedRound``) its reduce-scatter and all-gather phases in turn.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass, field

import simpy

from .flows import Flow, Phase
from .schedules import Round
from .sharded import ShardedRound, phases
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
    pacing: dict | None = None,
) -> SimResult:
    """Simulate one round; returns when the last receiver holds its last aggregated chunk.

    ``pacing`` maps sender -> bytes/s: the sender spaces its chunks at that rate (the planner's
    max-min fair share, ``RoundResult.pacing()``). Without it senders send at line rate and
    bottleneck queues (FIFO, unbounded) absorb the excess. A sharded round runs its phases one
    after the other (``sharded.phases``); its pacing is keyed by (phase index, flow key).
    """
    if rnd.ring is not None:
        raise NotImplementedError("ring all-reduce rounds are analytic only")
    if isinstance(rnd, ShardedRound):
        total, completion, events = 0.0, {}, 0
        peak: dict[int, int] = {}
        overflows = queue = 0
        for p, ph in enumerate(phases(rnd, nbytes)):
            pace = None if pacing is None else {k: r for (q, k), r in pacing.items() if q == p}
            res = simulate_phase(topo, ph, chunk_bytes, memory_model, pace)
            total += res.time
            events += res.events
            overflows += res.overflows
            queue = max(queue, res.peak_queue)
            for r, k in res.peak_slots.items():
                peak[r] = max(peak.get(r, 0), k)
            completion.update({r: total for r in res.completion})
            if not math.isfinite(res.time):
                break
        return SimResult(total, completion, events, peak, overflows, queue)
    return simulate_phase(topo, round_phase(rnd, nbytes), chunk_bytes, memory_model, pacing)


def round_phase(rnd: Round, nbytes: int) -> Phase:
    """A plain round as one phase: one flow per sender, one sink per receiver (its group)."""
    feeds: dict[int, set[int]] = defaultdict(set)
    local: dict[int, bool] = {}
    merge = set()
    for g in rnd.groups:
        for r in g.receivers:
            src = [s for s in g.senders if s != r]
            local[r] = r in g.senders
            if g.aggregating and src:
                merge.add(("round", r))
            for s in src:
                feeds[s].add(r)
    active = sorted({s for g in rnd.groups for s in g.senders})
    flows = tuple(Flow(s, s, tuple(sorted(feeds[s])), "round", local.get(s, False)) for s in active)
    return Phase("round", nbytes, flows, frozenset(merge))


def simulate_phase(
    topo: Topology,
    phase: Phase,
    chunk_bytes: int,
    memory_model: str = "shared",
    pacing: dict | None = None,
) -> SimResult:
    """Simulate one phase's flows (``flows.Flow``); ``pacing`` maps flow key -> bytes/s."""
    open_loop = memory_model == "skew-only"
    if open_loop and pacing is None:
        raise ValueError("memory_model: skew-only senders are paced open loop; pass pacing "
                         "(RoundResult.pacing())")
    env = simpy.Environment()
    n = topo.n
    nbytes = phase.nbytes
    c = int(min(chunk_bytes, max(nbytes, 1)))
    n_chunks = max(1, math.ceil(nbytes / c))
    last_bytes = nbytes - (n_chunks - 1) * c
    rate = topo.line_rate
    bw = topo.dir_bw / 8
    link_lat = topo.dir_latency  # the link's own latency (a route may be shorter)
    links = [simpy.Resource(env, capacity=1) for _ in topo.directed]
    egress = [simpy.Resource(env, capacity=1) for _ in range(n)]
    ingress = [simpy.Resource(env, capacity=1) for _ in range(n)]

    # sinks: expected contributions, remote sources, slots
    expected: dict[Hashable, int] = defaultdict(int)
    sources: dict[Hashable, list[Flow]] = defaultdict(list)
    locals_: dict[Hashable, list[Flow]] = defaultdict(list)
    site_of: dict[Hashable, int] = {}
    for f in phase.flows:
        for d in f.dests:
            k = f.sink(d)
            expected[k] += 1
            sources[k].append(f)
            site_of[k] = d
        if f.local and not open_loop:  # open loop: the hosts add it as the last remote one lands
            k = f.sink(f.site)
            expected[k] += 1
            locals_[k].append(f)
            site_of[k] = f.site
    slots: dict[Hashable, int] = {}
    for k in expected:
        if k in phase.merge and sources[k]:
            per = len(sources[k]) if memory_model == "per-sender" else 1
            slots[k] = int(topo.memory[site_of[k]] // (c * per))
            if slots[k] < 1:
                return SimResult(math.inf, {}, 0)
    # multicast tree children per flow
    children = {f.key: topo.multicast_tree(f.site, f.dests) for f in phase.flows}

    pace = dict(pacing or {})
    counts: dict[tuple[Hashable, int], int] = defaultdict(int)
    done_at: dict[Hashable, float] = {}
    acks: dict[tuple[Hashable, Hashable, int], simpy.Event] = {}
    stats = {"events": 0, "overflows": 0, "queue": 0}
    held: dict[Hashable, int] = defaultdict(int)  # sink -> slots held now
    peak: dict[Hashable, int] = defaultdict(int)
    started: set[tuple[Hashable, int]] = set()  # (sink, chunk) whose slot is held

    def ack_event(sink: Hashable, flow: Hashable, i: int) -> simpy.Event:
        key = (sink, flow, i)
        if key not in acks:
            acks[key] = env.event()
        return acks[key]

    def size(i: int) -> int:
        return last_bytes if i == n_chunks - 1 else c

    def send_ack(sink: Hashable, flow: Hashable, i: int, delay: float):
        yield env.timeout(delay)
        ack_event(sink, flow, i).succeed()

    def hold(sink: Hashable, i: int) -> None:
        if sink in slots and (sink, i) not in started:
            started.add((sink, i))
            held[sink] += 1
            peak[sink] = max(peak[sink], held[sink])
            if held[sink] > slots[sink]:
                stats["overflows"] += 1

    def contribute(sink: Hashable, i: int) -> None:
        hold(sink, i)
        counts[(sink, i)] += 1
        if counts[(sink, i)] == expected[sink]:
            del counts[(sink, i)]
            if (sink, i) in started:
                started.discard((sink, i))
                held[sink] -= 1
            if i == n_chunks - 1:
                done_at[sink] = env.now
            if sink in slots:
                for f in sources[sink]:
                    env.process(send_ack(sink, f.key, i, topo.delay[site_of[sink], f.site]))
                for f in locals_[sink]:
                    ack_event(sink, f.key, i).succeed()

    def queued(res: simpy.Resource, i: int) -> None:
        stats["queue"] = max(stats["queue"], len(res.queue) * size(i))

    def deliver(sink: Hashable, v: int, i: int):
        with ingress[v].request() as req:
            queued(ingress[v], i)
            yield req
            hold(sink, i)  # the slot is written from the chunk's first byte
            yield env.timeout(size(i) / rate[v])
        contribute(sink, i)

    def hop(f: Flow, i: int, k: int, v: int):
        stats["events"] += 1
        with links[k].request() as req:
            queued(links[k], i)
            yield req
            yield env.timeout(size(i) / bw[k])
        yield env.timeout(link_lat[k])
        arrive(f, i, v)

    def arrive(f: Flow, i: int, v: int) -> None:
        if v in f.dests:
            env.process(deliver(f.sink(v), v, i))
        for k, w in children[f.key].get(v, ()):
            env.process(hop(f, i, k, w))

    def sender(f: Flow):
        s = f.site
        targets = [f.sink(d) for d in f.dests] + ([f.sink(s)] if f.local else [])
        targets = [k for k in targets if k in slots]
        for i in range(n_chunks):
            waits = [] if open_loop else [
                ack_event(k, f.key, i - slots[k]) for k in targets if i >= slots[k]]
            if waits:
                yield simpy.AllOf(env, waits)
            if f.local and not open_loop:
                contribute(f.sink(s), i)
            if f.dests:
                with egress[s].request() as req:
                    yield req
                    yield env.timeout(size(i) / rate[s])
                arrive(f, i, s)
                if pace.get(f.key, rate[s]) < rate[s]:
                    yield env.timeout(size(i) / pace[f.key] - size(i) / rate[s])

    for f in phase.flows:
        env.process(sender(f))
    env.run()
    waiting = [k for k in expected if sources[k] and k not in done_at]
    if waiting:
        raise RuntimeError(f"simulation deadlocked; sinks {waiting} incomplete")
    completion: dict[int, float] = {}
    for k, t in done_at.items():
        if sources[k]:
            completion[site_of[k]] = max(completion.get(site_of[k], 0.0), t)
    finish = max(completion.values(), default=0.0)
    site_peak: dict[int, int] = {}  # per site: the most slots one of its sinks held at once
    for k, m in peak.items():
        site_peak[site_of[k]] = max(site_peak.get(site_of[k], 0), m)
    return SimResult(finish, completion, stats["events"], site_peak, stats["overflows"],
                     stats["queue"])
