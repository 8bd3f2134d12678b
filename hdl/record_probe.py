"""JOBj_PROBE_BITMAP on the record path (issue 16; docs/large_slots.md, "The core wiring", step 4):
the contributor bitmap lives in the slot's DRAM record, so a probe is a record READ on the record
engine's command port, answered with the record and the slot's pending bit at that READ.

The contract is the reducer's (``TagProbe``, hdl/tag_probe.py; the golden model's
``probe_bitmap``): ``probe_bitmap`` is the bitmap of chunk ``probe_chunk`` of job ``probe_job``
while its slot holds it unreleased (ACTIVE, or DONE and pending: the model's COMPLETE), else 0
(DONE and not pending: RELEASED); ``probe_ok``: the answer is for this cycle's job and chunk.
"Pending" is the slot's pending bit in ``DecisionState`` (set by an in-order completion behind the
head, cleared by the release of its run or a window reset; never set on completion), so the answer
does not depend on the release mode now: a chunk completed in order and still held reads its
bitmap after a switch to on-completion release, one released on completion reads 0 after a switch
back, as in the model.

- **Issue.** The key is registered with its slot (``slot_of`` in the job's region); a READ goes
  out (``cmd``: the slot) when none is in flight or just answered, no window reset waits
  (``stop``), and the answer held was for another key or stale a cycle before (a flip-flop).
  One READ in flight at a time.
- **The pending bit** costs no read port: every command in the engine's C2 gets its slot's
  pending bit as its late operand (``DecisionState``'s ``late.pending``, the bit port read as
  the command left C0, bypassed from the effects not yet written; a command behind a release
  waits until its clears are written), the READ included. The probe marks a command in C1 on
  its READ's slot (``ahead_valid`` / ``ahead_slot``, compared a cycle ahead) and takes
  ``late_pending`` when it is in C2: the last one before the answer is the READ's own (the
  engine completes in order) or a later command's on the slot (see Stale).
- **Stale.** A record changes only by a command to its slot (an ADD of a message, a sweep's FREE
  WRITE): every such command issued (``write`` / ``write_row``) after the answer's READ marks
  the answer stale (``probe_ok`` low) and a new READ goes out; the engine completes in order and
  forwards, so a READ issued after a command sees its effect. The pending bit changes by a SET
  (an ADD to the slot: a write, stale as above), by a window reset's CLEAR of the region (whose
  sweep FREE-WRITEs every record of the region: stale), or by the release of its run at the head,
  which moves the head past the chunk first (the head copy is written with the release's effect,
  the bits cleared cycles later): so a DONE chunk counts as pending only while not behind its
  job's head (``head``), recomputed every cycle (registered). A later READ on the slot taken as
  its bit (the emitter's) differs from the READ's own only by such a release.
- ``probe_ok`` = an answer not stale, for this cycle's key (the control block waits for it).
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .decision_state import CHUNK_BITS, region_layout
from .reducer_config import select_job_entry, slot_of
from .reducer_layouts import ACTIVE, DONE, record_layout

__all__ = ["RecordProbe"]


class RecordProbe(wiring.Component):
    """The probe as record READs (module docstring); ``slots`` S, ``jobs`` J.

    In: ``probe_job`` / ``probe_chunk``, ``region`` (per job), ``head`` (per job, the head copy),
    ``stop``, ``write`` / ``write_row`` (a command to a record issued now), ``ahead_valid`` /
    ``ahead_slot`` (the record engine's look-ahead: the command in C1, in C2 next cycle),
    ``late_pending`` (the pending bit of the command in C2, ``DecisionState``'s ``late.pending``),
    ``rsp`` (the READ's record). Out: ``cmd`` (a READ's slot), ``probe_bitmap``, ``probe_ok``."""

    def __init__(self, *, slots: int, jobs: int) -> None:
        self.slots, self.jobs = slots, jobs
        self.slot_bits = (slots - 1).bit_length()
        self.record = record_layout(jobs)
        super().__init__({
            "probe_job": In(range(jobs)), "probe_chunk": In(CHUNK_BITS),
            "probe_bitmap": Out(32), "probe_ok": Out(1),
            "region": In(data.ArrayLayout(region_layout(slots), jobs)),
            "head": In(data.ArrayLayout(CHUNK_BITS, jobs)), "stop": In(1),
            "write": In(1), "write_row": In(self.slot_bits),
            "ahead_valid": In(1), "ahead_slot": In(self.slot_bits), "late_pending": In(1),
            "cmd": Out(stream.Signature(self.slot_bits)), "rsp": In(stream.Signature(self.record)),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        sb, jobs = self.slot_bits, self.jobs

        def key(x: str) -> tuple[Signal, Signal, Signal]:
            return Signal(range(jobs), name=f"{x}_job"), Signal(CHUNK_BITS, name=f"{x}_chunk"), Signal(sb, name=f"{x}_slot")

        (p_job, p_chunk, p_slot), p_was = key("p"), Signal()  # the key registered, with its slot
        (a_job, a_chunk, a_slot), asked, a_stale = key("a"), Signal(name="asked"), Signal()  # the READ in flight
        (v_job, v_chunk, v_slot), v_valid, v_stale = key("v"), Signal(name="v_valid"), Signal()  # the answer held
        tag = Signal(self.record["tag"].shape)
        a_pend, v_pend, at_c2 = Signal(), Signal(), Signal()  # the READ's slot's pending bit; held; C2 on it
        region = select_job_entry(m, self.region, jobs, self.probe_job, "probe_region")
        m.d.sync += [p_job.eq(self.probe_job), p_chunk.eq(self.probe_chunk), p_slot.eq(slot_of(region, self.probe_chunk, sb)),
                     p_was.eq(1)]
        # ``other`` (the answer held is not for the key) a cycle old, from a flip-flop (its compares
        # reach neither the engine's command choice nor the owner FIFO: docs/large_slots.md, "The
        # record path's probe and control chains"), and no READ in the cycle after an answer
        # (``done``: ``other`` does not know it yet). A cycle old, it only sends a READ a cycle
        # late, or once more for a key that just changed: every READ is for the key of its
        # cycle, and ``probe_ok`` comes from the answer itself
        other, done = Signal(name="other"), Signal(name="done")
        m.d.sync += [other.eq(~v_valid | v_stale | (v_job != p_job) | (v_chunk != p_chunk)), done.eq(self.rsp.valid)]
        m.d.comb += [self.cmd.valid.eq(p_was & ~asked & ~done & ~self.stop & other), self.cmd.payload.eq(p_slot),
                     self.rsp.ready.eq(1)]
        hit_a = self.write & (self.write_row == a_slot)
        with m.If(self.cmd.valid & self.cmd.ready):
            m.d.sync += [asked.eq(1), a_job.eq(p_job), a_chunk.eq(p_chunk), a_slot.eq(p_slot), a_stale.eq(0)]
        with m.Elif(hit_a):
            m.d.sync += a_stale.eq(1)
        # the pending bit of every command in C2 on the READ's slot (its C1 compared a cycle ahead;
        # one marked before the READ fired is overwritten by the READ's own C2, which comes later)
        m.d.sync += at_c2.eq(self.ahead_valid & (self.ahead_slot == a_slot))
        with m.If(at_c2):
            m.d.sync += a_pend.eq(self.late_pending)
        with m.If(self.write & (self.write_row == v_slot)):
            m.d.sync += v_stale.eq(1)
        with m.If(self.rsp.valid):
            m.d.sync += [asked.eq(0), v_valid.eq(1), v_job.eq(a_job), v_chunk.eq(a_chunk), v_slot.eq(a_slot),
                         v_stale.eq(a_stale | hit_a), tag.eq(self.rsp.payload.tag), v_pend.eq(a_pend)]
        # the answer, from the record, its pending bit and the job's head now (registered with its key)
        head = select_job_entry(m, self.head, jobs, v_job, "probe_head")
        pending = (tag.state == DONE) & v_pend & ~(tag.chunk - head)[CHUNK_BITS - 1]
        held = ((tag.state == ACTIVE) | pending) & (tag.job == v_job) & (tag.chunk == v_chunk)
        ok, o_job, o_chunk = Signal(), Signal(range(jobs)), Signal(CHUNK_BITS)
        m.d.sync += [self.probe_bitmap.eq(Mux(held, tag.bitmap, 0)), o_job.eq(v_job), o_chunk.eq(v_chunk),
                     ok.eq(v_valid & ~v_stale & ~self.rsp.valid)]
        m.d.comb += self.probe_ok.eq(ok & (o_job == self.probe_job) & (o_chunk == self.probe_chunk))
        return m
