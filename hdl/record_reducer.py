"""The record path as the core's reducer (issue 16, ``slot_memory="records"``; docs/large_slots.md,
"The core wiring", step 5): the ``Reducer``'s ports (with ``slot_memory="dram"``: ``m_axi_mem_*``,
``mem_error``, ``result_withheld``) and ``record_error`` (STATUS.RECORD_ERROR), the per-slot
state in 256-bit DRAM records instead of on chip, so S goes up to ``MAX_SLOTS_LARGE``.

::

    s_msg ─► InputStages(records=True) ─► RecordRequest ─► beats, req ─► DecisionOnRecords ─► results
               ▲ cfg                                                    │  ▲ region, reset      │
    job_cfg ─► ReducerConfig                                            │  │                    ▼
                                               m_axi_mem_* ◄────────────┘  region resets  FrameFIFO ─► RowToMessage ─► ResultGate ─► m_msg

- ``ReducerConfig`` registers the configuration; ``InputStages(vectors=False, records=True)``
  decodes each beat (slot, ``DecisionConfig``) into stage P; ``RecordRequest`` turns P's beats into
  ``DecisionOnRecords``' ``beats`` and, with each first beat, its ``req``.
- ``DecisionOnRecords`` (hdl/decision_record_harness.py) decides on the records (AXI ID 1) and
  keeps the sums in ``DramSlotStore`` (ID 0), both on the one ``m_axi_mem``; its ``region`` per
  job is the configuration's (base, clamped log2 window), its window resets the control block's.
- **Memory map**: the sums' ``S << row_bits`` rows from ``base_address``, the records (32 bytes a
  slot) from the next 4 KiB boundary after them (:func:`record_memory`).
- **A job's region is reset when it changes**: its records must be FREE (DRAM holds anything
  at power-up) and ``DecisionState`` keeps each job's head with its *slot*, which depends on the
  region. So after reset, and whenever a job's enable, base or (clamped) log2 window changes (a
  JOB_CFG write), the record path makes a window reset of that job at its current head before
  any of the control block's (lowest job first): its region's records FREE, its pending bits
  cleared, its head's slot recomputed. (The reducer keeps no slot with its heads; the golden
  model's ``set_job`` changes neither head nor slots: the configuration may only change while
  the job is idle, ``ReducerConfig``.) ``records_freed`` counts these sweeps' records too.
- Results, **store and forward** as the DRAM reducer's: the emitter's rows wait in a
  ``FrameFIFO`` until their result's last row is in, then get ``first`` (``RowToMessage``) and
  pass ``ResultGate``: after any memory error (either engine's AXI error response, or a
  misrouted ID at the ID arbiter: ``mem_error``) or record-path inconsistency
  (``record_error``: a result computed after one may be wrong) no result starts. Why a failed
  sums READ of any row withholds its result: the engine sets ``mem_error`` (a flip-flop) in the
  cycle after the failing R beat is taken; that beat's row then goes through the engine's read
  data FIFO and C0-C3 and the emitter before it reaches the ``FrameFIFO`` (4 cycles or more),
  and the frame's first beat is offered to the gate at least 2 cycles after its last row was
  taken (the header FIFO's latency): so the gate's ``error`` is set before it decides on the
  frame (tests/test_core.py ``test_core_records_late_row_read_error_withholds_its_result``).
  A failed record READ precedes the data READs of its chunk, so it is caught the same way.
- ``outcome`` / ``outcome_code``: the decision's, registered (counters only).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from wanreduce import regs

from .axi4 import axi4_forward
from .control_block import record_counters_layout
from .decision_record_harness import DecisionOnRecords
from .dram_rmw_engine import AXI_PREFIX
from .frame_fifo import FrameFIFO
from .layouts import ResetLayout, payload_beats
from .params import AXI4_PAGE, DRAM_STORE_DEFAULTS, check_slot_memory
from .record_request import RecordRequest
from .reducer_config import ReducerConfig, select_job_entry
from .reducer_input import InputStages
from .reducer_layouts import RECORD_BITS
from .reducer_ports import reducer_ports
from .result_gate import ResultGate
from .row_to_message import RowToMessage

__all__ = ["RecordReducer", "record_memory"]

MIN_GATE_DEPTH = 64  # the payload FIFO's beats at least (two messages at least, a power of two)


def record_memory(data_width: int, *, slots: int, elements: int,
                  base_address: int = DRAM_STORE_DEFAULTS["base_address"]) -> tuple[int, int]:
    """(records' base address, end of the record path's memory): the sums' ``slots`` rows of
    ``elements`` int32 at ``data_width`` from ``base_address``, then one 32-byte record per slot
    from the next 4 KiB boundary (an AXI4 burst never crosses one)."""
    row_bits = (payload_beats(elements, data_width) - 1).bit_length()
    sums_end = base_address + (slots << row_bits) * (data_width // 8)
    base = -(-sums_end // AXI4_PAGE) * AXI4_PAGE
    return base, base + slots * (RECORD_BITS // 8)


class RecordReducer(wiring.Component):
    """The reducer's ports on the record path (see the module docstring).

    Parameters as the ``Reducer``'s (``data_width`` W 64 or 256: a record is whole beats;
    ``slots`` S up to ``MAX_SLOTS_LARGE``), ``**dram``: the DRAM store's
    (``DRAM_STORE_DEFAULTS``; ``outstanding`` is both engines' in-flight table).
    """

    def __init__(self, data_width: int, *, slots: int, elements: int, groups: int, jobs: int,
                 **dram: int) -> None:
        check_slot_memory("records", width=data_width, slots=slots, elements=elements, groups=groups, jobs=jobs)
        if data_width > RECORD_BITS:
            raise ValueError(f"width must be 64..{RECORD_BITS} with slot memory records (a {RECORD_BITS}-bit "
                             f"record is whole beats), got {data_width}")
        unknown = sorted(set(dram) - set(DRAM_STORE_DEFAULTS))
        if unknown:
            raise ValueError(f"unknown slot store parameter(s) for slot memory records: {', '.join(unknown)} "
                             f"(one of {', '.join(DRAM_STORE_DEFAULTS)})")
        dram = {**DRAM_STORE_DEFAULTS, **dram}
        self.data_width, self.slots, self.elements, self.groups, self.jobs = data_width, slots, elements, groups, jobs
        beats = payload_beats(elements, data_width)
        self.row_bits = (beats - 1).bit_length()
        rec_base, _ = record_memory(data_width, slots=slots, elements=elements, base_address=dram["base_address"])
        depth = max(MIN_GATE_DEPTH, 1 << (2 * beats).bit_length())  # > two messages
        store = {k: dram[k] for k in ("base_address", "outstanding", "burst_beats", "burst_hold", "index_bits")}
        self.path = DecisionOnRecords(
            data_width, address_width=dram["address_width"], jobs=jobs, depth=depth, max_elements=elements,
            sums={"slots": slots, "row_bits": self.row_bits, **store},
            records={"base_address": rec_base, "outstanding": dram["outstanding"], "index_bits": dram["index_bits"]})
        mem = {n: mb for n, mb in self.path.signature.members.items() if n.startswith(AXI_PREFIX + "_")}
        super().__init__({**mem, "mem_error": Out(1), "result_withheld": Out(1), "record_error": Out(1),
                          "record_counters": Out(record_counters_layout()),
                          **reducer_ports(data_width, groups=groups, jobs=jobs)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        W, S, J = self.data_width, self.slots, self.jobs
        sb = (S - 1).bit_length()
        m.submodules.config = cfg = ReducerConfig(slots=S, groups=self.groups, jobs=J)
        m.d.comb += [cfg.job_cfg_in.eq(self.job_cfg), cfg.group_bitmap_in.eq(self.group_bitmap),
                     cfg.release_on_completion.eq(self.release_on_completion)]
        m.submodules.inputs = inp = InputStages(W, slots=S, elements=self.elements, groups=self.groups, jobs=J,
                                                vectors=False, records=True)
        wiring.connect(m, cfg.cfg, inp.cfg)
        wiring.connect(m, wiring.flipped(self.s_msg), inp.s_msg)
        m.submodules.request = rq = RecordRequest(W, slots=S, elements=self.elements, row_bits=self.row_bits)
        # the window reset stops the requests inside the record path, not at s_msg
        m.d.comb += [rq.p.eq(inp.p), rq.p_valid.eq(inp.p_valid), inp.take.eq(rq.take), inp.open.eq(1)]
        m.submodules.path = path = self.path
        wiring.connect(m, rq.beats, path.beats)
        wiring.connect(m, rq.req, path.req)
        axi4_forward(m, path, self, AXI_PREFIX)

        # each job's region (its records FREE, its head's slot) is reset whenever it changes, and
        # after reset (module docstring): ``dirty`` jobs before the control block's window resets
        region_of = [Cat(cfg.cfg.job_cfg[j].enable, cfg.cfg.job_cfg[j].base[:sb], cfg.cfg.log2_window[j])
                     for j in range(J)]
        last = [Signal(len(r), name=f"region_last{j}") for j, r in enumerate(region_of)]
        dirty = Signal(J, init=(1 << J) - 1)
        m.d.sync += [last[j].eq(region_of[j]) for j in range(J)]
        for j in range(J):
            m.d.comb += [path.region[j].base.eq(cfg.cfg.job_cfg[j].base[:sb]),
                         path.region[j].log2_window.eq(cfg.cfg.log2_window[j])]
        first_dirty = Signal(range(J))
        for j in reversed(range(J)):
            with m.If(dirty[j]):
                m.d.comb += first_dirty.eq(j)
        # the control block's window reset (a JOB_HEAD write) is registered before the path sees
        # it (``ctl``, ``ctl_valid``), so the path's ``reset.valid`` (its requests' and probe's
        # ``stop``) comes from flip-flops, not from the control block's state machine; the control
        # block's ``reset.ready`` (``ctl_done``) is a flip-flop set once the path has taken it, so
        # its JOB_HEAD read after the write still sees the new head (docs/large_slots.md, "The
        # record path's probe and control chains": two cycles more for a slow CONTROL operation)
        pr, cr = path.reset, self.reset
        ctl, ctl_valid, ctl_done = Signal(ResetLayout(J), name="ctl"), Signal(name="ctl_valid"), Signal(name="ctl_done")
        with m.If(cr.valid & ~ctl_valid & ~ctl_done):
            m.d.sync += [ctl.eq(cr.payload), ctl_valid.eq(1)]
        # the choice (a job's own reset, or the control block's) is held while it is offered
        offered, auto_r, job_r = Signal(), Signal(), Signal(range(J))
        auto = Mux(offered, auto_r, dirty != 0)
        auto_job = Mux(offered, job_r, first_dirty)
        m.d.sync += [offered.eq(pr.valid & ~pr.ready), auto_r.eq(auto), job_r.eq(auto_job)]
        head_now = select_job_entry(m, path.head, J, auto_job, "head_now")  # the job's current head
        m.d.comb += [pr.valid.eq(auto | ctl_valid), cr.ready.eq(ctl_done),
                     pr.payload.job.eq(Mux(auto, auto_job, ctl.job)),
                     pr.payload.head.eq(Mux(auto, head_now, ctl.head))]
        with m.If(ctl_valid & ~auto & pr.ready):
            m.d.sync += [ctl_valid.eq(0), ctl_done.eq(1)]
        with m.If(cr.valid & ctl_done):
            m.d.sync += ctl_done.eq(0)
        done = Mux(auto & pr.ready, Const(1, J) << auto_job, 0)
        changed = Cat(*[region_of[j] != last[j] for j in range(J)])
        m.d.sync += dirty.eq((dirty & ~done) | changed)

        # results: rows -> whole frames -> messages -> the gate (no result is offered to the gate
        # before its last row is in, none starts after a memory error or a record-path error)
        m.submodules.frames = frames = FrameFIFO(W, max_beats=payload_beats(self.elements, W))  # the longest result
        m.submodules.rows = rows = RowToMessage(W)
        m.submodules.gate = gate = ResultGate(W)
        wiring.connect(m, path.results, frames.s)
        wiring.connect(m, frames.m, rows.rows)
        wiring.connect(m, rows.m, gate.s)
        wiring.connect(m, gate.m, wiring.flipped(self.m_msg))
        # mem_error: either engine's AXI error response or a misrouted ID (sticky); record_error:
        # the record path's inconsistencies (sticky), after which a result may be wrong too
        m.d.comb += [gate.error.eq(path.mem_error | path.record_error), self.mem_error.eq(path.mem_error),
                     self.result_out.eq(gate.sent), self.result_withheld.eq(gate.withheld),
                     path.rsp.ready.eq(1)]  # the store's WRITE / ADD acknowledgements: not used here
        # STATUS.RECORD_ERROR: any inconsistency the record path reports (sticky), the heads
        # (JOBj_HEAD) and the probe (JOBj_PROBE_BITMAP: record READs with the slot's pending bit)
        m.d.comb += [self.record_error.eq(path.record_error), self.head.eq(path.head),
                     path.probe_job.eq(self.probe_job), path.probe_chunk.eq(self.probe_chunk),
                     self.probe_bitmap.eq(path.probe_bitmap), self.probe_ok.eq(path.probe_ok)]
        # the RECORD_ counters (wanreduce.regs)
        m.d.comb += [self.record_counters[name].eq(getattr(path, name)) for name in regs.RECORD_COUNTERS]
        # the outcome strobe, registered (counters only)
        m.d.sync += [self.outcome.eq(path.outcome_valid), self.outcome_code.eq(path.outcome)]
        return m
