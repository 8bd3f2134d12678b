"""The wire format: the module, the protocol document and an independent packet library agree."""

import re
from pathlib import Path

import numpy as np
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from wanreduce import wire

DOC = Path(__file__).resolve().parents[1] / "docs" / "protocol.md"


def doc_fields() -> list[tuple[str, int, int, str]]:
    rows = re.findall(r"^\| `(\w+)` \| (\d+) \| (\d+) \| (\w+) \|", DOC.read_text(), re.M)
    return [(n, int(o), int(s), t) for n, o, s, t in rows]


def test_doc_table_matches_module():
    rows = doc_fields()
    assert rows, "no field table found in docs/protocol.md"
    assert [(n, o, s) for n, o, s, _ in rows] == [(f.name, f.offset, f.size) for f in wire.FRAME_FIELDS]
    for (_, _, _, t), f in zip(rows, wire.FRAME_FIELDS, strict=True):
        assert t == ("int" if f.signed else "uint") + str(f.bits)


def test_payload_is_bus_aligned_for_every_width():
    assert wire.PAYLOAD_OFFSET == 64
    for width_bits in (64, 128, 256, 512):
        assert wire.PAYLOAD_OFFSET % (width_bits // 8) == 0


def test_doc_payload_limits_match_module():
    text = DOC.read_text()
    assert f"| {wire.MAX_ELEMENTS_DEFAULT} | {4 * wire.MAX_ELEMENTS_DEFAULT} |" in text
    assert f"| {wire.MAX_ELEMENTS_JUMBO} | {4 * wire.MAX_ELEMENTS_JUMBO} |" in text
    assert wire.max_elements(2048) == 499 and wire.max_elements(9000) == 2237


def test_packet_from_doc_offsets_parses_with_module_and_scapy():
    """Lay a packet out byte by byte from the documented offsets only, then parse it twice."""
    values = {
        "eth_dst": bytes.fromhex("01005e000001"), "eth_src": bytes.fromhex("020000000002"),
        "eth_type": 0x0800, "ip_version_ihl": 0x45, "ip_dscp_ecn": 0, "ip_id": 7,
        "ip_flags_frag": 0x4000, "ip_ttl": 9, "ip_proto": 17, "ip_checksum": 0,
        "ip_src": 0x0A000002, "ip_dst": 0xE0000001, "udp_sport": 1234, "udp_dport": 22354,
        "udp_checksum": 0, "magic": 0x5752, "version": 1, "msg_type": 1, "flags": 2,
        "group_id": 3, "job_id": 0x0102, "round_id": 0xA0B0C0D0, "chunk": 0x01020304,
        "sender_id": 17, "scale_exp": -5, "element_count": 3, "session": 0xBEEF,
    }
    payload = np.array([1, -2, 2**31 - 1], "<i4").tobytes()
    values["ip_total_length"] = 20 + 8 + 22 + len(payload)
    values["udp_length"] = 8 + 22 + len(payload)
    buf = bytearray(64)
    for name, off, size, typ in doc_fields():
        v = values[name]
        buf[off : off + size] = v if isinstance(v, bytes) else v.to_bytes(size, "big", signed=typ.startswith("int"))
    buf[24:26] = wire.ipv4_checksum(buf[14:34]).to_bytes(2, "big")
    frame = bytes(buf) + payload

    hdr, pl = wire.unwrap_frame(frame)
    values["ip_checksum"] = int.from_bytes(buf[24:26], "big")
    for name, v in values.items():
        got = bytes(hdr[name]) if isinstance(v, bytes) else int(hdr[name])
        assert got == v, name
    assert np.array_equal(np.frombuffer(pl, "<i4"), [1, -2, 2**31 - 1])

    pkt = Ether(frame)
    assert pkt[IP].dst == "224.0.0.1" and pkt[UDP].dport == 22354
    assert IP(bytes(pkt[IP])).chksum == pkt[IP].chksum  # scapy recomputes the same checksum
    again = Ether(bytes(pkt))
    del again[IP].chksum
    assert Ether(bytes(again))[IP].chksum == pkt[IP].chksum

    agg = wire.AggHeader.unpack(frame[42:])
    assert (agg.chunk, agg.scale_exp, agg.sender_id, agg.job_id, agg.session) == (0x01020304, -5, 17, 0x0102, 0xBEEF)
    # The module's own builder gives the same bytes for the same values.
    rebuilt = wire.frame(
        agg, payload,
        wire.L2L3(eth_dst=0x01005E000001, eth_src=0x020000000002, ip_src=0x0A000002,
                  ip_dst=0xE0000001, udp_sport=1234, udp_dport=22354, ttl=9, ip_id=7),
    )
    assert rebuilt == frame


def test_scapy_built_frame_parses():
    payload = np.arange(5, dtype="<i4").tobytes()
    agg = wire.AggHeader(wire.MsgType.CONTRIBUTION, job_id=1, chunk=9, element_count=5).pack()
    frame = bytes(Ether(dst="02:00:00:00:00:01") / IP(src="10.0.0.2", dst="10.0.0.1", flags="DF")
                  / UDP(sport=5, dport=wire.DEFAULT_UDP_PORT, chksum=0) / (agg + payload))
    hdr, pl = wire.unwrap_frame(frame)
    assert wire.ipv4_checksum(frame[14:34]) == 0
    assert int(hdr["chunk"]) == 9 and int(hdr["ip_total_length"]) == len(frame) - 14
    assert pl == payload


def test_wrap_frames_vectorised_checksums():
    rng = np.random.default_rng(1)
    dgrams = rng.integers(0, 256, size=(17, 22 + 40), dtype=np.uint8)
    frames = wire.wrap_frames(dgrams, wire.L2L3(ip_id=0x1234))
    for f in frames:
        assert wire.ipv4_checksum(f[14:34].tobytes()) == 0
        assert Ether(f.tobytes())[IP].len == 20 + 8 + 62


def test_address_helpers_reject_garbage():
    assert wire.ip_to_int("10.1.2.3") == 0x0A010203
    assert wire.int_to_ip(0xE0000001) == "224.0.0.1"
    assert wire.multicast_mac(wire.ip_to_int("239.129.2.3")) == 0x01005E010203
    for bad in ("10.1.2", "1.2.3.256", "a.b.c.d"):
        with pytest.raises(ValueError):
            wire.ip_to_int(bad)
    with pytest.raises(ValueError):
        wire.mac_to_int("zz:00:00:00:00:00")
    with pytest.raises(ValueError):
        wire.max_elements(100)
