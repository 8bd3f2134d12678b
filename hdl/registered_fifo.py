"""Block-RAM FIFO whose output comes from flip-flops: ``SyncFIFOBuffered`` + ``SkidBuffer``.

Amaranth's ``SyncFIFOBuffered`` presents ``r_data`` straight from the memory's read port; on
the ECP5 a DP16KD's clock-to-output is ~4 ns, half a 125 MHz cycle, before any logic that looks
at the head. The DRAM slot store decides from its queues' heads every cycle (C0's ``fire``, the
free step, W's ``last``, the burst descriptors on AR/AW), so each of those queues is this: the
FIFO's head moves into a skid buffer, and ``m.valid``/``m.payload`` are flip-flops. One beat per
cycle sustained; an entry written to an empty queue shows on ``m`` three cycles later; it holds
``depth`` + 2 entries (the skid buffer's two registers).

``registered_write=True`` (the DRAM store's ``wlen`` / ``blen``, written on the AW handshake;
docs/benchmarks.md, session 47): ``w_en`` / ``w_data`` go into flip-flops first and from there
into a ``SyncFIFO`` (LUT RAM, read combinationally into the skid buffer), so no write enable of
the queue's memory depends on ``w_en`` within its cycle (the upsizer's AWREADY ran across the
chip into ``wlen``'s LUT-RAM write enables: 8.85 ns at the Versa DRAM build's seed 2). The same
``m`` in the same cycles: an entry written in cycle t still shows on ``m`` in t + 3 (the register,
then the unbuffered FIFO's head: one stage each where ``SyncFIFOBuffered`` wrote its memory, then
read it into its output register) and moves on exactly when the buffered FIFO's head would;
``level`` counts the register too (equal to the buffered FIFO's); ``w_rdy`` is
``level < depth`` (a write then always finds room a cycle later); a write while ``~w_rdy`` is
ignored, as before.
"""

from __future__ import annotations

from amaranth.hdl import Module, Shape, ShapeLike, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .skid_buffer import SkidBuffer

__all__ = ["RegisteredFIFO"]


class RegisteredFIFO(wiring.Component):
    """``depth``-entry FIFO of ``shape``: ``w_data``/``w_en``/``w_rdy`` in, stream ``m`` out
    (``m.valid``/``m.payload`` from flip-flops); ``level``: entries in the queue behind the head;
    ``registered_write``: the write through flip-flops (module docstring)."""

    def __init__(self, shape: ShapeLike, depth: int, *, registered_write: bool = False) -> None:
        self.shape, self.depth, self.registered_write = shape, depth, bool(registered_write)
        super().__init__({"w_data": In(shape), "w_en": In(1), "w_rdy": Out(1),
                          "level": Out(range(depth + 1)), "m": Out(stream.Signature(shape))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        width = Shape.cast(self.shape).width
        if self.registered_write:
            m.submodules.queue = q = fifo.SyncFIFO(width=width, depth=self.depth)
        else:
            m.submodules.queue = q = fifo.SyncFIFOBuffered(width=width, depth=self.depth)
        m.submodules.head = head = SkidBuffer(self.shape)
        if self.registered_write:
            w_en_r, w_data_r = Signal(name="w_en_r"), Signal(width, name="w_data_r", reset_less=True)
            m.d.sync += [w_en_r.eq(self.w_en & self.w_rdy), w_data_r.eq(self.w_data)]
            m.d.comb += [q.w_data.eq(w_data_r), q.w_en.eq(w_en_r), self.level.eq(q.level + w_en_r),
                         self.w_rdy.eq(self.level < self.depth)]
        else:
            m.d.comb += [q.w_data.eq(self.w_data), q.w_en.eq(self.w_en), self.w_rdy.eq(q.w_rdy), self.level.eq(q.level)]
        m.d.comb += [head.s.payload.eq(q.r_data), head.s.valid.eq(q.r_rdy), q.r_en.eq(head.s.ready)]
        wiring.connect(m, head.m, wiring.flipped(self.m))
        return m
