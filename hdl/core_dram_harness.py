"""``wanreduce_core`` with its slots in DRAM, as the benches simulate it: the core built with
``slot_memory="dram"`` inside an :class:`~wanreduce.hdl.axi_latency.AxiLatencyHarness` (delay
lines on ``m_axi_mem``'s R and B, run-time ``latency`` input), so ``sim/tb_core.py`` runs every
core scenario against an ``AxiRam`` that answers 20..200 cycles late. Ports: the core's plus
``latency``."""

from __future__ import annotations

from .axi_latency import AxiLatencyHarness
from .core import WanreduceCore

__all__ = ["CoreDramHarness"]


class CoreDramHarness(AxiLatencyHarness):
    """The core (``**params``: core and DRAM store parameters) with its memory ``latency`` cycles
    away; ``slot_memory``: ``"dram"`` (the sums) or ``"records"`` (the sums and the records)."""

    def __init__(self, *, delay_depth: int = 512, slot_memory: str = "dram", **params: int) -> None:
        if slot_memory not in ("dram", "records"):
            raise ValueError(f"slot_memory must be dram or records (a memory port), got {slot_memory!r}")
        self.core = WanreduceCore(slot_memory=slot_memory, **params)
        super().__init__(self.core, delay_depth=delay_depth)
