"""One exchange of the driver: send the chunks of a ring (or packet buffer), collect their results.

Ties the parts together: :class:`~wanreduce.host.send_window.SendWindow` (what to send and
resend, when), :class:`~wanreduce.host.result_filter.ResultFilter` (which datagrams are our
results) and the client's :class:`~wanreduce.host.rtt.RttEstimator`. Used by
``AggregatorClient._run``. Receiving is per batch, not per datagram: each ``UDP_GRO`` batch is
filtered at once (``ResultFilter.accept``), its accepted payloads go to ``pk.take_many``
(:class:`~wanreduce.host.chunk_ring.ChunkRing` dequantises them straight into the output
tensor) and the window completes them in one call (``SendWindow.complete_many``).
"""

from __future__ import annotations

import math
import select
import time
from typing import TYPE_CHECKING

import numpy as np

from .chunk_probe import ChunkProbe, rows_per_message
from .result_filter import ResultFilter, blocks
from .send_window import SendWindow
from .transport import MAX_DATAGRAM

if TYPE_CHECKING:
    from .chunk_ring import ChunkRing, WholeBuffer
    from .driver import AggregatorClient
    from .wan_recovery import WanRecovery


def sack_step(probe: ChunkProbe, win: SendWindow, wan: WanRecovery | None, now: float, *,
              job: int, group: int, round_id: int, first: int) -> float:
    """One pass of loss recovery by probes: take the answers (resending what they show lost;
    with ``wan``, NACKing the other members' contributions they show lacking), give up overdue
    ones, and on a stall post the next round; returns when to look again. Used by every
    exchange and by the owner's own stream of a sharded reduce-scatter."""
    for a in probe.poll(now):
        win.probe_answer(a, now)
        if wan is not None:  # other members' contributions it lacks: NACK them
            wan.missing(a, win, job=job, group=group, round_id=round_id, first=first)
    if probe.unsupported:  # an aggregator without the probe registers (an older core):
        win.sack = False  # recover as without CONTROL
    lat = probe.latency  # an overdue answer: twice the latest answer's latency, a gap at least
    wait = win.rto() if lat is None else min(win.rto(), max(win.gap(), 2 * lat))
    win.probe_unanswered(probe.expire(now, wait))
    rows, wake = win.probe_due(now, probe.busy)
    if rows is not None:
        probe.post(rows, now)
    return min(wake, now + wait) if probe.busy else wake


def run_exchange(client: AggregatorClient, pk: ChunkRing | WholeBuffer, *, job: int, group: int, round_id: int,
                 exp: int, w: int) -> np.ndarray:
    """Send every chunk of ``pk`` within the window until each has its result; returns the
    result flags. Fails through ``client._fail`` after ``client.timeout`` s without a new
    result or a chunk resent more than ``client.max_retries`` times."""
    n = len(pk)
    stats = client.stats
    stats.chunks += n
    transport = client.transport
    # A resend waits at most a quarter of the timeout, so a stall is retried before the call
    # gives up however far the timer backed off.
    mono = time.monotonic
    ctl = client.control  # with it, loss recovery asks the aggregator what it lacks (SACK)
    win = SendWindow(pk, w, transport, client.aggregator, client.timer,
                     rto_cap=client.timeout / 4, max_retries=client.max_retries, now=mono(),
                     sender=None if ctl is None else client.sender_id,
                     rtt_hint=None if ctl is None else ctl.timer.srtt or ctl.timer.rto / 2,
                     probe_floor=client.probe_floor)
    probe = None if ctl is None else ChunkProbe(ctl, job, pk.first, rows_per_message(client.elements))
    socks = [transport] if probe is None else [transport, probe]
    client.early_copies.clear()  # kept by the previous exchange for a phase that did not come
    filt = ResultFilter(job=job, group=group, round_id=round_id, exp=exp,
                        first=pk.first, counts=pk.counts,
                        done=win.done, source=client.result_source,
                        session=client.session, keep=client.early_copies)
    take = pk.take_many
    rflags = np.zeros(n, np.uint8)
    rbuf = client._rbuf
    rmv = memoryview(rbuf)
    cap = len(rbuf) - MAX_DATAGRAM  # room for one more batch below this
    recv = transport.recv_batch
    silence = client.timeout
    refill = max(1, w // 4)  # results that free enough room to send before receiving more
    wan = client.wan  # WAN-link loss recovery (host/wan_recovery.py), if enabled

    def flush() -> None:  # counters into the client's stats (before a failure is raised, too)
        client._ever_heard |= filt.heard
        client.probe_floor = win.probe_floor
        stats.ignored += filt.ignored
        stats.foreign += filt.foreign
        stats.malformed += filt.malformed
        stats.stray += filt.stray
        stats.early_copies += filt.kept
        stats.retransmissions += win.retransmissions
        stats.fast_resends += win.fast_resends
        stats.timer_resends += win.timer_resends
        stats.recovery_resends += win.recovery_resends
        stats.sack_resends += win.sack_resends
        stats.probes += win.probes
        filt.foreign = filt.malformed = filt.stray = filt.duplicate = filt.kept = 0
        win.retransmissions = 0
        win.fast_resends = win.timer_resends = win.recovery_resends = win.sack_resends = win.probes = 0

    def sack(now: float) -> float:
        return sack_step(probe, win, wan, now, job=job, group=group, round_id=round_id,
                         first=pk.first)

    def fail(why: str) -> None:
        dropped = [f"{v} {k}" for k, v in (("foreign", filt.foreign), ("malformed", filt.malformed),
                                            ("stray", filt.stray)) if v]
        if dropped:  # what was received and not taken: a clue to a misconfiguration
            why += f" (ignored datagrams: {', '.join(dropped)})"
        if wan is not None and win.base < n:  # what the WAN-link recovery asked for
            why += wan.describe(job, (pk.first + win.base) & 0xFFFFFFFF)
        flush()
        client._fail(pk, win.done, win.nxt, job, round_id, why)

    try:
        while win.remaining:
            sent = win.nxt
            win.send_new(mono())
            if wan is not None and win.nxt > sent:  # kept for other members' NACKs
                wan.record(job, pk, sent, win.nxt)
            progressed = 0  # results taken in this pass

            def receive(nbytes: int, seg: int, at: int = 0) -> None:
                """Take the results in ``nbytes`` of ``rbuf[at:]``, in datagrams of ``seg``."""
                nonlocal progressed
                arrived = mono()  # every datagram of a GRO batch arrived together
                for off, count, size in blocks(nbytes, seg):  # the full ones, a shorter last one
                    a = filt.accept(rbuf, at + off, count, size, sent=win.nxt)
                    if len(a.index):
                        take(a.index, a.flags, a.payload, a.run)  # before the next recv
                        rflags[a.index] = a.flags
                        win.complete_many(a.index, arrived, a.run)
                        progressed += len(a.index)

            # GRO batches waiting back to back (datagrams of one size from the aggregator) are
            # received one after the other into rbuf and taken as one block: a few NumPy calls
            # per RX_BATCHES batches, not per batch
            held = seg0 = 0
            while (got := recv([rmv[held:]])) is not None:
                ktot, seg, src = got  # a GRO batch: datagrams of seg bytes (seg == ktot: one)
                if not filt.from_source(ktot, seg, src):
                    continue
                if held and seg != seg0:
                    receive(held, seg0)
                    receive(ktot, seg, held)
                    held = 0
                elif seg > 0 and ktot % seg == 0 and held + ktot <= cap:
                    held += ktot
                    seg0 = seg
                else:
                    receive(held + ktot, seg)
                    held = 0
                if progressed >= refill:  # a quarter of the window is free: send before
                    break  # draining more, so the aggregator works while we take the rest
            if held:
                receive(held, seg0)
            if progressed:
                win.progressed(mono())
                if probe is not None and probe.busy:
                    sack(mono())
                continue
            # Idle: retransmit what is lost, then wait for a datagram or the next deadline.
            now = mono()
            probe_due = math.inf if probe is None else sack(now)
            due, over = win.resend_due(now)
            if over is not None:
                fail(f"after {client.max_retries} retries without progress")
            if now - win.last_progress >= silence:
                fail(f"within {client.timeout:g} s")
            select.select(socks, [], [], max(0.0, min(due, probe_due, win.last_progress + silence) - now))
    finally:
        flush()
    stats.datagrams_sent += n
    stats.results += n
    return rflags
