"""The DRAM slot store through the board's real DRAM path, on LiteDRAM's DDR3 model (cocotb).

Issue 16 item 5. :class:`LiteDramModelStore` is the Versa ``--dram-store-test`` design minus the
FPGA I/O: a :class:`~wanreduce.hdl.dram_slot_store.DramSlotStore` (W = 64, the core's bus on the
Versa) in the core clock (``sync``), its ``m_axi_mem`` through the board's own
:func:`~wanreduce.hdl.boards.dram_controller.attach_memory` (the 64 -> 128-bit
:class:`~wanreduce.hdl.axi_upsizer.AxiUpsizer`) onto the AXI port of the module of
:mod:`wanreduce.hdl.boards.litedram_model` (the board's LiteDRAM controller and AXI frontend on
``SDRAMPHYModel``), whose controller runs in domain ``dram`` (clock ``dram_clk``, reset
``dram_rst``: ports, so a bench runs the two clocks at the board's frequencies).

Ports: the store's ``cmd``, ``rsp`` and ``mem_error``; ``init_done`` (in: the controller takes
requests once set); ``upsizer_error`` (out: the converter saw a burst it does not support);
``dram_clk``, ``dram_rst``. Simulation only: the model's Verilog is a black box here and must be
given to the simulator with this design's (``cached_model``). :func:`attach_model` is the
wiring of the model shared with :mod:`wanreduce.hdl.boards.litedram_model_engines` (the two
engines through the arbiter).
"""

from __future__ import annotations

from amaranth.hdl import ClockDomain, ClockSignal, Instance, Module, ResetSignal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from wanreduce.hdl.axi_upsizer import AxiUpsizer
from wanreduce.hdl.boards.axi_memtest import AXI_FIELDS, axi_manager_signals
from wanreduce.hdl.boards.dram_controller import attach_memory
from wanreduce.hdl.boards.litedram_controller import AXI_ID_WIDTH, DRAM_CONFIGS, DramConfig
from wanreduce.hdl.boards.litedram_model import model_bytes, model_module_name
from wanreduce.hdl.dram_slot_store import DramSlotStore

__all__ = ["LiteDramModelStore", "ModelPort", "attach_model", "check_in_model"]


class ModelPort:
    """What :func:`attach_memory` needs of a controller: its configuration and AXI signals."""

    def __init__(self, board: str) -> None:
        self.cfg = DRAM_CONFIGS[board]
        self.model_name = model_module_name(board)
        self.axi = axi_manager_signals(self.cfg.data_width, self.cfg.addr_width, AXI_ID_WIDTH,
                                       prefix="dram_axi_")


def check_in_model(cfg: DramConfig, what: str, end: int) -> None:
    """A one-line error unless a region ending at byte ``end`` lies in the model's distinct
    memory (``model_bytes``)."""
    if end > model_bytes(cfg):
        raise ValueError(f"the {what}'s region ends at {end:#x}, beyond the model's "
                         f"{model_bytes(cfg):#x} bytes of distinct memory (litedram_model."
                         f"MODEL_ROWS): fewer slots or rows, or a lower base_address")


def attach_model(m: Module, manager, port: ModelPort, *, init_done, dram_clk, dram_rst) -> AxiUpsizer:
    """``manager``'s ``m_axi_mem`` through the board's :func:`attach_memory` onto the model
    module (a black box, in domain ``dram`` from ``dram_clk`` / ``dram_rst``; its AXI side in
    ``sync``); returns the converter. The one wiring of the model for every bench harness."""
    m.domains.dram = ClockDomain("dram")
    m.d.comb += [ClockSignal("dram").eq(dram_clk), ResetSignal("dram").eq(dram_rst)]
    up = attach_memory(m, manager, port)
    ports = dict(i_sys_clk=ClockSignal("dram"), i_sys_rst=ResetSignal("dram"),
                 i_init_done=init_done,
                 i_axi_clk=ClockSignal("sync"), i_axi_rst=ResetSignal("sync"))
    for field, _w, direction in AXI_FIELDS:  # manager outputs are the controller's inputs
        ports[f"{'i' if direction == 'o' else 'o'}_user_port_axi_{field}"] = port.axi[field]
    m.submodules.litedram = Instance(port.model_name, **ports)
    return up


class LiteDramModelStore(wiring.Component):
    """``DramSlotStore(data_width, **store)`` on ``board``'s LiteDRAM model; see the module
    docstring. The store's region must lie in the model's distinct memory (``model_bytes``)."""

    def __init__(self, data_width: int, *, board: str = "versa-ecp5", base_address: int = 0,
                 **store: int) -> None:
        self.port = ModelPort(board)
        cfg = self.port.cfg
        self.store = DramSlotStore(data_width, address_width=cfg.addr_width,
                                   base_address=base_address, **store)
        check_in_model(cfg, "store", self.store.region_end)
        members = {k: v for k, v in self.store.signature.members.items()
                   if not k.startswith("m_axi_mem_")}
        super().__init__({**members, "init_done": In(1), "upsizer_error": Out(1),
                          "dram_clk": In(1), "dram_rst": In(1)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.store = st = self.store
        wiring.connect(m, wiring.flipped(self.cmd), st.cmd)
        wiring.connect(m, st.rsp, wiring.flipped(self.rsp))
        up = attach_model(m, st, self.port, init_done=self.init_done, dram_clk=self.dram_clk,
                          dram_rst=self.dram_rst)
        m.d.comb += [self.mem_error.eq(st.mem_error), self.upsizer_error.eq(up.error)]
        return m
