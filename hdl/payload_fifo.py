"""Block-RAM FIFO of message beats (payload + ``last``): where a message waits for its record
(issue 16, large S step 4; docs/large_slots.md, "Payload wait").

A message's beats wait here until the record read of its first beat is back and decided: 20-200
cycles in the benches, 500-800 through LiteDRAM under load. At one beat per cycle the depth must
be at least that latency in beats: **1 024 x 64 bits on the Versa (4 DP16KD), 256 x 512 bits on
the AX7325B (4 RAMB36)**. One ``memory.Memory`` with one write and one registered read port; its
read data goes through the core's :class:`SkidBuffer`, so ``m.valid`` / ``m.payload`` come from
flip-flops and one beat per cycle is sustained under a stalled output. ``s.ready`` is low only
when the memory is full: the input stalls, nothing is dropped. It is a flip-flop (the next
cycle's ``held != depth``, this cycle's push and fetch only choosing among the compares), so the
read pointer's arithmetic reaches no consumer of the ready (the payload gate's ``take`` and
request ready: docs/large_slots.md, "The record path's admission and the gate's request (session
35, round 3)").
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .skid_buffer import SkidBuffer
from .stage_room import room_next

__all__ = ["PayloadFIFO", "beat_layout", "check_payload_fifo_params"]


def beat_layout(width: int) -> data.StructLayout:
    """One stored beat: ``data`` (``width`` bits) and ``last`` (the message's last beat)."""
    return data.StructLayout({"data": width, "last": 1})


def check_payload_fifo_params(width: int, depth: int) -> None:
    """One-line errors for a width below 1 or a depth that is not a power of two from 4 to 65 536."""
    if not isinstance(width, int) or width < 1:
        raise ValueError(f"width must be an integer >= 1 bits, got {width!r}")
    if not isinstance(depth, int) or not 4 <= depth <= 65536 or depth & (depth - 1):
        raise ValueError(f"depth must be a power of two from 4 to 65536 beats, got {depth!r}")


class PayloadFIFO(wiring.Component):
    """``depth`` beats of ``width`` bits + ``last`` in block RAM (see the module docstring).

    Ports: ``s`` (in) and ``m`` (out), ``stream.Signature(beat_layout(width))``; ``level``: beats
    held (memory, read register and the skid buffer's two registers: at most ``depth`` + 3);
    ``free``: beats the memory can still take (``s.ready`` == ``free != 0``).
    """

    def __init__(self, width: int, depth: int) -> None:
        check_payload_fifo_params(width, depth)
        self.width, self.depth = width, depth
        sig = stream.Signature(beat_layout(width))
        super().__init__({"s": In(sig), "m": Out(sig),
                          "level": Out(range(depth + 4)), "free": Out(range(depth + 1))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        d = self.depth
        ab = d.bit_length() - 1
        m.submodules.mem = mem = memory.Memory(shape=beat_layout(self.width), depth=d, init=[])
        wr = mem.write_port()
        rd = mem.read_port(domain="sync")  # registered read; never the address being written
        m.submodules.out = out = SkidBuffer(beat_layout(self.width))

        wp, rp = Signal(ab + 1), Signal(ab + 1)  # pointers with a wrap bit
        held = Signal(range(d + 1))
        m.d.comb += held.eq(wp - rp)
        rd_valid = Signal()  # rd.data holds a beat not yet taken by the skid buffer
        push = self.s.valid & self.s.ready
        advance = ~rd_valid | out.s.ready  # the read register may load the next beat
        fetch = advance & (held != 0)
        ready = Signal(init=1, name="room")  # == held != d, a cycle ahead: a flip-flop
        m.d.sync += ready.eq(room_next(held, d, push=push, pop=fetch))
        m.d.comb += [
            self.free.eq(d - held), self.s.ready.eq(ready),
            wr.addr.eq(wp[:ab]), wr.data.eq(self.s.payload), wr.en.eq(push),
            rd.addr.eq(rp[:ab]), rd.en.eq(advance),
            out.s.payload.eq(rd.data), out.s.valid.eq(rd_valid),
            self.level.eq(held + rd_valid + out.skid_valid + out.m.valid),
        ]
        with m.If(push):
            m.d.sync += wp.eq(wp + 1)
        with m.If(fetch):
            m.d.sync += rp.eq(rp + 1)
        with m.If(advance):
            m.d.sync += rd_valid.eq(held != 0)
        wiring.connect(m, out.m, wiring.flipped(self.m))
        return m
