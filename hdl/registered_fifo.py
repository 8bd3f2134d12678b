"""Block-RAM FIFO whose output comes from flip-flops: ``SyncFIFOBuffered`` + ``SkidBuffer``.

Amaranth's ``SyncFIFOBuffered`` presents ``r_data`` straight from the memory's read port; on
the ECP5 a DP16KD's clock-to-output is ~4 ns, half a 125 MHz cycle, before any logic that looks
at the head. The DRAM slot store decides from its queues' heads every cycle (C0's ``fire``, the
free step, W's ``last``, the burst descriptors on AR/AW), so each of those queues is this: the
FIFO's head moves into a skid buffer, and ``m.valid``/``m.payload`` are flip-flops. One beat per
cycle sustained; an entry written to an empty queue shows on ``m`` three cycles later; it holds
``depth`` + 2 entries (the skid buffer's two registers).
"""

from __future__ import annotations

from amaranth.hdl import Module, Shape, ShapeLike
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .skid_buffer import SkidBuffer

__all__ = ["RegisteredFIFO"]


class RegisteredFIFO(wiring.Component):
    """``depth``-entry FIFO of ``shape``: ``w_data``/``w_en``/``w_rdy`` in, stream ``m`` out
    (``m.valid``/``m.payload`` from flip-flops); ``level``: entries in the queue behind the head."""

    def __init__(self, shape: ShapeLike, depth: int) -> None:
        self.shape, self.depth = shape, depth
        super().__init__({"w_data": In(shape), "w_en": In(1), "w_rdy": Out(1),
                          "level": Out(range(depth + 1)), "m": Out(stream.Signature(shape))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.queue = q = fifo.SyncFIFOBuffered(width=Shape.cast(self.shape).width, depth=self.depth)
        m.submodules.head = head = SkidBuffer(self.shape)
        m.d.comb += [q.w_data.eq(self.w_data), q.w_en.eq(self.w_en), self.w_rdy.eq(q.w_rdy), self.level.eq(q.level),
                     head.s.payload.eq(q.r_data), head.s.valid.eq(q.r_rdy), q.r_en.eq(head.s.ready)]
        wiring.connect(m, head.m, wiring.flipped(self.m))
        return m
