"""Which received datagrams are results of the current exchange: the driver's receive filter.

One place decides whether a received datagram is the result of one of the exchange's chunks
(its payload is then taken) or something to ignore; nothing a sender puts on the wire can abort
the exchange except a result that proves a misconfiguration (see :meth:`ResultFilter.accept`).

A whole ``UDP_GRO`` batch (up to 64 KiB of equal-size datagrams, the last possibly shorter) is
filtered at once: its headers are viewed in place as a ``wire.AGG_HEADER_DTYPE`` array (the wire
format's one definition) with the batch's segment size as stride, and every check is a NumPy
mask over the batch; no Python runs per datagram.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from wanreduce import wire

_HDR = wire.AGG_HEADER_BYTES
_RESULT = int(wire.MsgType.RESULT)
_CONTRIBUTION = int(wire.MsgType.CONTRIBUTION)
#: Passed-through copies one exchange keeps for the call's next phase (``keep``); more are
#: ignored as before (their receiver NACKs them).
KEEP_MAX = 1024
_EDT = wire.ELEMENT_DTYPE
_PADDED = -(-_HDR // 8) * 8  # a header's bytes as whole 64-bit words

IGNORE = -1  # check(): not a result of this exchange (counted)


class ResultMismatch(Exception):
    """A result for one of our chunks that does not fit the contribution (the caller turns it
    into the driver's ``ConfigMismatch``)."""


class Accepted(NamedTuple):
    """The results taken from one block of equal-size datagrams (in arrival order, each chunk
    once): ``index[j]`` (chunk of the exchange) with ``flags[j]`` and payload ``payload[j]``
    (int32, ``count`` elements); ``flags`` and ``payload`` may be views into the receive buffer
    (use them before the next receive). ``run``: the first chunk when the results are chunks
    ``run, run + 1, ...`` in order with no OVERFLOW flag (the usual case: lets the caller use
    slices), else -1."""

    index: np.ndarray
    flags: np.ndarray
    payload: np.ndarray
    count: int
    run: int = -1


def blocks(ktot: int, seg: int) -> list[tuple[int, int, int]]:
    """A received batch of ``ktot`` bytes in datagrams of ``seg`` bytes as blocks of equal-size
    datagrams ``(byte offset, datagrams, bytes each)``: the full ones, then a shorter last one."""
    if seg <= 0 or ktot <= 0:
        return [(0, 1, 0)]  # an empty datagram
    full, rest = divmod(ktot, seg)
    out = [(0, full, seg)] if full else []
    if rest:
        out.append((full * seg, 1, rest))
    return out


class ResultFilter:
    """Accepts the results of chunks ``first .. first + len(counts) - 1`` of one exchange that
    come from ``source`` (the aggregator's address and port); counts everything else.
    ``msg_type``: RESULT, or CONTRIBUTION for the copies a sharded all-gather passes through
    the FPGA to the hosts (``host/sharded_allreduce.py``).

    Counters: ``foreign`` (not from ``source``), ``malformed`` (from ``source`` but not a
    well-formed RESULT: short, bad magic/version/type, element count 0, too large or not
    matching the length), ``stray`` (a well-formed result of another job/round/group/session: a late
    result of an earlier call, another group using the same job id), ``duplicate`` (a result of
    a chunk already received, outside this exchange, or not sent yet: a result cannot precede
    its contribution, so it is forged, and with ``out is x`` taking it would overwrite input
    not yet quantised).

    ``keep`` (a list; RESULT filters): well-formed CONTRIBUTION datagrams from ``source`` are
    appended to it (as bytes, at most ``KEEP_MAX`` in it) and counted as ``kept``, not as
    malformed: copies another site passed through its FPGA to our hosts (a ring step, an
    all-gather) that came while this exchange ran, e.g. a ring predecessor's first steps during
    the scale agreement; the call's next phase takes them (``host/sharded_allreduce._run_phase``)
    instead of NACKing them after a silence (issue 15 review: slow local ring rounds).
    """

    def __init__(self, *, job: int, group: int, round_id: int, exp: int, first: int,
                 counts: list[int] | np.ndarray, done: bytearray, source: tuple[str, int],
                 session: int = 0, msg_type: int = _RESULT,
                 keep: list[bytes] | None = None) -> None:
        self.job, self.group, self.round_id, self.exp = job, group, round_id, exp
        self.session = session
        self.msg_type = msg_type  # RESULT; CONTRIBUTION for a passed-through all-gather copy
        self.keep = keep if msg_type != _CONTRIBUTION else None
        self.kept = 0
        self.first, self.done = first, done
        self.counts = np.asarray(counts, np.int64)
        self._done = np.frombuffer(done, np.uint8)  # the same bytes, for vectorised look-ups
        self.source = source
        self.n = len(self.counts)
        self.foreign = self.malformed = self.stray = self.duplicate = 0
        self.heard = False  # something came from the aggregator
        self._templates: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._masked = np.zeros((64, _PADDED), np.uint8)  # scratch: a batch's masked headers
        self._counts = self.counts.tolist()
        # chunks 0 .. uniform-1 all have counts[0] elements (all but a tensor's short last one)
        self._uniform = int(np.argmax(self.counts != self.counts[0])) or self.n

    def _template(self, count: int) -> tuple[np.ndarray, np.ndarray]:
        """(words, mask) of the header of a result of this call with ``count`` elements and no
        OVERFLOW flag, derived from ``wire.AGG_HEADER_DTYPE``: the header's bytes zero-padded to
        three 64-bit words, so a batch of headers is compared in a few NumPy calls."""
        t = self._templates.get(count)
        if t is None:
            rec, mask = np.zeros((), wire.AGG_HEADER_DTYPE), np.zeros((), wire.AGG_HEADER_DTYPE)
            # every field a result of this call carries unchanged (flags and chunk vary)
            for name, v in (("magic", wire.MAGIC), ("version", wire.VERSION), ("msg_type", self.msg_type),
                            ("group_id", self.group), ("job_id", self.job),
                            ("round_id", self.round_id), ("scale_exp", self.exp),
                            ("element_count", count), ("session", self.session)):
                rec[name] = v
                mask[name] = -1 if wire.FIELD[name].signed else np.iinfo(mask[name].dtype).max
            mask["flags"] = int(wire.Flags.OVERFLOW)  # no OVERFLOW (those go the full way)
            words = np.zeros((2, _PADDED), np.uint8)
            words[0, :_HDR] = rec.reshape(1).view(np.uint8)
            words[1, :_HDR] = mask.reshape(1).view(np.uint8)
            t = self._templates[count] = (words[0].view(np.uint64), words[1, :_HDR])
        return t

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

    def accept(self, buf, off: int, count: int, size: int, sent: int | None = None) -> Accepted:
        """Filter ``count`` datagrams of ``size`` bytes each at ``buf[off:]`` (from the
        aggregator; one block of :func:`blocks`), of which chunks ``>= sent`` (default: all
        chunks sent) were not sent yet; counts what is ignored and returns what to take.

        Raises :class:`ResultMismatch` for a result of this call's job, round and group for one
        of its sent chunks with another scale or element count: the aggregator completed the
        chunk with contributions that disagree with ours, which only a misconfiguration explains
        (members using different scales, tensor lengths or packet sizes).
        """
        cnt_e, odd = divmod(size - _HDR, 4)
        if cnt_e < 1 or odd:  # no header and whole elements: no result, whatever it says
            self.malformed += count
            return _NONE
        h = np.ndarray((count,), wire.AGG_HEADER_DTYPE, buf, off, (size,))
        pay = np.ndarray((count, cnt_e), _EDT, buf, off + _HDR, (size, 4))
        want, mask = self._template(cnt_e)
        if len(self._masked) < count:
            self._masked = np.zeros((count, _PADDED), np.uint8)
        m = self._masked[:count]
        np.bitwise_and(np.ndarray((count, _HDR), np.uint8, buf, off, (size, 1)), mask, out=m[:, :_HDR])
        if not np.count_nonzero(m.view(np.uint64) != want):
            # the usual batch: every one a result of this call; in order without a gap?
            ch = h["chunk"]
            c0 = int(ch[0])
            lo = (c0 - self.first) & 0xFFFFFFFF
            hi = lo + count
            lim = self.n if sent is None else min(self.n, sent)
            if (hi <= lim and self.done.find(1, lo, hi) < 0
                    and ((cnt_e == self._counts[0] and hi <= self._uniform)
                         or (count == 1 and cnt_e == self._counts[lo]))
                    and (count == 1 or not np.count_nonzero(ch[1:] - ch[:-1] != 1))):
                return Accepted(np.arange(lo, hi), h["flags"], pay, cnt_e, lo)
            i = (ch.astype(np.int64) - self.first) & 0xFFFFFFFF
            rows = np.arange(count)
        else:
            cnt = h["element_count"]
            good = (h["magic"] == wire.MAGIC) & (h["version"] == wire.VERSION) & (cnt == cnt_e)
            ok = good & (h["msg_type"] == self.msg_type)
            kept = (0 if self.keep is None else
                    self._keep(buf, off, size, good & (h["msg_type"] == _CONTRIBUTION)))
            # ---- the one place where a result's header is compared with this call ----
            # (a result of another session is another run's: stray, docs/protocol.md "Sessions")
            ours = ((h["job_id"] == self.job) & (h["round_id"] == self.round_id)
                    & (h["group_id"] == self.group) & (h["session"] == self.session))
            self.malformed += count - int(np.count_nonzero(ok)) - kept
            self.stray += int(np.count_nonzero(ok & ~ours))
            rows = np.flatnonzero(ok & ours)
            i = (h["chunk"][rows].astype(np.int64) - self.first) & 0xFFFFFFFF
        inside = i < (self.n if sent is None else min(self.n, sent))
        inside[inside] = self._done[i[inside]] == 0
        if len(rows) > 1 and not (i[1:] > i[:-1]).all():
            # a chunk twice in one batch (a resent result): the first one counts
            _, firsts = np.unique(i, return_index=True)
            once = np.zeros(len(rows), bool)
            once[firsts] = True
            inside &= once
        rows, i = rows[inside], i[inside]
        self.duplicate += len(inside) - len(rows)
        if len(rows) == 0:
            return _NONE
        sc = h["scale_exp"][rows]
        bad = (self.counts[i] != cnt_e) | (sc != self.exp)
        if bad.any():
            j = int(np.argmax(bad))
            raise ResultMismatch(
                f"job {self.job} round {self.round_id} group {self.group} chunk "
                f"{int(h['chunk'][rows[j]])}: the aggregator's result (scale {int(sc[j])}, {cnt_e} "
                f"elements) does not match the contribution (scale {self.exp}, "
                f"{int(self.counts[i[j]])} elements): members disagree on the scale, the tensor "
                f"length or the elements per packet"
            )
        if len(rows) < count:
            pay = pay[rows]  # a copy of the accepted ones only (ignored datagrams in the batch)
        return Accepted(i, h["flags"][rows], pay, cnt_e)

    def _keep(self, buf, off: int, size: int, copies: np.ndarray) -> int:
        """Append the datagrams of the block marked in ``copies`` to ``keep`` (class docstring)
        and return how many; those beyond ``KEEP_MAX`` are not kept (counted as malformed)."""
        rows = np.flatnonzero(copies)[: max(0, KEEP_MAX - len(self.keep))]
        for r in rows.tolist():
            at = off + r * size
            self.keep.append(bytes(buf[at:at + size]))
        self.kept += len(rows)
        return len(rows)

    def check(self, buf, off: int, k: int) -> tuple[int, int]:
        """One datagram of ``k`` bytes at ``buf[off:]`` (from the aggregator): ``(chunk index,
        flags)`` of a result to take, or ``(IGNORE, 0)``; :meth:`accept` for one datagram."""
        a = self.accept(buf, off, 1, k)
        return (int(a.index[0]), int(a.flags[0])) if len(a.index) else (IGNORE, 0)


_NONE = Accepted(np.zeros(0, np.int64), np.zeros(0, np.uint8), np.zeros((0, 0), _EDT), 0)
