"""JOBj_PROBE_BITMAP (``wanreduce.regs``) through a tag read port of its own, off the data path
(docs/reducer.md, "Storage", Probe).

Three registered steps every cycle: the probed slot from the job table and ``probe_chunk``, its
tag read (``rd_addr`` -> ``rd_data``), the answer (state, job and chunk compared; ``pending`` for
COMPLETE); with ``registered_key`` a fourth first, the key registered as it comes. A read that meets a tag write to its address is not used (the tag memory is built with
``no_rw_check``: undefined data); the pipeline runs every cycle, so the next read answers.
``probe_ok`` ties the answer to the key it was read for, so the control block never takes an
answer for another job or chunk. With ``shared_port`` the read port is another consumer's (the
emitter's, at large S: one copy of the tag memory fewer), which marks the cycles it keeps the
port (``rd_lost``): such a read is not used either, and the next free cycle answers.

With ``shared_port`` and from ``HOLD_ANSWER_MIN_SLOTS`` slots on, an unused read does not replace the answer
(``probe_bitmap`` and its key hold; ``probe_ok`` still vouches only for the last read's answer,
so no answer older than three cycles is vouched for): the control block takes the bitmap a cycle
after it saw ``probe_ok``, so with a lost read in between it would read another slot's tag (the
shared port: 0, a silently wrong "not held") or a block RAM's undefined read-during-write data;
held, it reads the answer vouched for or a newer one for the same key. At 16 slots and fewer the tag
memory is LUT RAM, whose read during a write returns the old tag (a valid answer one write
older), and there is no shared port: the answer is replaced every cycle, as it always was.

With ``registered_data`` (on chip above S 16, session 46) the read's result goes through one more
register stage before the compares: the tag's state, job, chunk and bitmap, the slot's pending
bit, the key it was read for and its collision flag (``q_*``), all loaded every cycle, so the
answer is the same function of the same read, a cycle later. ``probe_ok`` also asks that the
read the answer register loads next is for the same key (or unused), so the answer the control
block takes a cycle after ``probe_ok`` is still the key's when the key came back within the
answer pipeline's cycles (A, B, B, B, A: else B's answer); the stage starts unused after reset.
(`tag_mem` -> the chunk compare ->
`probe_bitmap` was 10.07 ns in the on-chip S 64 core's placement, the block RAM's
clock-to-output ~4 ns of it).

With ``held_first`` as well (the DRAM reducer, session 47) that stage registers the compares'
result instead of the tag's state, job and chunk: ``q_held`` is the "held" term (state, job and
chunk compared with the read's key, ``pending``) of the read, ``q_bitmap`` its bitmap, so the
answer is ``q_bitmap`` where ``q_held``: one LUT behind flip-flops, not the 32-bit compares
and their 32 loads (`probe`'s read key -> the job compare -> `probe_bitmap`, 8.40 ns at
session 46's landing seed 5). The same function of the same read as ``registered_data``'s,
the same cycle.

With ``registered_key`` the probed slot is worked out for each job (``slot_of`` on each job's
entry and the key's chunk) and the key's job chooses last: the key's job reaches the slot
register through one multiplexer, not through the job-table select, the window mask and the
adder (`probe.k_job` -> `probe.rd_addr`, 8.42 ns at session 46's landing seed 5). The same slot.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .layouts import JobCfgLayout
from .reducer_config import select_job_entry, slot_of
from .reducer_layouts import ACTIVE, DONE, bits_for, slot_tag_layout

__all__ = ["HOLD_ANSWER_MIN_SLOTS", "TagProbe"]

HOLD_ANSWER_MIN_SLOTS = 17  # from this S on, an unused read keeps the last answer (module docstring)


class TagProbe(wiring.Component):
    """The contributor bitmap of chunk ``probe_chunk`` of job ``probe_job`` while held
    unreleased (ACTIVE, or DONE with ``pending``), else 0; see the module docstring."""

    def __init__(self, *, slots: int, jobs: int, pending_bit: bool = False, shared_port: bool = False,
                 registered_key: bool = False, registered_data: bool = False, held_first: bool = False) -> None:
        if held_first and not registered_data:
            raise ValueError("held_first needs registered_data=True")
        # pending_bit: ``pending`` is the probed slot's bit, read at ``rd_addr`` with the tag
        # (the reducer's pending words); else the S pending bits. shared_port: ``rd_lost`` in.
        # registered_key: the key (probe_job, probe_chunk) through a register of its own before
        # the job-table select and ``slot_of`` (one cycle more per answer; the DRAM reducer's:
        # the control block's key select ran on into them, 9.10 ns, docs/benchmarks.md session 39)
        self.slots, self.jobs, self.pending_bit, self.shared_port = slots, jobs, pending_bit, shared_port
        self.registered_key = registered_key
        self.registered_data = registered_data  # the read's result registered first (module docstring)
        self.held_first = held_first  # ... as the compares' result (module docstring)
        sb = (slots - 1).bit_length()
        self.slot_bits = sb
        ports = {
            "job_cfg": In(data.ArrayLayout(JobCfgLayout, jobs)),
            "probe_job": In(range(jobs)),
            "probe_chunk": In(32),
            "rd_addr": Out(sb),
            "rd_data": In(slot_tag_layout(jobs)),
            "wr_en": In(1),
            "wr_addr": In(sb),
            "pending": In(1 if pending_bit else slots),
            "probe_bitmap": Out(32),
            "probe_ok": Out(1),
        }
        if shared_port:
            ports["rd_lost"] = In(1)  # this cycle's read at rd_addr is not the probe's
        super().__init__(ports)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        sb, jb = self.slot_bits, bits_for(self.jobs)
        key_job, key_chunk = self.probe_job, self.probe_chunk
        if self.registered_key:
            key_job, key_chunk = Signal(range(self.jobs), name="k_job"), Signal(32, name="k_chunk")
            m.d.sync += [key_job.eq(self.probe_job), key_chunk.eq(self.probe_chunk)]
            # the slot for each job, the key's job choosing last (module docstring)
            key_slot = Signal(sb, name="key_slot")
            with m.Switch(key_job):
                for j in range(self.jobs):
                    with m.Case(j):
                        m.d.comb += key_slot.eq(slot_of(self.job_cfg[j], key_chunk, sb))
        else:
            cfg = select_job_entry(m, self.job_cfg, self.jobs, key_job, "cfg_probe")
            key_slot = slot_of(cfg, key_chunk, sb)
        p_slot, r_slot, r_coll, v_ok = Signal(sb), Signal(sb), Signal(), Signal()
        p_job, r_job, v_job = Signal(jb), Signal(jb), Signal(jb)
        p_chunk, r_chunk, v_chunk = Signal(32), Signal(32), Signal(32)
        t = self.rd_data
        pend = self.pending if self.pending_bit else self.pending.bit_select(r_slot, 1)
        coll = self.wr_en & (self.wr_addr == p_slot)
        if self.shared_port:
            coll = coll | self.rd_lost
        pipe = [
            p_slot.eq(key_slot), p_job.eq(key_job),
            p_chunk.eq(key_chunk),
            r_slot.eq(p_slot), r_job.eq(p_job), r_chunk.eq(p_chunk),
            r_coll.eq(coll),
        ]
        a_job, a_chunk, a_coll = r_job, r_chunk, r_coll  # the read's key and collision, as the answer sees them

        def held_of(t: object, pend: Value, a_job: Value, a_chunk: Value) -> Value:
            """The probed chunk is held unreleased: the tag ``t`` read for key (a_job, a_chunk)."""
            return ((t.state == ACTIVE) | ((t.state == DONE) & pend)) & (t.job == a_job) & (t.chunk == a_chunk)

        if self.held_first:  # the stage holds the compares' result (module docstring)
            q_held, q_bitmap = Signal(name="q_held"), Signal(32, name="q_bitmap")
            q_job, q_chunk, q_coll = Signal(jb), Signal(32), Signal(init=1)
            pipe += [q_held.eq(held_of(t, pend, r_job, r_chunk)), q_bitmap.eq(t.bitmap),
                     q_job.eq(r_job), q_chunk.eq(r_chunk), q_coll.eq(r_coll)]
            held, bitmap, a_job, a_chunk, a_coll = q_held, q_bitmap, q_job, q_chunk, q_coll
        elif self.registered_data:  # one register stage more (module docstring)
            tl = slot_tag_layout(self.jobs)
            q_t = Signal(data.StructLayout({f: tl[f].shape for f in ("state", "job", "chunk", "bitmap")}),
                         name="q_tag")
            # (q_coll from 1: the stage holds no read after reset)
            q_pend, q_job, q_chunk, q_coll = Signal(name="q_pend"), Signal(jb), Signal(32), Signal(init=1)
            pipe += [q_t.state.eq(t.state), q_t.job.eq(t.job), q_t.chunk.eq(t.chunk), q_t.bitmap.eq(t.bitmap),
                     q_pend.eq(pend), q_job.eq(r_job), q_chunk.eq(r_chunk), q_coll.eq(r_coll)]
            t, pend, a_job, a_chunk, a_coll = q_t, q_pend, q_job, q_chunk, q_coll
        if not self.held_first:
            held, bitmap = held_of(t, pend, a_job, a_chunk), t.bitmap
        answer = [self.probe_bitmap.eq(Mux(held, bitmap, 0)), v_job.eq(a_job), v_chunk.eq(a_chunk)]
        fresh = v_ok.eq(~a_coll)  # probe_ok: only an answer from the last cycle's read
        if self.shared_port or self.slots >= HOLD_ANSWER_MIN_SLOTS:  # an unused read keeps the answer and its key
            m.d.sync += [*pipe, fresh]
            with m.If(~a_coll):
                m.d.sync += answer
        else:
            m.d.sync += [*pipe, *answer, fresh]
        ok = v_ok & (v_job == self.probe_job) & (v_chunk == self.probe_chunk)
        if self.registered_data:  # and the next answer (the q stage's read) is for the same key or not used
            ok = ok & (a_coll | ((a_job == self.probe_job) & (a_chunk == self.probe_chunk)))
        m.d.comb += [self.rd_addr.eq(p_slot), self.probe_ok.eq(ok)]
        return m
