"""Versa ECP5 DRAM bring-up top: the LiteDRAM controller and an AXI self-test, no core.

``wanreduce build --board versa-ecp5 --dram-selftest`` builds this: the DDR3 controller of
:class:`~wanreduce.hdl.boards.dram_controller.DramController` with its AXI port in the core
clock (``--core-mhz``, PLL from the 100 MHz oscillator as for the core), driven by
:class:`~wanreduce.hdl.boards.axi_memtest.AXIMemTest` (writes 256 bursts of 16 beats, reads
them back, forever). It places the controller through the open flow alone (its Fmax and
utilisation: docs/benchmarks.md) and, on a board, shows whether the DRAM works.

LEDs: 0 heartbeat (core clock), 1 core PLL locked, 2 DRAM PLL locked, 3 DRAM initialised,
4 self-test error (sticky), 5 a self-test pass completed (toggles per pass), 6-7 off.
"""

from __future__ import annotations

from amaranth.hdl import Elaboratable, Module, Signal
from amaranth.lib.cdc import FFSynchronizer

from wanreduce.hdl.boards.axi_memtest import AXI_FIELDS, AXIMemTest
from wanreduce.hdl.boards.dram_controller import DramController
from wanreduce.hdl.boards.litedram_controller import AXI_ID_WIDTH
from wanreduce.hdl.boards.versa_ecp5 import check_core_mhz, core_clock

__all__ = ["VersaDramBringup", "VersaDramSelfTest", "dram_bringup"]


class VersaDramBringup(Elaboratable):
    """A Versa DRAM bring-up top: :func:`dram_bringup`, then the subclass's :meth:`traffic` on
    the controller's AXI port (LEDs 4-7 are the subclass's); AXI port at ``core_mhz``."""

    def __init__(self, *, core_mhz: float = 125.0) -> None:
        check_core_mhz(core_mhz)
        self.core_mhz = float(core_mhz)

    def elaborate(self, platform) -> Module:
        m = Module()
        dram, leds = dram_bringup(m, platform, self.core_mhz)
        self.traffic(m, dram, leds)
        return m

    def traffic(self, m: Module, dram: DramController, leds: list) -> None:
        raise NotImplementedError


class VersaDramSelfTest(VersaDramBringup):
    """DRAM controller + AXI self-test on the Versa ECP5."""

    def traffic(self, m: Module, dram: DramController, leds: list) -> None:
        cfg = dram.cfg
        m.submodules.test = test = AXIMemTest(cfg.data_width, cfg.addr_width, AXI_ID_WIDTH)
        for field, _w, direction in AXI_FIELDS:
            src, dst = (test.axi, dram.axi) if direction == "o" else (dram.axi, test.axi)
            m.d.comb += dst[field].eq(src[field])
        m.d.comb += [leds[4].o.eq(test.error), leds[5].o.eq(test.passes[0])]


def dram_bringup(m: Module, platform, core_mhz: float) -> tuple[DramController, list]:
    """What every Versa DRAM bring-up design has: the core clock (domain ``sync``), the DDR3
    controller with its AXI port in it, and LEDs 0-3 (heartbeat, core PLL locked, DRAM PLL
    locked, DRAM initialised); returns the controller and the eight LEDs."""
    clk100, button, locked = core_clock(m, platform, core_mhz)
    m.submodules.dram = dram = DramController(
        "versa-ecp5", platform.request("ddr3", 0, dir="-"), clk100, button, platform=platform)
    status = {}
    for name in ("pll_locked", "init_done"):
        status[name] = Signal(name=f"dram_{name}_sync")
        m.submodules[f"sync_{name}"] = FFSynchronizer(getattr(dram, name), status[name])
    leds = [platform.request("led", i) for i in range(8)]
    beat = Signal(27)
    m.d.sync += beat.eq(beat + 1)
    m.d.comb += [leds[0].o.eq(beat[-1]), leds[1].o.eq(locked),
                 leds[2].o.eq(status["pll_locked"]), leds[3].o.eq(status["init_done"])]
    return dram, leds
