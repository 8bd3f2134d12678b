"""A system-level traffic scenario for the whole core, with its golden-model expectations.

The scenario is a list of phases. Within a phase the frames of all ports race each other
through the merger in an order the bench does not control, so every phase is built such that
the outcome of each contribution does not depend on that order (duplicates, conflicting
chunks and retransmissions go into later phases than what they collide with). The golden
model processes each phase's contributions in generation order and gives the exact results,
outcome counters and per-port drop counters the RTL must report.

Covered: 2..32 contributors spread over the network ports and the host port (sender 0 is the
local site), random element counts and exponents, chunks completing out of order, in-order
and on-completion release, two jobs sharing the core with separate slot regions, two groups,
non-members, unconfigured groups and jobs, every ingress drop reason on every port,
saturation, lost-result recovery (retransmission after release), duplicates, mismatches,
slot-busy, stale, out-of-window and a window reset.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from wanreduce import regs, wire
from wanreduce.fixedpoint import qmax
from wanreduce.model import (
    AggregatorModel,
    Drop,
    Message,
    Outcome,
    PortConfig,
    ReleaseMode,
    Result,
    parse_frame,
)
from wanreduce.sim import frames
from wanreduce.sim.frames import TxFrame

SITE_ID = 5
RESULT_IP = wire.ip_to_int("239.2.2.2")
RESULT_PORT = 40000


@dataclass
class Phase:
    name: str
    control: list[tuple[bool, int, int]] = field(default_factory=list)  # before the traffic
    frames: list[list[TxFrame]] = field(default_factory=list)  # per port; host port last
    results: list[Result] = field(default_factory=list)  # what the model released
    ordered: bool = False  # in-order release: each job's results must come in this order
    outcomes_after: int = 0  # model: contributions processed once this phase has drained
    # model, once this phase has drained: each job's head, and the probe's answer (JOBj_PROBE_BITMAP)
    # for each (job, chunk) from one behind its head to its window's end
    heads: list[int] = field(default_factory=list)
    probes: dict[tuple[int, int], int] = field(default_factory=dict)


@dataclass
class Scenario:
    ports: int
    senders: int
    phases: list[Phase]
    model: AggregatorModel
    port_counters: list[Counter]  # per port: "frames_in" and Drop reasons (excl. control frames)
    elements: int

    @property
    def all_ports(self) -> int:
        return self.ports + 1


def port_of(sender: int, ports: int) -> int:
    """Sender 0 is the local site (host port, index ``ports``); the others share the network ports."""
    return ports if sender == 0 else (sender - 1) % ports


def result_frame(r: Result) -> bytes:
    """The exact frame the core must emit for result ``r`` with the scenario's configuration."""
    hdr = wire.AggHeader(
        wire.MsgType.RESULT, job_id=r.job_id, round_id=r.round_id, chunk=r.chunk,
        sender_id=SITE_ID, group_id=r.group_id, scale_exp=r.scale_exp,
        element_count=len(r.payload), flags=int(r.flags), session=r.session,
    )
    addr = wire.L2L3(
        eth_dst=regs.DEFAULT_RESULT_MAC, eth_src=regs.DEFAULT_LOCAL_MAC, ip_src=regs.DEFAULT_LOCAL_IP,
        ip_dst=RESULT_IP, udp_sport=wire.DEFAULT_UDP_PORT, udp_dport=RESULT_PORT, ip_id=0,
    )
    return wire.frame(hdr, r.payload, addr)


def _check_regions(slots: int, bases: Sequence[int], log2_window: int) -> None:
    """The two jobs' regions (``bases``, a window of 2**``log2_window``) inside S and apart: the
    scenario's chunks of one job must never meet the other's slots."""
    if not 2 <= log2_window <= (slots // 2).bit_length() - 1:
        raise ValueError(f"log2_window must be 2..{(slots // 2).bit_length() - 1} (two regions in "
                         f"{slots} slots), got {log2_window}")
    if len(bases) != 2 or not all(0 <= b < slots for b in bases):
        raise ValueError(f"bases must be two slots in 0..{slots - 1}, got {list(bases)}")
    gap = (bases[1] - bases[0]) % slots
    if not (1 << log2_window) <= gap <= slots - (1 << log2_window):
        raise ValueError(f"bases: the regions of {1 << log2_window} slots at {list(bases)} overlap")


def build(*, ports: int, senders: int, slots: int, elements: int, groups: int, jobs: int,
          seed: int = 1, chunks_per_job: int = 4, bases: Sequence[int] | None = None,
          log2_window: int | None = None, probe_span: int | None = None) -> Scenario:
    """The scenario (module docstring). Job j's region is ``bases[j]`` with 2**``log2_window``
    slots (default: S/2 each, side by side from slot 0); large S puts them where chunks cross
    the high slot bits and wrap at S. ``probe_span``: each phase probes the chunks from one
    behind each head to ``probe_span`` ahead and every chunk sent to the job so far, instead of
    the whole window (at S 32 768 a window is 16 384 probes)."""
    if not 2 <= senders <= 32:
        raise ValueError("senders must be 2..32")
    if jobs < 2 or slots < 8:
        raise ValueError("the scenario needs two jobs and at least 8 slots (two regions of >= 4)")
    log2w = (slots // 2).bit_length() - 1 if log2_window is None else log2_window
    window = 1 << log2w
    bases = [0, window] if bases is None else list(bases)
    _check_regions(slots, bases, log2w)
    if probe_span is not None and probe_span < 1:
        raise ValueError(f"probe_span must be >= 1, got {probe_span}")
    rng = np.random.default_rng(seed)
    model = AggregatorModel(slots=slots, elements=elements, groups=groups, jobs=jobs)
    cfg = PortConfig(local_mac=frames.CORE_MAC, local_ip=frames.CORE_IP, max_elements=elements,
                     elements=elements)
    counters = [Counter() for _ in range(ports + 1)]
    phases: list[Phase] = []
    lim = qmax(senders)

    # ---- configuration ----
    all_members = (1 << senders) - 1
    sub = sorted(rng.choice(senders, size=max(2, senders // 2), replace=False).tolist())
    sub_members = sum(1 << s for s in sub)
    setup = [(True, regs.SITE_ID, SITE_ID), (True, regs.RESULT_IP, RESULT_IP),
             (True, regs.RESULT_UDP_PORT, RESULT_PORT), (True, regs.group(0), all_members)]
    model.set_group(0, all_members)
    if groups >= 2:
        setup.append((True, regs.group(1), sub_members))
        model.set_group(1, sub_members)
    job_ids = [0, 1]
    for j in job_ids:
        base = bases[j]
        setup.append((True, regs.job_cfg(j), regs.pack_job_cfg(enabled=True, log2_window=log2w, base=base)))
        model.set_job(j, enabled=True, base=base, log2_window=log2w)

    def close_phase() -> None:
        if phases:
            ph = phases[-1]
            ph.outcomes_after = sum(model.counters.values())
            ph.heads = [j.head for j in model.job_table]
            ph.probes = {(j, c): model.probe_bitmap(j, c) for j, job in enumerate(model.job_table)
                         for c in probed(j, job.head, job.window)}

    def probed(j: int, head: int, window: int) -> list[int]:
        """The chunks of job ``j`` whose probe a phase's end checks (see ``probe_span``)."""
        span = window if probe_span is None else min(window, probe_span)
        near = [(head + d) & 0xFFFFFFFF for d in range(-1, span + 1)]
        return near if probe_span is None else near + sorted(sent[j] - set(near))

    sent: defaultdict[int, set[int]] = defaultdict(set)  # job -> chunks sent to it so far

    def members_of(g: int) -> list[int]:
        return [s for s in range(senders) if (model.group_table[g] >> s) & 1]

    def new_phase(name: str, control=None, ordered=False) -> Phase:
        close_phase()
        ph = Phase(name, control or [], [[] for _ in range(ports + 1)], [], ordered)
        phases.append(ph)
        return ph

    def send(ph: Phase, sender: int, chunk: int, payload, *, job=0, group=0, scale=0, round_id=0,
             port: int | None = None) -> None:
        # each job's chunks carry a session of their own: the core must keep and return it
        data = frames.contribution(sender=sender, chunk=chunk, payload=payload, job=job, group=group,
                                   scale=scale, round_id=round_id, multicast=bool(rng.integers(2)) or sender != 0,
                                   session=0xC500 + job)
        p = port_of(sender, ports) if port is None else port
        ph.frames[p].append(TxFrame(data))
        counters[p]["frames_in"] += 1
        msg = parse_frame(data, cfg)
        assert isinstance(msg, Message)
        sent[job].add(chunk & 0xFFFFFFFF)
        _, res = model.contribute(msg)
        ph.results += res

    def send_t(ph: Phase, t: tuple) -> None:
        s, c, v, j, g, sc = t
        send(ph, s, c, v, job=j, group=g, scale=sc)

    def send_bad(ph: Phase, p: int, reason: Drop) -> None:
        good = frames.contribution(sender=1, chunk=0, payload=rng.integers(-9, 9, 3))
        tx = frames.malformed(reason, good, rng, elements)
        ph.frames[p].append(tx)
        counters[p]["frames_in"] += 1
        counters[p][reason] += 1

    def values(count: int, n: int, saturate: bool = False) -> np.ndarray:
        if saturate:
            return np.full(count, wire.INT32_MAX // 2 + 1 + int(rng.integers(0, 1000)), np.int32)
        return rng.integers(-lim, lim + 1, count).astype(np.int32)

    chunk_meta: dict[tuple[int, int], tuple[int, int, int]] = {}  # (job, chunk) -> (group, count, scale)

    def full_chunk(ph: Phase, job: int, chunk: int, group: int, *, saturate=False, skip=()) -> list:
        count = int(rng.integers(1, elements + 1))
        scale = int(rng.integers(-20, 40))
        chunk_meta[(job, chunk)] = (group, count, scale)
        pending = []
        for s in members_of(group):
            if s in skip:
                continue
            pending.append((s, chunk, values(count, senders, saturate), job, group, scale))
        return pending

    # ---- phase 1: in-order release, two jobs, two groups, every drop reason, rejects ----
    ph = new_phase("in-order", control=setup, ordered=True)
    k = min(window - 1, chunks_per_job)  # chunk k's slot stays distinct from chunk 0's
    pending = []
    for j in job_ids:
        for c in range(k):
            g = (c % 2) if groups >= 2 else 0
            pending += full_chunk(ph, j, c, g, saturate=(j == 0 and c == 1))
    outsider = next((s for s in range(senders) if s not in sub), None) if groups >= 2 else None
    if outsider is not None:
        pending.append((outsider, 1, values(chunk_meta[(0, 1)][1], senders), 0, 1, chunk_meta[(0, 1)][2]))
    pending.append((1, 0, values(4, senders), 0, groups, 0))  # group outside the table
    if groups >= 3:
        pending.append((1, 0, values(4, senders), 0, groups - 1, 0))  # configured as empty
    pending.append((1, 0, values(4, senders), jobs, 0, 0))  # job outside the table
    if jobs > len(job_ids):
        pending.append((1, 0, values(4, senders), jobs - 1, 0, 0))  # job present but disabled
    for i in rng.permutation(len(pending)):
        s, c, v, j, g, sc = pending[i]
        send(ph, s, c, v, job=j, group=g, scale=sc)
    for p in range(ports + 1):
        for reason in Drop:
            send_bad(ph, p, reason)
    for p in range(ports + 1):
        order = rng.permutation(len(ph.frames[p]))
        ph.frames[p] = [ph.frames[p][i] for i in order]

    # ---- phase 2: lost-result recovery, a partial chunk, out of window ----
    ph = new_phase("resend")
    g0, n0, sc0 = chunk_meta[(0, 0)]
    send(ph, members_of(g0)[-1], 0, values(n0, senders), group=g0, scale=sc0)  # retransmission
    pending_k = full_chunk(ph, 0, k, 0)
    send_t(ph, (pending_k[0]))
    send(ph, 1, k + window + 1, values(3, senders), group=0)  # beyond head + window

    # ---- phase 3: duplicate and mismatch against the partial chunk ----
    ph = new_phase("duplicate")
    s0, c0, v0, j0, gg, scx = pending_k[0]
    send(ph, s0, c0, v0, job=j0, group=gg, scale=scx)  # duplicate
    if len(pending_k) > 1:
        s1 = pending_k[1][0]
        send(ph, s1, c0, pending_k[1][2], job=j0, group=gg, scale=scx + 1)  # mismatched exponent

    # ---- phases 4-7: release on completion: busy, out-of-order completion, stale ----
    model.release = ReleaseMode.ON_COMPLETION
    jb = job_ids[-1]
    x = k + window
    ph = new_phase("completion", control=[(True, regs.CTRL, regs.CTRL_RELEASE_ON_COMPLETION)])
    pending_x = full_chunk(ph, jb, x, 0)
    send_t(ph, (pending_x[0]))
    ph = new_phase("busy")
    send(ph, 1, x + window, values(2, senders), job=jb, group=0)  # slot holds unfinished x
    rest = full_chunk(ph, jb, x + 1, 0) + full_chunk(ph, jb, x + 2, 0)
    for i in rng.permutation(len(rest)):
        send_t(ph, (rest[i]))
    ph = new_phase("complete")
    for t in pending_x[1:]:
        send_t(ph, (t))
    for t in pending_k[1:]:
        send_t(ph, (t))
    ph = new_phase("stale")
    send(ph, 1, x - window, values(2, senders), job=jb, group=0)  # older than the slot's chunk

    # ---- phase 8: back to in-order, window reset of job 0 ----
    ph = new_phase("window-reset", control=[(True, regs.CTRL, 0), (True, regs.job_head(0), 1000)],
                   ordered=True)  # (the previous phase's end state taken before the model's reset)
    model.release = ReleaseMode.IN_ORDER
    model.reset_window(0, head=1000)
    rest = full_chunk(ph, 0, 1001, 0) + full_chunk(ph, 0, 1000, 0)
    for i in rng.permutation(len(rest)):
        send_t(ph, (rest[i]))
    send(ph, 1, 999, values(2, senders), group=0)  # behind the new head: stale

    close_phase()
    return Scenario(ports, senders, phases, model, counters, elements)


def expected_counters(sc: Scenario) -> dict[int, int]:
    """Register address -> value the core must report once every phase has drained
    (host-port frames_in excludes control frames; the bench adds those it sent)."""
    out = {}
    for p in range(sc.all_ports):
        out[regs.port_frames_in(p)] = sc.port_counters[p]["frames_in"]
        for r in Drop:
            out[regs.port_drops(p, r)] = sc.port_counters[p][r]
    for o in Outcome:
        out[regs.outcome_counter(o)] = sc.model.counters[o]
    out[regs.RESULTS_OUT] = sc.model.results_out
    return out
