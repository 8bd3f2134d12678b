"""Versa ECP5 DRAM slot-store design: the core's DRAM path with a stand-in for the core.

``wanreduce build --board versa-ecp5 --dram-store-test`` builds this until the core has its
``m_axi_mem`` port: the external slot store (:class:`~wanreduce.hdl.dram_slot_store.DramSlotStore`,
W = 64, the core's bus width on this board) driven by a
:class:`~wanreduce.hdl.boards.slot_store_exerciser.SlotStoreExerciser` in the core clock, its
``m_axi_mem`` through :func:`~wanreduce.hdl.boards.dram_controller.attach_memory` (the 64 -> 128
bit :class:`~wanreduce.hdl.axi_upsizer.AxiUpsizer`) onto the LiteDRAM controller's AXI port
(its async FIFOs cross to the controller clock). This is exactly the path ``--slot-memory dram``
builds, with the core's port in place of the store's: place and route prove its clocks.

LEDs: 0 heartbeat (core clock), 1 core PLL locked, 2 DRAM PLL locked, 3 DRAM initialised,
4 exerciser error (sticky), 5 toggles per completed pass, 6 the store's ``mem_error`` (an AXI
error response), 7 the converter's ``error`` (a burst it does not support).
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring

from wanreduce.hdl.boards.dram_controller import DramController, attach_memory
from wanreduce.hdl.boards.litedram_controller import DRAM_CONFIGS
from wanreduce.hdl.boards.slot_store_exerciser import SlotStoreExerciser
from wanreduce.hdl.boards.versa_dram_selftest import VersaDramBringup
from wanreduce.hdl.boards.versa_ecp5 import MAC_WIDTH
from wanreduce.hdl.dram_slot_store import DramSlotStore

__all__ = ["STORE_PARAMS", "VersaDramStoreTest"]

# The store as the core would hold it on this board: W = 64, slots of 256 rows (2 KiB: E <= 512),
# the board's table and bursts (DRAM_CONFIGS: 128 entries, 512 B = 64 beats); 64 slots (128 KiB)
# are enough to keep the DRAM busy.
STORE_PARAMS = {"slots": 64, "row_bits": 8, "outstanding": DRAM_CONFIGS["versa-ecp5"].outstanding,
                "burst_beats": DRAM_CONFIGS["versa-ecp5"].burst_beats(MAC_WIDTH)}


class VersaDramStoreTest(VersaDramBringup):
    """DramSlotStore + exerciser on the Versa's DDR3 through the upsizer."""

    def traffic(self, m: Module, dram: DramController, leds: list) -> None:
        m.submodules.store = store = DramSlotStore(MAC_WIDTH, address_width=dram.cfg.addr_width,
                                                   **STORE_PARAMS)
        m.submodules.exerciser = ex = SlotStoreExerciser(MAC_WIDTH, store.address_bits)
        wiring.connect(m, ex.cmd, store.cmd)
        wiring.connect(m, store.rsp, ex.rsp)
        up = attach_memory(m, store, dram)
        m.d.comb += [leds[4].o.eq(ex.error), leds[5].o.eq(ex.passes[0]),
                     leds[6].o.eq(store.mem_error), leds[7].o.eq(up.error)]
