"""The decision held for a message's later beats, out of ``Reducer.elaborate`` (issue 16 item 6;
docs/reducer.md, "Parts built inline"): the release entry and the slot tag stage 1's decision
makes on a message's first beat (``entry_d``, ``tag_d``, the entry's slot mask), the registers
that hold them and its data op for stage 2 (``op_r``, ``push_r``, ``entry_r``, ``tag_r``, the
flip-flop copies ``emit_r`` / ``more_nz_r``, ``queued_r``), and the outcome strobe for the
counters, registered twice (off the decision path).

Functions that build their logic into the caller's module, not components: a component boundary
would add ports and a hierarchy level to the reducer's RTLIL, which tests/test_default_rtl.py pins
(the netlist being placed); the reducer calls each where its statements were. ``HeldDecision``
wraps them for the unit tests.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.hdl import Module, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .decision import tag_write
from .layouts import AggHeaderLayout
from .params import check_core_params
from .reducer_layouts import bits_for, release_entry_layout, slot_tag_layout

__all__ = ["HeldDecision", "decided_entry", "held_flags_layout", "hold_decision"]


def decided_entry(m: Module, *, entry_layout: data.Layout, tag_layout: data.Layout, h1: Value, jb: int, slot1: Value,
                  resend: Value, done_new: Value, nbm1: Value, new_bm: Value, run: Value,
                  mask_d: Value | None = None, oh1: Value | None = None, clr: Value | None = None) -> tuple[Value, Value]:
    """The release entry (``entry_layout``: stage 1's job, chunk, ``slot1``, ``resend``, ``more``
    the ``run`` whatever the decision, counted only if it releases the run) and the tag
    (``tag_write``: ``done_new``, ``nbm1``, the bitmap ``new_bm``) of stage 1's message; with
    ``mask_d`` its slot mask, ``oh1 | clr``: its slot and the run's (not gated by the decision:
    an entry without a run also holds the pending slots its scan saw, which only delays
    contributions to those COMPLETE slots until it is emitted). Returns ``entry_d``, ``tag_d``."""
    entry_d = Signal(entry_layout)
    tag_d = Signal(tag_layout)
    m.d.comb += [
        entry_d.job.eq(h1.job_id[:jb]),
        entry_d.chunk.eq(h1.chunk),
        entry_d.slot.eq(slot1),
        entry_d.resent.eq(resend),
        *tag_write(tag_d, h1, jb, done_new, nbm1, new_bm),  # hdl/decision.py
    ]
    m.d.comb += entry_d.more.eq(run)
    if mask_d is not None:
        m.d.comb += mask_d.eq(oh1 | clr)
    return entry_d, tag_d


def hold_decision(m: Module, *, decide: Value, code: Value, outcome: Value, outcome_code: Value, op: Value,
                  push_d: Value, entry_d: Value, tag_d: Value, resend: Value, run_nz: Value, queued_d: Value,
                  op_r: Value, push_r: Value, entry_r: Value, tag_r: Value, queued_r: Value,
                  mask_r: Value | None = None, mask_d: Value | None = None) -> SimpleNamespace:
    """On a decision (``decide``) load its registers: ``op_r``, ``push_r`` (``push_d``),
    ``entry_r``, ``tag_r``, ``queued_r`` (``queued_d``: the entry goes to the emitter), the
    copies ``emit_r`` (== push_r & ~entry_r.resent) and ``more_nz_r`` (== entry_r.more != 0:
    ``run_nz``) and ``mask_r``; register ``decide`` (``decide_r``) and the ``outcome`` strobe a
    cycle after it, with ``code`` (worked out a cycle late). Returns decide_r, emit_r, more_nz_r."""
    decide_r = Signal()
    m.d.sync += [decide_r.eq(decide), outcome.eq(decide_r), outcome_code.eq(code)]
    emit_r, more_nz_r = Signal(), Signal()
    with m.If(decide):
        m.d.sync += [op_r.eq(op), push_r.eq(push_d), entry_r.eq(entry_d), tag_r.eq(tag_d),
                     emit_r.eq(push_d & ~resend), more_nz_r.eq(run_nz), queued_r.eq(queued_d)]
        if mask_r is not None:
            m.d.sync += mask_r.eq(mask_d)
    return SimpleNamespace(decide_r=decide_r, emit_r=emit_r, more_nz_r=more_nz_r)


def held_flags_layout() -> data.StructLayout:
    """The held decision's flags (``hold_decision``), by name."""
    return data.StructLayout({"op": 2, "push": 1, "emit": 1, "more_nz": 1, "queued": 1, "decide_r": 1,
                              "outcome": 1})


class HeldDecision(wiring.Component):
    """The two as one component (the unit tests): stage 1's header ``h1``, ``slot1``, the
    decision's outputs (``decide``, ``op``, ``push_d``, ``resend``, ``done_new``, ``queued_d``,
    ``run``, ``run_nz``), ``nbm1``, ``new_bm``, ``oh1`` / ``clr``, ``code`` in; ``entry_d`` /
    ``tag_d`` (combinational), ``entry_r``, ``tag_r``, ``mask_r``, ``flags`` (``held_flags_layout``)
    and ``outcome_code`` out."""

    def __init__(self, *, slots: int, jobs: int) -> None:
        check_core_params(slots=slots, jobs=jobs)
        self.slots, self.jobs = slots, jobs
        sb = max(1, (slots - 1).bit_length())
        entry, tag = release_entry_layout(jobs, slots), slot_tag_layout(jobs)
        super().__init__({
            "h1": In(AggHeaderLayout), "slot1": In(sb), "decide": In(1), "op": In(2), "push_d": In(1),
            "resend": In(1), "done_new": In(1), "queued_d": In(1), "run": In(sb), "run_nz": In(1), "nbm1": In(17),
            "new_bm": In(32), "oh1": In(slots), "clr": In(slots), "code": In(4),
            "entry_d": Out(entry), "tag_d": Out(tag), "entry_r": Out(entry), "tag_r": Out(tag), "mask_r": Out(slots),
            "flags": Out(held_flags_layout()), "outcome_code": Out(4),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        entry, tag = release_entry_layout(self.jobs, self.slots), slot_tag_layout(self.jobs)
        mask_d, mask_r = Signal(self.slots), Signal(self.slots)
        entry_d, tag_d = decided_entry(m, entry_layout=entry, tag_layout=tag, h1=self.h1, jb=bits_for(self.jobs),
                                       slot1=self.slot1, resend=self.resend, done_new=self.done_new, nbm1=self.nbm1,
                                       new_bm=self.new_bm, run=self.run, mask_d=mask_d, oh1=self.oh1, clr=self.clr)
        op_r, push_r, queued_r, outcome = Signal(2), Signal(), Signal(), Signal()
        entry_r, tag_r = Signal(entry), Signal(tag)
        h = hold_decision(m, decide=self.decide, code=self.code, outcome=outcome, outcome_code=self.outcome_code,
                          op=self.op, push_d=self.push_d, entry_d=entry_d, tag_d=tag_d, resend=self.resend,
                          run_nz=self.run_nz, queued_d=self.queued_d, op_r=op_r, push_r=push_r, entry_r=entry_r,
                          tag_r=tag_r, queued_r=queued_r, mask_r=mask_r, mask_d=mask_d)
        f = self.flags
        m.d.comb += [self.entry_d.eq(entry_d), self.tag_d.eq(tag_d), self.entry_r.eq(entry_r), self.tag_r.eq(tag_r),
                     self.mask_r.eq(mask_r), f.op.eq(op_r), f.push.eq(push_r), f.emit.eq(h.emit_r),
                     f.more_nz.eq(h.more_nz_r), f.queued.eq(queued_r), f.decide_r.eq(h.decide_r), f.outcome.eq(outcome)]
        return m
