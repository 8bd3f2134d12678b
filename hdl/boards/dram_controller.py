"""The board's DDR3 behind an AXI4 port: the generated LiteDRAM module, its init, its clocks.

:class:`DramController` instantiates the LiteDRAM module of
:mod:`wanreduce.hdl.boards.litedram_controller` (black box, Verilog added to the build) on the
board's ``ddr3`` pins and wires

* its clock: the board oscillator ``clk_in`` into LiteDRAM's own PLL (the controller runs on
  its ``user_clk``, :attr:`DramConfig.sys_clk_hz`; domain ``dram`` here), its reset from
  ``rst_in``;
* its initialisation: :class:`~wanreduce.hdl.boards.dram_init.DramInit` on ``wb_ctrl`` in the
  ``dram`` domain, replaying the generator's init program (no CPU);
* its AXI4 slave port in domain ``axi_domain`` (the core's clock): :attr:`axi` holds one
  Signal per AXI field (``awaddr``, ``wdata``, ... as :func:`axi_manager_signals`), driven by
  whatever attaches there — the core's ``m_axi_mem`` or the self-test. Requests are refused
  until ``init_done``.

The generated module's clock-domain crossing (LiteDRAM's native-port CDC) lets ``axi_clk``
differ from the controller clock.
"""

from __future__ import annotations

import json

from amaranth.hdl import (
    ClockDomain,
    ClockSignal,
    Elaboratable,
    Instance,
    Module,
    ResetSignal,
    Signal,
)

from wanreduce.hdl.boards.axi_memtest import AXI_FIELDS, axi_manager_signals
from wanreduce.hdl.boards.dram_init import DramInit
from wanreduce.hdl.boards.litedram_controller import AXI_ID_WIDTH, DRAM_CONFIGS, cached, module_name

__all__ = ["DramController"]


class DramController(Elaboratable):
    """LiteDRAM for ``board`` on ``pads`` (the platform's ``ddr3`` resource requested with
    ``dir="-"``); oscillator ``clk_in``, active-high ``rst_in``; AXI port in ``axi_domain``."""

    def __init__(self, board: str, pads, clk_in, rst_in, *, axi_domain: str = "sync",
                 platform=None) -> None:
        self.cfg = DRAM_CONFIGS[board]
        self.name = module_name(board)
        self.verilog = cached(board)
        self.program = json.loads(self.verilog.with_name(f"{self.name}_init.json").read_text())
        self.pads, self.clk_in, self.rst_in = pads, clk_in, rst_in
        self.axi_domain = axi_domain
        self.axi = axi_manager_signals(self.cfg.data_width, self.cfg.addr_width, AXI_ID_WIDTH,
                                       prefix="dram_axi_")
        self.init_done = Signal()
        self.init_error = Signal()
        self.pll_locked = Signal()
        if platform is not None:
            platform.add_file(self.verilog.name, self.verilog.read_text())

    def _pad_ports(self) -> dict:
        p = self.pads
        ports = dict(
            o_ddram_a=p.a.io, o_ddram_ba=p.ba.io, o_ddram_ras_n=p.ras.io, o_ddram_cas_n=p.cas.io,
            o_ddram_we_n=p.we.io, o_ddram_cs_n=p.cs.io, o_ddram_cke=p.clk_en.io,
            o_ddram_odt=p.odt.io, o_ddram_reset_n=p.rst.io, o_ddram_dm=p.dm.io,
            io_ddram_dq=p.dq.io, io_ddram_dqs_p=p.dqs.p, o_ddram_clk_p=p.clk.p,
        )
        if self.cfg.phy != "ECP5DDRPHY":  # 7-series drives both sides of the pairs (OBUFDS/IOBUFDS)
            ports.update(io_ddram_dqs_n=p.dqs.n, o_ddram_clk_n=p.clk.n)
        return ports

    def elaborate(self, platform) -> Module:
        m = Module()
        m.domains.dram = ClockDomain("dram")
        user_clk, user_rst = Signal(), Signal()
        m.d.comb += [ClockSignal("dram").eq(user_clk), ResetSignal("dram").eq(user_rst)]
        m.submodules.init = init = DramInit(self.program, domain="dram")
        ports = dict(
            i_clk=self.clk_in, i_rst=self.rst_in, o_pll_locked=self.pll_locked,
            o_init_done=self.init_done, o_init_error=self.init_error,
            o_user_clk=user_clk, o_user_rst=user_rst,
            i_axi_clk=ClockSignal(self.axi_domain), i_axi_rst=ResetSignal(self.axi_domain),
            i_wb_ctrl_adr=init.adr, i_wb_ctrl_dat_w=init.dat_w, o_wb_ctrl_dat_r=Signal(32),
            i_wb_ctrl_sel=init.sel, i_wb_ctrl_cyc=init.cyc, i_wb_ctrl_stb=init.stb,
            i_wb_ctrl_we=init.we, o_wb_ctrl_ack=init.ack, o_wb_ctrl_err=Signal(),
            i_wb_ctrl_cti=0, i_wb_ctrl_bte=0,
            **self._pad_ports(),
        )
        for field, _w, direction in AXI_FIELDS:  # manager outputs are the controller's inputs
            ports[f"{'i' if direction == 'o' else 'o'}_user_port_axi_{field}"] = self.axi[field]
        m.submodules.litedram = Instance(self.name, **ports)
        return m


def check_board_memory(board: str, slot_memory: str, core) -> str:
    """``slot_memory`` for a board top: ``onchip``, or ``dram`` once the core has the AXI4
    manager port the DRAM attaches to (``m_axi_mem``); a one-line error otherwise."""
    from wanreduce.hdl.params import check_slot_memory

    check_slot_memory(slot_memory)
    if slot_memory == "dram" and "m_axi_mem" not in core.signature.members:
        raise ValueError(
            f"{board} --slot-memory dram: the core has no m_axi_mem port yet (the external slot "
            f"store of issue 16 item 1); the board's LiteDRAM controller, its init and its AXI4 "
            f"port are in place (build --dram-selftest places them without the core)")
    return slot_memory


def attach_memory(m: Module, core, dram: DramController) -> None:
    """The core's ``m_axi_mem`` to the controller's AXI port, field by field (same widths)."""
    port = core.m_axi_mem
    for field, _w, direction in AXI_FIELDS:
        ours, theirs = dram.axi[field], getattr(port, field)
        if len(ours) != len(theirs):
            raise ValueError(f"m_axi_mem.{field} is {len(theirs)} bits, the {dram.cfg.board} "
                             f"DRAM port's is {len(ours)}")
        m.d.comb += ours.eq(theirs) if direction == "o" else theirs.eq(ours)
