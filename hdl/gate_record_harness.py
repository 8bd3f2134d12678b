"""The payload gate attached to the record engine, as a bench simulates it (issue 16, large S
step 4; docs/large_slots.md, "Payload wait"): the decisions come from record read-modify-writes
in DRAM, the sums go to the DRAM slot store, both engines on one memory port.

- A message's request (``req``, :func:`~.payload_gate.request_layout`), taken with its first
  beat, is also its **record command**: an ADD on record row ``req.row >> row_bits`` (the slot),
  data = the request's bits (the header's stand-in), tag = its tag. The request is forked: the
  gate and the record engine take it in the same cycle or neither does.
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

from amaranth.hdl import Cat, Module, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from .axi4 import axi4_master_members
from .axi_id_arbiter import DROPPED_BITS, AxiIdArbiter
from .axi_latency import AxiLatencyHarness
from .dram_rmw_engine import AXI_PREFIX, DramRmwEngine
from .engines_on_arbiter_harness import share_port
from .forward_ports import forward_ports
from .gate_store_harness import GateOnSlotStore
from .layouts import lanes
from .record_modify_scaffold import ScaffoldRecordModify
from .slot_store_signature import Op

__all__ = ["RECORD_WIDTH", "GateOnRecords", "gate_records_with_latency", "record_decision"]

RECORD_WIDTH = 256  # the record store's row (docs/large_slots.md, "How a 256-bit record travels")


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
        inner = self.sums.signature.members
        super().__init__({
            **{n: mb for n, mb in inner.items() if n != "decision" and not n.startswith(AXI_PREFIX + "_")},
            "rec_mem_error": Out(1), "arb_error": Out(1), "arb_dropped": Out(DROPPED_BITS),
            **axi4_master_members(AXI_PREFIX, addr_width=address_width, data_width=data_width),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.sums, m.submodules.records = gs, rec = self.sums, self.records
        m.submodules.arbiter = arb = self.arbiter
        forward_ports(m, self, gs, skip=lambda n: n in ("req", "decision") or n.startswith(AXI_PREFIX + "_"))
        req, rc = self.req, rec.cmd
        # the fork: the gate (with the message's first beat) and the record engine take the
        # request together (the engine's cmd.ready is a flip-flop: no combinational loop)
        m.d.comb += [
            gs.req.payload.eq(req.payload), gs.req.valid.eq(req.valid & rc.ready),
            rc.valid.eq(req.valid & gs.req.ready), req.ready.eq(gs.req.ready & rc.ready),
            rc.payload.op.eq(Op.ADD), rc.payload.row.eq(req.payload.row[self.row_bits:]),
            rc.payload.data.eq(req.payload.as_value()), rc.payload.tag.eq(req.payload.tag),
            rc.payload.lanes.eq((1 << lanes(RECORD_WIDTH)) - 1), rc.payload.more.eq(0),
        ]
        # the records' responses, in message order, are the gate's decisions
        rr = rec.rsp
        m.d.comb += [
            gs.decision.valid.eq(rr.valid), rr.ready.eq(gs.decision.ready),
            gs.decision.payload.as_value().eq(record_decision(rr.payload.data[:32])),
            self.rec_mem_error.eq(rec.mem_error),
            self.arb_error.eq(arb.error), self.arb_dropped.eq(arb.dropped),
        ]
        share_port(m, arb, (gs, rec), self)
        return m


def gate_records_with_latency(*, delay_depth: int = 512, **params) -> AxiLatencyHarness:
    """:class:`GateOnRecords` (``**params``) with delay lines on ``m_axi_mem``'s R and B."""
    return AxiLatencyHarness(GateOnRecords(**params), delay_depth=delay_depth)
