"""The payload gate attached to the record engine, as a bench simulates it (issue 16, large S
step 4; docs/large_slots.md, "Payload wait"): the decisions come from record read-modify-writes
in DRAM, the sums go to the DRAM slot store, both engines on one memory port.

- A message's request (``req``, :func:`~.payload_gate.request_layout`), taken with its first
  beat, is also its **record command**: an ADD on record row ``req.row >> row_bits`` (the slot),
  data = the request's bits (the header's stand-in), tag = its tag. The request is forked: the
  gate takes it first, the record engine from a skid buffer of the requests the gate has taken
  (:func:`fork_request`).
- The record engine is :class:`~.dram_rmw_engine.DramRmwEngine` with the scaffold record modify
  (``hdl/record_modify_scaffold.py``: test scaffolding standing in for the decision), 256-bit
  records, AXI ID 1. Its responses come back in command order = message order, and each one is
  the gate's **decision** for its message: :func:`record_decision` of the record's count after
  the ADD (WRITE, ADD, ADD, DISCARD as the count is 0, 1, 2, 3 mod 4: per slot a WRITE and the
  ADDs onto it, then a discard).
- The gate's commands go into ``CommandArbiter`` -> ``DramSlotStore`` (AXI ID 0):
  :class:`~.gate_store_harness.GateOnSlotStore`, whole.
- Both engines share ``m_axi_mem`` through :class:`~.axi_id_arbiter.AxiIdArbiter`
  (:func:`~.engines_on_arbiter_harness.share_port`), inside an
  :class:`~.axi_latency.AxiLatencyHarness` (delay lines on R and B, run-time ``latency``).

Ports: ``beats``, ``req`` (in); the store's ``rsp``, ``mem_error``; the gate's ``error`` and
counters; the arbiter's ``copy_error``; ``rec_mem_error``; ``arb_error`` / ``arb_dropped`` (the
AXI ID arbiter's); ``m_axi_mem_*``; ``latency``. Not the core's wiring: a bench of the gate
waiting on DRAM-resident records.
"""

from __future__ import annotations

from collections.abc import Callable

from amaranth.hdl import Cat, Module, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from .axi4 import axi4_master_members
from .axi_id_arbiter import DROPPED_BITS, AxiIdArbiter
from .axi_latency import AxiLatencyHarness
from .dram_rmw_engine import AXI_PREFIX, DramRmwEngine
from .engines_on_arbiter_harness import share_port
from .forward_ports import forward_ports
from .gate_store_harness import EMITTER_PORTS, GateOnSlotStore
from .layouts import lanes
from .record_modify_scaffold import ScaffoldRecordModify
from .reducer_layouts import RECORD_BITS
from .skid_buffer import SkidBuffer
from .slot_store_signature import Op

__all__ = ["RECORD_WIDTH", "GateOnRecords", "decide_on_records", "fork_request", "gate_records_with_latency",
           "record_decision", "shared_members", "wire_shared"]

RECORD_WIDTH = RECORD_BITS  # the record store's row (docs/large_slots.md, "How a 256-bit record travels")


def record_decision(count: int | Value) -> int | Value:
    """The stand-in decision from the record's count after its ADD (its low two bits): 0 WRITE,
    1 and 2 ADD, 3 DISCARD (``Decision``'s values). A Value gives a 2-bit Value, an int an int
    (the bench's twin)."""
    if isinstance(count, int):
        c0, c1 = count & 1, count >> 1 & 1
        return (c0 | c1) | (c0 & c1) << 1
    c0, c1 = count[0], count[1]
    return Cat(c0 | c1, c0 & c1)


class GateOnRecords(wiring.Component):
    """``PayloadGate`` deciding on the scaffold record engine's responses; see the module docstring.

    Parameters: ``data_width`` W, ``address_width`` (AXI), ``depth`` / ``max_elements`` /
    ``messages`` (the gate's), ``sums`` (the ``DramSlotStore``'s parameters: ``slots``,
    ``row_bits``, ``base_address``, ``outstanding``, ...), ``records`` (the record engine's but its
    rows: one 256-bit record per slot; ``base_address``, ``outstanding``, ...).
    """

    def __init__(self, data_width: int, *, address_width: int, depth: int, max_elements: int | None = None,
                 messages: int = 32, sums: dict, records: dict) -> None:
        for name in ("slots", "row_bits"):
            if name not in sums:
                raise ValueError(f"sums must give {name} (the slot store's), got {sorted(sums)}")
        fixed = sorted(set(records) & {"slots", "row_bits", "row_width", "axi_id", "modify"})
        if fixed:
            raise ValueError(f"records must not give {fixed} (one {RECORD_WIDTH}-bit record per slot, ID 1)")
        self.sums = GateOnSlotStore(data_width, depth=depth, max_elements=max_elements, messages=messages,
                                    address_width=address_width, **sums)
        self.row_bits = sums["row_bits"]
        self.records = DramRmwEngine(data_width, slots=sums["slots"], row_bits=0, address_width=address_width,
                                     axi_id=1, modify=ScaffoldRecordModify, row_width=RECORD_WIDTH, **records)
        self.arbiter = AxiIdArbiter([0, 1], addr_width=address_width, data_width=data_width)
        super().__init__(shared_members(self.sums, address_width, data_width))

    def elaborate(self, platform: object) -> Module:
        m = Module()
        gs, rec = wire_shared(m, self)
        m.submodules.adds = adds = SkidBuffer(self.req.payload.shape())
        fork_request(m, self.req, adds, gs, rec.cmd, lambda p: p, self.row_bits)
        m.d.comb += rec.cmd.payload.data.eq(adds.m.payload.as_value())
        # the records' responses, in message order, are the gate's decisions
        decide_on_records(m, gs, rec, record_decision(rec.rsp.payload.data[:32]))
        return m


def shared_members(sums: GateOnSlotStore, address_width: int, data_width: int) -> dict[str, wiring.Member]:
    """A gate-on-records harness's members (``sums``' but ``decision`` and its memory port; the
    record engine's ``rec_mem_error``, the ID arbiter's ``arb_error`` / ``arb_dropped``, the
    shared ``m_axi_mem_*``)."""
    return {
        **{n: mb for n, mb in sums.signature.members.items()
           if n != "decision" and n not in EMITTER_PORTS and not n.startswith(AXI_PREFIX + "_")},
        "rec_mem_error": Out(1), "arb_error": Out(1), "arb_dropped": Out(DROPPED_BITS),
        **axi4_master_members(AXI_PREFIX, addr_width=address_width, data_width=data_width),
    }


def wire_shared(m: Module, outer: wiring.Component, rename: dict[str, str] | None = None) -> tuple[GateOnSlotStore, wiring.Component]:
    """``outer``'s ``sums``, ``records`` and ``arbiter`` as its submodules, the ports of
    :func:`shared_members` wired (but ``req``; ``rename``: a port of the sums' to ``outer``'s of
    another name) and both engines onto ``m_axi_mem`` through the arbiter; returns (sums, records)."""
    m.submodules.sums, m.submodules.records = gs, rec = outer.sums, outer.records
    m.submodules.arbiter = arb = outer.arbiter
    rename = rename or {}
    forward_ports(m, outer, gs, skip=lambda n: n in ("req", "decision", *EMITTER_PORTS, *rename)
                  or n.startswith(AXI_PREFIX + "_"))
    m.d.comb += [getattr(outer, ours).eq(getattr(gs, theirs)) for theirs, ours in rename.items()]
    m.d.comb += [outer.rec_mem_error.eq(rec.mem_error), outer.arb_error.eq(arb.error),
                 outer.arb_dropped.eq(arb.dropped)]
    share_port(m, arb, (gs, rec), outer)
    return gs, rec


def fork_request(m: Module, req: wiring.PureInterface, adds: SkidBuffer, gs: GateOnSlotStore,
                 cmd: wiring.PureInterface, msg_of: Callable[[Value], Value], row_bits: int) -> None:
    """The fork: the request of the stream ``req`` goes to the gate (its message ``msg_of(payload)``,
    taken with the message's first beat) and, in the cycle the gate takes it, into the skid buffer
    ``adds`` (the caller's submodule, of ``req``'s payload), whose head is the record ADD on the
    stream ``cmd``: on its slot (``msg.row >> row_bits``), tag the request's (side / data: the
    caller's, from ``adds.m.payload``). So a decision never comes for a request the gate does not
    have, both streams keep the request order, and the gate's ``req.ready`` reaches only ``req``'s
    ready and the buffer's input registers, never the engine's command (nor the choice and the
    admission in front of it), whose ready reaches only the buffer's output register
    (docs/large_slots.md, "The record path's admission and the gate's request (session 35, round
    3)"). ``req`` moves when the gate takes it (with room in the buffer: a flip-flop)."""
    msg, head = msg_of(req.payload), msg_of(adds.m.payload)
    m.d.comb += [
        gs.req.payload.eq(msg), gs.req.valid.eq(req.valid & adds.s.ready), req.ready.eq(gs.req.ready & adds.s.ready),
        adds.s.valid.eq(req.valid & adds.s.ready & gs.req.ready), adds.s.payload.eq(req.payload),
        cmd.valid.eq(adds.m.valid), adds.m.ready.eq(cmd.ready),
        cmd.payload.op.eq(Op.ADD), cmd.payload.row.eq(head.row[row_bits:]), cmd.payload.tag.eq(head.tag),
        cmd.payload.lanes.eq((1 << lanes(RECORD_WIDTH)) - 1), cmd.payload.more.eq(0),
    ]


def decide_on_records(m: Module, gs: GateOnSlotStore, rec: wiring.Component, decision: Value) -> None:
    """The record engine's responses, in message order, are the gate's decisions: ``decision``
    (a ``Decision``'s bits, from ``rec.rsp.payload``)."""
    rr = rec.rsp
    m.d.comb += [gs.decision.valid.eq(rr.valid), rr.ready.eq(gs.decision.ready),
                 gs.decision.payload.as_value().eq(decision)]


def gate_records_with_latency(*, delay_depth: int = 512, **params) -> AxiLatencyHarness:
    """:class:`GateOnRecords` (``**params``) with delay lines on ``m_axi_mem``'s R and B."""
    return AxiLatencyHarness(GateOnRecords(**params), delay_depth=delay_depth)
