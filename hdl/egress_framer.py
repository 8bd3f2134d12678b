"""Egress framer: message stream in, complete Ethernet II / IPv4 / UDP frames out (AXI4-Stream).

Results and control replies leave the core toward the local hosts as ordinary UDP datagrams.
For each message on ``s_msg`` the framer sends the 64-byte frame header
(``header_beats(W)`` beats, all bytes kept) and then the message's payload beats; on the last
payload beat ``tkeep`` keeps only the bytes of the first ``4 * element_count`` (mod the beat)
bytes; ``tlast`` marks the last beat; ``tuser`` is always 0; no FCS (the MAC appends it).

Header contents (bytes exactly as ``wire.frame(AggHeader(...), payload, L2L3(...))`` builds them,
every constant taken from ``wanreduce.wire``):

- Ethernet: ``dst_mac`` (or, when ``dst_mac`` is 0 and ``dst_ip`` is an IPv4 multicast address,
  ``wire.multicast_mac(dst_ip)`` = 01:00:5e + the low 23 bits of the group), ``src_mac``, IPv4;
- IPv4: no options, DSCP/ECN 0, total length from ``element_count``, ip_id 0, DF, TTL
  ``wire.DEFAULT_TTL``, UDP, a valid header checksum, ``src_ip``, ``dst_ip``;
- UDP: ``udp_sport``, ``udp_dport``, length from ``element_count``, checksum 0 (allowed in IPv4);
- aggregation header: magic/version from ``wire``; msg_type, flags, group_id, job_id,
  round_id, chunk, scale_exp, element_count, session from the message's ``hdr``; sender_id = ``site_id``
  (the core speaks as the site, whatever sender the message carried).

IPv4 checksum: the configuration-dependent part (constants + source and destination address
words, ones'-complement folded) is computed from the configuration inputs in three register
stages, together with a copy of the configuration delayed alike. The third stage is the frame's
snapshot: it stops following the inputs from the cycle a message's first beat is valid on
``s_msg`` until the frame's last header beat is loaded, so every header beat and the checksum of
a frame come from one configuration, whatever the sink's ``tready`` does. Per frame only
``folded(cfg_sum + total_length)`` remains: one 16-bit add and an end-around carry, inverted; at
W = 64 and 128 it (and the length fields) is computed into registers while the header beats
before it are sent. The configuration inputs may change at any time: a change is in the header
of every frame whose first beat arrives ``CONFIG_LATENCY`` = 3 or more cycles later, and never in
part of a header (in the core a control reply leaves the control block at least 4 cycles after
the write it reports, so it carries the new configuration).

Timing and handshake: ``m_axis`` (tdata, tkeep, tlast, tvalid) comes from an output register.
The register advances when empty or drained (``~tvalid | tready``); ``s_msg.ready`` is that
condition during payload beats (combinational ``tready`` -> ``s_msg.ready``, the usual pipeline
register path) and 0 during header beats (the message's ``hdr`` is read while its first beat
waits on ``s_msg``). No path from ``tready`` to ``tvalid``/``tdata``.

Latency: 1 cycle from the first ``s_msg`` beat being valid to the first header beat on
``m_axis``. Throughput: one beat per cycle, frames back to back (the next frame's header beat
follows the previous frame's last beat directly when the next message is waiting).

Message contract: ``hdr`` constant within a message, ``payload_beats(element_count, W)`` beats,
``last`` on the last one (the framer follows ``last`` for ``tlast``). A message with
``element_count`` 0 produces a header-only frame (``tlast`` on the last header beat); its beats
are consumed and ignored.
"""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from wanreduce import wire

from .axis import AXIStreamSignature
from .layouts import HEADER_BITS, header_beats, lanes, message_stream
from .params import check_data_width

__all__ = ["EgressFramer"]

_LEN_IP_FIXED = wire.IPV4_HEADER_BYTES + wire.UDP_HEADER_BYTES + wire.AGG_HEADER_BYTES
_LEN_UDP_FIXED = wire.UDP_HEADER_BYTES + wire.AGG_HEADER_BYTES
_LOG2_ELEMENT_BYTES = wire.ELEMENT_BYTES.bit_length() - 1
assert 1 << _LOG2_ELEMENT_BYTES == wire.ELEMENT_BYTES

# Fields with a fixed value in every frame the core sends (everything else is set per frame).
_CONSTANT_FIELDS = {
    "eth_type": wire.ETHERTYPE_IPV4,
    "ip_version_ihl": wire.IPV4_VERSION_IHL,
    "ip_dscp_ecn": 0,
    "ip_id": 0,
    "ip_flags_frag": wire.IPV4_FLAGS_DF,
    "ip_ttl": wire.DEFAULT_TTL,
    "ip_proto": wire.IPV4_PROTO_UDP,
    "udp_checksum": 0,
    "magic": wire.MAGIC,
    "version": wire.VERSION,
}


def _ip_constant_sum() -> int:
    """Ones'-complement-style 32-bit sum of the IPv4 header words with the variable fields 0."""
    rec = np.zeros((), dtype=wire.FRAME_HEADER_DTYPE)
    for name, value in _CONSTANT_FIELDS.items():
        rec[name] = value
    ip = rec.tobytes()[wire.IPV4_OFFSET : wire.IPV4_OFFSET + wire.IPV4_HEADER_BYTES]
    return int(np.frombuffer(ip, dtype=">u2").astype(np.uint32).sum())


def _ip_words(value: Value, field: str) -> list[Value]:
    """The 16-bit checksum words of a variable IPv4 field (must be word-aligned)."""
    f = wire.FIELD[field]
    if (f.offset - wire.IPV4_OFFSET) % 2 or f.size % 2:
        raise AssertionError(f"{field} is not aligned to IPv4 16-bit words")
    n = f.size // 2
    return [value[16 * (n - 1 - k) : 16 * (n - k)] for k in range(n)]


def _fold(value: Value) -> Value:
    """One end-around-carry step of the Internet checksum: low 16 bits + the carries."""
    return value[:16] + value[16:]


class EgressFramer(wiring.Component):
    """Wrap result / control-reply messages into Ethernet II/IPv4/UDP frames on AXI4-Stream.

    Ports:
      - ``s_msg``: ``In(message_stream(data_width))``;
      - ``m_axis``: ``Out(AXIStreamSignature(data_width, user_width=1))`` (tuser = 0);
      - configuration inputs (sampled once per frame, see the module docstring): ``src_mac`` (48),
        ``dst_mac`` (48; 0 = derive from a multicast ``dst_ip``), ``src_ip`` (32), ``dst_ip`` (32),
        ``udp_sport`` (16), ``udp_dport`` (16), ``site_id`` (8, the sender_id of every frame).
    """

    CONFIG_LATENCY = 3  # cycles from a configuration input change to the snapshot frames use

    def __init__(self, data_width: int, *, mcast_late: bool = False) -> None:
        check_data_width(data_width)
        self.data_width = data_width
        # the DRAM core: the multicast MAC chosen between stages 1 and 2 (see elaborate)
        self.mcast_late = mcast_late
        super().__init__(
            {
                "s_msg": In(message_stream(data_width)),
                "m_axis": Out(AXIStreamSignature(data_width, user_width=1)),
                "src_mac": In(48),
                "dst_mac": In(48),
                "src_ip": In(32),
                "dst_ip": In(32),
                "udp_sport": In(16),
                "udp_dport": In(16),
                "site_id": In(8),
            }
        )

    def elaborate(self, platform: object) -> Module:
        m = Module()
        w = self.data_width
        n_hdr = header_beats(w)
        n_lanes = lanes(w)
        s, o = self.s_msg, self.m_axis
        hdr = s.payload.hdr

        # ---- Configuration snapshot and the configuration part of the IPv4 checksum --------
        # Three register stages, the snapshot delayed along with the sum so that every header
        # uses one consistent configuration: (1) snapshot ``cfg_a`` and the two address-word
        # sums, (2) their sum plus the folded constants, (3) the two end-around-carry folds.
        # At most two carry chains in a cycle.
        names = ("src_mac", "dst_mac", "src_ip", "dst_ip", "udp_sport", "udp_dport", "site_id")
        cfg_a = {name: Signal(len(getattr(self, name)), name=f"cfg_a_{name}", reset_less=True)
                 for name in names}
        cfg_b = {name: Signal.like(cfg_a[name], name=f"cfg_b_{name}") for name in names}
        cfg = {name: Signal.like(cfg_a[name], name=f"cfg_{name}") for name in names}
        def dst_mac_of(mac_zero: Value, ip: Value, mac: Value) -> Value:
            """The frame's destination MAC: ``ip``'s IPv4 multicast MAC when ``mac`` is 0
            (``mac_zero``) and ``ip`` is multicast, else ``mac``."""
            return Mux(mac_zero & (ip[28:32] == 0xE), Cat(ip[:23], Const(wire.multicast_mac(0) >> 23, 48 - 23)), mac)

        m.d.sync += [cfg_a[name].eq(getattr(self, name)) for name in names if name != "dst_mac"]
        if not self.mcast_late:
            m.d.sync += cfg_a["dst_mac"].eq(dst_mac_of(self.dst_mac == 0, self.dst_ip, self.dst_mac))
            m.d.sync += [cfg_b[name].eq(cfg_a[name]) for name in names]
        else:
            # mcast_late (the DRAM core): stage 1 registers dst_mac as it is and, in a flip-flop
            # of its own, whether it is 0 (the 48-bit compare, into one D input); stage 2 makes
            # the same choice from those and stage 1's dst_ip, so the compare no longer feeds
            # the choice's wide reset / mux (`core.dst_mac` -> the compare -> the LSR of the 48
            # `egress.cfg_a_dst_mac` flip-flops, 8.10 ns at session 44's seed 4). cfg_b is the
            # same function of the inputs two cycles before: CONFIG_LATENCY unchanged
            a_zero = Signal(name="cfg_a_dst_mac_zero", reset_less=True)  # == (cfg_a dst_mac == 0)
            m.d.sync += a_zero.eq(self.dst_mac == 0)
            m.d.sync += cfg_a["dst_mac"].eq(self.dst_mac)
            m.d.sync += [cfg_b[name].eq(cfg_a[name]) for name in names if name != "dst_mac"]
            m.d.sync += cfg_b["dst_mac"].eq(dst_mac_of(a_zero, cfg_a["dst_ip"], cfg_a["dst_mac"]))
        # The third stage is the frame's snapshot: it holds (``frame_hold``) from the cycle a
        # message's first beat waits on ``s_msg`` until its last header beat is loaded, so all
        # header beats and the checksum of one frame use one configuration. ``frame_hold`` comes
        # from ``s_msg.valid`` and the framer's own flip-flops, not from ``tready``.
        frame_hold = Signal()
        with m.If(~frame_hold):
            m.d.sync += [cfg[name].eq(cfg_b[name]) for name in names]

        src_words = _ip_words(self.src_ip, "ip_src")
        dst_words = _ip_words(self.dst_ip, "ip_dst")
        assert len(src_words) == len(dst_words) == 2
        sum_src = Signal(17, reset_less=True)
        sum_dst = Signal(17, reset_less=True)
        m.d.sync += [sum_src.eq(src_words[0] + src_words[1]),
                     sum_dst.eq(dst_words[0] + dst_words[1])]
        const_folded = _ip_constant_sum()
        while const_folded >> 16:
            const_folded = (const_folded & 0xFFFF) + (const_folded >> 16)
        raw_sum = Signal(19, reset_less=True)
        m.d.sync += raw_sum.eq(sum_src + sum_dst + const_folded)
        cfg_sum = Signal(16, reset_less=True)  # folded sum: constants + src/dst address words
        with m.If(~frame_hold):  # snapshotted with ``cfg``
            m.d.sync += cfg_sum.eq(_fold(_fold(raw_sum)))

        # ---- Per-frame header, from the waiting message's hdr ------------------------------
        # The length fields and the checksum are needed only in the header beat holding them:
        # for a field past beat 0 the value is computed from the waiting message's ``hdr`` into
        # a register (``hdr`` is stable from the first header beat on: the message's first beat
        # waits on ``s_msg`` while the header is sent), one register stage per header beat
        # before it (up to two: length, then checksum). In beat 0 (wide buses) it is
        # combinational.
        def beat_of(field: str) -> int:
            return wire.FIELD[field].offset // (w // 8)

        def staged(value: Value, stages: int, name: str) -> Value:
            for k in range(stages):
                reg = Signal(len(value), name=f"{name}_r{k}", reset_less=True)
                m.d.sync += reg.eq(value)
                value = reg
            return value

        count = hdr.element_count
        ip_len = Signal(16)
        udp_len = Signal(16)
        checksum = Signal(16)
        ip_len_c = ((count << _LOG2_ELEMENT_BYTES) + _LEN_IP_FIXED)[:16]
        udp_len_c = ((count << _LOG2_ELEMENT_BYTES) + _LEN_UDP_FIXED)[:16]
        ck_beat = beat_of("ip_checksum")
        ip_len_for_ck = staged(ip_len_c, 1 if ck_beat >= 2 else 0, "ip_len")
        m.d.comb += [
            ip_len.eq(staged(ip_len_c, min(beat_of("ip_total_length"), 1), "ip_len")),
            udp_len.eq(staged(udp_len_c, min(beat_of("udp_length"), 1), "udp_len")),
            checksum.eq(staged(~_fold(cfg_sum + ip_len_for_ck)[:16], min(ck_beat, 1), "checksum")),
        ]

        values: dict[str, Value | int] = dict(_CONSTANT_FIELDS)
        values.update({
            "eth_dst": cfg["dst_mac"],
            "eth_src": cfg["src_mac"],
            "ip_total_length": ip_len,
            "ip_checksum": checksum,
            "ip_src": cfg["src_ip"],
            "ip_dst": cfg["dst_ip"],
            "udp_sport": cfg["udp_sport"],
            "udp_dport": cfg["udp_dport"],
            "udp_length": udp_len,
            "sender_id": cfg["site_id"],
        })
        for name in ("msg_type", "flags", "group_id", "job_id", "round_id", "chunk",
                     "scale_exp", "element_count", "session"):
            values[name] = Value.cast(getattr(hdr, name))
        missing = {f.name for f in wire.FRAME_FIELDS} - set(values)
        if missing:  # the wire format grew a field this framer does not know how to fill
            raise AssertionError(f"egress framer does not set {sorted(missing)}")

        header = Signal(HEADER_BITS)  # bus byte order: frame byte k in bits 8k+7..8k
        for f in wire.FRAME_FIELDS:
            v = values[f.name]
            v = Const(v, f.bits) if isinstance(v, int) else v
            for i in range(f.size):  # byte i of the field, most significant first
                lo = 8 * (f.size - 1 - i)
                m.d.comb += header[8 * (f.offset + i) : 8 * (f.offset + i + 1)].eq(v[lo : lo + 8])

        # element_count 0, looked at on the last header beat: registered when that is not beat 0
        count_zero = staged(count == 0, min(n_hdr - 1, 1), "count_zero")

        # ---- Keep mask of the last payload beat -------------------------------------------
        keep_last = Signal(w // 8)
        rem = count[: (n_lanes - 1).bit_length()]  # elements in the last beat (0 = full)
        lane_keep = [(rem == 0) | (rem > k) for k in range(n_lanes)]
        m.d.comb += keep_last.eq(Cat(*(bit.replicate(wire.ELEMENT_BYTES) for bit in lane_keep)))

        # ---- Output register and sequencing ------------------------------------------------
        o_data = Signal(w, reset_less=True)
        o_keep = Signal(w // 8, reset_less=True)
        o_last = Signal(reset_less=True)
        o_valid = Signal()
        m.d.comb += [
            o.tdata.eq(o_data),
            o.tkeep.eq(o_keep),
            o.tlast.eq(o_last),
            o.tuser.eq(0),
            o.tvalid.eq(o_valid),
        ]
        advance = Signal()
        m.d.comb += advance.eq(~o_valid | o.tready)

        in_payload = Signal()  # sending the payload beats of the current message
        discard = Signal()  # consuming the beats of an element_count 0 message
        hbeat = Signal(range(n_hdr))  # header beat being sent
        hdr_beat = Signal(w)
        # in_payload and last_hbeat are loaded from their next values (``*_n``, combinational,
        # set by the sequencing below), so that ``take`` can be a flip-flop of its own
        in_payload_n = Signal()
        m.d.comb += in_payload_n.eq(in_payload)
        m.d.sync += in_payload.eq(in_payload_n)
        if n_hdr == 1:
            m.d.comb += hdr_beat.eq(header)
            last_hbeat = Const(1)
        else:
            with m.Switch(hbeat):
                for k in range(n_hdr):
                    with m.Case(k):
                        m.d.comb += hdr_beat.eq(header[k * w : (k + 1) * w])
            last_hbeat = Signal()  # == (hbeat == n_hdr - 1), as a flip-flop (s_msg.ready path)
            last_hbeat_n = Signal()
            m.d.comb += last_hbeat_n.eq(last_hbeat)
            m.d.sync += last_hbeat.eq(last_hbeat_n)
        # a message's header is waiting or being sent (a waiting beat stays valid until taken)
        m.d.comb += frame_hold.eq(~in_payload & ~discard & (s.valid | (hbeat != 0)))

        # s_msg.ready = discard | (advance & take): ``take`` = the waiting beat goes when the
        # output register advances (a payload beat, or the beat of an element_count 0 message on
        # its last header beat). It may be 1 while s_msg.valid is 0 (no transfer then; the egress
        # merger, whose output register is empty then, advances anyway). At W < 512 ``take`` is a
        # flip-flop (count_zero is one a cycle behind ``count``), so the merger's output-register
        # enable (~valid | ready, 200+ flip-flops) sees five flip-flops and ``tready``.
        if n_hdr == 1:
            take = in_payload | count_zero
        else:
            take = Signal()
            m.d.sync += take.eq(in_payload_n | (last_hbeat_n & (count == 0)))
        m.d.comb += s.ready.eq(discard | (advance & take))

        with m.If(advance):
            m.d.sync += o_valid.eq(0)  # unless a beat is loaded below
        with m.If(discard):
            with m.If(s.valid & s.payload.last):
                m.d.sync += discard.eq(0)
        with m.Elif(advance):
            with m.If(in_payload):
                with m.If(s.valid):
                    m.d.sync += [
                        o_valid.eq(1),
                        o_data.eq(s.payload.data),
                        o_keep.eq(Mux(s.payload.last, keep_last, (1 << (w // 8)) - 1)),
                        o_last.eq(s.payload.last),
                    ]
                    with m.If(s.payload.last):
                        m.d.comb += in_payload_n.eq(0)
            with m.Elif(s.valid):
                m.d.sync += [
                    o_valid.eq(1),
                    o_data.eq(hdr_beat),
                    o_keep.eq((1 << (w // 8)) - 1),
                    o_last.eq(0),
                ]
                with m.If(last_hbeat):
                    if n_hdr > 1:
                        m.d.sync += hbeat.eq(0)
                        m.d.comb += last_hbeat_n.eq(0)
                    with m.If(count_zero):
                        # Header-only frame: end it here and drop the message's beat(s).
                        m.d.sync += o_last.eq(1)
                        m.d.sync += discard.eq(~s.payload.last)
                    with m.Else():
                        m.d.comb += in_payload_n.eq(1)
                if n_hdr > 1:
                    with m.Else():
                        m.d.sync += hbeat.eq(hbeat + 1)
                        m.d.comb += last_hbeat_n.eq(hbeat == n_hdr - 2)
        return m
