"""Result gate (issue 16, DRAM slot memory): no result computed after a memory error leaves.

A DRAM slot store raises ``mem_error`` (sticky) on any AXI error response (SLVERR/DECERR); the
rows it reads from then on may be wrong. Every result whose rows depend on a failed read or on
a row whose write failed is assembled after the flag is up: a failed read sets it when its R
beat arrives, before the command using it completes, and a row whose write failed is read from
memory only after that write's B (the store forwards rows still in flight). Results are
store-and-forward, so a result's first beat leaves after its last row was computed. The gate
therefore decides on each message's first beat: with ``error`` set, the whole message is taken
from ``s`` and not passed to ``m`` (``withheld`` strobes once for it, for a counter), else it
passes untouched (``sent`` strobes on its first beat). Combinational: valid and ready each go
through one gate; the decision is held in a flip-flop for the message's later beats.

``late_error`` (the DRAM reducer's gate): the drop itself is a flip-flop, worked out from the take
and ``error`` a cycle before (``error`` off the gate's valid / ready, which run into the egress
merger's arbitration: the Versa DRAM build's core path, docs/benchmarks.md session 38). Exact
because untrusted data enters the store only by an R beat that raises ``error`` the next cycle
(an error response, a full read-data FIFO) or comes after the flag rose (a row re-read after its
write's failed B), and every path from an R beat to the gate's input crosses two or more
flip-flops (``tests/test_reducer_late_parts.py``): a message depending on it offers its first
beat two or more cycles after the beat, with the flag up the cycle before.

``valid_reg`` (with ``late_error``; the DRAM reducer): ``m.valid`` is a flip-flop, loaded with
``s_valid_next & ~``(drop's next value), ``s_valid_next`` (an input) being ``s.valid``'s next
value (the assembler's output register's): the AND of ``s.valid`` and ``drop_r`` is no longer
between those flip-flops and the egress merger's arbitration (``gate.drop_r`` ->
``out.m__valid`` -> ``egress_merger.sel`` -> the assembler's output register enables, 8.82 ns at
session 44's seed 4; docs/benchmarks.md session 45). The same value every cycle: ``copy_error``
(an output with the option) compares it with ``s.valid & ~drop``.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .layouts import message_stream

__all__ = ["ResultGate"]


class ResultGate(wiring.Component):
    """``s`` -> ``m`` (message streams of ``data_width``), messages starting while ``error`` is
    set dropped whole; ``sent`` / ``withheld``: one strobe per message passed / dropped."""

    def __init__(self, data_width: int, *, late_error: bool = False, valid_reg: bool = False) -> None:
        if valid_reg and not late_error:
            raise ValueError("valid_reg needs late_error")
        self.late_error = late_error  # decide on ``error`` a cycle late, the drop a flip-flop
        self.valid_reg = valid_reg  # m.valid a flip-flop, from s_valid_next (module docstring)
        super().__init__({"s": In(message_stream(data_width)), "m": Out(message_stream(data_width)),
                          "error": In(1), "sent": Out(1), "withheld": Out(1),
                          **({"s_valid_next": In(1), "copy_error": Out(1)} if valid_reg else {})})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        s, o = self.s, self.m
        held = Signal()  # the decision for the message in progress (after its first beat)
        inside = Signal()  # a message's first beat has been taken, its last not yet
        drop = Mux(inside, held, self.error)
        take = s.valid & s.ready
        if self.late_error:
            # drop(t) = inside(t) ? the message's decision : error(t - 1), as a flip-flop: at the
            # first beat's take the decision is drop itself, held by not reloading it (no held)
            drop = Signal(name="drop_r")
            drop_next = Mux(Mux(take, ~s.payload.last, inside), drop, self.error)
            m.d.sync += drop.eq(drop_next)
        o_valid = s.valid & ~drop
        if self.valid_reg:
            valid_r = Signal(name="valid_r")
            m.d.sync += valid_r.eq(self.s_valid_next & ~drop_next)
            m.d.comb += self.copy_error.eq(valid_r != o_valid)
            o_valid = valid_r
        m.d.comb += [
            o.payload.eq(s.payload),
            o.valid.eq(o_valid),
            s.ready.eq(o.ready | drop),
            self.sent.eq(take & s.payload.first & ~drop),
            self.withheld.eq(take & s.payload.first & drop),
        ]
        with m.If(take):
            m.d.sync += inside.eq(~s.payload.last)
            if not self.late_error:
                m.d.sync += held.eq(drop)
        return m
