"""WAN-link loss recovery: a receiver-driven NACK between the hosts of a group's member sites.

The driver's own recovery (probes and resends, docs/host.md "Loss recovery") covers the path
between a host and its own site's aggregator. A copy of a contribution lost on the WAN on its
way to *another* member's aggregator is not covered: the sender's own aggregator completes the
chunk, so the sender is done and never resends. Here, as in reliable multicast (receiver-driven
NACKs), the receiver asks:

* **Requester** (``missing``, called with each probe answer of a stalled exchange): for a chunk
  our aggregator holds our contribution to but not yet released, a member whose bit its
  contributor bitmap lacks is missing once a later chunk of that member's has arrived (members
  send in order over FIFO paths: a sequence gap) or, once no result came for the RTO estimate
  (SRTT + 4 RTTVAR, not the backed-off timer), at that member's first missing chunk (its lost
  last chunk, which no later one exposes: the tail); each such
  member is sent a NACK naming the chunks (``wire.nack_datagram``, to the aggregator address:
  the network carries it to that member's site). The chunk is left to be probed again
  (``SendWindow.held`` cleared, probes at least every half ``interval``), and re-NACKed while it
  stays incomplete after ``member_interval`` (the member's measured NACK round trip; two smoothed
  round trips of ours before one is measured), backed off per try, at most a sixteenth of the
  timeout apart (a NACK or its resend may be lost too, and many tries must fit in the timeout;
  ``_ask``). A call that fails anyway says in its ChunksMissing what was asked (``describe``).
  The sharded all-gather's receive-only streams NACK lost copies the same way
  (``missing_copies``).
* **Responder** (a thread): every contribution this client sends is copied into a log of the
  job's and group's last W chunks (``record``; W = the job's slot window: a member can be at most W - 1
  chunks ahead of a chunk another aggregator still lacks, docs/protocol.md "NACK"), kept at most
  ``linger`` s (10 x the driver's timeout: a call may last many timeouts as long as it
  progresses). A NACK naming us is answered by re-sending the logged datagrams (RETRANSMIT flag)
  to the aggregator address, i.e. multicast to the group again: aggregators that hold it count a
  duplicate (or resend a result the hosts ignore), the one missing it completes the chunk.

Forged or stray NACKs (another source than the aggregator address, malformed, another target or
session, chunks not in the log or of another group, a chunk resent less than ``dedupe`` ago:
one multicast resend serves every member that lacked it) are counted and ignored: a NACK can only make us resend what we really sent, at a bounded rate.
"""

from __future__ import annotations

import math
import select
import socket
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from wanreduce import regs, wire

from .control import ControlTimeout
from .rtt import RttEstimator

if TYPE_CHECKING:
    from .chunk_probe import ProbeAnswer
    from .chunk_ring import ChunkRing, WholeBuffer
    from .driver import AggregatorClient
    from .send_window import SendWindow

_FLAGS = next(f.agg_offset for f in wire.AGG_FIELDS if f.name == "flags")
_GROUP = next(f.agg_offset for f in wire.AGG_FIELDS if f.name == "group_id")
_RETRANSMIT = int(wire.Flags.RETRANSMIT)
_U32 = 0xFFFFFFFF


@dataclass
class NackStats:
    """Counters of one client's WAN recovery (cumulative)."""

    nacks_sent: int = 0  # NACK datagrams sent (requester)
    nacked_chunks: int = 0  # (chunk, member) pairs asked for
    nacked_by_gap: int = 0  # of which: a later chunk of the member's had arrived
    nacked_copies: int = 0  # of which: sharded all-gather copies asked of their owner
    tail_reasks: int = 0  # tail NACKs (a stall's guess) asked again
    tail_reasks_early: int = 0  # of which sooner than the RTO (at most timeout / 16) after the
    # previous try: 0 when paced as issue 15's fix requires, whatever the load
    nacks_received: int = 0  # well-formed NACKs naming us (responder)
    nack_resends: int = 0  # contributions re-sent for them
    nack_unknown: int = 0  # chunks named that are not in the log (too old, never sent, forged)
    nack_repeats: int = 0  # chunks named again within ``dedupe`` of their resend (not resent)
    nack_ignored: int = 0  # NACK datagrams ignored: foreign source, malformed, not for us


@dataclass(slots=True)
class Asked:
    """What was asked of one member for one chunk: one record per (job, chunk, member)."""

    last: float  # when the latest NACK naming it left
    tries: int  # NACKs naming it so far
    timed: float | None  # when the only one left, while its copy's arrival times it (Karn's
    # rule: None once it was asked again, or once that sample was taken)


class _Log:
    """The last ``cap`` contribution datagrams of one job, by chunk number."""

    def __init__(self, cap: int, width: int) -> None:
        self.buf = np.zeros((cap, width), np.uint8)
        self.chunk = np.full(cap, -1, np.int64)
        self.size = np.zeros(cap, np.int32)
        self.sent = np.zeros(cap)
        self.resent = np.full(cap, -math.inf)

    def grown(self, cap: int) -> _Log:
        """A log of ``cap`` entries holding this one's (each in its slot for the new size)."""
        new = _Log(cap, self.buf.shape[1])
        old = np.flatnonzero(self.chunk >= 0)
        slot = self.chunk[old] % cap
        for name in ("buf", "chunk", "size", "sent", "resent"):
            getattr(new, name)[slot] = getattr(self, name)[old]
        return new


class WanRecovery:
    """NACK requester and responder of one :class:`AggregatorClient` (module docstring)."""

    def __init__(self, client: AggregatorClient, *, linger: float | None = None) -> None:
        self.client = client
        # a contribution may be asked for as long as a call lasts, and a call only has to make
        # progress once per timeout: the time bound is loose, the ring of W chunks the real one
        self.linger = 10 * client.timeout if linger is None else linger
        self.stats = NackStats()
        self._logs: dict[tuple[int, int], _Log] = {}  # (job, group) -> what we sent
        self._members: dict[int, int] = {}
        self._asked: dict[tuple[int, int, int], Asked] = {}  # (job, chunk, member) -> record
        self._timed = 0  # records whose ``timed`` is set (the probe path skips looking if none)
        self._paths: dict[int, RttEstimator] = {}  # member -> NACK-to-copy round trips
        self._exchange: tuple[int, int] | None = None  # (job, first chunk) of the rows below
        self._latest: dict[int, int] = {}  # member -> highest row held (this exchange)
        self._moved: dict[int, float] = {}  # member -> when its highest row last rose
        self._since = 0.0  # when this exchange's first answer came
        self._lock = threading.Lock()
        self._closed = threading.Event()
        host = client.aggregator[0] if client.aggregator[0] in ("127.0.0.1", "localhost") else ""
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, 0))
        self.sock.settimeout(0)
        hello = wire.Nack(client.sender_id, (), 0, 0, 0, client.sender_id, client.session)
        self.sock.sendto(wire.nack_datagram(hello), client.aggregator)  # where we listen
        self._thread = threading.Thread(target=self._serve, name="wan-recovery", daemon=True)
        self._thread.start()

    def interval(self, timer: RttEstimator | None = None) -> float:
        """Least time between two NACKs of one chunk: two round trips (``timer``: the path's
        estimator, default the client's), at most timeout / 16 (a NACK and its resend cross a
        path twice: at 5 % loss per link on a 4-hop path a third of the tries fail, so many
        must fit in the timeout)."""
        c = self.client
        t = c.timer if timer is None else timer
        rtt = t.srtt if t.srtt is not None else t.rto
        return max(c.min_rto, min(2 * rtt, c.timeout / 16))

    def member_interval(self, member: int) -> float:
        """The re-NACK interval toward ``member``: its measured NACK round trip (a NACK's first
        try until our aggregator was seen holding the copy: the NACK's and the resend's
        crossings of the path and a probe, RFC 6298's estimate of those samples, at most
        timeout / 16); before the first sample, :meth:`interval`. Not the client's own SRTT
        alone: that is the round trip of *results*, which for a site that contributes last is
        a loopback's (milliseconds) and has nothing to do with the path to a member (issue 15:
        80 NACKs of one chunk in 1.5 s, one every 20 ms, before its first resend could come)."""
        path = self._paths.get(member)
        if path is None or path.srtt is None:
            return self.interval()
        c = self.client
        return max(c.min_rto, min(path.estimate, c.timeout / 16))

    def dedupe(self) -> float:
        """Least time between two resends of one chunk: NACKs of several members for one loss
        come within the spread of their delays; a later one is a new request."""
        return max(self.client.min_rto, self.interval() / 2)

    # ---- responder: the log of what we sent ----
    def record(self, job: int, pk: ChunkRing | WholeBuffer, lo: int, hi: int, *,
               keep: int | None = None) -> None:
        """Chunks ``lo .. hi - 1`` of ``pk`` were just sent for the first time: log them, one
        log per job and group (a sharded site sends the same chunk numbers in several groups at
        once). ``keep``: the chunks of the group's log (default: the job's window W; an
        open-loop all-gather cast keeps its whole shard, a shard shorter than W needs no more:
        host/sharded_allreduce.py); a log grows when asked for more, keeping what it holds."""
        src = pk.buf
        self._group_members(pk.group)  # read now, before any probe of the exchange is posted
        cap = self.client.job_window(job) if keep is None else max(1, keep)
        with self._lock:
            log = self._logs.get((job, pk.group))
            if log is None or log.buf.shape[1] != src.shape[1]:
                log = self._logs[(job, pk.group)] = _Log(cap, src.shape[1])
            elif cap > len(log.chunk):
                log = self._logs[(job, pk.group)] = log.grown(cap)
            idx = np.arange(lo, hi)
            chunks = (pk.first + idx) & _U32
            slot = chunks % len(log.chunk)
            log.buf[slot] = src[idx % len(src)]
            log.chunk[slot] = chunks
            log.size[slot] = wire.AGG_HEADER_BYTES + 4 * np.asarray(pk.counts)[idx]
            log.sent[slot] = time.monotonic()
            log.resent[slot] = -math.inf

    def _serve(self) -> None:
        """Answer NACKs until closed."""
        while not self._closed.is_set():
            try:
                ready, _, _ = select.select([self.sock], [], [], 0.2)
            except (OSError, ValueError):
                return
            if not ready:
                continue
            try:
                data, src = self.sock.recvfrom(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                if self._closed.is_set():
                    return
                continue
            self.answer(data, src)

    def answer(self, data: bytes, src: tuple[str, int]) -> int:
        """Handle one datagram from ``src``; returns how many contributions it made us resend."""
        c, st = self.client, self.stats
        nack = wire.parse_nack(data) if src == c.result_source else None
        if nack is None or nack.target != c.sender_id or nack.session != c.session:
            st.nack_ignored += 1
            return 0
        st.nacks_received += 1
        now, gap = time.monotonic(), self.dedupe()
        out = []
        with self._lock:
            log = self._logs.get((nack.job, nack.group))
            for ch in nack.chunks:
                k = ch % len(log.chunk) if log is not None else 0
                if (log is None or log.chunk[k] != ch or now - log.sent[k] > self.linger
                        or log.buf[k, _GROUP] != nack.group):
                    st.nack_unknown += 1
                elif now - log.resent[k] < gap:
                    st.nack_repeats += 1
                else:
                    log.resent[k] = now
                    row = bytearray(log.buf[k, : log.size[k]].tobytes())
                    row[_FLAGS] |= _RETRANSMIT
                    out.append(bytes(row))
        for d in out:
            c.transport.send_to(d, c.aggregator)
        st.nack_resends += len(out)
        return len(out)

    # ---- requester ----
    def missing(self, a: ProbeAnswer, win: SendWindow, *, job: int, group: int, round_id: int,
                first: int) -> None:
        """Our aggregator's answer ``a`` about rows of an exchange (chunk = first + row): NACK the
        members whose contributions it lacks where it holds ours (module docstring). A member's
        copy of a chunk is taken as lost when a later chunk of its own has arrived (a member
        sends in order and a path is FIFO: a sequence gap), or, at the member's first missing
        chunk, when no result came for the RTO estimate (the tail: nothing later shows the gap;
        a member merely slow or queued behind a busy link would not stall us that long)."""
        c = self.client
        bit = 1 << c.sender_id
        members = self._group_members(group)
        if not members:
            return
        now, gap = time.monotonic(), self.interval()
        if self._exchange != (job, first):  # a new exchange: forget the previous one's rows
            self._exchange, self._latest, self._moved, self._since = (job, first), {}, {}, now
        latest = self._latest  # member -> the highest row of it the aggregator was seen to hold
        asked = self._asked
        for i, bm in zip(a.rows, a.bitmaps, strict=True):
            for m in range(wire.MAX_SENDERS):
                if bm >> m & 1:
                    if latest.get(m, -1) < i:
                        latest[m], self._moved[m] = i, now
                    if self._timed:  # a copy NACKed once is here: a sample of the NACK round trip
                        rec = asked.get((job, (first + i) & _U32, m))
                        if rec is not None and rec.timed is not None:
                            self._path(m).sample(now - rec.timed)
                            rec.timed = None
                            self._timed -= 1
        ask: dict[tuple[int, bool], list[int]] = {}  # (member, by a gap) -> chunks
        waiting = False  # some member's contribution is still lacking here
        rto = win.rto()
        stalled = now - win.last_progress >= rto  # no result for an RTO
        for i, bm in zip(a.rows, a.bitmaps, strict=True):
            if win.done[i] or i < a.head or not bm & bit:
                continue
            lacking = members & ~bm
            if not lacking:
                continue
            win.held[i] = 0  # probe it again: the next answer says whether the resend came
            waiting = True
            chunk = (first + i) & _U32
            for m in range(wire.MAX_SENDERS):
                if not lacking >> m & 1:
                    continue
                # the tail: on a stall, the first missing chunk (just above the highest row
                # seen holding its copy, or the head) of each member nothing new came from for
                # an RTO (one still streaming is late behind a busy link, not lost)
                by_gap = latest.get(m, -1) > i
                if by_gap or (stalled and i == max(latest.get(m, -1) + 1, a.head)
                              and now - self._moved.get(m, self._since) >= rto):
                    ask.setdefault((m, by_gap), []).append(chunk)
        asked = 0
        for (m, by_gap), chunks in ask.items():
            # a gap is a certain loss: asked again after the member's NACK round trip. A tail
            # NACK is a guess made after an RTO of silence (the member may not have sent the
            # chunk yet: stalled by a loss of its own, or late), so it is asked again no sooner
            # than that RTO (at most timeout / 16): every receiver re-asking a chunk never sent
            # at a loopback pace was issue 15's burst (14-16 NACKs for one lost copy, 4 sites)
            g = self.member_interval(m)
            floor = min(rto, self.client.timeout / 16)
            if not by_gap:
                g = max(g, floor)
            n = len(self._ask(m, chunks, job=job, group=group, round_id=round_id, now=now,
                              gap=g, tail=None if by_gap else floor))
            asked += n
            if by_gap:
                self.stats.nacked_by_gap += n
        if asked:  # found something lost: probe again at the fast pace (as SendWindow does
            win.probe_fast()  # when an answer shows a contribution of ours lost)
        elif waiting:  # a NACK may go unanswered (lost, or its resend): probe at least once per
            # half interval, so a re-NACK is due at the next probe, never held back by the
            # probes' backoff (up to the RTO) or a probe that came just before it was due
            win.probe_at_least_every(gap / 2)

    def missing_copies(self, owner: int, done: bytearray, hi: int, quiet: float, *, job: int,
                       group: int, round_id: int, first: int, timer: RttEstimator,
                       now: float) -> tuple[list[int], float]:
        """A receive-only stream lacks rows of ``owner``'s open-loop cast (a sharded
        all-gather: chunk = first + row; ``done``: the rows arrived, ``hi`` the highest,
        ``quiet``: when the latest new one came or the stream began): NACK the rows below
        ``hi`` (the owner sends in order, a path is FIFO: a gap) and, once nothing new came for
        the path's RTO estimate (``timer``: the round trip to the owner; without backoff), every
        missing row (a lost tail, or a cast whose every copy so far was lost). The owner's
        responder re-sends from its log (the cast is recorded whole, ``record(keep=)``).
        Returns the rows NACKed now and when to look again."""
        gap = self.interval(timer)
        rto = min(timer.estimate, self.client.timeout / 4)
        silent = now - quiet >= rto
        lacking = np.flatnonzero(np.frombuffer(done, np.uint8) == 0)
        rows = lacking if silent else lacking[lacking < hi]
        chunks = [(first + int(i)) & _U32 for i in rows]
        asked = self._ask(owner, chunks, job=job, group=group, round_id=round_id, now=now,
                          gap=gap)
        self.stats.nacked_copies += len(asked)
        if not len(lacking):
            return [], math.inf
        wake = now + gap / 2 if len(rows) else quiet + rto
        return [(ch - first) & _U32 for ch in asked], wake

    def _ask(self, member: int, chunks: list[int], *, job: int, group: int, round_id: int,
             now: float, gap: float, tail: float | None = None) -> list[int]:
        """NACK ``member`` for those of ``chunks`` whose previous NACK is old enough (in
        datagrams of at most NACK_MAX_CHUNKS); returns them. The one place NACKs are paced,
        sent, counted. Pace per (chunk, member): the k-th re-NACK waits ``gap`` x 2^(k-1)
        after the previous one, at most ``max(gap, timeout / 16)`` (exponential backoff, as a
        retransmission timer's: a burst is bounded by log2 of its length over ``gap`` however
        small ``gap`` is, while many tries still fit in the timeout). ``tail``: these are tail
        NACKs, whose re-asks are counted, as early if sooner than ``tail`` s (the RTO) after
        the previous try (``NackStats.tail_reasks_early``: a check of the pacing that load
        cannot fake, both times being the driver's own)."""
        c = self.client
        cap = max(gap, c.timeout / 16)
        asked = self._asked
        out = []
        for chunk in chunks:
            key = (job, chunk, member)
            rec = asked.get(key)
            if rec is None:
                asked[key] = Asked(now, 1, now)
                self._timed += 1
            elif now - rec.last >= min(cap, gap * (1 << min(rec.tries - 1, 30))):
                if tail is not None:
                    self.stats.tail_reasks += 1
                    self.stats.tail_reasks_early += now - rec.last < tail
                rec.last = now
                rec.tries += 1
                if rec.timed is not None:  # asked again: its copy's arrival times no single
                    rec.timed = None  # try (Karn's rule)
                    self._timed -= 1
            else:
                continue
            out.append(chunk)
        for k in range(0, len(out), wire.NACK_MAX_CHUNKS):
            part = tuple(out[k : k + wire.NACK_MAX_CHUNKS])
            self.sock.sendto(wire.nack_datagram(wire.Nack(
                member, part, job, group, round_id, c.sender_id, c.session)), c.aggregator)
            self.stats.nacks_sent += 1
        self.stats.nacked_chunks += len(out)
        if len(asked) > 4096:  # forget what is older than the linger
            self._asked = {k: r for k, r in asked.items() if now - r.last <= self.linger}
            self._timed = sum(r.timed is not None for r in self._asked.values())
        return out

    def _path(self, member: int) -> RttEstimator:
        """The estimator of NACK round trips to ``member`` (host/rtt.py, the one estimator)."""
        path = self._paths.get(member)
        if path is None:
            c = self.client
            path = self._paths[member] = RttEstimator(c.timeout / 16, min_rto=c.min_rto,
                                                      max_rto=c.max_rto)
        return path

    def describe(self, job: int, chunk: int) -> str:
        """What was asked for ``chunk`` (for a ChunksMissing message: whether the WAN recovery
        tried, how often, and how long ago)."""
        now = time.monotonic()
        asked = [f"member {m} {r.tries} time(s), last {now - r.last:.1f} s ago"
                 for (j, ch, m), r in sorted(self._asked.items()) if (j, ch) == (job, chunk)]
        if not asked:
            return f" (WAN recovery: no NACK sent for chunk {chunk})"
        return (f" (WAN recovery: chunk {chunk} NACKed to {'; '.join(asked)}; each NACK names "
                "the chunk to its sender, whose host re-sends it if still logged)")

    def _group_members(self, group: int) -> int:
        """The group's member bitmap (read once over CONTROL; 0 if it cannot be read)."""
        if group not in self._members:
            try:
                self._members[group] = self.client.control.read(regs.group(group))
            except (ControlTimeout, AttributeError):
                return 0
        return self._members[group]

    def close(self) -> None:
        self._closed.set()
        self._thread.join(2)
        self.sock.close()
