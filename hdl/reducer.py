"""Fixed-point reduction pipeline with BRAM reorder buffers and in-order / on-completion release.

Implements ``model.AggregatorModel.contribute`` bit-exactly for a stream of well-formed
CONTRIBUTION messages (payload beats, header on every beat). Datapath and hazards are described
in docs/reducer.md; in short:

* stage 0 (``s_msg`` accept): slot and row address; synchronous reads of the slot's tag and of
  the beat's data row (non-transparent read ports); configuration-only checks precomputed;
* stage 1: the outcome decision on the first beat (checks in the model's order; tag comparisons
  made against the write in progress, the last write and the memory in parallel); the tag is
  written through a register one cycle later;
* stage 2: per-lane saturating add or write of the row (forwarding the previous cycle's write),
  sticky overflow per slot, release-queue push with the last beat;
* in-order release is one combinational step: the chunk at the head completes, and the run of
  already-complete slots behind it (a per-slot ``pending`` bit vector, scanned in slot order with
  one carry chain) is released at once as one *range* entry of the release queue;
* an emitter expands queue entries into RESULT messages through a small output FIFO. A slot
  referenced by the queue or the emitter is *pinned*: a contribution that would start a new chunk
  in it waits (the model emits instantly; the hardware must not overwrite a queued result).

One beat per cycle sustained, no hazard stalls; ``s_msg`` stalls only for a full release queue,
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
    check_data_width,
    lanes,
    message_beat_layout,
    message_stream,
    payload_beats,
)
from .saturating_adder import SaturatingAdder

__all__ = ["Reducer", "ResetLayout"]

# Stored slot state. COMPLETE and RELEASED share DONE; the per-slot ``pending`` bit (COMPLETE,
# waiting for in-order release) tells them apart, so a release never writes the tag memory.
_FREE, _ACTIVE, _DONE = 0, 1, 2
# Data operation of a message (decided on its first beat).
_OP_NONE, _OP_WRITE, _OP_ADD = 0, 1, 2

QUEUE_DEPTH = 4  # release-queue entries (each entry may cover a whole run of chunks)
FIFO_DEPTH = 4  # result beats buffered toward m_msg


def ResetLayout(jobs: int) -> data.StructLayout:  # noqa: N802 - a layout factory
    """Payload of the window-reset stream: the job and its new head."""
    return data.StructLayout({"job": range(jobs), "head": 32})


def _bits(n: int) -> int:
    """Bits to hold 0..n-1 (at least 1)."""
    return max(1, (n - 1).bit_length())


MAX_SLOTS = 4096  # the in-order release search grows with S; see docs/reducer.md


class Reducer(wiring.Component):
    """The aggregator's reduction and reorder/release stage (see module docstring).

    Ports: ``s_msg`` (contributions in), ``m_msg`` (results out), ``group_bitmap``, ``job_cfg``,
    ``release_on_completion`` (configuration), ``reset`` (window reset stream), ``head`` (per job),
    ``outcome``/``outcome_code`` (one strobe per input message), ``result_out`` (one strobe per
    result message, on its first beat).
    """

    def __init__(self, data_width: int, *, slots: int, elements: int, groups: int, jobs: int) -> None:
        check_data_width(data_width)
        if not isinstance(slots, int) or not 2 <= slots <= MAX_SLOTS or slots & (slots - 1):
            raise ValueError(f"slots must be a power of two from 2 to {MAX_SLOTS}, got {slots!r}")
        if not isinstance(elements, int) or not 1 <= elements <= wire.MAX_ELEMENTS_JUMBO:
            raise ValueError(f"elements must be 1..{wire.MAX_ELEMENTS_JUMBO}, got {elements!r}")
        if not isinstance(groups, int) or not 1 <= groups <= 32:
            raise ValueError(f"groups must be 1..32, got {groups!r}")
        if not isinstance(jobs, int) or not 1 <= jobs <= 16:
            raise ValueError(f"jobs must be 1..16, got {jobs!r}")
        self.data_width, self.slots, self.elements = data_width, slots, elements
        self.groups, self.jobs = groups, jobs
        self.lanes = lanes(data_width)
        self.beats = payload_beats(elements, data_width)
        self.row_bits = (self.beats - 1).bit_length()  # rows per slot = 2**row_bits
        self.slot_bits = (slots - 1).bit_length()
        self.job_bits = _bits(jobs)
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
        })
        # Observability (not ports): s_msg held back because the slot a contribution would
        # start is still referenced by a queued/emitting result; or the release queue is full.
        self.stall_pinned = Signal()
        self.stall_queue = Signal()

    # ---- helpers -------------------------------------------------------------------------
    def _job_cfg(self, m: Module, idx, name: str):
        """Explicit mux of the job table (zero for an index outside it)."""
        cfg = Signal(JobCfgLayout, name=name)
        with m.Switch(idx):
            for j in range(self.jobs):
                with m.Case(j):
                    m.d.comb += cfg.eq(self.job_cfg[j])
        return cfg

    def _slot_of(self, cfg, chunk):
        """``(base + (chunk & (window - 1))) & (S - 1)``."""
        sb = self.slot_bits
        wmask = Cat(*[cfg.log2_window > i for i in range(sb)])
        return (cfg.base[:sb] + (chunk[:sb] & wmask))[:sb]

    # ---- elaboration -----------------------------------------------------------------------
    def elaborate(self, platform: object) -> Module:
        m = Module()
        W, S, L = self.data_width, self.slots, self.lanes
        sb, rb, jb, gb = self.slot_bits, self.row_bits, self.job_bits, self.group_bits
        beat_bits = max(1, rb)

        tag_layout = data.StructLayout({
            "state": 2, "job": jb, "round": 32, "chunk": 32, "group": 8,
            "scale": AggHeaderLayout["scale_exp"].shape, "count": 16, "bitmap": 32,
            "nbm1": 17,  # payload beats - 1, so the emitter needs no arithmetic on the tag
        })
        entry_layout = data.StructLayout({"job": jb, "chunk": 32, "slot": sb, "count": sb + 1, "resent": 1})

        # Left to the tools (block RAM on the ECP5). Forcing LUT RAM up to 256 slots (for the
        # block RAM's ~4 ns clock-to-output) gained nothing measurable (55.0 vs 53.7 MHz at
        # S=64, within placement noise) and left nextpnr's router congested on the Versa build.
        m.submodules.tag_mem = tag_mem = Memory(shape=tag_layout, depth=S, init=[])
        m.submodules.data_mem = data_mem = Memory(shape=unsigned(W), depth=S << rb, init=[])
        tag_rd = tag_mem.read_port(transparent_for=())  # decision (stage 0 -> 1)
        tag_rd_e = tag_mem.read_port(transparent_for=())  # emitter
        tag_wr = tag_mem.write_port()
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
        q_head = Signal(entry_layout)
        m.d.comb += q_head.eq(Array([e.as_value() for e in q])[q_rptr])
        with m.If(q_push):
            for i in range(QUEUE_DEPTH):
                with m.If(q_wptr == i):
                    m.d.sync += q[i].eq(q_in)
            m.d.sync += q_wptr.eq(q_wptr + 1)
        with m.If(q_pop):
            m.d.sync += q_rptr.eq(q_rptr + 1)
        m.d.sync += q_count.eq(q_count + q_push - q_pop)

        # ---- window-reset engine state ----
        rst_busy = Signal()  # clearing the region
        rst_idx = Signal(sb + 1)
        in_msg = Signal()  # stage 0 has accepted a non-last beat of a message

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
        rest_resent = Signal()
        rest_slot = Signal(sb)  # slot of rest_chunk (registered, off the read-address path)
        e_slot = Signal(sb)

        # ================= stage 0 =================
        # A one-beat skid register catches the beat accepted in a cycle where stage 1 holds,
        # so s_msg.ready comes from registers only (not from the stage-1 decision).
        s = self.s_msg
        beat_layout = message_beat_layout(W)
        beat_cnt = Signal(beat_bits)
        idx_in = Mux(s.payload.first, 0, beat_cnt)
        skid_v = Signal()
        skid = Signal(beat_layout, reset_less=True)
        skid_idx = Signal(beat_bits, reset_less=True)
        f = Signal(beat_layout)  # the beat entering stage 1: the skid's, else s_msg's
        idx0 = Signal(beat_bits)
        m.d.comb += [f.eq(Mux(skid_v, skid, s.payload)), idx0.eq(Mux(skid_v, skid_idx, idx_in))]
        h0 = f.hdr
        cfg0 = self._job_cfg(m, h0.job_id[:jb], "cfg0")
        slot0 = Signal(sb)
        m.d.comb += slot0.eq(self._slot_of(cfg0, h0.chunk))
        # for the in-order release scan (stage 1): the slot of chunk + 1 and the job's region
        start0 = Signal(sb)
        m.d.comb += start0.eq(self._slot_of(cfg0, h0.chunk + 1))
        lw0 = Mux(cfg0.log2_window > sb, sb, cfg0.log2_window)
        region0 = Signal(S)  # slot i is in the job's region: (i - base) mod S < 2**lw
        m.d.comb += region0.eq(Cat(*[
            (((Const(i, sb + 1) - cfg0.base[:sb])[:sb] >> lw0) == 0) if sb else Const(1)
            for i in range(S)
        ]))
        # configuration-only checks, precomputed here so stage 1 starts from registers
        members0 = Signal(32)
        with m.Switch(h0.group_id[:gb]):
            for g in range(self.groups):
                with m.Case(g):
                    m.d.comb += members0.eq(self.group_bitmap[g])
        bit0 = Signal(32)
        m.d.comb += bit0.eq(Mux(h0.sender_id < wire.MAX_SENDERS, Const(1, 32) << h0.sender_id[:5], 0))
        nbm1_0 = Signal(17)
        m.d.comb += nbm1_0.eq(((h0.element_count + L - 1) >> (L.bit_length() - 1)) - 1)
        unconf0 = ~((h0.job_id < self.jobs) & cfg0.enable & (h0.group_id < self.groups) & (members0 != 0))
        accept = Signal()
        dhit0 = Signal()

        # ================= stage 1 registers =================
        v1 = Signal()
        first1 = Signal()
        last1 = Signal()
        h1 = Signal(AggHeaderLayout)
        d1 = Signal(W)
        idx1 = Signal(beat_bits)
        slot1 = Signal(sb)
        start1 = Signal(sb)
        members1 = Signal(32)
        bit1 = Signal(32)
        unconf1 = Signal()
        nonmem1 = Signal()
        cwrite1 = Signal()  # a first contribution completes the chunk (single member)
        lw = Signal(range(sb + 1))  # log2 window, clamped to the slot memory
        chunk_p1 = Signal(32)  # h1.chunk + 1
        nbm1_1 = Signal(17)
        dhit1 = Signal()  # same for the data row
        v2 = Signal()  # stage 2 (add + data write) holds a beat
        push2 = Signal()  # ... whose release entry (entry2) is pushed this cycle
        entry2 = Signal(entry_layout)
        region1 = Signal(S)
        adv = Signal()  # stage 1 moves on this cycle (not stalled on a pinned slot)

        # reset.valid through a register (cleared on the ready pulse): the control block's
        # handshake logic is not part of s_msg.ready's path.
        rst_req = Signal()
        m.d.sync += rst_req.eq(self.reset.valid & ~self.reset.ready)
        reset_block = rst_req & ~in_msg
        # the messages in stage 2 (counted) and stage 1 may still push one entry each
        room = (q_count + (v2 & push2)) < QUEUE_DEPTH - 1
        m.d.comb += [
            s.ready.eq(~skid_v & room & ~reset_block & ~rst_busy),
            accept.eq(s.valid & s.ready),
            self.stall_queue.eq(~room),
        ]
        with m.If(accept):
            m.d.sync += [in_msg.eq(~s.payload.last), beat_cnt.eq(idx_in + 1)]
        with m.If(adv):
            m.d.sync += [
                v1.eq(skid_v | accept),
                first1.eq(f.first),
                last1.eq(f.last),
                h1.eq(h0),
                d1.eq(f.data),
                idx1.eq(idx0),
                slot1.eq(slot0),
                start1.eq(start0),
                members1.eq(members0),
                bit1.eq(bit0),
                unconf1.eq(unconf0),
                nonmem1.eq((members0 & bit0) == 0),
                cwrite1.eq(bit0 == members0),
                lw.eq(lw0),
                chunk_p1.eq(h0.chunk + 1),
                nbm1_1.eq(nbm1_0),
                region1.eq(region0),
                skid_v.eq(0),
            ]
        with m.Elif(accept):
            m.d.sync += [skid_v.eq(1), skid.eq(s.payload), skid_idx.eq(idx_in)]
        m.d.comb += [
            # re-read every cycle (stage 1's own slot/row while it holds), so the data read is
            # always one cycle old and the bypass registers cover exactly what it missed
            tag_rd.addr.eq(Mux(adv, slot0, slot1)),
            tag_rd.en.eq(1),
            data_rd.en.eq(1),
        ]
        row1 = Cat(idx1[:rb], slot1) if rb else slot1

        # ---- last-write bypass (the only read-after-write distance is one cycle) ----
        tb_v, tb_addr, tb_data = Signal(), Signal(sb), Signal(tag_layout)
        db_v, db_addr, db_data = Signal(), Signal(len(data_wr.addr)), Signal(W)
        with m.If(tag_wr.en):
            m.d.sync += [tb_v.eq(1), tb_addr.eq(tag_wr.addr), tb_data.eq(tag_wr.data)]
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
            dhit0.eq(Mux(data_wr.en, data_wr.addr == row_rd, db_v & (db_addr == row_rd))),
        ]
        # tag sources, newest first: the write in progress (missed by the read), the last write
        # (made while the read was issued), the memory
        thit_w = Signal()
        thit_b = Signal()
        m.d.comb += [thit_w.eq(tw_v & (tw_a == slot1)), thit_b.eq(tb_v & (tb_addr == slot1))]
        tag1 = Signal(tag_layout)
        old1 = Signal(W)
        m.d.comb += [
            tag1.eq(Mux(thit_w, tw_d, Mux(thit_b, tb_data, tag_rd.data))),
            old1.eq(Mux(dhit1, db_data, data_rd.data)),
        ]

        # ================= stage 1: decision (first beat) =================
        members, bit = members1, bit1
        head_j = Signal(32)
        with m.Switch(h1.job_id[:jb]):
            for j in range(self.jobs):
                with m.Case(j):
                    m.d.comb += head_j.eq(head[j])
        in_order = ~self.release_on_completion
        dist = Signal(32)
        m.d.comb += dist.eq(h1.chunk - head_j)
        late = dist[31]
        oow = ~late & ((dist >> lw) != 0)
        pend1 = pending.bit_select(slot1, 1)

        def tag_checks(t) -> list:
            """The decision's tag comparisons for one tag source (memory read or bypass); both
            sources are compared in parallel and only the results are selected."""
            job_eq = t.job == h1.job_id[:jb]
            chunk_eq = t.chunk == h1.chunk
            back = (t.chunk - h1.chunk)[31]
            return [
                t.state == _DONE,
                t.state == _ACTIVE,
                (t.state != _FREE) & job_eq & chunk_eq,
                ((t.round != h1.round_id) | (t.group != h1.group_id)
                 | (t.scale != h1.scale_exp) | (t.count != h1.element_count)),
                (t.bitmap & bit) != 0,
                (t.bitmap | bit) == members,
                job_eq & ~chunk_eq & ~back,
            ]

        ck = Signal(7)
        m.d.comb += ck.eq(Mux(thit_w, Cat(*tag_checks(tw_d)),
                              Mux(thit_b, Cat(*tag_checks(tb_data)), Cat(*tag_checks(tag_rd.data)))))
        st_done, st_active, same, mismatch, dup, cadd, older_hdr = (ck[i] for i in range(7))
        complete1 = st_done & pend1
        released1 = st_done & ~pend1
        older = released1 & older_hdr

        code = Signal(4)
        op = Signal(2)
        resend = Signal()
        with m.If(unconf1):
            m.d.comb += code.eq(Outcome.REJECT_UNCONFIGURED)
        with m.Elif(nonmem1):
            m.d.comb += code.eq(Outcome.REJECT_NON_MEMBER)
        with m.Elif(in_order & oow):
            m.d.comb += code.eq(Outcome.OUT_OF_WINDOW)
        with m.Elif(same):
            with m.If(mismatch):
                m.d.comb += code.eq(Outcome.REJECT_MISMATCH)
            with m.Elif(released1):
                m.d.comb += [code.eq(Outcome.RESULT_RESENT), resend.eq(1)]
            with m.Elif(dup):
                m.d.comb += code.eq(Outcome.DUPLICATE)
            with m.Else():
                m.d.comb += [code.eq(Outcome.AGGREGATED), op.eq(_OP_ADD)]
        with m.Elif(in_order & late):  # behind the head and no longer held
            m.d.comb += code.eq(Outcome.STALE)
        with m.Elif(st_active | complete1):
            m.d.comb += code.eq(Outcome.REJECT_BUSY)
        with m.Elif(older):
            m.d.comb += code.eq(Outcome.STALE)
        with m.Else():
            m.d.comb += [code.eq(Outcome.AGGREGATED), op.eq(_OP_WRITE)]

        new_bitmap = Signal(32)
        m.d.comb += new_bitmap.eq(Mux(op == _OP_ADD, tag1.bitmap | bit, bit))
        completes = (op != _OP_NONE) & Mux(op == _OP_ADD, cadd, cwrite1)
        at_head = h1.chunk == head_j

        # ---- in-order release run: complete slots right behind the head ----
        # Scanned in slot order, no rotations: slots outside the job's region count as pending
        # (transparent), the vector is doubled so the scan wraps, bits below the start slot are
        # forced to 1, and one carry chain finds the first in-region slot that is not pending
        # (the completing slot itself at the latest). Start slot and region mask come registered
        # from stage 0.
        wmask = Signal(sb)
        m.d.comb += wmask.eq(Cat(*[lw > i for i in range(sb)]))
        x = Signal(S)
        m.d.comb += x.eq((pending & ~(Const(1, S) << slot1)) | ~region1)
        lm_s = Signal(S)  # slots below the start slot
        m.d.comb += lm_s.eq(Cat(*[start1 > i for i in range(S)]))
        y = Signal(2 * S)
        m.d.comb += y.eq(Cat(x | lm_s, x))
        y1 = Signal(2 * S + 1)
        m.d.comb += y1.eq(y + 1)
        below_p = Signal(2 * S)  # positions before the first zero (doubled slot order)
        m.d.comb += below_p.eq((y ^ y1)[1:])
        fz = Signal(S)  # the first zero, folded to slot order (one-hot)
        m.d.comb += fz.eq((y1 & ~y)[:S] | (y1 & ~y)[S : 2 * S])
        p_slot = Signal(sb)
        m.d.comb += p_slot.eq(Cat(*[
            Cat(*[fz[i] for i in range(S) if (i >> b) & 1]).any() for b in range(sb)
        ]))
        run = Signal(sb + 1)
        m.d.comb += run.eq((p_slot - start1)[:sb] & wmask)
        clr2 = Signal(2 * S)
        m.d.comb += clr2.eq(below_p & ~Cat(lm_s, Const(0, S)))
        clr = Signal(S)  # slots released behind the head
        m.d.comb += clr.eq((clr2[:S] | clr2[S:]) & region1)

        # ---- pinning: a queued / emitting result holds its slot's data ----
        pinned = Signal()
        pin_terms = []
        for i in range(QUEUE_DEPTH):
            occupied = (Const(i, q_rptr.shape()) - q_rptr)[: len(q_rptr)] < q_count
            e = q[i]
            pin_terms.append(occupied & (e.job == h1.job_id[:jb])
                             & (((h1.chunk[:sb] - e.chunk[:sb]) & wmask) < e.count))
        pin_terms.append(v2 & push2 & (entry2.job == h1.job_id[:jb])
                         & (((h1.chunk[:sb] - entry2.chunk[:sb]) & wmask) < entry2.count))
        pin_terms.append(e_busy & (e_job == h1.job_id[:jb]) & (e_slot == slot1))
        pin_terms.append((rest_job == h1.job_id[:jb])
                         & (((h1.chunk[:sb] - rest_chunk[:sb]) & wmask) < rest_left))
        m.d.comb += pinned.eq(Cat(*pin_terms).any())
        m.d.comb += [
            # conservative (any first beat on a pinned slot waits, not only a start): keeps the
            # decision off the hold signal that enables the stage-0 reads and stage-1 registers
            self.stall_pinned.eq(v1 & first1 & pinned),
            adv.eq(~self.stall_pinned),
        ]

        # decisions held for the later beats of the message
        op_r = Signal(2)
        push_r = Signal()
        entry_r = Signal(entry_layout)
        tag_r = Signal(tag_layout)

        push_d = Signal()
        entry_d = Signal(entry_layout)
        tag_d = Signal(tag_layout)
        m.d.comb += [
            entry_d.job.eq(h1.job_id[:jb]),
            entry_d.chunk.eq(h1.chunk),
            entry_d.slot.eq(slot1),
            entry_d.resent.eq(resend),
            tag_d.state.eq(Mux(completes, _DONE, _ACTIVE)),
            tag_d.job.eq(h1.job_id[:jb]),
            tag_d.round.eq(h1.round_id),
            tag_d.chunk.eq(h1.chunk),
            tag_d.group.eq(h1.group_id),
            tag_d.scale.eq(h1.scale_exp),
            tag_d.count.eq(h1.element_count),
            tag_d.nbm1.eq(nbm1_1),
            tag_d.bitmap.eq(new_bitmap),
        ]
        with m.If(resend):
            m.d.comb += [push_d.eq(1), entry_d.count.eq(1)]
        with m.Elif(completes & ~in_order):
            m.d.comb += [push_d.eq(1), entry_d.count.eq(1)]
        with m.Elif(completes & at_head):
            m.d.comb += [push_d.eq(1), entry_d.count.eq(run + 1)]

        decide = v1 & first1 & adv
        m.d.comb += [self.outcome.eq(decide), self.outcome_code.eq(code)]
        with m.If(decide):
            m.d.sync += [op_r.eq(op), push_r.eq(push_d), entry_r.eq(entry_d), tag_r.eq(tag_d)]
            # pending bits and head commit at once: the next decision comes after the last beat
            with m.If(completes & in_order):
                with m.If(at_head):
                    m.d.sync += pending.eq(pending & ~clr)
                    for j in range(self.jobs):
                        with m.If(h1.job_id[:jb] == j):
                            m.d.sync += head[j].eq(chunk_p1 + run)
                with m.Else():
                    m.d.sync += pending.eq(pending | (Const(1, S) << slot1))

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
        slot2 = Signal(sb)
        d2 = Signal(W, reset_less=True)
        old2 = Signal(W, reset_less=True)
        fwd2 = Signal()
        lane_ok2 = Signal(L)
        m.d.sync += [v2.eq(v1 & adv), push2.eq(v1 & adv & last1 & Mux(first1, push_d, push_r))]
        with m.If(v1 & adv):
            m.d.sync += [
                op2.eq(op_c), first2.eq(first1), row2.eq(row1), slot2.eq(slot1), d2.eq(d1),
                old2.eq(old1), fwd2.eq(data_wr.en & (data_wr.addr == row1)), lane_ok2.eq(lane_ok),
                entry2.eq(Mux(first1, entry_d, entry_r)),
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
        ovf = Signal(S)
        with m.If(data_wr.en):
            m.d.sync += ovf.eq((ovf & ~Mux(first2 & (op2 == _OP_WRITE), Const(1, S) << slot2, 0))
                               | Mux(beat_ovf, Const(1, S) << slot2, 0))
        tag_c = Signal(tag_layout)
        m.d.comb += tag_c.eq(Mux(first1, tag_d, tag_r))
        # the release entry is queued with the last data write, so the emitter reads it written
        m.d.comb += [q_push.eq(v2 & push2), q_in.eq(entry2)]

        # ================= window reset =================
        rjob = self.reset.payload.job
        cfg_rst = self._job_cfg(m, rjob, "cfg_rst")
        lw_rst = Mux(cfg_rst.log2_window > sb, sb, cfg_rst.log2_window)
        rst_slot = (cfg_rst.base[:sb] + rst_idx[:sb])[:sb]
        m.d.comb += self.reset.ready.eq(0)
        with m.If(~rst_busy):
            with m.If(reset_block & ~v1 & ~v2 & ~skid_v & (q_count == 0) & ~e_busy & (rest_left == 0)):
                m.d.sync += [rst_busy.eq(1), rst_idx.eq(0)]
        with m.Else():
            with m.If(rst_idx == (Const(1, sb + 1) << lw_rst)):
                m.d.comb += self.reset.ready.eq(1)
                m.d.sync += rst_busy.eq(0)
                for j in range(self.jobs):
                    with m.If(rjob == j):
                        m.d.sync += head[j].eq(self.reset.payload.head)
            with m.Else():
                m.d.sync += [rst_idx.eq(rst_idx + 1), pending.eq(pending & ~(Const(1, S) << rst_slot))]

        with m.If(rst_busy & (rst_idx != (Const(1, sb + 1) << lw_rst))):
            m.d.comb += [tw_en.eq(1), tw_addr.eq(rst_slot), tw_data.eq(0)]  # FREE
        with m.Else():
            m.d.comb += [
                tw_en.eq(v1 & adv & last1 & (op_c != _OP_NONE)),
                tw_addr.eq(slot1),
                tw_data.eq(tag_c),
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
        cfg_r = self._job_cfg(m, rest_job, "cfg_r")
        cfg_q = self._job_cfg(m, q_head.job, "cfg_q")
        slot_n = Signal(sb)
        m.d.comb += slot_n.eq(Mux(rest_left != 0, rest_slot, q_head.slot))
        issue = Signal()
        start_new = Signal()
        more = Signal()
        m.d.comb += more.eq(e_busy & (e_beat <= te.nbm1))  # the current chunk has beats left
        m.d.comb += q_pop.eq(0)
        with m.If(credit):
            with m.If(more):
                m.d.comb += issue.eq(1)
                m.d.sync += e_beat.eq(e_beat + 1)
            with m.Elif(rest_left != 0):
                m.d.comb += [start_new.eq(1), n_job.eq(rest_job), n_chunk.eq(rest_chunk),
                             n_resent.eq(rest_resent)]
                m.d.sync += [rest_chunk.eq(rest_chunk + 1), rest_left.eq(rest_left - 1),
                             rest_slot.eq(self._slot_of(cfg_r, rest_chunk + 1))]
            with m.Elif(q_count != 0):
                m.d.comb += [start_new.eq(1), n_job.eq(q_head.job), n_chunk.eq(q_head.chunk),
                             n_resent.eq(q_head.resent), q_pop.eq(1)]
                m.d.sync += [rest_job.eq(q_head.job), rest_chunk.eq(q_head.chunk + 1),
                             rest_left.eq(q_head.count - 1), rest_resent.eq(q_head.resent),
                             rest_slot.eq(self._slot_of(cfg_q, q_head.chunk + 1))]
        with m.If(start_new):
            m.d.comb += issue.eq(1)
            m.d.sync += [e_busy.eq(1), e_job.eq(n_job), e_chunk.eq(n_chunk), e_beat.eq(1),
                         e_resent.eq(n_resent), e_slot.eq(slot_n), e_ovf.eq(ovf.bit_select(slot_n, 1))]
        with m.Elif(~more):
            m.d.sync += e_busy.eq(0)
        addr_slot = Mux(start_new, slot_n, e_slot)
        addr_beat = Mux(start_new, 0, e_beat)
        m.d.comb += [
            tag_rd_e.addr.eq(slot_n),
            tag_rd_e.en.eq(start_new),
            data_rd_e.addr.eq(Cat(addr_beat[:rb], addr_slot) if rb else addr_slot),
            data_rd_e.en.eq(issue),
        ]
        m.d.sync += [rd_v.eq(issue), occ.eq(occ + issue - (fifo.r_rdy & fifo.r_en))]
        with m.If(issue):
            m.d.sync += [rd_beat.eq(addr_beat), rd_resent.eq(Mux(start_new, n_resent, e_resent)),
                         rd_ovf.eq(Mux(start_new, ovf.bit_select(slot_n, 1), e_ovf))]

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
