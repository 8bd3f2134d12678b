"""Which received datagrams are results of the current exchange: the driver's receive filter.

One place decides, per datagram, whether it is the result of one of the exchange's chunks (its
payload is then taken) or something to ignore; nothing a sender puts on the wire can abort the
exchange except a result that proves a misconfiguration (see :meth:`ResultFilter.check`).
"""

from __future__ import annotations

from wanreduce import wire
from wanreduce.packetize import AGG_HEADER_STRUCT

_HDR = wire.AGG_HEADER_BYTES
_RESULT = int(wire.MsgType.RESULT)

IGNORE = -1  # check(): not a result of this exchange (counted)


class ResultMismatch(Exception):
    """A result for one of our chunks that does not fit the contribution (the caller turns it
    into the driver's ``ConfigMismatch``)."""


class ResultFilter:
    """Accepts the results of chunks ``first .. first + len(counts) - 1`` of one exchange."""

    def __init__(self, *, job: int, group: int, round_id: int, exp: int, first: int,
                 counts: list[int], done: bytearray) -> None:
        self.job, self.group, self.round_id, self.exp = job, group, round_id, exp
        self.first, self.counts, self.done = first, counts, done
        self.n = len(counts)
        self.ignored = 0
        self.heard = False  # a RESULT of our job arrived
        self._unpack = AGG_HEADER_STRUCT.unpack_from

    def check(self, buf, off: int, k: int) -> tuple[int, int]:
        """The datagram of ``k`` bytes at ``buf[off:]``: ``(chunk index, flags)`` of a result to
        take, or ``(IGNORE, 0)``."""
        if k < _HDR:
            self.ignored += 1
            return IGNORE, 0
        mg, ver, typ, fl, grp, jb, rnd, ch, _snd, sc, cnt, _ = self._unpack(buf, off)
        if typ != _RESULT or mg != wire.MAGIC or jb != self.job:
            self.ignored += 1
            return IGNORE, 0
        self.heard = True
        i = (ch - self.first) & 0xFFFFFFFF
        if i >= self.n or self.done[i]:
            self.ignored += 1
            return IGNORE, 0
        if (ver != wire.VERSION or cnt != self.counts[i] or sc != self.exp or rnd != self.round_id
                or grp != self.group or k != _HDR + 4 * cnt):
            raise ResultMismatch(
                f"job {self.job} chunk {ch}: result (round {rnd}, group {grp}, scale {sc}, "
                f"{cnt} elements, {k} bytes) does not match the contribution (round "
                f"{self.round_id}, group {self.group}, scale {self.exp}, {self.counts[i]} "
                f"elements): another site or the aggregator is configured differently"
            )
        return i, fl
