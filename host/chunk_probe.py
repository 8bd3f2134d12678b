"""Which of a member's contributions the aggregator holds, asked over CONTROL without waiting.

Loss recovery's question (docs/host.md, "Loss recovery"): for chunks sent and still without a
result, does the aggregator hold *our* contribution? One CONTROL message asks it for up to
``per_message`` chunks — a JOBj_PROBE write and a JOBj_PROBE_BITMAP read per chunk, then a
JOBj_HEAD read (the next chunk to release: every chunk below it had its result sent) — and the
reply answers for the moment the aggregator handled the message. Messages are posted, not
awaited: the exchange's receive loop collects the replies (``poll``) between results, so a
whole window is asked about in one round trip, as many messages in parallel as it takes. A
message is never resent: when its reply is overdue (``expire``) its chunks are simply asked
about again in the next round; until then they are left out of new rounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from wanreduce import regs, wire

if TYPE_CHECKING:
    from .control import ControlClient

_U32 = 0xFFFFFFFF


@dataclass
class ProbeAnswer:
    """The aggregator's answer about ``rows`` (chunk = first + row) to a message posted at
    ``sent_at``: each row's contributor bitmap (0: it holds none: not arrived, lost, or
    released) and ``head``, the first row not yet released (negative: before the first)."""

    rows: list[int]
    bitmaps: list[int]
    head: int
    sent_at: float


def rows_per_message(elements: int) -> int:
    """Chunks one CONTROL message of at most ``elements`` words asks about: two operations per
    chunk plus the JOBj_HEAD read, two words per operation (the aggregator takes E words)."""
    return max(1, (elements // wire.CONTROL_OP_WORDS - 1) // 2)


class ChunkProbe:
    """Posts contributor-bitmap probes for rows of one exchange (chunks ``first + row`` of
    ``job``) on ``control``'s socket and hands back their answers."""

    def __init__(self, control: ControlClient, job: int, first: int, per_message: int) -> None:
        self.control, self.first, self.per_message = control, first, per_message
        self._probe, self._bitmap, self._head = regs.job_probe(job), regs.job_probe_bitmap(job), regs.job_head(job)
        self._pending: dict[int, tuple[list[int], float]] = {}  # seq -> (rows, posted at)
        self._live: set[int] = set()  # posted and neither answered nor given up
        self.latency: float | None = None  # of the latest answer: how long a reply takes now
        self._newest = -1  # the latest-posted message answered (replies come in order)
        self.messages = 0
        self.unsupported = False  # the aggregator has no JOBj_PROBE (an older core): no answers

    def fileno(self) -> int:
        return self.control.transport.fileno()

    @property
    def busy(self) -> bool:
        """A posted message may still be answered."""
        return bool(self._live)

    def post(self, rows: Sequence[int], now: float) -> None:
        """Ask about ``rows`` (none: JOBj_HEAD alone), in as many messages as it takes."""
        rows = list(rows)
        for k in range(0, max(1, len(rows)), self.per_message):
            part = rows[k : k + self.per_message]
            ops: list[tuple[int, int | None]] = []
            for i in part:
                ops += [(self._probe, (self.first + i) & _U32), (self._bitmap, None)]
            ops.append((self._head, None))
            seq = self.control.post(ops)
            self._pending[seq] = (part, now)
            self._live.add(seq)
            self.messages += 1

    def poll(self, now: float) -> list[ProbeAnswer]:
        """The answers that arrived (never waits); a reply to a message given up is still
        taken: it is no less true."""
        out = []
        for seq, vals in self.control.replies():
            got = self._pending.get(seq)
            if got is None:
                continue  # a late reply of an earlier exchange, or of a blocking transact
            rows, sent = got
            echo = vals[0:-1:2]
            if len(vals) != 2 * len(rows) + 1 or echo != [(self.first + i) & _U32 for i in rows]:
                # not the answer to our question: another client's message with the same
                # number (ours may still come), or, if JOBj_PROBE kept none of the chunks
                # written, a core without the probe registers
                if len(echo) == len(rows) and not any(echo) and any(self.first + i for i in rows):
                    self.unsupported = True
                continue
            del self._pending[seq]
            if seq in self._live:
                self._live.discard(seq)
                self.latency = now - sent
            self._newest = max(self._newest, seq)
            d = (vals[-1] - self.first) & _U32
            head = d - (1 << 32) if d >> 31 else d
            out.append(ProbeAnswer(rows, vals[1:-1:2], head, sent))
        return out

    def expire(self, now: float, wait: float) -> list[int]:
        """Give up the messages posted more than ``wait`` s ago, or before one already answered
        (the aggregator answers in order: that one was lost); returns their rows, to be asked
        about again. Forgets given-up messages after 100 x ``wait``."""
        late = [s for s in self._live if s < self._newest or now - self._pending[s][1] > wait]
        self._live.difference_update(late)
        rows = [i for s in late for i in self._pending[s][0]]
        for s in [s for s, (_, t) in self._pending.items() if s not in self._live and now - t > 100 * wait]:
            del self._pending[s]
        return rows
