"""AXI4 register slice: one :class:`~wanreduce.hdl.skid_buffer.SkidBuffer` on each of the five channels.

Breaks every combinational path between an AXI4 manager (``s_axi_*``) and a subordinate
(``m_axi_*``): each channel's payload (:func:`~wanreduce.hdl.axi4.axi4_payload`), valid and ready
meet flip-flops on both sides. With the default ``SKID`` type a channel carries one beat per
cycle with one cycle of latency, and no beat is lost, duplicated or reordered (the skid buffer's
properties, ``tests/test_skid_buffer.py``). The boards put one between the upsizer and
LiteDRAM's AXI port so the port's clock-crossing FIFOs, placed beside the DRAM pins, meet
registers of their own rather than the core's (docs/benchmarks.md, branch vdram21).
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import data, wiring

from .axi4 import axi4_master_members, axi4_payload, axi4_port
from .skid_buffer import SkidBuffer

__all__ = ["AxiRegisterSlice"]


class AxiRegisterSlice(wiring.Component):
    """``s_axi_*`` -> ``m_axi_*`` (same widths), a skid buffer on AW, W, B, AR and R."""

    def __init__(self, *, addr_width: int, data_width: int, id_width: int = 1) -> None:
        if data_width < 8 or data_width > 1024 or data_width & (data_width - 1):
            raise ValueError(f"data_width must be a power of two from 8 to 1024 bits, got {data_width}")
        if not 1 <= addr_width <= 64:
            raise ValueError(f"addr_width must be 1..64, got {addr_width}")
        if not 1 <= id_width <= 32:
            raise ValueError(f"id_width must be 1..32, got {id_width}")
        self.addr_width, self.data_width, self.id_width = addr_width, data_width, id_width
        widths = dict(addr_width=addr_width, data_width=data_width, id_width=id_width)
        sub = axi4_master_members("s_axi", **widths)
        super().__init__({**{k: v.flip() for k, v in sub.items()},
                          **axi4_master_members("m_axi", **widths)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        s, o = axi4_port(self, "s_axi"), axi4_port(self, "m_axi")
        payload = axi4_payload(self.addr_width, self.data_width, self.id_width)
        for ch, fields in payload.items():
            m.submodules[ch] = reg = SkidBuffer(data.StructLayout(fields))
            src, dst = (s, o) if ch in ("aw", "w", "ar") else (o, s)
            m.d.comb += [reg.s.valid.eq(getattr(src, f"{ch}valid")),
                         getattr(src, f"{ch}ready").eq(reg.s.ready),
                         getattr(dst, f"{ch}valid").eq(reg.m.valid),
                         reg.m.ready.eq(getattr(dst, f"{ch}ready"))]
            for name in fields:
                m.d.comb += [getattr(reg.s.payload, name).eq(getattr(src, name)),
                             getattr(dst, name).eq(getattr(reg.m.payload, name))]
        return m
