"""The whole core with its slots in DRAM through the board's real DRAM path, on LiteDRAM's DDR3
model (cocotb; issue 16 item 5, its last clause).

:class:`LiteDramModelCore` is the Versa's ``--slot-memory dram`` build minus the FPGA I/O and
the MACs: the core as the board builds it (:func:`~wanreduce.hdl.boards.dram_controller.
board_core`: the store on the board's address width, burst size and in-flight table), its
``m_axi_mem`` through the board's ``attach_memory`` (the 64 -> 128-bit ``AxiUpsizer``) onto the
model module (:func:`~wanreduce.hdl.boards.litedram_model_store.attach_model`: the board's
async FIFOs, slices, ``LiteDRAMAXI2Native`` and controller on ``SDRAMPHYModel``), the
controller in a second clock.

Ports: the core's streams (``s_axis_net*``, ``s_axis_host``, ``m_axis_host``: same names, so
``sim/tb_core.py``'s bench drives them), ``init_done``, ``upsizer_error``, ``dram_clk``,
``dram_rst``. The core's ``m_axi_mem_*`` is inside (``core``), where the bench watches it.
Simulation only (the model's Verilog: ``cached_model``).
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from wanreduce.hdl.boards.dram_controller import MEM_PREFIX, board_core
from wanreduce.hdl.boards.litedram_model_store import ModelPort, attach_model, check_in_model

__all__ = ["LiteDramModelCore"]


class LiteDramModelCore(wiring.Component):
    """``board_core(board, "dram", **core)`` on ``board``'s LiteDRAM model; the store's region
    must lie in the model's distinct memory (``model_bytes``)."""

    def __init__(self, *, board: str = "versa-ecp5", **core: int) -> None:
        self.port = ModelPort(board)
        self.core = board_core(board, "dram", **core)
        check_in_model(self.port.cfg, "core's slot store", self.core.reducer.store.region_end)
        self.streams = {k: v for k, v in self.core.signature.members.items()
                        if not k.startswith(MEM_PREFIX + "_")}
        super().__init__({**self.streams, "init_done": In(1), "upsizer_error": Out(1),
                          "dram_clk": In(1), "dram_rst": In(1)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.core = core = self.core
        for name, member in self.streams.items():
            ours, its = getattr(self, name), getattr(core, name)
            if member.flow == In:
                wiring.connect(m, wiring.flipped(ours), its)
            else:
                wiring.connect(m, its, wiring.flipped(ours))
        up = attach_model(m, core, self.port, init_done=self.init_done, dram_clk=self.dram_clk,
                          dram_rst=self.dram_rst)
        m.d.comb += self.upsizer_error.eq(up.error)
        return m
