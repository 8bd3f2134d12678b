"""Golden model of the aggregator core: the executable specification the RTL must match.

Two halves, each used by the RTL test benches (bit-exact comparison, counters included) and by
the software aggregator (``wanreduce serve --backend model``):

* :func:`parse_frame` — the ingress checks of one port: a frame is either a well-formed message
  or dropped for exactly one :class:`Drop` reason (the first failing check in enum order).
* :class:`AggregatorModel` — S slots of E int32 elements, contributor bitmaps, group and job
  tables, in-order or on-completion release, lost-result recovery, and an :class:`Outcome` for
  every contribution, so every input is accounted for. Its slot state is two NumPy arrays
  (``tags``: one row of :class:`Tag` columns per slot; ``data``), read and written through
  :class:`Slot` views here and many slots at once by ``model_fast.contribute_run``.

Semantics are documented in docs/protocol.md ("Aggregation semantics").
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass

import numpy as np

from wanreduce import wire
from wanreduce.fixedpoint import saturating_add

SERIAL_HALF = 1 << 31  # chunk numbers compare by serial-number arithmetic (RFC 1982) mod 2**32


class Drop(enum.IntEnum):
    """Ingress drop reasons, in check order (the first failing check names the drop)."""

    FRAME_ERROR = 0  # tuser asserted on any beat (MAC/PHY error, bad FCS)
    TRUNCATED = 1  # shorter than the 64-byte header
    ETHERTYPE = 2  # not IPv4
    IP_HEADER = 3  # version/IHL != 0x45 (options), fragment (MF or offset), protocol != UDP
    IP_CHECKSUM = 4  # IPv4 header checksum wrong
    DESTINATION = 5  # MAC neither ours nor group-addressed, or IP neither ours nor multicast
    UDP_PORT = 6  # destination port not the configured one
    AGG_HEADER = 7  # bad magic/version, or a message type this port does not accept
    ELEMENT_COUNT = 8  # zero or above the configured maximum E
    LENGTH = 9  # IPv4/UDP lengths, element count and frame length disagree


class Outcome(enum.IntEnum):
    """What the reduction stage did with a well-formed contribution."""

    AGGREGATED = 0  # written or added into its slot
    DUPLICATE = 1  # sender's bit already set: ignored (retransmission is harmless)
    REJECT_UNCONFIGURED = 2  # job disabled/unknown, or group unknown/empty
    REJECT_NON_MEMBER = 3  # sender not in the group's bitmap
    REJECT_BUSY = 4  # slot holds another unfinished (or unreleased) chunk
    REJECT_MISMATCH = 5  # same chunk but round/group/scale/count/session differ from the slot's tag
    OUT_OF_WINDOW = 6  # in-order mode: chunk at or beyond head + window
    STALE = 7  # chunk older than what its slot holds now: its result is gone
    RESULT_RESENT = 8  # chunk already released and still held: its result is sent again


class SlotState(enum.IntEnum):
    FREE = 0
    ACTIVE = 1  # collecting contributions
    COMPLETE = 2  # all members in; waiting for in-order release
    RELEASED = 3  # result sent; kept until the slot is reused (lost-result recovery)


class ReleaseMode(enum.IntEnum):
    IN_ORDER = 0
    ON_COMPLETION = 1


@dataclass(frozen=True)
class PortConfig:
    """What the ingress checks compare against (configured from the host side)."""

    local_mac: int = 0x02_00_00_00_00_01
    local_ip: int = 0x0A_00_00_01
    udp_port: int = wire.DEFAULT_UDP_PORT
    max_elements: int = wire.DEFAULT_ELEMENTS  # the MAX_ELEMENTS register
    elements: int = wire.DEFAULT_ELEMENTS  # the core's E (payload memory per message)


def element_limit(msg_type: int, *, max_elements: int, elements: int) -> int:
    """Largest element_count the ELEMENT_COUNT check passes for a message of ``msg_type``.

    Contributions: the MAX_ELEMENTS register (itself at most E). CONTROL messages: E, whatever
    the register holds, so that writing MAX_ELEMENTS <= 1 cannot lock the host out.
    """
    return elements if msg_type == wire.MsgType.CONTROL else max_elements


@dataclass(frozen=True)
class Message:
    """A well-formed message out of the parser: header values and int32 payload."""

    msg_type: int
    flags: int
    group_id: int
    job_id: int
    round_id: int
    chunk: int
    sender_id: int
    scale_exp: int
    element_count: int
    payload: np.ndarray  # int32, element_count long
    session: int = 0  # the run's tag (docs/protocol.md, "Sessions")


def parse_frame(
    data: bytes,
    cfg: PortConfig,
    *,
    frame_error: bool = False,
    accept: tuple[int, ...] = (wire.MsgType.CONTRIBUTION,),
) -> Message | Drop:
    """Apply the ingress checks to one Ethernet frame (no FCS). ``accept``: allowed msg types."""
    if frame_error:
        return Drop.FRAME_ERROR
    if len(data) < wire.HEADER_BYTES:
        return Drop.TRUNCATED
    h, payload = wire.unwrap_frame(data)
    if int(h["eth_type"]) != wire.ETHERTYPE_IPV4:
        return Drop.ETHERTYPE
    if (
        int(h["ip_version_ihl"]) != wire.IPV4_VERSION_IHL
        or (int(h["ip_flags_frag"]) & 0x3FFF) != 0
        or int(h["ip_proto"]) != wire.IPV4_PROTO_UDP
    ):
        return Drop.IP_HEADER
    ip_hdr = data[wire.IPV4_OFFSET : wire.IPV4_OFFSET + wire.IPV4_HEADER_BYTES]
    if wire.ipv4_checksum(ip_hdr) != 0:
        return Drop.IP_CHECKSUM
    mac = int.from_bytes(bytes(h["eth_dst"]), "big")
    ip_dst = int(h["ip_dst"])
    mac_ok = mac == cfg.local_mac or bool(mac & (1 << 40))  # group (I/G) bit
    ip_ok = ip_dst == cfg.local_ip or wire.is_multicast(ip_dst)
    if not (mac_ok and ip_ok):
        return Drop.DESTINATION
    if int(h["udp_dport"]) != cfg.udp_port:
        return Drop.UDP_PORT
    if (
        int(h["magic"]) != wire.MAGIC
        or int(h["version"]) != wire.VERSION
        or int(h["msg_type"]) not in accept
    ):
        return Drop.AGG_HEADER
    count = int(h["element_count"])
    limit = element_limit(int(h["msg_type"]), max_elements=cfg.max_elements, elements=cfg.elements)
    if count == 0 or count > limit:
        return Drop.ELEMENT_COUNT
    ip_len = int(h["ip_total_length"])
    if (
        len(data) != wire.ETH_HEADER_BYTES + ip_len
        or int(h["udp_length"]) != ip_len - wire.IPV4_HEADER_BYTES
        or ip_len != wire.IPV4_HEADER_BYTES + wire.UDP_HEADER_BYTES + wire.datagram_bytes(count)
    ):
        return Drop.LENGTH
    return Message(
        msg_type=int(h["msg_type"]),
        flags=int(h["flags"]),
        group_id=int(h["group_id"]),
        job_id=int(h["job_id"]),
        round_id=int(h["round_id"]),
        chunk=int(h["chunk"]),
        sender_id=int(h["sender_id"]),
        scale_exp=int(h["scale_exp"]),
        element_count=count,
        payload=np.frombuffer(payload, dtype=wire.ELEMENT_DTYPE).astype(np.int32),
        session=int(h["session"]),
    )


@dataclass(frozen=True)
class Result:
    """One result the core emits (toward the local hosts)."""

    job_id: int
    round_id: int
    chunk: int
    group_id: int
    scale_exp: int
    payload: np.ndarray  # int32
    overflow: bool
    resent: bool = False
    session: int = 0

    @property
    def flags(self) -> int:
        return (wire.Flags.OVERFLOW if self.overflow else 0) | (
            wire.Flags.RESENT if self.resent else 0
        )


@dataclass
class Job:
    enabled: bool = False
    base: int = 0  # first slot of the job's region
    log2_window: int = 0  # the region holds 2**log2_window slots
    head: int = 0  # in-order mode: next chunk to release

    @property
    def window(self) -> int:
        return 1 << self.log2_window


class Tag(enum.IntEnum):
    """Columns of the model's slot-state array ``AggregatorModel.tags`` (one row per slot).
    The chunk's tag (what every contribution to it must match) is the last six, contiguous."""

    STATE = 0  # SlotState
    CHUNK = 1
    BITMAP = 2  # contributors so far
    OVERFLOW = 3  # 1 once an add saturated
    JOB = 4
    ROUND = 5
    GROUP = 6
    SCALE = 7
    COUNT = 8
    SESSION = 9


class Slot:
    """One slot: a view of its row of the model's state arrays (``tags``, ``data``).

    The state lives in NumPy arrays so that ``model_fast`` can work on many slots with one
    operation; this view gives the golden model (and tests) the slot's fields by name, as
    Python ints (``state`` a :class:`SlotState`, ``overflow`` a bool).
    """

    __slots__ = ("_t", "data")

    def __init__(self, tags_row: np.ndarray, data_row: np.ndarray) -> None:
        self._t = tags_row
        self.data = data_row

    def __repr__(self) -> str:
        return "Slot(" + ", ".join(f"{t.name.lower()}={int(self._t[t])}" for t in Tag) + ")"


def _tag_property(col: int, conv):
    def get(self: Slot):
        return conv(self._t[col])

    def set_(self: Slot, value) -> None:
        self._t[col] = value

    return property(get, set_)


for _name, _col, _conv in (
    ("state", Tag.STATE, lambda v: SlotState(int(v))),
    ("job_id", Tag.JOB, int),
    ("round_id", Tag.ROUND, int),
    ("chunk", Tag.CHUNK, int),
    ("group_id", Tag.GROUP, int),
    ("scale_exp", Tag.SCALE, int),
    ("count", Tag.COUNT, int),
    ("session", Tag.SESSION, int),
    ("bitmap", Tag.BITMAP, int),
    ("overflow", Tag.OVERFLOW, bool),
):
    setattr(Slot, _name, _tag_property(int(_col), _conv))


def serial_lt(a: int, b: int) -> bool:
    """a < b in 32-bit serial-number arithmetic."""
    return a != b and ((b - a) & 0xFFFFFFFF) < SERIAL_HALF


class AggregatorModel:
    """The reduction/reorder/release semantics of the core for well-formed contributions."""

    def __init__(
        self,
        *,
        slots: int,
        elements: int,
        groups: int = 8,
        jobs: int = 4,
        release: ReleaseMode = ReleaseMode.IN_ORDER,
    ) -> None:
        if slots < 1 or slots & (slots - 1):
            raise ValueError(f"slots must be a power of two, got {slots}")
        if not 1 <= elements <= wire.MAX_ELEMENTS_JUMBO:
            raise ValueError(f"elements must be 1..{wire.MAX_ELEMENTS_JUMBO}, got {elements}")
        if not 1 <= groups <= 256:
            raise ValueError(f"groups must be 1..256, got {groups}")
        if not 1 <= jobs <= 65536:
            raise ValueError(f"jobs must be 1..65536, got {jobs}")
        self.slots, self.elements, self.n_groups, self.n_jobs = slots, elements, groups, jobs
        self.release = ReleaseMode(release)
        self.group_table = [0] * groups
        self.job_table = [Job() for _ in range(jobs)]
        # Slot state: one (S, len(Tag)) int64 array of tags and one (S, E) array of payloads;
        # ``slot[i]`` views row i of both (model_fast.py works on many slots at once).
        self.tags = np.zeros((slots, len(Tag)), np.int64)
        self.data = np.zeros((slots, elements), np.int32)
        self.slot = [Slot(self.tags[i], self.data[i]) for i in range(slots)]
        self.counters: Counter[Outcome] = Counter()
        self.results_out = 0

    # ---- configuration (host side only) ----
    def set_group(self, group_id: int, bitmap: int) -> None:
        if not 0 <= group_id < self.n_groups:
            raise ValueError(f"group {group_id} outside the table of {self.n_groups}")
        self.group_table[group_id] = bitmap & 0xFFFFFFFF

    def set_job(self, job_id: int, *, enabled: bool, base: int = 0, log2_window: int | None = None) -> None:
        if not 0 <= job_id < self.n_jobs:
            raise ValueError(f"job {job_id} outside the table of {self.n_jobs}")
        if log2_window is None:
            log2_window = self.slots.bit_length() - 1
        if (1 << log2_window) > self.slots or not 0 <= base < self.slots:
            raise ValueError("job window must fit in the slot memory")
        j = self.job_table[job_id]
        j.enabled, j.base, j.log2_window = enabled, base, log2_window

    def reset_window(self, job_id: int, head: int = 0) -> None:
        """Set the job's next chunk to release and free the slots of its region."""
        j = self.job_table[job_id]
        j.head = head & 0xFFFFFFFF
        self.tags[(j.base + np.arange(j.window)) % self.slots, Tag.STATE] = SlotState.FREE

    def slot_index(self, job: Job, chunk: int) -> int:
        return (job.base + (chunk & (job.window - 1))) & (self.slots - 1)

    def probe_bitmap(self, job_id: int, chunk: int) -> int:
        """What JOBj_PROBE_BITMAP reads for JOBj_PROBE = ``chunk``: the contributor bitmap of the
        chunk while its slot collects it (ACTIVE) or holds it complete for in-order release
        (COMPLETE); 0 otherwise (no contribution yet, already released, another chunk)."""
        return int(self.probe_bitmaps(job_id, np.array([chunk], np.int64))[0])

    def probe_bitmaps(self, job_id: int, chunks: np.ndarray) -> np.ndarray:
        """:meth:`probe_bitmap` of each of ``chunks`` (int64, taken mod 2**32), at once."""
        c = np.asarray(chunks, np.int64) & 0xFFFFFFFF
        if not 0 <= job_id < self.n_jobs:
            return np.zeros(len(c), np.int64)
        j = self.job_table[job_id]
        t = self.tags[(j.base + (c & (j.window - 1))) & (self.slots - 1)]
        st = t[:, Tag.STATE]
        held = ((st == SlotState.ACTIVE) | (st == SlotState.COMPLETE)) & (t[:, Tag.JOB] == job_id)
        return np.where(held & (t[:, Tag.CHUNK] == c), t[:, Tag.BITMAP], 0)

    # ---- data path ----
    def contribute(self, m: Message) -> tuple[Outcome, list[Result]]:
        """Process one well-formed contribution; returns its outcome and the results released."""
        outcome, results = self._contribute(m)
        self.counters[outcome] += 1
        self.results_out += len(results)
        return outcome, results

    def _contribute(self, m: Message) -> tuple[Outcome, list[Result]]:
        if m.job_id >= self.n_jobs or not self.job_table[m.job_id].enabled:
            return Outcome.REJECT_UNCONFIGURED, []
        if m.group_id >= self.n_groups or self.group_table[m.group_id] == 0:
            return Outcome.REJECT_UNCONFIGURED, []
        members = self.group_table[m.group_id]
        bit = 1 << m.sender_id if m.sender_id < wire.MAX_SENDERS else 0
        if not members & bit:
            return Outcome.REJECT_NON_MEMBER, []
        job = self.job_table[m.job_id]
        late = False
        if self.release == ReleaseMode.IN_ORDER:
            d = (m.chunk - job.head) & 0xFFFFFFFF
            if d >= SERIAL_HALF:
                late = True
            elif d >= job.window:
                return Outcome.OUT_OF_WINDOW, []
        s = self.slot[self.slot_index(job, m.chunk)]
        same = s.state != SlotState.FREE and s.job_id == m.job_id and s.chunk == m.chunk
        if same:
            if (s.round_id, s.group_id, s.scale_exp, s.count, s.session) != (
                m.round_id,
                m.group_id,
                m.scale_exp,
                m.element_count,
                m.session,
            ):
                return Outcome.REJECT_MISMATCH, []
            if s.state == SlotState.RELEASED:
                return Outcome.RESULT_RESENT, [self._result(s, resent=True)]
            if s.bitmap & bit:
                return Outcome.DUPLICATE, []
            s.data[: m.element_count], over = saturating_add(
                s.data[: m.element_count], m.payload
            )
            s.overflow |= over
            s.bitmap |= bit
            return Outcome.AGGREGATED, self._maybe_complete(s, job, members)
        if late:  # behind the head and no longer held: its result is gone
            return Outcome.STALE, []
        if s.state in (SlotState.ACTIVE, SlotState.COMPLETE):
            return Outcome.REJECT_BUSY, []
        # FREE, or RELEASED holding another chunk: start this chunk unless it is older.
        if s.state == SlotState.RELEASED and s.job_id == m.job_id and serial_lt(m.chunk, s.chunk):
            return Outcome.STALE, []
        s.state = SlotState.ACTIVE
        s.job_id, s.round_id, s.chunk = m.job_id, m.round_id, m.chunk
        s.group_id, s.scale_exp, s.count = m.group_id, m.scale_exp, m.element_count
        s.session, s.bitmap, s.overflow = m.session, bit, False
        s.data[: m.element_count] = m.payload
        s.data[m.element_count :] = 0
        return Outcome.AGGREGATED, self._maybe_complete(s, job, members)

    def _maybe_complete(self, s: Slot, job: Job, members: int) -> list[Result]:
        if s.bitmap != members:
            return []
        s.state = SlotState.COMPLETE
        if self.release == ReleaseMode.ON_COMPLETION:
            s.state = SlotState.RELEASED
            return [self._result(s)]
        out = []
        while True:
            h = self.slot[self.slot_index(job, job.head)]
            if h.state != SlotState.COMPLETE or h.chunk != job.head:
                break
            h.state = SlotState.RELEASED
            out.append(self._result(h))
            job.head = (job.head + 1) & 0xFFFFFFFF
        return out

    @staticmethod
    def _result(s: Slot, resent: bool = False) -> Result:
        return Result(
            job_id=s.job_id,
            round_id=s.round_id,
            chunk=s.chunk,
            group_id=s.group_id,
            scale_exp=s.scale_exp,
            payload=s.data[: s.count].copy(),
            overflow=s.overflow,
            resent=resent,
            session=s.session,
        )
