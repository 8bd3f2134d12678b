"""AXI4-Stream register slice: breaks every combinational path between two stream ports.

A skid buffer: an output register feeds ``m_axis`` and a second ("skid") register catches the
one beat that can arrive in the cycle after ``m_axis.tready`` drops, because ``s_axis.tready``
is itself a register and so only falls one cycle late. Properties:

- all ``m_axis`` outputs and ``s_axis.tready`` come straight from flip-flops; there is no
  combinational path from ``m_axis.tready`` (or any input) to any output;
- one beat per cycle sustained when the sink is always ready (latency one cycle);
- no beat is lost, duplicated or reordered under any valid/ready pattern.

Data registers carry no reset (``reset_less``): only the valid/ready state is reset, which is
cheaper in an FPGA and leaves nothing observable, because data is only looked at when valid.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .axis import AXIStreamSignature

__all__ = ["AXIStreamRegisterSlice"]


class AXIStreamRegisterSlice(wiring.Component):
    """Full-throughput AXI4-Stream register slice (skid buffer), one cycle of latency.

    Ports: ``s_axis`` (stream in), ``m_axis`` (stream out), both
    ``AXIStreamSignature(data_width, user_width)``; clock and reset are the ``sync`` domain.
    """

    def __init__(self, data_width: int, user_width: int = 1) -> None:
        # AXIStreamSignature validates the widths with a clear ValueError.
        sig = AXIStreamSignature(data_width, user_width)
        self.data_width = data_width
        self.user_width = user_width
        super().__init__({"s_axis": In(sig), "m_axis": Out(sig)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        s, o = self.s_axis, self.m_axis

        in_payload = Cat(s.tdata, s.tkeep, s.tlast, s.tuser)
        out_payload = Cat(o.tdata, o.tkeep, o.tlast, o.tuser)

        # Output register: o.tvalid and the o.t* payload are driven only from here.
        out_data = Signal(len(in_payload), reset_less=True)
        out_valid = Signal()
        # Skid register: holds the beat accepted while the output register was stalled.
        skid_data = Signal(len(in_payload), reset_less=True)
        skid_valid = Signal()
        # s.tready is its own flip-flop (always == ~skid_valid), so no gate sits on the path.
        in_ready = Signal(init=1)

        m.d.comb += [
            out_payload.eq(out_data),
            o.tvalid.eq(out_valid),
            s.tready.eq(in_ready),
        ]

        out_free = ~out_valid | o.tready  # the output register may load this cycle
        with m.If(out_free):
            with m.If(skid_valid):
                # Drain the skid beat first; s.tready was low this cycle, nothing arrives.
                m.d.sync += [out_data.eq(skid_data), out_valid.eq(1)]
                m.d.sync += [skid_valid.eq(0), in_ready.eq(1)]
            with m.Else():
                # Pass through (in_ready is 1 whenever the skid register is empty).
                m.d.sync += [out_data.eq(in_payload), out_valid.eq(s.tvalid)]
        with m.Elif(s.tvalid & in_ready):
            # Output stalled but the source still saw tready high: park the beat.
            m.d.sync += [skid_data.eq(in_payload), skid_valid.eq(1), in_ready.eq(0)]
        return m
