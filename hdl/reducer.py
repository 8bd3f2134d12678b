"""Fixed-point reduction pipeline with BRAM reorder buffers and in-order / on-completion release.

Implements ``model.AggregatorModel.contribute`` bit-exactly for a stream of well-formed
CONTRIBUTION messages (payload beats, header on every beat). Datapath and hazards are described
in docs/reducer.md; in short:

* input stage P: a skid buffer (registered ``s_msg.ready``) that stores each beat with its
  header/configuration decode (slot, region, members, ...); the slot's tag is read a cycle ahead;
* stage 0 (P's output): everything stage 1 needs is computed a cycle ahead for the beat that
  will be in stage 1 — tag comparisons against memory and both pending writes, head checks,
  pin checks, the release-scan vector — and registered;
* stage 1: the outcome decision on the first beat, correcting only for the decision of the
  previous cycle (its tag write, its effect on ``pending`` and the head) from registers; the tag
  is written through a register one cycle later, ``pending``/head updates are applied one cycle
  later too (forwarded to the next decision);
* stage 2: per-lane saturating add or write of the row (forwarding the previous cycle's write),
  sticky overflow per slot, release-queue push with the last beat;
* in-order release is one combinational step: the chunk at the head completes, and the run of
  already-complete slots behind it (a per-slot ``pending`` bit vector, scanned in slot order with
  one carry chain) is released at once as one *range* entry of the release queue;
* an emitter expands queue entries into RESULT messages through a small output FIFO. A slot
  referenced by the queue or the emitter is *pinned*: a contribution that would start a new chunk
  in it waits (the model emits instantly; the hardware must not overwrite a queued result).

One beat per cycle sustained, no hazard stalls; stage 1 stalls only for a full release queue,
a pinned slot, or a window reset. Requires disjoint job regions (``base .. base + window - 1``).
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from wanreduce import wire
from wanreduce.model import Outcome

from .layouts import (
    AggHeaderLayout,
    JobCfgLayout,
    ResetLayout,
    lanes,
    message_beat_layout,
    message_stream,
    payload_beats,
)
from .params import check_core_params
from .saturating_adder import SaturatingAdder
from .skid_buffer import SkidBuffer

__all__ = ["Reducer"]

# Stored slot state. COMPLETE and RELEASED share DONE; the per-slot ``pending`` bit (COMPLETE,
# waiting for in-order release) tells them apart, so a release never writes the tag memory.
_FREE, _ACTIVE, _DONE = 0, 1, 2
# Data operation of a message (decided on its first beat).
_OP_NONE, _OP_WRITE, _OP_ADD = 0, 1, 2

QUEUE_DEPTH = 4  # release-queue entries (each entry may cover a whole run of chunks)
FIFO_DEPTH = 4  # result beats buffered toward m_msg


def _bits(n: int) -> int:
    """Bits to hold 0..n-1 (at least 1)."""
    return max(1, (n - 1).bit_length())


class Reducer(wiring.Component):
    """The aggregator's reduction and reorder/release stage (see module docstring).

    Ports: ``s_msg`` (contributions in), ``m_msg`` (results out), ``group_bitmap``, ``job_cfg``,
    ``release_on_completion`` (configuration), ``reset`` (window reset stream), ``head`` (per job),
    ``outcome``/``outcome_code`` (one strobe per input message), ``result_out`` (one strobe per
    result message, on its first beat).
    """

    RUN_TABLE_MAX_SLOTS = 256

    def __init__(self, data_width: int, *, slots: int, elements: int, groups: int, jobs: int) -> None:
        check_core_params(width=data_width, slots=slots, elements=elements, groups=groups, jobs=jobs)
        self.data_width, self.slots, self.elements = data_width, slots, elements
        self.groups, self.jobs = groups, jobs
        self.lanes = lanes(data_width)
        self.beats = payload_beats(elements, data_width)
        self.row_bits = (self.beats - 1).bit_length()  # rows per slot = 2**row_bits
        self.slot_bits = (slots - 1).bit_length()
        self.job_bits = _bits(jobs)
        # Up to RUN_TABLE_MAX_SLOTS, per-slot tables in flip-flops (shorter paths): the release
        # run length from a distance table (S x log2 S), else an encoder and a subtractor; and
        # pinning from per-entry slot masks (about 9 x S), else chunk-distance comparisons.
        self.run_table = slots <= self.RUN_TABLE_MAX_SLOTS
        self.group_bits = _bits(groups)
        super().__init__({
            "s_msg": In(message_stream(data_width)),
            "m_msg": Out(message_stream(data_width)),
            "group_bitmap": In(data.ArrayLayout(32, groups)),
            "job_cfg": In(data.ArrayLayout(JobCfgLayout, jobs)),
            "release_on_completion": In(1),
            "reset": In(stream.Signature(ResetLayout(jobs))),
            "head": Out(data.ArrayLayout(32, jobs)),
            "outcome": Out(1),
            "outcome_code": Out(4),
            "result_out": Out(1),
            # JOBj_PROBE_BITMAP (wanreduce.regs): the contributor bitmap of chunk probe_chunk of
            # job probe_job while held unreleased, else 0; probe_ok: probe_bitmap answers the
            # probe_job/probe_chunk of this cycle (a few cycles after they change)
            "probe_job": In(range(jobs)),
            "probe_chunk": In(32),
            "probe_bitmap": Out(32),
            "probe_ok": Out(1),
        })
        # Observability (not ports): s_msg held back because the slot a contribution would
        # start is still referenced by a queued/emitting result; or the release queue is full.
        self.stall_pinned = Signal()
        self.stall_queue = Signal()
        self.advance = Signal()  # == ~stall_pinned (a register; the benches check they agree)
        # an emitter read whose data is used meets a write to the same address in the same cycle
        # (never: the memories are built with no_rw_check on that basis; the benches check it)
        self.rw_hazard = Signal()

    # ---- helpers -------------------------------------------------------------------------
    def _job_cfg(self, m: Module, table: list, idx, name: str):
        """Explicit mux of the (registered) job table (zero for an index outside it)."""
        cfg = Signal(JobCfgLayout, name=name)
        with m.Switch(idx):
            for j in range(self.jobs):
                with m.Case(j):
                    m.d.comb += cfg.eq(table[j])
        return cfg

    def _slot_of(self, cfg, chunk):
        """``(base + (chunk & (window - 1))) & (S - 1)``."""
        sb = self.slot_bits
        wmask = Cat(*[cfg.log2_window > i for i in range(sb)])
        return (cfg.base[:sb] + (chunk[:sb] & wmask))[:sb]

    def _probe(self, m: Module, jc: list, rd, wr, pending: Signal) -> None:
        """JOBj_PROBE_BITMAP through a tag read port of its own, off the data path: the probed
        slot registered (c0), its tag read (c1), the answer registered (c2). A read that meets a
        tag write to its address is not used (no_rw_check: undefined data); the pipeline runs
        every cycle, so the next read answers. ``probe_ok`` ties the answer to the key it was
        read for, so the control block never takes an answer for another job or chunk."""
        jb = self.job_bits
        cfg = self._job_cfg(m, jc, self.probe_job, "cfg_probe")
        p_slot, r_slot, r_coll, v_ok = Signal(self.slot_bits), Signal(self.slot_bits), Signal(), Signal()
        p_job, r_job, v_job = Signal(jb), Signal(jb), Signal(jb)
        p_chunk, r_chunk, v_chunk = Signal(32), Signal(32), Signal(32)
        t = rd.data
        held = ((t.state == _ACTIVE) | ((t.state == _DONE) & pending.bit_select(r_slot, 1))) \
            & (t.job == r_job) & (t.chunk == r_chunk)
        m.d.sync += [
            p_slot.eq(self._slot_of(cfg, self.probe_chunk)), p_job.eq(self.probe_job),
            p_chunk.eq(self.probe_chunk),
            r_slot.eq(p_slot), r_job.eq(p_job), r_chunk.eq(p_chunk),
            r_coll.eq(wr.en & (wr.addr == p_slot)),
            self.probe_bitmap.eq(Mux(held, t.bitmap, 0)), v_job.eq(r_job), v_chunk.eq(r_chunk),
            v_ok.eq(~r_coll),
        ]
        m.d.comb += [rd.addr.eq(p_slot), rd.en.eq(1),
                     self.probe_ok.eq(v_ok & (v_job == self.probe_job) & (v_chunk == self.probe_chunk))]

    # ---- elaboration -----------------------------------------------------------------------
    def elaborate(self, platform: object) -> Module:
        m = Module()
        W, S, L = self.data_width, self.slots, self.lanes
        sb, rb, jb, gb = self.slot_bits, self.row_bits, self.job_bits, self.group_bits
        beat_bits = max(1, rb)

        tag_layout = data.StructLayout({
            "state": 2, "job": jb, "round": 32, "chunk": 32, "group": 8,
            "scale": AggHeaderLayout["scale_exp"].shape, "count": 16, "bitmap": 32,
            "session": AggHeaderLayout["session"].shape,
            "nbm1": 17,  # payload beats - 1, so the emitter needs no arithmetic on the tag
        })
        # ``more``: chunks released after ``chunk`` by this entry (a run), so the count is more + 1
        entry_layout = data.StructLayout({"job": jb, "chunk": 32, "slot": sb, "more": sb, "resent": 1})

        # Left to the tools (block RAM on the ECP5). Forcing LUT RAM up to 256 slots (for the
        # block RAM's ~4 ns clock-to-output) gained nothing measurable (55.0 vs 53.7 MHz at
        # S=64, within placement noise) and left nextpnr's router congested on the Versa build.
        # ``no_rw_check``: no read port's result is used when it reads the address written in
        # the same cycle (the decision's ports bypass the write in progress: thit_w0, dhit0; the
        # emitter reads a queued result's slot, which is pinned: not written while queued, and
        # its last write is the cycle before the emitter can start it; a window reset waits
        # for the emitter to drain). Without it yosys adds read/write address comparators and
        # an output multiplexer to every block RAM port to emulate read-old-data on collision.
        no_rw = {"no_rw_check": 1}
        m.submodules.tag_mem = tag_mem = Memory(shape=tag_layout, depth=S, init=[], attrs=no_rw)
        m.submodules.data_mem = data_mem = Memory(shape=unsigned(W), depth=S << rb, init=[], attrs=no_rw)
        tag_rd = tag_mem.read_port(transparent_for=())  # decision (stage 0 -> 1)
        tag_rd_e = tag_mem.read_port(transparent_for=())  # emitter
        tag_wr = tag_mem.write_port()
        tag_rd_p = tag_mem.read_port(transparent_for=())  # JOBj_PROBE_BITMAP
        data_rd = data_mem.read_port(transparent_for=())  # read-modify-write
        data_rd_e = data_mem.read_port(transparent_for=())  # emitter
        data_wr = data_mem.write_port()

        head = [Signal(32, name=f"head{j}") for j in range(self.jobs)]
        for j in range(self.jobs):
            m.d.comb += self.head[j].eq(head[j])
        pending = Signal(S)  # slot is COMPLETE (done, waiting for in-order release)

        # ---- release queue (registers: every entry is compared for pinning) ----
        q = [Signal(entry_layout, name=f"q{i}") for i in range(QUEUE_DEPTH)]
        q_rptr = Signal(range(QUEUE_DEPTH))
        q_wptr = Signal(range(QUEUE_DEPTH))
        q_count = Signal(range(QUEUE_DEPTH + 1))
        q_push = Signal()
        q_pop = Signal()
        q_in = Signal(entry_layout)
        # per-slot masks of the slots each entry holds (S <= RUN_TABLE_MAX_SLOTS): the decided
        # entry's (mask_d: its slot, plus the release run it carries), held with entry_r, per
        # queue entry, and the emitter's (current chunk, chunks left)
        mask_d, mask_r = Signal(S), Signal(S)
        q_mask = [Signal(S, name=f"q_mask{i}") for i in range(QUEUE_DEPTH)] if self.run_table else []
        rest_mask, e_oh = Signal(S), Signal(S)
        # the head entry q[q_rptr] as a register (off the emitter's read-address path): the
        # next head is the entry after it on a pop, or the entry pushed into that position
        q_head = Signal(entry_layout)
        q_arr = Array([e.as_value() for e in q])
        q_rptr1 = (q_rptr + 1)[: len(q_rptr)]
        m.d.sync += q_head.eq(Mux(q_pop, Mux(q_push & (q_wptr == q_rptr1), q_in, q_arr[q_rptr1]),
                                  Mux(q_push & (q_wptr == q_rptr), q_in, q_head)))
        with m.If(q_push):
            for i in range(QUEUE_DEPTH):
                with m.If(q_wptr == i):
                    m.d.sync += q[i].eq(q_in)
                    if q_mask:
                        m.d.sync += q_mask[i].eq(mask_r)
            m.d.sync += q_wptr.eq(q_wptr + 1)
        with m.If(q_pop):
            m.d.sync += q_rptr.eq(q_rptr + 1)
        m.d.sync += q_count.eq(q_count + q_push - q_pop)

        # ---- window-reset engine state ----
        rst_busy = Signal()  # clearing the region
        rst_idx = Signal(sb + 1)
        in_msg = Signal()  # s_msg has accepted a non-last beat of a message

        # ---- emitter state ----
        # The chunk being emitted (beat 0 issued, its tag now on tag_rd_e.data) ...
        e_busy = Signal()
        e_job = Signal(jb)
        e_chunk = Signal(32)
        e_resent = Signal()
        e_beat = Signal(beat_bits + 1)  # next beat to issue
        # ... and the rest of its queue entry (chunks not started yet).
        rest_job = Signal(jb)
        rest_chunk = Signal(32)
        rest_left = Signal(sb + 1)
        rest_nz = Signal()  # rest_left != 0, as a register
        rest_resent = Signal()
        rest_slot = Signal(sb)  # slot of rest_chunk (registered, off the read-address path)
        e_slot = Signal(sb)

        # ================= input stages (I, P) =================
        # Stage I: a skid buffer (hdl/skid_buffer.py: registered ready, registered output) taking
        # s_msg and computing each beat's slot, so that the tag read issued for the beat P loads
        # has a flip-flop as its address. Stage P: the same kind of skid buffer holding each beat
        # with everything that depends only on its header and the configuration, decoded on the
        # way in: stage 0 then starts from flip-flops. Its output is taken into stage 1 when
        # stage 1 moves on (``adv``) and the queue and the window-reset engine allow it.
        s = self.s_msg
        beat_layout = message_beat_layout(W)
        dec_layout = data.StructLayout({
            "beat": beat_layout, "idx": beat_bits, "slot": sb, "start": sb, "wmask": sb,
            "region": S, "oh": S, "lm": S, "members": 32, "bit": 32, "unconf": 1, "nonmem": 1, "cwrite": 1,
            "chunk_p1": 32, "cw": 32, "nbm1": 17,
        })
        # per job, registered from the job table: log2 window clamped to the slot memory and
        # the window mask (configuration takes effect one cycle after it is written)
        lwc_j = [Signal(range(sb + 1), name=f"lwc{j}") for j in range(self.jobs)]
        wm_j = [Signal(sb, name=f"wm{j}") for j in range(self.jobs)]
        # The job and group tables are registered here (they come from the control block, across
        # the chip): configuration takes effect one cycle after it is written.
        jc = [Signal(JobCfgLayout, name=f"jc{j}") for j in range(self.jobs)]
        gm = [Signal(32, name=f"gm{g}") for g in range(self.groups)]
        g_single = [Signal(name=f"g_single{g}") for g in range(self.groups)]  # one member only
        g_nz = [Signal(name=f"g_nz{g}") for g in range(self.groups)]  # configured (members != 0)
        for j in range(self.jobs):
            m.d.sync += jc[j].eq(self.job_cfg[j])
        for g in range(self.groups):
            gin = self.group_bitmap[g]
            m.d.sync += [gm[g].eq(gin), g_single[g].eq((gin != 0) & ((gin & (gin - 1)) == 0)),
                         g_nz[g].eq(gin != 0)]
        for j in range(self.jobs):
            lw_in = self.job_cfg[j].log2_window
            m.d.sync += [lwc_j[j].eq(Mux(lw_in > sb, sb, lw_in)),
                         wm_j[j].eq(Cat(*[lw_in > i for i in range(sb)]))]
        beat_cnt = Signal(beat_bits)
        # stage I (its output i_d feeds P's decode)
        in_layout = data.StructLayout({"beat": beat_layout, "idx": beat_bits, "slot": sb})
        m.submodules.stage_i = stage_i = SkidBuffer(in_layout)
        i_v, i_d = stage_i.m.valid, stage_i.m.payload  # its output register
        is_v = stage_i.skid_valid
        i_rdy = stage_i.s.ready  # == ~is_v, as its own flip-flop
        i_in = Signal(in_layout)
        hs = s.payload.hdr
        slot_s = Signal(sb)  # the slot, for every job in parallel, then selected by the job
        with m.Switch(hs.job_id[:jb]):
            for j in range(self.jobs):
                with m.Case(j):
                    m.d.comb += slot_s.eq((jc[j].base[:sb] + (hs.chunk[:sb] & wm_j[j]))[:sb])
        m.d.comb += [i_in.beat.eq(s.payload), i_in.idx.eq(Mux(s.payload.first, 0, beat_cnt)),
                     i_in.slot.eq(slot_s)]
        hi = i_d.beat.hdr
        cfg_i = self._job_cfg(m, jc, hi.job_id[:jb], "cfg_i")
        lw_i = Signal(range(sb + 1))
        wm_i = Signal(sb)
        with m.Switch(hi.job_id[:jb]):
            for j in range(self.jobs):
                with m.Case(j):
                    m.d.comb += [lw_i.eq(lwc_j[j]), wm_i.eq(wm_j[j])]
        members_i = Signal(32)
        mem_i = Signal()  # the sender is a member
        single_i = Signal()
        nz_i = Signal()
        sender_ok = hi.sender_id < wire.MAX_SENDERS
        with m.Switch(hi.group_id[:gb]):
            for g in range(self.groups):
                with m.Case(g):
                    m.d.comb += [members_i.eq(gm[g]), mem_i.eq(gm[g].bit_select(hi.sender_id[:5], 1)),
                                 single_i.eq(g_single[g]), nz_i.eq(g_nz[g])]
        bit_i = Signal(32)
        m.d.comb += bit_i.eq(Mux(sender_ok, Const(1, 32) << hi.sender_id[:5], 0))
        dec_in = Signal(dec_layout)
        start_i = Signal(sb)
        m.d.comb += start_i.eq((cfg_i.base[:sb] + ((hi.chunk[:sb] + 1) & wm_i))[:sb])
        m.d.comb += [
            dec_in.beat.eq(i_d.beat),
            dec_in.idx.eq(i_d.idx),
            dec_in.slot.eq(i_d.slot),
            # for the in-order release scan: the slot of chunk + 1 and the job's region
            dec_in.start.eq(start_i),
            # the slot one-hot and the slots below the start (thermometer), decoded here so the
            # release scan in stage 0 starts from flip-flops
            dec_in.oh.eq(Const(1, S) << i_d.slot),
            dec_in.lm.eq(Cat(*[start_i > i for i in range(S)])),
            dec_in.wmask.eq(wm_i),
            dec_in.region.eq(Cat(*[  # slot i is in the job's region: (i - base) mod S < 2**lw
                (((Const(i, sb + 1) - cfg_i.base[:sb])[:sb] >> lw_i) == 0) if sb else Const(1)
                for i in range(S)
            ])),
            dec_in.members.eq(members_i),
            dec_in.bit.eq(bit_i),
            dec_in.unconf.eq(~((hi.job_id < self.jobs) & cfg_i.enable & (hi.group_id < self.groups)
                               & nz_i)),
            # (members & bit) == 0 and bit == members, without 32-bit reductions (cwrite only
            # matters for a configured group, members != 0)
            dec_in.nonmem.eq(~(sender_ok & mem_i)),
            dec_in.cwrite.eq(sender_ok & mem_i & single_i),  # a first contribution completes the chunk
            dec_in.chunk_p1.eq(hi.chunk + 1),
            # window check without a shifter: chunk - head >= 2**lw <=> (chunk - 2**lw) - head >= 0
            dec_in.cw.eq(hi.chunk - (Const(1, sb + 1) << lw_i)),
            dec_in.nbm1.eq(((hi.element_count + L - 1) >> (L.bit_length() - 1)) - 1),
        ]
        m.submodules.stage_p = stage_p = SkidBuffer(dec_layout)
        p_v, p = stage_p.m.valid, stage_p.m.payload  # its output register
        ps_v, ps = stage_p.skid_valid, stage_p.skid  # its skid register
        p_rdy = stage_p.s.ready  # == ~ps_v, as its own flip-flop
        take = Signal()  # stage 1 takes p this cycle
        p_load = ~p_v | take  # stage P's output register loads (its skid register or I's output)
        accept = Signal()  # s_msg transfer
        # reset.valid through a register (cleared on the ready pulse); a window reset stops
        # s_msg at the next message boundary, then waits for everything accepted to drain
        rst_req = Signal()
        m.d.sync += rst_req.eq(self.reset.valid & ~self.reset.ready)
        reset_block = rst_req & ~in_msg
        in_open = ~reset_block & ~rst_busy  # s_msg may move this cycle
        m.d.comb += [
            s.ready.eq(i_rdy & in_open),
            accept.eq(s.valid & s.ready),
            stage_i.s.valid.eq(s.valid & in_open),
            stage_i.s.payload.eq(i_in),
            # I -> P (P's input: I's output register decoded), P -> stage 1 when it takes p
            stage_p.s.valid.eq(i_v),
            stage_p.s.payload.eq(dec_in),
            stage_i.m.ready.eq(p_rdy),
            stage_p.m.ready.eq(take),
        ]
        with m.If(accept):
            m.d.sync += [beat_cnt.eq(i_in.idx + 1), in_msg.eq(~s.payload.last)]

        # ================= stage 0 (p: the beat entering stage 1) =================
        f = p.beat
        h0 = f.hdr
        idx0 = p.idx
        slot0, start0, wmask0, region0 = p.slot, p.start, p.wmask, p.region
        cw0 = p.cw
        dhit0 = Signal()
        oh0 = p.oh  # slot0, one-hot
        lm0 = p.lm  # slots below start0 (thermometer)

        # ================= stage 1 registers =================
        v1 = Signal()
        first1 = Signal()
        last1 = Signal()
        h1 = Signal(AggHeaderLayout)
        d1 = Signal(W)
        idx1 = Signal(beat_bits)
        slot1 = Signal(sb)
        start1 = Signal(sb)
        oh1 = Signal(S)  # slot1, one-hot
        lm1 = Signal(S)  # slots below start1 (thermometer)
        dist_tab1 = [Signal(sb, name=f"dist_tab{i}") for i in range(S)] if self.run_table else []
        bit1 = Signal(32)
        unconf1 = Signal()
        nonmem1 = Signal()
        cwrite1 = Signal()  # a first contribution completes the chunk (single member)
        wmask = Signal(sb)  # window - 1 (the log2 window clamped to the slot memory)
        chunk_p1 = Signal(32)  # h1.chunk + 1
        cw1 = Signal(32)  # h1.chunk - 2**lw
        # relative to the chunk decided in the cycle this beat entered stage 1 (head forwarding):
        delta1 = Signal(32)  # h1.chunk - (that chunk + 1)
        deltaw1 = Signal(32)  # cw1 - (that chunk + 1)
        d_hz1 = Signal()  # delta1[sb:31] == 0 (a borrow from the low bits reaches the sign)
        dw_hz1 = Signal()  # deltaw1[sb:31] == 0
        delta_n = (h0.chunk - chunk_p1)[:32]  # delta1 / deltaw1 for p's beat
        deltaw_n = (cw0 - chunk_p1)[:32]
        nbm1_1 = Signal(17)
        dhit1 = Signal()  # same for the data row
        v2 = Signal()  # stage 2 (add + data write) holds a beat
        last2 = Signal()  # ... the last of its message (its release entry, if any, is pushed now)
        push_now = Signal()  # the release entry (entry_r, still the message's) is pushed now
        push_r = Signal()  # the decision pushes a release entry (held for the message)
        entry_r = Signal(entry_layout)  # that entry (``more``: the run, used if runs_now)
        region1 = Signal(S)
        # stage 1 moves on this cycle (not stalled on a pinned slot): a flip-flop, worked out a
        # cycle ahead from the next values of v1, first1 and pin_r (it enables hundreds of
        # stage-0/1 registers and multiplexers across the reducer)
        adv = Signal(init=1)

        # the messages in stage 2 (counted) and stage 1 may still push one entry each
        # Room for the entries stage 1 and stage 2 may still push, as a flip-flop computed a
        # cycle ahead (conservatively: any last beat leaving stage 1 counts as a push).
        room = Signal()
        # (the emitter's pop enters at the last multiplexer: it is the latest of the inputs)
        q_sum = q_count + q_push + (v1 & last1 & adv)
        m.d.sync += room.eq(Mux(q_pop, q_sum < QUEUE_DEPTH, q_sum < QUEUE_DEPTH - 1))
        m.d.comb += [
            take.eq(p_v & adv & room),
            self.stall_queue.eq(~room),
        ]
        with m.If(adv):
            m.d.sync += [
                v1.eq(take),
                first1.eq(f.first),
                last1.eq(f.last),
                h1.eq(h0),
                d1.eq(f.data),
                idx1.eq(idx0),
                slot1.eq(slot0),
                start1.eq(start0),
                oh1.eq(oh0),
                lm1.eq(lm0),
                *[dist_tab1[i].eq((Const(i, sb) - start0)[:sb] & wmask0) for i in range(len(dist_tab1))],
                bit1.eq(p.bit),
                unconf1.eq(p.unconf),
                nonmem1.eq(p.nonmem),
                cwrite1.eq(p.cwrite),
                wmask.eq(wmask0),
                chunk_p1.eq(p.chunk_p1),
                cw1.eq(cw0),
                delta1.eq(delta_n),
                deltaw1.eq(deltaw_n),
                d_hz1.eq(delta_n[sb:31] == 0),
                dw_hz1.eq(deltaw_n[sb:31] == 0),
                nbm1_1.eq(p.nbm1),
                region1.eq(region0),
            ]
        m.d.comb += [
            # re-read every cycle (stage 1's own slot/row while it holds), so the data read is
            # always one cycle old and the bypass registers cover exactly what it missed
            # the tag is read a cycle ahead: for the beat at p's output next cycle
            # every source is a flip-flop (stage I computed the slot of the beat P may load)
            tag_rd.addr.eq(Mux(p_load, Mux(ps_v, ps.slot, i_d.slot), p.slot)),
            tag_rd.en.eq(1),
            data_rd.en.eq(1),
        ]
        row1 = Cat(idx1[:rb], slot1) if rb else slot1

        # ---- last-write bypass (the only read-after-write distance is one cycle) ----
        tb_data = Signal(tag_layout)  # the last tag written
        db_v, db_addr, db_data = Signal(), Signal(len(data_wr.addr)), Signal(W)
        with m.If(tag_wr.en):
            m.d.sync += tb_data.eq(tag_wr.data)
        # Tag writes go through a register (tw): the decision ends in flip-flops, not in the tag
        # memory's write port; the tag memory is written one cycle later.
        tw_en, tw_addr, tw_data = Signal(), Signal(sb), Signal(tag_layout)  # write requested
        tw_v, tw_a, tw_d = Signal(), Signal(sb), Signal(tag_layout)  # being written now
        m.d.sync += [tw_v.eq(tw_en), tw_a.eq(tw_addr), tw_d.eq(tw_data)]
        m.d.comb += [tag_wr.en.eq(tw_v), tag_wr.addr.eq(tw_a), tag_wr.data.eq(tw_d)]
        with m.If(data_wr.en):
            m.d.sync += [db_v.eq(1), db_addr.eq(data_wr.addr), db_data.eq(data_wr.data)]
        # hit = the row read in stage 0 is written this cycle (the read misses it) or was the
        # last one written: computed at stage 0, registered, so stage 1 only selects
        row0 = Cat(idx0[:rb], slot0) if rb else slot0
        row_rd = Signal(len(data_wr.addr))
        m.d.comb += [row_rd.eq(Mux(adv, row0, row1)), data_rd.addr.eq(row_rd)]
        m.d.sync += dhit1.eq(dhit0)
        m.d.comb += [
            # (per row in parallel, adv's choice of the row at the last multiplexer)
            dhit0.eq(Mux(adv, *[Mux(data_wr.en, data_wr.addr == r, db_v & (db_addr == r)) for r in (row0, row1)])),
        ]
        old1 = Signal(W)
        m.d.comb += old1.eq(Mux(dhit1, db_data, data_rd.data))

        # ================= stage 1: decision (first beat) =================
        bit = bit1
        in_order = Signal(init=1)  # registered here like the job and group tables
        m.d.sync += in_order.eq(~self.release_on_completion)
        # The previous decision's effect on ``pending`` and its job's head is applied one cycle
        # late, from registers (fx_*), so the decision ends in a few flip-flops rather than in
        # S pending bits and J heads; this decision sees that effect through forwarding.
        # the last cycle's decision completed a chunk in in-order mode at its job's head (fx_c:
        # release run, new head) or behind it (fx_s: set its pending bit)
        fx_c = Signal()
        fx_s = Signal()
        fx_job = Signal(jb)
        fx_run = Signal(sb)  # chunks released after the completing one
        fx_cp1 = Signal(32)  # its chunk + 1
        fx_clr = Signal(S)  # slots released behind the completing one
        fx_set = Signal(S)  # its slot, one-hot
        pend_eff = Signal(S)  # pending with the last decision applied
        m.d.comb += pend_eff.eq((pending & ~Mux(fx_c, fx_clr, 0)) | Mux(fx_s, fx_set, 0))
        # The release scan's input vector is built a cycle ahead for the beat that will be in
        # stage 1, from the pending bits as they are now, in two versions: without and with
        # the pending bit the decision of this cycle may set (its own slot, when it completes
        # behind the head); stage 1 picks one with fx_s. A run the decision of this cycle
        # clears cannot change the next scan: that scan would stop earlier, at the slot this
        # decision completes (not pending), which lies between its start and the cleared run.
        own_n = Mux(adv, oh0, oh1)
        lm_n = Mux(adv, lm0, lm1)
        reg_n = Mux(adv, region0, region1)
        xa = (pend_eff & ~own_n) | ~reg_n
        xb = ((pend_eff | oh1) & ~own_n) | ~reg_n

        def release_scan(x, tag: str) -> tuple:
            """(first zero one-hot, clr) of the in-order release scan over ``x`` (stage 1)."""
            y = Signal(2 * S, name=f"scan_y_{tag}")
            m.d.comb += y.eq(Cat(x | lm_n, x))
            y1 = Signal(2 * S + 1, name=f"scan_y1_{tag}")
            m.d.comb += y1.eq(y + 1)
            below_p = (y ^ y1)[1:]  # positions before the first zero (doubled slot order)
            clr2 = below_p & ~Cat(lm_n, Const(0, S))
            # the first zero, folded to slot order (one-hot)
            return (y1 & ~y)[:S] | (y1 & ~y)[S : 2 * S], (clr2[:S] | clr2[S:]) & reg_n

        fz_a, fz_b = Signal(S), Signal(S)
        clr_a, clr_b = Signal(S), Signal(S)
        fa, ca = release_scan(xa, "a")
        fb, cb = release_scan(xb, "b")
        m.d.sync += [fz_a.eq(fa), clr_a.eq(ca), fz_b.eq(fb), clr_b.eq(cb)]
        # Head checks (chunk - head: sign = late; (chunk - 2**lw) - head: sign = inside the
        # window; chunk == head) are computed a cycle ahead, for the beat that will be in
        # stage 1, against the heads as they will be then (the register with the pending
        # effect fx applied). The decision made in the cycle the beat enters stage 1 is
        # forwarded: checks against its new head (chunk + 1 + run) from delta1/deltaw1.
        fx_hn = Signal(32)  # the new head of the last decision (if at the head)
        m.d.comb += fx_hn.eq(fx_cp1 + fx_run)

        def minus_hn(x):
            """x - (fx_cp1 + fx_run) mod 2**32 with one carry chain: x + ~fx_cp1 + ~run + 2 as
            carry-save (sum sv, carries cv with the first +1 in its free bit 0), then
            sv - ~cv = sv + cv + 1."""
            a, b, c = x, ~fx_cp1, ~Cat(fx_run, Const(0, 32 - sb))
            sv, cv = Signal(32), Signal(32)
            m.d.comb += [sv.eq(a ^ b ^ c), cv.eq(Cat(Const(1, 1), ((a & b) | (a & c) | (b & c))[:31]))]
            return (sv - ~cv)[:32]

        def head_checks(job, chunk, cw) -> list:
            hj = Signal(32)
            with m.Switch(job):
                for j in range(self.jobs):
                    with m.Case(j):
                        m.d.comb += hj.eq(head[j])
            fwd = fx_c & (fx_job == job)
            d_f, dw_f = minus_hn(chunk), minus_hn(cw)
            return [Mux(fwd, d_f[31], (chunk - hj)[31]), Mux(fwd, dw_f[31], (cw - hj)[31]),
                    Mux(fwd, eq_hn(chunk), chunk == hj)]

        def eq_hn(x):
            """x == fx_cp1 + fx_run (mod 2**32) without a carry chain: x + ~(a + b) == -1, i.e.
            with the carry-save sum s and carries g of a, b and ~x, s ^ (g << 1) is all ones
            (a ^ b ^ x ^ (g << 1) == 0); each bit needs only its own and the next lower inputs."""
            a, b = fx_cp1, Cat(fx_run, Const(0, 32 - sb))
            g = (a & b) | ((a | b) & ~x)
            return (a ^ b ^ x ^ Cat(Const(0, 1), g[:31])) == 0

        hc_r = Signal(3)  # late, below window end, at head
        m.d.sync += hc_r.eq(Mux(adv, Cat(*head_checks(h0.job_id[:jb], h0.chunk, cw0)),
                                Cat(*head_checks(h1.job_id[:jb], h1.chunk, cw1))))
        fwd_head = fx_c & (fx_job == h1.job_id[:jb])
        # sign of delta - run without a 32-bit subtract: run < 2**sb, so only a borrow out of the
        # low sb bits changes the upper bits, and it reaches bit 31 only if bits sb..30 are zero
        # (the low-bit compares with the run registered with fx_run: run_lt / run_ltw / run_eq)
        run_lt, run_ltw, run_eq = Signal(), Signal(), Signal()
        late_f = delta1[31] ^ (run_lt & d_hz1)
        wneg_f = deltaw1[31] ^ (run_ltw & dw_hz1)
        late = Mux(fwd_head, late_f, hc_r[0])
        oow = ~late & ~Mux(fwd_head, wneg_f, hc_r[1])
        at_head = Mux(fwd_head, (delta1[sb:] == 0) & run_eq, hc_r[2])
        # stage 1's pending bit, from three flip-flops set a cycle ahead (below): the bit of the
        # next pending register, and whether the decision made then clears (its release run) or
        # sets (its own slot) it; fx_c / fx_s say whether it did (no S:1 multiplexer here)
        pre_p, cclr_p, sset_p = Signal(), Signal(), Signal()
        pend1 = (pre_p & ~(fx_c & cclr_p)) | (fx_s & sset_p)

        # ---- the slot's tag: comparisons made a cycle ahead ----
        # The tag is read one cycle before the beat reaches stage 0 (p's output), so in stage 0
        # the read misses the write of the last cycle (tb) and the one in progress (tw): the
        # comparisons with the beat's header are made against the three in parallel, the newest
        # is selected and only the boolean results (and the bitmap) are registered for stage 1.
        # Stage 1 adds the one write still missing, the tag the decision of the previous cycle
        # requested (tw now), from registers. While stage 1 holds, its merged result is kept.
        def hdr_checks(job, chunk, round_, group, scale, count, session, h) -> list:
            """job ==, chunk ==, chunk behind, mismatch of a tag's fields against a header."""
            return [job == h.job_id[:jb], chunk == h.chunk, (chunk - h.chunk)[31],
                    ((round_ != h.round_id) | (group != h.group_id)
                     | (scale != h.scale_exp) | (count != h.element_count)
                     | (session != h.session))]

        def tag_checks(state, bitmap, hc, bit_, members_) -> list:
            job_eq, chunk_eq, back, mism = hc
            return [
                state == _DONE,
                state == _ACTIVE,
                (state != _FREE) & job_eq & chunk_eq,
                mism,
                (bitmap & bit_) != 0,
                (bitmap | bit_) == members_,
                job_eq & ~chunk_eq & ~back,
            ]

        def src_checks(t) -> list:  # a whole tag against the beat at p's output
            hc = hdr_checks(t.job, t.chunk, t.round, t.group, t.scale, t.count, t.session, h0)
            return tag_checks(t.state, t.bitmap, hc, p.bit, p.members)

        # which source is the newest for slot0, compared a cycle ahead against the read address
        # (that is slot0 now): the write in progress now was requested then (tw_en/tw_addr); the
        # last write (tb) is the one in progress then, if any (an older write is in the memory
        # by the time of that read)
        thit_w0, thit_b0 = Signal(), Signal()
        # (each write address compared with the three read addresses in parallel, the read
        # address's choice, which depends on ``take``, at the last multiplexer)
        def rd_hit(a):
            return Mux(p_load, Mux(ps_v, a == ps.slot, a == i_d.slot), a == p.slot)

        m.d.sync += [thit_w0.eq(tw_en & rd_hit(tw_addr)), thit_b0.eq(tw_v & rd_hit(tw_a))]
        ck0 = Signal(7)
        bm0 = Signal(32)
        m.d.comb += [
            ck0.eq(Mux(thit_w0, Cat(*src_checks(tw_d)),
                       Mux(thit_b0, Cat(*src_checks(tb_data)), Cat(*src_checks(tag_rd.data))))),
            bm0.eq(Mux(thit_w0, tw_d.bitmap, Mux(thit_b0, tb_data.bitmap, tag_rd.data.bitmap))),
        ]
        # header comparisons against the tag stage 1 may write this cycle (its header fields are
        # stage 1's header; a window reset's FREE tags need none: every check is masked by state)
        hcw_n = Signal(4)
        m.d.comb += hcw_n.eq(Cat(*hdr_checks(h1.job_id[:jb], h1.chunk, h1.round_id, h1.group_id,
                                             h1.scale_exp, h1.element_count, h1.session, h0)))
        tag_r = Signal(tag_layout)  # the tag decided on a message's first beat, for its last
        ck_pre, bm_pre, hcw1 = Signal(7), Signal(32), Signal(4)
        ck, bm = Signal(7), Signal(32)
        # bitmap checks against that tag, for both bitmaps it may carry: decided this cycle,
        # it is (bm | bit) if ``same`` else bit; requested by a later beat, tag_r's
        bm_a = bm | bit
        bm_bc = Mux(first1, bit, tag_r.bitmap)
        bmck_n = Cat((bm_a & p.bit) != 0, (bm_a | p.bit) == p.members,
                     (bm_bc & p.bit) != 0, (bm_bc | p.bit) == p.members)
        bmck1 = Signal(4)
        sel_a1 = Signal()  # the tag was decided with ``same``
        # the tag the previous decision requested is stage 1's (tw_v and its address == slot1)
        # and its state, as flip-flops of their own next to the decision (tw_v / tw_d drive the
        # tag memory's write port)
        thit_l = Signal()
        l_done, l_active, l_nfree = Signal(), Signal(), Signal()
        # (while stage 1 holds nothing is written: tw_en is 0, so slot0 is the beat's slot)
        m.d.sync += [thit_l.eq(tw_en & (tw_addr == slot0)),
                     l_done.eq(tw_data.state == _DONE), l_active.eq(tw_data.state == _ACTIVE),
                     l_nfree.eq(tw_data.state != _FREE)]
        dup_l = Mux(sel_a1, bmck1[0], bmck1[2])
        cadd_l = Mux(sel_a1, bmck1[1], bmck1[3])
        ck_l = Cat(l_done, l_active, l_nfree & hcw1[0] & hcw1[1], hcw1[3],
                   dup_l, cadd_l, hcw1[0] & ~hcw1[1] & ~hcw1[2])
        m.d.comb += [ck.eq(Mux(thit_l, ck_l, ck_pre)), bm.eq(Mux(thit_l, tw_d.bitmap, bm_pre))]
        with m.If(adv):
            m.d.sync += [ck_pre.eq(ck0), bm_pre.eq(bm0), hcw1.eq(hcw_n),
                         bmck1.eq(bmck_n), sel_a1.eq(first1 & ck[2])]
        with m.Else():
            m.d.sync += [ck_pre.eq(ck), bm_pre.eq(bm)]
        st_done, st_active, same, mismatch, dup, cadd, older_hdr = (ck[i] for i in range(7))
        complete1 = st_done & pend1
        released1 = st_done & ~pend1
        older = released1 & older_hdr

        def priority(c) -> tuple:
            """The model's checks in order: (outcome code, data op, resend) from the inputs
            ``c`` (unconf, nonmem, oow, same, mismatch, released, dup, late, busy, older)."""
            code, op, resend = Signal(4), Signal(2), Signal()
            with m.If(c[0]):
                m.d.comb += code.eq(Outcome.REJECT_UNCONFIGURED)
            with m.Elif(c[1]):
                m.d.comb += code.eq(Outcome.REJECT_NON_MEMBER)
            with m.Elif(c[2]):
                m.d.comb += code.eq(Outcome.OUT_OF_WINDOW)
            with m.Elif(c[3]):
                with m.If(c[4]):
                    m.d.comb += code.eq(Outcome.REJECT_MISMATCH)
                with m.Elif(c[5]):
                    m.d.comb += [code.eq(Outcome.RESULT_RESENT), resend.eq(1)]
                with m.Elif(c[6]):
                    m.d.comb += code.eq(Outcome.DUPLICATE)
                with m.Else():
                    m.d.comb += [code.eq(Outcome.AGGREGATED), op.eq(_OP_ADD)]
            with m.Elif(c[7]):  # behind the head and no longer held
                m.d.comb += code.eq(Outcome.STALE)
            with m.Elif(c[8]):
                m.d.comb += code.eq(Outcome.REJECT_BUSY)
            with m.Elif(c[9]):
                m.d.comb += code.eq(Outcome.STALE)
            with m.Else():
                m.d.comb += [code.eq(Outcome.AGGREGATED), op.eq(_OP_WRITE)]
            return code, op, resend

        prio_in = Cat(unconf1, nonmem1, in_order & oow, same, mismatch, released1, dup,
                      in_order & late, st_active | complete1, older)
        _, op, resend = priority(prio_in)
        # the outcome code for the counters is worked out a cycle later from the registered
        # inputs (separate logic, so it does not pull the decision towards the counters)
        prio_r = Signal(len(prio_in))
        m.d.sync += prio_r.eq(prio_in)
        code, _, _ = priority(prio_r)

        # The tag is written only for ADD (same chunk) and WRITE (not the same chunk), so its
        # bitmap and state follow from ``same`` alone, not from the whole priority chain.
        new_bitmap = Signal(32)
        m.d.comb += new_bitmap.eq(Mux(same, bm | bit, bit))
        done_new = Mux(same, cadd, cwrite1)  # the tag written is complete
        completes = (op != _OP_NONE) & done_new

        # ---- in-order release run: complete slots right behind the head ----
        # Scanned in slot order, no rotations: slots outside the job's region count as pending
        # (transparent), the vector is doubled so the scan wraps, bits below the start slot are
        # forced to 1, and one carry chain finds the first in-region slot that is not pending
        # (the completing slot itself at the latest). The carry chain runs in stage 0 on both
        # input vectors (release_scan); stage 1 turns both first-zero positions into run
        # lengths and selects with fx_s.
        def run_of(fz, tag: str):
            run_ = Signal(sb, name=f"run_{tag}")
            if self.run_table:
                # run = ((p - start) & (window - 1)) with p one-hot: an AND-OR over the per-slot
                # distances registered in stage 0 (no encoder and subtractor)
                m.d.comb += run_.eq(Cat(*[
                    Cat(*[fz[i] & dist_tab1[i][b] for i in range(S)]).any() for b in range(sb)
                ]))
            else:
                p_slot = Signal(sb, name=f"p_slot_{tag}")
                m.d.comb += p_slot.eq(Cat(*[
                    Cat(*[fz[i] for i in range(S) if (i >> b) & 1]).any() for b in range(sb)
                ]))
                m.d.comb += run_.eq((p_slot - start1)[:sb] & wmask)
            return run_

        run = Signal(sb)
        clr = Signal(S)  # slots released behind the head
        m.d.comb += [run.eq(Mux(fx_s, run_of(fz_b, "b"), run_of(fz_a, "a"))),
                     clr.eq(Mux(fx_s, clr_b, clr_a))]

        # ---- pinning: a queued / emitting result holds its slot's data ----
        # Registered: pin_r is computed one cycle ahead for the beat that will be in stage 1,
        # against the queue, the entry in stage 2 and the emitter as they are now. Entries only
        # move queue -> emitter -> gone, so that is a superset of the next cycle's pins (at
        # worst a hold one cycle longer) except for the entry the decision of this cycle
        # pushes into stage 2; that one is matched live (few levels) next cycle.
        def pin_terms(job, chunk, wm) -> list:
            terms = []
            for i in range(QUEUE_DEPTH):
                occupied = (Const(i, q_rptr.shape()) - q_rptr)[: len(q_rptr)] < q_count
                e = q[i]
                terms.append(occupied & (e.job == job) & (((chunk[:sb] - e.chunk[:sb]) & wm) <= e.more))
            terms.append(push_now & (entry_r.job == job)
                         & (((chunk[:sb] - entry_r.chunk[:sb]) & wm) <= entry_r.more))
            terms.append(e_busy & (e_job == job) & (((chunk[:sb] - e_chunk[:sb]) & wm) == 0))
            terms.append((rest_job == job) & (((chunk[:sb] - rest_chunk[:sb]) & wm) < rest_left))
            return terms

        pin_r = Signal()
        if self.run_table:
            # Every slot held now was held a cycle ago or is in the entry stage 2 pushes now
            # (entries only move stage 2 -> queue -> emitter -> gone), so the union registered
            # a cycle ago plus stage 2's mask covers it (at worst one cycle too long).
            pinvec_r = Signal(S)
            held = [Mux(((Const(i, q_rptr.shape()) - q_rptr)[: len(q_rptr)] < q_count), q_mask[i], 0)
                    for i in range(QUEUE_DEPTH)]
            held += [Mux(push_now, mask_r, 0), Mux(e_busy, e_oh, 0), Mux(rest_nz, rest_mask, 0)]
            union = held[0]
            for h_ in held[1:]:
                union = union | h_
            m.d.sync += pinvec_r.eq(union)
            pins_now = pinvec_r | Mux(push_now, mask_r, 0)
            pin_hold = pins_now.bit_select(slot1, 1)
            pin_load = pins_now.bit_select(slot0, 1)
        else:
            pin_hold = Cat(*pin_terms(h1.job_id[:jb], h1.chunk, wmask)).any()
            pin_load = Cat(*pin_terms(h0.job_id[:jb], h0.chunk, wmask0)).any()
        pinned = pin_r  # (+ the entry stage 1 pushes this cycle: below, with the decision)
        m.d.comb += [
            # conservative (any first beat on a pinned slot waits, not only a start): keeps the
            # decision off the hold signal that enables the stage-0 reads and stage-1 registers
            self.stall_pinned.eq(v1 & first1 & pinned),
            self.advance.eq(adv),
        ]

        # decisions held for the later beats of the message
        op_r = Signal(2)

        push_d = Signal()
        entry_d = Signal(entry_layout)
        tag_d = Signal(tag_layout)
        m.d.comb += [
            entry_d.job.eq(h1.job_id[:jb]),
            entry_d.chunk.eq(h1.chunk),
            entry_d.slot.eq(slot1),
            entry_d.resent.eq(resend),
            tag_d.state.eq(Mux(done_new, _DONE, _ACTIVE)),
            tag_d.job.eq(h1.job_id[:jb]),
            tag_d.round.eq(h1.round_id),
            tag_d.chunk.eq(h1.chunk),
            tag_d.group.eq(h1.group_id),
            tag_d.scale.eq(h1.scale_exp),
            tag_d.count.eq(h1.element_count),
            tag_d.session.eq(h1.session),
            tag_d.nbm1.eq(nbm1_1),
            tag_d.bitmap.eq(new_bitmap),
        ]
        with m.If(resend | (completes & ~in_order)):
            m.d.comb += push_d.eq(1)
        with m.Elif(completes & at_head):
            m.d.comb += push_d.eq(1)
        # ``more`` is the run whatever the decision (off the decision path); it counts only if
        # the entry releases a run (completion at the head, in order: fx_c the next cycle)
        m.d.comb += entry_d.more.eq(run)
        # its slot mask: the slot, and the run it releases (clr: exactly those run slots). Not
        # gated by the decision (off the decision path): an entry without a run (a resend or
        # a completion out of order) also holds the pending slots its scan saw, which only
        # delays contributions to those slots until it is emitted (they are COMPLETE: nothing
        # new can start there before their release anyway).
        m.d.comb += mask_d.eq(oh1 | clr)

        # Pinning by the entry stage 1 may push into stage 2 this cycle (with its last beat), for
        # the beat taken into stage 1 now. On a first beat, without waiting for the decision
        # (conservative): a different chunk on the same slot (the same chunk never starts
        # anything), or a slot the release run would free (slots in clr: COMPLETE, behind the
        # head, in the same region, so no job compare). Else the entry held since the
        # message's first beat.
        # The pair checks below (p's beat against stage 1's) are flip-flops compared a cycle
        # ahead between the beats that will be there (p's next value per its skid buffer, stage
        # 1's per adv), with ``take`` only at the last multiplexer: no comparator or subtractor
        # between the stage-P registers and adv / pin_r.
        # held entry: same job, and p's chunk - stage 1's (low bits, in stage 1's window) is
        # inside the run the entry releases
        pjob_r, pdc_r = Signal(), Signal(sb)
        job_pn = Mux(ps_v, ps.beat.hdr.job_id[:jb], i_d.beat.hdr.job_id[:jb])
        cl_pn = Mux(ps_v, ps.beat.hdr.chunk[:sb], i_d.beat.hdr.chunk[:sb])
        job_1n, cl_1n = Mux(adv, h0.job_id[:jb], h1.job_id[:jb]), Mux(adv, h0.chunk[:sb], h1.chunk[:sb])
        wm_1n = Mux(adv, wmask0, wmask)
        m.d.sync += [
            pjob_r.eq(Mux(p_load, job_pn == job_1n, h0.job_id[:jb] == job_1n)),
            pdc_r.eq(Mux(p_load, (cl_pn - cl_1n)[:sb] & wm_1n, (h0.chunk[:sb] - cl_1n)[:sb] & wm_1n)),
        ]
        held_hit = pjob_r & (pdc_r <= entry_r.more)
        # "same job and chunk": no 32-bit comparator in front of adv
        same_key = Signal()

        def key(h):
            return Cat(h.job_id[:jb], h.chunk)

        k_pn = Mux(ps_v, key(ps.beat.hdr), key(i_d.beat.hdr))  # p's next value if it loads
        m.d.sync += same_key.eq(Mux(p_load,
                                    k_pn == Mux(adv, key(h0), key(h1)),
                                    Mux(adv, Const(1), key(h0) == key(h1))))
        other_chunk = (slot0 == slot1) & ~same_key
        live_n = v1 & last1 & Mux(first1, other_chunk | (clr & oh0).any(), push_r & held_hit)
        m.d.sync += pin_r.eq(Mux(adv, pin_load | live_n, pin_hold))
        # ~(v1 & first1 & pin_r) next cycle: stalled, v1 and first1 stay set and pin_r becomes
        # pin_hold; moving, v1 becomes take (= p_v & room), first1 p's first, pin_r the load
        m.d.sync += adv.eq(Mux(adv, ~(p_v & room & f.first & (pin_load | live_n)), ~pin_hold))

        decide = v1 & first1 & adv
        # the outcome strobe is registered (counters only; off the decision path)
        # two cycles after the decision, from flip-flops (the counters sit far away)
        decide_r = Signal()
        m.d.sync += [decide_r.eq(decide), self.outcome.eq(decide_r), self.outcome_code.eq(code)]
        with m.If(decide):
            m.d.sync += [op_r.eq(op), push_r.eq(push_d), entry_r.eq(entry_d), tag_r.eq(tag_d)]
            if self.run_table:
                m.d.sync += mask_r.eq(mask_d)
        # effect on pending bits and the head, applied next cycle (the decision-independent
        # parts registered every cycle, the decision itself in fx_c / fx_s)
        # fx_c / fx_s feed back into the next decision (pend1, the head forwarding). The loop is
        # expanded on them: the outcome is worked out for each of the three cases (none,
        # completed at the head, completed behind it) from the other registers, and fx_c / fx_s
        # select the case at the last multiplexer. ``completes`` is written out as the two
        # priority branches that write the tag (ADD with ``same``, WRITE without).
        fwd_job1 = fx_job == h1.job_id[:jb]

        def loop_next(c: int, s_: int) -> tuple:
            fh = fwd_job1 if c else Const(0)
            late_v = Mux(fh, late_f, hc_r[0])
            oow_v = ~late_v & ~Mux(fh, wneg_f, hc_r[1])
            at_head_v = Mux(fh, (delta1[sb:] == 0) & run_eq, hc_r[2])
            p1 = pre_p
            if c:
                p1 = pre_p & ~cclr_p
            if s_:
                p1 = pre_p | sset_p
            add_ok = ~mismatch & ~(st_done & ~p1) & ~dup & cadd
            write_ok = ~(in_order & late_v) & ~st_active & ~(st_done & p1) & ~(st_done & ~p1 & older_hdr) & cwrite1
            comp = ~unconf1 & ~nonmem1 & ~(in_order & oow_v) & Mux(same, add_ok, write_ok)
            return comp & at_head_v, comp & ~at_head_v

        nx = {k: loop_next(*k) for k in ((0, 0), (1, 0), (0, 1))}
        fxc_n = Mux(fx_c, nx[1, 0][0], Mux(fx_s, nx[0, 1][0], nx[0, 0][0]))
        fxs_n = Mux(fx_c, nx[1, 0][1], Mux(fx_s, nx[0, 1][1], nx[0, 0][1]))
        m.d.sync += [
            fx_c.eq(decide & in_order & fxc_n),
            fx_s.eq(decide & in_order & fxs_n),
            fx_job.eq(h1.job_id[:jb]), fx_run.eq(run), fx_cp1.eq(chunk_p1),
            # delta1 / deltaw1 low bits as they will be next cycle, against this run
            run_lt.eq(Mux(adv, delta_n[:sb], delta1[:sb]) < run),
            run_ltw.eq(Mux(adv, deltaw_n[:sb], deltaw1[:sb]) < run),
            run_eq.eq(Mux(adv, delta_n[:sb], delta1[:sb]) == run),
            fx_clr.eq(clr), fx_set.eq(oh1),
        ]
        with m.If(fx_c):
            for j in range(self.jobs):
                with m.If(fx_job == j):
                    m.d.sync += head[j].eq(fx_hn)

        # ================= stage 1 -> stage 2: data =================
        # The add and the data write happen one stage later (stage 2), off the decision path.
        # Read-after-write: stage 1 forwards the last write (dhit1, kept current while stage 1
        # holds), stage 2 forwards the write made in the cycle the beat left stage 1 (fwd2).
        op_c = Mux(first1, op, op_r)
        rem = Signal(17)
        m.d.comb += rem.eq(h1.element_count - (idx1 << (L.bit_length() - 1)))
        lane_ok = Cat(*[rem > k for k in range(L)])
        op2 = Signal(2)
        first2 = Signal()
        row2 = Signal(len(data_wr.addr))
        oh2 = Signal(S)  # slot2, one-hot
        d2 = Signal(W, reset_less=True)
        old2 = Signal(W, reset_less=True)
        fwd2 = Signal()
        lane_ok2 = Signal(L)
        m.d.sync += [v2.eq(v1 & adv), last2.eq(v1 & adv & last1)]
        # Stage 2 pushes the entry of its message's decision from entry_r/push_r: they are not
        # overwritten before, as the next message's first beat is decided one cycle later at
        # the earliest. Whether the entry carries its run is fx_c, the cycle after the decision.
        runs_r = Signal()
        with m.If(decide_r):
            m.d.sync += runs_r.eq(fx_c)
        runs_now = Mux(decide_r, fx_c, runs_r)
        m.d.comb += push_now.eq(v2 & last2 & push_r)
        with m.If(v1 & adv):
            m.d.sync += [
                op2.eq(op_c), first2.eq(first1), row2.eq(row1), oh2.eq(oh1), d2.eq(d1),
                old2.eq(old1), fwd2.eq(data_wr.en & (data_wr.addr == row1)), lane_ok2.eq(lane_ok),
            ]

        m.submodules.adder = adder = SaturatingAdder(W)
        m.d.comb += [adder.a.eq(Mux(fwd2, db_data, old2)), adder.b.eq(d2)]
        beat_ovf = (op2 == _OP_ADD) & (adder.overflow & lane_ok2).any()
        m.d.comb += [
            data_wr.en.eq(v2 & (op2 != _OP_NONE)),
            data_wr.addr.eq(row2),
            data_wr.data.eq(Mux(op2 == _OP_ADD, adder.sum, d2)),
        ]
        # sticky overflow per slot (flip-flops): cleared by a chunk's first write, set by any
        # saturating lane of an add; read by the emitter once the result is queued
        # The set from an add's overflow (the end of the adder's carry chain) is applied one
        # cycle later, from flip-flops (ovf_set / ovf_oh); ovf_now is the flag with it applied,
        # which is what the emitter reads (it may start the chunk the cycle after its last add).
        ovf = Signal(S)
        ovf_set = Signal()
        ovf_oh = Signal(S)
        ovf_now = Signal(S)
        m.d.comb += ovf_now.eq(ovf | Mux(ovf_set, ovf_oh, 0))
        m.d.sync += [ovf_set.eq(v2 & beat_ovf), ovf_oh.eq(oh2),
                     ovf.eq(ovf_now & ~Mux(data_wr.en & first2 & (op2 == _OP_WRITE), oh2, 0))]
        tag_c = Signal(tag_layout)
        m.d.comb += tag_c.eq(Mux(first1, tag_d, tag_r))
        # the release entry is queued with the last data write, so the emitter reads it written
        m.d.comb += [q_push.eq(push_now), q_in.eq(entry_r), q_in.more.eq(Mux(runs_now, entry_r.more, 0))]

        # ================= window reset =================
        # The job's base and region size are registered when the engine starts; rst_wr (a
        # flip-flop) marks the cycles that write FREE into one slot of the region each.
        rjob = self.reset.payload.job
        cfg_rst = self._job_cfg(m, jc, rjob, "cfg_rst")
        rst_wr = Signal()
        rst_base = Signal(sb)
        rst_last = Signal(sb + 1)  # region size - 1
        rst_slot = Signal(sb)
        m.d.comb += rst_slot.eq((rst_base + rst_idx[:sb])[:sb])
        m.d.comb += self.reset.ready.eq(0)
        with m.If(~rst_busy):
            with m.If(reset_block & ~i_v & ~is_v & ~p_v & ~ps_v & ~v1 & ~v2 & (q_count == 0) & ~e_busy
                      & (rest_left == 0)):
                lw_rst = Mux(cfg_rst.log2_window > sb, sb, cfg_rst.log2_window)
                m.d.sync += [rst_busy.eq(1), rst_wr.eq(1), rst_idx.eq(0), rst_base.eq(cfg_rst.base[:sb]),
                             rst_last.eq((Const(1, sb + 1) << lw_rst) - 1)]
        with m.Elif(rst_wr):
            m.d.sync += rst_idx.eq(rst_idx + 1)
            with m.If(rst_idx == rst_last):
                m.d.sync += rst_wr.eq(0)
        with m.Else():
            m.d.comb += self.reset.ready.eq(1)
            m.d.sync += rst_busy.eq(0)
            for j in range(self.jobs):
                with m.If(rjob == j):
                    m.d.sync += head[j].eq(self.reset.payload.head)
        # pending: the last decision's effect, or (window reset, no decisions) the region cleared
        rst_clr = Mux(rst_wr, Const(1, S) << rst_slot, 0)
        m.d.sync += pending.eq(pend_eff & ~rst_clr)
        slot_n1 = Mux(adv, slot0, slot1)  # the slot in stage 1 next cycle
        m.d.sync += [pre_p.eq((pend_eff & ~rst_clr).bit_select(slot_n1, 1)),
                     cclr_p.eq(clr.bit_select(slot_n1, 1)), sset_p.eq(slot_n1 == slot1)]

        # a reset writes FREE (only the state matters: every check and the emitter ignore the
        # other fields of a FREE tag)
        m.d.comb += [
            tw_en.eq(rst_wr | (v1 & adv & last1 & (op_c != _OP_NONE))),
            tw_addr.eq(Mux(rst_wr, rst_slot, slot1)),
            tw_data.eq(tag_c),
            tw_data.state.eq(Mux(rst_wr, _FREE, tag_c.state)),
        ]

        # ================= emitter =================
        # Issues one row read per cycle while the output FIFO has room. Beat 0 of a chunk reads
        # the slot's tag together with its data (both arrive next cycle); later beats hold the
        # tag read port, so the header is assembled when the data returns and a result of n
        # beats takes exactly n cycles, back to back with the next one.
        m.submodules.fifo = fifo = SyncFIFO(width=beat_layout.size, depth=FIFO_DEPTH)
        te = tag_rd_e.data
        rd_v = Signal()
        rd_beat = Signal(beat_bits + 1)
        rd_resent = Signal()
        rd_ovf = Signal()
        e_ovf = Signal()
        occ = Signal(range(FIFO_DEPTH + 2))  # == fifo.level + rd_v, as a register
        credit = occ < FIFO_DEPTH

        n_job = Signal(jb)  # the chunk a new beat 0 is issued for
        n_chunk = Signal(32)
        n_resent = Signal()
        cfg_r = self._job_cfg(m, jc, rest_job, "cfg_r")
        cfg_q = self._job_cfg(m, jc, q_head.job, "cfg_q")
        slot_n = Signal(sb)
        m.d.comb += slot_n.eq(Mux(rest_nz, rest_slot, q_head.slot))
        issue = Signal()
        start_new = Signal()
        # the current chunk has beats left: right after its start from the tag just read (a zero
        # test), afterwards from a flip-flop worked out a cycle ahead (no comparator on the path
        # to the read address)
        more = Signal()
        more_r = Signal()
        just_started = Signal()
        # "more than one beat" per slot in flip-flops, written with the tag, so the test right
        # after a start does not wait for the tag memory (a block RAM from S = 64 on)
        multi = Signal(S)
        with m.If(tw_v):
            m.d.sync += multi.bit_select(tw_a, 1).eq(tw_d.nbm1 != 0)
        multi_r = Signal()
        with m.If(start_new):
            m.d.sync += multi_r.eq(multi.bit_select(slot_n, 1))
        m.d.comb += more.eq(e_busy & Mux(just_started, multi_r, more_r))
        m.d.sync += [just_started.eq(start_new),
                     more_r.eq(Mux(credit & more, (e_beat + 1) <= te.nbm1, more))]
        m.d.comb += q_pop.eq(0)
        with m.If(credit):
            with m.If(more):
                m.d.comb += issue.eq(1)
                m.d.sync += e_beat.eq(e_beat + 1)
            with m.Elif(rest_nz):
                m.d.comb += [start_new.eq(1), n_job.eq(rest_job), n_chunk.eq(rest_chunk),
                             n_resent.eq(rest_resent)]
                m.d.sync += [rest_chunk.eq(rest_chunk + 1), rest_left.eq(rest_left - 1),
                             rest_nz.eq(rest_left != 1),
                             rest_slot.eq(self._slot_of(cfg_r, rest_chunk + 1))]
                if self.run_table:
                    m.d.sync += rest_mask.eq(rest_mask & ~(Const(1, S) << rest_slot))
            with m.Elif(q_count != 0):
                m.d.comb += [start_new.eq(1), n_job.eq(q_head.job), n_chunk.eq(q_head.chunk),
                             n_resent.eq(q_head.resent), q_pop.eq(1)]
                m.d.sync += [rest_job.eq(q_head.job), rest_chunk.eq(q_head.chunk + 1),
                             rest_left.eq(q_head.more), rest_nz.eq(q_head.more != 0),
                             rest_resent.eq(q_head.resent),
                             rest_slot.eq(self._slot_of(cfg_q, q_head.chunk + 1))]
                if self.run_table:
                    m.d.sync += rest_mask.eq(Array(q_mask)[q_rptr] & ~(Const(1, S) << q_head.slot))
        with m.If(start_new):
            m.d.comb += issue.eq(1)
            m.d.sync += [e_busy.eq(1), e_job.eq(n_job), e_chunk.eq(n_chunk), e_beat.eq(1),
                         e_resent.eq(n_resent), e_slot.eq(slot_n), e_ovf.eq(ovf_now.bit_select(slot_n, 1))]
            if self.run_table:
                m.d.sync += e_oh.eq(Const(1, S) << slot_n)
        with m.Elif(~more):
            m.d.sync += e_busy.eq(0)
        addr_slot = Mux(start_new, slot_n, e_slot)
        addr_beat = Mux(start_new, 0, e_beat)
        m.d.comb += [
            tag_rd_e.addr.eq(slot_n),
            tag_rd_e.en.eq(start_new),
            data_rd_e.addr.eq(Cat(addr_beat[:rb], addr_slot) if rb else addr_slot),
            # always enabled: the data is used only the cycle after an issue (rd_v), so no hold
            # multiplexer behind the block RAM on the issue path
            data_rd_e.en.eq(1),
        ]
        m.d.sync += [rd_v.eq(issue), occ.eq(occ + issue - (fifo.r_rdy & fifo.r_en))]
        m.d.comb += self.rw_hazard.eq((issue & data_wr.en & (data_rd_e.addr == data_wr.addr))
                                      | (start_new & tag_wr.en & (tag_rd_e.addr == tag_wr.addr)))
        with m.If(issue):
            m.d.sync += [rd_beat.eq(addr_beat), rd_resent.eq(Mux(start_new, n_resent, e_resent)),
                         rd_ovf.eq(Mux(start_new, ovf_now.bit_select(slot_n, 1), e_ovf))]

        self._probe(m, jc, tag_rd_p, tag_wr, pending)

        out_beat = Signal(beat_layout)
        m.d.comb += [
            out_beat.hdr.msg_type.eq(wire.MsgType.RESULT),
            out_beat.hdr.flags.eq(Cat(rd_ovf, Const(0, 1), rd_resent)),  # OVERFLOW, RESENT
            out_beat.hdr.group_id.eq(te.group),
            out_beat.hdr.job_id.eq(te.job),
            out_beat.hdr.round_id.eq(te.round),
            out_beat.hdr.chunk.eq(te.chunk),
            out_beat.hdr.sender_id.eq(0),
            out_beat.hdr.scale_exp.eq(te.scale),
            out_beat.hdr.element_count.eq(te.count),
            out_beat.hdr.session.eq(te.session),
            out_beat.first.eq(rd_beat == 0),
            out_beat.last.eq(rd_beat == te.nbm1),
            out_beat.data.eq(data_rd_e.data),
            fifo.w_en.eq(rd_v),
            fifo.w_data.eq(out_beat),
            self.m_msg.valid.eq(fifo.r_rdy),
            self.m_msg.payload.eq(fifo.r_data),
            fifo.r_en.eq(self.m_msg.ready),
            self.result_out.eq(self.m_msg.valid & self.m_msg.ready & self.m_msg.payload.first),
        ]
        return m
