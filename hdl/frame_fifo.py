"""Store-and-forward FIFO of result rows (issue 16, the record path's results; docs/large_slots.md,
"The core wiring", step 5): a frame's first row leaves only once its last row is stored, so a
decision taken on a frame's first beat (``ResultGate``'s, on STATUS.MEM_ERROR) covers every row.

Rows (``result_row_layout``: the RESULT header, a beat of sums, ``last``) go into two queues:

- **beats** (``PayloadFIFO``, block RAM): each row's ``data`` and ``last``;
- **headers** (``SyncFIFOBuffered``, ``frames`` entries): a frame's header, pushed with its last
  row: **the last row's header is the frame's**. On the record path every row of a result
  carries the same record tag; OVERFLOW is the slot's sticky flag, which READs do not change,
  but a result taken from its completing contribution's own responses has each row's flag
  after that row's update (``StoreReadSplit``'s ``own``), so only the last row's is the flag
  after the whole contribution (what a READ after it would give): it is stored once per frame,
  the last row's, not with every beat.

A header is pushed only when its frame is complete and frames complete in order, so **the
headers held are the complete frames**: whenever one is held, the oldest frame in the beats
queue (the one at its head) is complete, and the header queue's head is its header. The output
is therefore valid only while the header queue is not empty (``m.valid`` = beats' valid and the
headers' ``r_rdy``, both flip-flops), and the header is popped with the frame's last beat.

Room: ``depth`` (a power of two, at least twice ``max_beats``, the longest frame) beats in the
block RAM, so a frame can fill while the one before waits for ``m``; since every frame fits,
a full beats queue always holds a complete frame at its head (no deadlock). ``s.ready`` needs
room in both queues (``frames`` complete frames at most; a full header queue means a frame is
ready to leave).

**Latency** (why a memory error is seen before the frame's first beat is offered): the header
is pushed in the cycle the last row is taken (t) and shows on the header queue's output at t + 2
at the earliest, so no beat of a frame is offered on ``m`` before every row of it was taken.
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from .layouts import AggHeaderLayout
from .payload_fifo import PayloadFIFO
from .record_emitter import result_row_layout

__all__ = ["FrameFIFO", "frame_fifo_depth"]


def frame_fifo_depth(max_beats: int) -> int:
    """The beats queue's depth for frames of up to ``max_beats`` rows: a power of two holding two
    of the longest (at least 4)."""
    if not isinstance(max_beats, int) or max_beats < 1:
        raise ValueError(f"max_beats must be an integer >= 1 rows, got {max_beats!r}")
    return max(4, 1 << (2 * max_beats - 1).bit_length())


class FrameFIFO(wiring.Component):
    """``s`` -> ``m`` (result rows of ``data_width``), store and forward (module docstring).

    ``max_beats``: the longest frame in rows (a longer one would never leave); ``frames``: how
    many complete frames are held at most (the header queue's depth, 2 or more).
    """

    def __init__(self, data_width: int, *, max_beats: int, frames: int = 4) -> None:
        self.depth = frame_fifo_depth(max_beats)
        if not isinstance(frames, int) or frames < 2:
            raise ValueError(f"frames must be an integer >= 2, got {frames!r}")
        self.data_width, self.max_beats, self.frames = data_width, max_beats, frames
        sig = stream.Signature(result_row_layout(data_width))
        super().__init__({"s": In(sig), "m": Out(sig)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        s, o = self.s, self.m
        m.submodules.beats = beats = PayloadFIFO(self.data_width, self.depth)
        m.submodules.headers = hdrs = SyncFIFOBuffered(width=AggHeaderLayout.size, depth=self.frames)
        room = beats.s.ready & hdrs.w_rdy
        complete = hdrs.r_rdy  # a complete frame is held: the one at the beats' head
        m.d.comb += [
            s.ready.eq(room),
            beats.s.valid.eq(s.valid & hdrs.w_rdy),
            beats.s.payload.data.eq(s.payload.data), beats.s.payload.last.eq(s.payload.last),
            hdrs.w_en.eq(s.valid & room & s.payload.last), hdrs.w_data.eq(s.payload.hdr),
            o.valid.eq(beats.m.valid & complete), beats.m.ready.eq(o.ready & complete),
            o.payload.hdr.eq(hdrs.r_data), o.payload.data.eq(beats.m.payload.data),
            o.payload.last.eq(beats.m.payload.last),
            hdrs.r_en.eq(o.valid & o.ready & beats.m.payload.last),
        ]
        return m
