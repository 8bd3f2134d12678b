"""A contribution's decision from its header and its slot's tag (issue 16 item 6): the interface
a record engine's modify function can take (``hdl/dram_rmw_engine.py``'s ``modify``: side = the
header, late = the head and the pending bit), built from hdl/decision.py's checks and its table
(one case: no late inputs), so the reducer's decision and this one are the same logic."""

from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .decision import DecisionTable, head_flags, new_tag, prio_of, priority, tag_checks
from .layouts import AggHeaderLayout
from .reducer_layouts import (
    DecisionFlags,
    DecisionOutcome,
    HeadChecks,
    PriorityInputs,
    TagChecks,
    bits_for,
    slot_tag_layout,
)

__all__ = ["TagDecision"]


class TagDecision(wiring.Component):
    """A contribution's decision from its header and the slot's state (module docstring): one
    case of ``DecisionTable`` (no late inputs), with the checks made here.

    In: ``hdr`` (AggHeaderLayout), ``bit`` / ``members`` (the sender's bit, its group's
    bitmap), ``unconf`` / ``nonmem`` (job or group unconfigured / sender not a member: the
    configuration's checks), ``in_order`` (release mode), ``log2_window`` (of the job),
    ``cwrite`` (a single-member group: a first contribution completes), ``nbm1`` (payload beats
    - 1 for the new tag), ``tag`` (the slot's), ``head`` (the job's), ``pending`` (the slot is
    COMPLETE: DONE and waiting for in-order release). Out: ``code`` (a ``model.Outcome``),
    ``out`` (DecisionOutcome; ``push_c`` / ``opc_nz`` / ``queued`` as for one-beat messages),
    ``tag_w`` (the tag to write when ``out.op`` is not OP_NONE).

    ``alt_head`` (the records core's, round 9): also ``head_alt`` and ``alt`` in, the job's head
    being ``head_alt`` where ``alt`` (``DecisionState``'s forwarded head) and ``head`` else; the
    chunk is compared with both and ``alt`` chooses the three results, so the choice is not in
    front of the compares' carry chains (the same decision as with the chosen head)."""

    def __init__(self, *, jobs: int, alt_head: bool = False) -> None:
        self.jobs, self.alt_head = jobs, alt_head
        self.jb = bits_for(jobs)
        alt = {"head_alt": In(32), "alt": In(1)} if alt_head else {}
        super().__init__({**alt,
            "hdr": In(AggHeaderLayout), "bit": In(32), "members": In(32), "unconf": In(1),
            "nonmem": In(1), "in_order": In(1), "log2_window": In(range(33)), "cwrite": In(1),
            "nbm1": In(17), "tag": In(slot_tag_layout(jobs)), "head": In(32), "pending": In(1),
            "code": Out(4), "out": Out(DecisionOutcome), "tag_w": Out(slot_tag_layout(jobs)),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.table = tab = DecisionTable()
        h = self.hdr
        cw, ck, hc = Signal(32), Signal(TagChecks), Signal(HeadChecks)  # chunk - window, the checks
        m.d.comb += [
            cw.eq(h.chunk - (Const(1, 33) << self.log2_window)),
            ck.eq(tag_checks(self.tag, h, self.bit, self.members, self.jb)),
            hc.eq(Mux(self.alt, head_flags(h.chunk, cw, self.head_alt), head_flags(h.chunk, cw, self.head))
                  if self.alt_head else head_flags(h.chunk, cw, self.head)),
        ]
        f = Signal(DecisionFlags)  # one first-and-last beat, taken (valid, adv)
        m.d.comb += [
            f.valid.eq(1), f.first.eq(1), f.last.eq(1), f.adv.eq(1), f.unconf.eq(self.unconf),
            f.nonmem.eq(self.nonmem), f.in_order.eq(self.in_order), f.cwrite.eq(self.cwrite),
            tab.ck_pre.eq(ck), tab.ck_live.eq(ck), tab.head.eq(hc), tab.head_fwd.eq(hc), tab.fwd_job.eq(0),
            tab.pending.bit.eq(self.pending), tab.flags.eq(f), self.out.eq(tab.out),
        ]
        code, _, _ = priority(m, PriorityInputs(prio_of(ck, self.pending, hc.late, ~hc.late & ~hc.below_end, f)))
        m.d.comb += [
            self.code.eq(code),
            self.tag_w.eq(new_tag(m, h, self.jb, tab.out.done, ck.same, self.tag.bitmap, self.bit, self.nbm1,
                                  self.jobs)),
        ]
        return m
