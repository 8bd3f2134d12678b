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
  those three picking at the last multiplexers; cut 15: also for each value of stage 0's
  header-compare flags and ``dup`` (``COFACTORED``), which pick after them (the flip-flops sit
  at the tag memory's side). The reducer builds it inline, into its own
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

from itertools import product
from types import SimpleNamespace
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

__all__ = ["COFACTORED", "DecisionTable", "cofactor_select", "decision_table", "hdr_checks", "head_flags", "head_terms", "header_fields", "new_bitmap", "new_tag", "prio_of", "priority",
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
    op, resend) from the PriorityInputs ``c``. The first rule that holds wins; written as
    multiplexers, not an If chain, so that checks given as constants (``decision_table``'s
    cofactors) fold in Amaranth: an If on a constant writes Verilog yosys cannot read back."""
    same = c.same
    rules = [  # (holds, outcome, op, resend)
        (c.unconf, Outcome.REJECT_UNCONFIGURED, OP_NONE, 0),
        (c.nonmem, Outcome.REJECT_NON_MEMBER, OP_NONE, 0),
        (c.oow, Outcome.OUT_OF_WINDOW, OP_NONE, 0),
        (same & c.mismatch, Outcome.REJECT_MISMATCH, OP_NONE, 0),
        (same & c.released, Outcome.RESULT_RESENT, OP_NONE, 1),
        (same & c.dup, Outcome.DUPLICATE, OP_NONE, 0),
        (same, Outcome.AGGREGATED, OP_ADD, 0),
        (c.late, Outcome.STALE, OP_NONE, 0),  # behind the head and no longer held
        (c.busy, Outcome.REJECT_BUSY, OP_NONE, 0),
        (c.older, Outcome.STALE, OP_NONE, 0),
    ]
    code, op, resend = Signal(4), Signal(2), Signal()
    val = [Value.cast(Outcome.AGGREGATED), Value.cast(OP_WRITE), Value.cast(0)]  # none holds
    for holds, *rule in reversed(rules):
        val = [Mux(holds, r, v) for r, v in zip(rule, val, strict=True)]
    m.d.comb += [code.eq(val[0]), op.eq(val[1]), resend.eq(val[2])]
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


# ck_pre's flags that select the decision's outputs at their last multiplexers (cut 15,
# ``decision_table``): the header compares and ``dup``, the flags main's and cut 14b's board seed 3
# paths took from the tag memory's side into the case table
COFACTORED = ("same", "mismatch_round", "mismatch", "dup")


def cofactor_select(flags: Any, names: tuple[str, ...], table: dict[tuple[int, ...], Value]) -> Value:
    """Shannon expansion put back together: ``table[v]`` (one value for each assignment ``v`` of
    the one-bit ``flags`` named ``names``, in that order) picked by the flags' values, the first
    name at the last multiplexer."""
    if not names:
        return table[()]
    sub = [cofactor_select(flags, names[1:], {v[1:]: x for v, x in table.items() if v[0] == b}) for b in (0, 1)]
    return Mux(getattr(flags, names[0]), sub[1], sub[0])


def decision_table(m: Module, *, ck_pre: Value, ck_live: Value, head: Any, head_fwd: Any, fwd_job: Value,
                   pending: Any, flags: Any, late: Any, cofactor: tuple[str, ...] = COFACTORED) -> dict[str, Value]:
    """Stage 1's decision as a table of its late inputs (cut 10), built into ``m``: the outcome
    (DecisionOutcome's fields, by name) for each of six cases, picked by ``late``'s ``live`` /
    ``fx_c`` / ``fx_s`` at the last multiplexers. The reducer calls it inline (no hierarchy
    level, so its pinned RTLIL is main 6d9e5c0's, whose Fmax was placed); ``DecisionTable``
    wraps it. Inputs as ``DecisionTable``'s ports, each a view or any object with the fields'
    names as attributes (``head``: HeadChecks, ``head_fwd``: late / below_end / at_head,
    ``pending``: bit / clr / set, ``flags``: DecisionFlags, ``late``: DecisionLate).

    ``cofactor`` (cut 15): ck_pre's flags (TagChecks' names) that are late too. The table is
    worked out for each of their values with those flags as constants, from the other inputs,
    and they pick at the last multiplexers (``cofactor_select``), after ``live``: ck_pre's
    flip-flops, at the tag memory's side, then reach each output through that select only.
    ``()``: cut 10's table."""
    names = [n for n, _ in TagChecks]
    if not set(cofactor) <= set(names) or len(set(cofactor)) != len(cofactor):
        raise ValueError(f"cofactor must be distinct TagChecks fields of {names}, got {list(cofactor)}")
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
            "push_c": f.valid & f.adv & (opc_nz | (f.last & Mux(f.first, queued_k, f.queued_r))),
        }

    def by_fx(k: Value) -> dict[str, Value]:
        """The outcome with the checks ``k``, fx_c / fx_s picking at the last multiplexers
        (field by field: an output that is the same in every case, e.g. ``done``, folds)."""
        cases = {cs: case(k, *cs) for cs in ((0, 0), (1, 0), (0, 1))}
        return {name: Mux(late.fx_c, cases[1, 0][name], Mux(late.fx_s, cases[0, 1][name], cases[0, 0][name]))
                for name, _ in DecisionOutcome}

    live_out = by_fx(ck_live)
    pre_outs = {}
    for v in product((0, 1), repeat=len(cofactor)):  # ck_pre with the cofactored flags as constants
        k = SimpleNamespace(**{n: getattr(ck_pre, n) for n in names})
        for n, b in zip(cofactor, v, strict=True):
            # a net driven by the constant, not the constant: priority's m.If on a Const writes
            # Verilog that yosys cannot read back (an empty full_case block); synthesis folds it
            setattr(k, n, Signal(init=b, name=f"ck_pre_{n}_{b}"))
            m.d.comb += getattr(k, n).eq(b)
        pre_outs[v] = by_fx(k)
    return {name: cofactor_select(ck_pre, cofactor, {v: Mux(late.live, live_out[name], o[name])
                                                     for v, o in pre_outs.items()})
            for name, _ in DecisionOutcome}


class DecisionTable(wiring.Component):
    """Stage 1's decision as a table of its late inputs (cut 10; ``decision_table``, wrapped for
    the unit tests and ``TagDecision``).

    In: ``ck_pre`` / ``ck_live`` (TagChecks from stage 0 / against the tag the previous decision
    wrote), ``head`` (HeadChecks, registered), ``head_fwd`` (HeadChecks against the head the
    previous decision forwards, valid if ``fwd_job``: it was stage 1's job), ``pending``
    (PendingInputs: the slot's bit and whether the previous decision's run clears / its own slot
    sets it), ``flags`` (DecisionFlags), ``late`` (DecisionLate: ``live``, ``fx_c``, ``fx_s``,
    at most one of ``fx_c`` / ``fx_s``). Out: ``out`` (DecisionOutcome). Combinational.
    ``cofactor``: ck_pre's flags that pick last (``decision_table``; ``()``: none)."""

    def __init__(self, cofactor: tuple[str, ...] = COFACTORED) -> None:
        self.cofactor = tuple(cofactor)
        super().__init__({
            "ck_pre": In(TagChecks), "ck_live": In(TagChecks), "head": In(HeadChecks),
            "head_fwd": In(HeadChecks), "fwd_job": In(1), "pending": In(PendingInputs),
            "flags": In(DecisionFlags), "late": In(DecisionLate), "out": Out(DecisionOutcome),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        out = decision_table(m, ck_pre=self.ck_pre, ck_live=self.ck_live, head=self.head,
                             head_fwd=self.head_fwd, fwd_job=self.fwd_job, pending=self.pending,
                             flags=self.flags, late=self.late, cofactor=self.cofactor)
        m.d.comb += [getattr(self.out, name).eq(v) for name, v in out.items()]
        return m
