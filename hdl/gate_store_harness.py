"""The payload gate driving the DRAM slot store, as a bench simulates it (issue 16, large S step 4;
docs/large_slots.md, "Payload wait"): :class:`~.payload_gate.PayloadGate`'s commands go into the
store's command port through :class:`~.command_arbiter.CommandArbiter`, as the reducer feeds its
store (its FIFO and push-credit: ``push`` only while ``level < depth``; the emitter side idle), and
the store's ``m_axi_mem_*`` faces the memory, inside an
:class:`~.axi_latency.AxiLatencyHarness` (delay lines on R and B, run-time ``latency``).

Ports: the gate's ``beats``, ``req``, ``decision`` (in), ``error`` and counters; the store's
``rsp``, ``mem_error`` and ``m_axi_mem_*``; the arbiter's ``copy_error``; ``latency``.
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from .axi4 import axi4_forward
from .axi_latency import AxiLatencyHarness
from .command_arbiter import CommandArbiter
from .dram_rmw_engine import AXI_PREFIX
from .dram_slot_store import DramSlotStore
from .payload_gate import PayloadGate

__all__ = ["GateOnSlotStore", "gate_store_with_latency"]

GATE_PORTS = ("beats", "req", "decision", "error", "written", "added", "discarded", "mismatches", "orphans")


class GateOnSlotStore(wiring.Component):
    """``PayloadGate`` (``depth``, ``max_elements``, ``messages``) -> ``CommandArbiter`` ->
    ``DramSlotStore`` (``**store``: its parameters); see the module docstring."""

    def __init__(self, data_width: int, *, depth: int, max_elements: int | None = None, messages: int = 32,
                 **store: int) -> None:
        self.store = DramSlotStore(data_width, **store)
        self.gate = PayloadGate(data_width, depth, address_bits=self.store.address_bits,
                                max_elements=max_elements, messages=messages)
        self.arbiter = CommandArbiter(data_width, self.store.address_bits)
        members = {
            **{n: self.gate.signature.members[n] for n in GATE_PORTS},
            **{n: mb for n, mb in self.store.signature.members.items() if n != "cmd"},
            "copy_error": Out(1),
        }
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.gate, m.submodules.arbiter, m.submodules.store = gate, arb, store = \
            self.gate, self.arbiter, self.store
        for name in ("beats", "req", "decision"):
            wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(gate, name))
        for name in GATE_PORTS[3:]:
            m.d.comb += getattr(self, name).eq(getattr(gate, name))
        ready = arb.level < arb.depth  # the arbiter's FIFO is unguarded: push only with room
        m.d.comb += [
            gate.cmd.ready.eq(ready),
            arb.push.eq(gate.cmd.valid & ready), arb.push_cmd.eq(gate.cmd.payload),
            arb.e_idle.eq(1),  # no emitter: no markers, the port stays with the FIFO
            self.copy_error.eq(arb.copy_error), self.mem_error.eq(store.mem_error),
        ]
        wiring.connect(m, arb.cmd, store.cmd)
        wiring.connect(m, store.rsp, wiring.flipped(self.rsp))
        axi4_forward(m, store, self, AXI_PREFIX)
        return m


def gate_store_with_latency(*, delay_depth: int = 512, **params) -> AxiLatencyHarness:
    """:class:`GateOnSlotStore` (``**params``) with delay lines on ``m_axi_mem``'s R and B."""
    return AxiLatencyHarness(GateOnSlotStore(**params), delay_depth=delay_depth)
