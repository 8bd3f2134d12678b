"""The wanreduce wire format — the single source of truth.

Everything that reads or writes a wanreduce packet derives from this module: the RTL builds its
Amaranth data layouts and byte offsets from :data:`FRAME_FIELDS`, the golden model and the host
build NumPy structured dtypes from the same table, and ``docs/protocol.md`` documents it (a test
checks the document against this table).

Frame: Ethernet II (14 B) + IPv4 without options (20 B) + UDP (8 B) + aggregation header (22 B)
= 64 B of headers, so the payload starts at byte 64, aligned to every bus width up to 512 bits.
Header fields are big-endian (network byte order). Payload elements are little-endian int32:
on an AXI4-Stream bus (byte 0 in ``tdata[7:0]``) element *k* of a beat is simply
``tdata[32*k+31 : 32*k]``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

# --------------------------------------------------------------------------------------------
# Constants
# --------------------------------------------------------------------------------------------

ETH_HEADER_BYTES = 14
IPV4_HEADER_BYTES = 20
UDP_HEADER_BYTES = 8
AGG_HEADER_BYTES = 22
HEADER_BYTES = ETH_HEADER_BYTES + IPV4_HEADER_BYTES + UDP_HEADER_BYTES + AGG_HEADER_BYTES
PAYLOAD_OFFSET = HEADER_BYTES  # byte 64
ELEMENT_BYTES = 4  # int32
ELEMENT_DTYPE = np.dtype("<i4")

ETHERTYPE_IPV4 = 0x0800
IPV4_VERSION_IHL = 0x45  # version 4, 5 words: no options
IPV4_FLAGS_DF = 0x4000  # don't fragment; MF=0, fragment offset=0
IPV4_PROTO_UDP = 17
DEFAULT_TTL = 64

MAGIC = 0x5752  # "WR"
VERSION = 1
DEFAULT_UDP_PORT = 0x5752  # 22354; configurable at run time

# Maximum transmission unit (IPv4 total length) the defaults are sized for, and the jumbo limit.
DEFAULT_MTU = 2048
JUMBO_MTU = 9000
# Default elements per packet: 1 KiB of payload (SwitchML's large-packet size), a power of two.
DEFAULT_ELEMENTS = 256
MAX_SENDERS = 32  # contributor bitmaps are 32 bits wide
SESSION_MAX = 0xFFFF  # the session field: 16 bits (docs/protocol.md, "Sessions")

INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
# The scale exponent field is an int8; we restrict it so that 2**e is a normal float32.
SCALE_EXP_MIN = -126
SCALE_EXP_MAX = 126


def max_elements(mtu: int = DEFAULT_MTU) -> int:
    """Largest element count whose packet fits an IPv4 MTU (IPv4 total length <= mtu)."""
    if not 576 <= mtu <= JUMBO_MTU:
        raise ValueError(f"mtu must be between 576 and {JUMBO_MTU} bytes, got {mtu}")
    return (mtu - IPV4_HEADER_BYTES - UDP_HEADER_BYTES - AGG_HEADER_BYTES) // ELEMENT_BYTES


MAX_ELEMENTS_DEFAULT = max_elements(DEFAULT_MTU)  # 499
MAX_ELEMENTS_JUMBO = max_elements(JUMBO_MTU)  # 2237


class MsgType(enum.IntEnum):
    """Aggregation-header message type."""

    CONTRIBUTION = 1  # a sender's int32 vector for one chunk
    RESULT = 2  # the aggregated vector of a completed chunk
    CONTROL = 3  # host -> core register operations (host-facing port only)
    CONTROL_REPLY = 4  # core -> host: the same operations with read values filled in
    NACK = 5  # host -> the hosts of one member site: resend these contributions (never aggregated)


class Flags(enum.IntFlag):
    """Aggregation-header flag bits."""

    NONE = 0
    OVERFLOW = 0x01  # result: some element saturated during aggregation (sticky per chunk)
    RETRANSMIT = 0x02  # contribution: a resend (informational; the core treats all alike)
    RESENT = 0x04  # result: a repeat of an already-released result (lost-result recovery)


# --------------------------------------------------------------------------------------------
# Field table: (name, byte offset in the frame, size in bytes). All big-endian unsigned,
# except where SIGNED_FIELDS says otherwise.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    """One header field: its byte offset from the start of the Ethernet frame and its size."""

    name: str
    offset: int
    size: int
    signed: bool = False
    doc: str = ""

    @property
    def bits(self) -> int:
        return 8 * self.size

    @property
    def agg_offset(self) -> int:
        """Offset within the aggregation header (what a UDP socket sees at byte 0)."""
        return self.offset - AGG_OFFSET


ETH_OFFSET = 0
IPV4_OFFSET = ETH_HEADER_BYTES  # 14
UDP_OFFSET = IPV4_OFFSET + IPV4_HEADER_BYTES  # 34
AGG_OFFSET = UDP_OFFSET + UDP_HEADER_BYTES  # 42


def _fields(base: int, spec: list[tuple]) -> tuple[Field, ...]:
    out, off = [], base
    for entry in spec:
        name, size, *rest = entry
        signed = bool(rest[0]) if rest else False
        doc = rest[1] if len(rest) > 1 else ""
        out.append(Field(name, off, size, signed, doc))
        off += size
    return tuple(out)


ETH_FIELDS = _fields(
    ETH_OFFSET,
    [
        ("eth_dst", 6, False, "destination MAC"),
        ("eth_src", 6, False, "source MAC"),
        ("eth_type", 2, False, "EtherType, 0x0800"),
    ],
)
IPV4_FIELDS = _fields(
    IPV4_OFFSET,
    [
        ("ip_version_ihl", 1, False, "0x45: IPv4, no options"),
        ("ip_dscp_ecn", 1, False, "DSCP/ECN, 0"),
        ("ip_total_length", 2, False, "IPv4 header + UDP + aggregation header + payload"),
        ("ip_id", 2, False, "identification"),
        ("ip_flags_frag", 2, False, "DF=1, MF=0, offset=0: no fragments"),
        ("ip_ttl", 1, False, "time to live"),
        ("ip_proto", 1, False, "17 = UDP"),
        ("ip_checksum", 2, False, "IPv4 header checksum"),
        ("ip_src", 4, False, "source address"),
        ("ip_dst", 4, False, "destination address (unicast or multicast)"),
    ],
)
UDP_FIELDS = _fields(
    UDP_OFFSET,
    [
        ("udp_sport", 2, False, "source port"),
        ("udp_dport", 2, False, "destination port (configurable)"),
        ("udp_length", 2, False, "UDP header + aggregation header + payload"),
        ("udp_checksum", 2, False, "0 from the core (allowed in IPv4); not checked by the core"),
    ],
)
AGG_FIELDS = _fields(
    AGG_OFFSET,
    [
        ("magic", 2, False, "0x5752 'WR'"),
        ("version", 1, False, "1"),
        ("msg_type", 1, False, "MsgType"),
        ("flags", 1, False, "Flags"),
        ("group_id", 1, False, "index into the core's group table (membership bitmaps)"),
        ("job_id", 2, False, "job; jobs are isolated from each other"),
        ("round_id", 4, False, "training round (must agree within a chunk)"),
        ("chunk", 4, False, "per-job chunk sequence number, increasing across rounds"),
        ("sender_id", 1, False, "contributor index 0..31 (bit in the group bitmap)"),
        ("scale_exp", 1, True, "fixed-point exponent e: element = value * 2**e"),
        ("element_count", 2, False, "int32 elements in the payload"),
        ("session", 2, False, "run tag: contributions of a chunk must agree; results carry it"),
    ],
)
FRAME_FIELDS: tuple[Field, ...] = ETH_FIELDS + IPV4_FIELDS + UDP_FIELDS + AGG_FIELDS
FIELD: dict[str, Field] = {f.name: f for f in FRAME_FIELDS}

assert AGG_OFFSET + sum(f.size for f in AGG_FIELDS) == HEADER_BYTES == 64
assert sum(f.size for f in FRAME_FIELDS) == HEADER_BYTES

# --------------------------------------------------------------------------------------------
# NumPy dtypes (host and golden model)
# --------------------------------------------------------------------------------------------


def _np_type(f: Field) -> str:
    if f.size in (1, 2, 4, 8):
        return (">i" if f.signed else ">u") + str(f.size)
    return f"({f.size},)u1"  # MAC addresses: 6 raw bytes


def _dtype(fields: tuple[Field, ...], base: int) -> np.dtype:
    return np.dtype(
        {
            "names": [f.name for f in fields],
            "formats": [_np_type(f) for f in fields],
            "offsets": [f.offset - base for f in fields],
            "itemsize": sum(f.size for f in fields),
        }
    )


FRAME_HEADER_DTYPE = _dtype(FRAME_FIELDS, 0)  # 64 bytes, Ethernet frame headers
AGG_HEADER_DTYPE = _dtype(AGG_FIELDS, AGG_OFFSET)  # 22 bytes, what a UDP datagram starts with

assert FRAME_HEADER_DTYPE.itemsize == HEADER_BYTES
assert AGG_HEADER_DTYPE.itemsize == AGG_HEADER_BYTES


def datagram_bytes(element_count: int) -> int:
    """UDP payload size (aggregation header + elements)."""
    return AGG_HEADER_BYTES + ELEMENT_BYTES * element_count


def frame_bytes(element_count: int) -> int:
    """Ethernet frame size without FCS."""
    return HEADER_BYTES + ELEMENT_BYTES * element_count


# --------------------------------------------------------------------------------------------
# Control messages (host-facing port only). Payload = N operations of two little-endian
# 32-bit words: word0 = (WRITE bit 31) | register address (bits 15..0), word1 = value.
# The reply echoes the operations with word1 = the register's value after the operation.
# The register map is defined in wanreduce.regs.
# --------------------------------------------------------------------------------------------

CONTROL_WRITE = 1 << 31
CONTROL_ADDR_MASK = 0xFFFF
CONTROL_OP_WORDS = 2


def control_words(ops) -> np.ndarray:
    """CONTROL payload for ``(write, address, value)`` operations, as int32 words."""
    words = np.zeros(CONTROL_OP_WORDS * len(ops), dtype=np.uint32)
    for i, (write, addr, value) in enumerate(ops):
        if not 0 <= addr <= CONTROL_ADDR_MASK:
            raise ValueError(f"register address out of range: {addr:#x}")
        words[2 * i] = (CONTROL_WRITE if write else 0) | addr
        words[2 * i + 1] = value & 0xFFFFFFFF
    return words.view(np.int32)


def reply_values(payload: np.ndarray | bytes) -> list[int]:
    """Register values (word 1 of each operation) of a CONTROL_REPLY payload."""
    words = np.frombuffer(bytes(payload), dtype="<u4") if isinstance(payload, bytes | bytearray) \
        else np.asarray(payload).view(np.uint32)
    return [int(v) for v in words[1::CONTROL_OP_WORDS]]

# --------------------------------------------------------------------------------------------
# NACK (WAN-link loss recovery, docs/protocol.md "NACK"): a host whose aggregator lacks another
# member's contribution asks that member's hosts to resend it. The network carries it (the
# emulator's forwarder, a site router); the core never aggregates it (its parser drops every
# msg_type but CONTRIBUTION and CONTROL: Drop.AGG_HEADER, counted). Header: group_id, job_id,
# round_id (the requester's call), chunk = the first chunk named, sender_id = the requester,
# session; scale_exp 0. Payload (element_count little-endian uint32 words): word 0 = the member
# whose contributions are missing, then the chunk numbers. A NACK naming no chunk (one word, its
# own sender id) is a hello: it tells the network where that host listens for NACKs.
# --------------------------------------------------------------------------------------------

NACK_MAX_CHUNKS = 128  # chunks named by one NACK datagram (546 bytes)


@dataclass(frozen=True)
class Nack:
    """A parsed NACK: ``target``'s contributions to ``chunks`` of job/group are wanted."""

    target: int
    chunks: tuple[int, ...]
    job: int
    group: int
    round_id: int
    requester: int
    session: int


def nack_datagram(nack: Nack) -> bytes:
    """The NACK datagram (header + words) for ``nack`` (at most NACK_MAX_CHUNKS chunks)."""
    if len(nack.chunks) > NACK_MAX_CHUNKS:
        raise ValueError(f"chunks: at most {NACK_MAX_CHUNKS} per NACK, got {len(nack.chunks)}")
    if not 0 <= nack.target < MAX_SENDERS:
        raise ValueError(f"target: must be 0..{MAX_SENDERS - 1}, got {nack.target}")
    words = np.array([nack.target, *nack.chunks], dtype="<u4")
    hdr = AggHeader(MsgType.NACK, job_id=nack.job, round_id=nack.round_id,
                    chunk=nack.chunks[0] if nack.chunks else 0, sender_id=nack.requester,
                    group_id=nack.group, element_count=len(words), session=nack.session)
    return hdr.pack() + words.tobytes()


def parse_nack(data: bytes | memoryview) -> Nack | None:
    """The NACK in ``data``, or None when it is not a well-formed one (magic, version, type,
    length = header + element_count words, a target below MAX_SENDERS)."""
    data = bytes(data)
    if len(data) < AGG_HEADER_BYTES + 4:
        return None
    h = AggHeader.unpack(data)
    if (h.magic != MAGIC or h.version != VERSION or h.msg_type != MsgType.NACK
            or not 1 <= h.element_count <= NACK_MAX_CHUNKS + 1
            or len(data) != AGG_HEADER_BYTES + 4 * h.element_count):
        return None
    words = np.frombuffer(data, dtype="<u4", offset=AGG_HEADER_BYTES)
    if words[0] >= MAX_SENDERS:
        return None
    return Nack(int(words[0]), tuple(int(c) for c in words[1:]), h.job_id, h.group_id,
                h.round_id, h.sender_id, h.session)


# --------------------------------------------------------------------------------------------
# Helpers: IPv4 checksum, address conversion, (un)packing
# --------------------------------------------------------------------------------------------


def ipv4_checksum(header: bytes | np.ndarray) -> int:
    """Internet checksum over a 20-byte IPv4 header (checksum field included as stored).

    Returns the value to store in the checksum field when that field is zero in ``header``;
    a header with a correct checksum gives 0.
    """
    return int(_checksums(np.frombuffer(bytes(header), dtype=np.uint8)[None, :])[0])


def _checksums(rows: np.ndarray) -> np.ndarray:
    """Internet checksum of each row of an (n, even) uint8 array, vectorised."""
    words = np.ascontiguousarray(rows).view(">u2").astype(np.uint32).sum(axis=1)
    while np.any(words >> 16):
        words = (words & 0xFFFF) + (words >> 16)
    return (~words) & 0xFFFF


def ip_to_int(addr: str) -> int:
    """Dotted quad to a 32-bit integer, with a clear error for a bad address."""
    parts = addr.split(".")
    if len(parts) != 4 or not all(p.isdigit() and 0 <= int(p) <= 255 for p in parts):
        raise ValueError(f"not an IPv4 address: {addr!r}")
    a, b, c, d = (int(p) for p in parts)
    return (a << 24) | (b << 16) | (c << 8) | d


def int_to_ip(value: int) -> str:
    return ".".join(str((value >> s) & 0xFF) for s in (24, 16, 8, 0))


def mac_to_int(mac: str) -> int:
    parts = mac.split(":")
    if len(parts) != 6:
        raise ValueError(f"not a MAC address: {mac!r}")
    try:
        return int("".join(parts), 16)
    except ValueError:
        raise ValueError(f"not a MAC address: {mac!r}") from None


def multicast_mac(ip: int) -> int:
    """The Ethernet address an IPv4 multicast group maps to (01:00:5e + low 23 bits)."""
    return 0x01005E000000 | (ip & 0x7FFFFF)


def is_multicast(ip: int) -> bool:
    return (ip >> 28) == 0xE


@dataclass(frozen=True)
class AggHeader:
    """The aggregation header as Python values (for tests, control and small tools)."""

    msg_type: int
    job_id: int = 0
    round_id: int = 0
    chunk: int = 0
    sender_id: int = 0
    group_id: int = 0
    scale_exp: int = 0
    element_count: int = 0
    flags: int = 0
    magic: int = MAGIC
    version: int = VERSION
    session: int = 0

    def pack(self) -> bytes:
        rec = np.zeros((), dtype=AGG_HEADER_DTYPE)
        for f in AGG_FIELDS:
            rec[f.name] = getattr(self, f.name)
        return rec.tobytes()

    @classmethod
    def unpack(cls, data: bytes) -> AggHeader:
        if len(data) < AGG_HEADER_BYTES:
            raise ValueError(f"aggregation header needs {AGG_HEADER_BYTES} bytes, got {len(data)}")
        rec = np.frombuffer(data[:AGG_HEADER_BYTES], dtype=AGG_HEADER_DTYPE)[0]
        return cls(**{f.name: int(rec[f.name]) for f in AGG_FIELDS})


@dataclass(frozen=True)
class L2L3:
    """Addresses and ports that wrap a datagram into an Ethernet/IPv4/UDP frame."""

    eth_dst: int = 0x02_00_00_00_00_01
    eth_src: int = 0x02_00_00_00_00_02
    ip_src: int = 0x0A_00_00_02
    ip_dst: int = 0x0A_00_00_01
    udp_sport: int = DEFAULT_UDP_PORT
    udp_dport: int = DEFAULT_UDP_PORT
    ttl: int = DEFAULT_TTL
    ip_id: int = 0


def wrap_frames(datagrams: np.ndarray, addr: L2L3) -> np.ndarray:
    """Prefix Ethernet/IPv4/UDP headers to equal-sized datagrams, vectorised.

    ``datagrams`` is an (n, d) uint8 array of aggregation header + payload. Returns (n, 42 + d)
    uint8 frames with valid IPv4 checksums (UDP checksum 0).
    """
    datagrams = np.ascontiguousarray(datagrams, dtype=np.uint8)
    if datagrams.ndim != 2:
        raise ValueError("datagrams must be a 2-D (n, bytes) uint8 array")
    n, d = datagrams.shape
    frames = np.zeros((n, AGG_OFFSET + d), dtype=np.uint8)
    frames[:, AGG_OFFSET:] = datagrams
    if d < AGG_HEADER_BYTES:
        raise ValueError("datagrams shorter than the aggregation header")
    hdr = frames[:, :HEADER_BYTES].view(FRAME_HEADER_DTYPE)[:, 0]
    _fill_l2l3(hdr, addr, d)
    return frames


def _fill_l2l3(hdr: np.ndarray, addr: L2L3, datagram_len: int) -> None:
    for name, value in (
        ("eth_dst", addr.eth_dst),
        ("eth_src", addr.eth_src),
    ):
        hdr[name] = np.frombuffer(value.to_bytes(6, "big"), dtype=np.uint8)
    hdr["eth_type"] = ETHERTYPE_IPV4
    hdr["ip_version_ihl"] = IPV4_VERSION_IHL
    hdr["ip_dscp_ecn"] = 0
    hdr["ip_total_length"] = IPV4_HEADER_BYTES + UDP_HEADER_BYTES + datagram_len
    hdr["ip_id"] = addr.ip_id
    hdr["ip_flags_frag"] = IPV4_FLAGS_DF
    hdr["ip_ttl"] = addr.ttl
    hdr["ip_proto"] = IPV4_PROTO_UDP
    hdr["ip_checksum"] = 0
    hdr["ip_src"] = addr.ip_src
    hdr["ip_dst"] = addr.ip_dst
    hdr["udp_sport"] = addr.udp_sport
    hdr["udp_dport"] = addr.udp_dport
    hdr["udp_length"] = UDP_HEADER_BYTES + datagram_len
    hdr["udp_checksum"] = 0
    hdr["ip_checksum"] = _checksums(_ip_bytes(hdr))


def _ip_bytes(hdr: np.ndarray) -> np.ndarray:
    """(n, 20) uint8 copy of the IPv4 headers in a FRAME_HEADER_DTYPE array."""
    buf = np.ascontiguousarray(hdr).view(np.uint8).reshape(len(hdr), HEADER_BYTES)
    return np.ascontiguousarray(buf[:, IPV4_OFFSET : IPV4_OFFSET + IPV4_HEADER_BYTES])


def frame(agg: AggHeader, payload: np.ndarray | bytes = b"", addr: L2L3 | None = None) -> bytes:
    """One complete Ethernet frame (no FCS): headers from ``addr`` and ``agg``, then payload."""
    body = agg.pack() + (
        payload if isinstance(payload, bytes) else np.asarray(payload, ELEMENT_DTYPE).tobytes()
    )
    return wrap_frames(np.frombuffer(body, np.uint8)[None, :], addr or L2L3())[0].tobytes()


def unwrap_frame(data: bytes) -> tuple[np.ndarray, bytes]:
    """Split a frame into its 64-byte header record (FRAME_HEADER_DTYPE) and its payload bytes."""
    if len(data) < HEADER_BYTES:
        raise ValueError(f"frame shorter than {HEADER_BYTES} header bytes: {len(data)}")
    hdr = np.frombuffer(data[:HEADER_BYTES], dtype=FRAME_HEADER_DTYPE)[0]
    return hdr, data[HEADER_BYTES:]
