"""Split the host port's message stream: CONTROL messages to the control block, the local
site's CONTRIBUTIONs to the merger. ``hdr`` is constant over a message, so the choice is made
per beat and never splits a message.

Registered: one :class:`~wanreduce.hdl.skid_buffer.SkidBuffer` per output, so each output's
``valid``/``payload`` come from flip-flops and its register advances only on its own ``ready``
(neither the message type compare nor the other output's ``ready`` is on the path from one
consumer's ``ready`` to its register). ``s_msg.ready`` is the AND of the two buffers' registered
readies (two flip-flops, no input on the path): a beat waiting in either skid register blocks
the input until it leaves, so beats keep their order per output. One beat per cycle into a
ready output; latency one cycle. ``ready_copy``: both buffers built with ``SkidBuffer(ready_copy=True)``
(the Versa DRAM core: the skid registers' enables off the ready that the host parser reads;
their ``copy_error`` ORed into ``copy_error``, an output with the option). ``ping_pong``: both
buffers built with ``SkidBuffer(ping_pong=True)`` (the Versa DRAM core: the merger's grant
reaches none of the data buffer's data registers' enables, docs/benchmarks.md session 45; the
control block's ready none of the control buffer's, session 46). ``valid_copy`` (with
``ping_pong``): the data buffer built with ``SkidBuffer(valid_copy=True)``, its copy of
``m_data.valid`` out as ``m_data_valid_c`` for the merger's arbitration (the Versa DRAM core:
``demux.data_skid.m__valid`` -> the merger's grant, 8.47-8.55 ns at session 46's landing seed 6,
docs/benchmarks.md session 47); its ``copy_error`` ORed in as well.
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from wanreduce import wire
from wanreduce.hdl.layouts import message_beat_layout, message_stream
from wanreduce.hdl.params import check_data_width
from wanreduce.hdl.skid_buffer import SkidBuffer

__all__ = ["MessageDemux"]


class MessageDemux(wiring.Component):
    """``s_msg`` → ``m_control`` (msg_type CONTROL) or ``m_data`` (everything else); one cycle
    of latency, registered outputs and ready."""

    def __init__(self, data_width: int, *, ready_copy: bool = False, ping_pong: bool = False,
                 valid_copy: bool = False) -> None:
        check_data_width(data_width)
        self.data_width, self.ready_copy, self.ping_pong = data_width, bool(ready_copy), bool(ping_pong)
        self.valid_copy = bool(valid_copy)
        sig = message_stream(data_width)
        super().__init__({"s_msg": In(sig), "m_control": Out(sig), "m_data": Out(sig),
                          **({"m_data_valid_c": Out(1)} if self.valid_copy else {}),
                          **({"copy_error": Out(1)} if self.ready_copy or self.valid_copy else {})})

    def elaborate(self, platform) -> Module:
        m = Module()
        s = self.s_msg
        layout = message_beat_layout(self.data_width)
        m.submodules.data_skid = data_skid = SkidBuffer(layout, ready_copy=self.ready_copy,
                                                        ping_pong=self.ping_pong, valid_copy=self.valid_copy)
        m.submodules.control_skid = control_skid = SkidBuffer(layout, ready_copy=self.ready_copy,
                                                              ping_pong=self.ping_pong)
        if self.ready_copy:
            m.d.comb += self.copy_error.eq(data_skid.copy_error | control_skid.copy_error)
        elif self.valid_copy:
            m.d.comb += self.copy_error.eq(data_skid.copy_error)
        if self.valid_copy:
            m.d.comb += self.m_data_valid_c.eq(data_skid.m_valid_c)
        is_ctrl = s.payload.hdr.msg_type == wire.MsgType.CONTROL
        m.d.comb += s.ready.eq(data_skid.s.ready & control_skid.s.ready)
        for skid, take, out in ((data_skid, ~is_ctrl, self.m_data), (control_skid, is_ctrl, self.m_control)):
            m.d.comb += [skid.s.payload.eq(s.payload), skid.s.valid.eq(s.valid & s.ready & take)]
            wiring.connect(m, skid.m, wiring.flipped(out))
        return m
