"""Split the host port's message stream: CONTROL messages to the control block, the local
site's CONTRIBUTIONs to the merger. ``hdr`` is constant over a message, so the choice is made
per beat and never splits a message.

Registered, like :class:`~wanreduce.hdl.message_register_slice.MessageRegisterSlice`: each
output has its own output register (``valid``/``payload`` from flip-flops), and a shared skid
register catches the one beat that can arrive after its output stopped taking beats, so
``s_msg.ready`` is a flip-flop too. An output's register advances only on its own ``ready``, so
neither the message type compare nor the other output's ``ready`` is on the path from one
consumer's ``ready`` to its register, and the host parser's read side sees a registered ready.
One beat per cycle into a ready output; latency one cycle; beats keep their order per output
(a beat waiting in the skid register blocks the input until it leaves).
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from wanreduce import wire
from wanreduce.hdl.layouts import check_data_width, message_beat_layout, message_stream

__all__ = ["MessageDemux"]


class MessageDemux(wiring.Component):
    """``s_msg`` → ``m_control`` (msg_type CONTROL) or ``m_data`` (everything else); one cycle
    of latency, registered outputs and ready."""

    def __init__(self, data_width: int) -> None:
        check_data_width(data_width)
        self.data_width = data_width
        sig = message_stream(data_width)
        super().__init__({"s_msg": In(sig), "m_control": Out(sig), "m_data": Out(sig)})

    def elaborate(self, platform) -> Module:
        m = Module()
        s = self.s_msg
        layout = message_beat_layout(self.data_width)

        outs = (self.m_data, self.m_control)  # index: is CONTROL
        out_data = [Signal(layout, name=f"out_data{k}", reset_less=True) for k in range(2)]
        out_valid = [Signal(name=f"out_valid{k}") for k in range(2)]
        skid_data = Signal(layout, reset_less=True)
        skid_ctrl = Signal(reset_less=True)
        skid_valid = Signal()
        in_ready = Signal(init=1)  # == ~skid_valid, as its own flip-flop

        for k, o in enumerate(outs):
            m.d.comb += [o.payload.eq(out_data[k]), o.valid.eq(out_valid[k])]
        m.d.comb += s.ready.eq(in_ready)
        free = [~out_valid[k] | outs[k].ready for k in range(2)]
        is_ctrl = s.payload.hdr.msg_type == wire.MsgType.CONTROL

        for k in range(2):
            with m.If(free[k]):
                m.d.sync += out_valid[k].eq(0)  # unless loaded below
        with m.If(skid_valid):
            for k in range(2):
                with m.If((skid_ctrl == k) & free[k]):
                    m.d.sync += [out_data[k].eq(skid_data), out_valid[k].eq(1),
                                 skid_valid.eq(0), in_ready.eq(1)]
        with m.Else():  # in_ready is 1 here
            # the skid register copies the input while empty: no ready in its enable
            m.d.sync += [skid_data.eq(s.payload), skid_ctrl.eq(is_ctrl)]
            with m.If(s.valid):
                for k in range(2):
                    with m.If(is_ctrl == k):
                        with m.If(free[k]):
                            m.d.sync += [out_data[k].eq(s.payload), out_valid[k].eq(1)]
                        with m.Else():
                            m.d.sync += [skid_valid.eq(1), in_ready.eq(0)]
        return m
