"""The reducer's result emitter (docs/reducer.md, "Result emission and pinned slots"): expands
release-queue entries (a chunk or an in-order run) into READ commands for the slot store, one
row per cycle while it has the store's command port (``go``), and the result header of each.

A result released by the contribution that completes it (at the head, or on completion) is not
read: its rows are the slot store's responses to that contribution (the reducer queues only its
run, if any, as an entry starting at the next chunk). Beat 0 of a chunk reads the slot's tag (the
header arrives next cycle and is pushed on ``hdr``, toward ``ResultAssembler``); later beats hold
the tag read port. Whether a result has more than one beat comes from a per-slot bit written
with the tag (``tag_we``/``tag_wslot``/``tag_wmulti``; ``tag_wmulti2``: more than two beats, for
the cycle after a start), not from the tag memory (a block RAM from
S = 64 on, ~4 ns clock-to-output): a memory of S x 1 bit read a cycle ahead at the slot the next
start would take (from the next values of the rest's slot and of the queue's head,
``q_head_next``), so the start's bit comes from a register (the default core: LUT RAM behind
address flip-flops, no S:1 select of flip-flops on the start's path) and nothing S-wide is left
in the emitter. What it holds (the chunk being read, the rest of its entry) is exported for
pinning and the window reset's drain check; once a chunk's last READ is issued its slot may be
reused (the store applies commands in order).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from wanreduce import wire

from .layouts import AggHeaderLayout, JobCfgLayout, payload_beats
from .reducer_config import select_job_entry, slot_of
from .reducer_layouts import bits_for, release_entry_layout, slot_tag_layout
from .release_queue import QUEUE_DEPTH

__all__ = ["ResultEmitter", "result_header"]


class ResultEmitter(wiring.Component):
    """Queue entries -> READ commands and result headers (see the module docstring).

    Queue side: ``q_head``, ``q_head_mask`` (and ``q_head_rest``: a register equal to it without
    the head's slot), ``q_count`` and its push ``q_push`` in, ``q_pop`` out (only while
    ``allow_pop``). Tag memory: ``tag_addr``/``tag_en`` -> ``tag_data`` (next cycle). Slot store:
    ``go`` (the command port is this emitter's and ready; a new chunk also needs ``hdr_room``, a
    flip-flop whose next value is ``hdr_room_next``),
    ``issue`` with ``row_addr``, ``slot``, ``last`` (the result's last row). ``hdr_valid``/``hdr``:
    the header of the chunk started last cycle. ``tag_read``: a tag read whose data is used.
    ``idle``: no chunk or run in progress; ``final``: this READ is its entry's last.
    ``copy_error``: a flip-flop copy (``more``, the start flags, ``mn_r``, ``multi2_r``,
    ``rm_rest``, the queue's ``q_head_rest``) or ``final_ok`` differs from what it stands for, a start pops while
    ``allow_pop`` is low, or the slot whose ``multi`` bit was read a cycle ahead is not the slot
    started (never, if right).
    ``q_head_next``: the queue's head entry next cycle (the ``multi`` read's address).
    ``held_next_slots`` (the DRAM reducer, and on chip above S 16): ``q_head_nslot`` / ``q_head_nslot2`` in, the slots of
    the head's chunk + 1 / + 2 held by the queue (``ReleaseQueue(next_slots=True)``), so a start
    from the queue reads no job table (``q_head.job`` -> its job-table select -> ``slot_of`` ->
    ``rm_rest`` / the ``multi`` read address / ``rest_slot`` was the Versa DRAM build's core
    path, 10.00 ns at session 36's seed 1); copy_error checks them while the queue holds an entry.
    ``registered_tag_addr`` (the DRAM reducer): the tag read's address is ``multi_at``, the
    flip-flop loaded with the ``multi`` read's address (``slot_n``'s next value), not ``slot_n``'s
    multiplexer of ``rest_slot`` and the queue head's slot: the read is enabled only by a start
    (``tag_en``), and in every start cycle ``multi_at == slot_n`` (copy_error checks it), so the
    same tag is read (`emitter.rest_slot` -> ``slot_n`` -> the LUT RAM -> `emitter.hdr`, 8.17 ns
    at session 46's landing seed 5).
    ``nslot_per_job`` (the DRAM reducer): a start from the rest loads ``rest_nslot`` (the slot of
    ``rest_chunk + 2``) with ``slot_of`` worked out for every job's configuration in parallel,
    ``rest_job`` (a flip-flop) choosing the result (``rest_nslot2``; 0 for a job index outside
    the table, as the job-table select gives), instead of selecting the job's configuration
    first: ``rest_job`` no longer runs through the select, the window mask and the adder's carry
    chain (`emitter.rest_job` -> ... -> `emitter.rest_nslot`, 7.91-8.00 ns at cbcf8ab's seed 4
    and session 47's landing seed 2). The same value in every cycle.
    """

    def __init__(self, data_width: int, *, slots: int, elements: int, jobs: int, masks: bool,
                 shared_tag_port: bool = False, held_next_slots: bool = False,
                 split_start: bool = False, registered_tag_addr: bool = False,
                 nslot_per_job: bool = False) -> None:
        self.data_width, self.slots, self.jobs, self.masks = data_width, slots, jobs, masks
        self.nslot_per_job = nslot_per_job
        self.held_next_slots, self.split_start = held_next_slots, split_start
        self.registered_tag_addr = registered_tag_addr
        # the tag read port is the probe's while the emitter is idle (Reducer above
        # PROBE_TAG_PORT_MAX_SLOTS): tag_data then shows the probe's tags, so mn_r is checked
        # only while busy (it is used only then)
        self.shared_tag_port = shared_tag_port
        self.row_bits = (payload_beats(elements, data_width) - 1).bit_length()
        sb = (slots - 1).bit_length()
        self.slot_bits = sb
        entry = release_entry_layout(jobs, slots)
        ports = {
            "q_head": In(entry),
            "q_head_mask": In(slots),
            "q_head_rest": In(slots),
            "q_head_next": In(entry),
            "q_count": In(range(QUEUE_DEPTH + 1)),
            "q_pop": Out(1),
            "q_push": In(1),
            "allow_pop": In(1),
            "job_cfg": In(data.ArrayLayout(JobCfgLayout, jobs)),
            "tag_addr": Out(sb),
            "tag_en": Out(1),
            "tag_data": In(slot_tag_layout(jobs)),
            "tag_we": In(1),
            "tag_wslot": In(sb),
            "tag_wmulti": In(1),
            "tag_wmulti2": In(1),
            "go": In(1),
            "hdr_room": In(1),
            "hdr_room_next": In(1),
            "issue": Out(1),
            "row_addr": Out(sb + self.row_bits),
            "slot": Out(sb),
            "last": Out(1),
            "hdr_valid": Out(1),
            "hdr": Out(AggHeaderLayout),
            "tag_read": Out(1),
            "idle": Out(1),
            "final": Out(1),
            "copy_error": Out(1),
            # held: the chunk being read (busy/job/chunk, its slot one-hot cur_mask), the rest
            # of its entry (rest_job/rest_chunk/rest_left chunks, rest_nz, their slots rest_mask)
            "busy": Out(1),
            "job": Out(bits_for(jobs)),
            "chunk": Out(32),
            "cur_mask": Out(slots),
            "rest_job": Out(bits_for(jobs)),
            "rest_chunk": Out(32),
            "rest_left": Out(sb + 1),
            "rest_nz": Out(1),
            "rest_mask": Out(slots),
        }
        if held_next_slots:
            ports |= {"q_head_nslot": In(sb), "q_head_nslot2": In(sb)}
        super().__init__(ports)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        S, sb, rb, jb = self.slots, self.slot_bits, self.row_bits, bits_for(self.jobs)
        beat_bits = max(1, rb)
        q_head, jc = self.q_head, self.job_cfg
        te = self.tag_data
        e_busy, e_job, e_chunk = self.busy, self.job, self.chunk
        rest_job, rest_chunk, rest_left, rest_nz = self.rest_job, self.rest_chunk, self.rest_left, self.rest_nz
        rest_mask, e_oh = self.rest_mask, self.cur_mask
        e_resent = Signal()
        e_beat = Signal(beat_bits + 1)  # next beat to issue
        rest_resent = Signal()
        rest_slot = Signal(sb)  # slot of rest_chunk (registered, off the read-address path)
        # slot of rest_chunk + 1 (the rest's next start), registered at the start before: no
        # adder between rest_chunk and a start's rest_slot / rm_rest (cut 10's seed 3: the
        # configuration -> rest_chunk + 1 -> its slot -> rm_rest, 8.01 ns); copy_error checks it
        rest_nslot = Signal(sb, name="rest_nslot")
        e_slot = Signal(sb)
        credit = self.go

        n_job = Signal(jb)  # the chunk a new beat 0 is issued for
        n_chunk = Signal(32)
        n_resent = Signal()
        cfg_r = select_job_entry(m, jc, self.jobs, rest_job, "cfg_r")
        cfg_q = select_job_entry(m, jc, self.jobs, q_head.job, "cfg_q")
        # the slots of the head's chunk + 1 / + 2: held by the queue, or from the job table
        q_nslot_x = slot_of(cfg_q, q_head.chunk + 1, sb)
        q_nslot2_x = slot_of(cfg_q, (q_head.chunk[:sb] + 2)[:sb], sb)
        q_nslot, q_nslot2 = ((self.q_head_nslot, self.q_head_nslot2) if self.held_next_slots
                             else (q_nslot_x, q_nslot2_x))
        slot_n = Signal(sb)
        m.d.comb += slot_n.eq(Mux(rest_nz, rest_slot, q_head.slot))
        issue = self.issue
        start_new = self.tag_read
        # the current chunk has beats left: a flip-flop worked out a cycle ahead (no comparator on
        # the path to the read address; below)
        more = Signal()
        more_r = Signal()
        just_started = Signal()
        # "more than one beat" per slot, written with the tag, so the test right after a start
        # does not wait for the tag memory (a block RAM from S = 64 on): a memory read a cycle
        # ahead at slot_n's next value, transparent to the write, so its bit in the start cycle is
        # the one written up to last cycle, from a register (at S = 16 yosys makes LUT RAM
        # behind address flip-flops: no S:1 select of flip-flops in front of final_ok, s_ok, i_ok;
        # docs/benchmarks.md "Cut 9"; above 256 slots, before, the only kind)
        # (two bits per slot: more than one beat, more than two: the second is the "a beat after
        # this one" of the cycle after a start, so the tag memory's output is not on that path)
        m.submodules.multi = multi_mem = Memory(shape=2, depth=S, init=[])
        multi_w = multi_mem.write_port()
        multi_rd = multi_mem.read_port(transparent_for=(multi_w,))
        rest_slot_n, rest_nz_n = Signal(sb), Signal()  # the next values of rest_slot, rest_nz
        multi_at = Signal(sb)  # the slot read (slot_n in the cycle its bit is used)
        m.d.comb += [
            multi_w.en.eq(self.tag_we), multi_w.addr.eq(self.tag_wslot),
            multi_w.data.eq(Cat(self.tag_wmulti, self.tag_wmulti2)),
            rest_slot_n.eq(rest_slot), rest_nz_n.eq(rest_nz),  # (a start sets them below)
            multi_rd.addr.eq(Mux(rest_nz_n, rest_slot_n, self.q_head_next.slot)), multi_rd.en.eq(1),
        ]
        m.d.sync += multi_at.eq(multi_rd.addr)
        multi_n, multi2_n = multi_rd.data[0], multi_rd.data[1]
        multi_r, multi2_r = Signal(), Signal(name="multi2_r")
        with m.If(start_new):
            m.d.sync += [multi_r.eq(multi_n), multi2_r.eq(multi2_n)]
        # more_next: the chunk has a beat after e_beat ((e_beat + 1) <= nbm1). Its comparator
        # (a carry chain after the tag memory's output) is registered a cycle ahead as mn_r, for
        # both outcomes of this cycle's beat; right after a start (e_beat = 1, the tag just
        # read) it is nbm1 >= 2: the started slot's second ``multi`` bit, registered at the start
        # (multi2_r), not the tag memory's output (cut 8's seed 1 after cut 9's first netlist:
        # the tag data -> s_ok / i_ok, 8.04 ns). So s_ok, i_ok, more and ``last`` see no
        # comparator and no tag memory; copy_error checks mn_r outside the cycle after a start
        # and multi2_r in it.
        mn_r = Signal()
        m.d.sync += mn_r.eq(Mux(credit & more, (e_beat + 2) <= te.nbm1, (e_beat + 1) <= te.nbm1))
        more_next = Mux(just_started, multi2_r, mn_r)
        # more's next value without a start (a beat issued: more_next, else held)
        more_keep = Mux(credit & more, more_next, more)
        m.d.sync += [just_started.eq(start_new), more_r.eq(more_keep)]
        # ``more`` itself is a flip-flop (the start decision and the READ's row start from it):
        # the started slot's multi bit after a start, else more_r's next value (0 once idle);
        # copy_error checks it against e_busy & (just_started ? multi_r : more_r)
        m.d.sync += more.eq(Mux(start_new, multi_n, more_keep))
        rest_after = Signal()  # chunks of the entry left after this cycle
        # final_ok: a READ now would be its entry's last (issue & last & ~rest_after), worked out
        # from state alone for both kinds of READ (a READ without ``more`` is a start), so the
        # port's go reaches ``final`` (and the arbiter's next phase) through one AND, not
        # through the start's rest_after multiplexers
        final_ok = Signal(name="final_ok")
        m.d.comb += final_ok.eq(Mux(more, ~more_next & ~rest_nz,
                                    ~multi_n & ~Mux(rest_nz, rest_left != 1, q_head.more != 0)))
        # The start decision from flip-flops: ``s_ok`` (a new chunk may start: no beat left,
        # header room, a chunk of the entry left or a queue entry) and ``i_ok`` (a READ is due:
        # ``more | s_ok``) are worked out a cycle ahead, so a start is ``go & s_ok`` and a READ
        # ``go & i_ok``: the queue count, the header room and the entry's state no longer sit
        # between the port's ``go`` and the store's ``cmd.valid`` / the start's enables.
        # ``allow_pop`` is not in s_ok: once the emitter has popped its entry it still has a beat
        # or a chunk of that entry left until the port returns (``finish``), so a start then is
        # always from the entry's rest; copy_error checks both flags and that claim every cycle.
        s_ok, i_ok = Signal(name="s_ok"), Signal(name="i_ok")
        start_rest, start_q = Signal(), Signal()
        m.d.comb += [start_new.eq(credit & s_ok), issue.eq(credit & i_ok)]
        # split_start (the DRAM reducer): the two kinds of start and the queue's pop are each
        # ``go`` and a flip-flop of their own (``sq_ok`` / ``sr_ok``: s_ok & ~rest_nz / s_ok &
        # rest_nz; ``sq_pn``: ~sq_ok, an inverted copy yosys does not merge), worked out a cycle
        # ahead with s_ok, so the port's go reaches the queue head's ~70 loads and the rest's
        # registers through one LUT, not through start_new's and start_q's nets in turn (the store's
        # cmd_in.s__ready -> go -> start_new -> start_q -> the pop -> q_head_nslot2, 10.12 ns at
        # session 42's landing seed 3); copy_error checks all three
        if self.split_start:
            sq_ok, sr_ok = Signal(name="sq_ok"), Signal(name="sr_ok")
            sq_pn = Signal(name="sq_pn", init=1)
            m.d.comb += [start_rest.eq(credit & sr_ok), start_q.eq(credit & sq_ok)]
            pop = credit & ~sq_pn
        else:
            m.d.comb += [start_rest.eq(start_new & rest_nz), start_q.eq(start_new & ~rest_nz)]
            pop = start_q
        m.d.comb += [self.q_pop.eq(pop), self.idle.eq(~more & ~rest_nz),
                     rest_after.eq(Mux(start_rest, rest_left != 1, Mux(start_q, q_head.more != 0, rest_nz)))]
        with m.If(credit & more):
            m.d.sync += e_beat.eq(e_beat + 1)
        # the slot of rest_chunk + 2: rest_nslot's next value at a start from the rest
        chunk2 = (rest_chunk[:sb] + 2)[:sb]
        if self.nslot_per_job:  # each job's slot of chunk2, rest_job choosing (class docstring)
            nslot2 = Signal(sb, name="rest_nslot2")
            with m.Switch(rest_job):
                for j in range(self.jobs):
                    with m.Case(j):
                        m.d.comb += nslot2.eq(slot_of(jc[j], chunk2, sb))
        else:
            nslot2 = slot_of(cfg_r, chunk2, sb)
        with m.If(start_rest):
            m.d.comb += [n_job.eq(rest_job), n_chunk.eq(rest_chunk), n_resent.eq(rest_resent)]
            nz, nslot = rest_left != 1, rest_nslot
            m.d.sync += [rest_chunk.eq(rest_chunk + 1), rest_left.eq(rest_left - 1),
                         rest_nz.eq(nz), rest_slot.eq(nslot), rest_nslot.eq(nslot2)]
            m.d.comb += [rest_nz_n.eq(nz), rest_slot_n.eq(nslot)]
        with m.If(start_q):
            m.d.comb += [n_job.eq(q_head.job), n_chunk.eq(q_head.chunk), n_resent.eq(q_head.resent)]
            nz, nslot = q_head.more != 0, q_nslot
            m.d.sync += [rest_job.eq(q_head.job), rest_chunk.eq(q_head.chunk + 1),
                         rest_left.eq(q_head.more), rest_nz.eq(nz),
                         rest_resent.eq(q_head.resent), rest_slot.eq(nslot),
                         rest_nslot.eq(q_nslot2)]
            m.d.comb += [rest_nz_n.eq(nz), rest_slot_n.eq(nslot)]
        # rest_mask's two start values as flip-flops of their own: rm_rest (rest_mask without
        # rest_slot, a start from the rest) and the queue's head_rest (its head's mask without
        # its slot, a start from the queue), so a start is only rest_mask's last select (cut
        # 8's seed 2: the start -> rest_chunk -> rest_mask, 8.00 ns). rm_rest's next value is
        # worked out for each case, the start picking last; copy_error checks both registers.
        rm_err = Const(0)
        if self.masks:
            rm_rest = Signal(S, name="rm_rest")
            rest_mask_d = Signal(S, name="rest_mask_d")
            nslot_r, nslot_q = rest_nslot, q_nslot
            m.d.comb += rest_mask_d.eq(Mux(start_new, Mux(rest_nz, rm_rest, self.q_head_rest), rest_mask))
            m.d.sync += [
                rest_mask.eq(rest_mask_d),
                rm_rest.eq(Mux(start_new, Mux(rest_nz, rm_rest & ~(Const(1, S) << nslot_r),
                                              self.q_head_rest & ~(Const(1, S) << nslot_q)), rm_rest)),
            ]
            rm_err = ((rm_rest != (rest_mask & ~(Const(1, S) << rest_slot)))
                      | (self.q_head_rest != (self.q_head_mask & ~(Const(1, S) << q_head.slot))))
        # next values: more (above), an entry's chunk left, the queue non-empty, header room;
        # worked out for a start and for no start from flip-flops, start_new picking last
        q_nz = self.q_count != 0
        s_start = ~multi_n & self.hdr_room_next & Mux(
            rest_nz, (rest_left != 1) | q_nz | self.q_push,
            (q_head.more != 0) | (self.q_count + self.q_push > 1))
        s_keep = ~more_keep & self.hdr_room_next & (rest_nz | q_nz | self.q_push)
        i_start = multi_n | s_start
        i_keep = more_keep | s_keep
        m.d.sync += [s_ok.eq(Mux(start_new, s_start, s_keep)), i_ok.eq(Mux(start_new, i_start, i_keep))]
        if self.split_start:  # rest_nz's next value: a start's (its entry's more or rest), else held
            nz_start = Mux(rest_nz, rest_left != 1, q_head.more != 0)
            sq_next = Mux(start_new, s_start & ~nz_start, s_keep & ~rest_nz)
            m.d.sync += [sq_ok.eq(sq_next), sq_pn.eq(~sq_next),
                         sr_ok.eq(Mux(start_new, s_start & nz_start, s_keep & rest_nz))]
        mn_check = (~just_started & e_busy) if self.shared_tag_port else ~just_started
        err = ((more != (e_busy & Mux(just_started, multi_r, more_r)))
               | (s_ok != (~more & self.hdr_room & (rest_nz | q_nz))) | (i_ok != (more | s_ok))
               | (start_q & ~self.allow_pop)
               | (mn_check & (mn_r != ((e_beat + 1) <= te.nbm1)))
               | (issue & (final_ok != (self.last & ~rest_after)))
               | (start_new & (multi_at != slot_n)) | rm_err
               | (rest_nz & (rest_nslot != slot_of(cfg_r, rest_chunk + 1, sb)))
               | (just_started & (multi2_r != te.nbm1[1:].any())))
        if self.held_next_slots:
            err = err | (q_nz & ((q_nslot != q_nslot_x) | (q_nslot2 != q_nslot2_x)))
        if self.split_start:
            err = err | (sq_ok != (s_ok & ~rest_nz)) | (sq_pn != ~sq_ok) | (sr_ok != (s_ok & rest_nz))
        m.d.comb += self.copy_error.eq(err)
        with m.If(start_new):
            m.d.sync += [e_busy.eq(1), e_job.eq(n_job), e_chunk.eq(n_chunk), e_beat.eq(1),
                         e_resent.eq(n_resent), e_slot.eq(slot_n)]
            if self.masks:
                m.d.sync += e_oh.eq(Const(1, S) << slot_n)
        with m.Elif(~more):
            m.d.sync += e_busy.eq(0)
        # The READ's row and ``last`` select with ``more`` (a flip-flop), not with start_new (the
        # start decision: go, hdr_room, the queue, rest_nz): a READ is issued with ``more`` for
        # the current chunk's next beat, without it only by a start, so both agree on every
        # READ issued (the store's block-RAM address then starts from flip-flops and e_phase)
        addr_slot = Mux(more, e_slot, slot_n)
        addr_beat = Mux(more, e_beat, 0)
        m.d.comb += [
            self.tag_addr.eq(multi_at if self.registered_tag_addr else slot_n),
            self.tag_en.eq(start_new),
            self.row_addr.eq(Cat(addr_beat[:rb], addr_slot) if rb else addr_slot),
            self.slot.eq(addr_slot),
            self.last.eq(~Mux(more, more_next, multi_n)),
            self.final.eq(issue & final_ok),
        ]
        # the header of the chunk started last cycle (the tag just read); overflow is added by
        # the assembler from the slot store's responses
        m.d.comb += [self.hdr_valid.eq(just_started),
                     *result_header(self.hdr, te, Cat(Const(0, 2), e_resent))]  # OVERFLOW (later), -, RESENT
        return m


def result_header(h: Value, tag: Value, flags: Value) -> list:
    """The assignments of a RESULT header ``h`` (``AggHeaderLayout``) from a slot's ``tag``
    (``slot_tag_layout``) with ``flags``: the one place a result's header is made from a tag
    (``ResultEmitter``, ``RecordEmitter``)."""
    return [
        h.msg_type.eq(wire.MsgType.RESULT),
        h.flags.eq(flags),
        h.group_id.eq(tag.group),
        h.job_id.eq(tag.job),
        h.round_id.eq(tag.round),
        h.chunk.eq(tag.chunk),
        h.sender_id.eq(0),
        h.scale_exp.eq(tag.scale),
        h.element_count.eq(tag.count),
        h.session.eq(tag.session),
    ]
