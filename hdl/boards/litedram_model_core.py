"""The whole core with its slots in DRAM through the board's real DRAM path, on LiteDRAM's DDR3
model (cocotb; issue 16 item 5, its last clause).

:class:`LiteDramModelCore` is the Versa's ``--slot-memory dram`` or ``records`` build minus the
FPGA I/O and the MACs: the core as the board builds it (:func:`~wanreduce.hdl.boards.dram_controller.
board_core`: the store on the board's address width, burst size and, with ``dram``, in-flight
table; with ``records`` the record engine beside it on AXI ID 1 through ``AxiIdArbiter``, its
records from ``record_memory``'s address), its
``m_axi_mem`` through the board's ``attach_memory`` (the 64 -> 128-bit ``AxiUpsizer``) onto the
model module (:func:`~wanreduce.hdl.boards.litedram_model_store.attach_model`: the board's
async FIFOs, slices, ``LiteDRAMAXI2Native`` and controller on ``SDRAMPHYModel``), the
controller in a second clock.

Ports: the core's streams (``s_axis_net*``, ``s_axis_host``, ``m_axis_host``: same names, so
``sim/tb_core.py``'s bench drives them), ``init_done``, ``upsizer_error``, ``dram_clk``,
``dram_rst``. The core's ``m_axi_mem_*`` is inside (``core``), where the bench watches it;
``engines``: the engines on it by AXI ID (their regions, burst sizes: what the bench checks).
Simulation only (the model's Verilog: ``cached_model``).
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from wanreduce.hdl.boards.dram_controller import DRAM_MEMORIES, MEM_PREFIX, board_core
from wanreduce.hdl.boards.litedram_model_store import ModelPort, attach_model, check_in_model
from wanreduce.hdl.dram_rmw_engine import DramRmwEngine

__all__ = ["LiteDramModelCore"]


class LiteDramModelCore(wiring.Component):
    """``board_core(board, slot_memory, **core)`` on ``board``'s LiteDRAM model (``slot_memory``
    one of ``DRAM_MEMORIES``); every engine's region must lie in the model's distinct memory
    (``model_bytes``)."""

    def __init__(self, *, board: str = "versa-ecp5", slot_memory: str = "dram", **core: int) -> None:
        if slot_memory not in DRAM_MEMORIES:
            raise ValueError(f"slot_memory must be one of {', '.join(DRAM_MEMORIES)} (a core with "
                             f"{MEM_PREFIX}), got {slot_memory!r}")
        self.port, self.slot_memory = ModelPort(board), slot_memory
        self.core = board_core(board, slot_memory, **core)
        what = {0: "core's slot store", 1: "core's record store"}
        for axi_id, e in self.engines.items():
            check_in_model(self.port.cfg, what[axi_id], e.region_end)
        self.streams = {k: v for k, v in self.core.signature.members.items()
                        if not k.startswith(MEM_PREFIX + "_")}
        super().__init__({**self.streams, "init_done": In(1), "upsizer_error": Out(1),
                          "dram_clk": In(1), "dram_rst": In(1)})

    @property
    def engines(self) -> dict[int, DramRmwEngine]:
        """The engines on the core's ``m_axi_mem`` by AXI ID: the sums' store (0) and, in a
        records core, the record engine (1)."""
        r = self.core.reducer
        if self.slot_memory == "records":  # RecordReducer: DecisionOnRecords' two engines
            return {0: r.path.sums.store, 1: r.path.records.engine}
        return {0: r.store}

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
