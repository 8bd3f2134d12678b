"""The payload gate deciding with the record decision, as a bench simulates it (issue 16, large S
step 4; docs/large_slots.md, "The record store"): ``GateOnRecords``' arrangement with the
decision itself in place of the scaffold modify.

- A message's request (``req``: ``msg``, the gate's :func:`~.payload_gate.request_layout`, and
  ``side``, ``RecordSide``: its header and the configuration's checks, as the input stages will
  make it) is forked (:func:`~.gate_record_harness.fork_request`): to the gate with the
  message's first beat, and as a record ADD on its slot (``msg.row >> row_bits``, side = ``side``)
  to the record engine.
- The record engine is ``DramRmwEngine`` with :class:`~.record_decision.RecordDecision` as its
  modify (256-bit records, AXI ID 1), its late operand owned by a ``DecisionState`` with the
  jobs' regions (``EngineWithState``: the job is the header's, a release candidate every
  configured member's contribution in in-order mode, so its run behind the head is peeked). Its
  responses, in message order, are the gate's decisions (the record's ``op``); each one's
  outcome code goes out as ``outcome`` (``outcome_valid`` in the cycle the gate takes it).
- The gate's commands go to ``CommandArbiter`` -> ``DramSlotStore`` (ID 0), both engines onto
  one ``m_axi_mem`` through ``AxiIdArbiter``, inside an ``AxiLatencyHarness``.

- A window reset (``reset``: job, new head) goes through :class:`~.free_sweep.FreeSweep`: the
  requests stop (``req.ready`` low from the reset's arrival until it is taken), the record engine
  drains, the sweep's FREE WRITEs to the job's region go to the record engine and the reset to
  the state (CLEAR of the region's pending words, the new head); the WRITEs' responses are
  dropped (not decisions). Counted: ``sweeps``, ``records_freed``.

Ports: ``beats``, ``req``; ``region`` (the state's and the sweep's) and the window-reset stream
``reset``; ``sweeps`` / ``records_freed``; the store's
``rsp``, ``mem_error``; the gate's ``error`` and counters; ``copy_error``; ``outcome`` /
``outcome_valid``; ``released`` / ``released_valid`` and ``state_error`` (the state's);
``rec_mem_error``; ``arb_error`` / ``arb_dropped``; ``m_axi_mem_*``; ``latency``. Not the
core's wiring.
"""

from __future__ import annotations

from functools import partial

from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .axi_id_arbiter import AxiIdArbiter
from .axi_latency import AxiLatencyHarness
from .decision_state import DecisionState, effect_layout, late_layout
from .dram_rmw_engine import DramRmwEngine
from .engine_with_state import EngineWithState
from .forward_ports import forward_ports
from .free_sweep import FreeSweep
from .gate_record_harness import decide_on_records, fork_request, shared_members, wire_shared
from .gate_store_harness import GateOnSlotStore
from .layouts import ResetLayout
from .record_decision import RecordDecision
from .reducer_layouts import RECORD_BITS, RecordSide

__all__ = ["DecisionOnRecords", "decision_records_with_latency", "record_engine"]

STATE_PORTS = ("region", "released", "released_valid", "state_error")  # the DecisionState's, passed out


def record_engine(data_width: int, *, slots: int, jobs: int, release_depth: int | None = None,
                  regions: bool = True, **engine: int) -> EngineWithState:
    """The record store's engine: ``DramRmwEngine`` (``**engine``: its parameters but its rows,
    ID and modify) with :class:`~.record_decision.RecordDecision` on ``slots`` 256-bit records,
    AXI ID 1, its late operand a ``DecisionState`` of ``jobs`` (``release_depth``, ``regions``:
    the state's): the job is the header's, a release candidate every configured member's
    contribution in in-order mode (its run behind the head is peeked)."""
    e = DramRmwEngine(data_width, slots=slots, row_bits=0, axi_id=1,
                      modify=partial(RecordDecision, slots=slots, jobs=jobs), row_width=RECORD_BITS,
                      side_shape=RecordSide, late_shape=late_layout(slots), effect_shape=effect_layout(slots), **engine)
    state = DecisionState(slots=slots, jobs=jobs, release_depth=release_depth, regions=regions)
    jb = state.job_bits
    return EngineWithState(e, state, job_of=lambda side: side.hdr.job_id[:jb],
                           release_of=lambda side: side.cfg.in_order & ~side.cfg.unconf & ~side.cfg.nonmem)


class DecisionOnRecords(wiring.Component):
    """``PayloadGate`` deciding on ``RecordDecision``'s responses; see the module docstring.

    Parameters: ``data_width`` W, ``address_width``, ``jobs``, ``depth`` / ``max_elements`` /
    ``messages`` (the gate's), ``sums`` (the ``DramSlotStore``'s: ``slots``, ``row_bits``, ...),
    ``records`` (the record engine's but its rows and modify: ``base_address``, ``outstanding``, ...).
    """

    def __init__(self, data_width: int, *, address_width: int, jobs: int, depth: int,
                 max_elements: int | None = None, messages: int = 32, sums: dict, records: dict) -> None:
        for name in ("slots", "row_bits"):
            if name not in sums:
                raise ValueError(f"sums must give {name} (the slot store's), got {sorted(sums)}")
        fixed = sorted(set(records) & {"slots", "row_bits", "row_width", "axi_id", "modify", "side_shape",
                                       "late_shape", "effect_shape"})
        if fixed:
            raise ValueError(f"records must not give {fixed} (one {RECORD_BITS}-bit record per slot, ID 1)")
        slots = sums["slots"]
        self.sums = GateOnSlotStore(data_width, depth=depth, max_elements=max_elements, messages=messages,
                                    address_width=address_width, **sums)
        self.row_bits = sums["row_bits"]
        self.records = record_engine(data_width, slots=slots, jobs=jobs, address_width=address_width, **records)
        self.record = self.records.engine.modify.record
        self.sweep = FreeSweep(slots=slots, jobs=jobs, row_width=RECORD_BITS, side_shape=RecordSide)
        self.arbiter = AxiIdArbiter([0, 1], addr_width=address_width, data_width=data_width)
        self.req_layout = data.StructLayout({"msg": self.sums.gate.req.payload.shape(), "side": RecordSide})
        rec = self.records.signature.members
        super().__init__({
            **shared_members(self.sums, address_width, data_width),
            "req": In(stream.Signature(self.req_layout)),
            **{n: rec[n] for n in STATE_PORTS},
            "reset": In(stream.Signature(ResetLayout(jobs))),
            "sweeps": self.sweep.signature.members["sweeps"], "records_freed": self.sweep.signature.members["records_freed"],
            "outcome": Out(4), "outcome_valid": Out(1),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        gs, rec = wire_shared(m, self)
        forward_ports(m, self, rec, skip=lambda n: n not in STATE_PORTS)
        m.submodules.sweep = sw = self.sweep
        wiring.connect(m, wiring.flipped(self.reset), sw.reset)
        wiring.connect(m, sw.state_reset, rec.reset)
        m.d.comb += [sw.region.eq(self.region), self.sweeps.eq(sw.sweeps), self.records_freed.eq(sw.records_freed)]
        # the requests wait while a window reset does (``stop``); the sweep's WRITEs take the
        # record engine's command port meanwhile, and their responses are dropped
        held = stream.Signature(self.req_layout).create()
        m.d.comb += [held.valid.eq(self.req.valid & ~sw.stop), held.payload.eq(self.req.payload),
                     self.req.ready.eq(held.ready & ~sw.stop)]
        fork_request(m, held, held.payload.msg, gs, rec, self.row_bits)
        rc, rr = rec.cmd, rec.rsp
        m.d.comb += [rc.payload.side.eq(held.payload.side), rc.payload.data.eq(0)]
        with m.If(sw.cmd.valid):  # only while stopped: the fork offers nothing then
            m.d.comb += [rc.valid.eq(1), rc.payload.eq(sw.cmd.payload)]
        m.d.comb += [sw.cmd.ready.eq(rc.ready), sw.cmd_fire.eq(rc.valid & rc.ready), sw.rsp_fire.eq(rr.valid & rr.ready)]
        after = self.record(rr.payload.data)
        decide_on_records(m, gs, rec, after.op)
        m.d.comb += [gs.decision.valid.eq(rr.valid & ~sw.owns), rr.ready.eq(sw.owns | gs.decision.ready)]
        m.d.comb += [self.outcome.eq(after.code), self.outcome_valid.eq(rr.valid & rr.ready & ~sw.owns)]
        return m


def decision_records_with_latency(*, delay_depth: int = 512, **params) -> AxiLatencyHarness:
    """:class:`DecisionOnRecords` (``**params``) with delay lines on ``m_axi_mem``'s R and B."""
    return AxiLatencyHarness(DecisionOnRecords(**params), delay_depth=delay_depth)
