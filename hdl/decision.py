"""Stage 1's decision, out of ``hdl/reducer.py`` (issue 16 item 6; docs/reducer.md, "The decision as
a component").

The pure combinational part of a contribution's decision: its checks (a tag against the
message's header and sender bit, the chunk against its job's head, the slot's pending bit) ->
the model's order of checks (``priority``) -> the outcome (data op, resend, the new tag's
state, the release entry's push, the effect on the head / pending bits). The checks as functions and one
table of cases:

* ``decision_table``: the reducer's form (cut 10, docs/reducer.md "The decision as a table of its
  late inputs"): the outcome worked out for each of six cases of its three late inputs (the
  checks' source ``live``, the previous decision's ``fx_c`` / ``fx_s``) from the other inputs,
  those three picking at the last multiplexers. The reducer builds it inline, into its own
  module with main 6d9e5c0's names and statement order, so its RTLIL (pinned by
  tests/test_default_rtl.py) is that placed netlist's: as a submodule it was another netlist,
  2-10 MHz lower at 7 of 8 seeds (docs/benchmarks.md). ``DecisionTable`` wraps it as a
  component (the unit tests, ``TagDecision``);
* ``TagDecision`` (hdl/tag_decision.py): header fields, the slot's tag, the job's head and the
  slot's pending bit in; the outcome code, op, the tag to write and the effect out (one case of
  the same table: no late inputs). The form a record engine's modify function can reuse
  (``hdl/dram_rmw_engine.py``: side = header, late = head + pending bit).
"""

from __future__ import annotations

from typing import Any

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

__all__ = ["DecisionTable", "decision_table", "hdr_checks", "head_flags", "head_terms", "header_fields", "new_bitmap", "new_tag", "prio_of", "priority",
           "tag_checks", "tag_fields", "tag_write"]


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


def head_terms(chunk: Value, cw: Value, head: Value) -> dict[str, Value]:
    """HeadChecks' fields of ``chunk`` (``cw`` = chunk - window) against its job's ``head``, by
    name, unpacked (each field's logic built only where it is used: ``head_checks``)."""
    return {"late": (chunk - head)[31], "below_end": (cw - head)[31], "at_head": chunk == head}


def head_flags(chunk: Value, cw: Value, head: Value) -> Value:
    """HeadChecks of ``chunk`` (``cw`` = chunk - window) against its job's ``head``."""
    return pack_flags(HeadChecks, **head_terms(chunk, cw, head))


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


def new_bitmap(m: Module, same: Value, bitmap: Value, bit: Value) -> Signal:
    """The bitmap of the tag a decision writes: ADD (the same chunk) adds ``bit`` to ``bitmap``,
    WRITE (a new chunk) starts with it, so it follows from ``same`` alone."""
    nb = Signal(32, name="new_bitmap")
    m.d.comb += nb.eq(Mux(same, bitmap | bit, bit))
    return nb


def tag_write(t: Value, h: Value, jb: int, done: Value, nbm1: Value, bitmap: Value) -> list:
    """The statements that set the tag ``t`` a decision writes: ``done`` -> DONE else ACTIVE,
    ``h``'s fields, ``nbm1`` beats - 1, ``bitmap`` (``new_bitmap``)."""
    return [
        t.state.eq(Mux(done, DONE, ACTIVE)), t.job.eq(h.job_id[:jb]), t.round.eq(h.round_id),
        t.chunk.eq(h.chunk), t.group.eq(h.group_id), t.scale.eq(h.scale_exp),
        t.count.eq(h.element_count), t.session.eq(h.session), t.nbm1.eq(nbm1), t.bitmap.eq(bitmap),
    ]


def new_tag(m: Module, h: Value, jb: int, done: Value, same: Value, bitmap: Value, bit: Value,
            nbm1: Value, jobs: int) -> Value:
    """The tag a decision writes (``new_bitmap``, ``tag_write``), as a new signal."""
    t = Signal(slot_tag_layout(jobs), name="tag_d")
    m.d.comb += tag_write(t, h, jb, done, nbm1, new_bitmap(m, same, bitmap, bit))
    return t


def decision_table(m: Module, *, ck_pre: Value, ck_live: Value, head: Any, head_fwd: Any, fwd_job: Value,
                   pending: Any, flags: Any, late: Any | None, push_c_short: bool = False) -> dict[str, Value]:
    """Stage 1's decision as a table of its late inputs (cut 10), built into ``m``: the outcome
    (DecisionOutcome's fields, by name) for each of six cases, picked by ``late``'s ``live`` /
    ``fx_c`` / ``fx_s`` at the last multiplexers. The reducer calls it inline (no hierarchy
    level, so its pinned RTLIL is main 6d9e5c0's, whose Fmax was placed); ``DecisionTable``
    wraps it. Inputs as ``DecisionTable``'s ports, each a view or any object with the fields'
    names as attributes (``head``: HeadChecks, ``head_fwd``: late / below_end / at_head,
    ``pending``: bit / clr / set, ``flags``: DecisionFlags, ``late``: DecisionLate). ``late``
    None: no decision in between (the DRAM reducer's gap, docs/reducer.md "No decision in
    between"): the one case of ``ck_pre`` without ``fx_c`` / ``fx_s``, no multiplexer.
    ``push_c_short`` (DRAM): ``push_c``'s first-beat term as ``op_nz | (last & resend)`` rather
    than ``op_nz | (last & queued)``, the same function of the inputs (without a data op nothing
    completes, so ``push`` is ``resend`` and ``queued`` is ``resend``), without ``queued``'s cone
    (``at_head``, ``cadd``, ``cwrite``, ``run_nz``): `hc_r` / `ck_pre` -> the decision ->
    `queued_r` (the queued term's LUT) -> `push` was 8.42-8.60 ns at main db90a43's seeds 1 / 4 / 5."""
    f, hc, pd = flags, head, pending

    def case(k: Value, c: int, s_: int) -> dict[str, Value]:
        """The outcome with the checks ``k`` when the previous decision completed a chunk at
        the head (``c``), behind it (``s_``) or neither: from flip-flops only."""
        if c:  # the head this decision forwarded, for stage 1's job
            late_v = Mux(fwd_job, head_fwd.late, hc.late)
            below_v = Mux(fwd_job, head_fwd.below_end, hc.below_end)
            at_head_v = Mux(fwd_job, head_fwd.at_head, hc.at_head)
        else:
            late_v, below_v, at_head_v = hc.late, hc.below_end, hc.at_head
        p1 = pd.bit & ~pd.clr if c else (pd.bit | pd.set) if s_ else pd.bit
        _, op_k, resend_k = priority(m, PriorityInputs(prio_of(k, p1, late_v, ~late_v & ~below_v, f)))
        op_nz_k = op_k != OP_NONE
        done_k = Mux(k.same, k.cadd, f.cwrite)  # the tag written is complete
        comp_k = op_nz_k & done_k  # completes the chunk
        push_k = resend_k | (comp_k & (~f.in_order | at_head_v))  # pushes a release entry
        queued_k = push_k & (resend_k | (f.in_order & f.run_nz))  # ... that goes to the emitter
        opc_nz = Mux(f.first, op_nz_k, f.op_r_nz)  # stage 1's beat has a data op
        return {
            "op": op_k, "resend": resend_k, "done": done_k, "push": push_k, "queued": queued_k,
            "fxc": comp_k & at_head_v, "fxs": comp_k & ~at_head_v, "opc_nz": opc_nz,
            # the command FIFO's push (stage 2 pushes a command or a marker)
            "push_c": f.valid & f.adv & (opc_nz | (f.last & Mux(f.first, resend_k if push_c_short else queued_k,
                                                                  f.queued_r))),
        }

    if late is None:
        return case(ck_pre, 0, 0)
    cases = {(t, c, s_): case(k, c, s_) for t, k in ((1, ck_live), (0, ck_pre))
             for c, s_ in ((0, 0), (1, 0), (0, 1))}
    # field by field: an output that is the same in every case (e.g. ``done``: not on fx_c /
    # fx_s) folds to no multiplexer
    out = {}
    for name, _ in DecisionOutcome:
        by_t = [Mux(late.fx_c, cases[t, 1, 0][name], Mux(late.fx_s, cases[t, 0, 1][name], cases[t, 0, 0][name]))
                for t in (0, 1)]
        out[name] = Mux(late.live, by_t[1], by_t[0])
    return out


class DecisionTable(wiring.Component):
    """Stage 1's decision as a table of its late inputs (cut 10; ``decision_table``, wrapped for
    the unit tests and ``TagDecision``).

    In: ``ck_pre`` / ``ck_live`` (TagChecks from stage 0 / against the tag the previous decision
    wrote), ``head`` (HeadChecks, registered), ``head_fwd`` (HeadChecks against the head the
    previous decision forwards, valid if ``fwd_job``: it was stage 1's job), ``pending``
    (PendingInputs: the slot's bit and whether the previous decision's run clears / its own slot
    sets it), ``flags`` (DecisionFlags), ``late`` (DecisionLate: ``live``, ``fx_c``, ``fx_s``,
    at most one of ``fx_c`` / ``fx_s``). Out: ``out`` (DecisionOutcome). Combinational."""

    def __init__(self, *, push_c_short: bool = False) -> None:
        self.push_c_short = push_c_short
        super().__init__({
            "ck_pre": In(TagChecks), "ck_live": In(TagChecks), "head": In(HeadChecks),
            "head_fwd": In(HeadChecks), "fwd_job": In(1), "pending": In(PendingInputs),
            "flags": In(DecisionFlags), "late": In(DecisionLate), "out": Out(DecisionOutcome),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        out = decision_table(m, ck_pre=self.ck_pre, ck_live=self.ck_live, head=self.head,
                             head_fwd=self.head_fwd, fwd_job=self.fwd_job, pending=self.pending,
                             flags=self.flags, late=self.late, push_c_short=self.push_c_short)
        m.d.comb += [getattr(self.out, name).eq(v) for name, v in out.items()]
        return m
