"""First-word-fall-through FIFO in LUT RAM whose writer keeps its own count of room.

Amaranth's ``SyncFIFO`` gates its write with ``w_rdy`` (``level != depth``) and keeps one
``level`` register updated from both enables, so the level feeds the LUT RAM's write enable and
both enables feed the level: a loop (``level`` -> ``w_rdy`` -> write -> ``level``) on the
ingress parser's descriptor FIFO that limited placements of the core (docs/benchmarks.md,
branch fmax5). Here the write and read pointers (with a wrap bit) are the only state: a write
is never refused (the writer must know there is room, from ``level``, e.g. a registered
compare) and a read is only asked for when ``r_rdy``: each pointer's enable is its own side's
``en`` alone, and ``level``/``r_rdy`` are
derived from the two pointers. Cycle for cycle it behaves like ``SyncFIFO(fwft=True)`` as long
as no write meets a full FIFO: ``r_rdy`` rises, ``level`` counts and ``r_data`` shows an entry
in the cycle after its write.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["UnguardedFIFO"]


class UnguardedFIFO(wiring.Component):
    """FWFT FIFO of ``depth`` (a power of two, 2 or more) ``width``-bit entries; no full check.

    Ports: ``w_data``/``w_en`` (write; the caller guarantees ``level < depth`` when ``w_en``),
    ``r_data``/``r_rdy``/``r_en`` (read; ``r_en`` only with ``r_rdy``), ``level``
    (entries held, from the pointers).
    """

    def __init__(self, width: int, depth: int) -> None:
        if not isinstance(width, int) or width < 1:
            raise ValueError(f"width must be a positive integer, got {width!r}")
        if not isinstance(depth, int) or depth < 2 or depth & (depth - 1):
            raise ValueError(f"depth must be a power of two >= 2, got {depth!r}")
        self.width, self.depth = width, depth
        super().__init__({
            "w_data": In(width),
            "w_en": In(1),
            "r_data": Out(width),
            "r_rdy": Out(1),
            "r_en": In(1),
            "level": Out(range(depth + 1)),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        aw = self.depth.bit_length() - 1
        m.submodules.storage = mem = Memory(shape=self.width, depth=self.depth, init=[])
        wp = mem.write_port()
        rp = mem.read_port(domain="comb")
        produce = Signal(aw + 1)  # next write address, with a wrap bit
        consume = Signal(aw + 1)  # next read address, with a wrap bit
        m.d.comb += [
            wp.addr.eq(produce[:aw]), wp.data.eq(self.w_data), wp.en.eq(self.w_en),
            rp.addr.eq(consume[:aw]), self.r_data.eq(rp.data),
            self.r_rdy.eq(produce != consume),
            self.level.eq((produce - consume)[:aw + 1]),
        ]
        with m.If(self.w_en):
            m.d.sync += produce.eq(produce + 1)
        with m.If(self.r_en):
            m.d.sync += consume.eq(consume + 1)
        return m
