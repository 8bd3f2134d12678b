"""Stage 1's decision, out of ``hdl/reducer.py`` (issue 16 item 6; docs/reducer.md, "The decision as
a component").

The pure combinational part of a contribution's decision: its checks (a tag against the
message's header and sender bit, the chunk against its job's head, the slot's pending bit) ->
the model's order of checks (``priority``) -> the outcome (data op, resend, the new tag's
state, the release entry's push, the effect on the head / pending bits). The checks as functions and one
table of cases:

* ``DecisionTable``: the reducer's form (cut 10, docs/reducer.md "The decision as a table of its
  late inputs"): the outcome worked out for each of six cases of its three late inputs (the
  checks' source ``live``, the previous decision's ``fx_c`` / ``fx_s``) from the other inputs,
  those three picking at the last multiplexers;
* ``TagDecision`` (hdl/tag_decision.py): header fields, the slot's tag, the job's head and the
  slot's pending bit in; the outcome code, op, the tag to write and the effect out (one case of
  the same table: no late inputs). The form a record engine's modify function can reuse
  (``hdl/dram_rmw_engine.py``: side = header, late = head + pending bit).
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from wanreduce.model import Outcome

from .reducer_layouts import (
    ACTIVE,
    DONE,
    FREE,
    OP_ADD,
    OP_NONE,
    OP_WRITE,
    DecisionFlags,
    DecisionLate,
    DecisionOutcome,
    HdrChecks,
    HeadChecks,
    PendingInputs,
    PriorityInputs,
    TagChecks,
    pack_flags,
    slot_tag_layout,
)

__all__ = ["DecisionTable", "hdr_checks", "head_flags", "header_fields", "new_tag", "prio_of", "priority",
           "tag_checks", "tag_fields"]


def hdr_checks(t: Value, h: Value, jb: int) -> tuple[Value, Value, Value]:
    """A tag's header fields (``t``: a slot tag, or a header's fields under the tag's names)
    against the header ``h``: (HdrChecks, round differs, group/scale/count/session differ), the
    two parts ORed into HdrChecks' mismatch (the round is registered apart in TagChecks)."""
    job, chunk, round_, group, scale, count, session = t
    mm_round = round_ != h.round_id
    mm_rest = ((group != h.group_id) | (scale != h.scale_exp) | (count != h.element_count)
               | (session != h.session))
    return pack_flags(HdrChecks, job_eq=job == h.job_id[:jb], chunk_eq=chunk == h.chunk,
                      back=(chunk - h.chunk)[31], mismatch=mm_round | mm_rest), mm_round, mm_rest


def tag_fields(t: Value) -> tuple:
    """A slot tag's header fields in ``hdr_checks``' order."""
    return t.job, t.chunk, t.round, t.group, t.scale, t.count, t.session


def header_fields(h: Value, jb: int) -> tuple:
    """A header's fields in ``hdr_checks``' order (the job cut to the tag's ``jb`` bits)."""
    return h.job_id[:jb], h.chunk, h.round_id, h.group_id, h.scale_exp, h.element_count, h.session


def tag_checks(t: Value, h: Value, bit: Value, members: Value, jb: int) -> Value:
    """A whole tag ``t`` against the header ``h`` and sender bit ``bit`` of a group of
    ``members`` (TagChecks)."""
    flags, mm_round, mm_rest = hdr_checks(tag_fields(t), h, jb)
    hc = HdrChecks(flags)
    return pack_flags(TagChecks, done=t.state == DONE, active=t.state == ACTIVE,
                      same=(t.state != FREE) & hc.job_eq & hc.chunk_eq,
                      mismatch_round=mm_round, mismatch=mm_rest,
                      dup=(t.bitmap & bit) != 0, cadd=(t.bitmap | bit) == members,
                      older=hc.job_eq & ~hc.chunk_eq & ~hc.back)


def head_flags(chunk: Value, cw: Value, head: Value) -> Value:
    """HeadChecks of ``chunk`` (``cw`` = chunk - window) against its job's ``head``."""
    return pack_flags(HeadChecks, late=(chunk - head)[31], below_end=(cw - head)[31], at_head=chunk == head)


def priority(m: Module, c: Value) -> tuple[Value, Value, Value]:
    """The model's checks in order (``model.AggregatorModel._contribute``): (outcome code, data
    op, resend) from the PriorityInputs ``c``."""
    code, op, resend = Signal(4), Signal(2), Signal()
    with m.If(c.unconf):
        m.d.comb += code.eq(Outcome.REJECT_UNCONFIGURED)
    with m.Elif(c.nonmem):
        m.d.comb += code.eq(Outcome.REJECT_NON_MEMBER)
    with m.Elif(c.oow):
        m.d.comb += code.eq(Outcome.OUT_OF_WINDOW)
    with m.Elif(c.same):
        with m.If(c.mismatch):
            m.d.comb += code.eq(Outcome.REJECT_MISMATCH)
        with m.Elif(c.released):
            m.d.comb += [code.eq(Outcome.RESULT_RESENT), resend.eq(1)]
        with m.Elif(c.dup):
            m.d.comb += code.eq(Outcome.DUPLICATE)
        with m.Else():
            m.d.comb += [code.eq(Outcome.AGGREGATED), op.eq(OP_ADD)]
    with m.Elif(c.late):  # behind the head and no longer held
        m.d.comb += code.eq(Outcome.STALE)
    with m.Elif(c.busy):
        m.d.comb += code.eq(Outcome.REJECT_BUSY)
    with m.Elif(c.older):
        m.d.comb += code.eq(Outcome.STALE)
    with m.Else():
        m.d.comb += [code.eq(Outcome.AGGREGATED), op.eq(OP_WRITE)]
    return code, op, resend


def prio_of(k: Value, p1: Value, late: Value, oow: Value, f: Value) -> Value:
    """PriorityInputs from the TagChecks ``k``, the slot's pending bit ``p1``, the head checks
    ``late`` / ``oow`` and the DecisionFlags ``f`` (unconf, nonmem, in_order)."""
    released = k.done & ~p1
    return pack_flags(
        PriorityInputs, unconf=f.unconf, nonmem=f.nonmem, oow=f.in_order & oow, same=k.same,
        mismatch=k.mismatch_round | k.mismatch, released=released, dup=k.dup, late=f.in_order & late,
        busy=k.active | (k.done & p1), older=released & k.older)


def new_tag(m: Module, h: Value, jb: int, done: Value, same: Value, bitmap: Value, bit: Value,
            nbm1: Value, jobs: int) -> Value:
    """The tag a decision writes (ADD: the same chunk, WRITE: a new one, so the bitmap follows
    from ``same`` alone): ``done`` -> DONE else ACTIVE, ``h``'s fields, ``nbm1`` beats - 1."""
    t = Signal(slot_tag_layout(jobs), name="tag_d")
    m.d.comb += [
        t.state.eq(Mux(done, DONE, ACTIVE)), t.job.eq(h.job_id[:jb]), t.round.eq(h.round_id),
        t.chunk.eq(h.chunk), t.group.eq(h.group_id), t.scale.eq(h.scale_exp),
        t.count.eq(h.element_count), t.session.eq(h.session), t.nbm1.eq(nbm1),
        t.bitmap.eq(Mux(same, bitmap | bit, bit)),
    ]
    return t


class DecisionTable(wiring.Component):
    """Stage 1's decision as a table of its late inputs (cut 10; module docstring).

    In: ``ck_pre`` / ``ck_live`` (TagChecks from stage 0 / against the tag the previous decision
    wrote), ``head`` (HeadChecks, registered), ``head_fwd`` (HeadChecks against the head the
    previous decision forwards, valid if ``fwd_job``: it was stage 1's job), ``pending``
    (PendingInputs: the slot's bit and whether the previous decision's run clears / its own slot
    sets it), ``flags`` (DecisionFlags), ``late`` (DecisionLate: ``live``, ``fx_c``, ``fx_s``,
    at most one of ``fx_c`` / ``fx_s``). Out: ``out`` (DecisionOutcome). Combinational."""

    def __init__(self) -> None:
        super().__init__({
            "ck_pre": In(TagChecks), "ck_live": In(TagChecks), "head": In(HeadChecks),
            "head_fwd": In(HeadChecks), "fwd_job": In(1), "pending": In(PendingInputs),
            "flags": In(DecisionFlags), "late": In(DecisionLate), "out": Out(DecisionOutcome),
        })

    def case(self, m: Module, k: Value, c: int, s_: int) -> Value:
        """The outcome with the checks ``k`` when the previous decision completed a chunk at
        the head (``c``), behind it (``s_``) or neither: from flip-flops only."""
        f, hc, pd = self.flags, self.head, self.pending
        if c:  # the head this decision forwarded, for stage 1's job (field by field, as before)
            hd = HeadChecks(pack_flags(HeadChecks, **{n: Mux(self.fwd_job, getattr(self.head_fwd, n), getattr(hc, n))
                                                      for n, _ in HeadChecks}))
        else:
            hd = hc
        p1 = pd.bit & ~pd.clr if c else (pd.bit | pd.set) if s_ else pd.bit
        _, op_k, resend_k = priority(m, PriorityInputs(prio_of(k, p1, hd.late, ~hd.late & ~hd.below_end, f)))
        op_nz_k = op_k != OP_NONE
        done_k = Mux(k.same, k.cadd, f.cwrite)  # the tag written is complete
        comp_k = op_nz_k & done_k  # completes the chunk
        push_k = resend_k | (comp_k & (~f.in_order | hd.at_head))  # pushes a release entry
        queued_k = push_k & (resend_k | (f.in_order & f.run_nz))  # ... that goes to the emitter
        opc_nz = Mux(f.first, op_nz_k, f.op_r_nz)  # stage 1's beat has a data op
        o = Signal(DecisionOutcome, name=f"case_{int(k is self.ck_live)}{c}{s_}")
        m.d.comb += [
            o.op.eq(op_k), o.resend.eq(resend_k), o.done.eq(done_k), o.push.eq(push_k),
            o.queued.eq(queued_k), o.fxc.eq(comp_k & hd.at_head), o.fxs.eq(comp_k & ~hd.at_head),
            o.opc_nz.eq(opc_nz),
            # the command FIFO's push (stage 2 pushes a command or a marker)
            o.push_c.eq(f.valid & f.adv & (opc_nz | (f.last & Mux(f.first, queued_k, f.queued_r)))),
        ]
        return o

    def elaborate(self, platform: object) -> Module:
        m = Module()
        lt = self.late
        cases = [[self.case(m, k, c, s_) for c, s_ in ((0, 0), (1, 0), (0, 1))] for k in (self.ck_pre, self.ck_live)]
        # field by field: an output that is the same in every case (e.g. ``done``: not on fx_c /
        # fx_s) folds to no multiplexer, as with one signal per output before
        for name, _ in DecisionOutcome:
            by_src = [Mux(lt.fx_c, getattr(at_head, name), Mux(lt.fx_s, getattr(behind, name), getattr(none, name)))
                      for none, at_head, behind in cases]
            m.d.comb += getattr(self.out, name).eq(Mux(lt.live, by_src[1], by_src[0]))
        return m

