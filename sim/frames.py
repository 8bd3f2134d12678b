"""Frames for test benches: well-formed contributions and control messages, and one malformed
frame per ingress drop reason. Everything is built with ``wanreduce.wire`` and checked against
``wanreduce.model.parse_frame``, so a bench's expectation of a drop is the golden model's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from wanreduce import regs, wire
from wanreduce.model import Drop, PortConfig, parse_frame

# Addresses the benches use: the core's own (register reset values) and a multicast group.
CORE_MAC = regs.DEFAULT_LOCAL_MAC
CORE_IP = regs.DEFAULT_LOCAL_IP
GROUP_IP = wire.ip_to_int("239.1.1.1")
HOST_IP = wire.ip_to_int("10.0.0.100")


def site_ip(sender: int) -> int:
    return wire.ip_to_int("10.0.1.0") + sender


def to_core(sender: int, multicast: bool = True) -> wire.L2L3:
    """L2/L3 addressing of a frame sent by ``sender`` toward the core (multicast by default)."""
    dst_ip = GROUP_IP if multicast else CORE_IP
    return wire.L2L3(
        eth_dst=wire.multicast_mac(GROUP_IP) if multicast else CORE_MAC,
        eth_src=0x02_00_00_00_10_00 + sender,
        ip_src=site_ip(sender),
        ip_dst=dst_ip,
    )


@dataclass(frozen=True)
class TxFrame:
    """A frame to drive into a port: bytes, the tuser (frame error) flag, and what we expect."""

    data: bytes
    tuser: int = 0
    drop: Drop | None = None  # the expected ingress drop, None if well formed


def contribution(
    *,
    sender: int,
    chunk: int,
    payload: np.ndarray,
    job: int = 0,
    group: int = 0,
    round_id: int = 0,
    scale: int = 0,
    flags: int = 0,
    multicast: bool = True,
    session: int = 0,
) -> bytes:
    hdr = wire.AggHeader(
        wire.MsgType.CONTRIBUTION,
        job_id=job,
        round_id=round_id,
        chunk=chunk,
        sender_id=sender,
        group_id=group,
        scale_exp=scale,
        element_count=len(payload),
        flags=flags,
        session=session,
    )
    return wire.frame(hdr, np.asarray(payload, np.int32), to_core(sender, multicast))


def control(ops: Sequence[tuple[bool, int, int]], sender: int = 0) -> bytes:
    """A CONTROL frame for the host-facing port: (write, address, value) operations."""
    words = wire.control_words(ops)
    hdr = wire.AggHeader(wire.MsgType.CONTROL, sender_id=sender, element_count=len(words))
    return wire.frame(hdr, words, to_core(sender, multicast=False))


def control_probe(site_id: int) -> tuple[wire.AggHeader, np.ndarray, wire.AggHeader, np.ndarray]:
    """A CONTROL message that exercises the reply rules of docs/protocol.md, and the reply every
    aggregator (RTL core, software aggregator) must give while SITE_ID = ``site_id``:
    (request header, request words, reply header, reply words).

    Read ID; write an unmapped address (reads 0, no effect); an odd trailing word that would be
    a SITE_ID write (echoed, not executed). The reply header is the request's with msg_type
    CONTROL_REPLY and sender_id = SITE_ID; flags, group, job, round, chunk, scale_exp, session and
    element_count are echoed.
    """
    unmapped = 0x7777
    words = np.array([regs.ID, 0xAAAA, wire.CONTROL_WRITE | unmapped, 5,
                      wire.CONTROL_WRITE | regs.SITE_ID], np.uint32)
    hdr = wire.AggHeader(wire.MsgType.CONTROL, job_id=7, round_id=9, chunk=0x80000001,
                         sender_id=12, group_id=3, scale_exp=-3, element_count=len(words),
                         flags=0x5, session=0xBEEF)
    reply = words.copy()
    reply[1], reply[3] = regs.CORE_ID, 0
    reply_hdr = dataclasses.replace(hdr, msg_type=wire.MsgType.CONTROL_REPLY, sender_id=site_id)
    return hdr, words, reply_hdr, reply


def fix_ip_checksum(f: bytearray) -> bytearray:
    """Recompute the IPv4 header checksum of a frame in place (after editing header bytes)."""
    f[24:26] = b"\0\0"
    f[24:26] = wire.ipv4_checksum(bytes(f[14:34])).to_bytes(2, "big")
    return f


def malformed(reason: Drop, good: bytes, rng: np.random.Generator, max_elements: int) -> TxFrame:
    """A frame derived from the well-formed ``good`` that the parser must drop for ``reason``."""
    f = bytearray(good)

    def set_byte(off: int, value: int, fix: bool = True) -> bytes:
        f[off] = value
        return bytes(fix_ip_checksum(f) if fix else f)

    if reason == Drop.FRAME_ERROR:
        out, tuser = bytes(f), 1
    else:
        tuser = 0
        out = {
            Drop.TRUNCATED: lambda: bytes(f[: int(rng.integers(1, 64))]),
            Drop.ETHERTYPE: lambda: set_byte(12, 0x86, fix=False),
            Drop.IP_HEADER: lambda: set_byte(*[(14, 0x46), (20, 0x60), (23, 6)][int(rng.integers(3))]),
            Drop.IP_CHECKSUM: lambda: set_byte(25, f[25] ^ 0x5A, fix=False),
            Drop.DESTINATION: lambda: set_byte(*[(0, 0x04), (30, 0x0B)][int(rng.integers(2))]),
            Drop.UDP_PORT: lambda: set_byte(37, f[37] ^ 0x01, fix=False),
            Drop.AGG_HEADER: lambda: set_byte(*[(42, 0x00), (44, 2), (45, 2)][int(rng.integers(3))], fix=False),
            Drop.ELEMENT_COUNT: lambda: _with_count(f, max_elements + 1 + int(rng.integers(0, 3))),
            Drop.LENGTH: lambda: [bytes(f[:-4]), bytes(f) + b"\0" * 4, _bad_udp_length(f)][int(rng.integers(3))],
        }[reason]()
    cfg = PortConfig(local_mac=CORE_MAC, local_ip=CORE_IP, max_elements=max_elements,
                     elements=max_elements)
    got = parse_frame(out, cfg, frame_error=bool(tuser))
    assert got == reason, f"bench bug: {reason.name} frame parses as {got}"
    return TxFrame(out, tuser, reason)


def _with_count(f: bytearray, count: int) -> bytes:
    g = bytearray(f[:64]) + bytearray(4 * count)
    g[60:62] = count.to_bytes(2, "big")
    g[16:18] = (20 + 8 + wire.datagram_bytes(count)).to_bytes(2, "big")
    g[38:40] = (8 + wire.datagram_bytes(count)).to_bytes(2, "big")
    return bytes(fix_ip_checksum(g))


def _bad_udp_length(f: bytearray) -> bytes:
    g = bytearray(f)
    g[39] ^= 0x04
    return bytes(g)
