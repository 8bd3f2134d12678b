# amaranth: UnusedElaboratable=no
"""IngressParser against the golden model: every frame's verdict, in order, bit-exact.

Frames are built with ``wire.frame`` (plus a few with scapy, independently of our wire module),
then corrupted to hit every ``model.Drop`` reason, several faults at once, truncation, tails,
overlong frames and wrong lengths. One cycle-based testbench drives ``s_axis`` (random idle,
valid held until accepted, garbage in the bytes tkeep masks off) and the ``m_msg`` sink (random
backpressure), and records the event strobes. Checked against ``model.parse_frame``:

- the accepted messages (every header field and the element_count payload elements), in order;
- the sequence of verdicts (accept, or drop + reason), in frame order, from the strobes;
- frames_in == accepted + dropped == frames sent; stream rules on ``m_msg`` (first/last, hdr
  constant within a message, beat count = payload_beats(element_count)).
"""

from __future__ import annotations

import random
import re
import struct

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.sim import Simulator
from stream_helpers import (
    _yosys_on,
    comb_cells_before,
    comb_cells_table,
    comb_cone,
    min_flops_between,
)

from wanreduce import wire
from wanreduce.hdl.ingress_parser import DESC_DEPTH, IngressParser, dram_cuts
from wanreduce.hdl.layouts import header_beats, lanes, payload_beats
from wanreduce.model import Drop, Message, PortConfig, parse_frame

LOCAL_MAC = 0x02_00_00_00_00_01
LOCAL_IP = 0x0A_00_00_01
UDP_PORT = wire.DEFAULT_UDP_PORT
HDR_FIELDS = ("msg_type", "flags", "group_id", "job_id", "round_id", "chunk", "sender_id",
              "scale_exp", "element_count", "session")


# --------------------------------------------------------------------------------------------
# Frame construction and corruption


def good_frame(rng: random.Random, count: int, msg_type: int = wire.MsgType.CONTRIBUTION) -> bytes:
    """A well-formed frame for our port: unicast or multicast destination, random fields."""
    if rng.random() < 0.5:
        addr = wire.L2L3(eth_dst=LOCAL_MAC, ip_dst=LOCAL_IP, udp_dport=UDP_PORT,
                         ip_id=rng.randrange(1 << 16), ttl=rng.randint(1, 255))
    else:
        group = 0xE0_00_00_00 | rng.randrange(1 << 28)
        addr = wire.L2L3(eth_dst=wire.multicast_mac(group), ip_dst=group, udp_dport=UDP_PORT,
                         ip_src=rng.randrange(1 << 32), udp_sport=rng.randrange(1 << 16))
    agg = wire.AggHeader(
        msg_type=msg_type, job_id=rng.randrange(1 << 16), round_id=rng.randrange(1 << 32),
        chunk=rng.randrange(1 << 32), sender_id=rng.randrange(32), group_id=rng.randrange(256),
        scale_exp=rng.randint(-128, 127), element_count=count, flags=rng.randrange(256),
        session=rng.randrange(1 << 16))
    payload = np.array([rng.randrange(-(1 << 31), 1 << 31) for _ in range(count)], np.int32)
    return wire.frame(agg, payload, addr)


def _set(buf: bytearray, name: str, value: int) -> None:
    f = wire.FIELD[name]
    buf[f.offset:f.offset + f.size] = (value % (1 << (8 * f.size))).to_bytes(f.size, "big")


def _get(buf: bytes, name: str) -> int:
    f = wire.FIELD[name]
    return int.from_bytes(buf[f.offset:f.offset + f.size], "big")


def _fix_checksum(buf: bytearray) -> None:
    _set(buf, "ip_checksum", 0)
    _set(buf, "ip_checksum", wire.ipv4_checksum(bytes(buf[14:34])))


def _set_lengths(buf: bytearray, count: int) -> None:
    _set(buf, "element_count", count)
    _set(buf, "ip_total_length", 50 + 4 * count)
    _set(buf, "udp_length", 30 + 4 * count)
    _fix_checksum(buf)


def corrupt(rng: random.Random, buf: bytearray, kind: Drop, limit: int, pmax_bytes: int) -> None:
    """Make ``buf`` (a well-formed frame) fail the check ``kind`` (maybe others too)."""
    fix = rng.random() < 0.7  # recompute the IPv4 checksum after an IPv4 edit
    if kind == Drop.ETHERTYPE:
        _set(buf, "eth_type", rng.choice([0x86DD, 0x0806, 0x8100, 0x0801, rng.randrange(1 << 16)]))
    elif kind == Drop.IP_HEADER:
        which = rng.randrange(4)
        if which == 0:
            _set(buf, "ip_version_ihl", rng.choice([0x46, 0x4F, 0x65, 0x44, 0x55]))
        elif which == 1:
            _set(buf, "ip_flags_frag", _get(buf, "ip_flags_frag") | 0x2000)  # MF
        elif which == 2:
            _set(buf, "ip_flags_frag", 0x4000 | rng.randint(1, 0x1FFF))  # fragment offset
        else:
            _set(buf, "ip_proto", rng.choice([6, 1, 0, 255]))
        if fix:
            _fix_checksum(buf)
    elif kind == Drop.IP_CHECKSUM:
        if rng.random() < 0.5:
            _set(buf, "ip_checksum", _get(buf, "ip_checksum") ^ (1 << rng.randrange(16)))
        else:
            _set(buf, rng.choice(["ip_ttl", "ip_id", "ip_src"]), rng.randrange(1 << 8))
            if _get(buf, "ip_checksum") != 0 and wire.ipv4_checksum(bytes(buf[14:34])) == 0:
                _set(buf, "ip_checksum", _get(buf, "ip_checksum") ^ 1)
    elif kind == Drop.DESTINATION:
        if rng.random() < 0.5:
            _set(buf, "eth_dst", rng.randrange(1 << 48) & ~(1 << 40))  # another unicast MAC
        else:
            _set(buf, "ip_dst", rng.choice([0x0A000002, 0xC0A80001, 0xF0000001, 0xDFFFFFFF]))
            if fix:
                _fix_checksum(buf)
    elif kind == Drop.UDP_PORT:
        _set(buf, "udp_dport", UDP_PORT ^ (1 << rng.randrange(16)))
    elif kind == Drop.AGG_HEADER:
        which = rng.randrange(3)
        if which == 0:
            _set(buf, "magic", wire.MAGIC ^ (1 << rng.randrange(16)))
        elif which == 1:
            _set(buf, "version", rng.choice([0, 2, 255]))
        else:
            _set(buf, "msg_type", rng.choice([0, 2, 3, 4, 5, 255]))
    elif kind == Drop.ELEMENT_COUNT:
        count = rng.choice([0, limit + 1, limit + rng.randint(1, 40), 0xFFFF])
        if rng.random() < 0.5:
            _set_lengths(buf, count)  # lengths agree with the count; the frame is short/long
        else:
            _set(buf, "element_count", count)
    elif kind == Drop.LENGTH:
        which = rng.randrange(7)
        count = _get(buf, "element_count")
        if which == 0:  # tail beyond the declared length (Ethernet-padding-like)
            buf.extend(rng.randbytes(rng.randint(1, 70)))
        elif which == 1 and count > 1:  # cut inside the payload
            del buf[64 + 4 * rng.randint(0, count - 1) + rng.choice([0, 1, 3]):]
        elif which == 2:
            _set(buf, "ip_total_length", _get(buf, "ip_total_length") + rng.choice([-4, 4, -1]))
            if fix:
                _fix_checksum(buf)
        elif which == 3:
            _set(buf, "udp_length", _get(buf, "udp_length") + rng.choice([-4, 4, 2]))
        elif which == 4:  # header only: exactly 64 bytes
            del buf[64:]
        elif which == 5:  # far longer than any message: overflows the per-frame write cap
            buf.extend(rng.randbytes(pmax_bytes + rng.randint(1, 200)))
        else:  # count smaller than the payload, lengths consistent with the count
            if count > 1:
                _set(buf, "element_count", count - 1)
            else:
                buf.extend(bytes(4))
    elif kind == Drop.TRUNCATED:
        del buf[rng.randint(1, 63):]
    else:
        raise AssertionError(kind)


def make_frames(rng: random.Random, n: int, limit: int, width: int, p_good: float = 0.4,
                msg_types: tuple[int, ...] = (wire.MsgType.CONTRIBUTION,),
                ) -> list[tuple[bytes, int | None]]:
    """``n`` random frames: (bytes, index of the beat with tuser set, or None)."""
    pmax_bytes = 4 * limit
    kb = width // 8
    frames = []
    for _ in range(n):
        count = rng.choice([1, 2, rng.randint(1, limit), limit, rng.randint(1, limit)])
        buf = bytearray(good_frame(rng, count, rng.choice(msg_types)))
        err = None
        if rng.random() > p_good:
            kinds = [k for k in Drop if k != Drop.FRAME_ERROR]
            for kind in rng.sample(kinds, rng.choice([1, 1, 1, 2, 3])):
                corrupt(rng, buf, kind, limit, pmax_bytes)
            if rng.random() < 0.12:
                err = rng.randrange(-(-len(buf) // kb))
        frames.append((bytes(buf), err))
    return frames


def to_beats(rng: random.Random, frame: bytes, width: int, err: int | None):
    """(tdata, tkeep, tlast, tuser) per beat; bytes beyond tkeep are random garbage."""
    kb = width // 8
    beats = []
    for i in range(0, len(frame), kb):
        chunk = frame[i:i + kb]
        keep = (1 << len(chunk)) - 1
        chunk = chunk + rng.randbytes(kb - len(chunk))
        beats.append([int.from_bytes(chunk, "little"), keep, int(i + kb >= len(frame)),
                      int(err == i // kb)])
    return beats


# --------------------------------------------------------------------------------------------
# Harness


class Run:
    """Drive an IngressParser with frames; record messages, verdict strobes and timing."""

    def __init__(self, dut: IngressParser, frames: list[tuple[bytes, int | None]], *,
                 p_valid: float, p_ready: float, seed: int, cfg_max: int | None = None,
                 ready_after: int = 0) -> None:
        self.dut, self.frames, self.ready_after = dut, frames, ready_after
        self.p_valid, self.p_ready = p_valid, p_ready
        self.rng = random.Random(seed)
        self.cfg_max = dut.element_limit if cfg_max is None else cfg_max
        self.cfg = PortConfig(local_mac=LOCAL_MAC, local_ip=LOCAL_IP, udp_port=UDP_PORT,
                              max_elements=min(self.cfg_max, dut.element_limit),
                              elements=dut.element_limit)
        self.expected = [parse_frame(f, self.cfg, frame_error=e is not None,
                                     accept=dut.accepted_types) for f, e in frames]
        self.messages: list[dict] = []
        self.verdicts: list[int | str] = []  # "accept" or a Drop code, in strobe order
        self.frames_in = 0
        self.in_xfer_cycles: list[int] = []
        self.out_xfer_cycles: list[int] = []
        self.tlast_cycles: list[int] = []
        self.first_out_cycles: list[int] = []  # first cycle m_msg.valid shows a new message
        self.not_ready_cycles = 0

    def run(self) -> Run:
        dut, rng = self.dut, self.rng
        width = dut.data_width
        beats = [b for f, e in self.frames for b in to_beats(rng, f, width, e)]
        n_accept = sum(isinstance(x, Message) for x in self.expected)

        async def tb(ctx) -> None:
            ctx.set(dut.local_mac, LOCAL_MAC)
            ctx.set(dut.local_ip, LOCAL_IP)
            ctx.set(dut.udp_port, UDP_PORT)
            ctx.set(dut.max_elements, self.cfg_max)
            s, o = dut.s_axis, dut.m_msg
            pos, presenting, cycle = 0, False, 0
            cur: dict | None = None
            seen_valid_first = False
            while (pos < len(beats) or len(self.messages) < n_accept
                   or len(self.verdicts) < len(self.frames) or cur is not None):
                assert cycle < 40 * len(beats) + 500, "parser stalled"
                if not presenting and pos < len(beats) and rng.random() < self.p_valid:
                    tdata, tkeep, tlast, tuser = beats[pos]
                    ctx.set(s.tdata, tdata)
                    ctx.set(s.tkeep, tkeep)
                    ctx.set(s.tlast, tlast)
                    ctx.set(s.tuser, tuser)
                    ctx.set(s.tvalid, 1)
                    presenting = True
                ready = cycle >= self.ready_after and rng.random() < self.p_ready
                ctx.set(o.ready, ready)
                moved = presenting and ctx.get(s.tready)
                if presenting and not ctx.get(s.tready):
                    self.not_ready_cycles += 1
                if moved:
                    self.in_xfer_cycles.append(cycle)
                    if beats[pos][2]:
                        self.tlast_cycles.append(cycle)
                # Event strobes (registered outputs).
                self.frames_in += ctx.get(dut.frame_in)
                assert not ctx.get(dut.rw_hazard), "payload read meets a write (no_rw_check)"
                assert not ctx.get(dut.copy_error), "a write-side flip-flop copy is wrong"
                acc, drp = ctx.get(dut.accept), ctx.get(dut.drop)
                assert not (acc and drp), "accept and drop in one cycle"
                if acc:
                    self.verdicts.append("accept")
                if drp:
                    self.verdicts.append(ctx.get(dut.drop_reason))
                # Output sink.
                if ctx.get(o.valid):
                    p = ctx.get(o.payload)
                    if p.first and not seen_valid_first:
                        self.first_out_cycles.append(cycle)
                        seen_valid_first = True
                    if ready:
                        self.out_xfer_cycles.append(cycle)
                        hdr = {name: int(getattr(p.hdr, name)) for name in HDR_FIELDS}
                        if cur is None:
                            assert p.first, "message does not start with first"
                            cur = {"hdr": hdr, "data": []}
                        else:
                            assert not p.first, "first inside a message"
                            assert hdr == cur["hdr"], "hdr changed within a message"
                        cur["data"].append(int(p.data))
                        if p.last:
                            self.messages.append(cur)
                            cur = None
                        seen_valid_first = False
                await ctx.tick()
                if moved:
                    pos += 1
                    presenting = False
                    ctx.set(s.tvalid, 0)
                cycle += 1
            for _ in range(6):  # nothing else may come out
                assert not ctx.get(dut.accept) and not ctx.get(dut.drop) and not ctx.get(o.valid)
                self.frames_in += ctx.get(dut.frame_in)
                await ctx.tick()
            self.cycles = cycle

        sim = Simulator(dut)
        sim.add_clock(1e-8)
        sim.add_testbench(tb)
        sim.run()
        return self

    def check(self) -> None:
        """Compare everything with the golden model."""
        width = self.dut.data_width
        want_verdicts = ["accept" if isinstance(x, Message) else int(x) for x in self.expected]
        assert self.verdicts == want_verdicts, _first_diff(self.verdicts, want_verdicts)
        assert self.frames_in == len(self.frames)
        assert self.frames_in == self.verdicts.count("accept") + sum(
            v != "accept" for v in self.verdicts)
        want = [x for x in self.expected if isinstance(x, Message)]
        assert len(self.messages) == len(want)
        for got, exp in zip(self.messages, want, strict=True):
            assert got["hdr"] == {name: getattr(exp, name) for name in HDR_FIELDS}
            n = exp.element_count
            assert len(got["data"]) == payload_beats(n, width)
            elems = np.array([(d >> (32 * k)) & 0xFFFFFFFF for d in got["data"]
                              for k in range(lanes(width))], np.uint64).astype(np.uint32)
            assert np.array_equal(elems[:n].view(np.int32), exp.payload)


def _first_diff(got: list, want: list) -> str:
    for i, (a, b) in enumerate(zip(got, want, strict=False)):
        if a != b:
            return f"frame {i}: got {a}, model says {b} (of {len(want)})"
    return f"lengths differ: got {len(got)}, want {len(want)}"


# --------------------------------------------------------------------------------------------
# Random mixes of good and bad frames against the model


@pytest.mark.parametrize(
    "width,limit,cfg_max,fifo_depth,p_valid,p_ready,n,seed",
    [
        (64, 24, None, None, 0.7, 0.6, 60, 1),
        (64, 24, 17, 16, 1.0, 0.3, 50, 2),  # FIFO of one max message, slow sink
        (256, 40, None, None, 0.6, 0.8, 70, 3),
        (256, 40, 1000, None, 1.0, 1.0, 70, 4),  # port limit above the instance limit
        (512, 48, None, None, 0.8, 0.5, 80, 5),
        (512, 48, 30, 4, 1.0, 0.4, 70, 6),  # minimal FIFO: stalls on room
        (512, 16, None, None, 1.0, 1.0, 80, 7),  # single-beat payloads back to back
    ],
)
@pytest.mark.parametrize("dram", [False, True])
def test_random_frames_match_model(width, limit, cfg_max, fifo_depth, p_valid, p_ready, n,
                                   seed, dram) -> None:
    rng = random.Random(seed)
    dut = IngressParser(width, max_elements=limit, fifo_depth=fifo_depth, **dram_cuts(dram))
    eff = min(limit, cfg_max if cfg_max is not None else limit)
    frames = make_frames(rng, n, eff, width)
    run = Run(dut, frames, p_valid=p_valid, p_ready=p_ready, seed=seed, cfg_max=cfg_max).run()
    run.check()
    # The mix must exercise every reason and acceptance.
    reasons = {v for v in run.verdicts}
    assert "accept" in reasons


@pytest.mark.parametrize("dram", [False, True])
def test_every_drop_reason_each_width(dram: bool) -> None:
    """Each single fault, on every width: the reason is exactly the model's (and the intended)."""
    for width, seed in ((64, 10), (256, 11), (512, 12)):
        rng = random.Random(seed)
        limit = 20
        frames = []
        for kind in Drop:
            for _ in range(3):
                buf = bytearray(good_frame(rng, rng.randint(1, limit)))
                err = None
                if kind == Drop.FRAME_ERROR:
                    err = rng.randrange(-(-len(buf) // (width // 8)))
                else:
                    corrupt(rng, buf, kind, limit, 4 * limit)
                frames.append((bytes(buf), err))
            frames.append((good_frame(rng, rng.randint(1, limit)), None))
        dut = IngressParser(width, max_elements=limit, **dram_cuts(dram))
        run = Run(dut, frames, p_valid=0.8, p_ready=0.7, seed=seed).run()
        run.check()
        got = {v for v in run.verdicts if v != "accept"}
        assert got == {int(k) for k in Drop}, f"W={width}: reasons seen {sorted(got)}"


def test_scapy_frames() -> None:
    """Frames built by scapy (independent IPv4/UDP encoder): good ones pass, faulty ones drop."""
    from scapy.layers.inet import IP, UDP, IPOption_NOP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    rng = random.Random(20)
    mac = ":".join(f"{b:02x}" for b in LOCAL_MAC.to_bytes(6, "big"))
    ip = wire.int_to_ip(LOCAL_IP)

    def dgram(count: int) -> bytes:
        agg = wire.AggHeader(msg_type=wire.MsgType.CONTRIBUTION, job_id=3, round_id=7,
                             chunk=rng.randrange(1 << 32), sender_id=5, group_id=2,
                             scale_exp=-9, element_count=count)
        return agg.pack() + struct.pack(f"<{count}i", *(rng.randrange(-(1 << 31), 1 << 31)
                                                         for _ in range(count)))

    frames = [
        Ether(dst=mac, src="02:00:00:00:00:09") / IP(src="10.0.0.9", dst=ip, flags="DF")
        / UDP(sport=1234, dport=UDP_PORT) / Raw(dgram(13)),
        Ether(dst="01:00:5e:01:02:03", src="02:00:00:00:00:09")
        / IP(src="10.0.0.7", dst="239.1.2.3", ttl=3) / UDP(sport=9, dport=UDP_PORT)
        / Raw(dgram(1)),
        Ether(dst=mac) / IP(dst=ip, chksum=0x1234) / UDP(dport=UDP_PORT) / Raw(dgram(4)),
        Ether(dst=mac) / IP(dst=ip, options=[IPOption_NOP()] * 4) / UDP(dport=UDP_PORT)
        / Raw(dgram(4)),
        Ether(dst=mac) / IP(dst=ip, flags="MF") / UDP(dport=UDP_PORT) / Raw(dgram(4)),
        Ether(dst=mac) / IP(dst=ip) / UDP(dport=UDP_PORT + 1) / Raw(dgram(4)),
        Ether(dst=mac, src="02:00:00:00:00:09") / IP(src="10.0.0.9", dst=ip)
        / UDP(sport=1, dport=UDP_PORT) / Raw(dgram(20)),
    ]
    data = [(bytes(f), None) for f in frames]
    for width in (64, 512):
        dut = IngressParser(width, max_elements=32)
        run = Run(dut, data, p_valid=0.9, p_ready=0.8, seed=21).run()
        run.check()
        assert run.verdicts == ["accept", "accept", int(Drop.IP_CHECKSUM), int(Drop.IP_HEADER),
                                int(Drop.IP_HEADER), int(Drop.UDP_PORT), "accept"]


def test_ipv4_checksum_values() -> None:
    """Random IPv4 header contents with right, alternative (0 <-> 0xFFFF) and wrong checksums."""
    rng = random.Random(25)
    frames = []
    for _ in range(120):
        buf = bytearray(good_frame(rng, rng.randint(1, 4)))
        high = rng.random() < 0.5  # large words: sums up to 7 x 0xFFFF before folding
        for name in ("ip_dscp_ecn", "ip_id", "ip_ttl", "ip_src"):
            bits = 8 * wire.FIELD[name].size
            _set(buf, name, (1 << bits) - 1 - rng.getrandbits(2) if high else rng.getrandbits(bits))
        if high or rng.random() < 0.3:
            _set(buf, "ip_dst", 0xEFFFFFFF - rng.getrandbits(3 if high else 28))
        _fix_checksum(buf)
        r = rng.random()
        if r < 0.25:  # the other one's-complement zero: still a good checksum
            c = _get(buf, "ip_checksum")
            if c in (0, 0xFFFF):
                _set(buf, "ip_checksum", c ^ 0xFFFF)
        elif r < 0.6:
            _set(buf, "ip_checksum", rng.getrandbits(16))
        frames.append((bytes(buf), None))
    run = Run(IngressParser(64, max_elements=8), frames, p_valid=1.0, p_ready=1.0,
              seed=26).run()
    run.check()
    assert run.verdicts.count(int(Drop.IP_CHECKSUM)) > 20


@pytest.mark.parametrize("width", [64, 512])
def test_header_only_and_truncated_back_to_back(width: int) -> None:
    """Frames ending at byte 64 (verdict waits for the header checks) next to truncated ones."""
    rng = random.Random(27 + width)
    frames = []
    for _ in range(40):
        buf = bytearray(good_frame(rng, rng.randint(1, 8)))
        r = rng.random()
        if r < 0.4:
            del buf[64:]
        elif r < 0.7:
            del buf[rng.randint(1, 63):]
        frames.append((bytes(buf), rng.choice([None] * 5 + [0])))
    run = Run(IngressParser(width, max_elements=8), frames, p_valid=1.0, p_ready=1.0,
              seed=28).run()
    run.check()


@pytest.mark.parametrize("accept_control", [False, True])
def test_control_messages_on_host_port(accept_control: bool) -> None:
    rng = random.Random(30 + accept_control)
    types = (wire.MsgType.CONTRIBUTION, wire.MsgType.RESULT, wire.MsgType.CONTROL,
             wire.MsgType.CONTROL_REPLY)
    frames = [(good_frame(rng, rng.randint(1, 12), t), None) for t in types for _ in range(4)]
    rng.shuffle(frames)
    frames += make_frames(rng, 20, 12, 256, msg_types=types)
    dut = IngressParser(256, max_elements=12, accept_control=accept_control)
    run = Run(dut, frames, p_valid=0.8, p_ready=0.7, seed=32).run()
    run.check()
    got_types = {m["hdr"]["msg_type"] for m in run.messages}
    want = {1, 3} if accept_control else {1}
    assert got_types == want


@pytest.mark.parametrize("width", [64, 512])
@pytest.mark.parametrize("cfg_max", [0, 1])
def test_max_elements_register_does_not_limit_control(width: int, cfg_max: int) -> None:
    """MAX_ELEMENTS 0 or 1 drops contributions above it but no CONTROL message up to E."""
    rng = random.Random(40 + cfg_max)
    limit = 12
    frames = [(good_frame(rng, count, t), None)
              for count in (1, 2, 3, limit - 1, limit, limit + 1)
              for t in (wire.MsgType.CONTROL, wire.MsgType.CONTRIBUTION)]
    dut = IngressParser(width, max_elements=limit, accept_control=True)
    run = Run(dut, frames, p_valid=0.9, p_ready=0.8, seed=41, cfg_max=cfg_max).run()
    run.check()
    ctrl_counts = [m["hdr"]["element_count"] for m in run.messages
                   if m["hdr"]["msg_type"] == wire.MsgType.CONTROL]
    assert ctrl_counts == [1, 2, 3, limit - 1, limit]
    assert run.verdicts.count(int(Drop.ELEMENT_COUNT)) == 1 + (6 - cfg_max)


@pytest.mark.parametrize("dram", [False, True])
def test_group_addressed_destinations(dram: bool) -> None:
    """docs/protocol.md DESTINATION: any group MAC (I/G bit, broadcast included; not checked
    against the IP group) with our IP or any 224.0.0.0/4 address passes; a unicast MAC must be
    ours, a unicast IP ours."""
    rng = random.Random(50)
    cases = [  # (eth_dst, ip_dst, accepted)
        (0xFFFFFFFFFFFF, LOCAL_IP, True),
        (wire.multicast_mac(0xEF000001), 0xE0000005, True),
        (0x030000000000, 0xEFFFFFFF, True),
        (LOCAL_MAC, 0xE1020304, True),
        (LOCAL_MAC ^ (1 << 8), LOCAL_IP, False),
        (0xFFFFFFFFFFFF, LOCAL_IP ^ 1, False),
        (0xFFFFFFFFFFFF, 0xF0000001, False),  # 240/4 is not multicast
    ]
    frames = []
    for mac, ip, _ in cases:
        buf = bytearray(good_frame(rng, 3))
        _set(buf, "eth_dst", mac)
        _set(buf, "ip_dst", ip)
        _fix_checksum(buf)
        frames.append((bytes(buf), None))
    run = Run(IngressParser(64, max_elements=8, **dram_cuts(dram)), frames, p_valid=1.0,
              p_ready=1.0, seed=50).run()
    run.check()
    assert run.verdicts == ["accept" if ok else int(Drop.DESTINATION) for *_, ok in cases]


# --------------------------------------------------------------------------------------------
# Throughput and latency


@pytest.mark.parametrize("width", [64, 256, 512])
@pytest.mark.parametrize("dram", [False, True])
def test_back_to_back_throughput_and_latency(width: int, dram: bool) -> None:
    """20 back-to-back maximum-size frames, sink always ready: 1 beat/cycle in, no idle cycle
    (``dram``: the parser of the DRAM core, the same cycles)."""
    rng = random.Random(40 + width)
    limit = wire.MAX_ELEMENTS_DEFAULT  # largest message of the default 2048-byte MTU
    frames = [(good_frame(rng, limit), None) for _ in range(20)]
    dut = IngressParser(width, max_elements=limit, **dram_cuts(dram))
    run = Run(dut, frames, p_valid=1.0, p_ready=1.0, seed=41).run()
    run.check()
    in_beats = len(run.in_xfer_cycles)
    span = run.in_xfer_cycles[-1] - run.in_xfer_cycles[0] + 1
    assert in_beats == 20 * (header_beats(width) + payload_beats(limit, width))
    assert span == in_beats, f"input: {in_beats} beats in {span} cycles"
    assert run.not_ready_cycles == 0
    # Output: each message's beats leave back to back, concurrently with the input.
    out = run.out_xfer_cycles
    assert len(out) == 20 * payload_beats(limit, width)
    latency = [f - t for t, f in zip(run.tlast_cycles, run.first_out_cycles, strict=True)]
    assert set(latency) == {4}, latency  # tlast -> verdict -> push -> read -> first beat
    pb = payload_beats(limit, width)
    for k in range(20):
        seg = out[k * pb:(k + 1) * pb]
        assert seg[-1] - seg[0] == pb - 1, "idle cycle inside a message"
        assert seg[0] < run.in_xfer_cycles[-1] or k == 19  # output overlaps the input


@pytest.mark.parametrize("width", [64, 256, 512])
def test_output_one_beat_per_cycle_while_input_runs(width: int) -> None:
    """Sink blocked until the FIFO is full, then always ready: m_msg drains at 1 beat/cycle
    across message boundaries while the input keeps accepting beats in the same cycles."""
    rng = random.Random(45 + width)
    limit = 64
    pb = payload_beats(limit, width)
    frames = [(good_frame(rng, limit), None) for _ in range(10)]
    dut = IngressParser(width, max_elements=limit)
    release = 4 * (header_beats(width) + pb)
    run = Run(dut, frames, p_valid=1.0, p_ready=1.0, seed=46, ready_after=release).run()
    run.check()
    out = run.out_xfer_cycles
    assert out[0] == release
    longest, cur = 1, 1
    for a, b in zip(out, out[1:], strict=False):
        cur = cur + 1 if b == a + 1 else 1
        longest = max(longest, cur)
    assert longest >= 2 * pb, f"longest back-to-back output run {longest} < {2 * pb}"
    window = set(range(release, release + 2 * pb))
    assert window <= set(out)  # two whole messages, no bubble at the boundary
    assert len(window & set(run.in_xfer_cycles)) >= pb  # ... while the input runs


@pytest.mark.parametrize("width", [64, 512])
def test_back_to_back_small_and_bad_frames_no_stall(width: int) -> None:
    """Minimum-size messages and drops mixed in, back to back: the input never stalls."""
    rng = random.Random(50 + width)
    limit = 32
    frames = []
    for _ in range(40):
        if rng.random() < 0.5:
            frames.append((good_frame(rng, rng.choice([1, 2, lanes(width), limit])), None))
        else:
            buf = bytearray(good_frame(rng, rng.randint(1, limit)))
            kind = rng.choice([k for k in Drop if k not in (Drop.FRAME_ERROR, Drop.LENGTH,
                                                            Drop.TRUNCATED)])
            corrupt(rng, buf, kind, limit, 4 * limit)
            frames.append((bytes(buf), rng.choice([None, None, 0])))
    dut = IngressParser(width, max_elements=limit)
    run = Run(dut, frames, p_valid=1.0, p_ready=1.0, seed=51).run()
    run.check()
    assert run.not_ready_cycles == 0
    span = run.in_xfer_cycles[-1] - run.in_xfer_cycles[0] + 1
    assert span == len(run.in_xfer_cycles)
    # Back-to-back single-beat messages leave one per cycle when their frames are short enough.
    assert len(run.messages) >= 10


@pytest.mark.parametrize("width", [64, 128, 256, 512])
@pytest.mark.parametrize("limit_lanes", [0, 2])
def test_payload_length_check_back_to_back(width: int, limit_lanes: int) -> None:
    """The payload-length check (beats and last tkeep against element_count, registered at the
    last payload beat from the header's last beat as it arrives) on back-to-back frames whose
    payload is 0, 1 or 3 bytes off, one element off or one beat off, with tuser on some last
    beats, among good ones: one-beat payloads right after their header included, header-only
    frames, and a parser built for one element (a zero-width beat index)."""
    rng = random.Random(60 + width + limit_lanes)
    L = lanes(width)
    limit = 1 if limit_lanes == 0 else limit_lanes * L + 1
    counts = sorted({c for c in (1, 2, L - 1, L, L + 1, 2 * L, 2 * L + 1) if 1 <= c <= limit})
    frames = []
    for count in counts:
        for delta in (0, -4 * L, -4, -1, 0, 1, 3, 4, 4 * L, 0):
            if 4 * count + delta < 0:
                continue
            buf = good_frame(rng, count)
            frame = buf[:64] + rng.randbytes(4 * count + delta)
            err = None
            if rng.random() < 0.15:  # tuser on the last beat
                err = -(-len(frame) // (width // 8)) - 1
            frames.append((frame, err))
    rng.shuffle(frames)
    if L <= limit:  # a header-only frame after one whose single payload beat is full: the
        # last-beat index (0) and tkeep (all ones) still match, but it has no payload
        for _ in range(3):
            frames += [(good_frame(rng, L), None), (good_frame(rng, L)[:64], None)]
    run = Run(IngressParser(width, max_elements=limit), frames, p_valid=1.0, p_ready=1.0,
              seed=61).run()
    run.check()
    assert run.verdicts.count(int(Drop.LENGTH)) >= len(counts) * 4
    assert run.verdicts.count("accept") >= len(counts)


@pytest.mark.parametrize("width", [64, 512])
@pytest.mark.parametrize("dram", [False, True])
def test_descriptor_fifo_fills_and_drains(width: int, dram: bool) -> None:
    """Sink blocked while 40 one-element messages arrive (room for all of them in the payload
    FIFO): the descriptor FIFO fills, ``tready`` holds the input back instead of losing or
    overwriting a descriptor, and after the release every message leaves, in order, intact."""
    rng = random.Random(70 + width)
    frames = [(good_frame(rng, 1), None) for _ in range(40)]
    dut = IngressParser(width, max_elements=1, fifo_depth=64, **dram_cuts(dram))
    release = 40 * (header_beats(width) + 1) + 50
    run = Run(dut, frames, p_valid=1.0, p_ready=1.0, seed=71, ready_after=release).run()
    run.check()
    held = sum(t < release for t in run.tlast_cycles)  # frames taken while nothing could leave
    assert DESC_DEPTH - 3 <= held <= DESC_DEPTH, held
    assert run.not_ready_cycles > 0


@pytest.mark.parametrize("width", [64, 512])
@pytest.mark.parametrize("dram", [False, True])
def test_address_change_applies_from_a_frames_first_beat(width: int, dram: bool) -> None:
    """A change of ``local_mac``/``local_ip``/``udp_port`` made as late as the cycle a frame's
    first beat is presented applies to that frame, back to back with the previous one: the
    slack a register on those inputs may take (issue 12's Fmax work; one register stage
    passes, two fail at W = 512, where the header is one beat). Frames alternate between two
    unicast addresses (MAC and IP both compared) and the configuration with them: a frame for
    the configured address is accepted, one for the other address dropped (DESTINATION)."""
    rng = random.Random(80 + width)
    addrs = [(LOCAL_MAC, LOCAL_IP, UDP_PORT), (0x02_AB_CD_EF_01_23, 0xC0_A8_07_09, 4791)]

    def frame_for(k: int) -> bytes:
        mac, ip, port = addrs[k]
        buf = bytearray(good_frame(rng, rng.randint(1, 6)))
        _set(buf, "eth_dst", mac)
        _set(buf, "ip_dst", ip)
        _set(buf, "udp_dport", port)
        _fix_checksum(buf)
        return bytes(buf)

    # (address the frame is sent to, configured address while it arrives)
    plan = [(0, 0), (1, 1), (0, 0), (0, 0), (1, 1), (1, 0), (0, 1), (1, 1), (0, 0)]
    frames = [frame_for(to) for to, _ in plan]
    dut = IngressParser(width, max_elements=8, **dram_cuts(dram))
    verdicts: list[int | str] = []

    async def tb(ctx) -> None:
        def configure(k: int) -> None:
            mac, ip, port = addrs[k]
            ctx.set(dut.local_mac, mac)
            ctx.set(dut.local_ip, ip)
            ctx.set(dut.udp_port, port)

        configure(plan[0][1])
        ctx.set(dut.max_elements, 8)
        ctx.set(dut.m_msg.ready, 1)
        await ctx.tick().repeat(2)
        for n, f in enumerate(frames):
            beats = to_beats(rng, f, width, None)
            for i, (tdata, tkeep, tlast, tuser) in enumerate(beats):
                ctx.set(dut.s_axis.tdata, tdata)
                ctx.set(dut.s_axis.tkeep, tkeep)
                ctx.set(dut.s_axis.tlast, tlast)
                ctx.set(dut.s_axis.tuser, tuser)
                ctx.set(dut.s_axis.tvalid, 1)
                if i == 0:
                    configure(plan[n][1])  # with the frame's first beat
                while True:
                    taken = ctx.get(dut.s_axis.tready)
                    if ctx.get(dut.accept):
                        verdicts.append("accept")
                    if ctx.get(dut.drop):
                        verdicts.append(ctx.get(dut.drop_reason))
                    await ctx.tick()
                    if taken:
                        break
        ctx.set(dut.s_axis.tvalid, 0)
        for _ in range(40):
            if ctx.get(dut.accept):
                verdicts.append("accept")
            if ctx.get(dut.drop):
                verdicts.append(ctx.get(dut.drop_reason))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert verdicts == ["accept" if to == cf else int(Drop.DESTINATION) for to, cf in plan]


@pytest.mark.parametrize("width", [64, 512])
@pytest.mark.parametrize("split", [False, True])
def test_address_inputs_reach_one_flip_flop(width: int, split: bool) -> None:
    """``local_mac`` and ``local_ip`` (from the control block, across the chip) are compared as
    the field's last beat arrives and registered there: no cell between them and H1's check
    registers (cut 11; cut 10c's seed 4: local_ip -> h_ip_ok -> h_all_ok_a, 8.11 ns). Fails
    before cut 11 (the compares ANDed with the other checks into h_all_ok_a / h_dest_ok).
    ``split``: the compares a byte per flip-flop (``split_compares``), the same."""
    regs = ["h_all_ok_a", "h_all_ok_b", "h_dest_ok"]
    table = comb_cells_table(IngressParser(width, max_elements=8, split_compares=split),
                             ["local_ip", "local_mac"], [*regs, "ip_dst_eq*", "eth_dst_eq*"])
    for src in ("local_ip", "local_mac"):
        for reg in regs:
            assert not table[src, reg], (src, reg, table[src, reg])
    assert table["local_ip", "ip_dst_eq*"] and table["local_mac", "eth_dst_eq*"]  # the compares


@pytest.mark.parametrize("width", [64, 256, 512])
@pytest.mark.parametrize("split", [False, True])
def test_address_compares_a_byte_per_flip_flop_with_split_compares(width: int, split: bool) -> None:
    """With ``split_compares`` (the DRAM core's parsers) ``tdata`` reaches the address-compare
    flip-flops through 8-bit equalities (``eth_dst_eq0``.., ANDed in H1), not a 48-bit one:
    ``s_axis__tdata`` -> ``parser_host.eth_dst_eq`` was 8.95 ns in the Versa DRAM build (session
    40's seed 3). Without it (the on-chip core's parsers, RTL unchanged) the 48- and 32-bit
    compares are there: the before-case. The random-frame, drop-reason, group-address and
    address-change tests run the split parser against the model."""
    dut = IngressParser(width, max_elements=8, split_compares=split)
    stop = "-$dff,$memrd,$memrd_v2"
    widths = {}
    for field in ("eth_dst", "ip_dst"):
        (stat,) = _yosys_on(dut, (
            f"select -set fwd w:s_axis__tdata %co*:{stop}; "
            f"select -set bwd w:{field}_eq* %ci1:+$dff[Q] %ci1:+$dff[D] %ci*:{stop}; "
            f"tee -q -o stat.txt stat -width @fwd @bwd %i c:* %i t:$dff %d"), "stat.txt")
        widths[field] = {int(n) for n in re.findall(r"\$eq_(\d+)", stat)}
    if split:
        assert widths == {"eth_dst": {8}, "ip_dst": {8}}, widths
    else:
        assert widths == {"eth_dst": {48}, "ip_dst": {32}}, widths


@pytest.mark.parametrize("registered_desc", [False, True])
def test_output_enables_read_no_descriptor_pointer_with_registered_desc(registered_desc: bool) -> None:
    """With ``registered_desc`` (the DRAM core's parsers) the read side's registers (the
    message header ``out_hdr``, ``out_first`` / ``out_last``, ``rd_left``, ``rd_ptr``: their
    enable is ``advance & (rd_more | r_rdy)``) and the FIFO's own ``consume`` start from
    flip-flops: no cell from the descriptor FIFO's pointers (``produce != consume``, the FIFO's
    ready) to them. `parser_host.desc_fifo.produce` -> `s_msg__payload` (108 endpoints, 10.82
    ns) was the Versa DRAM build's core worst at session 40's seed 3. Without it (with
    ``registered_more``, as the DRAM core's parsers were before this cut) the compare is
    there: the before-case. The random-frame benches check the FIFO's copies (``copy_error``)."""
    dut = IngressParser(64, max_elements=256, registered_more=True, registered_desc=registered_desc)
    regs = ["out_hdr", "out_first", "out_last", "rd_left", "rd_ptr"]
    table = comb_cells_table(dut, ["desc_fifo.produce", "desc_fifo.consume"], regs)
    for src in ("desc_fifo.produce", "desc_fifo.consume"):
        for reg in regs:
            assert bool(sum(table[src, reg].values())) != registered_desc, (src, reg, table[src, reg])


@pytest.mark.parametrize("lazy_head", [False, True])
def test_output_ready_reaches_no_wide_register_with_lazy_head(lazy_head: bool) -> None:
    """With ``lazy_head`` (the DRAM core's parsers) ``m_msg.ready`` reaches the descriptor
    FIFO's head registers (``head``, ``nxt``) and the output header's (``hdr_o``)
    only through a flip-flop (``took``/``popped``, ``consume_n``): two flip-flops to their
    outputs. Without it (``registered_desc`` alone, the DRAM core's parsers before this cut)
    ``advance`` -> ``r_en`` picks every head bit's next value and enables ``out_hdr`` within the
    cycle (``demux.data_skid.s__ready`` -> ``desc_fifo.head``, 11.87 ns, 184 endpoints at
    session 42's seed 5): one. The random-frame benches (``dram``) check the values."""
    dut = IngressParser(64, max_elements=256, registered_more=True, registered_desc=True,
                        lazy_head=lazy_head)
    wide = (["desc_fifo.head", "desc_fifo.nxt", "hdr_o"] if lazy_head
            else ["desc_fifo.head", "out_hdr"])
    assert min_flops_between(dut, ["m_msg__ready"], wide) == (2 if lazy_head else 1)


@pytest.mark.parametrize("registered_one", [False, True])
def test_descriptor_nxt_reads_no_pointer_compare_with_registered_one(registered_one: bool) -> None:
    """With ``registered_one`` (the DRAM core's parsers, ``dram_cuts``) the descriptor FIFO's
    ``nxt`` (the entry after the head, ~150 bits) is picked by the flip-flop ``one`` alone: no
    cell from the FIFO's pointers' compare or the push (``v_push``, the FIFO's write enable) to
    it within a cycle (two flip-flops to its output, ``nxt`` included), and from ``consume_n``
    only the LUT RAM's read. Without it (``lazy_head``
    alone, the DRAM core's parsers before this cut) ``consume_n`` / ``produce`` -> ``produce ==
    consume_n`` -> ``w_en & one`` -> every ``nxt`` bit: ``parser_net0.desc_fifo.nxt`` from
    ``consume_n``, 9.90 ns, 70 endpoints at session 42's landing seed 1 (the host parser's 9.13
    at seed 5, from ``produce`` 8.70 at seed 2): one, the before-case. The random-frame benches
    (``dram``) check the values and ``one`` against the pointers (``copy_error``)."""
    dut = IngressParser(64, max_elements=256, **{**dram_cuts(True), "registered_one": registered_one})
    assert min_flops_between(dut, ["desc_fifo.produce", "v_push"], ["desc_fifo.nxt"]) == (
        2 if registered_one else 1)
    table = comb_cells_table(dut, ["desc_fifo.consume_n", "desc_fifo.produce"], ["desc_fifo.nxt"])
    for src in ("desc_fifo.consume_n", "desc_fifo.produce"):
        assert ("$eq" in table[src, "desc_fifo.nxt"]) != registered_one, (src, table)


# --------------------------------------------------------------------------------------------
# Construction and conversion


def test_tready_reads_no_beat_counter() -> None:
    """``tready`` (which gates the transfer that loads the beat counters) starts from
    flip-flops worked out a cycle ahead (``stores_r``, ``first_r``), not from the header beat
    index and payload count: no compare of ``beat`` / ``pay_cnt`` in front of it (cut 9's seed
    1: ``beat`` -> ``pay_cnt`` -> ``tready`` -> ``beat``, 8.12 ns, docs/benchmarks.md "Cut 9").
    copy_error checks the copies (the random-frame benches)."""
    sources, _ = comb_cone(IngressParser(64, max_elements=256), "s_axis__tready")
    assert not {"beat", "pay_cnt"} & sources and {"stores_r", "first_r"} <= sources, sources


@pytest.mark.parametrize("direct_pay_flags", [False, True])
def test_payload_flags_read_no_adder_with_direct_pay_flags(direct_pay_flags: bool) -> None:
    """With ``direct_pay_flags`` (the DRAM core's parsers, ``dram_cuts``) the next values of
    ``stores_r`` / ``first_r`` (``tready``'s copies) and ``e_wrote`` are compares of ``pay_cnt``
    itself: no adder in their cones. Without it (the on-chip core's parsers, RTL unchanged; the
    DRAM core's before this cut) ``pay_cnt + 1`` runs on into the compares
    (``parser_net0.pay_cnt`` -> ``first_r``, 8.24 / 8.68 ns, ``e_wrote`` 8.58 at session 42's
    landing seeds 1 / 5): the before-case. ``copy_error`` checks ``stores_r`` / ``first_r``
    every cycle, the random-frame benches (``dram``) every verdict."""
    dut = IngressParser(64, max_elements=256, **{**dram_cuts(True), "direct_pay_flags": direct_pay_flags})
    for reg in ("stores_r", "first_r", "e_wrote"):
        n_add, _ = comb_cells_before(dut, "pay_cnt", reg, "$add")
        assert (n_add == 0) == direct_pay_flags, (reg, n_add)


@pytest.mark.parametrize("early_lengths", [False, True])
def test_length_check_reads_no_adder_with_early_lengths(early_lengths: bool) -> None:
    """With ``early_lengths`` (the DRAM core's parsers, ``dram_cuts``) at W = 64 (both length
    fields arrive before the header's last beat) H1's length check ``h_len_ok`` and the verdict's
    ``h_all_ok_b`` compare registers with ``element_count``: no adder or subtracter in their
    cones from ``hdr``. Without it (the on-chip core's parsers, RTL unchanged; the DRAM core's
    before this cut) ``4 * element_count + 50`` / ``+ 30`` is added in H1's cycle
    (``parser_host.hdr`` -> ``h_all_ok_b``, 8.38 ns at session 42's landing seed 2): the
    before-case. The random-frame and drop-reason benches (``dram``) check the verdicts
    (LENGTH drops among them) at every W."""
    dut = IngressParser(64, max_elements=256, **{**dram_cuts(True), "early_lengths": early_lengths})
    for reg in ("h_len_ok", "h_all_ok_b"):
        arith = sum(comb_cells_before(dut, "hdr", reg, t)[0] for t in ("$add", "$sub"))
        assert (arith == 0) == early_lengths, (reg, arith)


@pytest.mark.parametrize("registered_more", [False, True])
def test_descriptor_read_reads_no_beat_count_with_registered_more(registered_more: bool) -> None:
    """With ``registered_more`` the descriptor FIFO's read pointer (``consume``) starts from the
    flip-flop ``rd_more``, not from a compare of ``rd_left``: `parser_net0.rd_left` ->
    `desc_fifo.consume` was the Versa DRAM build's core path (9.45 ns at session 37's seed 3).
    Without it (the on-chip core's parsers, RTL unchanged) the compare is there: the
    before-case. The random-frame benches check rd_more against the model's messages."""
    dut = IngressParser(64, max_elements=256, registered_more=registered_more)
    table = comb_cells_table(dut, ["rd_left", "rd_more"] if registered_more else ["rd_left"],
                             ["desc_fifo.consume"])
    assert bool(sum(table["rd_left", "desc_fifo.consume"].values())) != registered_more, table
    if registered_more:
        assert sum(table["rd_more", "desc_fifo.consume"].values()), table


def test_construction_validation() -> None:
    for bad_width in (32, 96, 128 + 32, 1024, 0, "64"):
        with pytest.raises(ValueError):
            IngressParser(bad_width, max_elements=16)
    for bad_max in (0, -1, wire.MAX_ELEMENTS_JUMBO + 1, True, 3.0):
        with pytest.raises(ValueError):
            IngressParser(64, max_elements=bad_max)
    for bad_depth in (3, 1, 48, 8, True):  # 8 < payload_beats(32, 64) = 16
        with pytest.raises(ValueError):
            IngressParser(64, max_elements=32, fifo_depth=bad_depth)
    dut = IngressParser(64, max_elements=32)
    assert dut.fifo_depth == 32  # two 16-beat messages
    assert IngressParser(512, max_elements=wire.MAX_ELEMENTS_DEFAULT).fifo_depth == 64
    assert IngressParser(64, max_elements=32, fifo_depth=16).fifo_depth == 16
    assert IngressParser(64, max_elements=8, accept_control=True).accepted_types == (1, 3)
    with pytest.raises(ValueError, match="lazy_head needs registered_desc"):
        IngressParser(64, max_elements=8, lazy_head=True)
    with pytest.raises(ValueError, match="registered_one needs registered_desc"):
        IngressParser(64, max_elements=8, registered_one=True)
    assert all(dram_cuts(True).values()) and not any(dram_cuts(False).values())


def test_verilog_conversion_w512() -> None:
    dut = IngressParser(512, max_elements=wire.MAX_ELEMENTS_DEFAULT, accept_control=True)
    text = verilog.convert(dut, name="ingress_parser")
    assert "module ingress_parser" in text
    assert "s_axis__tdata" in text and "m_msg__payload" in text


@pytest.mark.parametrize("free_head", [False, True])
def test_push_reaches_no_descriptor_head_bit_with_free_head(free_head: bool) -> None:
    """With ``free_head`` (the DRAM core's parsers, ``dram_cuts``) no cell from ``v_push`` (the
    descriptor FIFO's write enable) to its head register (``desc_fifo.r_last``, read by the
    output header after a read): its select is the FIFO's ``rdy`` flip-flop alone. Without it
    (db90a43's DRAM parsers) ``v_push`` -> ``w_en & ~rdy`` -> every head bit (8.32-8.56 ns at
    session 44's seeds 1 / 2): the before-case. The random-frame benches (``dram``) check the
    messages."""
    dut = IngressParser(64, max_elements=256, **{**dram_cuts(True), "free_head": free_head})
    cells = comb_cells_table(dut, ["v_push"], ["desc_fifo.head"])["v_push", "desc_fifo.head"]
    assert bool(sum(cells.values())) != free_head, cells


@pytest.mark.parametrize("room_count", [False, True])
def test_descriptor_room_reads_no_fifo_pointer_with_room_count(room_count: bool) -> None:
    """With ``room_count`` (the DRAM core's parsers, ``dram_cuts``) the descriptor FIFO's room
    (``desc_room``) is worked out from the parser's own count of the entries (``desc_count``):
    no cell from the FIFO's pointers (``produce``, read by its LUT RAM's write address across
    the chip, and ``consume``) to it, and no adder in front of its compare. Without it (3a66ba7's
    DRAM parsers) ``level`` = ``produce - consume``, + ``v_push`` + ``e_valid``, then the compare
    (``parser_net0.desc_fifo.produce`` -> ``desc_room``, 9.03 ns, a 4.7 ns route into the adder
    at session 46's landing seed 1): the before-case. ``copy_error`` checks the count against
    the pointers every cycle in the random-frame, drop-reason and fill-and-drain benches
    (``dram``)."""
    dut = IngressParser(64, max_elements=256, **{**dram_cuts(True), "room_count": room_count})
    table = comb_cells_table(dut, ["desc_fifo.produce", "desc_fifo.consume"], ["desc_room"])
    for src in ("desc_fifo.produce", "desc_fifo.consume"):
        assert bool(sum(table[src, "desc_room"].values())) != room_count, (src, table)
    arith = sum(comb_cells_before(dut, "desc_count" if room_count else "desc_fifo.produce", "desc_room", t)[0]
                for t in ("$add", "$sub"))
    assert (arith == 0) == room_count, arith
