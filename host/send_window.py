"""The window of chunks in flight of one exchange: what to send, what is due for resend, progress.

An exchange is every chunk of one ``Packets`` buffer (a tensor pass, an agreement, an overflow
redo). Chunk ``i`` (row ``i`` of the packet buffer) may be sent once ``i < base + w``, ``base``
the lowest chunk still lacking its result (docs/protocol.md, lost-result recovery needs
``w <= W/2``). New chunks go out in runs of consecutive datagrams, one segmented ``sendmsg``
per run (``transport.send_segments``). Timing decisions (which chunk is due when) live here;
the round-trip estimate they use is ``host/rtt.py``'s :class:`RttEstimator`.
"""

from __future__ import annotations

import math

import numpy as np

from wanreduce import wire
from wanreduce.packetize import Packets

from .rtt import RttEstimator
from .transport import Address, UdpTransport, gso_batch

_HDR = wire.AGG_HEADER_BYTES
_FLAGS_OFFSET = wire.FIELD["flags"].agg_offset


class SendWindow:
    """Send and resend state of the chunks of ``pk`` toward ``dest`` with window ``w``."""

    def __init__(self, pk: Packets, w: int, transport: UdpTransport, dest: Address,
                 timer: RttEstimator, *, rto_cap: float, max_retries: int) -> None:
        self.pk, self.n, self.w = pk, len(pk), w
        self.transport, self.dest, self.timer = transport, dest, timer
        self.rto_cap, self.max_retries = rto_cap, max_retries
        self.D = pk.buf.shape[1]
        self.flat = memoryview(pk.buf.reshape(-1))
        self.lens = [_HDR + 4 * c for c in pk.counts.tolist()]
        self.done = bytearray(self.n)
        self.sent_at = [0.0] * self.n
        self.deadline = [0.0] * self.n
        self.tries = [0] * self.n
        self.base = self.nxt = 0
        self.remaining = self.n
        self.retransmissions = 0
        self._gso_max = gso_batch(self.D)
        self._backed_off_at = -math.inf

    def rto(self) -> float:
        """The current timeout, never more than ``rto_cap`` (a stall is retried before failing)."""
        return min(self.timer.rto, self.rto_cap)

    def send_new(self, now: float) -> None:
        """Send every chunk the window allows that was never sent, in segmented runs."""
        lim = min(self.n, self.base + self.w)
        if self.nxt >= lim:
            return
        d = now + self.rto()
        D, flat, lens, tr, dest = self.D, self.flat, self.lens, self.transport, self.dest
        while self.nxt < lim:
            nxt = self.nxt
            o = nxt * D
            k = min(lim - nxt, self._gso_max) if tr.gso else 1
            if k > 1:  # rows are consecutive datagrams; only the last chunk is shorter
                tr.send_segments(flat[o : o + (k - 1) * D + lens[nxt + k - 1]], D, dest)
            else:
                tr.send_to(flat[o : o + lens[nxt]], dest)
            for i in range(nxt, nxt + k):
                self.sent_at[i] = now
                self.deadline[i] = d
            self.nxt = nxt + k

    def complete(self, i: int, arrived: float) -> float | None:
        """Chunk ``i``'s result arrived: returns its round trip if it is a valid sample (Karn:
        answered on its first transmission), else None."""
        self.done[i] = 1
        self.remaining -= 1
        return arrived - self.sent_at[i] if self.tries[i] == 0 else None

    def advance(self) -> None:
        """Move ``base`` past the chunks that have their results."""
        while self.base < self.n and self.done[self.base]:
            self.base += 1

    def resend_due(self, now: float, last_progress: float) -> tuple[float, int | None]:
        """Resend the chunks whose timer expired; returns (next deadline, a chunk over
        ``max_retries`` or None). Nothing times out within an RTO of the last new result
        (RFC 6298 5.3: the timer restarts on new data)."""
        rto = self.rto()
        quiet = last_progress + rto
        wake = math.inf
        for i in range(self.base, self.nxt):
            if self.done[i]:
                continue
            due = self.deadline[i] if self.deadline[i] > quiet else quiet
            if due <= now:
                if now - self._backed_off_at >= rto:  # TCP's one timer: one backoff per RTO,
                    self.timer.expired()
                    self._backed_off_at = now  # however many chunks expire in it
                    rto = self.rto()
                self.tries[i] += 1
                if self.tries[i] > self.max_retries:
                    return wake, i
                self.pk.buf[i, _FLAGS_OFFSET] |= wire.Flags.RETRANSMIT
                o = i * self.D
                self.transport.send_to(self.flat[o : o + self.lens[i]], self.dest)
                self.retransmissions += 1
                due = self.deadline[i] = now + rto
            wake = min(wake, due)
        return wake, None

    def result_row(self, i: int) -> np.ndarray:
        """Where chunk ``i``'s result payload goes (its contribution row)."""
        return self.pk.payload[i]
