"""Fixed-point reduction pipeline with BRAM reorder buffers and in-order / on-completion release.

Implements ``model.AggregatorModel.contribute`` bit-exactly for a stream of well-formed
CONTRIBUTION messages (payload beats, header on every beat). Datapath and hazards are described
in docs/reducer.md; the parts, one component per file:

* ``ReducerConfig`` (hdl/reducer_config.py): the configuration, registered;
* ``InputStages`` (hdl/reducer_input.py): input stages I and P, skid buffers (registered
  ``s_msg.ready``) that store each beat with its slot and its header/configuration decode;
* stages 0-2 (this file): stage 0 (P's output) computes everything stage 1 needs a cycle
  ahead for the beat that will be in stage 1 — tag comparisons against memory and both pending
  writes, head checks, pin checks, the release-scan vector — and registers it; stage 1 makes the
  outcome decision on the first beat (``decision_table``, hdl/decision.py: the checks, the model's
  order of checks and the outcome, combinational; the tag checks, hdl/stage1_tag_checks.py; the
  release run, hdl/release_run.py; pinning, hdl/pin_terms.py; room, hdl/stage_room.py; stage 2's
  commands, hdl/stage2_issue.py; the decision held for the message, hdl/held_decision.py; stage
  2's registers, hdl/stage2_control.py, and pushes, hdl/stage2_push.py; the window reset's effect,
  hdl/window_reset_effect.py; the result path's wiring, hdl/result_path.py; stage 1's registers,
  hdl/stage1_registers.py; the tag memory and its writes, hdl/tag_memory.py; the decision's effect
  on pending and the heads, hdl/decision_effect.py; pinning and stage 1's advance,
  hdl/pin_registers.py: functions built into this module, docs/reducer.md "Parts built inline"), correcting only for the decision of the
  previous cycle (its tag write, its effect on ``pending`` and the head) from registers; stage 2 is the per-lane
  saturating add or write of the row (forwarding the previous cycle's write), the sticky
  overflow per slot and the release-queue push with the last beat. In-order release is one
  combinational step: the chunk at the head completes, and the run of already-complete slots
  behind it (a per-slot ``pending`` bit vector, scanned in slot order with one carry chain) is
  released at once as one *range* entry of the release queue;
* ``ReleaseQueue`` (hdl/release_queue.py) and ``ResultEmitter`` (hdl/result_emitter.py): the
  queued entries expanded into RESULT messages through a small output FIFO. A slot referenced
  by the queue or the emitter is *pinned*: a contribution that would start a new chunk in it
  waits (the model emits instantly; the hardware must not overwrite a queued result);
* ``WindowReset`` (hdl/window_reset.py) and ``TagProbe`` (hdl/tag_probe.py).

One beat per cycle sustained, no hazard stalls; stage 1 stalls only for a full release queue,
a pinned slot, or a window reset. Requires disjoint job regions (``base .. base + window - 1``).
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .command_arbiter import CMD_DEPTH, CommandArbiter
from .decision import (
    decision_table,
    new_bitmap,
    prio_of,
    priority,
)
from .decision_effect import (
    effect_registers,
    head_check_registers,
    load_effect,
    pending_with_effect,
    update_heads,
)
from .dram_slot_store import AXI_PREFIX, DramSlotStore
from .held_decision import decided_entry, hold_decision
from .layouts import (
    lanes,
    payload_beats,
)
from .onchip_slot_store import OnChipSlotStore
from .params import DRAM_STORE_DEFAULTS, check_pending, check_slot_memory
from .pending_control import PendingControl
from .pending_effect import pending_effect
from .pending_words import PendingWords
from .pin_registers import adv_copies, advance_next, pin_sources
from .reducer_config import REGION_AT_CONFIG_MAX_SLOTS, ReducerConfig, slot_ahead
from .reducer_input import START_AT_P_MAX_SLOTS, InputStages
from .reducer_layouts import (
    OP_NONE,
    PriorityInputs,
    bits_for,
    slot_tag_layout,
)
from .reducer_ports import reducer_ports
from .release_queue import QUEUE_DEPTH, ReleaseQueue
from .release_run import (
    REST_AT_PUSH_MAX_SLOTS,
    RUN_NZ_OF_RUN_MAX_SLOTS,
    SCAN_FOLD_AT_SCAN_MAX_SLOTS,
    release_scans,
    rest_masks,
    run_of,
)
from .result_assembler import ResultAssembler
from .result_emitter import ResultEmitter
from .result_path import connect_emitter, connect_probe, result_output, share_tag_port
from .stage1_registers import load_stage1, stage1_registers
from .stage1_tag_checks import stage1_tag_checks
from .stage2_control import release_push, stage2_registers
from .stage2_push import stage2_push
from .stage_room import stage_room
from .tag_memory import tag_memory, tag_write_register, tag_write_select
from .tag_probe import TagProbe
from .window_reset import SLOT_REGISTER_MAX_SLOTS, WindowReset
from .window_reset_effect import pending_next, reset_drained, reset_heads

__all__ = ["Reducer"]

HDR_DEPTH = 16  # result headers waiting for their rows' responses, per source


class Reducer(wiring.Component):
    """The aggregator's reduction and reorder/release stage (see module docstring).

    Ports: ``s_msg`` (contributions in), ``m_msg`` (results out), ``group_bitmap``, ``job_cfg``,
    ``release_on_completion`` (configuration), ``reset`` (window reset stream), ``head`` (per job),
    ``outcome``/``outcome_code`` (one strobe per input message), ``result_out`` (one strobe per
    result message, on its first beat; with ``"dram"`` a cycle after it).

    ``slot_memory``: where the partial sums live (``hdl/params.py``, ``SLOT_MEMORIES``):
    ``"onchip"`` (``OnChipSlotStore``, block RAM) or ``"dram"`` (``DramSlotStore``; ``dram``
    overrides its parameters, ``DRAM_STORE_DEFAULTS``). With ``"dram"`` the reducer has the
    store's AXI4 master port ``m_axi_mem_*``, ``mem_error`` (sticky: an AXI error response) and
    ``result_withheld`` (one strobe per result not sent because it was assembled after
    ``mem_error``, ``hdl/result_gate.py``; a cycle after its first beat). With ``"dram"`` (vector
    pending) no first beat enters stage 1 in the cycle after a last beat left it (the gap: one
    cycle per back-to-back message, so stage 1's decision corrects for no decision in between;
    docs/reducer.md, "No decision in between").

    ``pending``: where the pending bits live (``hdl/params.py``, ``PENDING_STORES``): ``"vector"``
    (S flip-flops, the release scan over 2S bits in stage 0) or ``"words"`` (``PendingWords``:
    64-bit block-RAM words, a PEEK scan for the message decided next, SET / RELEASE / CLEAR;
    docs/reducer.md, "Pending words"), which holds a decision for a cycle after one that
    changed a pending bit, and while a scan runs past two words (``stall_pending``).
    """

    RUN_TABLE_MAX_SLOTS = 256
    # Up to this many slots the probe (JOBj_PROBE_BITMAP) reads the tag memory on a port of its
    # own; above it, it shares the emitter's, in the cycles the emitter has nothing to read or
    # hold (the emitter's reads unchanged; a probe answer may come later). yosys builds a memory
    # once per read port (a DP16KD copy has one write and one read port): two copies instead of
    # three, S x 164 bits fewer (issue 16 step 3). Read at elaboration: tests lower it.
    PROBE_TAG_PORT_MAX_SLOTS = 256
    # Above this many slots the on-chip reducer (vector pending) takes the DRAM reducer's cuts
    # that do not depend on the DRAM store (docs/benchmarks.md, session 45 s45e): the tag checks'
    # wide compares as carry chains (carry_eq), the live checks as one register (live_reg) and
    # the release scans' select from a copy of ~adv (scan_hold). At S 64 the tag memory is block
    # RAM (its clock-to-output 4.1 ns), the scans 4S bits wide. Up to it, the RTL as it was
    # (tests/test_default_rtl.py pins S 16).
    ONCHIP_CUTS_MAX_SLOTS = 16
    ONCHIP_TAG_LUT = True  # on chip above that, the decision's tag read from LUT RAM (elaborate; the tests' switch)

    def __init__(self, data_width: int, *, slots: int, elements: int, groups: int, jobs: int,
                 slot_memory: str = "onchip", pending: str = "vector", **dram: int) -> None:
        if slot_memory == "records":
            raise ValueError("slot_memory: 'records' is the record path's (RecordReducer, hdl/record_reducer.py); "
                             "the Reducer builds onchip or dram")
        self.pending = check_pending(pending)
        self.words = pending == "words"
        check_slot_memory(slot_memory, width=data_width, slots=slots, elements=elements, groups=groups,
                          jobs=jobs)
        unknown = sorted(set(dram) - set(DRAM_STORE_DEFAULTS)) if slot_memory == "dram" else sorted(dram)
        if unknown:
            raise ValueError(f"unknown slot store parameter(s) for slot memory {slot_memory}: "
                             f"{', '.join(unknown)} (dram: {', '.join(DRAM_STORE_DEFAULTS)})")
        self.slot_memory = slot_memory
        self.data_width, self.slots, self.elements = data_width, slots, elements
        self.groups, self.jobs = groups, jobs
        self.lanes = lanes(data_width)
        self.beats = payload_beats(elements, data_width)
        self.row_bits = (self.beats - 1).bit_length()  # rows per slot = 2**row_bits
        self.slot_bits = (slots - 1).bit_length()
        self.job_bits = bits_for(jobs)
        # Up to RUN_TABLE_MAX_SLOTS, per-slot tables in flip-flops (shorter paths): the release
        # run length from a distance table (S x log2 S), else an encoder and a subtractor; and
        # pinning from per-entry slot masks (about 9 x S), else chunk-distance comparisons.
        # (words: no per-slot vectors, so the comparisons at every S)
        self.run_table = slots <= self.RUN_TABLE_MAX_SLOTS and not self.words
        self.group_bits = bits_for(groups)
        # the partial sums: a slot store (hdl/slot_store_signature.py), built here so that its
        # memory port (DRAM) is known for the signature
        if slot_memory == "dram":
            # cmd_ready_copy: the command ready the emitter's start reads is not every command
            # bit's skid enable too (docs/benchmarks.md, session 43, the emitter's start)
            self.store = DramSlotStore(data_width, slots=slots, row_bits=self.row_bits, cmd_ready_copy=True,
                                       **{**DRAM_STORE_DEFAULTS, **dram})
            mem = {n: mb for n, mb in self.store.signature.members.items() if n.startswith(AXI_PREFIX + "_")}
            mem |= {"mem_error": Out(1), "result_withheld": Out(1)}
            # the control block's GROUP / JOB_CFG write strobe (ControlBlock.cfg_written): high
            # in each cycle group_bitmap / job_cfg differ from the last cycle's (early_decode's hold)
            mem |= {"cfg_written": In(1)}
        else:
            self.store = OnChipSlotStore(data_width, slots=slots, row_bits=self.row_bits)
            mem = {}
        super().__init__({**mem, **reducer_ports(data_width, groups=groups, jobs=jobs)})
        # Observability (not ports): s_msg held back because the slot a contribution would
        # start is still referenced by a queued/emitting result; or the release queue is full.
        self.stall_pinned = Signal()
        self.stall_queue = Signal()
        # words: a first beat in stage 1 waits for its PEEK (pending words, docs/reducer.md)
        self.stall_pending = Signal()
        self.advance = Signal()  # == ~stall_pinned (a register; the benches check they agree)
        # an emitter tag read whose data is used meets a write to the same address in the same
        # cycle, or a result's header is missing (never: the tag memory is built with
        # no_rw_check on that basis; the benches check it)
        self.rw_hazard = Signal()
        # a flip-flop copy differs from the expression it stands for (never: the benches
        # check it every cycle), or the command FIFO is pushed while full (never: ``room_c``)
        self.copy_error = Signal()

    # ---- elaboration -----------------------------------------------------------------------
    def elaborate(self, platform: object) -> Module:
        m = Module()
        W, S, L = self.data_width, self.slots, self.lanes
        sb, rb, jb = self.slot_bits, self.row_bits, self.job_bits
        beat_bits = max(1, rb)
        tag_layout = slot_tag_layout(self.jobs)

        probe_shares = S > self.PROBE_TAG_PORT_MAX_SLOTS  # the probe reads on the emitter's port
        # the slot tags (hdl/tag_memory.py): the decision's, the emitter's and the probe's read ports
        # DRAM (vector pending): the decision's tag read on two ports, the beat P would load and
        # the beat it holds, chosen after the read (below)
        split_read = self.slot_memory == "dram" and not self.words
        # the DRAM reducer's, and on chip above ONCHIP_CUTS_MAX_SLOTS (vector pending) those of its
        # cuts that do not depend on the DRAM store
        big_cuts = self.slot_memory == "dram" or (not self.words and S > self.ONCHIP_CUTS_MAX_SLOTS)
        # on chip above S 16 (big_cuts without DRAM; session 46): the decision's tag read from a LUT
        # RAM copy (flip-flops at its output), addressed through P's copy of skid_valid (slot_copy),
        # and the probe's read data registered before its compares (hdl/tag_probe.py registered_data)
        tag_lut = big_cuts and self.slot_memory != "dram" and self.ONCHIP_TAG_LUT
        tags = tag_memory(m, slots=S, jobs=self.jobs, probe_port=not probe_shares, load_port=split_read,
                          decision_lut=tag_lut)
        tag_rd, tag_rd_e, tag_wr, tag_rd_p = tags.rd, tags.rd_e, tags.wr, tags.rd_p
        # the partial sums: the slot store (built in __init__), its command port shared by the
        # contributions and the emitter's READs, its responses assembled into results
        m.submodules.store = store = self.store
        # DRAM: the command FIFO's "one entry" flag from a flip-flop (the head's path; on-chip as before)
        m.submodules.store_port = arb = CommandArbiter(W, store.address_bits,
                                                       registered_one=self.slot_memory == "dram")
        wiring.connect(m, arb.cmd, store.cmd)
        # DRAM: the result headers read asynchronously at the done FIFO's pointer (session 45), the
        # output skid buffer ping-pong (session 46)
        m.submodules.assembler = asm = ResultAssembler(W, slots=S, max_beats=self.beats,
                                                       hdr_c_depth=HDR_DEPTH, hdr_e_depth=HDR_DEPTH,
                                                       header_async=self.slot_memory == "dram",
                                                       valid_next=self.slot_memory == "dram",
                                                       ping_pong=self.slot_memory == "dram",
                                                       unguarded_hdr_e=self.slot_memory == "dram")
        wiring.connect(m, store.rsp, asm.rsp)

        head = [Signal(32, name=f"head{j}") for j in range(self.jobs)]
        for j in range(self.jobs):
            m.d.comb += self.head[j].eq(head[j])
        if not self.words:
            pending = Signal(S)  # slot is COMPLETE (done, waiting for in-order release)
        else:  # the pending bits as block-RAM words; bit ports: stage 1's own bit, the probe's
            m.submodules.pending_words = pw = PendingWords(slots=S, bit_ports=2)
            m.submodules.pending_control = pc = PendingControl(slots=S, jobs=self.jobs, job_bits=self.job_bits)
            wiring.connect(m, pc.op, pw.op)
            m.d.comb += [pw.rd_slot.eq(pc.rd_slot), pc.pw_run.eq(pw.run), pc.pw_done.eq(pw.done)]

        # ---- the parts ----
        # above S 16 each job's region registered with the configuration, not decoded in stage P
        region_cfg = not self.words and S > REGION_AT_CONFIG_MAX_SLOTS  # hdl/reducer_config.py
        m.submodules.config = cfg = ReducerConfig(slots=S, groups=self.groups, jobs=self.jobs, regions=region_cfg)
        m.d.comb += [cfg.job_cfg_in.eq(self.job_cfg), cfg.group_bitmap_in.eq(self.group_bitmap),
                     cfg.release_on_completion.eq(self.release_on_completion)]
        jc = cfg.cfg.job_cfg
        rest_ahead = bool(self.run_table and not self.words and S > REST_AT_PUSH_MAX_SLOTS)  # hdl/release_run.py
        # DRAM, and on chip above S 16: the queue holds each entry's next two slots for the
        # emitter's start (no job table between the queue's head and the start; docs/benchmarks.md,
        # session 37)
        held_slots = self.slot_memory == "dram" or rest_ahead
        emit = ResultEmitter(W, slots=S, elements=self.elements, jobs=self.jobs, masks=self.run_table,
                             shared_tag_port=probe_shares, held_next_slots=held_slots,
                             split_start=self.slot_memory == "dram", registered_tag_addr=self.slot_memory == "dram",
                             nslot_per_job=self.slot_memory == "dram")
        # the emitter reads its multi bits a cycle ahead at the queue head's next slot
        m.submodules.queue = queue = ReleaseQueue(slots=S, jobs=self.jobs, masks=self.run_table,
                                                  head_next=True, rest_in=rest_ahead, next_slots=held_slots)
        q_push, q_pop, q_count = queue.push, queue.pop, queue.count
        entry_layout = queue.entry_layout
        mask_d, mask_r = Signal(S), Signal(S)  # the decided entry's slots (its slot, its run)
        m.submodules.emitter = emit
        # above S 16 the reset's slot from a register, dropped from stage 1's pending bit after its select;
        # DRAM at every S (`window_reset.base` -> base + idx -> the clear mask -> the pending bits /
        # stage 1's, 8.04-8.75 ns at main db90a43's seeds 1 / 3, session 45)
        reset_ahead = not self.words and (S > SLOT_REGISTER_MAX_SLOTS or self.slot_memory == "dram")  # hdl/window_reset.py
        m.submodules.window_reset = rst = WindowReset(slots=S, jobs=self.jobs, slot_register=reset_ahead)
        m.submodules.probe = probe = TagProbe(slots=S, jobs=self.jobs, pending_bit=self.words,
                                              shared_port=probe_shares,
                                              registered_key=self.slot_memory == "dram",
                                              registered_data=tag_lut or self.slot_memory == "dram",
                                              held_first=self.slot_memory == "dram")
        m.submodules.inputs = inp = InputStages(W, slots=S, elements=self.elements, groups=self.groups,
                                                jobs=self.jobs, vectors=not self.words,
                                                start_at_i=not self.words and S > START_AT_P_MAX_SLOTS,
                                                region_at_cfg=region_cfg,
                                                ready_copy=self.slot_memory == "dram",
                                                slot_copy=split_read or tag_lut, early_decode=self.slot_memory == "dram",
                                                cfg_strobe=self.slot_memory == "dram",
                                                # DRAM: P's job / chunk / cw copies for the tag and head checks
                                                key_copies=2 if self.slot_memory == "dram" else 0)
        m.d.comb += [
            emit.job_cfg.eq(jc), rst.job_cfg.eq(jc), probe.job_cfg.eq(jc),
        ]
        wiring.connect(m, cfg.cfg, inp.cfg)
        if inp.early_decode:  # what the configuration registers load next (its change holds I's beat a cycle)
            m.d.comb += [inp.job_cfg_in.eq(self.job_cfg), inp.group_bitmap_in.eq(self.group_bitmap)]
        if inp.cfg_strobe:  # ... marked by the control block's write strobe, not a compare
            m.d.comb += inp.cfg_written.eq(self.cfg_written)
        wiring.connect(m, wiring.flipped(self.s_msg), inp.s_msg)
        wiring.connect(m, wiring.flipped(self.reset), rst.reset)
        # DRAM: the store's memory port is the reducer's; after a memory error no result leaves
        gate_err = result_output(m, self, asm, store, width=W, dram=self.slot_memory == "dram")  # hdl/result_path.py

        # ================= input stages (I, P) =================
        # Their registers are read directly: P's output (p) for stage 0, P's skid register and
        # I's output for the tag read address and P's next key (only flip-flops on those paths).
        i_d = inp.i_out
        p_v, p = inp.p_valid, inp.p
        ps_v, ps = inp.p_skid_valid, inp.p_skid
        take = Signal()  # stage 1 takes p this cycle
        p_load = ~p_v | take  # stage P's output register loads (its skid register or I's output)
        own_take = self.slot_memory == "dram" and not self.words  # stage P's take of its own (below)
        # DRAM (vector pending): the gap. No first beat enters stage 1 in the cycle after a last
        # beat left it (``nlast1``: ~(v1 & last1), a flip-flop worked out a cycle ahead, in
        # ``take``), so no decision and no tag write is made in the cycle before a first beat's
        # decision: stage 1's corrections for it (the live checks ``thit_h``, ``fx_c`` / ``fx_s``
        # and what they select) are constants, out of the decision loop (docs/reducer.md, "No
        # decision in between"). One cycle per message that follows another back to back.
        gap = own_take
        nlast1 = Signal(init=1, name="nlast1") if gap else None
        # with the gap, flip-flop copies of v1 & first1 & adv (the decision's registers' enable),
        # v1 & adv (stage 2's) and ~adv (the release scans' select), worked out with adv a cycle
        # ahead (advance_next, hdl/pin_registers.py): those ~340 loads no longer hang on adv's
        # net (`adv` -> v1 & adv -> decide -> `tag_r.bitmap`, 9.35 ns at main's seed 4, session 43)
        decide_c, move_c, hold_s = ((Signal(name="decide_c"), Signal(name="move_c"), Signal(name="scan_hold"))
                                    if gap else (None, None, None))
        if big_cuts and not gap:  # on chip above S 16: the scans' copy of ~adv alone (advance_next)
            hold_s = Signal(name="scan_hold")
        # ... and scan_hold_hi, ~adv for the scans' upper half of slots (scan_hold: the lower half)
        # (on chip above S 16 too, session 47: `scan_hold` -> the scans 9.29 ns at the 64 x 256 core's seed 1)
        hold_hi = Signal(name="scan_hold_hi") if big_cuts and not self.words else None
        # ... and copies of adv (advance_next): its own loop (loop), decide_c / move_c (dec), the
        # room registers and nlast1 (room), the tag checks' thit_* (thit) each select by one of
        # their own, not by adv's net (`adv` -> 4.9 ns route -> `room_c` ... -> `adv`, seed 3)
        acp = adv_copies() if gap else None

        def gated(t: Value) -> Value:  # a take term with the gap (the on-chip RTL as it was)
            return t & nlast1 if gap else t

        m.d.comb += [*([] if own_take else [inp.take.eq(take)]), inp.open.eq(~rst.stop), rst.in_msg.eq(inp.in_msg)]

        # ================= stage 0 (p: the beat entering stage 1) =================
        f = p.beat
        h0 = f.hdr
        slot0, wmask0 = p.slot, p.wmask
        cw0 = p.cw
        if not self.words:
            region0 = p.region
            oh0 = p.oh  # slot0, one-hot
            lm0 = p.lm  # slots below start0 (thermometer)

        # ================= stage 1 registers (hdl/stage1_registers.py) =================
        s1 = stage1_registers(p, width=W, slots=S, beat_bits=beat_bits, vectors=not self.words,
                              run_table=self.run_table)
        v1, first1, last1, h1, d1, idx1, slot1, start1 = (s1.v1, s1.first1, s1.last1, s1.h1, s1.d1, s1.idx1,
                                                           s1.slot1, s1.start1)
        if not self.words:
            oh1, lm1, region1 = s1.oh1, s1.lm1, s1.region1  # slot1 one-hot, slots below start1, region
        dist_tab1, bit1, unconf1, nonmem1, cwrite1 = s1.dist_tab1, s1.bit1, s1.unconf1, s1.nonmem1, s1.cwrite1
        wmask, chunk_p1, cw1, nbm1_1 = s1.wmask, s1.chunk_p1, s1.cw1, s1.nbm1_1
        delta1, deltaw1, d_hz1, dw_hz1 = s1.delta1, s1.deltaw1, s1.d_hz1, s1.dw_hz1  # head forwarding
        delta_n, deltaw_n = s1.delta_n, s1.deltaw_n
        v2 = Signal()  # stage 2 (add + data write) holds a beat
        last2 = Signal()  # ... the last of its message (its release entry, if any, is pushed now)
        push_now = Signal()  # the release entry (entry_r, still the message's) is pushed now
        push_r = Signal()  # the decision pushes a release entry (held for the message)
        entry_r = Signal(entry_layout)  # that entry (``more``: the run, used if runs_now)
        # stage 1 moves on this cycle (not stalled on a pinned slot): a flip-flop, worked out a
        # cycle ahead from the next values of v1, first1 and pin_r (it enables hundreds of
        # stage-0/1 registers and multiplexers across the reducer)
        adv_reg = Signal(init=1, name="adv")
        # words: stage 1 also waits for its first beat's PEEK (gate, below): adv is then the
        # register and that, combinational
        adv = Signal(name="adv_w") if self.words else adv_reg

        # Room for the entries stage 1 and stage 2 may still push, as flip-flops computed a
        # cycle ahead (conservatively: any last beat leaving stage 1 counts as a push), without
        # an adder (hdl/stage_room.py); and room in the slot-store command FIFO and the assembler's
        # header FIFO for every beat in stages 1 and 2 and one more (each pushes one entry at most
        # into each), so a dropped ``cmd.ready`` holds the input
        # DRAM (vector pending): stage P's output register loads from a take of its own (take_p ==
        # take: hold_t == ~adv, room_t == room, from inverted copies), one LUT from flip-flops
        # that drive little else; take's LUTs from adv (hundreds of loads) and room were two
        # levels before the 6-ns enable net of P's register (10.14 ns at session 38's seed 2).
        # With the gap room_t is room & nlast1 (room_cn loads the FIFOs' room and nlast1's next
        # value, take choosing last): `nlast1` -> P's enable was 8.79 ns at main db90a43's seed 5
        # (session 45); copy_error checks room_t == room & nlast1
        # (the gap: the room registers and nlast1 from adv's copy adv_room, take_room == take)
        adv_rm, take_rm = (acp.room, Signal(name="take_room")) if gap else (adv, take)

        def nlast1_next(t: Value) -> Value:  # (the gap) ~(v1 & last1) next cycle, stage 1 taking t
            return ~Mux(adv_rm, t & f.last, v1 & last1)

        room, _, _, room_t = stage_room(m, count=q_count, depth=QUEUE_DEPTH, push=q_push, leave=v1 & last1 & adv_rm,
                                        pop=q_pop, levels=[(arb.level, CMD_DEPTH), (asm.hdr_c_level, HDR_DEPTH)],
                                        v1=v1, v2=v2, take=take_rm, copy=own_take,
                                        # nlast1's next value (below) with take 1 / 0
                                        copy_gate=(nlast1_next(Const(1)), nlast1_next(Const(0))) if gap else None)
        # P's load for the tag read address alone, from an inverted copy of adv (hold_t): take and
        # P's load enable hundreds of registers and adv more, so the address's 4 LUTs get a cone
        # of their own. Inverted: yosys merges identical flip-flops.
        hold_t = Signal()
        p_load_t = p_load if self.words else ~p_v | gated(~hold_t & room)
        m.d.comb += [
            take.eq(gated(p_v & adv & room)),
            self.stall_queue.eq(~room),
        ]
        if own_take:
            m.d.comb += inp.take.eq(p_v & ~hold_t & room_t)  # room_t: room & nlast1 (gap == own_take)
        if gap:  # v1 & last1 next cycle: stage 1 loads on adv (v1: take, last1: p's last)
            m.d.comb += take_rm.eq(gated(p_v & adv_rm & room))
            m.d.sync += nlast1.eq(nlast1_next(take_rm))
        load_stage1(m, s1, p, take=take, adv=adv)
        rd_load = None  # DRAM: (tag_ld_r, the load port's data), for stage1_tag_checks
        if not split_read:
            m.d.comb += [
                # re-read every cycle (stage 1's own slot/row while it holds), so the data read is
                # always one cycle old and the bypass registers cover exactly what it missed
                # the tag is read a cycle ahead: for the beat at p's output next cycle
                # every source is a flip-flop (stage I computed the slot of the beat P may load)
                # (tag_lut: the skid's / I's slot chosen by P's copy of skid_valid, p_load_slot, not by ps_v)
                tag_rd.addr.eq(Mux(p_load_t, inp.p_load_slot if tag_lut else Mux(ps_v, ps.slot, i_d.slot), p.slot)),
                tag_rd.en.eq(1),
            ]
        else:
            # both candidates read every cycle (each read one cycle old, as above) and the one
            # for the beat at p's output chosen by P's load a cycle ago (ld_r): P's load (take:
            # adv, room) no longer reaches the memory's address (skid_valid -> the address
            # multiplexer -> the LUT RAM -> tag_rd__data, 9.67-9.93 ns placed, docs/benchmarks.md
            # session 39). Both ports' data are checked and ld_r chooses the checks' results
            # (stage1_tag_checks), not the data (session 40)
            ld_r = Signal(name="tag_ld_r")
            m.d.sync += ld_r.eq(p_load_t)
            m.d.comb += [
                # the load port's address selected by P's own copy of skid_valid (InputStages slot_copy)
                tags.rd_l.addr.eq(inp.p_load_slot), tags.rd_l.en.eq(1),
                # (DRAM: P's slot from its copy for the tag checks, InputStages key_copies)
                tag_rd.addr.eq(inp.p_key[0].slot if inp.key_copies else p.slot), tag_rd.en.eq(1),
            ]
            rd_load = (ld_r, tags.rd_l.data)
        row1 = Cat(idx1[:rb], slot1) if rb else slot1

        # ---- last-write bypass (the only read-after-write distance is one cycle) ----
        # Tag writes go through a register (tw): the decision ends in flip-flops, not in the tag
        # memory's write port; the tag memory is written one cycle later (hdl/tag_memory.py).
        tw = tag_write_register(m, tag_wr, tag_layout=tag_layout, slot_bits=sb)
        tb_data, tw_en, tw_addr, tw_data, tw_v, tw_a, tw_d = (tw.tb_data, tw.tw_en, tw.tw_addr, tw.tw_data, tw.tw_v,
                                                              tw.tw_a, tw.tw_d)

        # ================= stage 1: decision (first beat) =================
        bit = bit1
        in_order = cfg.cfg.in_order  # registered like the job and group tables
        # The previous decision's effect on ``pending`` and its job's head is applied one cycle
        # late, from registers (fx_*), so the decision ends in a few flip-flops rather than in
        # S pending bits and J heads; this decision sees that effect through forwarding.
        # the last cycle's decision completed a chunk in in-order mode at its job's head (fx_c:
        # release run, new head) or behind it (fx_s: set its pending bit)
        # (hdl/decision_effect.py; inverted copies fxw_cn / fxw_sn for the wide fan-out)
        fx = effect_registers(slots=S, job_bits=jb, vectors=not self.words,
                              hi1=self.slot_memory == "dram")  # DRAM: fx_cp1[sb:] + 1 (hdl/head_check.py eq_hn_split)
        fx_c, fx_s, fxw_cn, fxw_sn, fx_job = fx.fx_c, fx.fx_s, fx.fxw_cn, fx.fxw_sn, fx.fx_job
        # what stage 1's decision reads of the decision in between: none with the gap (above)
        fx_c_d, fx_s_d = (Const(0, 1), Const(0, 1)) if gap else (fx_c, fx_s)
        if not self.words:  # the S pending bits and the two 2S-bit scans of stage 0
            pend_eff = pending_with_effect(m, fx, pending)  # pending with the last decision applied
            # the release scans' inputs, a cycle ahead, without and with stage 1's own pending bit
            # (above S 16 folded after the register, with region1: the region the scan used, loaded on adv)
            # (the gap: selected by scan_hold, a copy of ~adv; `adv` -> the scans -> `clr`, session 43's seed 4)
            sp = release_scans(m, pend_eff, adv=~hold_s if hold_s is not None else adv, oh0=oh0, oh1=oh1, lm0=lm0, lm1=lm1,
                               region0=region0, region1=region1, run_nz=S > RUN_NZ_OF_RUN_MAX_SLOTS,
                               late_fold=S > SCAN_FOLD_AT_SCAN_MAX_SLOTS, region_r=region1,
                               **({"adv_hi": ~hold_hi} if hold_hi is not None else {}))  # hdl/release_run.py
            fz_a, clr_a, fz_b, clr_b = sp.fz_a, sp.clr_a, sp.fz_b, sp.clr_b
        # Head checks (chunk - head: sign = late; (chunk - 2**lw) - head: sign = inside the
        # window; chunk == head) are computed a cycle ahead, for the beat that will be in
        # stage 1, against the heads as they will be then (the register with the pending
        # effect fx applied). The decision made in the cycle the beat enters stage 1 is
        # forwarded: checks against its new head (chunk + 1 + run) from delta1/deltaw1.
        # DRAM: against every job's head, the job choosing the results after the carry chains
        # (P's payload -> the head select -> chunk - head -> hc_r.late, 9.20 ns at session 39's seed 2)
        # DRAM: stage 0's job / chunk / cw from P's copy for them (InputStages key_copies; `inputs.m__payload`
        # -> `hc_r.at_head` 8.05 ns at main 3a66ba7's seed 3)
        kh = inp.p_key[1] if inp.key_copies else None
        hc_r = head_check_registers(m, fx, head, adv=adv, job0=(kh.job if kh is not None else h0.job_id)[:jb],
                                    chunk0=h0.chunk if kh is None else kh.chunk, cw0=cw0 if kh is None else kh.cw,
                                    job1=h1.job_id[:jb], chunk1=h1.chunk, cw1=cw1,
                                    per_job=self.slot_memory == "dram",  # hdl/head_check.py
                                    carry_eq=self.slot_memory == "dram",  # the equalities as carry chains
                                    hold=hold_t if own_take else None)  # DRAM: by the copy of ~adv
        fwd_job1 = fx_job == h1.job_id[:jb]  # the last decision was stage 1's job's
        fwd_head = fx_c_d & fwd_job1
        # sign of delta - run without a 32-bit subtract: run < 2**sb, so only a borrow out of the
        # low sb bits changes the upper bits, and it reaches bit 31 only if bits sb..30 are zero
        # (the low-bit compares with the run registered with fx_run: run_lt / run_ltw / run_eq)
        # run_eq (and sset_p below) unnamed, as in 6d9e5c0's netlist (the pinned RTLIL)
        run_lt, run_ltw, run_eq = fx.run_lt, fx.run_ltw, fx.run_eq
        late_f = delta1[31] ^ (run_lt & d_hz1)
        wneg_f = deltaw1[31] ^ (run_ltw & dw_hz1)
        late = Mux(fwd_head, late_f, hc_r.late)
        oow = ~late & ~Mux(fwd_head, wneg_f, hc_r.below_end)
        # stage 1's pending bit, from three flip-flops set a cycle ahead (below): the bit of the
        # next pending register, and whether the decision made then clears (its release run) or
        # sets (its own slot) it; fx_c / fx_s say whether it did (no S:1 multiplexer here)
        if not self.words:
            pre_p, cclr_p, sset_p = Signal(), Signal(), Signal(name="$signal")
        else:
            # words: the bit read a cycle ahead at the slot stage 1 holds now (pw.rd_bit[0]); no
            # decision in the last cycle changed a pending bit (its operation held the PEEK)
            pre_p, cclr_p, sset_p = Signal(), Const(0, 1), Const(0, 1)
            m.d.comb += pre_p.eq(pw.rd_bit[0])
        pend1 = pending_effect(pre_p, fx_c_d & cclr_p, fx_s_d & sset_p)  # hdl/pending_effect.py

        # ---- the slot's tag: comparisons made a cycle ahead ----
        # The tag is read one cycle before the beat reaches stage 0 (p's output), so in stage 0
        # the read misses the write of the last cycle (tb) and the one in progress (tw): the
        # comparisons with the beat's header are made against the three in parallel, the newest
        # is selected and only the boolean results (and the bitmap) are registered for stage 1.
        # Stage 1 adds the one write still missing, the tag the decision of the previous cycle
        # requested (tw now), from registers. While stage 1 holds, its merged result is kept.
        tag_r = Signal(tag_layout)  # the tag decided on a message's first beat, for its last
        # (the gap: P's load for the read address's choice from adv's copy adv_thit, == p_load)
        p_load_th = ~p_v | gated(p_v & acp.thit & room) if gap else p_load
        h0_t = None  # DRAM: stage 0's header with job / chunk from P's copy for the tag checks (key_copies)
        if inp.key_copies:
            h0_t = Signal(h0.shape(), name="h0_t")
            m.d.comb += [h0_t.eq(h0), h0_t.job_id.eq(inp.p_key[0].job), h0_t.chunk.eq(inp.p_key[0].chunk)]
        tck = stage1_tag_checks(m, h0=h0, h1=h1, jb=jb, p=p, h0_t=h0_t, p_load=p_load_th, ps_v=ps_v, ps_slot=ps.slot,
                                i_slot=i_d.slot, rd_data=tag_rd.data, tb_data=tb_data, tw_en=tw_en,
                                tw_addr=tw_addr, tw_v=tw_v, tw_a=tw_a, tw_d=tw_d, tw_data=tw_data,
                                slot0=slot0, first1=first1, bit=bit, adv=adv, tag_r=tag_r, rd_load=rd_load,
                                live_reg=big_cuts, gap=gap,
                                carry_eq=big_cuts)  # cadd as carry chains
        ck, bm, ck_pre, ck_live, ck_x = tck.ck, tck.bm, tck.ck_pre, tck.ck_live, tck.ck_x
        thit_h, tw_hit0, tw_vn_l = tck.thit_h, tck.tw_hit0, tck.tw_vn_l
        same = ck.same

        # ---- in-order release run: complete slots right behind the head ----
        # Scanned in slot order, no rotations: slots outside the job's region count as pending
        # (transparent), the vector is doubled so the scan wraps, bits below the start slot are
        # forced to 1, and one carry chain finds the first in-region slot that is not pending
        # (the completing slot itself at the latest). The carry chain runs in stage 0 on both
        # input vectors (scan_slots, hdl/release_run.py); stage 1 turns both first-zero positions into run
        # lengths and selects with fx_s.
        run = Signal(sb)
        if not self.words:
            clr = Signal(S)  # slots released behind the head
            rk = {"start": start1, "wmask": wmask, "dist_tab": dist_tab1}  # hdl/release_run.py
            run_a, run_b = run_of(m, fz_a, "a", **rk), run_of(m, fz_b, "b", **rk)
            if gap:  # fx_s is 0 at every first beat: the scans without the bit it sets
                m.d.comb += [run.eq(run_a), clr.eq(clr_a)]
            else:
                m.d.comb += [run.eq(Mux(fxw_sn, run_a, run_b)), clr.eq(Mux(fxw_sn, clr_a, clr_b))]
        else:
            # words: the run is the PEEK's for the first beat in stage 1 (PendingControl issues
            # it a cycle ahead); without its answer stage 1 holds (gate)
            m.d.comb += [run.eq(pc.run), adv.eq(adv_reg & pc.gate), self.stall_pending.eq(~pc.gate)]

        # the outcome code for the counters is worked out a cycle later from the registered
        # inputs (separate logic, so it does not pull the decision towards the counters; the
        # decision below computes none of these nets: it works out each case of its late inputs)
        if not self.words and sp.nz_a is not None:  # registered with the scans (above S 16)
            # == run != 0 (copy_error: more_nz_r vs entry_r.more)
            run_nz = sp.nz_a if gap else Mux(fxw_sn, sp.nz_a, sp.nz_b)
        elif not self.words:
            run_nz = run_a != 0 if gap else Mux(fxw_sn, run_a != 0, run_b != 0)  # run != 0
        else:
            run_nz = pc.run != 0
        op_r, queued_r = Signal(2, name="op_r"), Signal(name="queued_r")
        # stage 1's flags for the decision (DecisionFlags' fields; decision_table, below)
        # (the gap: adv is read only in push_c's valid & adv, where move_c == v1 & adv does)
        dflags = SimpleNamespace(valid=v1, first=first1, last=last1, adv=move_c if gap else adv, unconf=unconf1,
                                 nonmem=nonmem1, in_order=in_order, cwrite=cwrite1, op_r_nz=op_r != OP_NONE, queued_r=queued_r,
                                 run_nz=run_nz)
        prio_r = Signal(PriorityInputs)
        m.d.sync += prio_r.eq(prio_of(ck, pend1, late, oow, dflags))
        code, _, _ = priority(m, prio_r)
        # op_r: the message's data op held for its later beats (decided on its first beat);
        # queued_r: its release entry goes to the emitter (below, with the decision's registers)

        # ---- the decision as a table of its late inputs (cut 10; hdl/decision.py) ----
        # Every input of stage 1's outcome is a flip-flop at the start of the decision cycle, but
        # three of them are loaded by the previous decision: thit_h (the checks' source: the tag
        # that decision wrote, ck_live, or stage 0's, ck_pre) and fx_c / fx_s (it completed a
        # chunk at its job's head / behind it: stage 1's pending bit and forwarded head). The
        # outcome (DecisionOutcome) is worked out for each of the six cases from the other
        # flip-flops alone, and those three pick at the last multiplexers (decision_table): no
        # net of the decision is shared before them, and the checks' flip-flops reach every
        # endpoint through the case's logic only (cut 9's seeds 3 / 7 / 8: ck_pre -> prio_in ->
        # queued_d -> push_c 8.44 ns).
        out = decision_table(m, ck_pre=ck_pre, ck_live=ck_live, head=hc_r, fwd_job=fwd_job1,
                             head_fwd=SimpleNamespace(late=late_f, below_end=wneg_f, at_head=(delta1[sb:] == 0) & run_eq),
                             pending=SimpleNamespace(bit=pre_p, clr=cclr_p, set=sset_p), flags=dflags,
                             late=None if gap else SimpleNamespace(live=thit_h, fx_c=fx_c, fx_s=fx_s),
                             push_c_short=self.slot_memory == "dram")  # hdl/decision.py
        op, resend, op_c_nz = Signal(2, name="op"), Signal(name="resend"), Signal(name="op_c_nz")
        done_new, push_d, queued_d = Signal(name="done_new"), Signal(name="push_d"), Signal(name="queued_d")
        fxc_n, fxs_n, push_c_n = Signal(name="fxc_n"), Signal(name="fxs_n"), Signal(name="push_c_n")
        m.d.comb += [op.eq(out["op"]), resend.eq(out["resend"]), done_new.eq(out["done"]),
                     push_d.eq(out["push"]), queued_d.eq(out["queued"]), fxc_n.eq(out["fxc"]),
                     fxs_n.eq(out["fxs"]), op_c_nz.eq(out["opc_nz"]), push_c_n.eq(out["push_c"])]
        # The tag is written only for ADD (same chunk) and WRITE (not the same chunk), so its
        # bitmap follows from ``same`` alone (thit_h's select of the two sources).
        new_bm = new_bitmap(m, same, bm, bit)

        # ---- pinning: a queued / emitting result holds its slot's data ----
        # Registered: pin_r is computed one cycle ahead for the beat that will be in stage 1,
        # against the queue, the entry in stage 2 and the emitter as they are now. Entries only
        # move queue -> emitter -> gone, so that is a superset of the next cycle's pins (at
        # worst a hold one cycle longer) except for the entry the decision of this cycle
        # pushes into stage 2; that one is matched live (few levels) next cycle.
        # (hdl/pin_registers.py; the held slots as masks up to RUN_TABLE_MAX_SLOTS, else chunk distances)
        pin = pin_sources(m, masks=self.run_table, entries=[queue.entries[i] for i in range(QUEUE_DEPTH)],
                          occupied=queue.occupied, held_mask=queue.held_mask, push_now=push_now, entry_r=entry_r,
                          mask_r=mask_r, emit=emit, slot0=slot0, slot1=slot1, h0=h0, h1=h1, wmask0=wmask0, wmask=wmask,
                          jb=jb)
        pin_r = pin.pin_r
        pinned = pin_r  # (+ the entry stage 1 pushes this cycle: below, with the decision)
        m.d.comb += [
            # conservative (any first beat on a pinned slot waits, not only a start): keeps the
            # decision off the hold signal that enables the stage-0 reads and stage-1 registers
            self.stall_pinned.eq(v1 & first1 & pinned),
            self.advance.eq(adv_reg),
        ]

        # decisions held for the later beats of the message (hdl/held_decision.py): the entry (its
        # ``more``: the run whatever the decision, off the decision path) and its slot mask
        entry_d, tag_d = decided_entry(m, entry_layout=entry_layout, tag_layout=tag_layout, h1=h1, jb=jb, slot1=slot1,
                                       resend=resend, done_new=done_new, nbm1=nbm1_1, new_bm=new_bm, run=run,
                                       **({"mask_d": mask_d, "oh1": oh1, "clr": clr} if not self.words else {}))

        # Pinning by the entry stage 1 may push into stage 2 this cycle (with its last beat), for
        # the beat taken into stage 1 now. On a first beat, without waiting for the decision
        # (conservative): a different chunk on the same slot (the same chunk never starts
        # anything), or a slot the release run would free (slots in clr: COMPLETE, behind the
        # head, in the same region, so no job compare). Else the entry held since the
        # message's first beat.
        # The pair checks (p's beat against stage 1's) are flip-flops compared a cycle ahead between
        # the beats that will be there, with ``take`` only at the last multiplexer: no comparator or
        # subtractor between the stage-P registers and adv / pin_r (hdl/pin_registers.py).
        advance_next(m, pin, p_load=p_load, skid_valid=ps_v, skid_hdr=ps.beat.hdr, in_hdr=i_d.beat.hdr, h0=h0, h1=h1,
                     adv=adv, wmask0=wmask0, wmask=wmask, jb=jb, slot0=slot0, slot1=slot1, entry_more=entry_r.more,
                     v1=v1, first1=first1, last1=last1, push_r=push_r, p_v=p_v, room=gated(room),
                     first=f.first,
                     adv_reg=adv_reg, hold_t=hold_t, **({"clr": clr, "oh0": oh0} if not self.words else {"run": run}),
                     # the gap: no live term (no pair checks) and the copies decide_c / move_c
                     gap=(decide_c, move_c, hold_s, hold_hi) if gap else None,
                     scan_hold=(hold_s, hold_hi) if big_cuts and not gap else None, copies=acp)

        decide = v1 & first1 & adv
        decide_h = decide_c if gap else decide  # the held decision's enable (copy_error checks the copy)
        # the outcome strobe is registered (counters only; off the decision path)
        # two cycles after the decision, from flip-flops (the counters sit far away)
        # copies for stage 2's command-FIFO write enable, so it comes from flip-flops alone:
        # emit_r == push_r & ~entry_r.resent, more_nz_r == (entry_r.more != 0)
        # queued_r: the message's release entry goes to the emitter (a resend, or a completion
        # at the head in order whose run is not empty). An emitting decision (push_d & ~resend)
        # releases its run exactly when it completes at the head in order (fx_c next cycle), so
        # that is ``in_order`` now; copy_error checks it against fx_c the cycle after.
        hd = hold_decision(m, decide=decide_h, code=code, outcome=self.outcome, outcome_code=self.outcome_code, op=op,
                           push_d=push_d, entry_d=entry_d, tag_d=tag_d, resend=resend, run_nz=run_nz, queued_d=queued_d,
                           op_r=op_r, push_r=push_r, entry_r=entry_r, tag_r=tag_r, queued_r=queued_r,
                           **({"mask_r": mask_r, "mask_d": mask_d} if self.run_table else {}))
        decide_r, emit_r, more_nz_r = hd.decide_r, hd.emit_r, hd.more_nz_r
        # DRAM: the slot of the run behind an emitting message (its chunk + 1's) held from the
        # decision (stage 1's start1), so stage 2's push reads no job table: entry_r.job -> the
        # table -> slot_of -> the queue's rest masks and head was the Versa DRAM build's core
        # path (9.74 ns, docs/benchmarks.md, session 36); copy_error checks it (run_err)
        # Above S 16 likewise (rest_ahead), with the queue's rest masks registered at the decision
        run_slot_r = run_err = rest = ahead = None
        if rest_ahead:
            rest = rest_masks(m, decide=decide_h, mask_d=mask_d, oh1=oh1, lm1=lm1)  # hdl/release_run.py
        if self.slot_memory == "dram" or rest_ahead:
            run_slot_r, run_err = Signal(sb, name="run_slot_r"), Signal(name="run_err")
            with m.If(decide_h):
                m.d.sync += run_slot_r.eq(start1)
        if self.slot_memory == "dram":
            # ... and its chunk + 2 / + 3's, for the queue's next slots: entry_r.job -> the job
            # table -> slot_of -> q_nslot* was the Versa DRAM build's path (8.73 ns, session 37)
            ahead = (Signal(sb, name="run_slot2_r"), Signal(sb, name="run_slot3_r"))
            with m.If(decide_h):
                m.d.sync += [r.eq(slot_ahead(slot1, h1.chunk, wmask, k)) for k, r in ((2, ahead[0]), (3, ahead[1]))]
        # effect on pending bits and the head, applied next cycle (the decision-independent
        # parts registered every cycle, the decision itself in fx_c / fx_s)
        # fx_c / fx_s feed back into the next decision (pend1, the head forwarding): their next
        # values are two of the decision table's outcomes (fxc_n, fxs_n); the gap: on decide_c
        # (`adv` -> decide -> `fxw_cn` 8.05 ns at main's seed 2, session 44)
        load_effect(m, fx, decide=decide_h, in_order=in_order, fxc_n=fxc_n, fxs_n=fxs_n, job=h1.job_id[:jb], run=run,
                    chunk_p1=chunk_p1, adv=adv, delta_n=delta_n, delta1=delta1, deltaw_n=deltaw_n, deltaw1=deltaw1,
                    **({"clr": clr, "oh1": oh1} if not self.words else {}))
        update_heads(m, fx, head)  # the new head (fx_hn) a cycle after the decision

        # ================= stage 1 -> stage 2: slot-store commands =================
        # Stage 2 turns each beat with a data operation into a WRITE (a chunk's first
        # contribution) or an ADD command, off the decision path; the store answers every
        # command with the row's new value. A message whose decision releases its chunk now
        # (completion at the head, or on completion) is marked ``emit``: those responses are the
        # result rows, its header goes to the assembler with the last row.
        # stage 2's registers (hdl/stage2_control.py; has_cmd and push_c: flip-flop copies, the
        # command FIFO's write enable from one flip-flop)
        s2 = stage2_registers(m, v1=v1, adv=adv, first1=first1, last1=last1, op=op, op_r=op_r, op_c_nz=op_c_nz,
                              push_c_n=push_c_n, count=h1.element_count, idx=idx1, row1=row1, d1=d1, slot1=slot1,
                              v2=v2, last2=last2, width=W, n_lanes=L, slot_bits=sb, move=move_c)
        has_cmd, push_c, op2 = s2.has_cmd, s2.push_c, s2.op2
        # Stage 2 pushes the entry of its message's decision from entry_r/push_r: they are not
        # overwritten before, as the next message's first beat is decided one cycle later at
        # the earliest. Whether the entry is queued for the emitter is queued_r (from the decision).
        rp = release_push(m, last2=last2, push_r=push_r, push_now=push_now, first1=first1, tag_d=tag_d, tag_r=tag_r,
                          queued_r=queued_r, emit_r=emit_r, more_nz_r=more_nz_r, decide_r=decide_r, fx_c=fx_c)
        tag_c, emit2, queued, runs_now, queued_x = rp.tag_c, rp.emit2, rp.queued, rp.runs_now, rp.queued_x
        copy_err = (
            (has_cmd != (v2 & (op2 != OP_NONE))) | (last2 & ~v2) | (emit_r != (push_r & ~entry_r.resent))
            | (more_nz_r != (entry_r.more != 0)) | (arb.push & (arb.level == CMD_DEPTH))
            | (queued != queued_x) | (push_c != (has_cmd | queued))
            | (queued & ~emit2 & runs_now)  # a resend's entry never carries a run
            | (hold_t == adv_reg) | (fxw_cn == fx_c) | (fxw_sn == fx_s) | (tw_vn_l == tw_v)
            | (decide & (ck.as_value() != ck_x.as_value())) | (tw_hit0 != (tw_en & (tw_addr == slot0)))
            | arb.copy_error | emit.copy_error | asm.copy_error)
        if run_err is not None:
            copy_err = copy_err | run_err
        if own_take:
            copy_err = copy_err | (room_t != (room & nlast1 if gap else room))
        if gap:  # the copies, and no decision or tag write in between at a first beat in stage 1
            copy_err = (copy_err | (nlast1 != ~(v1 & last1)) | (v1 & first1 & (thit_h | fx_c | fx_s | ~tw_vn_l))
                        | (decide_c != decide) | (move_c != (v1 & adv)) | (hold_s == adv) | (hold_hi == adv)
                        | Cat(*(c != adv for c in vars(acp).values())).any())
        elif hold_s is not None:  # on chip above S 16: the scans' copies of ~adv
            copy_err = copy_err | (hold_s == adv)
            if hold_hi is not None:
                copy_err = copy_err | (hold_hi == adv)
        if inp.ready_copy or inp.slot_copy or inp.cfg_strobe:  # stage I's skid enable (I's ready), P's skid_valid,
            # copies; the configuration write strobe (a change it missed)
            copy_err = copy_err | inp.copy_error
        if self.slot_memory == "dram":  # the DRAM store's command skid enable, a copy (cmd_ready_copy)
            copy_err = copy_err | store.copy_error | gate_err  # (and the result gate's valid_reg)
            copy_err = copy_err | (fx.fx_hi1 != (fx.fx_cp1[sb:] + 1)[:32 - sb])  # (the head checks' fx_hi1)
            copy_err = copy_err | (fx.fx_lo != fx.fx_cp1[:sb] + fx.fx_run)  # (and fx_lo, session 48)
        m.d.comb += self.copy_error.eq(copy_err | pc.error if self.words else copy_err)
        # stage 2's command, result header and release entry (hdl/stage2_push.py)
        stage2_push(m, arb=arb, asm=asm, queue=queue, s2=s2, push_c=push_c, has_cmd=has_cmd, queued=queued, emit2=emit2,
                    last2=last2, push_now=push_now, tag_r=tag_r, entry_r=entry_r, mask_r=mask_r, job_cfg=jc,
                    jobs=self.jobs, slots=S, dram=self.slot_memory == "dram", emit_last=emit.last,
                    run_slot=run_slot_r, run_err=run_err, rest=rest, ahead=ahead)

        # ================= window reset =================
        rst_wr, rst_slot = rst.clear, rst.slot
        # (hdl/window_reset_effect.py)
        drained = reset_drained(empty=inp.empty, v1=v1, v2=v2, q_count=q_count, emit_busy=emit.busy,
                                rest_left=emit.rest_left, store_idle=arb.idle)
        m.d.comb += rst.drained.eq(drained & pw.idle if self.words else drained)
        reset_heads(m, head, valid=self.reset.ready, job=self.reset.payload.job, head=self.reset.payload.head)
        if not self.words:
            # pending: the last decision's effect, or (window reset, no decisions) the region cleared
            pending_next(m, pending, pend_eff, clear=rst_wr, clear_slot=rst_slot, clr=clr, adv=adv, slot0=slot0,
                         slot1=slot1, pre_p=pre_p, cclr_p=cclr_p, sset_p=sset_p, clear_apart=reset_ahead)
        else:
            m.d.comb += [
                pc.adv.eq(adv), pc.take.eq(take), pc.v1.eq(v1), pc.first1.eq(first1), pc.first_in.eq(f.first),
                pc.job_in.eq(h0.job_id[:jb]), pc.job1.eq(h1.job_id[:jb]), pc.slot1.eq(slot1),
                pc.slot_n1.eq(Mux(adv, slot0, slot1)), pc.decide.eq(decide), pc.in_order.eq(in_order),
                pc.fxc_n.eq(fxc_n), pc.fxs_n.eq(fxs_n), pc.fx_c.eq(fx_c), pc.fx_s.eq(fx_s),
                pc.reset_clear.eq(rst_wr), pc.reset_job.eq(self.reset.payload.job),
                pc.probe_slot.eq(probe.rd_addr), pc.log2_window.eq(cfg.cfg.log2_window),
                *[pc.job_base[j].eq(cfg.cfg.job_cfg[j].base[:sb]) for j in range(self.jobs)],
            ]

        # a reset writes FREE, else a message's last beat its tag (hdl/tag_memory.py)
        tag_write_select(m, tw, tw_hit0=tw_hit0, clear=rst_wr, clear_slot=rst_slot, v1=v1, adv=adv, last1=last1,
                         op_c_nz=op_c_nz, slot1=slot1, slot0=slot0, tag_c=tag_c)

        # ================= emitter =================
        # (hdl/result_path.py)
        connect_emitter(m, emit, queue=queue, arb=arb, asm=asm, tag_rd=tag_rd_e, tag_wr=tag_wr, tw_v=tw_v, tw_a=tw_a,
                        tw_d=tw_d, own_port=not probe_shares, slots=S, rw_hazard=self.rw_hazard)
        if probe_shares:  # the probe reads while the emitter can neither start nor needs its tag held
            share_tag_port(m, emit, probe, tag_rd_e, q_count)

        # ================= probe =================
        connect_probe(m, self, probe, tag_rd=tag_rd_e if probe_shares else tag_rd_p, tag_wr=tag_wr,
                      own_port=not probe_shares, pending=pw.rd_bit[1] if self.words else pending)
        return m
