"""The window of chunks in flight of one exchange: what to send, what is due for resend, progress.

An exchange is every chunk of one ``Packets`` buffer (a tensor pass, an agreement, an overflow
redo). Chunk ``i`` (row ``i % rows`` of the exchange's buffer: a ring of ``rows >= w`` rows,
``host/chunk_ring.py``, or the whole packet buffer) may be sent once ``i < base + w``, ``base``
the lowest chunk still lacking its result (docs/protocol.md, lost-result recovery needs
``w <= W/2``). New chunks and resends go out in runs of consecutive datagrams, one segmented
``sendmsg`` per run (``transport.send_segments``).

Loss detection (docs/host.md, "Timers"), as TCP does it but with what the aggregator tells us:
the aggregator releases a result only when every member contributed; in in-order release mode
results leave in chunk order, so ``hi`` (the highest chunk with a result) splits the window:

* below ``hi``, a chunk without a result had its result released and lost on the way (fast
  retransmit once ``DUPTHRESH`` later chunks have theirs, as TCP on three duplicate ACKs; the
  aggregator answers with the held result);
* above ``hi``, the first chunk (the *blocker*) holds up every later result, and the results
  do not tell whose contribution is missing. With a sender id (CONTROL available: SACK) a
  stall longer than ``stall()`` (a ``gap``, or the measured jitter) starts a probe round
  (``probe_due``; the questions are posted by ``host/chunk_probe.py``): the aggregator's
  contributor bitmaps of every chunk in flight, and ``probe_answer`` resends at once exactly
  our contributions it lacks and the released chunks whose results we lack. Without (or as the
  safety net, after a retransmission timeout without any new result) the blocker alone is
  resent (not the window; every member resends it, duplicates are harmless); without SACK the
  burst it unblocks, if it stops at a chunk sent long before, makes that chunk the next
  blocker, resent after ``gap`` (a few minimum round trips, NewReno's partial acknowledgement)
  rather than a whole RTO, until the chunks outstanding at the stall have their results
  (recovery).

The round-trip estimate is ``host/rtt.py``'s :class:`RttEstimator`, one sample per flight
(RFC 6298: one chunk timed at a time, Karn's rule). A resend counts against ``max_retries``
only when no new result arrived since the chunk's previous counted resend: a member that is
still missing, while the aggregator releases other chunks, never fails the call.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from wanreduce import wire

from .rtt import RttEstimator
from .transport import Address, UdpTransport, gso_batch

if TYPE_CHECKING:
    from wanreduce.packetize import Packets

    from .chunk_probe import ProbeAnswer
    from .chunk_ring import ChunkRing, WholeBuffer

_HDR = wire.AGG_HEADER_BYTES
_FLAGS_OFFSET = wire.FIELD["flags"].agg_offset
_RETRANSMIT = int(wire.Flags.RETRANSMIT)

DUPTHRESH = 3  # later results before a chunk without one is taken as a lost result
MIN_GAP = 0.001  # s: floor of the recovery pace (below this, scheduling noise dominates)


class SendWindow:
    """Send and resend state of the chunks of ``pk`` toward ``dest`` with window ``w``; a
    ``pk`` with ``fill(lo, hi)`` (a :class:`ChunkRing`) fills the rows of chunks about to be
    sent first, a plain :class:`Packets` is sent as it is."""

    def __init__(self, pk: ChunkRing | WholeBuffer | Packets, w: int, transport: UdpTransport, dest: Address,
                 timer: RttEstimator, *, rto_cap: float, max_retries: int, now: float,
                 sender: int | None = None, rtt_hint: float | None = None,
                 probe_floor: float = 0.0) -> None:
        """``sender``: our sender id, when the aggregator can be asked which contributions it
        holds (``probe_due``/``probe_answer``: SACK); None: a stall resends the blocker.
        ``rtt_hint``: a round trip to the aggregator (the CONTROL look-up's), the recovery
        pace until a result's round trip is measured. ``probe_floor``: the probe pace's floor
        measured by earlier exchanges (:meth:`stall`; the caller keeps ``probe_floor``)."""
        self.pk, self.n, self.w = pk, len(pk), w
        self.transport, self.dest, self.timer = transport, dest, timer
        self.rto_cap, self.max_retries = rto_cap, max_retries
        self.D = pk.buf.shape[1]
        self.R = pk.buf.shape[0]  # chunk i is in row i % R
        self._fill = getattr(pk, "fill", None)
        if self.R < min(w, self.n):
            raise ValueError(f"a ring of {self.R} rows cannot hold a window of {w} chunks")
        self.flat = memoryview(pk.buf.reshape(-1))
        self.lens = [_HDR + 4 * c for c in pk.counts.tolist()]
        n = self.n
        self.done = bytearray(n)
        self._done = np.frombuffer(self.done, np.uint8)  # the same bytes, for complete_many
        self.fast = bytearray(n)  # fast-retransmitted since its last timer resend
        self._fast = np.frombuffer(self.fast, np.uint8)
        self.last_tx = np.zeros(n)  # time of the latest transmission
        self.resends = np.zeros(n, np.int32)  # Karn: a resent chunk gives no round-trip sample
        self.strikes = [0] * n  # resends counted against max_retries
        self.rtries = [0] * n  # resends in recovery (their pace backs off per chunk)
        self.strike_mark = [-1] * n  # progress count at the chunk's last counted resend
        self.base = self.nxt = 0
        self.hi = -1
        self.remaining = n
        self.retransmissions = 0
        self.fast_resends = self.timer_resends = self.recovery_resends = 0  # by cause
        self.progress = 0  # passes that brought new results
        self.last_progress = now
        self.recover = 0  # in recovery while base < recover
        self._timed = -1  # the chunk whose round trip is being measured (one per flight)
        self._resent = False  # some chunk was resent (complete_many then checks Karn's rule)
        self._resent_at = -math.inf  # our latest resend: answers sent before it may wait on it
        self._scan = 0  # fast retransmit examined the chunks below this
        self._gso_max = gso_batch(self.D)
        self._expired_at = -math.inf
        self.sack = sender is not None
        self._bit = 1 << sender if sender is not None else 0
        self.rtt_hint = rtt_hint
        self.held = bytearray(n)  # the aggregator said it holds our contribution
        self.released_seen = [math.inf] * n  # when an answer first showed it released
        self.asked = bytearray(n)  # in a question whose answer is awaited
        self.sack_resends = self.probes = 0  # resends a probe found missing; probe rounds
        self._probe_at = -math.inf  # the latest probe round
        self._probe_k = 0  # probe rounds since one found something to resend, or progress
        self.probe_floor = probe_floor  # s: pauses shorter than this are not probed (stall)
        self._suspect_at = -math.inf  # an answer showed a contribution missing (anyone's)
        self._seen_head = 0  # the highest head an answer showed (rows below it were released)

    # ---- timers ----
    def rto(self) -> float:
        """The current timeout, never more than ``rto_cap`` (a stall is retried before failing;
        never below the timer's ``min_rto``)."""
        return self.timer.rto_at_most(self.rto_cap)

    def gap(self) -> float:
        """How long a burst of released results may pause before its next chunk is resent in
        recovery: two minimum round trips, at least MIN_GAP, at most the RTO."""
        m = self.timer.min_rtt if self.timer.min_rtt is not None else self.rtt_hint
        return self.rto() if m is None else min(self.rto(), max(MIN_GAP, 2 * m))

    def stall(self) -> float:
        """How long results may pause before a probe round asks the aggregator what is lost: a
        ``gap``, and at least ``probe_floor``, at most the RTO. The floor is measured: twice the
        longest pause that was probed and then ended with no resend at all (the aggregator held
        everything: a scheduling pause of a busy machine, not a loss); a probe that finds our loss
        sets it back to 0, and a pause during which an answer showed someone's contribution
        missing (another member's loss) or released chunks still lacked their results leaves it
        alone. Without it every pause longer than a gap (2 minimum round trips, ~1 ms
        on loopback) started a probe round: with no loss at all, a third of serve's busy time on a
        loaded machine (issue 13). Not the RTT estimate: with in-order release, another member's
        losses delay our results too and inflate SRTT/RTTVAR far above the jitter."""
        return min(self.rto(), max(self.gap(), self.probe_floor))

    # ---- sending ----
    def _send_run(self, s: int, k: int, now: float) -> None:
        """Send chunks ``s .. s + k - 1`` (consecutive rows of the ring, all full-size but maybe
        the last) as one segmented ``sendmsg`` (one plain send for k = 1)."""
        D, R = self.D, self.R
        o = (s % R) * D
        if k > 1:
            self.transport.send_segments(self.flat[o : o + (k - 1) * D + self.lens[s + k - 1]],
                                         D, self.dest)
        else:
            self.transport.send_to(self.flat[o : o + self.lens[s]], self.dest)
        self.last_tx[s : s + k] = now

    def _send_rows(self, rows: list[int], now: float) -> None:
        """Resend rows (ascending) with the RETRANSMIT flag, as runs of consecutive full-size
        datagrams, one segmented ``sendmsg`` each (the tensor's last chunk may end a run)."""
        D, lens, R, buf = self.D, self.lens, self.R, self.pk.buf
        gso = self._gso_max if self.transport.gso else 1
        self._resent_at = now
        self._resent = True
        self.retransmissions += len(rows)
        j = 0
        while j < len(rows):
            s = rows[j]
            k = 1
            while (j + k < len(rows) and k < gso and rows[j + k] == s + k
                   and lens[s + k - 1] == D and (s + k) % R):  # a run never wraps the ring
                k += 1
            for i in range(s, s + k):
                buf[i % R, _FLAGS_OFFSET] |= _RETRANSMIT
                self.resends[i] += 1
                if i == self._timed:  # Karn: its round trip is ambiguous now
                    self._timed = -1
            self._send_run(s, k, now)
            j += k

    def send_new(self, now: float) -> None:
        """Send every chunk the window allows that was never sent: runs of up to a GSO batch
        that never wrap the ring (only the tensor's last chunk, the last sent, may be short),
        no Python per chunk."""
        lim = min(self.n, self.base + self.w)
        s = self.nxt
        if s >= lim:
            return
        if self._timed < 0:
            self._timed = s  # time the first chunk of this flight
        if self._fill is not None:  # their rows are free: every chunk below base has its result
            self._fill(s, lim)
        gso = self._gso_max if self.transport.gso else 1
        while s < lim:
            k = min(gso, lim - s, self.R - s % self.R)
            self._send_run(s, k, now)
            s += k
        self.nxt = lim

    # ---- results ----
    def complete(self, i: int, arrived: float) -> None:
        """Chunk ``i``'s result arrived."""
        self.complete_many(np.array([i]), arrived)

    def complete_many(self, idx: np.ndarray, arrived: float, run: int = -1) -> None:
        """The results of chunks ``idx`` (distinct, not done yet; ``run``: the first when they
        are ``run, run + 1, ...``) arrived together at ``arrived`` (one receive batch): one
        vectorised update, the same as :meth:`complete` on each."""
        k = len(idx)
        if k == 0:
            return
        at = slice(run, run + k) if run >= 0 else idx  # slices where they are consecutive
        self._done[at] = 1
        self.remaining -= k
        self.hi = max(self.hi, run + k - 1 if run >= 0 else int(idx.max()))
        # the smallest round trip of the batch: its latest first transmission (Karn's rule: a
        # resent chunk gives none; without resends a run's last chunk was sent last)
        if self._resent or run < 0:
            last_tx = self.last_tx[at][self.resends[at] == 0]
            latest = float(last_tx.max()) if len(last_tx) else None
        else:
            latest = float(self.last_tx[run + k - 1])
        if latest is not None:
            self.timer.observe(arrived - latest)
        t = self._timed
        if t >= 0 and self.done[t]:  # the timed chunk is among them
            self._timed = -1
            rtt = arrived - float(self.last_tx[t])
            if (self.resends[t] == 0 and self.last_tx[t] > self._resent_at
                    and arrived - self.last_progress < self.rto()):
                # not held up behind a chunk we resent, nor answered only after a pause longer
                # than the RTO (another member recovering a loss, not the aggregator's latency;
                # a slower aggregator still gets sampled once the backoff exceeds its latency)
                self.timer.sample(rtt)

    def progressed(self, now: float) -> None:
        """After a receive pass that brought new results: move ``base``, fast-retransmit lost
        results (chunks below ``hi`` without one, ``DUPTHRESH`` results behind)."""
        self.progress += 1
        d = self._done[self.base : self.nxt]  # chunks below nxt: base moves to the first not done
        self.base += len(d) if d.all() else int(d.argmin())
        if self._probe_at > self.last_progress > max(self._resent_at, self._suspect_at) and (
                self.base >= self._seen_head):
            # a probed pause that ended with nothing resent, no contribution found missing and
            # every chunk the aggregator said it released answered: jitter, not a loss
            self.probe_floor = max(self.probe_floor, 2 * (now - self.last_progress))
        self.last_progress = now
        self._probe_k = 0
        top = self.hi - DUPTHRESH + 1
        lo = max(self._scan, self.base)
        lost = []
        if lo < top:
            gap = (self._done[lo:top] | self._fast[lo:top]) == 0
            if gap.any():
                lost = (np.flatnonzero(gap) + lo).tolist()
        self._scan = max(self._scan, top)
        if lost:
            for i in lost:
                self.fast[i] = 1
                self.rtries[i] = 1
            self.fast_resends += len(lost)
            self.recover = max(self.recover, self.nxt)  # loss seen: recover at a round trip's pace
            self._send_rows(lost, now)

    def blocker(self) -> int:
        """The first chunk above ``hi`` (the one holding up later in-order results), or -1."""
        b = max(self.hi + 1, self.base)
        return b if b < self.nxt else -1

    def resend_due(self, now: float) -> tuple[float, int | None]:
        """Resend what its timer says is lost (the chunks from ``base`` up to the blocker);
        returns (when to look again, a chunk resent more than ``max_retries`` times without
        progress, or None)."""
        rto = self.rto()
        wake = math.inf
        done, last_tx = self.done, self.last_tx
        b = self.blocker()
        top = b if b >= 0 else min(self.hi, self.nxt - 1)
        timed_out: list[int] = []
        rec: list[int] = []
        if self.base < self.recover:
            # Recovery: resend at a round trip's pace, backing off per chunk up to the RTO. The
            # blocker waits for the results it unblocked to stop coming; a lost result below
            # hi is certain and waits only for the answer to its previous resend.
            g = self.gap()
            for i in range(self.base, top + 1):
                if done[i]:
                    continue
                k = self.rtries[i]
                t0 = max(self.last_progress, last_tx[i]) if i == b else last_tx[i]
                # with SACK the probes find what is lost, at the pace the aggregator answers
                # them: a blind resend is the timer's
                pace = rto if self.sack else g * (1 << min(k, 30))
                due = t0 + min(rto, pace)
                if due <= now:
                    # paced resends; once the pace has backed off to the RTO it is the timer
                    # (backoff, and a resend that counts against max_retries)
                    (timed_out if pace >= rto else rec).append(i)
                    self.rtries[i] = k + 1
                    due = now + min(rto, 2 * pace)
                wake = min(wake, due)
            if rec:
                self.recover = max(self.recover, self.nxt)  # holes keep coming: stay
        else:
            quiet = self.last_progress + rto  # no timer expires within an RTO of new results
            for i in range(self.base, top + 1):
                if not done[i]:
                    due = max(quiet, last_tx[i] + rto)
                    if due <= now:
                        timed_out.append(i)
                        due = now + rto
                    wake = min(wake, due)
        if timed_out:
            self.recover = max(self.recover, self.nxt)  # recover until all now in flight is answered
            if now - self._expired_at >= rto:  # TCP's one timer: one backoff per RTO however
                self.timer.expired()  # many chunks expire in it
                self._expired_at = now
            for i in timed_out:
                if self.strike_mark[i] != self.progress:
                    self.strikes[i], self.strike_mark[i] = 0, self.progress
                self.strikes[i] += 1
                if self.strikes[i] > self.max_retries:
                    return wake, i
            self.timer_resends += len(timed_out)
        self.recovery_resends += len(rec)
        rows = sorted(timed_out + rec)
        if rows:
            self._send_rows(rows, now)
        return wake, None

    # ---- SACK: ask the aggregator what it holds (host/chunk_probe.py) ----
    def probe_fast(self) -> None:
        """Probe again at the stall pace (no backoff): something was found lost."""
        self._probe_k = 0

    def probe_at_least_every(self, interval: float) -> None:
        """Cap the probes' backoff so a probe comes at least once per ``interval`` seconds (an
        unanswered NACK must be re-sent: host/wan_recovery.py)."""
        k = int(math.log2(max(1.0, interval / max(self.stall(), 1e-6))))
        self._probe_k = min(self._probe_k, k)

    def probe_due(self, now: float, busy: bool = False) -> tuple[list[int] | None, float]:
        """On a stall — no new result, resend or probe for the probe pace (``stall``, doubled per
        round that found nothing) — the rows to ask the aggregator about: every chunk sent at
        least a ``gap`` ago (a younger one cannot be judged yet) without a result, whose
        contribution of ours it has not confirmed and that no question awaiting its answer
        covers. None left: JOBj_HEAD alone (it shows lost results), unless ``busy`` (a question
        is awaiting its answer: the aggregator is asked at the pace it answers). Else None.
        Also when to look again."""
        if not self.sack or self.base >= self.nxt:
            return None, math.inf
        g = self.gap()
        pace = min(self.rto(), self.stall() * (1 << min(self._probe_k, 30)))
        due = max(self.last_progress, self._probe_at, self._resent_at) + pace
        if due > now:
            return None, due
        done, held, asked, last_tx = self.done, self.held, self.asked, self.last_tx
        judge = now - g
        rows = [i for i in range(self.base, self.nxt)
                if not (done[i] or held[i] or asked[i]) and last_tx[i] <= judge]
        if busy and not rows:
            return None, now + g
        for i in rows:
            asked[i] = 1
        self._probe_at = now
        self.probes += 1
        self._probe_k += 1
        return rows, now + pace

    def probe_unanswered(self, rows: list[int]) -> None:
        """Questions about ``rows`` were given up (lost): the next round asks again."""
        for i in rows:
            self.asked[i] = 0

    def probe_answer(self, a: ProbeAnswer, now: float) -> None:
        """Resend at once, in one segmented burst, what the aggregator's answer shows lost: our
        contribution to a chunk it lacks, if sent a ``gap`` before the question (a younger one
        may still be on its way: it is asked about again); a chunk it released (below
        ``a.head``) whose result we lack, if an earlier answer already showed it released a
        ``gap`` before this question (its result may still be on its way after the answer)."""
        self.timer.observe(now - a.sent_at)  # a round trip to the aggregator: the pace's gauge
        bit, done, held, last_tx, seen = self._bit, self.done, self.held, self.last_tx, self.released_seen
        old = a.sent_at - self.gap()
        lost = []
        self._seen_head = max(self._seen_head, a.head)
        for i, bm in zip(a.rows, a.bitmaps, strict=True):
            self.asked[i] = 0
            if done[i]:
                continue
            if i >= a.head and last_tx[i] <= old:  # not released: someone's contribution is missing
                self._suspect_at = now
            if bm & bit:
                held[i] = 1
            elif i >= a.head and last_tx[i] <= old:
                lost.append(i)
        for i in range(self.base, min(a.head, self.nxt)):  # released, and no result here
            if not done[i]:
                if seen[i] <= old and last_tx[i] <= old:
                    lost.append(i)  # lost on the way back: the resend gets it again
                seen[i] = min(seen[i], now)
        if lost:
            self._probe_k = 0
            self.probe_floor = 0.0  # a real loss: probe at the gap's pace again
            self.sack_resends += len(lost)
            self.recover = max(self.recover, self.nxt)
            self._send_rows(sorted(set(lost)), now)
