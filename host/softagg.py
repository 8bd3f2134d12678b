"""Software aggregator: the golden model behind the wanreduce UDP protocol.

``wanreduce serve --backend model`` runs this. It speaks exactly what the FPGA's host-facing
port speaks, minus the Ethernet/IPv4 layer the kernel already handled:

* a datagram = aggregation header + payload; the aggregation-level checks of
  ``model.parse_frame`` are applied in the same order (TRUNCATED below 22 bytes, AGG_HEADER for
  magic/version/message type, ELEMENT_COUNT for 0 or above ``model.element_limit`` (MAX_ELEMENTS
  for contributions, E for CONTROL messages), LENGTH when the datagram
  length disagrees with the element count), each drop counted by reason;
* a well-formed CONTRIBUTION goes to ``model.AggregatorModel.contribute`` (bit-exact with the RTL
  by construction) and every released result is sent to every member of the chunk's group that
  has been seen (sender id -> last source address), emulating the FPGA's multicast result
  stream, or once to the RESULT_IP/RESULT_UDP_PORT registers when RESULT_IP is multicast;
* a CONTROL message reads/writes the register map of ``wanreduce.regs`` and is answered with a
  CONTROL_REPLY to its source, so ``host/control.py`` configures this and the RTL alike.

Its single UDP port is "host port 0" for the port counters. Accounting invariant:
``PORT0_FRAMES_IN == sum(drops) + sum(outcomes) + CONTROL_IN``.
"""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Iterable

import numpy as np

from wanreduce import regs, wire
from wanreduce.model import (
    AggregatorModel,
    Drop,
    Message,
    Outcome,
    ReleaseMode,
    Tag,
    element_limit,
)
from wanreduce.model_fast import contribute_run
from wanreduce.packetize import AGG_HEADER_STRUCT, header_record

from .transport import (  # noqa: F401 - GSO constants re-exported (bench/bench_driver.py)
    GSO_MAX_BYTES,
    GSO_MAX_SEGMENTS,
    MAX_DATAGRAM,
    RX_BATCHES,
    SOL_UDP,
    UDP_SEGMENT,
    Address,
    MulticastOptions,
    UdpTransport,
    gso_batch,
)

_HDR = wire.AGG_HEADER_BYTES
_U32 = 0xFFFFFFFF
_ACCEPTED = (Outcome.AGGREGATED, Outcome.DUPLICATE, Outcome.RESULT_RESENT)
_CONTRIBUTION = int(wire.MsgType.CONTRIBUTION)
_RESULT = int(wire.MsgType.RESULT)
_OVERFLOW = int(wire.Flags.OVERFLOW)
_MAGIC, _VERSION = wire.MAGIC, wire.VERSION
# Header byte columns: the chunk number, and those a run of one sender's batch shares (all but
# the chunk and the flags).
_CHUNK_AT = next(f.agg_offset for f in wire.AGG_FIELDS if f.name == "chunk")
_FLAGS_AT = next(f.agg_offset for f in wire.AGG_FIELDS if f.name == "flags")
# Result header fields that may differ between the slots of one released run, and the
# model's slot-state columns they come from.
_RESULT_FIELDS = (("chunk", Tag.CHUNK), ("job_id", Tag.JOB), ("round_id", Tag.ROUND),
                  ("scale_exp", Tag.SCALE), ("session", Tag.SESSION))
_CHUNK_COLUMNS = slice(_CHUNK_AT, _CHUNK_AT + 4)
_TAG_MASK = np.array([0 if _CHUNK_AT <= i < _CHUNK_AT + 4 or i == _FLAGS_AT else 0xFF
                      for i in range(_HDR)], np.uint8)


class SoftAggregator:
    """One software aggregator on one UDP port (see the module docstring).

    ``serve_forever()`` runs the receive loop in the calling thread; ``start()`` runs it in a
    daemon thread (tests, in-process use) and ``stop()`` ends it.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        slots: int = 64,
        elements: int = wire.DEFAULT_ELEMENTS,
        groups: int = 8,
        jobs: int = 4,
        release: ReleaseMode = ReleaseMode.IN_ORDER,
        join: tuple[str, ...] = (),
        multicast: MulticastOptions | None = None,
        fast: bool = True,
    ) -> None:
        self.fast = fast  # the fast path for common contributions (False: model.contribute only)
        self.model = AggregatorModel(
            slots=slots, elements=elements, groups=groups, jobs=jobs, release=release
        )
        self.transport = UdpTransport(bind=(host, port), join=join, multicast=multicast)
        reg_map = regs.register_map(ports=0, groups=groups, jobs=jobs, elements=elements,
                                    width=0, slots=slots)
        self.regfile: dict[int, int] = {
            r.addr: r.reset for r in reg_map if r.access is regs.Access.RW
        }
        self.constants = {r.addr: r.reset for r in reg_map if r.addr in (regs.PARAMS0, regs.PARAMS1)}
        self.regfile[regs.CTRL] = int(self.model.release == ReleaseMode.ON_COMPLETION)
        self.frames_in = 0
        self.drops = [0] * len(Drop)
        self.control_in = 0
        self._members: dict[int, dict[int, Address]] = {}
        self._dests: dict[int, list[Address]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # held while a batch goes through the model, so that counters() read from another
        # thread is one snapshot (a frame counted in FRAMES_IN has its drop or outcome too)
        self._counting = threading.Lock()
        self._buf = bytearray(MAX_DATAGRAM)  # whole datagrams: n is the true length
        self._rx = bytearray(RX_BATCHES * MAX_DATAGRAM)  # the serve loop's receive buffer
        # Results queued while the serve loop drains its socket (sent in batches, in order).
        self._batching = False
        # runs of k results of one size, back to back in _obuf: (offset, size, k, destinations)
        self._pending: list[tuple[int, int, int, list[Address]]] = []
        self._npend = 0  # results queued
        self._oend = 0
        self._obuf = bytearray(GSO_MAX_SEGMENTS * wire.datagram_bytes(max(elements, 2 * 64)))
        self._omv = memoryview(self._obuf)
        self.transport.enable_gro()  # a segmented batch arrives in one recvmsg
        # Results go in segmented batches while self.transport.gso (cleared if refused).
        self._wake_r, self._wake_w = socket.socketpair()

    # ---- life cycle ----
    @property
    def address(self) -> Address:
        return self.transport.address

    def start(self) -> SoftAggregator:
        """Serve in a daemon thread (idempotent: one receive loop per aggregator)."""
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self.serve_forever, name="softagg", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def close(self) -> None:
        self.stop()
        self.transport.close()
        self._wake_r.close()
        self._wake_w.close()

    def __enter__(self) -> SoftAggregator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- configuration shortcuts (the same effect as CONTROL writes) ----
    def configure(self, *, groups: dict[int, Iterable[int]] | None = None, jobs: Iterable[int] = ()) -> None:
        """Set group memberships (member sender ids) and enable jobs with the full window."""
        for g, members in (groups or {}).items():
            self.model.set_group(g, sum(1 << m for m in members))
        for j in jobs:
            self.model.set_job(j, enabled=True)

    # ---- receive loop ----
    def serve_forever(self) -> None:
        """Receive until stopped: drain the socket, queueing results, and send the queued
        results whenever the socket is empty (or 64 are queued) — in batches of one
        ``sendmsg`` per destination when segmentation offload works. Consecutive GRO batches
        that continue one sender's run (same source, segment size and tag, next chunk) are
        received back to back into one buffer, up to ``RX_BATCHES``, and go through the model
        as one run (``handle_batch``)."""
        sock = self.transport.sock
        mv = memoryview(self._rx)
        cap = len(self._rx) - MAX_DATAGRAM  # room for one more batch below this
        recv = self.transport.recv_batch
        handle_batch = self.handle_batch
        flush = self._flush
        stop = self._stop
        waitset = [sock, self._wake_r]
        self._batching = True
        off = seg0 = 0  # bytes of one sender's run received so far, in segments of seg0
        addr0 = None
        try:
            while not stop.is_set():
                try:
                    got = recv([mv[off:]])
                except OSError:
                    if stop.is_set():
                        break
                    raise
                if got is None:
                    if off:
                        handle_batch(off, seg0, addr0, mv)
                        off = 0
                    flush()
                    select.select(waitset, [], [], 0.5)
                    continue
                n, seg, addr = got
                if off and not (seg == seg0 and addr == addr0 and self._continues(mv, off, seg)):
                    handle_batch(off, seg0, addr0, mv)  # the run so far, then this batch alone
                    handle_batch(n, seg, addr, mv[off : off + n])
                    off = 0
                    continue
                if n > seg and n % seg == 0 and off + n <= cap:  # full segments: may go on
                    off += n
                    seg0, addr0 = seg, addr
                    continue
                handle_batch(off + n, seg, addr, mv)
                off = 0
        finally:
            self._batching = False
            if off:
                handle_batch(off, seg0, addr0, mv)
            flush()

    def _continues(self, mv: memoryview, off: int, seg: int) -> bool:
        """The datagram at ``off`` has the tag of the run from 0 (every header byte but the
        chunk number and flags) and the chunk after the run's last one (at ``off - seg``)."""
        at = slice(off + _CHUNK_AT, off + _CHUNK_AT + 4)
        last = slice(off - seg + _CHUNK_AT, off - seg + _CHUNK_AT + 4)
        return (
            int.from_bytes(mv[at], "big") == (int.from_bytes(mv[last], "big") + 1) & _U32
            and mv[:_FLAGS_AT] == mv[off : off + _FLAGS_AT]
            and mv[_FLAGS_AT + 1 : _CHUNK_AT] == mv[off + _FLAGS_AT + 1 : off + _CHUNK_AT]
            and mv[_CHUNK_AT + 4 : _HDR] == mv[off + _CHUNK_AT + 4 : off + _HDR]
        )

    def handle_batch(self, n: int, seg: int, addr: Address, data: memoryview) -> None:
        """Process a GRO batch: ``n`` bytes of ``data`` in datagrams of ``seg`` bytes (the last
        may be shorter) from ``addr``. A run of one sender's contributions to consecutive
        chunks goes through the model at once (``_handle_run``), anything else one by one. Under
        the counters' lock (``counters`` is one snapshot between batches; its cost on this path
        is measured by ``bench/bench_softagg.py --in-process``, docs/benchmarks.md)."""
        with self._counting:
            self._handle_batch(n, seg, addr, data)

    def _handle_batch(self, n: int, seg: int, addr: Address, data: memoryview) -> None:
        """``handle_batch`` without the lock."""
        if self.fast and self._handle_run(data, n, seg, addr):
            return
        for off in range(0, n, seg):
            self.handle_datagram(min(seg, n - off), addr, data[off : min(n, off + seg)])

    def handle_datagram(self, n: int, addr: Address, data: bytes | bytearray | None = None) -> None:
        """Process one datagram of ``n`` bytes (in the receive buffer, or ``data``) from ``addr``."""
        buf = self._buf if data is None else data
        self.frames_in += 1
        if n < _HDR:
            self.drops[Drop.TRUNCATED] += 1
            return
        magic, version, typ, flags, grp, job, rnd, chunk, sender, scale, count, ses = (
            AGG_HEADER_STRUCT.unpack_from(buf)
        )
        if (
            typ == _CONTRIBUTION
            and magic == _MAGIC
            and version == _VERSION
            and 0 < count <= self.regfile[regs.MAX_ELEMENTS]
            and n == _HDR + 4 * count
        ):  # a well-formed contribution (every check below passes)
            payload = np.frombuffer(buf, wire.ELEMENT_DTYPE, count, _HDR)
            if self.fast:
                released = contribute_run(self.model, grp, job, rnd, chunk, sender, scale,
                                          count, ses, payload.reshape(1, count))
                if released is not None:
                    self._accepted(grp, sender, addr, released)
                    return
            msg = Message(typ, flags, grp, job, rnd, chunk, sender, scale, count, payload, ses)
            outcome, results = self.model.contribute(msg)
            if outcome in _ACCEPTED:
                self._note_member(grp, sender, addr)
            for r in results:
                self._send_result(r)
            return
        if (
            magic != wire.MAGIC
            or version != wire.VERSION
            or typ not in (wire.MsgType.CONTRIBUTION, wire.MsgType.CONTROL)
        ):
            self.drops[Drop.AGG_HEADER] += 1
            return
        limit = element_limit(typ, max_elements=self.regfile[regs.MAX_ELEMENTS],
                              elements=self.model.elements)
        if count == 0 or count > limit:
            self.drops[Drop.ELEMENT_COUNT] += 1
            return
        if n != _HDR + 4 * count:
            self.drops[Drop.LENGTH] += 1
            return
        self._flush()  # queued results go out before the reply, as without batching
        self._control(buf, count, addr, (flags, grp, job, rnd, chunk, sender, scale, ses))

    def _note_member(self, grp: int, sender: int, addr: Address) -> None:
        """Results of ``grp`` go to ``addr`` for ``sender`` (after an accepted contribution)."""
        members = self._members.get(grp)
        if members is None or members.get(sender) != addr:
            self._members.setdefault(grp, {})[sender] = addr
            self._dests[grp] = list(dict.fromkeys(self._members[grp].values()))

    def _accepted(self, grp: int, sender: int, addr: Address, released: np.ndarray) -> None:
        """After a fast-path contribution: note the member, queue the released results (slot
        rows of the model, in order)."""
        mem = self._members.get(grp)
        if mem is None or mem.get(sender) != addr:
            self._note_member(grp, sender, addr)
        if len(released):
            self._queue_slots(released)

    def _handle_run(self, mv: memoryview, n: int, seg: int, addr: Address) -> bool:
        """A GRO batch (or several received back to back) of ``n`` bytes in segments of
        ``seg``: if its full segments are well-formed contributions of one sender and tag to
        consecutive chunks, process them through ``model_fast.contribute_run`` in pieces of at
        most the job's window, then one by one whatever a piece declined (from there on) and
        the short last segment, if any; returns False, having changed nothing, when the first
        piece is declined or the batch is not such a run."""
        k = n // seg
        count = (seg - _HDR) // 4
        if k < 2 or seg != _HDR + 4 * count:
            return False
        magic, version, typ, _fl, grp, job, rnd, chunk, sender, scale, cnt, ses = (
            AGG_HEADER_STRUCT.unpack_from(mv)
        )
        if not (
            typ == _CONTRIBUTION and magic == _MAGIC and version == _VERSION
            and cnt == count and 0 < count <= self.regfile[regs.MAX_ELEMENTS]
        ):
            return False
        rows = np.ndarray((k, seg), np.uint8, mv, 0, (seg, 1))
        hdr = rows[:, :_HDR]
        # every header byte but the chunk number (and flags: RETRANSMIT does not matter)
        if ((hdr ^ hdr[0]) & _TAG_MASK).any():
            return False
        chunks = hdr[:, _CHUNK_COLUMNS].copy().view(">u4")[:, 0]
        if not (chunks - np.uint32(chunk) == np.arange(k, dtype=np.uint32)).all():
            return False
        payloads = rows[:, _HDR:].view(wire.ELEMENT_DTYPE)
        m = self.model
        piece = m.job_table[job].window if job < m.n_jobs else k
        done = 0
        while done < k:
            p = min(piece, k - done)
            released = contribute_run(m, grp, job, rnd, (chunk + done) & _U32, sender, scale,
                                      count, ses, payloads[done : done + p])
            if released is None:
                break
            self.frames_in += p
            self._accepted(grp, sender, addr, released)
            done += p
        if not done:
            return False
        for o in range(done * seg, n, seg):  # what was declined, one by one; a short last one
            self.handle_datagram(min(seg, n - o), addr, mv[o : min(n, o + seg)])
        return True

    def _queue_slots(self, released: np.ndarray) -> None:
        """Queue the results held in the model's slot rows ``released`` (just released, in
        order): a run of results of one group and element count is written into the batch
        buffer with one NumPy operation per header field and one gather of the payloads from
        the model's slot memory; otherwise (or outside the serve loop) one by one."""
        t = self.model.tags[released]
        count, group = int(t[0, Tag.COUNT]), int(t[0, Tag.GROUP])
        if (
            not self._batching  # outside the serve loop each result is sent at once
            or len(released) == 1
            or (t[:, Tag.COUNT] != count).any() or (t[:, Tag.GROUP] != group).any()
            or wire.is_multicast(self.regfile[regs.RESULT_IP])
        ):
            data = self.model.data
            for row, f in zip(released.tolist(), t.tolist(), strict=True):
                self._queue(
                    _OVERFLOW if f[Tag.OVERFLOW] else 0, f[Tag.GROUP], f[Tag.JOB],
                    f[Tag.ROUND], f[Tag.CHUNK], f[Tag.SCALE], data[row], f[Tag.COUNT],
                    f[Tag.SESSION],
                )
            return
        size = _HDR + 4 * count
        cap = min(GSO_MAX_SEGMENTS, len(self._obuf) // size)
        template = header_record(_RESULT, group, int(t[0, Tag.JOB]), int(t[0, Tag.ROUND]),
                                 self.regfile[regs.SITE_ID] & 0xFF, int(t[0, Tag.SCALE]), count,
                                 int(t[0, Tag.SESSION]))
        dests = self._dests.get(group, [])
        for i in range(0, len(released), cap):
            k = min(cap, len(released) - i)
            if self._npend + k > GSO_MAX_SEGMENTS or self._oend + k * size > len(self._obuf):
                self._flush()
            o = self._oend
            rows = np.ndarray((k, size), np.uint8, self._obuf, o)
            hdr = rows[:, :_HDR].view(wire.AGG_HEADER_DTYPE)[:, 0]
            hdr[:] = template
            f = t[i : i + k]
            for name, col in _RESULT_FIELDS:
                hdr[name] = f[:, col]
            hdr["flags"] = f[:, Tag.OVERFLOW] * _OVERFLOW
            np.take(self.model.data[:, :count], released[i : i + k], axis=0,
                    out=rows[:, _HDR:].view(wire.ELEMENT_DTYPE))
            self._pending.append((o, size, k, dests))
            self._npend += k
            self._oend = o + k * size

    def _send_result(self, r) -> None:
        """A result released by ``model.contribute`` to the group's destinations."""
        self._queue(
            r.flags, r.group_id, r.job_id, r.round_id, r.chunk, r.scale_exp, r.payload,
            len(r.payload), r.session,
        )

    def _queue(self, flags, group, job, rnd, chunk, scale, data, count, session) -> None:
        """Queue one result (copied: its slot may be reused before the flush) for its group's
        destinations as they are now (the multicast result address, or the members). Outside
        the serve loop (which flushes when its socket is empty) it is sent at once."""
        size = _HDR + 4 * count
        o = self._oend
        if self._npend >= GSO_MAX_SEGMENTS or o + size > len(self._obuf):
            self._flush()
            o = 0
        obuf = self._obuf
        AGG_HEADER_STRUCT.pack_into(
            obuf, o, _MAGIC, _VERSION, _RESULT, flags, group, job, rnd, chunk,
            self.regfile[regs.SITE_ID] & 0xFF, scale, count, session,
        )
        np.frombuffer(obuf, wire.ELEMENT_DTYPE, count, o + _HDR)[:] = data[:count]
        rip = self.regfile[regs.RESULT_IP]
        if wire.is_multicast(rip):
            dests = [(wire.int_to_ip(rip), self.regfile[regs.RESULT_UDP_PORT])]
        else:
            dests = self._dests.get(group, [])  # replaced, never mutated, when members change
        self._pending.append((o, size, 1, dests))
        self._npend += 1
        self._oend = o + size
        if not self._batching:
            self._flush()

    def _flush(self) -> None:
        """Send the queued results in order: runs of equal-size results for the same
        destinations (the last of a run may be shorter) go as one segmented sendmsg each."""
        pend = self._pending
        if not pend:
            return
        mv = self._omv
        n = len(pend)
        i = 0
        while i < n:
            o, size, k, dests = pend[i]
            i += 1
            limit = gso_batch(size) if self.transport.gso else 1
            while k > limit:  # whole batches of this run first
                for dest in dests:
                    self.transport.send_segments(mv[o : o + limit * size], size, dest)
                o += limit * size
                k -= limit
            end = o + k * size
            while i < n and pend[i][3] is dests and pend[i][0] == end and (
                (pend[i][1] == size and k + pend[i][2] <= limit)
                or (pend[i][1] < size and pend[i][2] == 1 and k < limit)  # a shorter last one
            ):
                short = pend[i][1] < size
                end += pend[i][1] * pend[i][2]
                k += pend[i][2]
                i += 1
                if short:
                    break
            for dest in dests:
                self.transport.send_segments(mv[o:end], size, dest)
        pend.clear()
        self._npend = 0
        self._oend = 0

    # ---- control ----
    def _control(self, buf, count: int, addr: Address, hdr: tuple) -> None:
        """Execute the operations in order; reply like the RTL (docs/protocol.md): the request
        echoed with msg_type CONTROL_REPLY, sender_id = SITE_ID, each operation's word1 = the
        register's value after it, an odd trailing word echoed but not executed."""
        words = np.frombuffer(buf, "<u4", count, _HDR).copy()
        self.control_in += 1
        for k in range(self._probe_pairs(words, count // 2), count // 2):
            word0, value = int(words[2 * k]), int(words[2 * k + 1])
            a = word0 & wire.CONTROL_ADDR_MASK
            if word0 & wire.CONTROL_WRITE:
                self.write_register(a, value)
            words[2 * k + 1] = self.read_register(a)
        flags, grp, job, rnd, chunk, _sender, scale, ses = hdr
        reply = AGG_HEADER_STRUCT.pack(
            wire.MAGIC, wire.VERSION, wire.MsgType.CONTROL_REPLY, flags, grp, job, rnd, chunk,
            self.regfile[regs.SITE_ID] & 0xFF, scale, count, ses,
        )
        self.transport.send_to(reply + words.tobytes(), addr)

    def _probe_pairs(self, words: np.ndarray, n_ops: int) -> int:
        """Execute the message's leading probe pairs at once — (write JOBj_PROBE = chunk, read
        JOBj_PROBE_BITMAP), as a driver's loss-recovery question asks about every chunk in
        flight — with the same effect and reply words as one by one; returns how many
        operations that was (0: the message does not start with one)."""
        w0 = int(words[0]) if n_ops >= 2 else 0
        a = w0 & wire.CONTROL_ADDR_MASK
        j, off = divmod(a - regs.JOB_BASE, regs.JOB_STRIDE)
        if not (w0 & wire.CONTROL_WRITE and 0 <= j < self.model.n_jobs
                and off == regs.JOB_PROBE_OFFSET):
            return 0
        pairs = n_ops // 2
        w = words[: 4 * pairs].reshape(pairs, 4)  # word0, value of the write; of the read
        ok = (w[:, 0] == w0) & (w[:, 2] == a - regs.JOB_PROBE_OFFSET + regs.JOB_PROBE_BITMAP_OFFSET)
        p = pairs if ok.all() else int(ok.argmin())
        if p:
            chunks = w[:p, 1].astype(np.int64)
            self.regfile[a] = int(chunks[-1])
            w[:p, 3] = self.model.probe_bitmaps(j, chunks)  # the write's word1 stays: the value
        return 2 * p

    def write_register(self, addr: int, value: int) -> None:
        """A CONTROL write: configuration registers take effect at once; RO writes are ignored."""
        value &= _U32
        m = self.model
        if regs.GROUP_BASE <= addr < regs.GROUP_BASE + m.n_groups:
            m.set_group(addr - regs.GROUP_BASE, value)
        elif regs.JOB_BASE <= addr < regs.JOB_BASE + regs.JOB_STRIDE * m.n_jobs:
            j, off = divmod(addr - regs.JOB_BASE, regs.JOB_STRIDE)
            if off == regs.JOB_CFG_OFFSET:
                enabled, log2w, base = regs.unpack_job_cfg(value)
                try:
                    m.set_job(j, enabled=enabled, base=base, log2_window=log2w)
                except ValueError:
                    pass  # a window that does not fit the slot memory: keep the old setting
            elif off == regs.JOB_HEAD_OFFSET:
                m.reset_window(j, value)
            elif off == regs.JOB_PROBE_OFFSET:
                self.regfile[addr] = value
        elif addr == regs.CTRL:
            self.regfile[addr] = value & regs.CTRL_RELEASE_ON_COMPLETION
            m.release = (
                ReleaseMode.ON_COMPLETION
                if value & regs.CTRL_RELEASE_ON_COMPLETION
                else ReleaseMode.IN_ORDER
            )
        elif addr == regs.MAX_ELEMENTS:
            self.regfile[addr] = min(value, m.elements)
        elif addr in self.regfile:
            self.regfile[addr] = value

    def read_register(self, addr: int) -> int:
        """A CONTROL read (unknown addresses read 0)."""
        m = self.model
        if addr == regs.ID:
            return regs.CORE_ID
        if addr in (regs.PARAMS0, regs.PARAMS1):  # constants (no ports, no bus: P = W = 0)
            return self.constants[addr]
        if regs.GROUP_BASE <= addr < regs.GROUP_BASE + m.n_groups:
            return m.group_table[addr - regs.GROUP_BASE]
        if regs.JOB_BASE <= addr < regs.JOB_BASE + regs.JOB_STRIDE * m.n_jobs:
            j, off = divmod(addr - regs.JOB_BASE, regs.JOB_STRIDE)
            job = m.job_table[j]
            if off == regs.JOB_CFG_OFFSET:
                return regs.pack_job_cfg(
                    enabled=job.enabled, log2_window=job.log2_window, base=job.base
                )
            if off == regs.JOB_HEAD_OFFSET:
                return job.head
            if off == regs.JOB_PROBE_BITMAP_OFFSET:
                return m.probe_bitmap(j, self.regfile[regs.job_probe(j)])
            return self.regfile[addr]  # JOBj_PROBE
        if addr == regs.port_frames_in(0):
            return self.frames_in & _U32
        if regs.port_drops(0, Drop(0)) <= addr <= regs.port_drops(0, Drop(len(Drop) - 1)):
            return self.drops[addr - regs.port_drops(0, Drop(0))] & _U32
        if regs.outcome_counter(Outcome(0)) <= addr <= regs.outcome_counter(Outcome(len(Outcome) - 1)):
            return m.counters[Outcome(addr - regs.OUTCOME_COUNTER_BASE)] & _U32
        if addr == regs.RESULTS_OUT:
            return m.results_out & _U32
        if addr == regs.CONTROL_IN:
            return self.control_in & _U32
        return self.regfile.get(addr, 0)

    # ---- status ----
    def counters(self) -> dict[str, int]:
        """Every counter by register name (what a CONTROL read of them would return): one
        snapshot between two batches, so the accounting identity holds whenever it is read."""
        with self._counting:
            out = {"PORT0_FRAMES_IN": self.frames_in}
            out.update({f"PORT0_DROP_{d.name}": self.drops[d] for d in Drop})
            out.update({f"OUTCOME_{o.name}": self.model.counters[o] for o in Outcome})
            out["RESULTS_OUT"] = self.model.results_out
            out["CONTROL_IN"] = self.control_in
        return out
