"""Stream delay line: each beat leaves ``latency`` cycles (a run-time input) after it entered.

What a memory's latency looks like to the component that waits for it: the benches put one on
the AXI read-data and write-response channels between ``DramSlotStore`` and cocotbext-axi's
``AxiRam`` (``hdl/dram_slot_store_harness.py``), so one build serves every latency. Beats keep
their order; up to ``depth`` beats are in the line at once (a full line holds ``s.ready`` low),
so ``depth`` >= latency × beats per cycle keeps the line from throttling the stream. A beat
held longer by ``m.ready`` leaves as soon as it is taken.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["StreamDelay"]

STAMP_BITS = 32


class StreamDelay(wiring.Component):
    """``s`` -> ``m`` (``stream.Signature(width)``), each beat ``latency`` cycles late."""

    def __init__(self, width: int, *, depth: int, latency_bits: int = 16) -> None:
        if not 1 <= latency_bits < STAMP_BITS:
            raise ValueError(f"latency_bits must be 1..{STAMP_BITS - 1}, got {latency_bits}")
        self.width, self.depth = width, depth
        super().__init__({"s": In(stream.Signature(width)), "m": Out(stream.Signature(width)),
                          "latency": In(latency_bits)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        now = Signal(STAMP_BITS)
        m.d.sync += now.eq(now + 1)
        m.submodules.line = line = fifo.SyncFIFOBuffered(width=self.width + STAMP_BITS, depth=self.depth)
        stamp = line.r_data[self.width:]
        due = (now - stamp)[:STAMP_BITS] >= self.latency
        m.d.comb += [
            line.w_data.eq(Cat(self.s.payload, now)), line.w_en.eq(self.s.valid),
            self.s.ready.eq(line.w_rdy),
            self.m.payload.eq(line.r_data[:self.width]), self.m.valid.eq(line.r_rdy & due),
            line.r_en.eq(self.m.ready & due),
        ]
        return m
