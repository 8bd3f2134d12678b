"""The payload gate driving the DRAM slot store, as a bench simulates it (issue 16, large S step 4;
docs/large_slots.md, "Payload wait"): :class:`~.payload_gate.PayloadGate`'s commands go into the
store's command port through :class:`~.command_arbiter.CommandArbiter`, as the reducer feeds its
store (its FIFO and push-credit: ``push`` only while ``level < depth``; the emitter side idle), and
the store's ``m_axi_mem_*`` faces the memory, inside an
:class:`~.axi_latency.AxiLatencyHarness` (delay lines on R and B, run-time ``latency``).

Ports: the gate's ``beats``, ``req``, ``decision`` (in), ``error`` and counters; the store's
``rsp``, ``mem_error`` and ``m_axi_mem_*``; the arbiter's ``copy_error``; ``latency``.

``emitter=True`` (default False: the ports and RTL as before) adds an emitter beside the gate, as
the reducer has one: ``e_mark`` (push a marker into the arbiter's FIFO now; the gate's command
waits that cycle; only while ``e_room``: room, and not inside a message's commands: the AND of
two flip-flops, the arbiter's ``room`` and ``mid``), and when
the marker reaches the FIFO's head the port is the emitter's (``e_valid`` / ``e_cmd`` READs
while ``e_go``, ``e_final`` with its last) until that last READ; ``lasts`` counts the messages
whose last WRITE / ADD command the gate has pushed (16 bits, wrapping; an emitting message's
READs are not counted). The store's responses go through
:class:`~.store_read_split.StoreReadSplit`: WRITE / ADD ones on ``rsp`` as before, READ ones on
``e_rsp`` with the slot's sticky overflow flag (``split_error``), those tagged ``EMIT_TAG`` on
``e_own`` (the completer's own rows).
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .axi4 import axi4_forward
from .axi_latency import AxiLatencyHarness
from .command_arbiter import CommandArbiter
from .dram_rmw_engine import AXI_PREFIX, unanswered_max
from .dram_slot_store import DramSlotStore
from .payload_gate import PayloadGate
from .slot_store_signature import Op
from .store_read_split import StoreReadSplit

__all__ = ["EMITTER_PORTS", "GateOnSlotStore", "gate_store_with_latency"]

# the emitter's ports (``emitter=True``): an owner's, wired inside it, not a harness's outer ports
EMITTER_PORTS = ("e_mark", "e_room", "e_valid", "e_cmd", "e_go", "e_final", "lasts", "e_rsp", "e_own")
GATE_PORTS = ("beats", "req", "decision", "error", "written", "added", "discarded", "mismatches", "orphans")


class GateOnSlotStore(wiring.Component):
    """``PayloadGate`` (``depth``, ``max_elements``, ``messages``) -> ``CommandArbiter`` ->
    ``DramSlotStore`` (``**store``: its parameters); see the module docstring."""

    def __init__(self, data_width: int, *, depth: int, max_elements: int | None = None, messages: int = 32,
                 emitter: bool = False, **store: int) -> None:
        self.store = DramSlotStore(data_width, **store)
        self.gate = PayloadGate(data_width, depth, address_bits=self.store.address_bits,
                                max_elements=max_elements, messages=messages)
        # with the emitter, the arbiter's room from a flip-flop (the marker's ``e_room`` and the
        # gate's command ready: docs/large_slots.md, "(session 36, round 5)")
        self.arbiter = CommandArbiter(data_width, self.store.address_bits, registered_room=emitter)
        members = {
            **{n: self.gate.signature.members[n] for n in GATE_PORTS},
            **{n: mb for n, mb in self.store.signature.members.items() if n != "cmd"},
            "copy_error": Out(1),
        }
        self.split = None
        if emitter:
            missing = sorted({"slots", "row_bits"} - set(store))
            if missing:
                raise ValueError(f"emitter=True needs the store's {missing} given by name")
            # its queue holds every command the store may hold unanswered: its room never throttles the store
            self.split = StoreReadSplit(data_width, slots=store["slots"], row_bits=store["row_bits"],
                                        depth=unanswered_max(self.store.outstanding))
            members.update({"e_mark": In(1), "e_room": Out(1), "e_valid": In(1), "e_cmd": In(self.arbiter.cmd_layout),
                            "e_go": Out(1), "e_final": In(1), "lasts": Out(16),
                            "e_rsp": self.split.signature.members["reads"], "e_own": self.split.signature.members["own"],
                            "split_error": Out(1)})
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.gate, m.submodules.arbiter, m.submodules.store = gate, arb, store = \
            self.gate, self.arbiter, self.store
        for name in ("beats", "req", "decision"):
            wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(gate, name))
        for name in GATE_PORTS[3:]:
            m.d.comb += getattr(self, name).eq(getattr(gate, name))
        # the arbiter's FIFO is unguarded: push only with room (with the emitter its flip-flop)
        ready = arb.room if arb.registered_room else arb.level < arb.depth
        m.d.comb += [
            gate.cmd.ready.eq(ready),
            arb.push.eq(gate.cmd.valid & ready), arb.push_cmd.eq(gate.cmd.payload),
            self.copy_error.eq(arb.copy_error), self.mem_error.eq(store.mem_error),
        ]
        axi4_forward(m, store, self, AXI_PREFIX)
        if self.split is None:
            m.d.comb += arb.e_idle.eq(1)  # no emitter: no markers, the port stays with the FIFO
            wiring.connect(m, arb.cmd, store.cmd)
            wiring.connect(m, store.rsp, wiring.flipped(self.rsp))
            return m
        # the emitter's marker goes into the FIFO between two messages' commands (``mid``: the
        # gate's last command had ``more``); its READs take the port from the marker to its last
        mid = Signal()
        with m.If(gate.cmd.valid & gate.cmd.ready):
            m.d.sync += mid.eq(gate.cmd.payload.more)
            with m.If(~gate.cmd.payload.more & (gate.cmd.payload.op != Op.READ)):  # (not an emitting
                m.d.sync += self.lasts.eq(self.lasts + 1)  # message's READs: counted as written / added are)
        m.d.comb += [self.e_room.eq(ready & ~mid), gate.cmd.ready.eq(ready & ~self.e_mark),
                     arb.push.eq((gate.cmd.valid & ready & ~self.e_mark) | self.e_mark),
                     arb.push_marker.eq(self.e_mark),
                     arb.e_valid.eq(self.e_valid), arb.e_cmd.eq(self.e_cmd), self.e_go.eq(arb.e_go),
                     arb.e_final.eq(self.e_final), arb.e_popped.eq(0), arb.e_idle.eq(0)]  # back on e_final only
        # the store takes a command only while the split can queue it (its op and slot)
        m.submodules.split = sp = self.split
        sc = store.cmd
        m.d.comb += [sc.payload.eq(arb.cmd.payload), sc.valid.eq(arb.cmd.valid & sp.room),
                     arb.cmd.ready.eq(sc.ready & sp.room), sp.cmd_fire.eq(sc.valid & sc.ready),
                     sp.cmd_op.eq(sc.payload.op), sp.cmd_row.eq(sc.payload.row), self.split_error.eq(sp.error)]
        wiring.connect(m, store.rsp, sp.rsp)
        wiring.connect(m, sp.out, wiring.flipped(self.rsp))
        wiring.connect(m, sp.reads, wiring.flipped(self.e_rsp))
        wiring.connect(m, sp.own, wiring.flipped(self.e_own))
        return m


def gate_store_with_latency(*, delay_depth: int = 512, **params) -> AxiLatencyHarness:
    """:class:`GateOnSlotStore` (``**params``) with delay lines on ``m_axi_mem``'s R and B."""
    return AxiLatencyHarness(GateOnSlotStore(**params), delay_depth=delay_depth)
