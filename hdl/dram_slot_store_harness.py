"""``DramSlotStore`` as the benches simulate it: with a memory latency on its AXI port.

The store inside an :class:`~wanreduce.hdl.axi_latency.AxiLatencyHarness`: its ``m_axi_mem``
read-data (R) and write-response (B) channels each pass through a delay line, so a memory model
that answers at once (cocotbext-axi's ``AxiRam``) answers ``latency`` cycles (a run-time input)
after it took the request. The ports are the store's (``cmd``, ``rsp``, ``m_axi_mem_*`` facing
the memory, ``mem_error``) plus ``latency``.
"""

from __future__ import annotations

from .axi_latency import LATENCY_BITS, AxiLatencyHarness
from .dram_slot_store import DramSlotStore

__all__ = ["LATENCY_BITS", "DramSlotStoreHarness"]


class DramSlotStoreHarness(AxiLatencyHarness):
    """The store (``**store``: its parameters) plus delay lines of ``delay_depth`` beats on R and B."""

    def __init__(self, data_width: int, *, delay_depth: int = 512, **store: int) -> None:
        self.store = DramSlotStore(data_width, **store)
        super().__init__(self.store, delay_depth=delay_depth)
