"""Lattice ECP5 Versa (LFE5UM-45F) top level: the core between the board's two RGMII ports.

::

    RJ45 ETH0 (network) ─ LiteEth RGMII PHY+MAC ─ CDC ─► s_axis_net0 ┐
                                                                     wanreduce_core (125 MHz, W=64)
    RJ45 ETH1 (host)    ─ LiteEth RGMII PHY+MAC ─ CDC ─► s_axis_host ┤
                                                   ◄─── m_axis_host ┘

* **ETH0** (``eth_rgmii`` 0) is the WAN-facing network port: frames received there are the other
  sites' multicast contributions (``s_axis_net0``). Its transmit side is idle: a site's own
  multicast leaves through the site's router, not through this board.
* **ETH1** (``eth_rgmii`` 1) is the host-facing port: the local hosts' contributions and CONTROL
  messages come in (``s_axis_host``); results and control replies go out (``m_axis_host``).
* With ``ports`` > 1 the extra network ports exist in the core but are tied idle (the board has
  two RJ45 jacks); the board default is ``ports=1``.
* MAC: LiteEth (:mod:`wanreduce.hdl.boards.liteeth_mac`, generated Verilog). Its built-in
  ``stream.ClockDomainCrossing`` FIFOs move frames between each PHY's 125 MHz RGMII clock and the
  core clock; its 8 -> 64-bit converter gives the core 64-bit beats. An adapter turns LiteEth's
  endpoint (``last_be`` one-hot, per-byte ``error``) into AXI4-Stream (``tkeep``, ``tuser``).
* An ``AXIStreamRegisterSlice`` sits on each core port in use (ETH0 in, ETH1 in and out), so
  the MACs' CDC FIFO flags (``valid`` / ``ready``) meet flip-flops at the core's edge instead of
  running on through the core's ready chains (at a 125 MHz core clock the host-side transmit
  ready, through the egress framer and merger into the reducer's output FIFO, was the board's
  critical path); one cycle of latency each way. In the DRAM build the two input slices are
  ``ready_copy`` (their skid registers' enables off a copy of the ready: the ready flip-flop
  the MAC's receive FIFO reads drives a few cells, not 74 enables; docs/benchmarks.md
  session 46).
* Core clock: 100 MHz board oscillator -> EHXPLLL -> ``core_mhz`` (125, 100, 62.5 or 50 MHz;
  ``sync``), reset from the PLL lock and the board's reset button through the chip's global
  set/reset, not a fabric net (:func:`core_clock`; LiteEth's and LiteDRAM's reset inputs from
  domain ``sync_rst``, a synchronised reset on the same clock). Two 1 GbE ports need
  250 MB/s; W=64 carries 8 bytes per cycle, so even 50 MHz (400 MB/s) keeps up.
* Slot memory (``slot_memory``): ``onchip`` (block RAM), or ``dram`` / ``records``: the core's
  ``m_axi_mem`` (with ``records`` the sums' and the records' engines, AXI IDs 0 and 1 from the
  core's ``AxiIdArbiter``) through ``attach_memory``'s 64 -> 128-bit ``AxiUpsizer`` onto LiteDRAM
  (``DramController``, the board's DDR3; its own clock), the engines on the board's address
  width, burst size and in-flight table (``board_core``).
* LEDs (active low on the board, inverted by the platform): 0 heartbeat (~1 Hz), 1 PLL locked,
  2 ETH0 link, 3 ETH1 link, 4 ETH0 frame received, 5 ETH1 frame received, 6 frame sent to the
  host, 7 sticky: a received frame had a CRC/preamble error.
"""

from __future__ import annotations

from amaranth.hdl import (
    ClockDomain,
    ClockSignal,
    Const,
    Elaboratable,
    Instance,
    Module,
    Mux,
    ResetSignal,
    Signal,
    Value,
)
from amaranth.lib import wiring
from amaranth.lib.cdc import FFSynchronizer, ResetSynchronizer

from wanreduce.hdl.axis_register_slice import AXIStreamRegisterSlice
from wanreduce.hdl.boards.dram_controller import (
    DRAM_MEMORIES,
    DramController,
    attach_memory,
    board_core,
)
from wanreduce.hdl.boards.liteeth_mac import MAC_NAME
from wanreduce.hdl.core import net_port

__all__ = ["CORE_FREQ_HZ", "VersaTop", "core_clock", "pll_params"]

CORE_FREQ_HZ = 125e6
MAC_WIDTH = 64
# core clock (MHz) -> EHXPLLL (CLKI_DIV, CLKFB_DIV, CLKOP_DIV) from the 100 MHz oscillator:
# f = 100 / CLKI_DIV * CLKFB_DIV, VCO = f * CLKOP_DIV in 400..800 MHz, PFD >= 10 MHz.
PLL_TABLE = {125.0: (4, 5, 5), 100.0: (1, 1, 6), 62.5: (8, 5, 10), 50.0: (2, 1, 12),
             40.0: (5, 2, 15)}


def pll_params(core_mhz: float = 125.0) -> dict:
    """EHXPLLL parameters for 100 MHz -> ``core_mhz`` (a key of ``PLL_TABLE``)."""
    clki, clkfb, clkop = PLL_TABLE[core_mhz]
    return dict(
        p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
        p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
        p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
        p_CLKI_DIV=clki, p_CLKFB_DIV=clkfb, p_FEEDBK_PATH="CLKOP",
        p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=clkop, p_CLKOP_CPHASE=clkop - 1, p_CLKOP_FPHASE=0,
    )


def check_core_mhz(core_mhz: float) -> None:
    if float(core_mhz) not in PLL_TABLE:
        raise ValueError(f"versa-ecp5 core clock must be one of "
                         f"{', '.join(f'{f:g}' for f in PLL_TABLE)} MHz, got {core_mhz:g}")


def core_clock(m: Module, platform, core_mhz: float, *,
               global_reset: bool = False) -> tuple[Signal, Signal, Signal]:
    """Domain ``sync`` at ``core_mhz`` from the 100 MHz oscillator through an EHXPLLL, reset
    by PLL lock and the reset button; returns (oscillator, button pressed, PLL locked).

    ``global_reset``: ``sync`` has no reset signal: its flip-flops are reset to their initial
    values by the chip's global set/reset (``SGSR``, synchronous to the core clock, on its own
    dedicated network), as Amaranth's ECP5 platform resets its default domain; the synchronised
    reset is then domain ``sync_rst``'s (same clock), for the reset inputs of LiteEth's and
    LiteDRAM's instances only. Through general routing the reset's one register, fanning out to
    ~10,000 flip-flops (the rest have no reset), could land at the chip's edge (branch vdram22's seed-2 placement of the
    Versa DRAM build: 12.9 ns of routing to the reducer, core 73.5 MHz; with only the core off
    it, 10 ns to the LEDs' counters). The GSR also resets every other flip-flop whose GSR is
    left to synthesis (LiteDRAM's, LiteEth's), as the power-up reset does; the two flip-flops
    that drive it are kept off it (``GSR="DISABLED"``), or an asserted GSR would hold them, and
    itself, forever."""
    clk100_buf = platform.request("clk100", 0).i
    rst_n = platform.request("rst", 0)
    m.domains.sync = ClockDomain("sync", reset_less=global_reset)
    core_clk, locked = Signal(name="core_clk"), Signal(name="pll_locked")
    m.submodules.pll = Instance(
        "EHXPLLL", **pll_params(core_mhz),
        i_CLKI=clk100_buf, o_CLKOP=core_clk, i_CLKFB=core_clk, o_LOCK=locked,
        i_RST=0, i_STDBY=0, i_PHASESEL0=0, i_PHASESEL1=0, i_PHASEDIR=1, i_PHASESTEP=1,
        i_PHASELOADREG=1, i_PLLWAKESYNC=0, i_ENCLKOP=0,
        a_FREQUENCY_PIN_CLKI="100", a_FREQUENCY_PIN_CLKOP=f"{core_mhz:g}",
    )
    m.d.comb += ClockSignal("sync").eq(core_clk)
    rst_domain = "sync_rst" if global_reset else "sync"
    if global_reset:
        m.domains.sync_rst = ClockDomain("sync_rst")
        m.d.comb += ClockSignal("sync_rst").eq(core_clk)
    m.submodules.rst_sync = ResetSynchronizer(~locked | rst_n.i, domain=rst_domain)
    if global_reset:
        run0, run1 = Signal(name="gsr_run0"), Signal(name="gsr_run1")  # 0: reset
        m.submodules.gsr_sync0 = Instance("FD1S3AX", p_GSR="DISABLED", i_CK=core_clk,
                                          i_D=locked & ~rst_n.i, o_Q=run0)
        m.submodules.gsr_sync1 = Instance("FD1S3AX", p_GSR="DISABLED", i_CK=core_clk,
                                          i_D=run0, o_Q=run1)
        m.submodules.gsr = Instance("SGSR", i_CLK=core_clk, i_GSR=run1)
    # No constraint on core_clk itself (synthesis renames the net): nextpnr derives the core
    # clock for the PLL output from the 100 MHz input constraint in constraints/versa_ecp5.lpf.
    return clk100_buf, rst_n.i, locked


def _pulse_stretch(m: Module, event, bits: int = 22, *, registered: bool = False) -> Signal:
    """LED driver: on for 2**bits cycles (~34 ms at 125 MHz) after each ``event``.
    ``registered`` (the DRAM builds): ``event`` through a flip-flop first (the LED lights a cycle
    later), so the stream handshake it is made of (a register slice's ready, the MAC's valid)
    reaches one flip-flop, not the counter's 22 enables and next values
    (``slice_net_in.skid.s__ready`` -> ``count``, 10 endpoints, 8.70 ns at session 44's seed 5)."""
    if registered:
        event_r = Signal(name="led_event")
        m.d.sync += event_r.eq(event)
        event = event_r
    count = Signal(bits)
    with m.If(event):
        m.d.sync += count.eq(-1)
    with m.Elif(count != 0):
        m.d.sync += count.eq(count - 1)
    return count != 0


class VersaTop(Elaboratable):
    """Board top: two LiteEth MACs, the core, LEDs; core parameters as ``WanreduceCore``."""

    def __init__(self, *, core_mhz: float = 125.0, slot_memory: str = "onchip",
                 **core_params: int) -> None:
        check_core_mhz(core_mhz)
        self.core_mhz = float(core_mhz)
        self.core = board_core("versa-ecp5", slot_memory, **core_params)
        self.slot_memory = slot_memory
        # the LEDs' pulse stretchers from registered events in the DRAM build (_pulse_stretch)
        self.registered_leds = slot_memory == "dram"
        # the DRAM build's input slices (net_in, host_in) with ``ready_copy``: the ready that the
        # MAC's receive FIFO read side reads drives none of the skid register's enables
        self.input_ready_copy = slot_memory == "dram"
        # the reset signal of the MACs' and LiteDRAM's instances (see core_clock, global_reset):
        # ``sync`` itself is reset by the global set/reset in both builds (the on-chip build's
        # fabric reset, one register to ~6,500 flip-flops, stalls nextpnr's router1; issue 12)
        self.rst_domain = "sync_rst"
        # the DRAM builds: each MAC's reset from a register of its own (``_mac_reset``)
        self.mac_reset_copies = slot_memory in DRAM_MEMORIES
        self._mac_rst: list[Signal] = []
        if self.core.params["width"] != MAC_WIDTH:
            raise ValueError(f"versa-ecp5 runs the core at width {MAC_WIDTH} (LiteEth MAC width), "
                             f"got width={self.core.params['width']}")

    def _mac_reset(self, m: Module, index: int) -> Value:
        """MAC ``index``'s ``sys_rst``: the synchronised reset, or (``mac_reset_copies``, the DRAM
        builds) a register of its own, the MACs' in a chain (MAC 1's from MAC 0's, so yosys cannot
        merge them; each MAC leaves reset a cycle after the one before, the MACs meet the core
        only through streams that are idle until then). One register for both MACs and LiteDRAM
        put 9.53 ns of routing between it and ``mac1``'s receive FIFO read counter at one
        placement (docs/benchmarks.md, session 45): a copy per MAC can sit beside its MAC."""
        if not self.mac_reset_copies:
            return ResetSignal(self.rst_domain)
        rst = Signal(init=1, name=f"mac{index}_rst")  # in reset from power-up (the GSR's init)
        m.d.sync += rst.eq(self._mac_rst[-1] if self._mac_rst else ResetSignal(self.rst_domain))
        self._mac_rst.append(rst)
        return rst

    def _mac(self, m: Module, platform, index: int) -> dict:
        """Instantiate one LiteEth MAC on ``eth_rgmii`` ``index``; return its stream signals."""
        names = ("rst", "mdc", "mdio", "tx_clk", "tx_data", "rx_clk", "rx_data") + (
            ("tx_ctl", "rx_ctl") if index == 0 else ("tx_ctrl", "rx_ctrl"))
        pads = platform.request("eth_rgmii", index, dir={n: "o" if n == "mdc" else "-" for n in names})
        # amaranth-boards names port 1's control pins tx_ctrl/rx_ctrl, port 0's tx_ctl/rx_ctl.
        tx_ctl = getattr(pads, "tx_ctl", None) or pads.tx_ctrl
        rx_ctl = getattr(pads, "rx_ctl", None) or pads.rx_ctrl
        w = MAC_WIDTH
        s = {name: Signal(width, name=f"mac{index}_{name}") for name, width in (
            ("source_valid", 1), ("source_ready", 1), ("source_last", 1), ("source_data", w),
            ("source_last_be", w // 8), ("source_error", w // 8),
            ("sink_valid", 1), ("sink_ready", 1), ("sink_last", 1), ("sink_data", w),
            ("sink_last_be", w // 8), ("link_up", 1))}
        m.submodules[f"mac{index}"] = Instance(
            MAC_NAME,
            i_sys_clk=ClockSignal("sync"), i_sys_rst=self._mac_reset(m, index),
            i_rgmii_clk_rx=pads.rx_clk.io, o_rgmii_clk_tx=pads.tx_clk.io,
            o_rgmii_rst_n=pads.rst.io,  # the pin is active low (PinsN); the raw pad is rst_n
            i_rgmii_rx_ctl=rx_ctl.io, i_rgmii_rx_data=pads.rx_data.io,
            o_rgmii_tx_ctl=tx_ctl.io, o_rgmii_tx_data=pads.tx_data.io,
            o_source_valid=s["source_valid"], i_source_ready=s["source_ready"],
            o_source_last=s["source_last"], o_source_data=s["source_data"],
            o_source_last_be=s["source_last_be"], o_source_error=s["source_error"],
            i_sink_valid=s["sink_valid"], o_sink_ready=s["sink_ready"],
            i_sink_last=s["sink_last"], i_sink_data=s["sink_data"],
            i_sink_last_be=s["sink_last_be"], i_sink_error=Const(0, w // 8),
            o_link_up=s["link_up"],
        )
        # MDIO is not used (the FPGA adds the RGMII delays): MDC low, MDIO left unconnected.
        m.d.comb += pads.mdc.o.eq(0)
        return s

    @staticmethod
    def mac_to_axis(m: Module, mac: dict, axis) -> None:
        """LiteEth source -> AXI4-Stream sink port of the core (tkeep from last_be, tuser=error)."""
        n = MAC_WIDTH // 8
        keep = Signal(n)
        # last_be is one-hot at the last valid byte: keep = all bytes up to and including it.
        for i in range(n):
            m.d.comb += keep[i].eq(mac["source_last_be"][i:].any())
        m.d.comb += [
            axis.tvalid.eq(mac["source_valid"]),
            axis.tdata.eq(mac["source_data"]),
            axis.tlast.eq(mac["source_last"]),
            axis.tkeep.eq(Mux(mac["source_last"], keep, (1 << n) - 1)),
            axis.tuser.eq(mac["source_error"].any()),
            mac["source_ready"].eq(axis.tready),
        ]

    @staticmethod
    def axis_to_mac(m: Module, axis, mac: dict) -> None:
        """AXI4-Stream source port of the core -> LiteEth sink (last_be = highest tkeep bit)."""
        n = MAC_WIDTH // 8
        last_be = Signal(n)
        for i in range(n):
            upper = axis.tkeep[i + 1:] if i + 1 < n else Const(0, 1)
            m.d.comb += last_be[i].eq(axis.tkeep[i] & ~upper.any())
        m.d.comb += [
            mac["sink_valid"].eq(axis.tvalid),
            mac["sink_data"].eq(axis.tdata),
            mac["sink_last"].eq(axis.tlast),
            mac["sink_last_be"].eq(Mux(axis.tlast, last_be, 0)),
            axis.tready.eq(mac["sink_ready"]),
        ]

    def elaborate(self, platform) -> Module:
        m = Module()
        # the core clock's reset through the global set/reset, the synchronised reset signal
        # only for the MACs' and LiteDRAM's instances
        clk100_buf, button, locked = core_clock(m, platform, self.core_mhz, global_reset=True)
        m.submodules.core = core = self.core
        if self.slot_memory in DRAM_MEMORIES:  # dram, records: the core's m_axi_mem on LiteDRAM
            m.submodules.dram = dram = DramController(
                "versa-ecp5", platform.request("ddr3", 0, dir="-"), clk100_buf, button,
                axi_domain=self.rst_domain, platform=platform)
            attach_memory(m, core, dram)
        net = self._mac(m, platform, 0)
        host = self._mac(m, platform, 1)
        slices = {}
        for name in ("net_in", "host_in", "host_out"):
            # (the input slices' ready_copy: session 46, docs/benchmarks.md)
            slices[name] = m.submodules[f"slice_{name}"] = AXIStreamRegisterSlice(
                MAC_WIDTH, 1, ready_copy=self.input_ready_copy and name != "host_out")
        self.mac_to_axis(m, net, slices["net_in"].s_axis)
        wiring.connect(m, slices["net_in"].m_axis, getattr(core, net_port(0)))
        for i in range(1, core.params["ports"]):
            m.d.comb += getattr(core, net_port(i)).tvalid.eq(0)
        self.mac_to_axis(m, host, slices["host_in"].s_axis)
        wiring.connect(m, slices["host_in"].m_axis, core.s_axis_host)
        wiring.connect(m, core.m_axis_host, slices["host_out"].s_axis)
        self.axis_to_mac(m, slices["host_out"].m_axis, host)
        m.d.comb += net["sink_valid"].eq(0)

        # status LEDs
        leds = [platform.request("led", i) for i in range(8)]
        beat = Signal(27)
        m.d.sync += beat.eq(beat + 1)
        links = []
        for i, mac in enumerate((net, host)):
            link = Signal(name=f"link{i}")
            m.submodules[f"link_sync{i}"] = FFSynchronizer(mac["link_up"], link)
            links.append(link)
        crc_err = Signal()
        with m.If((net["source_valid"] & net["source_error"].any())
                  | (host["source_valid"] & host["source_error"].any())):
            m.d.sync += crc_err.eq(1)
        m.d.comb += [
            leds[0].o.eq(beat[-1]),
            leds[1].o.eq(locked),
            leds[2].o.eq(links[0]),
            leds[3].o.eq(links[1]),
            leds[4].o.eq(_pulse_stretch(m, net["source_valid"] & net["source_last"] & net["source_ready"],
                                        registered=self.registered_leds)),
            leds[5].o.eq(_pulse_stretch(m, host["source_valid"] & host["source_last"] & host["source_ready"],
                                        registered=self.registered_leds)),
            leds[6].o.eq(_pulse_stretch(m, core.m_axis_host.tvalid & core.m_axis_host.tlast
                                        & core.m_axis_host.tready, registered=self.registered_leds)),
            leds[7].o.eq(crc_err),
        ]
        return m
