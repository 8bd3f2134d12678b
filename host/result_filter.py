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
    """Accepts the results of chunks ``first .. first + len(counts) - 1`` of one exchange that
    come from ``source`` (the aggregator's address and port); counts everything else.

    Counters: ``foreign`` (not from ``source``), ``malformed`` (from ``source`` but not a
    well-formed RESULT: short, bad magic/version/type, element count 0, too large or not
    matching the length), ``stray`` (a well-formed result of another job/round/group/session: a late
    result of an earlier call, another group using the same job id), ``duplicate`` (a result of
    a chunk already received, or outside this exchange).
    """

    def __init__(self, *, job: int, group: int, round_id: int, exp: int, first: int,
                 counts: list[int], done: bytearray, source: tuple[str, int],
                 session: int = 0) -> None:
        self.job, self.group, self.round_id, self.exp = job, group, round_id, exp
        self.session = session
        self.first, self.counts, self.done = first, counts, done
        self.source = source
        self.n = len(counts)
        self.foreign = self.malformed = self.stray = self.duplicate = 0
        self.heard = False  # something came from the aggregator
        self._unpack = AGG_HEADER_STRUCT.unpack_from

    @property
    def ignored(self) -> int:
        return self.foreign + self.malformed + self.stray + self.duplicate

    def from_source(self, ktot: int, seg: int, src: tuple[str, int]) -> bool:
        """Whether a received batch (``ktot`` bytes in datagrams of ``seg``) came from the
        aggregator; a batch from elsewhere is counted (per datagram) as foreign."""
        if src == self.source:
            self.heard = True
            return True
        self.foreign += -(-ktot // seg) if seg > 0 else 1
        return False

    def check(self, buf, off: int, k: int) -> tuple[int, int]:
        """The datagram of ``k`` bytes at ``buf[off:]`` (from the aggregator): ``(chunk index,
        flags)`` of a result to take, or ``(IGNORE, 0)``.

        Raises :class:`ResultMismatch` for a result of this call's job, round and group for one
        of its chunks with another scale or element count: the aggregator completed the chunk
        with contributions that disagree with ours, which only a misconfiguration explains
        (members using different scales, tensor lengths or packet sizes).
        """
        if k < _HDR:
            self.malformed += 1
            return IGNORE, 0
        mg, ver, typ, fl, grp, jb, rnd, ch, _snd, sc, cnt, ses = self._unpack(buf, off)
        if (typ != _RESULT or mg != wire.MAGIC or ver != wire.VERSION or cnt == 0
                or k != _HDR + 4 * cnt):
            self.malformed += 1
            return IGNORE, 0
        # ---- the one place where a result's header is compared with this call ----
        # (a result of another session is another run's: stray, docs/protocol.md "Sessions")
        if jb != self.job or rnd != self.round_id or grp != self.group or ses != self.session:
            self.stray += 1
            return IGNORE, 0
        i = (ch - self.first) & 0xFFFFFFFF
        if i >= self.n or self.done[i]:
            self.duplicate += 1
            return IGNORE, 0
        if cnt != self.counts[i] or sc != self.exp:
            raise ResultMismatch(
                f"job {self.job} round {rnd} group {grp} chunk {ch}: the aggregator's result "
                f"(scale {sc}, {cnt} elements) does not match the contribution (scale "
                f"{self.exp}, {self.counts[i]} elements): members disagree on the scale, the "
                f"tensor length or the elements per packet"
            )
        return i, fl
