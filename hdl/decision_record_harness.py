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
  configured member's contribution: in order its run behind the head is peeked, on completion
  it may queue its slot, so it waits for the release queue's room). Its
  responses, in message order, are the gate's decisions (the record's ``op``); each one's
  outcome code goes out as ``outcome`` (``outcome_valid`` in the cycle the gate takes it).
- The gate's commands go to ``CommandArbiter`` -> ``DramSlotStore`` (ID 0), both engines onto
  one ``m_axi_mem`` through ``AxiIdArbiter``, inside an ``AxiLatencyHarness``.

- A window reset (``reset``: job, new head) goes through :class:`~.free_sweep.FreeSweep`: the
  requests stop (``req.ready`` low from the reset's arrival until it is taken), the record engine
  drains, the sweep's FREE WRITEs to the job's region go to the record engine and the reset to
  the state (CLEAR of the region's pending words, the new head); the WRITEs' responses are
  dropped (not decisions). Counted: ``sweeps``, ``records_freed``.

- **The results** (:class:`~.record_emitter.RecordEmitter`): the state's released runs
  (its ``RecordReleaseQueue`` of ``release_depth``) go to the emitter; its record READs take the
  record engine's command port before the fork's requests (the sweep's WRITEs before both; a
  FIFO of who issued each command routes the engine's responses: decisions to the gate, records
  to the emitter, the sweep's dropped), its data READs go into the ``CommandArbiter`` beside the
  gate (a marker pushed between two messages' commands once the gate has pushed the last command
  of every message decided before the record came back: after the completing contribution's
  ADD), the store's READ responses come back with the slot's sticky overflow flag
  (``StoreReadSplit``), and the rows leave on ``results`` (RESULT header from the record, the
  sums), in release order. **Order**: a released slot's record and rows must be read before a
  later chunk rewrites them, so a request whose chunk is a window or more past its job's
  emission pointer (the chunk after the last one whose READs went out; a window reset sets it to
  the new head) or past any request of the job admitted since (``low``: a request behind the
  pointer may be a resend, which reads its slot again) waits (``pin_waits`` counts the cycles)
  until nothing is in flight (the record engine drained and settled, the release queue empty,
  the emitter idle): any other request's slot last held a chunk already read and not to be
  read again. **Resends** (RESULT_RESENT, in order): the state queues the slot as a one-chunk
  run with ``resent`` in decision order, the emitter reads its record and sums again and the
  row's header has RESENT (the golden model's order: a resend's result between the results
  of the decisions before and after it). **On completion** (a job whose requests have
  ``in_order`` 0): a completing contribution queues its slot as a one-chunk run (a resend too),
  so results come in decision order; the emission pointer means nothing there (chunks complete
  in any order), so the pin keeps per job the span of chunks admitted since nothing was in
  flight (``oc_lo``, ``oc_span``) and holds a request that would widen it to a window or more:
  within a span narrower than the window every admitted chunk has its own slot, so none
  rewrites a slot released since (all of whose chunks were admitted since), and any older
  release was read. A window reset likewise waits for that before the sweep
  frees the region's records (the requests stop at once).

The pin is a registered stage in front of the fork (:class:`~.request_pin.RequestPin`: its flag a
cycle old, a request right behind one of its job held a cycle); a window reset passes once that
stage is empty too. A skid buffer (``held``) follows it to the fork, the decisions reach the gate
through another (``decisions``), and the owner FIFO's head, ``quiet`` and the release queue's
``room`` are flip-flops: the record path's ready chains cut (docs/large_slots.md, "The record
path's ready chains (session 33)"). The fork gives the gate the request first (the engine's
ready does not reach the gate) and the candidates' admission is a flip-flop (``room_r``): the
probe and control chains cut (same file, "(session 34)"). The ADDs reach the engine from a skid
buffer of the requests the gate has taken (``adds``: the gate's request ready stops at it),
``room_r``'s sums see only flip-flops and ``cands`` / ``reserved`` count the answers a cycle late:
the admission and the gate's request cut (same file, "(session 35, round 3)"); ``rows_back``
adds two flip-flops and the marker's ``lasts >= snap`` is a flip-flop (``lasts_caught``): "(session
35, round 4)"; the store split's and the arbiter's room are flip-flops (so is the marker's
``e_room``), the emitter's record take waits for no data READ's ready and its ``read_next`` is
``+ 1`` before the select: "(session 36, round 5)".

**Own rows** (docs/large_slots.md, "Results from the completing contribution's own ADD
responses"): a decision that releases or completes its chunk has ``emit`` (the record after's),
the gate tags its commands ``EMIT_TAG`` (or READs the chunk's rows so tagged, if it drains the
message), the store split pushes their responses on ``e_own`` into the emitter's own FIFO
(``own_rows`` R, default two slots' rows), and the emitter takes that chunk's rows from there:
no data READ for it. A release candidate is admitted only while the rows reserved plus its
chunk's fit in R (returned when its decision does not emit, one by one as stage 3 takes them),
so the split never waits for the own FIFO.

**What the core reads** (the ``Reducer``'s ports of these names): ``head`` (each job's head,
``DecisionState``'s flip-flop copy), the probe (``probe_job`` / ``probe_chunk`` ->
``probe_bitmap`` / ``probe_ok``: :class:`~.record_probe.RecordProbe`, record READs on the engine's
command port after the emitter's, a third owner kind, each answered with the slot's pending bit
as the READ's C2 had it: the engine's look-ahead and the state's ``late.pending``), ``record_error`` (sticky: the gate's ``error``, ``copy_error``, ``split_error`` or
``state_error``) and ``mem_error`` (``store_mem_error``, ``rec_mem_error`` or ``arb_error``).

Ports: ``beats``, ``req``; ``region`` (the state's and the sweep's) and the window-reset stream
``reset``; ``sweeps`` / ``records_freed``; the store's
``rsp``, ``store_mem_error``; the gate's ``error`` and counters; ``copy_error``; ``outcome`` /
``outcome_valid``; ``released`` / ``released_valid`` and ``state_error`` (the state's);
``results``, ``pin_waits``, ``data_reads`` (the emitter's data READs taken, 32-bit), ``split_error``;
``rec_mem_error``; ``arb_error`` / ``arb_dropped``; ``m_axi_mem_*``; ``latency``; and those above.
Not the core's wiring.
"""

from __future__ import annotations

from functools import partial

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from .axi_id_arbiter import AxiIdArbiter
from .axi_latency import AxiLatencyHarness
from .decision_state import DecisionState, effect_layout, late_layout
from .dram_rmw_engine import DramRmwEngine
from .engine_with_state import EngineWithState
from .forward_ports import forward_ports
from .free_sweep import FreeSweep
from .gate_record_harness import fork_request, shared_members, wire_shared
from .gate_store_harness import GateOnSlotStore
from .layouts import ResetLayout, lanes
from .payload_gate import decision_layout
from .record_decision import RecordDecision
from .record_emitter import RecordEmitter
from .record_probe import RecordProbe
from .record_release_queue import RESERVE
from .reducer_layouts import RECORD_BITS, RecordSide
from .registered_fifo import RegisteredFIFO
from .request_pin import RequestPin
from .skid_buffer import SkidBuffer
from .slot_store_signature import Op

__all__ = ["DecisionOnRecords", "decision_records_with_latency", "record_engine"]

OWNER_DEPTH = 256  # record commands whose responses are not yet taken (more wait: rc.ready held)
OWN_CHUNKS = 2  # the emitter's own FIFO by default: two slots' rows (docs/benchmarks.md, "Own rows")
PENDING = 2  # queue entries a candidate may push after its answer left (a long run's second part)
STATE_PORTS = ("region", "released", "released_valid", "state_error")  # the DecisionState's, passed out
PROBE_PORTS = ("probe_job", "probe_chunk", "probe_bitmap", "probe_ok")  # the RecordProbe's, passed out


class Owner(enum.Enum, shape=2):
    """Whose record command a response answers (the sweep counts its own)."""

    FORK = 0  # a message's ADD: a decision, for the gate
    EMITTER = 1  # a released chunk's record READ
    PROBE = 2  # the probe's record READ


def owner_layout(row_bits: int) -> data.StructLayout:
    """An owner FIFO entry: ``kind``, ``cand`` (a release candidate's ADD) and ``rows`` (the rows
    it reserved in the emitter's own FIFO: its chunk's, returned if its decision does not emit)."""
    return data.StructLayout({"kind": Owner, "cand": 1, "rows": row_bits + 1})


def record_engine(data_width: int, *, slots: int, jobs: int, release_depth: int | None = None,
                  regions: bool = True, **engine: int) -> EngineWithState:
    """The record store's engine: ``DramRmwEngine`` (``**engine``: its parameters but its rows,
    ID and modify) with :class:`~.record_decision.RecordDecision` on ``slots`` 256-bit records,
    AXI ID 1, its late operand a ``DecisionState`` of ``jobs`` (``release_depth``, ``regions``:
    the state's): the job is the header's, a release candidate every configured member's
    contribution (in order: its run behind the head is peeked; on completion: it may queue its
    slot, a completion or a resend, so it waits for the queue's ``room`` the same way)."""
    e = DramRmwEngine(data_width, slots=slots, row_bits=0, axi_id=1,
                      modify=partial(RecordDecision, slots=slots, jobs=jobs), row_width=RECORD_BITS,
                      side_shape=RecordSide, late_shape=late_layout(slots), effect_shape=effect_layout(slots), **engine)
    state = DecisionState(slots=slots, jobs=jobs, release_depth=release_depth, regions=regions)
    jb = state.job_bits
    return EngineWithState(e, state, job_of=lambda side: side.hdr.job_id[:jb],
                           release_of=lambda side: ~side.cfg.unconf & ~side.cfg.nonmem)


class DecisionOnRecords(wiring.Component):
    """``PayloadGate`` deciding on ``RecordDecision``'s responses; see the module docstring.

    Parameters: ``data_width`` W, ``address_width``, ``jobs``, ``depth`` / ``max_elements`` /
    ``messages`` (the gate's), ``sums`` (the ``DramSlotStore``'s: ``slots``, ``row_bits``, ...),
    ``records`` (the record engine's but its rows and modify: ``base_address``, ``outstanding``, ...),
    ``release_depth`` (the state's release queue), ``prefetch`` / ``headers`` / ``own_rows`` (the
    emitter's queues; ``own_rows`` default ``OWN_CHUNKS`` slots' rows).

    ``release_depth`` defaults to 16: a release candidate is admitted only with room for every
    push in flight (``admit`` below), so at 8 one candidate is in the record engine at a time
    (22 results per 1 000 cycles on a back-to-back in-order stream at latency 20), at 16 up to
    four (91; 77 with the three-stage scan), at 32 no better (81: more in flight, the pin waits
    longer for quiet); and 16
    entries take the same LUT RAM as 8 (6 DPR16X4 at S 1 024, J 4): docs/benchmarks.md, "The
    record path's results per cycle".
    """

    def __init__(self, data_width: int, *, address_width: int, jobs: int, depth: int,
                 max_elements: int | None = None, messages: int = 32, sums: dict, records: dict,
                 release_depth: int = 16, prefetch: int = 4, headers: int = 4, own_rows: int | None = None) -> None:
        for name in ("slots", "row_bits"):
            if name not in sums:
                raise ValueError(f"sums must give {name} (the slot store's), got {sorted(sums)}")
        fixed = sorted(set(records) & {"slots", "row_bits", "row_width", "axi_id", "modify", "side_shape",
                                       "late_shape", "effect_shape"})
        if fixed:
            raise ValueError(f"records must not give {fixed} (one {RECORD_BITS}-bit record per slot, ID 1)")
        if release_depth < 2 + PENDING + RESERVE:
            raise ValueError(f"release_depth must be at least {2 + PENDING + RESERVE} (a candidate's two entries, "
                             f"{PENDING} pending, the queue's reserve {RESERVE}), got {release_depth}")
        slots, self.jobs, self.release_depth = sums["slots"], jobs, release_depth
        self.sums = GateOnSlotStore(data_width, depth=depth, max_elements=max_elements, messages=messages,
                                    address_width=address_width, emitter=True, **sums)
        self.row_bits = sums["row_bits"]
        self.records = record_engine(data_width, slots=slots, jobs=jobs, address_width=address_width,
                                     release_depth=release_depth, **records)
        own_rows = OWN_CHUNKS << self.row_bits if own_rows is None else own_rows
        self.emitter = RecordEmitter(data_width, slots=slots, jobs=jobs, row_bits=self.row_bits, prefetch=prefetch,
                                     headers=headers, own_rows=own_rows)
        self.own_rows = own_rows
        self.record = self.records.engine.modify.record
        self.sweep = FreeSweep(slots=slots, jobs=jobs, row_width=RECORD_BITS, side_shape=RecordSide)
        self.arbiter = AxiIdArbiter([0, 1], addr_width=address_width, data_width=data_width)
        self.req_layout = data.StructLayout({"msg": self.sums.gate.req.payload.shape(), "side": RecordSide})
        self.pin = RequestPin(self.req_layout, slots=slots, jobs=jobs)
        # the ready chains' cuts (docs/large_slots.md, "The record path's ready chains"): the
        # pinned requests and the decisions each through a skid buffer, the owner FIFO's head
        # from flip-flops
        self.held = SkidBuffer(self.req_layout)
        self.adds = SkidBuffer(self.req_layout)  # the requests the gate has taken, to the engine (the fork's)
        self.decisions = SkidBuffer(decision_layout())
        self.owner = RegisteredFIFO(owner_layout(self.row_bits), OWNER_DEPTH)
        self.probe = RecordProbe(slots=slots, jobs=jobs)
        rec, pr = self.records.signature.members, self.probe.signature.members
        super().__init__({
            **shared_members(self.sums, address_width, data_width),
            "req": In(stream.Signature(self.req_layout)),
            **{n: rec[n] for n in STATE_PORTS},
            "reset": In(stream.Signature(ResetLayout(jobs))),
            "sweeps": self.sweep.signature.members["sweeps"], "records_freed": self.sweep.signature.members["records_freed"],
            "outcome": Out(4), "outcome_valid": Out(1),
            "results": self.emitter.signature.members["row"], "pin_waits": Out(32), "data_reads": Out(32),
            # what the core's control block reads (the Reducer's ports of these names): the heads,
            # the probe, the errors' ORs
            "head": self.records.state.signature.members["head"],
            **{n: pr[n] for n in PROBE_PORTS},
            "store_mem_error": Out(1), "mem_error": Out(1), "record_error": Out(1),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        gs, rec = wire_shared(m, self, rename={"mem_error": "store_mem_error"})
        forward_ports(m, self, rec, skip=lambda n: n not in STATE_PORTS)
        m.submodules.sweep, m.submodules.emitter = sw, em = self.sweep, self.emitter
        state = self.records.state
        rc, rr = rec.cmd, rec.rsp
        wiring.connect(m, rec.release, em.run)
        wiring.connect(m, gs.e_rsp, em.data_rsp)
        wiring.connect(m, em.row, wiring.flipped(self.results))
        m.d.comb += [sw.region.eq(self.region), em.region.eq(self.region), self.sweeps.eq(sw.sweeps),
                     self.records_freed.eq(sw.records_freed)]
        # errors: the AXI ones (store, records, a misrouted ID) and the record path's own, sticky
        with m.If(self.error | self.copy_error | self.split_error | self.state_error):
            m.d.sync += self.record_error.eq(1)
        m.d.comb += [self.mem_error.eq(self.store_mem_error | self.rec_mem_error | self.arb_error),
                     self.head.eq(state.head)]
        # the probe's record READs (``RecordProbe``): every command to a record makes its answer
        # stale; the pending bit of each command in the engine's C2 (its late operand, marked by
        # the look-ahead a cycle before) is the READ's slot's at its C2
        m.submodules.probe = pr = self.probe
        engine = self.records.engine
        m.d.comb += [pr.probe_job.eq(self.probe_job), pr.probe_chunk.eq(self.probe_chunk),
                     self.probe_bitmap.eq(pr.probe_bitmap), self.probe_ok.eq(pr.probe_ok),
                     pr.region.eq(self.region), pr.head.eq(state.head),
                     pr.stop.eq(self.reset.valid), pr.write.eq(rc.valid & rc.ready & (rc.payload.op != Op.READ)),
                     pr.write_row.eq(rc.payload.row), pr.ahead_valid.eq(engine.ahead_valid),
                     pr.ahead_slot.eq(engine.ahead_row), pr.late_pending.eq(state.late.pending)]
        # nothing in flight (``idle``): every command answered (the probe's READs change nothing:
        # not counted; the sweep's drain counts them), the state settled, every release emitted,
        # no request between the pin and the engine (``held``, the fork's ``adds``). ``quiet`` is
        # ``idle`` a cycle late, and only if neither the pin nor the sweep let a command in then, so ``quiet`` implies
        # ``idle`` (from an idle cycle with neither, nothing gets in flight: the pin's "calm"),
        # and reaches the pin's comparisons from a flip-flop
        m.submodules.pin, m.submodules.held, m.submodules.adds = pin, hd, ad = self.pin, self.held, self.adds
        inflight, quiet = Signal(16, name="inflight"), Signal(name="quiet")
        probe_in = pr.cmd.valid & pr.cmd.ready
        probe_out = pr.rsp.valid & pr.rsp.ready
        m.d.sync += inflight.eq(inflight + (rc.valid & rc.ready & ~probe_in) - (rr.valid & rr.ready & ~probe_out))
        idle = ((inflight == 0) & state.settled & (state.queue.level == 0) & ~state.queue.m.valid & em.idle
                & ~hd.m.valid & ~hd.skid_valid & ~ad.m.valid & ~ad.skid_valid)
        m.d.sync += quiet.eq(idle & ~(pin.out.valid & pin.out.ready) & ~sw.cmd.valid)
        # a window reset stops the requests at once and reaches the sweep once nothing is in flight
        # (so no released record is freed before it is read); ``passed``: offered to the sweep
        # and the pin stage is empty (its request was taken before the reset)
        passed = Signal()
        drained = (quiet & pin.empty) | passed
        m.d.comb += [sw.reset.valid.eq(self.reset.valid & drained), sw.reset.payload.eq(self.reset.payload),
                     self.reset.ready.eq(sw.reset.ready & drained)]
        m.d.sync += passed.eq(sw.reset.valid & ~sw.reset.ready)
        wiring.connect(m, sw.state_reset, rec.reset)
        # the pin (``RequestPin``: the emission pointer per job, ``low``, the on-completion spans),
        # a registered stage, then a skid buffer (``held``: the gate's request ready reaches no
        # further than its output register) to the fork
        wiring.connect(m, wiring.flipped(self.req), pin.req)
        wiring.connect(m, pin.out, hd.s)
        m.d.comb += [pin.quiet.eq(quiet), pin.stop.eq(self.reset.valid), pin.region.eq(self.region),
                     pin.reset.eq(self.reset.payload), pin.reset_fire.eq(self.reset.valid & self.reset.ready),
                     pin.read_done.eq(em.read_done), pin.read_job.eq(em.read_job), pin.read_next.eq(em.read_next),
                     self.pin_waits.eq(pin.pin_waits)]
        held = hd.m
        # the record engine's commands: the sweep's WRITEs, else the emitter's READs, else the
        # probe's, else the fork's ADDs (the head of ``adds``: requests the gate has taken);
        # ``owner`` remembers whose each was and whether it is a release candidate (the sweep
        # counts its own)
        fork = stream.Signature(rc.payload.shape()).create()
        fork_request(m, held, ad, gs, fork, lambda p: p.msg, self.row_bits)
        m.d.comb += [fork.payload.side.eq(ad.m.payload.side), fork.payload.data.eq(0)]
        m.submodules.owner = owner = self.owner  # its head from flip-flops (``RegisteredFIFO``)
        o_in, o_out = owner.w_data, owner.m.payload
        er = em.rec_read
        # a release candidate waiting in C0 for the queue's room holds every command behind it,
        # the emitter's record READs too, and the queue drains only through those READs: so a
        # candidate enters the engine only if the queue can take, at its C0, every entry the
        # candidates already in (``cands``: entered, not yet answered) may push, two each, and
        # ``PENDING`` pushed after their answers, with the state's ``RESERVE`` left: its room
        # wait never binds (docs/large_slots.md, "The results": the room wait)
        cands = Signal(range(OWNER_DEPTH + 1))
        cand = self.records.release_of(fork.payload.side)
        # and only if the emitter's own FIFO has room for its chunk's rows beside every row reserved
        # (``reserved``: a candidate's rows from its admission until its decision says it does not
        # emit, or each until stage 3 takes it): the split never waits for the own FIFO, so the
        # store's responses never stall behind an own chunk (docs/large_slots.md, "Reserve at
        # admission"); a candidate with no room waits here, where only the fork waits
        reserved = Signal(range(self.own_rows + 1))

        def rows_of(nbm1: Value) -> Value:
            return nbm1[:self.row_bits] + 1 if self.row_bits else Const(1, 1)

        def nb(nbm1: Value) -> Value:  # a chunk's rows less one
            return nbm1[:self.row_bits] if self.row_bits else Const(0, 1)

        # the tests from a flip-flop (docs/large_slots.md, "The record path's probe and control
        # chains", "The record path's admission and the gate's request"): ``room_r`` is made a
        # cycle ahead for the request at the fork next cycle, the one there now if it stays, else
        # ``adds``' next (its skid register's or its input's), after the one there now if that one
        # is a candidate (it enters the engine now: ``gone``). The level bound (``lvl``, the level
        # and push of the cycle before) plus this cycle's push bounds the level next cycle; the
        # counts and the rows reserved only fall otherwise, so ``room_r`` implies both tests as
        # they were made in the cycle it is used. Only flip-flops reach the sums; this cycle's push
        # and the fork's move only choose among the compares (their constants fold the +1s)
        lvl = Signal(range(self.release_depth + 2), name="lvl")
        base = Signal(range(self.release_depth + 2 * OWNER_DEPTH + 2), name="lvl_cands")
        m.d.sync += lvl.eq(Mux(state.queue.push, state.queue.level + 1, state.queue.level))
        m.d.comb += base.eq(lvl + 2 * cands)

        def at_most(v: Value, k: int) -> Value:
            return v <= k if k >= 0 else Const(0, 1)

        def queue_ok(more: int) -> Value:
            """The release queue's test after ``more`` more candidates (2 entries each)."""
            k = self.release_depth - 2 - PENDING - RESERVE - 2 * more
            return Mux(state.queue.push, at_most(base, k - 1), at_most(base, k))

        def rows_ok(*nbm1s: Value) -> Value:
            """The own FIFO's test: the rows reserved plus those of the chunks ``nbm1s``."""
            return at_most(reserved + sum(nb(x) for x in nbm1s), self.own_rows - len(nbm1s))

        nbm1, room_r = fork.payload.side.cfg.nbm1, Signal(name="room_r")
        rows = rows_of(nbm1)
        nxt_nbm1 = Mux(ad.skid_valid, ad.skid.side.cfg.nbm1, ad.s.payload.side.cfg.nbm1)
        gone = fork.valid & cand  # a candidate at the fork that moves now has entered the engine
        move = Mux(gone, queue_ok(1) & rows_ok(nbm1, nxt_nbm1), queue_ok(0) & rows_ok(nxt_nbm1))
        m.d.sync += room_r.eq(Mux(~fork.valid | fork.ready, move, queue_ok(0) & rows_ok(nbm1)))
        admit = ~cand | room_r
        with m.If(sw.cmd.valid):  # only while stopped: the fork offers nothing then, the emitter is idle
            m.d.comb += [rc.valid.eq(1), rc.payload.eq(sw.cmd.payload)]
        for owner_kind, read in ((Owner.EMITTER, er), (Owner.PROBE, pr.cmd)):
            with m.Elif(read.valid):  # a READ is no release candidate (its side says unconfigured)
                m.d.comb += [rc.valid.eq(owner.w_rdy), rc.payload.op.eq(Op.READ), rc.payload.row.eq(read.payload),
                             rc.payload.lanes.eq((1 << lanes(RECORD_BITS)) - 1), rc.payload.side.cfg.unconf.eq(1),
                             read.ready.eq(rc.ready & owner.w_rdy), o_in.kind.eq(owner_kind)]
        with m.Else():
            m.d.comb += [rc.valid.eq(fork.valid & owner.w_rdy & admit), rc.payload.eq(fork.payload),
                         fork.ready.eq(rc.ready & owner.w_rdy & admit), o_in.kind.eq(Owner.FORK), o_in.cand.eq(cand),
                         o_in.rows.eq(Mux(cand, rows, 0))]
        m.d.comb += [sw.cmd.ready.eq(rc.ready), sw.cmd_fire.eq(rc.valid & rc.ready), sw.rsp_fire.eq(rr.valid & rr.ready),
                     owner.w_en.eq(rc.valid & rc.ready & ~sw.cmd.valid)]
        # its responses: the sweep's dropped, the emitter's and the probe's records to them, the
        # rest the gate's decisions, through a skid buffer (``decisions``: the gate's decision
        # ready, behind its message's last command and the marker, stops at its input register)
        m.submodules.decisions = dq = self.decisions
        wiring.connect(m, dq.m, gs.decision)
        after = self.record(rr.payload.data)
        mine = ~sw.owns & owner.m.valid
        to_em, to_pr = mine & (o_out.kind == Owner.EMITTER), mine & (o_out.kind == Owner.PROBE)
        decide = rr.valid & mine & (o_out.kind == Owner.FORK)
        m.d.comb += [dq.s.valid.eq(decide), dq.s.payload.as_value().eq(Cat(after.op, after.emit)),  # decision_layout
                     em.rec_data.valid.eq(rr.valid & to_em),
                     em.rec_data.payload.eq(rr.payload.data), pr.rsp.valid.eq(rr.valid & to_pr),
                     pr.rsp.payload.eq(rr.payload.data),
                     rr.ready.eq(sw.owns | (owner.m.valid & Mux(to_em, em.rec_data.ready,
                                                                Mux(to_pr, pr.rsp.ready, dq.s.ready)))),
                     owner.m.ready.eq(rr.valid & rr.ready & ~sw.owns)]
        # a candidate's rows come back when its answer leaves for the gate without ``emit`` (its
        # own rows then never come); an emitting one's as stage 3 takes each row. The answers and
        # the rows taken count a cycle late (``left``, ``ret``, ``own``: flip-flops; the response
        # side's handshake reaches no sum, ``back`` adds flip-flops only), so ``cands`` and
        # ``reserved`` are never below the truth: the admission waits a cycle longer at worst,
        # every row reserved comes back once
        left, back = Signal(name="cands_left"), Signal(self.row_bits + 2, name="rows_back")
        ret, own = Signal.like(o_out.rows, name="rows_returned"), Signal(name="rows_own")
        m.d.sync += [left.eq(owner.m.ready & o_out.cand), own.eq(em.own_taken),
                     ret.eq(Mux(owner.m.ready & decide & ~after.emit, o_out.rows, 0))]
        m.d.comb += back.eq(ret + own)
        entered = fork.valid & fork.ready & cand
        m.d.sync += cands.eq(cands + entered - left)
        kept = Signal.like(reserved, name="reserved_kept")
        m.d.comb += kept.eq(reserved - back)
        m.d.sync += reserved.eq(Mux(entered, kept + rows, kept))
        wiring.connect(m, gs.e_own, em.own_rsp)
        m.d.comb += [self.outcome.eq(after.code), self.outcome_valid.eq(decide & rr.ready)]
        # the emitter's data READs: a marker into the arbiter's FIFO once the gate has pushed every
        # message decided before the chunk's record came back (``snap``: its WRITE / ADD messages
        # then; ``lasts``: those whose last command is pushed), then its READs at the marker. Up
        # to two of those decisions may still wait in ``decisions`` when the record comes
        # (``pre`` of them); ``snap`` is taken again every cycle until the gate has started the
        # last of them and counted it (``late``: the cycle after), and no marker goes meanwhile.
        # ``caught`` (``lasts`` has reached ``snap``) is a flip-flop: the compare with the ``snap``
        # of the cycle it is used and the ``lasts`` of the cycle before, which only grows, so it
        # is never 1 before the truth (a marker waits a cycle longer at worst); the subtractions
        # see flip-flops only (the record's handshake only chooses), and no longer reach the
        # marker, the gate's command ready and its ``start``
        dc, snap, marked = em.data_cmd, Signal(16, name="snap"), Signal()
        snap_new, caught = Signal(16, name="snap_new"), Signal(name="lasts_caught")
        rec_fire, took = em.rec_data.valid & em.rec_data.ready, dq.m.valid & dq.m.ready
        pre, late = Signal(2, name="pre"), Signal(name="late")
        with m.If(rec_fire):
            m.d.sync += pre.eq(dq.m.valid + dq.skid_valid - took)
        with m.Elif(took & (pre != 0)):
            m.d.sync += pre.eq(pre - 1)
        m.d.sync += late.eq(took & (rec_fire | (pre != 0)))
        snapping = (pre != 0) | late
        m.d.comb += snap_new.eq(gs.written + gs.added)
        with m.If(rec_fire | snapping):
            m.d.sync += snap.eq(snap_new)
        m.d.sync += caught.eq(Mux(rec_fire | snapping, ~(gs.lasts - snap_new)[15], ~(gs.lasts - snap)[15]))
        mark = dc.valid & ~marked & ~snapping & caught & gs.e_room
        m.d.comb += [gs.e_mark.eq(mark), gs.e_valid.eq(dc.valid), gs.e_cmd.eq(dc.payload), dc.ready.eq(gs.e_go),
                     gs.e_final.eq(em.data_final)]
        with m.If(dc.valid & dc.ready):  # the emitter's data READs (an own chunk's rows are not read)
            m.d.sync += self.data_reads.eq(self.data_reads + 1)
        with m.If(mark):
            m.d.sync += marked.eq(1)
        with m.If(em.read_done):
            m.d.sync += marked.eq(0)
        return m


def decision_records_with_latency(*, delay_depth: int = 512, **params) -> AxiLatencyHarness:
    """:class:`DecisionOnRecords` (``**params``) with delay lines on ``m_axi_mem``'s R and B."""
    return AxiLatencyHarness(DecisionOnRecords(**params), delay_depth=delay_depth)
