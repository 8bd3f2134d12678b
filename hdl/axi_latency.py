"""A memory's latency in simulation: any component with an AXI4 master port ``m_axi_mem_*``,
its read-data (R) and write-response (B) channels through a :class:`StreamDelay` each.

So a memory model that answers at once (cocotbext-axi's ``AxiRam``) answers ``latency`` cycles
(a run-time input) after it took the request: the round trip a DRAM controller and interconnect
add. AR, AW and W pass straight through. The ports are the wrapped component's (its other
ports unchanged, ``m_axi_mem_*`` now facing the memory) plus ``latency``. The benches wrap the
DRAM slot store (``DramSlotStoreHarness``) and the whole core (``CoreDramHarness``) in it.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from .axi4 import axi4_payload, axi4_port
from .forward_ports import forward_ports
from .stream_delay import StreamDelay

__all__ = ["LATENCY_BITS", "AxiLatencyHarness"]

LATENCY_BITS = 16
PREFIX = "m_axi_mem"


class AxiLatencyHarness(wiring.Component):
    """``inner`` with delay lines of ``delay_depth`` beats on its R and B; see the module docstring."""

    def __init__(self, inner: wiring.Component, *, delay_depth: int = 512) -> None:
        self.inner = inner
        self.delay_depth = delay_depth
        super().__init__({**inner.signature.members, "latency": In(LATENCY_BITS)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.inner = st = self.inner
        forward_ports(m, self, st, skip=lambda name: name.startswith(PREFIX + "_"))
        inner, outer = axi4_port(st, PREFIX), axi4_port(self, PREFIX)
        payload = axi4_payload(len(inner.awaddr), len(inner.wdata), len(inner.awid))
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
