"""ALINX AX7325B (Kintex-7 XC7K325T-2FFG900) top level: the core at 10 GbE on the SFP+ cages.

::

    SFP0..SFP(P-1) ─ axi_10g_ethernet ─ m_axis_rx ─► s_axis_net{i} ┐
                                                                    wanreduce_core (156.25 MHz, W=64)
    SFP(P)  (host) ─ axi_10g_ethernet ─ m_axis_rx ─► s_axis_host  ─┤
                                         s_axis_tx ◄─ m_axis_host  ─┘

* Vendor IP (not generated here; Vivado creates it from the Tcl in the build script): Xilinx
  **10G Ethernet Subsystem** (``axi_10g_ethernet``, PG157: 10G MAC + 10GBASE-R PCS/PMA on a GTX
  transceiver), one instance per cage. Instance ``eth10g_0`` (module ``axi_10g_ethernet_0``)
  has the shared logic (QPLL, ``coreclk`` from the 156.25 MHz SFP reference clock) in the core;
  the others (module ``axi_10g_ethernet_1``) take the shared clocks from it. Management is by
  configuration vectors (no AXI4-Lite), statistics are not used.
* **AXI4-Stream boundary**: the IP's ``m_axis_rx_*`` / ``s_axis_tx_*`` (64-bit ``tdata``, 8-bit
  ``tkeep``, ``tlast``, ``tuser``) run on ``coreclk_out`` (156.25 MHz), the core's clock, so no
  clock-domain crossing is needed; ``m_axis_rx_tuser`` (bad frame, on ``tlast``) is the core's
  ``tuser`` (frame error). The IP's RX stream has **no tready**: the core's ingress parsers are
  store-and-forward and absorb line rate; if one is full the frame is corrupted (the parser sees a
  gap) — acceptable only while the reducer keeps up (see docs/boards.md).
* SFP P is host-facing (``s_axis_host``/``m_axis_host``); the network cages' transmit sides are
  idle. ``ports`` is 1..3 on this board (four cages).
* LEDs: 0 heartbeat, 1 PCS block lock on SFP0, 2 result sent, 3 any RX bad frame (sticky).
"""

from __future__ import annotations

from amaranth.build import Resource
from amaranth.hdl import (
    ClockDomain,
    ClockSignal,
    Const,
    Elaboratable,
    Instance,
    Module,
    ResetSignal,
    Signal,
)
from amaranth.lib.cdc import ResetSynchronizer

from wanreduce.hdl.boards.dram_controller import (
    DRAM_MEMORIES,
    DramController,
    attach_memory,
    board_core,
)
from wanreduce.hdl.core import net_port

__all__ = ["CORE_FREQ_HZ", "IP_MODULES", "AX7325BTop", "ip_tcl"]

CORE_FREQ_HZ = 156.25e6
WIDTH = 64
IP_MODULES = ("axi_10g_ethernet_0", "axi_10g_ethernet_1")
MAX_PORTS = 3


def ip_tcl() -> str:
    """Vivado Tcl creating the two 10G Ethernet Subsystem configurations (runs before synthesis)."""
    lines = []
    for name, shared in zip(IP_MODULES, ("Include_Shared_Logic_in_Core", "Include_Shared_Logic_in_Example_Design"), strict=True):
        lines += [
            f"create_ip -name axi_10g_ethernet -vendor xilinx.com -library ip -module_name {name}",
            f"set_property -dict [list CONFIG.Management_Interface {{false}} "
            f"CONFIG.base_kr {{BASE-R}} CONFIG.SupportLevel {{{shared}}} "
            f"CONFIG.Statistics_Gathering {{false}} CONFIG.Timer_Format {{Time_of_day}}] "
            f"[get_ips {name}]",
            f"generate_target all [get_ips {name}]",
            f"synth_ip [get_ips {name}]",
        ]
    return "\n".join(lines)


def _request_sfp(platform, cage: int):
    """SFP cage ``cage`` with raw GT pins. amaranth-boards gives cages 0 and 1 the same
    ``tx_dis`` pin (T28); cage 1 is requested without it (cage 0 drives it)."""
    dirs = {"tx": "-", "rx": "-", "loss": "i"}
    if cage != 1:
        return platform.request("sfp", cage, dir={**dirs, "tx_dis": "o"})
    res = platform.resources["sfp", 1]
    subs = [io for io in res.ios if io.name != "tx_dis"]
    platform.add_resources([Resource("sfp_no_tx_dis", 1, *subs)])
    return platform.request("sfp_no_tx_dis", 1, dir=dirs)


class AX7325BTop(Elaboratable):
    """Board top: P+1 10G Ethernet Subsystem black boxes, the core at 156.25 MHz, LEDs."""

    def __init__(self, *, slot_memory: str = "onchip", **core_params: int) -> None:
        self.core = board_core("alinx-ax7325b", slot_memory, **core_params)
        self.slot_memory = slot_memory
        p = self.core.params
        if p["width"] != WIDTH:
            raise ValueError(f"alinx-ax7325b runs the core at width {WIDTH} (10G MAC AXI4-Stream "
                             f"width), got width={p['width']}")
        if p["ports"] > MAX_PORTS:
            raise ValueError(f"alinx-ax7325b has 4 SFP+ cages: ports must be 1..{MAX_PORTS} "
                             f"(one cage is host-facing), got ports={p['ports']}")

    def elaborate(self, platform) -> Module:
        m = Module()
        p = self.core.params
        m.submodules.core = core = self.core
        if self.slot_memory in DRAM_MEMORIES:  # LiteDRAM on the core board's DDR3, 200 MHz oscillator
            m.submodules.dram = dram = DramController(
                "alinx-ax7325b", platform.request("ddr3", 0, dir="-"),
                platform.request("clk", 0).i, Const(0), platform=platform)
            attach_memory(m, core, dram)
        refclk = platform.request("clk_sfp", 0, dir="-")
        m.domains.sync = ClockDomain("sync")
        coreclk = Signal()
        m.d.comb += ClockSignal("sync").eq(coreclk)
        rst_btn = Const(0)  # the board has no dedicated reset button in amaranth-boards
        resetdone = Signal()
        m.submodules.rst_sync = ResetSynchronizer(~resetdone | rst_btn, domain="sync")
        # coreclk (CORE_FREQ_HZ) is constrained by the IP's own XDC, derived from the SFP
        # reference clock (constrained by the platform); see constraints/alinx_ax7325b.xdc.

        # shared clocks from instance 0 to the others
        shared = {n: Signal(name=f"shared_{n}") for n in (
            "qplllock", "qplloutclk", "qplloutrefclk", "txusrclk", "txusrclk2",
            "gttxreset", "gtrxreset", "txuserrdy", "areset_datapathclk", "reset_counter_done")}
        block_lock0 = Signal()
        bad_frame = Signal()

        n_cages = p["ports"] + 1
        for cage in range(n_cages):
            sfp = _request_sfp(platform, cage)
            if hasattr(sfp, "tx_dis"):
                m.d.comb += sfp.tx_dis.o.eq(0)
            rx = {k: Signal(w, name=f"sfp{cage}_rx_{k}") for k, w in
                  (("tdata", 64), ("tkeep", 8), ("tlast", 1), ("tuser", 1), ("tvalid", 1))}
            tx = {k: Signal(w, name=f"sfp{cage}_tx_{k}") for k, w in
                  (("tdata", 64), ("tkeep", 8), ("tlast", 1), ("tuser", 1), ("tvalid", 1), ("tready", 1))}
            status = Signal(8, name=f"sfp{cage}_pcspma_status")
            ports = dict(
                i_reset=ResetSignal("sync") if cage else Const(0),
                i_tx_axis_aresetn=~ResetSignal("sync"), i_rx_axis_aresetn=~ResetSignal("sync"),
                i_s_axis_tx_tdata=tx["tdata"], i_s_axis_tx_tkeep=tx["tkeep"],
                i_s_axis_tx_tlast=tx["tlast"], i_s_axis_tx_tuser=tx["tuser"],
                i_s_axis_tx_tvalid=tx["tvalid"], o_s_axis_tx_tready=tx["tready"],
                i_s_axis_pause_tdata=Const(0, 16), i_s_axis_pause_tvalid=0,
                o_m_axis_rx_tdata=rx["tdata"], o_m_axis_rx_tkeep=rx["tkeep"],
                o_m_axis_rx_tlast=rx["tlast"], o_m_axis_rx_tuser=rx["tuser"],
                o_m_axis_rx_tvalid=rx["tvalid"],
                i_tx_ifg_delay=Const(0, 8), o_pcspma_status=status,
                # MAC configuration vectors (PG157): TX/RX enable, FCS handled by the MAC,
                # jumbo frames allowed (bit 3), MTU check off.
                i_mac_tx_configuration_vector=Const(0b1010, 80),
                i_mac_rx_configuration_vector=Const(0b1010, 80),
                i_pcs_pma_configuration_vector=Const(0, 536),
                i_sim_speedup_control=0,
                i_signal_detect=~sfp.loss.i, i_tx_fault=0,
                o_txp=sfp.tx.p, o_txn=sfp.tx.n, i_rxp=sfp.rx.p, i_rxn=sfp.rx.n,
            )
            if cage == 0:
                ports.update(
                    i_refclk_p=refclk.p, i_refclk_n=refclk.n, i_dclk=coreclk,
                    o_coreclk_out=coreclk, o_resetdone_out=resetdone,
                    o_qplllock_out=shared["qplllock"], o_qplloutclk_out=shared["qplloutclk"],
                    o_qplloutrefclk_out=shared["qplloutrefclk"],
                    o_txusrclk_out=shared["txusrclk"], o_txusrclk2_out=shared["txusrclk2"],
                    o_gttxreset_out=shared["gttxreset"], o_gtrxreset_out=shared["gtrxreset"],
                    o_txuserrdy_out=shared["txuserrdy"],
                    o_areset_datapathclk_out=shared["areset_datapathclk"],
                    o_reset_counter_done_out=shared["reset_counter_done"],
                )
                module = IP_MODULES[0]
                m.d.comb += block_lock0.eq(status[0])
            else:
                ports.update(
                    i_coreclk=coreclk, i_dclk=coreclk,
                    i_qplllock=shared["qplllock"], i_qplloutclk=shared["qplloutclk"],
                    i_qplloutrefclk=shared["qplloutrefclk"],
                    i_txusrclk=shared["txusrclk"], i_txusrclk2=shared["txusrclk2"],
                    i_gttxreset=shared["gttxreset"], i_gtrxreset=shared["gtrxreset"],
                    i_txuserrdy=shared["txuserrdy"], i_areset_coreclk=ResetSignal("sync"),
                    i_areset=shared["areset_datapathclk"],
                    i_reset_counter_done=shared["reset_counter_done"],
                )
                module = IP_MODULES[1]
            m.submodules[f"eth10g_{cage}"] = Instance(module, **ports)

            host = cage == p["ports"]
            sink = core.s_axis_host if host else getattr(core, net_port(cage))
            m.d.comb += [
                sink.tdata.eq(rx["tdata"]), sink.tkeep.eq(rx["tkeep"]), sink.tlast.eq(rx["tlast"]),
                sink.tuser.eq(rx["tuser"]), sink.tvalid.eq(rx["tvalid"]),
            ]
            with m.If(rx["tvalid"] & rx["tlast"] & rx["tuser"]):
                m.d.sync += bad_frame.eq(1)
            if host:
                src = core.m_axis_host
                m.d.comb += [
                    tx["tdata"].eq(src.tdata), tx["tkeep"].eq(src.tkeep), tx["tlast"].eq(src.tlast),
                    tx["tuser"].eq(0), tx["tvalid"].eq(src.tvalid), src.tready.eq(tx["tready"]),
                ]
            else:
                m.d.comb += tx["tvalid"].eq(0)

        leds = [platform.request("led", i) for i in range(4)]
        beat = Signal(28)
        m.d.sync += beat.eq(beat + 1)
        sent = Signal(23)
        with m.If(core.m_axis_host.tvalid & core.m_axis_host.tready & core.m_axis_host.tlast):
            m.d.sync += sent.eq(-1)
        with m.Elif(sent != 0):
            m.d.sync += sent.eq(sent - 1)
        m.d.comb += [
            leds[0].o.eq(beat[-1]), leds[1].o.eq(block_lock0),
            leds[2].o.eq(sent != 0), leds[3].o.eq(bad_frame),
        ]
        return m
