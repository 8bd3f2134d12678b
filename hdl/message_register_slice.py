"""Message-stream register slice: breaks every combinational path between two message streams.

A skid buffer for :func:`~wanreduce.hdl.layouts.message_stream` (the core's internal stream of
payload beats): an output register drives ``m_msg`` and a second ("skid") register catches the
one beat that can arrive in the cycle after ``m_msg.ready`` drops, because ``s_msg.ready`` is
itself a flip-flop and so falls one cycle late. It exists to cut the ready chain between the
core's components (reducer → merger → parser), which otherwise forms one long combinational path.

- ``m_msg.valid``/``payload`` and ``s_msg.ready`` come straight from flip-flops;
- one beat per cycle sustained while the sink is ready; latency one cycle;
- no beat is lost, duplicated or reordered under any valid/ready pattern.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .layouts import check_data_width, message_beat_layout, message_stream

__all__ = ["MessageRegisterSlice"]


class MessageRegisterSlice(wiring.Component):
    """Full-throughput register slice for ``message_stream(data_width)``; one cycle of latency.

    Ports: ``s_msg`` (in), ``m_msg`` (out); ``sync`` domain.
    """

    def __init__(self, data_width: int) -> None:
        check_data_width(data_width)
        self.data_width = data_width
        super().__init__({"s_msg": In(message_stream(data_width)), "m_msg": Out(message_stream(data_width))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        s, o = self.s_msg, self.m_msg
        layout = message_beat_layout(self.data_width)

        out_data = Signal(layout, reset_less=True)
        out_valid = Signal()
        skid_data = Signal(layout, reset_less=True)
        skid_valid = Signal()
        in_ready = Signal(init=1)  # == ~skid_valid, as its own flip-flop

        m.d.comb += [o.payload.eq(out_data), o.valid.eq(out_valid), s.ready.eq(in_ready)]

        out_free = ~out_valid | o.ready
        # The skid register copies the input whenever it is empty (enable: the in_ready
        # flip-flop), so m_msg.ready reaches only the output register's enable and two bits.
        with m.If(in_ready):
            m.d.sync += skid_data.eq(s.payload)
        with m.If(out_free):
            with m.If(skid_valid):
                m.d.sync += [out_data.eq(skid_data), out_valid.eq(1), skid_valid.eq(0), in_ready.eq(1)]
            with m.Else():
                m.d.sync += [out_data.eq(s.payload), out_valid.eq(s.valid)]
        with m.Elif(s.valid & in_ready):
            m.d.sync += [skid_valid.eq(1), in_ready.eq(0)]
        return m
