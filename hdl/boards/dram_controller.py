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

from wanreduce.hdl.axi4 import axi4_payload, axi4_port
from wanreduce.hdl.axi_upsizer import AxiUpsizer
from wanreduce.hdl.boards.axi_memtest import AXI_FIELDS, axi_manager_signals
from wanreduce.hdl.boards.dram_init import DramInit
from wanreduce.hdl.boards.litedram_controller import AXI_ID_WIDTH, DRAM_CONFIGS, cached, module_name

__all__ = ["DRAM_MEMORIES", "MEM_PREFIX", "DramController", "attach_memory", "board_core", "check_board_memory",
           "check_board_slots"]


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


MEM_PREFIX = "m_axi_mem"  # the core's (and DramSlotStore's) AXI4 manager port, flat AMBA names
# the slot memories whose core has that port, attached to the board's DRAM by the board tops
DRAM_MEMORIES = ("dram", "records")


def check_board_memory(board: str, slot_memory: str, core) -> str:
    """``slot_memory`` for a board top: ``onchip``, or ``dram`` / ``records`` once the core has
    the AXI4 manager port the DRAM attaches to (``m_axi_mem_*``); a one-line error otherwise."""
    from wanreduce.hdl.params import check_slot_memory

    check_slot_memory(slot_memory)
    if slot_memory in DRAM_MEMORIES and f"{MEM_PREFIX}_awaddr" not in core.signature.members:
        raise ValueError(
            f"{board} --slot-memory {slot_memory}: the core has no m_axi_mem port (build it with "
            f"slot_memory={slot_memory!r}, as board_core does)")
    return slot_memory


def check_board_slots(board: str, slot_memory: str, params: dict) -> None:
    """S no larger than ``board``'s DRAM holds at the core's E and W (``board_capacity``); a
    one-line error naming slots and the board's largest S otherwise (before the DRAM engines'
    own address check, which names their fields, not the board's)."""
    from wanreduce.hdl.boards.capacity import board_capacity

    cap = board_capacity(board, slot_memory, params["elements"], params["width"])
    if params["slots"] > cap.slots:
        raise ValueError(f"{board} --slot-memory {slot_memory}: slots must be a power of two from 2 to "
                         f"{cap.slots} at elements {params['elements']} (what the board's "
                         f"{cap.total_bytes >> 20} MiB of DRAM hold), got {params['slots']}")


def board_core(board: str, slot_memory: str, **core_params: int):
    """The core for ``board`` with its slots in ``slot_memory``; with ``dram`` or ``records``
    the DRAM store (with ``records`` both engines: the sums' and the records') addresses the
    board's DRAM (``address_width``), the sums in the controller's burst size (``burst_beats``:
    512 B on the Versa); ``dram`` with the board's in-flight table (``outstanding``, if it sets
    one; ``records`` keeps the engines' default: at 128 instead of 256 its record path lost
    42-53 % of its beats per cycle, docs/benchmarks.md, session 33), other store parameters at
    their defaults."""
    from wanreduce.hdl.core import WanreduceCore
    from wanreduce.hdl.params import CoreParams, check_slot_memory

    check_slot_memory(slot_memory)
    mem = {}
    if slot_memory in DRAM_MEMORIES:
        check_board_slots(board, slot_memory, CoreParams(slot_memory, **core_params))
        cfg, width = DRAM_CONFIGS[board], core_params.get("width", 64)
        mem = {"address_width": cfg.addr_width, "burst_beats": cfg.burst_beats(width)}
        if cfg.outstanding is not None and slot_memory == "dram":
            mem["outstanding"] = cfg.outstanding
    core = WanreduceCore(slot_memory=slot_memory, **mem, **core_params)
    check_board_memory(board, slot_memory, core)
    return core


def attach_memory(m: Module, manager, dram: DramController, *, prefix: str = MEM_PREFIX) -> AxiUpsizer:
    """``manager``'s AXI4 port ``<prefix>_*`` (the core's ``m_axi_mem``, or a ``DramSlotStore``'s:
    data width W; several IDs may share it, e.g. ``AxiIdArbiter``'s: LiteDRAM returns reads in
    AR order, as the converter needs) onto the controller's AXI port through an :class:`AxiUpsizer` (W to
    the controller's width; wires if equal). The manager's address must not be wider than the
    DRAM's (its region is then inside the DRAM); IDs and AXI sizes are zero-extended to
    LiteDRAM's widths, lock/cache/prot/qos dropped (LiteDRAM has none). Returns the converter
    (its ``error`` flags a burst it does not support)."""
    port = axi4_port(manager, prefix)
    width, addr_width, id_width = len(port.wdata), len(port.awaddr), len(port.awid)
    cfg = dram.cfg
    if width > cfg.data_width:
        raise ValueError(f"{prefix} is {width} bits wide, more than the {cfg.board} DRAM port's "
                         f"{cfg.data_width}: no downsizer here")
    if addr_width > cfg.addr_width:
        raise ValueError(f"{prefix} has {addr_width} address bits, the {cfg.board} DRAM "
                         f"{cfg.addr_width} ({cfg.size_bytes >> 20} MiB): build the store with "
                         f"address_width={cfg.addr_width}")
    if id_width > AXI_ID_WIDTH:
        raise ValueError(f"{prefix} has {id_width} ID bits, the DRAM port {AXI_ID_WIDTH}")
    m.submodules.mem_upsizer = up = AxiUpsizer(width, cfg.data_width, addr_width=cfg.addr_width,
                                               id_width=id_width)
    s_side, m_side = axi4_port(up, "s_axi"), axi4_port(up, "m_axi")
    for ch, sigs in axi4_payload(addr_width, width, id_width).items():
        for name in (*sigs, f"{ch}valid"):
            src, dst = (port, s_side) if ch in ("aw", "w", "ar") else (s_side, port)
            m.d.comb += getattr(dst, name).eq(getattr(src, name))
        src, dst = (s_side, port) if ch in ("aw", "w", "ar") else (port, s_side)
        m.d.comb += getattr(dst, f"{ch}ready").eq(getattr(src, f"{ch}ready"))
    for field, _w, direction in AXI_FIELDS:  # converter (manager) <-> controller, same names
        ours = getattr(m_side, field)
        m.d.comb += dram.axi[field].eq(ours) if direction == "o" else ours.eq(dram.axi[field])
    return up
