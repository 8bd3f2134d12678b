"""The record path's requests (issue 16; docs/large_slots.md, "The core wiring", step 2): stage P's
decoded beats (``InputStages(vectors=False, records=True)``'s ``p`` / ``p_valid`` / ``take``,
hdl/reducer_input.py) to ``DecisionOnRecords``' two inputs (hdl/decision_record_harness.py):

- ``beats`` (the payload gate's ``beat_layout``: ``data``, ``last``): every beat;
- ``req`` (:func:`record_request_layout`): one per message, with its first beat: ``msg`` the
  gate's request (``row`` = the slot ``<< row_bits``, as the fork takes the slot back from
  ``msg.row[row_bits:]``; ``elements`` = the header's ``element_count``; ``tag`` 0, only echoed
  on the store's responses, which the core drops) and ``side`` the record command's
  ``RecordSide`` (the header, and ``DecisionConfig`` from P's decode).

A first beat is **forked** to both outputs: each transfers on its own valid and ready (a
consumer may take the request before the beat or after it: ``DecisionOnRecords``' pin stage takes
a request while its gate still waits for it to reach the beat), each once (``beat_sent`` /
``req_sent``: that output has transferred P's beat, so it offers it no more), and P moves
(``take``) once both have. The valids are P's flip-flops and those two, so no ready reaches a
valid.

The job's ``log2_window`` (clamped, ``ReducerConfig``) and ``in_order`` come registered with the
beat from P (``decoded_beat_layout(records=True)``: the per-job select is in P's decode, as the
other configuration checks are), not selected here: the request leaves as flip-flops. The
reducer's stage P does not carry them (``records`` off), so the default core's RTL is unchanged.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .payload_fifo import beat_layout
from .payload_gate import request_layout
from .reducer_input import decoded_beat_layout
from .reducer_layouts import RecordSide
from .slot_store_signature import row_address_bits

__all__ = ["RecordRequest", "record_request_layout"]


def record_request_layout(*, slots: int, row_bits: int, max_elements: int) -> data.StructLayout:
    """``DecisionOnRecords``' request: ``msg`` (the payload gate's request for a slot store of
    ``slots << row_bits`` rows and messages of up to ``max_elements``) and ``side``
    (``RecordSide``)."""
    return data.StructLayout({"msg": request_layout(row_address_bits(slots, row_bits), max_elements),
                              "side": RecordSide})


class RecordRequest(wiring.Component):
    """P's beats -> ``beats`` and ``req`` (see the module docstring).

    Parameters: ``data_width`` W, ``slots`` S, ``elements`` E (the input stages'; E is also the
    request's ``max_elements``: the ingress parser holds ``element_count`` to 1..E), ``row_bits``
    (the slot store's rows per slot, log2).

    Ports: ``p`` / ``p_valid`` (in: stage P's register), ``take`` (out: P's beat leaves),
    ``beats``, ``req`` (out).
    """

    def __init__(self, data_width: int, *, slots: int, elements: int, row_bits: int) -> None:
        self.row_bits = row_bits
        self.p_layout = decoded_beat_layout(data_width, slots, elements, vectors=False, records=True)
        self.req_layout = record_request_layout(slots=slots, row_bits=row_bits, max_elements=elements)
        super().__init__({
            "p": In(self.p_layout),
            "p_valid": In(1),
            "take": Out(1),
            "beats": Out(stream.Signature(beat_layout(data_width))),
            "req": Out(stream.Signature(self.req_layout)),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        p, beats, req = self.p, self.beats, self.req
        first = p.beat.first
        msg, side = req.payload.msg, req.payload.side
        beat_sent, req_sent = Signal(), Signal()  # P's beat has left on that output already
        beat_done = beat_sent | beats.ready
        req_done = ~first | req_sent | req.ready
        m.d.sync += [beat_sent.eq(~self.take & (beat_sent | (beats.valid & beats.ready))),
                     req_sent.eq(~self.take & (req_sent | (req.valid & req.ready)))]
        m.d.comb += [
            beats.valid.eq(self.p_valid & ~beat_sent),
            beats.payload.data.eq(p.beat.data),
            beats.payload.last.eq(p.beat.last),
            req.valid.eq(self.p_valid & first & ~req_sent),
            msg.row.eq(Cat(Const(0, self.row_bits), p.slot)),
            msg.elements.eq(p.beat.hdr.element_count),  # 1..E (the parser's check): fits
            msg.tag.eq(0),
            side.hdr.eq(p.beat.hdr),
            *[side.cfg[name].eq(p[name]) for name, _ in side.cfg.shape()],
            self.take.eq(self.p_valid & beat_done & req_done),
        ]
        return m
