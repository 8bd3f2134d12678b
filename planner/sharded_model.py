"""Analytic time of a sharded round: each phase's flows on the round model's arithmetic.

A phase (``sharded.phases``) is a set of flows. Flows that merge in one sink (the shard owner's
FPGA in a reduce-scatter) form a component: they run at one rate, because the owner's slot frees
only when its last contribution is in. Every other flow (an all-gather multicast) is its own
component. Unlike a plain round, one site sends several flows in a phase (its g - 1 shards), so
ports are shared resources here: the max-min fair filling (``roundmodel._fill``) runs over the
directed links (one copy per flow whose multicast tree uses the link), every site's egress port
(one stream per flow it sends) and every site's FPGA ingress port (one per flow it receives).
Slots, slot cycle P, windows and the last chunk's flight are the round model's own
(``RoundModel.slot_use``, ``_lat``, ``transfer_time``). Phases are barriers, so the
round time is the sum of the phase times.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Hashable
from dataclasses import dataclass, field

import numpy as np

from .flows import Flow, Phase
from .roundmodel import ComponentResult, RoundModel, RoundResult, _fill
from .sharded import ShardedRound, phases


@dataclass
class ShardedResult(RoundResult):
    """A sharded round: the sum of its phases, each a :class:`RoundResult`."""

    phases: list[RoundResult] = field(default_factory=list)
    rates: list[dict[Hashable, float]] = field(default_factory=list)

    def pacing(self) -> dict[tuple[int, Hashable], float]:  # type: ignore[override]
        """(phase index, flow key) -> paced rate (bytes/s), as ``wansim.simulate_round`` takes it."""
        return {(p, key): r for p, rates in enumerate(self.rates) for key, r in rates.items()}


def phase_time(model: RoundModel, phase: Phase) -> tuple[RoundResult, dict[Hashable, float]]:
    """Time of one phase and the paced rate of each flow."""
    topo, n, c = model.topo, model.topo.n, model.chunk
    comps: dict[Hashable, list[Flow]] = {}
    for f in phase.flows:
        if f.dests:
            comps.setdefault(f.tag if f.tag is not None else f.key, []).append(f)
    keys = list(comps)
    n_links = len(topo.directed)
    usage = np.zeros((n_links + 2 * n, len(keys)))
    slots = np.full(len(keys), np.inf)
    period = np.zeros(len(keys))
    latency = np.zeros(len(keys))
    mem_cap = np.full(len(keys), np.inf)
    for ci, key in enumerate(keys):
        merging: dict[int, list[int]] = {}
        for f in comps[key]:
            usage[:n_links, ci] += topo.path_links[f.site, list(f.dests)].any(axis=0)
            usage[n_links + f.site, ci] += 1  # egress port
            for r in f.dests:
                usage[n_links + n + r, ci] += 1  # FPGA ingress port
                latency[ci] = max(latency[ci], model._lat[f.site, r])
                if f.sink(r) in phase.merge:
                    merging.setdefault(r, []).append(f.site)
        for r, src in merging.items():  # the receiver allowing the lowest rate limits K
            s_r, hold = model.slot_use(r, src)
            cap = s_r * c / hold if s_r >= 1 else 0.0
            if cap < mem_cap[ci]:
                mem_cap[ci], slots[ci], period[ci] = cap, s_r, hold
    rate = topo.line_rate
    capacity = np.concatenate([topo.dir_bw / 8, rate, rate])
    x_mem, by_resource = _fill(mem_cap, usage, capacity)
    x_bw, _ = _fill(np.full(len(keys), np.inf), usage, capacity)
    saturated = (capacity - usage @ x_mem) <= capacity * 1e-9
    out: list[ComponentResult] = []
    rates: dict[Hashable, float] = {}
    worst = 0.0
    for ci, key in enumerate(keys):
        senders = sorted({f.site for f in comps[key]})
        if slots[ci] < 1:
            out.append(ComponentResult([ci], 0.0, 0.0, slots[ci], period[ci], latency[ci],
                                       "memory", math.inf, senders))
            worst = math.inf
            continue
        mem_bound = not by_resource[ci] and np.isfinite(mem_cap[ci])
        used = saturated & (usage[:, ci] > 0)
        bound = ("memory" if mem_bound else "link" if used[:n_links].any()
                 else "egress" if used[n_links:n_links + n].any() else "ingress")
        burst, t = model.transfer_time(phase.nbytes, slots[ci], period[ci], x_bw[ci], x_mem[ci],
                                       mem_bound, latency[ci])
        out.append(ComponentResult([ci], x_mem[ci], burst, slots[ci], period[ci], latency[ci],
                                   bound, t, senders))
        rates.update({f.key: burst for f in comps[key]})
        worst = max(worst, t)
    return RoundResult(worst, out), rates


#: per model, phase (bytes, flows, merging sinks) -> result: the optimiser's searches revisit
#: the same cluster phases many times
_CACHE: weakref.WeakKeyDictionary[RoundModel, dict] = weakref.WeakKeyDictionary()


def sharded_round_time(model: RoundModel, rnd: ShardedRound) -> ShardedResult:
    """Sum of the phase times (each phase starts when the previous one has finished)."""
    cache = _CACHE.setdefault(model, {})
    results, rates = [], []
    for ph in phases(rnd, model.nbytes):
        key = (ph.nbytes, frozenset(ph.flows), ph.merge)
        if key not in cache:
            cache[key] = phase_time(model, ph)
        res, r = cache[key]
        results.append(res)
        rates.append(r)
    comps = [c for res in results for c in res.components]
    return ShardedResult(sum(res.time for res in results), comps, phases=results, rates=rates)
