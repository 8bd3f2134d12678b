"""Split the host port's message stream: CONTROL messages to the control block, the local
site's CONTRIBUTIONs to the merger. ``hdr`` is constant over a message, so the choice is made
per beat without state and never splits a message."""

from __future__ import annotations

from amaranth.hdl import Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from wanreduce import wire
from wanreduce.hdl.layouts import check_data_width, message_stream

__all__ = ["MessageDemux"]


class MessageDemux(wiring.Component):
    """``s_msg`` → ``m_control`` (msg_type CONTROL) or ``m_data`` (everything else)."""

    def __init__(self, data_width: int) -> None:
        check_data_width(data_width)
        sig = message_stream(data_width)
        super().__init__({"s_msg": In(sig), "m_control": Out(sig), "m_data": Out(sig)})

    def elaborate(self, platform) -> Module:
        m = Module()
        is_ctrl = self.s_msg.payload.hdr.msg_type == wire.MsgType.CONTROL
        m.d.comb += [
            self.m_control.payload.eq(self.s_msg.payload),
            self.m_data.payload.eq(self.s_msg.payload),
            self.m_control.valid.eq(self.s_msg.valid & is_ctrl),
            self.m_data.valid.eq(self.s_msg.valid & ~is_ctrl),
            self.s_msg.ready.eq(Mux(is_ctrl, self.m_control.ready, self.m_data.ready)),
        ]
        return m
