"""Register read/write client over CONTROL messages (register map: ``wanreduce.regs``).

A CONTROL datagram carries N operations of two little-endian 32-bit words (``word0 = WRITE bit
31 | address``, ``word1 = value``; ``element_count = 2N``); the aggregator answers with a
CONTROL_REPLY echoing the operations with ``word1`` = the register value after the operation.
The request's ``chunk`` field carries a sequence number that the reply echoes, so late replies
of a retried request are recognised and ignored. The same client configures the software
aggregator and the RTL core (through its UDP bridge) — it never knows which one answers.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from collections.abc import Iterable, Sequence

from wanreduce import regs, wire
from wanreduce.model import Drop, Outcome
from wanreduce.packetize import AGG_HEADER_STRUCT

from .rtt import RttEstimator
from .transport import MAX_DATAGRAM, Address, UdpTransport, resolve

_HDR = wire.AGG_HEADER_BYTES
# A random start: where every reply reaches every client (the RTL loopback's bridge), another
# process's reply is unlikely to carry one of our numbers (replies are matched by number).
_seq = itertools.count(random.randrange(1, 1 << 31))


class ControlTimeout(TimeoutError):
    """The aggregator did not answer a CONTROL message."""


class ControlClient:
    """Reads and writes aggregator registers.

    ``timeout``: longest time one CONTROL message may take, resends included (the caller's
    budget; ``transact`` and ``read_many`` take a per-call override). Within it the message is
    resent whenever the retransmission timer expires: an :class:`RttEstimator` started at
    ``initial_rto``, fed by the reply latency of messages answered on their first transmission
    and doubled per expiry, so a slow aggregator (a loaded simulator) is waited for rather than
    flooded; within one message at most ``timeout`` / 8 apart (an aggregator that starts late
    is found soon after it is up, however long the client has waited). ``retries``: at most this many resends per message (None: as many as fit).
    """

    def __init__(
        self,
        aggregator: Address,
        *,
        timeout: float = 5.0,
        initial_rto: float = 0.25,
        min_rto: float = 0.01,
        max_rto: float = 60.0,
        retries: int | None = None,
        max_ops: int = 32,
        bind_host: str = "0.0.0.0",
    ) -> None:
        if not (math.isfinite(timeout) and timeout > 0):
            raise ValueError(f"timeout must be a finite number > 0 s, got {timeout}")
        if retries is not None and retries < 0:
            raise ValueError(f"retries must be >= 0 (or None), got {retries}")
        if max_ops < 1:
            raise ValueError(f"max_ops must be >= 1, got {max_ops}")
        self.aggregator = resolve(*aggregator)
        self.timeout, self.retries, self.max_ops = timeout, retries, max_ops
        self.timer = RttEstimator(initial_rto, min_rto=min_rto, max_rto=max_rto)
        self.resends = 0  # messages sent again after their timer expired (cumulative)
        self.transport = UdpTransport(bind=(bind_host, 0), buffer_bytes=1 << 20)
        self._buf = bytearray(MAX_DATAGRAM)

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- raw operations ----
    def transact(self, ops: Sequence[tuple[int, int | None]], *, timeout: float | None = None) -> list[int]:
        """Run ``(address, value or None for a read)`` operations in order; returns the values
        after each operation. Split into messages of at most ``max_ops`` operations, each
        allowed ``timeout`` s (default: the client's)."""
        out: list[int] = []
        for k in range(0, len(ops), self.max_ops):
            out += self._message(ops[k : k + self.max_ops], self.timeout if timeout is None else timeout)
        return out

    def _request(self, ops: Sequence[tuple[int, int | None]]) -> tuple[int, bytes]:
        """A CONTROL datagram running ``ops``, with a fresh sequence number: (seq, datagram)."""
        words = wire.control_words([(value is not None, addr, value or 0) for addr, value in ops])
        seq = next(_seq) & 0xFFFFFFFF
        return seq, AGG_HEADER_STRUCT.pack(
            wire.MAGIC, wire.VERSION, wire.MsgType.CONTROL, 0, 0, 0, 0, seq, 0, 0, 2 * len(ops), 0
        ) + words.astype("<i4").tobytes()

    def _reply(self, n: int) -> tuple[int, list[int]] | None:
        """The (seq, values) of a CONTROL_REPLY of ``n`` bytes in the receive buffer, or None
        for anything else (a stray or truncated datagram is ignored, as a late reply is)."""
        if n < _HDR:
            return None
        h = AGG_HEADER_STRUCT.unpack_from(self._buf)
        if h[0] != wire.MAGIC or h[2] != wire.MsgType.CONTROL_REPLY or n != _HDR + 4 * h[10] or h[10] % 2:
            return None
        return h[7], wire.reply_values(self._buf[_HDR:n])

    def post(self, ops: Sequence[tuple[int, int | None]]) -> int:
        """Send one CONTROL message without waiting for its reply (see ``replies``); returns its
        sequence number. Not resent: the caller decides what a missing reply means."""
        seq, msg = self._request(ops)
        self.transport.send_to(msg, self.aggregator)
        return seq

    def replies(self) -> list[tuple[int, list[int]]]:
        """Every CONTROL_REPLY waiting on the socket, as (sequence number, values); never waits."""
        out = []
        while (got := self.transport.recv_into(self._buf)) is not None:
            r = self._reply(got[0])
            if r is not None:
                out.append(r)
        return out

    def _message(self, ops: Sequence[tuple[int, int | None]], timeout: float) -> list[int]:
        seq, msg = self._request(ops)
        rtt = self.timer
        start = time.monotonic()
        end = start + timeout
        attempts = 0
        while True:
            sent = time.monotonic()
            self.transport.send_to(msg, self.aggregator)
            attempts += 1
            # the backed-off timer, but at most an eighth of the budget: a message that waits
            # for an aggregator still starting (clients may start first) is asked again
            # regularly until its timeout, so the aggregator is found within timeout / 8 of
            # coming up, not one doubled interval later (up to twice its start-up time, and
            # never when it came up after the last doubling that fitted in the timeout)
            expiry = min(end, sent + rtt.rto_at_most(timeout / 8))
            while True:
                got = self.transport.recv_into(self._buf)
                if got is None:
                    left = expiry - time.monotonic()
                    if left <= 0 or not self.transport.wait_readable(left):
                        break
                    continue
                r = self._reply(got[0])
                if r is None or r[0] != seq:  # stray, or a late reply of an earlier message
                    continue
                if len(r[1]) != len(ops):
                    raise ValueError(f"malformed CONTROL_REPLY: {len(r[1])} operations, sent {len(ops)}")
                if attempts == 1:  # Karn's rule: a reply to a resent message is no sample
                    rtt.sample(time.monotonic() - sent)
                return r[1]
            if time.monotonic() >= end or (self.retries is not None and attempts > self.retries):
                break
            rtt.expired()
            self.resends += 1
        raise ControlTimeout(
            f"aggregator {self.aggregator[0]}:{self.aggregator[1]} did not answer a CONTROL "
            f"message within {time.monotonic() - start:.3g} s ({attempts} attempt(s), "
            f"timeout {timeout:g} s)"
        )

    def read(self, addr: int) -> int:
        return self.transact([(addr, None)])[0]

    def write(self, addr: int, value: int) -> int:
        return self.transact([(addr, value)])[0]

    def read_many(self, addrs: Iterable[int], *, timeout: float | None = None) -> list[int]:
        return self.transact([(a, None) for a in addrs], timeout=timeout)

    # ---- configuration ----
    def ping(self, *, timeout: float | None = None) -> bool:
        """True when the aggregator answers (within ``timeout``, default the client's) and
        identifies as a wanreduce core."""
        try:
            return self.transact([(regs.ID, None)], timeout=timeout)[0] == regs.CORE_ID
        except ControlTimeout:
            return False

    def params(self) -> dict[str, int]:
        """Decoded PARAMS0/PARAMS1: ports, width_words, log2_slots, groups, elements, jobs."""
        p0, p1 = self.read_many([regs.PARAMS0, regs.PARAMS1])
        return {
            "ports": p0 & 0xFF,
            "width_words": (p0 >> 8) & 0xFF,
            "log2_slots": (p0 >> 16) & 0xFF,
            "groups": (p0 >> 24) & 0xFF,
            "elements": p1 & 0xFFFF,
            "jobs": (p1 >> 16) & 0xFFFF,
        }

    def set_group(self, group: int, members: Iterable[int]) -> None:
        """Group ``group`` = these sender ids (0..31)."""
        bitmap = 0
        for m in members:
            if not 0 <= m < wire.MAX_SENDERS:
                raise ValueError(f"sender id {m} outside 0..{wire.MAX_SENDERS - 1}")
            bitmap |= 1 << m
        self.write(regs.group(group), bitmap)

    def group_members(self, group: int) -> list[int]:
        bitmap = self.read(regs.group(group))
        return [i for i in range(wire.MAX_SENDERS) if bitmap >> i & 1]

    def set_job(self, job: int, *, enabled: bool = True, log2_window: int, base: int = 0, head: int = 0) -> None:
        """Configure a job's slot region and reset its window to ``head``; verified by read-back.
        A ``base`` or ``log2_window`` beyond its JOBj_CFG field is refused before anything is sent."""
        cfg = regs.pack_job_cfg(enabled=enabled, log2_window=log2_window, base=base)
        got_cfg, _ = self.transact([(regs.job_cfg(job), cfg), (regs.job_head(job), head)])
        if got_cfg != cfg:
            raise ValueError(
                f"aggregator refused job {job} configuration (window 2**{log2_window} at base "
                f"{base} does not fit its slot memory?)"
            )

    def job_window(self, job: int) -> int:
        """Slots of the job's region (W): hosts keep at most W/2 chunks in flight."""
        enabled, log2w, _ = regs.unpack_job_cfg(self.read(regs.job_cfg(job)))
        if not enabled:
            raise ValueError(f"job {job} is not enabled on the aggregator")
        return 1 << log2w

    def chunk_contributors(self, job: int, chunk: int, *, timeout: float | None = None) -> int | None:
        """Contributor bitmap of ``chunk`` of ``job`` while the aggregator holds it unreleased
        (collecting, or complete awaiting in-order release), through JOBj_PROBE /
        JOBj_PROBE_BITMAP; None when it holds no contribution to it (none arrived yet, its
        result was already released, or its slot holds another chunk)."""
        _, bitmap = self.transact(
            [(regs.job_probe(job), chunk & 0xFFFFFFFF), (regs.job_probe_bitmap(job), None)],
            timeout=timeout,
        )
        return bitmap or None

    def reset_window(self, job: int, head: int = 0) -> None:
        self.write(regs.job_head(job), head)

    def set_release_on_completion(self, on: bool) -> None:
        self.write(regs.CTRL, regs.CTRL_RELEASE_ON_COMPLETION if on else 0)

    def memory_error(self, *, timeout: float | None = None) -> tuple[bool, int]:
        """(STATUS.MEM_ERROR, RESULTS_WITHHELD): whether the core's DRAM slot memory has answered
        an AXI error (sticky until the core is reset; the sums it holds are then not to be
        trusted), and how many results the core has withheld since (not sent, never wrong).
        A core with on-chip slots and the software aggregator read (False, 0)."""
        status, withheld = self.read_many([regs.STATUS, regs.RESULTS_WITHHELD], timeout=timeout)
        return bool(status & regs.STATUS_MEM_ERROR), withheld

    def record_error(self, *, timeout: float | None = None) -> bool:
        """STATUS.RECORD_ERROR: a core with ``--slot-memory records`` found its record path
        inconsistent (sticky until the core is reset; its decisions and results are then not to
        be trusted). Other cores and the software aggregator read False."""
        (status,) = self.read_many([regs.STATUS], timeout=timeout)
        return bool(status & regs.STATUS_RECORD_ERROR)

    def counters(self, port: int = 0) -> dict[str, int]:
        """Outcome counters, RESULTS_OUT, CONTROL_IN and the counters of host port ``port``."""
        names = [f"PORT{port}_FRAMES_IN"] + [f"PORT{port}_DROP_{d.name}" for d in Drop]
        addrs = [regs.port_frames_in(port)] + [regs.port_drops(port, d) for d in Drop]
        names += [f"OUTCOME_{o.name}" for o in Outcome] + ["RESULTS_OUT", "CONTROL_IN"]
        addrs += [regs.outcome_counter(o) for o in Outcome] + [regs.RESULTS_OUT, regs.CONTROL_IN]
        return dict(zip(names, self.read_many(addrs), strict=True))
