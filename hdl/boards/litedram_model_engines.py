"""The two read-modify-write engines of the large-S design through the board's real DRAM path,
on LiteDRAM's DDR3 model (cocotb; issue 16, large S step 4).

:class:`LiteDramModelEngines` composes the two existing harnesses: the engines on the arbiter
(:class:`~wanreduce.hdl.engines_on_arbiter_harness.EnginesOnArbiter`: the sums' ``DramSlotStore``
on AXI ID 0, the scaffold record engine, R = 256, on ID 1, through ``AxiIdArbiter``), whose
``m_axi_mem`` goes through the board's ``attach_memory`` (the Versa's 64 -> 128-bit
``AxiUpsizer``) onto the model module (:func:`~wanreduce.hdl.boards.litedram_model_store.
attach_model`: the board's async FIFOs, slices, ``LiteDRAMAXI2Native`` and controller on
``SDRAMPHYModel``). So the upsizer and LiteDRAM's frontend carry two IDs, the question of
docs/large_slots.md ("How a 256-bit record travels").

Ports: the engines' ``cmd`` / ``rsp`` / ``mem_error`` and ``rec_cmd`` / ``rec_rsp`` /
``rec_mem_error``, the arbiter's ``error`` and ``dropped``, ``upsizer_error``, ``init_done``,
``dram_clk``, ``dram_rst``. The arbiter's ``m_axi_mem_*`` is inside (``engines``), where the
bench watches it. Simulation only (the model's Verilog: ``cached_model``).
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from wanreduce.hdl.boards.litedram_model_store import ModelPort, attach_model, check_in_model
from wanreduce.hdl.dram_rmw_engine import AXI_PREFIX
from wanreduce.hdl.engines_on_arbiter_harness import EnginesOnArbiter

__all__ = ["LiteDramModelEngines"]


class LiteDramModelEngines(wiring.Component):
    """``EnginesOnArbiter(data_width, sums=..., records=...)`` on ``board``'s LiteDRAM model;
    both regions must lie in the model's distinct memory (``model_bytes``)."""

    def __init__(self, data_width: int, *, sums: dict, records: dict,
                 board: str = "versa-ecp5") -> None:
        self.port = ModelPort(board)
        cfg = self.port.cfg
        self.engines = EnginesOnArbiter(data_width, address_width=cfg.addr_width, sums=sums,
                                        records=records)
        for what, e in (("sums store", self.engines.sums), ("record engine", self.engines.records)):
            check_in_model(cfg, what, e.region_end)
        members = {k: v for k, v in self.engines.signature.members.items()
                   if not k.startswith(AXI_PREFIX + "_")}
        super().__init__({**members, "init_done": In(1), "upsizer_error": Out(1),
                          "dram_clk": In(1), "dram_rst": In(1)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.engines = e = self.engines
        for pre in ("", "rec_"):
            wiring.connect(m, wiring.flipped(getattr(self, pre + "cmd")), getattr(e, pre + "cmd"))
            wiring.connect(m, getattr(e, pre + "rsp"), wiring.flipped(getattr(self, pre + "rsp")))
            m.d.comb += getattr(self, pre + "mem_error").eq(getattr(e, pre + "mem_error"))
        m.d.comb += [self.error.eq(e.error), self.dropped.eq(e.dropped)]
        up = attach_model(m, e, self.port, init_done=self.init_done, dram_clk=self.dram_clk,
                          dram_rst=self.dram_rst)
        m.d.comb += self.upsizer_error.eq(up.error)
        return m
