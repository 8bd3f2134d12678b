"""``DramSlotStore`` as the benches simulate it: with a memory latency on its AXI port.

The store's ``m_axi_mem`` read-data (R) and write-response (B) channels pass through a
:class:`StreamDelay` each, so a memory model that answers at once (cocotbext-axi's ``AxiRam``)
answers ``latency`` cycles (a run-time input) after it took the request: the round trip a DRAM
controller and interconnect add. AR, AW and W pass straight through. The ports are the store's
(``cmd``, ``rsp``, ``m_axi_mem_*`` facing the memory, ``mem_error``) plus ``latency``.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from .axi4 import axi4_payload, axi4_port
from .dram_slot_store import AXI_PREFIX, DramSlotStore
from .stream_delay import StreamDelay

__all__ = ["DramSlotStoreHarness"]

LATENCY_BITS = 16


class DramSlotStoreHarness(wiring.Component):
    """The store plus delay lines of ``delay_depth`` beats on R and B; see the module docstring."""

    def __init__(self, data_width: int, *, delay_depth: int = 512, **store: int) -> None:
        self.store = DramSlotStore(data_width, **store)
        self.delay_depth = delay_depth
        super().__init__({**self.store.signature.members, "latency": In(LATENCY_BITS)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.store = st = self.store
        inner, outer = axi4_port(st, AXI_PREFIX), axi4_port(self, AXI_PREFIX)
        m.d.comb += [self.mem_error.eq(st.mem_error)]
        wiring.connect(m, wiring.flipped(self.cmd), st.cmd)
        wiring.connect(m, st.rsp, wiring.flipped(self.rsp))
        payload = axi4_payload(st.address_width, st.data_width, 1)
        for ch, sigs in payload.items():
            src, dst = (inner, outer) if ch in ("aw", "w", "ar") else (outer, inner)
            fields = [getattr(src, s) for s in sigs]
            if ch in ("aw", "w", "ar"):
                m.d.comb += [getattr(dst, s).eq(getattr(src, s)) for s in sigs]
                m.d.comb += [getattr(dst, ch + "valid").eq(getattr(src, ch + "valid")),
                             getattr(src, ch + "ready").eq(getattr(dst, ch + "ready"))]
                continue
            delay = StreamDelay(sum(sigs.values()), depth=self.delay_depth, latency_bits=LATENCY_BITS)
            m.submodules[f"delay_{ch}"] = delay
            m.d.comb += [delay.latency.eq(self.latency), delay.s.payload.eq(Cat(*fields)),
                         delay.s.valid.eq(getattr(src, ch + "valid")),
                         getattr(src, ch + "ready").eq(delay.s.ready),
                         Cat(*(getattr(dst, s) for s in sigs)).eq(delay.m.payload),
                         getattr(dst, ch + "valid").eq(delay.m.valid),
                         delay.m.ready.eq(getattr(dst, ch + "ready"))]
        return m
