"""The two read-modify-write engines of the large-S design on one memory port, as a bench
simulates them (docs/large_slots.md, "The record store"): the slot store (``DramSlotStore``,
AXI ID 0) on the arbiter's ``s0_axi`` and a second engine (the scaffold record modify,
``hdl/record_modify_scaffold.py``, 256-bit rows, AXI ID 1) on ``s1_axi``, through
:class:`~wanreduce.hdl.axi_id_arbiter.AxiIdArbiter` onto ``m_axi_mem``, inside an
:class:`~wanreduce.hdl.axi_latency.AxiLatencyHarness` (delay lines on R and B, ``latency``).

Ports: ``cmd`` / ``rsp`` and ``mem_error`` (the sums), ``rec_cmd`` / ``rec_rsp`` and
``rec_mem_error`` (the records), the arbiter's ``error`` and ``dropped``, ``m_axi_mem_*``,
``latency``. Not the core's wiring (which is to come): a bench of the engines sharing a port.
"""

from __future__ import annotations

from collections.abc import Sequence

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from .axi4 import axi4_master_members
from .axi_id_arbiter import DROPPED_BITS, AxiIdArbiter, slave_prefix
from .axi_latency import AxiLatencyHarness
from .dram_rmw_engine import AXI_PREFIX, DramRmwEngine
from .dram_slot_store import DramSlotStore
from .record_modify_scaffold import ScaffoldRecordModify

__all__ = ["EnginesOnArbiter", "engines_with_latency", "share_port"]


class EnginesOnArbiter(wiring.Component):
    """Sums (ID 0, ``sums``: the store's parameters) and records (ID 1, ``records``: the
    engine's) through one ``AxiIdArbiter``; see the module docstring."""

    def __init__(self, data_width: int, *, address_width: int, sums: dict, records: dict) -> None:
        self.sums = DramSlotStore(data_width, address_width=address_width, **sums)
        self.records = DramRmwEngine(data_width, address_width=address_width, axi_id=1,
                                     modify=ScaffoldRecordModify, **records)
        self.arbiter = AxiIdArbiter([0, 1], addr_width=address_width, data_width=data_width)
        members = {
            **{f"{pre}{name}": e.signature.members[name]
               for pre, e in (("", self.sums), ("rec_", self.records)) for name in ("cmd", "rsp", "mem_error")},
            **axi4_master_members(AXI_PREFIX, addr_width=address_width, data_width=data_width),
            "error": Out(1), "dropped": Out(DROPPED_BITS),
        }
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.sums, m.submodules.records = self.sums, self.records
        m.submodules.arbiter = arb = self.arbiter
        for pre, e in (("", self.sums), ("rec_", self.records)):
            wiring.connect(m, wiring.flipped(getattr(self, pre + "cmd")), e.cmd)
            wiring.connect(m, e.rsp, wiring.flipped(getattr(self, pre + "rsp")))
            m.d.comb += getattr(self, pre + "mem_error").eq(e.mem_error)
        share_port(m, arb, (self.sums, self.records), self)
        m.d.comb += [self.error.eq(arb.error), self.dropped.eq(arb.dropped)]
        return m


def share_port(m: Module, arbiter: AxiIdArbiter, managers: Sequence[wiring.Component],
               outer: wiring.Component) -> None:
    """Manager ``k``'s ``m_axi_mem_*`` onto ``arbiter``'s ``s<k>_axi_*`` (so its requests carry
    ID ``arbiter.ids[k]``) and the arbiter's ``m_axi_mem_*`` onto ``outer``'s: the one wiring of
    engines sharing a memory port (the owner reports the arbiter's ``error`` / ``dropped``)."""
    for k, e in enumerate(managers):
        for name, member in e.signature.members.items():
            if not name.startswith(AXI_PREFIX + "_"):
                continue
            theirs = getattr(arbiter, f"{slave_prefix(k)}_{name[len(AXI_PREFIX) + 1:]}")
            ours = getattr(e, name)
            m.d.comb += theirs.eq(ours) if member.flow == Out else ours.eq(theirs)
    for name, member in arbiter.signature.members.items():
        if name.startswith(AXI_PREFIX + "_"):
            ours, theirs = getattr(outer, name), getattr(arbiter, name)
            m.d.comb += ours.eq(theirs) if member.flow == Out else theirs.eq(ours)


def engines_with_latency(*, delay_depth: int = 256, **params) -> AxiLatencyHarness:
    """:class:`EnginesOnArbiter` (``**params``) with delay lines on ``m_axi_mem``'s R and B."""
    return AxiLatencyHarness(EnginesOnArbiter(**params), delay_depth=delay_depth)
