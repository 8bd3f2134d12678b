"""Result rows to a message stream (issue 16, the record path's core wiring, step 5;
docs/large_slots.md, "The core wiring"): ``RecordEmitter``'s rows (``result_row_layout``: the
RESULT header, a beat of sums, ``last``) become the core's message beats
(``message_beat_layout``), which also carry ``first``: a flip-flop, set after each ``last`` (and
at reset), cleared by any other row. Nothing else changes: valid and ready pass through, so a
row and its beat move in the same cycle.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .layouts import message_stream
from .record_emitter import result_row_layout

__all__ = ["RowToMessage"]


class RowToMessage(wiring.Component):
    """``rows`` (result rows of ``data_width``) -> ``m`` (message beats, ``first`` added)."""

    def __init__(self, data_width: int) -> None:
        super().__init__({"rows": In(stream.Signature(result_row_layout(data_width))),
                          "m": Out(message_stream(data_width))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        r, o = self.rows, self.m
        first = Signal(init=1)  # the next row starts a message
        m.d.comb += [
            o.valid.eq(r.valid), r.ready.eq(o.ready),
            o.payload.hdr.eq(r.payload.hdr), o.payload.data.eq(r.payload.data),
            o.payload.last.eq(r.payload.last), o.payload.first.eq(first),
        ]
        with m.If(r.valid & r.ready):
            m.d.sync += first.eq(r.payload.last)
        return m
