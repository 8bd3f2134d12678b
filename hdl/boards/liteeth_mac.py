"""LiteEth RGMII PHY + MAC core as one standalone Verilog module (Migen/LiteX script).

LiteEth (``liteeth`` 2024.12) is a maintained Migen/LiteX Ethernet core. Its ``liteeth_gen`` flow
only exposes a Wishbone/AXI-Lite MAC with SRAM slots or UDP streamers, neither a frame stream,
so this script builds the pieces directly:

* ``liteeth.phy.ecp5rgmii.LiteEthPHYRGMII`` — RGMII with ECP5 ``IDDRX1F``/``ODDRX1F`` and
  ``DELAYG`` (2 ns RX/TX clock-to-data skew in the FPGA, so the PHY needs no MDIO set-up);
  ``eth_rx`` is clocked by the PHY's RX clock, ``eth_tx`` by the same clock (LiteEth's default
  for this PHY: the TX clock is forwarded from RX).
* ``liteeth.mac.core.LiteEthMACCore(phy, dw)`` — preamble, CRC-32 insertion/checking, padding,
  inter-frame gap, 8 -> ``dw`` width conversion, and the **clock-domain-crossing FIFOs**
  (``stream.ClockDomainCrossing``, gray-coded async FIFOs, depth 32, buffered: one register
  stage after each) between ``eth_rx``/``eth_tx`` and ``sys`` (the core clock). One extra
  ``stream.Buffer`` (registered valid and ready) cuts the 125 MHz transmit chain; with
  ``rx_cut`` (the DRAM builds') another cuts the receive chain before its FIFO.
  ``tx_cdc_depth=16`` (the DRAM builds') makes the transmit FIFO one ``TRELLIS_DPR16X4`` per 4
  bits with no read multiplexer: its read side (gray counter -> next read address -> LUT RAM ->
  2:1 multiplexer -> data register, in the 125 MHz ``eth_tx`` clock) is the host MAC's worst
  path on the fuller DRAM chip. ``rx_cdc_depth=16`` (the DRAM builds' too, since session 44)
  does the same for the receive FIFO, whose read side runs in the core clock: it was the core
  clock's worst path at three of five placements once the core's own paths were cut. 16
  entries (128 bytes) bridge a ~1 us stall of the core's ingress parser, which stalls only when
  its own packet FIFO is full (docs/boards.md, "Why 16 entries would be enough on receive").

Module ``<name>`` ports (all in ``sys`` unless stated), ``dw`` = 64 by default:

===================================  =====  ==============================================
``sys_clk``, ``sys_rst``             in     core clock and synchronous reset
``rgmii_clk_rx``                     in     RGMII RX clock from the PHY (125 MHz at 1 Gb/s)
``rgmii_clk_tx``                     out    RGMII TX clock to the PHY
``rgmii_rx_ctl``, ``rgmii_rx_data``  in     RGMII RX (4 bits DDR)
``rgmii_tx_ctl``, ``rgmii_tx_data``  out    RGMII TX (4 bits DDR)
``rgmii_rst_n``                      out    PHY reset (held ~10 ms after configuration)
``source_valid/ready/last/data``     out    received frames, byte 0 in ``data[7:0]``
``source_last_be``                   out    one-hot: last valid byte of the last beat
``source_error``                     out    per-byte error (CRC/preamble) on the last beat
``sink_*``                           in     frames to send, same layout (``error`` ignored)
``link_up``                          out    RGMII in-band status: link up (``eth_rx`` domain)
===================================  =====  ==============================================

Run as a script (``python -m wanreduce.hdl.boards.liteeth_mac OUT_DIR``) or call
:func:`generate`. Migen/LiteX are imported only here.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["CDC_DEPTHS", "MAC_NAME", "generate"]

MAC_NAME = "liteeth_rgmii_mac"


#: the clock-crossing FIFO depths offered (LiteEth's 32, or 16: one LUT RAM per 4 bits)
CDC_DEPTHS = (16, 32)


def _build(dw: int, tx_cdc_depth: int, rx_cdc_depth: int, rx_cut: bool):
    from liteeth.common import eth_phy_description
    from liteeth.mac.core import LiteEthMACCore
    from liteeth.phy.ecp5rgmii import LiteEthPHYRGMII
    from litex.build.generic_platform import Pins, Subsignal
    from litex.build.lattice import LatticeECP5Platform
    from litex.soc.interconnect import stream
    from migen import ClockDomain, ClockDomainsRenamer, Module, Record, Signal

    io = [
        ("rgmii_clk", 0, Subsignal("rx", Pins(1)), Subsignal("tx", Pins(1))),
        ("rgmii", 0,
         Subsignal("rst_n", Pins(1)),
         Subsignal("rx_ctl", Pins(1)), Subsignal("rx_data", Pins(4)),
         Subsignal("tx_ctl", Pins(1)), Subsignal("tx_data", Pins(4))),
        ("sys_clk", 0, Pins(1)),
        ("sys_rst", 0, Pins(1)),
    ]
    platform = LatticeECP5Platform("LFE5UM-45F-8BG381C", io, toolchain="trellis")

    class Top(Module):
        def __init__(self) -> None:
            self.clock_domains.cd_sys = ClockDomain()
            self.comb += [
                self.cd_sys.clk.eq(platform.request("sys_clk")),
                self.cd_sys.rst.eq(platform.request("sys_rst")),
            ]
            self.submodules.phy = phy = LiteEthPHYRGMII(
                platform.request("rgmii_clk"), platform.request("rgmii"),
                with_hw_init_reset=True, tx_delay=2e-9, rx_delay=2e-9,
            )
            # Buffered CDCs, and one more register stage (valid and ready) in the 125 MHz TX path
            # after the 64 -> 8 converter: without it the combinational ready chain (gap ->
            # preamble -> CRC -> padding -> last_be -> converter -> CDC read) missed 125 MHz on
            # the ECP5 (118-120 MHz). (with_sys_datapath=True would move CRC to 64 bits in the
            # core clock instead, but LiteEth's 64-bit CRC is ~1 MB of Verilog and slow to synthesise.)
            self.submodules.mac = mac = LiteEthMACCore(
                phy, dw, with_preamble_crc=True, with_padding=True,
                tx_cdc_buffered=True, rx_cdc_buffered=True, tx_cdc_depth=tx_cdc_depth,
                rx_cdc_depth=rx_cdc_depth)
            tx = mac.tx_datapath.pipeline  # [sink, cdc, converter, last_be, padding, crc, ...]
            assert len(tx) == 9, [type(x).__name__ for x in tx]
            cut = ClockDomainsRenamer("eth_tx")(
                stream.Buffer(eth_phy_description(8), pipe_valid=True, pipe_ready=True))
            self.submodules.tx_cut = cut
            tx.insert(4, cut)
            if rx_cut:
                # The same cut in the 125 MHz receive path, between the 8 -> dw converter and
                # the clock-crossing FIFO's write side: the FIFO's writable (a gray-counter
                # compare) reached the converter's strobe and, through the ready chain, the CRC
                # checker's input buffer (8.20 ns at one DRAM-build placement). A full-rate
                # skid (pipe_ready): it only adds one beat of buffering and a cycle of latency.
                rx = mac.rx_datapath.pipeline  # [phy, preamble, crc, padding, last_be, converter, cdc, source]
                assert len(rx) == 8, [type(x).__name__ for x in rx]
                self.submodules.rx_cut = rx_cut_buf = ClockDomainsRenamer("eth_rx")(
                    stream.Buffer(eth_phy_description(dw), pipe_valid=True, pipe_ready=True))
                rx.insert(6, rx_cut_buf)
            self.ios = set()
            for direction, ep in (("source", mac.source), ("sink", mac.sink)):
                for field in ("valid", "ready", "last", "data", "last_be", "error"):
                    sig = getattr(ep, field)
                    port = Signal(len(sig), name=f"{direction}_{field}")
                    outward = (direction == "source") != (field == "ready")
                    self.comb += port.eq(sig) if outward else sig.eq(port)
                    self.ios.add(port)
            self.link_up = Signal(name="link_up")
            self.comb += self.link_up.eq(phy.rx.inband_status.fields.link_status)
            self.ios.add(self.link_up)

    top = Top()
    return platform, top, Record


def generate(out_dir: Path, *, dw: int = 64, name: str = MAC_NAME,
             tx_cdc_depth: int = 32, rx_cdc_depth: int = 32, rx_cut: bool = False) -> Path:
    """Write ``<out_dir>/<name>.v`` (the PHY + MAC, ``dw``-bit streams); return its path.

    ``tx_cdc_depth`` / ``rx_cdc_depth``: entries of the transmit / receive clock-crossing FIFO
    (32, LiteEth's default, or 16). ``rx_cut``: a registered valid / ready stage in the receive
    path before the clock-crossing FIFO (the DRAM builds'), like the transmit path's."""
    if dw not in (8, 16, 32, 64):
        raise ValueError(f"LiteEth MAC data width must be 8/16/32/64, got {dw}")
    for field, depth in (("tx_cdc_depth", tx_cdc_depth), ("rx_cdc_depth", rx_cdc_depth)):
        if depth not in CDC_DEPTHS:
            raise ValueError(f"{field} must be one of {CDC_DEPTHS}, got {depth}")
    platform, top, _ = _build(dw, tx_cdc_depth, rx_cdc_depth, rx_cut)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ios = top.ios | set(platform.constraint_manager.get_io_signals())
    converted = platform.get_verilog(top, name=name, ios=ios)
    path = out_dir / f"{name}.v"
    converted.write(str(path))
    return path


if __name__ == "__main__":
    print(generate(Path(sys.argv[1] if len(sys.argv) > 1 else ".")))
