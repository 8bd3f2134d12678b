"""The decision as the record engine's modify (issue 16, large S step 4; docs/large_slots.md, "The
record store", "How a 256-bit record travels"): a contribution's decision made on its slot's
record in DRAM, a read-modify-write of ``DramRmwEngine`` (``hdl/dram_rmw_engine.py``).

The row is the slot's record (``record_layout``: the tag, the last ADD's outcome ``code`` and
data ``op``, spare bits). The operands:

- ``side`` (``RecordSide``): the message's header and the configuration's checks of it
  (``DecisionConfig``: members bitmap, sender bit, unconf / nonmem, in_order, log2_window,
  cwrite, nbm1): what ``TagDecision`` takes besides the tag and the late operand, looked up by
  the command's owner when it makes the command and carried in the side;
- ``late`` (``decision_state.late_layout``): the job's head and the slot's pending bit at C2
  (``DecisionState``), and for a release candidate the run of pending slots behind the head;
  the decision compares the chunk with both heads ``late.heads`` holds and chooses the results
  (round 9: the head's choice not in front of the compares), the effect uses ``late.head``.

ADD is one contribution's decision, by ``TagDecision`` (the reducer's own table, one case): the
record after has the tag ``TagDecision`` writes when the op is not OP_NONE (else the tag as it
was), its ``code`` (``model.Outcome``) and its ``op`` as the payload gate's ``Decision`` (WRITE,
ADD, or DISCARD for no data op): the engine's response is the row after, so it carries both.
``effect`` (the head and pending parts in-order release only, as the reducer's ``fx_c`` / ``fx_s``): completed at the
job's head, the head's chunk and the ``late.run`` pending slots behind it are released
(``release``; new head = head + 1 + run, its slot the old one's + 1 + run mod S: right on the
whole ring, and a ``DecisionState`` with regions derives the slot from the chunk); completed
behind the head, the slot's pending bit is set; a resend (RESULT_RESENT: the chunk released and
still held, in either mode), ``resend`` (the state queues the slot for the emitter, in decision
order); on-completion release, a contribution completing its chunk (the tag written DONE, which
with the pending bit 0 is RELEASED), ``complete`` (queued the same way, not resent). The
record after has ``emit`` set exactly when the effect is ``release`` or ``complete`` (the
completing contribution's own store responses are its chunk's result rows; not kept: the next
ADD writes it again). WRITE
stores the command's data (a FREE / CLEAR writes a fresh record), READ returns the record: no
effect. ``overflow`` is 0 (no lanes). Combinational.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from wanreduce.model import Outcome

from .decision_state import effect_layout, late_layout
from .layouts import lanes
from .payload_gate import Decision
from .reducer_layouts import OP_ADD, OP_NONE, OP_WRITE, RECORD_BITS, RecordSide, record_layout
from .slot_store_signature import Op
from .tag_decision import TagDecision

__all__ = ["RecordDecision"]


class RecordDecision(wiring.Component):
    """The record engine's modify (module docstring): ``a`` the record before, ``b`` the command's
    data, ``op``, ``side`` (``RecordSide``), ``late`` in; ``sum`` the record after, ``overflow``
    (0), ``effect`` out. ``row_width`` R (the engine's, at least the record's bits), ``slots`` /
    ``jobs``: the ``DecisionState``'s."""

    def __init__(self, row_width: int = RECORD_BITS, *, slots: int, jobs: int) -> None:
        self.record = record_layout(jobs, row_width)
        self.jobs = jobs
        super().__init__({
            "op": In(2), "a": In(row_width), "b": In(row_width), "sum": Out(row_width),
            "overflow": Out(lanes(row_width)), "side": In(RecordSide),
            "late": In(late_layout(slots)), "effect": Out(effect_layout(slots)),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.decide = td = TagDecision(jobs=self.jobs, alt_head=True)  # ``late.heads``: round 9
        before, cfg, late = self.record(self.a), self.side.cfg, self.late
        m.d.comb += [
            td.hdr.eq(self.side.hdr), td.bit.eq(cfg.bit), td.members.eq(cfg.members), td.unconf.eq(cfg.unconf),
            td.nonmem.eq(cfg.nonmem), td.in_order.eq(cfg.in_order), td.log2_window.eq(cfg.log2_window),
            td.cwrite.eq(cfg.cwrite), td.nbm1.eq(cfg.nbm1), td.tag.eq(before.tag),
            td.head.eq(late.heads.rd), td.head_alt.eq(late.heads.fx), td.alt.eq(late.heads.fwd),
            td.pending.eq(late.pending),
        ]
        op = td.out.op
        after, fx_emit = Signal(self.record), Signal()  # ``emit``: the effect releases or completes
        m.d.comb += [
            after.tag.eq(Mux(op != OP_NONE, td.tag_w, before.tag)), after.code.eq(td.code),
            after.op.eq(Mux(op == OP_WRITE, Decision.WRITE, Mux(op == OP_ADD, Decision.ADD, Decision.DISCARD))),
            after.emit.eq(fx_emit), after.spare.eq(before.spare),
        ]
        add = self.op == Op.ADD
        m.d.comb += [self.sum.eq(Mux(add, after.as_value(), self.a | self.b)), self.overflow.eq(0)]
        # the effect on the state, in-order release only (the reducer's fx_c / fx_s)
        fx, in_order = self.effect, add & cfg.in_order
        release = in_order & td.out.fxc
        m.d.comb += [
            fx.release.eq(release), fx.run.eq(late.run), fx.head_we.eq(release),
            fx.head.chunk.eq(late.head.chunk + 1 + late.run), fx.head.slot.eq(late.head.slot + 1 + late.run),
            fx.pending_we.eq(in_order & td.out.fxs), fx.pending.eq(1),
            fx.resend.eq(add & (td.code == Outcome.RESULT_RESENT)),
            fx.complete.eq(add & ~cfg.in_order & (op != OP_NONE) & td.out.done),
            fx_emit.eq(fx.release | fx.complete),
        ]
        return m
