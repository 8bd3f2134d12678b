"""LiteDRAM DDR3 controller + PHY as one standalone Verilog module per board, with an AXI4 port.

LiteDRAM (``litedram`` 2024.12) is LiteX's DRAM controller. Its standalone generator
(``litedram.gen.LiteDRAMCore``, what ``litedram_gen config.yml`` runs) builds the PHY, the
controller, a clock/reset generator (PLL) and a Wishbone control bus from a configuration; this
script runs it with the board's configuration (:data:`DRAM_CONFIGS`, the one source of truth
for the DRAM's part, size, clock and port widths) and no CPU, and adds one **AXI4 user port in its own clock domain** (``axi_clk``): LiteDRAM's
AXI frontend (``LiteDRAMAXI2Native``) runs in the controller clock, and an async FIFO on each
of the five AXI channels (LiteX's ``stream.ClockDomainCrossing``) crosses to ``axi_clk``, so
the core's ``m_axi_mem`` attaches in the core clock, whatever the DRAM's.
(The generator's own ``type: axi`` user port is in the controller's clock only.)

Module ``<name>`` ports (``dw`` = :attr:`DramConfig.data_width`, ``aw`` =
:attr:`DramConfig.addr_width`, ``iw`` = :data:`AXI_ID_WIDTH`):

=============================================  ====  ==========================================
``clk``, ``rst``                               in    board oscillator (``input_clk_hz``), reset
``pll_locked``                                 out   the controller's PLL is locked
``ddram_*``                                    io    DDR3 pads (a, ba, ras_n, ..., dq, dqs_p/n)
``init_done``, ``init_error``                  out   set over ``wb_ctrl`` after initialisation
``wb_ctrl_*``                                  in    Wishbone control bus (DFII, PHY, status)
``user_clk``, ``user_rst``                     out   the controller's clock (``sys``) and reset
``axi_clk``, ``axi_rst``                       in    the AXI port's clock and reset
``axi_aw*/w*/b*/ar*/r*``                       —     AXI4 slave, bursts INCR, ``iw``-bit ids
=============================================  ====  ==========================================

The AXI port refuses requests (``awready``/``arready`` low) until ``init_done`` is set and
``init_error`` is not. **Initialisation is not in this module**: with no CPU, the DDR3 mode
register sequence, the PHY's read levelling and ``init_done`` are written over ``wb_ctrl``
(register map: ``<name>_csr.csv`` next to the Verilog; docs/boards.md says what is missing).

Run as a script (``python -m wanreduce.hdl.boards.litedram_controller BOARD OUT_DIR``) or call
:func:`generate`. Migen/LiteX/LiteDRAM are imported only when generating. The Verilog is cached
(:func:`cached`): about 10-20 s to generate, the same for the same configuration.

The cache generates in a **fresh interpreter** (``python -m`` this module, ``PYTHONHASHSEED=0``):
Migen writes the same design with its statements in an order that depends on the generating
process's history (object ids, the signals created before), and that order alone moved the
Versa DRAM build's controller clock by 15 % at one seed (docs/benchmarks.md, "The Versa DRAM
build's DRAM controller clock (session 35)"). A fresh interpreter gives the same text whoever
fills the cache (a test, ``wanreduce build``), so placements reproduce.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["AXI_ID_WIDTH", "DRAM_CONFIGS", "DramConfig", "cached", "controller_settings",
           "generate", "init_program", "module_name"]

AXI_ID_WIDTH = 4
# entries of each AXI channel's clock-domain-crossing FIFO: a 16-beat burst of data
AXI_CDC_DEPTH = {"aw": 4, "ar": 4, "b": 4, "w": 16, "r": 16}
LITEDRAM_VERSION = "2024.12"
# LiteDRAM's DFII register fields (litedram/dfii.py: DFIInjector control, PhaseInjector command)
DFII = {"DFII_CONTROL_SEL": 1, "DFII_CONTROL_CKE": 2, "DFII_CONTROL_ODT": 4,
        "DFII_CONTROL_RESET_N": 8, "DFII_COMMAND_CS": 1, "DFII_COMMAND_WE": 2,
        "DFII_COMMAND_CAS": 4, "DFII_COMMAND_RAS": 8}
# LiteX's BIOS waits ``delay`` loop iterations after each init command; a loop is several CPU
# cycles, so each is taken as this many controller cycles (50000 -> 2 ms at 100 MHz).
WAIT_CYCLES_PER_DELAY = 4
# ECP5 read path: the BIOS scans the bitslip per byte lane; without a CPU it is fixed here
# (not calibrated: docs/boards.md).
ECP5_RDLY_BITSLIP = 2


@dataclass(frozen=True)
class DramConfig:
    """One board's DDR3: the part, its geometry and clocks, and what LiteDRAM makes of it."""

    board: str
    part: str  # litedram.modules class name
    chips: int  # x16 parts side by side (data bus = 16 * chips bits)
    rows: int
    cols: int
    banks: int
    phy: str  # litedram.phy class name
    device: str  # FPGA part for the PHY's primitives
    input_clk_hz: float  # what drives ``clk``
    sys_clk_hz: float  # controller clock (``user_clk``)
    rate: str  # controller : DRAM clock ratio ("1:2": 2 DFI phases per controller cycle)
    speedgrade: str  # DDR3 timing set (litedram.modules speedgrade key)
    source: str  # where the part and size come from
    # AXI burst the board's slot store issues, in bytes: long enough that LiteDRAM's per-burst
    # read/write turnarounds leave the bandwidth budget its margin (docs/boards.md)
    burst_bytes: int = 512
    # the ``dram`` core's slot store's in-flight table (``outstanding``) on this board; None: the
    # store's default (the ``records`` core keeps the default on every board: board_core)
    outstanding: int | None = None

    def burst_beats(self, width: int) -> int:
        """The slot store's ``burst_beats`` for this board at bus width ``width`` (bits)."""
        return self.burst_bytes * 8 // width

    @property
    def nphases(self) -> int:
        return int(self.rate.split(":")[1])

    @property
    def dq_bits(self) -> int:
        return 16 * self.chips

    @property
    def size_bytes(self) -> int:
        """Whole DRAM: rows x cols x banks x 2 bytes per x16 part."""
        return self.rows * self.cols * self.banks * 2 * self.chips

    @property
    def data_width(self) -> int:
        """Controller (and AXI port) data width: one DDR3 burst of 8, DQ bits x 8."""
        return self.dq_bits * 8

    @property
    def addr_width(self) -> int:
        """AXI byte-address width: the whole DRAM."""
        return (self.size_bytes - 1).bit_length()

    @property
    def dram_clk_hz(self) -> float:
        """DDR3 clock: the controller clock x DFI phases (each phase one DRAM clock)."""
        return self.sys_clk_hz * self.nphases

    @property
    def peak_bytes_per_s(self) -> float:
        """DQ bus peak: DQ bits on both edges of the DRAM clock. At 1:2 a port beat (one burst
        of 8) takes two controller cycles, at 1:4 one."""
        return self.dq_bits // 8 * 2 * self.dram_clk_hz


DRAM_CONFIGS: dict[str, DramConfig] = {
    # LiteX-Boards' lattice_versa_ecp5 target: MT41K64M16 (1 Gb x16, 8192 rows x 1024 cols x 8
    # banks), ECP5DDRPHY at 1:2; amaranth-boards' ddr3 resource has the same 13 address and 16 DQ
    # pins. LiteX runs it at 75 MHz (DDR3-300). 87.5 MHz (DDR3-350; PLL: VCO 700 MHz = 4 x the
    # 175 MHz sys2x = 28 x the 25 MHz init clock): LiteDRAM's bank-machine -> multiplexer path
    # placed at 90.6 MHz in the DRAM store-test design (100 MHz failed; 87.5 met on 3 of 3
    # placements at 104.7-109.3 MHz, docs/benchmarks.md); with 512-B
    # bursts 87.5 MHz still covers two 1 GbE ports (docs/boards.md "DRAM bandwidth budget").
    "versa-ecp5": DramConfig(
        board="versa-ecp5", part="MT41K64M16", chips=1, rows=8192, cols=1024, banks=8,
        phy="ECP5DDRPHY", device="LFE5UM-45F-8BG381C", input_clk_hz=100e6, sys_clk_hz=87.5e6,
        rate="1:2", speedgrade="800",
        # 128 entries, not the store's 256: through this controller the store still carries
        # 262 MB/s of payload, two 1 GbE ports (239) with a margin of 1.10, the budget's 1.08
        # (64 entries: 1.07; 256: 1.11), and the row CAM's compare fans out to half as many
        # entries (bench/bench_slot_store_litedram.py, docs/benchmarks.md)
        outstanding=128,
        source="LiteX-Boards lattice_versa_ecp5 target (MT41K64M16) and the 13-address-pin, "
               "16-DQ ddr3 resource of amaranth-boards' VersaECP5Platform: 128 MiB"),
    # AX7325B core board: 64-bit DDR3 (8 DQS groups), four MT41K256M16 (4 Gb x16: 32768 rows x
    # 1024 cols x 8 banks) = 2 GiB, K7DDRPHY at 1:4, 125 MHz (DDR3-1000). Verified: the pins
    # (amaranth-boards' DDR3Resource 0: 64 DQ, 15 address = 32768 rows, 3 bank). Second hand:
    # the parts and size (a third-party AX7325B port's constraints, transcribing ALINX's
    # "AX7325B User Manual" rev 1.1: "4x MT41K256M16 (2 GiB, 64-bit)"); ALINX's own manual and
    # schematic were not reachable from here (docs/boards.md).
    "alinx-ax7325b": DramConfig(
        board="alinx-ax7325b", part="MT41K256M16", chips=4, rows=32768, cols=1024, banks=8,
        phy="K7DDRPHY", device="xc7k325t-ffg900-2", input_clk_hz=200e6, sys_clk_hz=125e6,
        rate="1:4", speedgrade="1066",
        # 2 KiB bursts (32 beats at W = 512): steady-state efficiency 0.822 on the K7 model,
        # against 0.543 at 512 B (bench/bench_dram.py; capacity.DRAM_EFFICIENCY)
        burst_bytes=2048,
        source="pins: amaranth-boards AX7325BPlatform DDR3Resource 0 (64 DQ, 15 address, 3 bank "
               "pins: 4 x 4 Gb x16 = 2 GiB); parts: 4 x MT41K256M16 per ALINX's AX7325B User "
               "Manual rev 1.1 as transcribed by a third-party port (second hand)"),
}


def module_name(board: str) -> str:
    return "litedram_" + board.replace("-", "_")


def _core_config(cfg: DramConfig) -> dict:
    """The generator's configuration (what its YAML file would hold), Python objects resolved."""
    from litedram import modules, phy

    c = {
        "cpu": None, "memtype": "DDR3", "device": cfg.device,
        "sdram_module": getattr(modules, cfg.part), "sdram_module_nb": 2 * cfg.chips,
        "sdram_module_speedgrade": cfg.speedgrade, "sdram_rank_nb": 1,
        "sdram_phy": getattr(phy, cfg.phy),
        "input_clk_freq": cfg.input_clk_hz, "sys_clk_freq": cfg.sys_clk_hz,
        "init_clk_freq": 25e6,
        # controller: LiteDRAM's default command buffer depth, buffered (a register after each
        # bank machine's command buffer: its row-hit logic was the 100 MHz critical path)
        "cmd_buffer_depth": 8, "cmd_buffer_buffered": True, "user_ports": {},
    }
    if cfg.phy == "ECP5DDRPHY":
        c.update(rtt_nom="60ohm", rtt_wr="60ohm", ron="34ohm")
    else:  # 7-series
        c.update(iodelay_clk_freq=200e6, cmd_latency=0, speedgrade=-2,
                 rtt_nom="60ohm", rtt_wr="60ohm", ron="34ohm")
    return c


def controller_settings(cfg: DramConfig):
    """LiteDRAM's ``ControllerSettings`` as the generator builds them from :func:`_core_config`
    (what ``bench/bench_dram.py`` simulates: the same controller as the generated Verilog)."""
    import inspect

    from litedram.core.controller import ControllerSettings

    c = _core_config(cfg)
    names = inspect.getfullargspec(ControllerSettings.__init__).args
    return ControllerSettings(**{n: c[n] for n in names if n in c})


def _add_axi_port(soc, platform) -> None:
    """One AXI4 slave in clock domain ``axi`` (own clock and reset pins), through LiteDRAM's
    native-port CDC; AW/AR held off until the controller is initialised."""
    from litedram.common import LiteDRAMNativePort
    from litedram.frontend.axi import LiteDRAMAXI2Native, LiteDRAMAXIPort
    from litedram.gen import get_axi_user_port_ios
    from litex.build.generic_platform import Pins
    from litex.soc.interconnect import stream
    from migen import ClockDomain, Signal
    from migen.fhdl.bitcontainer import log2_int
    from migen.genlib.cdc import MultiReg
    from migen.genlib.resetsync import AsyncResetSynchronizer

    platform.add_extension([("axi_clk", 0, Pins(1)), ("axi_rst", 0, Pins(1))])
    soc.clock_domains.cd_axi = ClockDomain()
    soc.comb += soc.cd_axi.clk.eq(platform.request("axi_clk"))
    soc.specials += AsyncResetSynchronizer(soc.cd_axi, platform.request("axi_rst"))

    # The AXI frontend runs in the controller clock and the crossing is at the AXI channels:
    # one async FIFO each (LiteX's stream.ClockDomainCrossing, gray-coded, output registered),
    # so the core-clock side holds only FIFO logic. (A native-port CDC after the frontend,
    # with register slices on its channels, left LiteDRAM's AXI2Native read/write arbiter in
    # the 125 MHz core clock: 124.2 MHz at best, docs/benchmarks.md.)
    user_port = soc.sdram.crossbar.get_port()
    widths = dict(data_width=user_port.data_width,
                  address_width=user_port.address_width + log2_int(user_port.data_width // 8),
                  id_width=AXI_ID_WIDTH)
    axi = LiteDRAMAXIPort(**widths, clock_domain="axi")  # the module's AXI pins
    inner = LiteDRAMAXIPort(**widths)  # the frontend's, in the controller clock
    # Register slices in the controller clock, valid and ready both registered (LiteX's
    # stream.Buffer with pipe_ready): on AW, AR and W between the FIFOs and the frontend, and on
    # the native command between the frontend and the crossbar. Without them the frontend's
    # read/write arbiter (its write-buffer level compare -> grant -> the crossbar's ready ->
    # aw.ready -> the AW FIFO's read pointer and storage) was one combinational path, the
    # controller clock's critical path: 96.8-110.9 MHz at 100 MHz over six placements.
    for ch in ("aw", "w", "ar", "b", "r"):
        src, dst, cd = getattr(axi, ch), getattr(inner, ch), ("axi", "sys")
        if ch in ("b", "r"):
            src, dst, cd = dst, src, ("sys", "axi")
        cdc = stream.ClockDomainCrossing(src.description, cd_from=cd[0], cd_to=cd[1],
                                         depth=AXI_CDC_DEPTH[ch], buffered=True)
        setattr(soc.submodules, f"axi_cdc_{ch}", cdc)
        soc.comb += src.connect(cdc.sink)
        if ch in ("aw", "w", "ar"):
            cut = stream.Buffer(dst.description, pipe_valid=True, pipe_ready=True)
            setattr(soc.submodules, f"axi_slice_{ch}", cut)
            soc.comb += [cdc.source.connect(cut.sink), cut.source.connect(dst)]
        else:
            soc.comb += cdc.source.connect(dst)
    native = LiteDRAMNativePort("both", user_port.address_width, user_port.data_width)
    cmd_cut = stream.Buffer(native.cmd.description, pipe_valid=True, pipe_ready=True)
    soc.submodules.native_cmd_slice = cmd_cut
    soc.comb += [native.cmd.connect(cmd_cut.sink), cmd_cut.source.connect(user_port.cmd),
                 native.wdata.connect(user_port.wdata), user_port.rdata.connect(native.rdata)]
    soc.submodules.axi2native = LiteDRAMAXI2Native(inner, native)
    ready_sys = Signal()
    soc.sync += ready_sys.eq(soc.ddrctrl.init_done.storage & ~soc.ddrctrl.init_error.storage)
    ready = Signal()
    soc.specials += MultiReg(ready_sys, ready, "axi")

    platform.add_extension(get_axi_user_port_ios("axi", axi.address_width, axi.data_width,
                                                 AXI_ID_WIDTH))
    io = platform.request("user_port_axi")
    soc.comb += [
        axi.aw.valid.eq(io.awvalid & ready), io.awready.eq(axi.aw.ready & ready),
        axi.aw.addr.eq(io.awaddr), axi.aw.burst.eq(io.awburst), axi.aw.len.eq(io.awlen),
        axi.aw.size.eq(io.awsize), axi.aw.id.eq(io.awid),
        axi.w.valid.eq(io.wvalid), io.wready.eq(axi.w.ready), axi.w.last.eq(io.wlast),
        axi.w.strb.eq(io.wstrb), axi.w.data.eq(io.wdata),
        io.bvalid.eq(axi.b.valid), axi.b.ready.eq(io.bready), io.bresp.eq(axi.b.resp),
        io.bid.eq(axi.b.id),
        axi.ar.valid.eq(io.arvalid & ready), io.arready.eq(axi.ar.ready & ready),
        axi.ar.addr.eq(io.araddr), axi.ar.burst.eq(io.arburst), axi.ar.len.eq(io.arlen),
        axi.ar.size.eq(io.arsize), axi.ar.id.eq(io.arid),
        io.rvalid.eq(axi.r.valid), axi.r.ready.eq(io.rready), io.rlast.eq(axi.r.last),
        io.rresp.eq(axi.r.resp), io.rdata.eq(axi.r.data), io.rid.eq(axi.r.id),
    ]
    soc.axi_widths = (axi.data_width, axi.address_width)


def init_program(soc, cfg: DramConfig, csr: dict[str, int]) -> list[tuple[int, int, int]]:
    """The Wishbone writes (word address, data, cycles to wait after) that initialise the DRAM
    as LiteX's BIOS does without its calibration scans: LiteDRAM's DDR3 init sequence through
    DFII phase 0, a fixed read bitslip (ECP5), hardware control, ``init_done``."""
    from litedram import modules
    from litedram.init import get_sdram_phy_init_sequence

    module = getattr(modules, cfg.part)(cfg.sys_clk_hz, cfg.rate)
    seq, _ = get_sdram_phy_init_sequence(soc.ddrphy.settings, module.timing_settings)
    prog: list[tuple[int, int, int]] = []

    def write(reg: str, value: int, wait: int = 0) -> None:
        prog.append((csr[reg] >> 2, value, wait))

    def bits(names: str) -> int:
        return sum(DFII[n] for n in names.split("|"))

    write("sdram_dfii_control", 0)  # software control, DRAM in reset
    for _comment, a, ba, cmd, delay in seq:
        wait = delay * WAIT_CYCLES_PER_DELAY
        if cmd.startswith("DFII_CONTROL"):
            write("sdram_dfii_control", bits(cmd), wait)
        else:
            write("sdram_dfii_pi0_address", a)
            write("sdram_dfii_pi0_baddress", ba)
            write("sdram_dfii_pi0_command", bits(cmd))
            write("sdram_dfii_pi0_command_issue", 1, wait)
    if cfg.phy == "ECP5DDRPHY":
        for lane in range(2 * cfg.chips):
            write("ddrphy_dly_sel", 1 << lane)
            write("ddrphy_rdly_dq_bitslip_rst", 1)
            for _ in range(ECP5_RDLY_BITSLIP):
                write("ddrphy_rdly_dq_bitslip", 1)
        write("ddrphy_dly_sel", 0)
    write("sdram_dfii_control", bits("DFII_CONTROL_SEL|DFII_CONTROL_CKE|DFII_CONTROL_ODT|"
                                     "DFII_CONTROL_RESET_N"))
    write("ddrctrl_init_done", 1)
    return prog


def read_csr_map(path: Path) -> dict[str, int]:
    """``csr_register`` rows of LiteX's csr.csv: register name -> byte address."""
    regs = {}
    for line in Path(path).read_text().splitlines():
        f = line.split(",")
        if f[0] == "csr_register":
            regs[f[1]] = int(f[2], 0)
    return regs


def generate(board: str, out_dir: Path, *, name: str | None = None) -> Path:
    """Write ``<out_dir>/<name>.v``, its register map ``<name>_csr.csv`` and its init program
    ``<name>_init.json`` for ``board``; return the .v path."""
    if board not in DRAM_CONFIGS:
        raise ValueError(f"no DRAM configuration for board {board!r} "
                         f"(one of {', '.join(DRAM_CONFIGS)})")
    with contextlib.redirect_stdout(io.StringIO()), _quiet_logging():  # LiteX prints its tree
        return _generate(DRAM_CONFIGS[board], Path(out_dir), name or module_name(board))


@contextlib.contextmanager
def _quiet_logging():
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(previous)


#: the modules of :func:`litedram_patches` (hashed into every cache key of a patched controller)
PATCH_SOURCES = tuple(Path(__file__).parent / f
                      for f in ("litedram_bank_lock.py", "litedram_refresh_request.py",
                                "litedram_row_hit.py", "litedram_write_credit.py",
                                "litedram_patching.py"))


@contextlib.contextmanager
def litedram_patches(bank_lock_fix: bool = True) -> Iterator[None]:
    """The patches every controller the boards use is built with, active while LiteDRAM is
    elaborated: cmd_buffer_buffered breaks LiteDRAM's bank lock (``litedram_bank_lock``;
    ``bank_lock_fix=False`` leaves it out, to show what it breaks), and the refresh request and
    the AXI write arbiter's W-buffer compare and the bank machines' row compare were the
    controller clock's critical paths (``litedram_refresh_request``, ``litedram_write_credit``:
    the AXI port is built inside; ``litedram_row_hit``)."""
    from wanreduce.hdl.boards.litedram_bank_lock import fixed_bank_lock
    from wanreduce.hdl.boards.litedram_refresh_request import registered_refresh_request
    from wanreduce.hdl.boards.litedram_row_hit import registered_row_hit
    from wanreduce.hdl.boards.litedram_write_credit import registered_can_write

    with (fixed_bank_lock() if bank_lock_fix else contextlib.nullcontext(),
          registered_refresh_request(), registered_row_hit(), registered_can_write()):
        yield


def _generate(cfg: DramConfig, out_dir: Path, name: str) -> Path:
    board = cfg.board
    from litedram.gen import LiteDRAMCore
    from litex.build.lattice import LatticePlatform
    from litex.build.xilinx import XilinxPlatform
    from litex.soc.integration.builder import Builder

    if cfg.phy == "ECP5DDRPHY":
        platform = LatticePlatform(cfg.device, io=[], toolchain="trellis")
    else:
        platform = XilinxPlatform(cfg.device, io=[], toolchain="vivado")
    with litedram_patches():
        soc = LiteDRAMCore(platform, _core_config(cfg), integrated_rom_size=0)
        _add_axi_port(soc, platform)
    dw, aw = soc.axi_widths
    if (dw, aw) != (cfg.data_width, cfg.addr_width):
        raise RuntimeError(f"{board}: LiteDRAM gave an AXI port of {dw} data / {aw} address bits, "
                           f"the configuration says {cfg.data_width} / {cfg.addr_width}")
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        builder = Builder(soc, output_dir=tmp, compile_software=False, compile_gateware=False,
                          csr_csv=str(Path(tmp) / "csr.csv"))
        builder.build(build_name=name, regular_comb=False, run=False)
        shutil.copy(Path(tmp) / "csr.csv", out_dir / f"{name}_csr.csv")
        prog = init_program(soc, cfg, read_csr_map(Path(tmp) / "csr.csv"))
        (out_dir / f"{name}_init.json").write_text(json.dumps(prog))
        shutil.copy(Path(tmp) / "gateware" / f"{name}.v", out_dir / f"{name}.v")
    return out_dir / f"{name}.v"


def _cache_key(board: str) -> str:
    text = json.dumps([asdict(DRAM_CONFIGS[board]), AXI_ID_WIDTH, LITEDRAM_VERSION,
                       Path(__file__).read_bytes().hex(),  # and the patches it applies
                       *(f.read_bytes().hex() for f in PATCH_SOURCES)],
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cache_dir() -> Path:
    """``$WANREDUCE_CACHE`` or ``$XDG_CACHE_HOME/wanreduce`` (``~/.cache/wanreduce``)."""
    base = os.environ.get("WANREDUCE_CACHE") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "wanreduce"
    return Path(base) / "litedram"


def cached(board: str) -> Path:
    """The generated Verilog for ``board``, generated once per configuration (key: the board's
    :class:`DramConfig`, the AXI id width, LiteDRAM's version and this script) and reused."""
    folder = cache_dir() / _cache_key(board)
    path = folder / f"{module_name(board)}.v"
    if not path.exists():
        with tempfile.TemporaryDirectory(dir=cache_dir().parent if cache_dir().parent.exists()
                                         else None) as tmp:
            _generate_fresh(board, Path(tmp))
            folder.mkdir(parents=True, exist_ok=True)
            for f in Path(tmp).iterdir():  # csr first, the .v last: its presence means complete
                if f.suffix != ".v":
                    shutil.copy(f, folder / f.name)
            tmp_v = folder / f"{path.name}.tmp{os.getpid()}"
            shutil.copy(Path(tmp) / path.name, tmp_v)
            tmp_v.replace(path)
    return path


def _generate_fresh(board: str, out_dir: Path) -> None:
    """:func:`generate` in a fresh interpreter, for text that does not depend on this process
    (module docstring)."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    run = subprocess.run([sys.executable, "-m", "wanreduce.hdl.boards.litedram_controller", board,
                          str(out_dir)], env=env, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        tail = " | ".join(run.stderr.strip().splitlines()[-3:])
        raise RuntimeError(f"generating LiteDRAM's controller for {board} failed "
                           f"(exit {run.returncode}): {tail}")


if __name__ == "__main__":
    print(generate(sys.argv[1], Path(sys.argv[2] if len(sys.argv) > 2 else ".")))
