"""Unit tests of the record decision (``hdl/record_decision.py``; issue 16, large S step 4): the
record engine's modify in Amaranth's simulator against the golden model
(``model.AggregatorModel.contribute`` through ``sim/decision_record_model.py``'s adapter) on
random slot setups (tests/test_decision.py's, with runs of complete chunks behind the head):
every outcome and drop reason, the record after, the response's code and data op, the effect."""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import Module
from amaranth.sim import Simulator
from stream_helpers import comb_cells_table
from test_decision import _scenario

from wanreduce.hdl import reducer_layouts as rl
from wanreduce.hdl.decision_state import effect_layout, late_layout
from wanreduce.hdl.payload_gate import Decision
from wanreduce.hdl.record_decision import RecordDecision
from wanreduce.hdl.slot_store_signature import Op
from wanreduce.hdl.tag_decision import TagDecision
from wanreduce.model import AggregatorModel, Outcome, ReleaseMode, SlotState
from wanreduce.sim.decision_record_model import (
    STATE_OF,
    DecisionRecordModel,
    pack,
    record_bits,
    side_bits,
    tag_fields,
)

M32 = 0xFFFFFFFF
W = 64  # the data width the tags' beats - 1 are counted at
SLOTS = 8


def _complete_behind_head(am: AggregatorModel, job_id: int, rng: random.Random, keep: int) -> None:
    """Mark up to 3 chunks right behind the job's head COMPLETE in their slots (not ``keep``), as
    in-order runs leave them: a release at the head then releases them too."""
    job = am.job_table[job_id]
    for k in range(1, rng.randint(1, job.window)):
        slot = am.slot_index(job, job.head + k)
        if slot == keep:
            break
        s = am.slot[slot]
        s.state, s.job_id, s.chunk, s.count = SlotState.COMPLETE, job_id, (job.head + k) & M32, 4
        s.bitmap = am.group_table[s.group_id]


def _run(dut: RecordDecision, cases, rng: random.Random) -> None:
    """Drive ``cases(ctx)`` on ``dut`` in Amaranth's simulator."""
    top = Module()
    top.submodules.dut = dut
    sim = Simulator(top)
    sim.add_testbench(cases)
    sim.run()


def test_record_decision_is_the_models_step() -> None:
    """ADD on random slot setups: the record after (the model's slot as a tag when the op is not
    OP_NONE, else unchanged; spare bits kept), its code (the model's outcome) and data op
    (WRITE / ADD / DISCARD), and the effect: a completion at the head in order releases the run
    behind it (the model's results) and advances the head as the model does, one behind it sets
    its slot's pending bit (the model's COMPLETE); on completion a completing contribution has
    ``complete`` (the model's one result); a resend (either mode) ``resend``; nothing else has an
    effect; ``emit`` exactly with ``release`` or ``complete``."""
    dut = RecordDecision(slots=SLOTS, jobs=2)
    rng = random.Random(27)
    seen: set[Outcome] = set()
    effects: dict[str, int] = {"emit": 0, "release": 0, "run": 0, "pending": 0, "complete": 0, "resend_on_completion": 0}

    async def cases(ctx) -> None:
        for _ in range(1000):
            am, msg, slot = _scenario(rng, bias=0.7)
            job = am.job_table[msg.job_id]
            if am.release == ReleaseMode.IN_ORDER and rng.random() < 0.8:
                _complete_behind_head(am, msg.job_id, rng, slot)
            head, head_slot = job.head, am.slot_index(job, job.head)
            pending = STATE_OF[am.slot[slot].state][1]
            spare = rng.getrandbits(dut.record["spare"].width)
            before = record_bits(2, tag_fields(am, slot, W), rng.getrandbits(4), rng.getrandbits(2), spare)
            twin = DecisionRecordModel(am, 2, W, lambda _s, r=before: r)
            ctx.set(dut.op, Op.ADD)
            ctx.set(dut.a, before)
            ctx.set(dut.b, rng.getrandbits(256))  # the data: not used by the decision
            ctx.set(dut.side.as_value(), side_bits(am, msg, W))
            outcome, decision, results = twin.contribute(msg)
            released_at_head = am.release == ReleaseMode.IN_ORDER and bool(results) and outcome == Outcome.AGGREGATED \
                and results[0].chunk == head
            run = len(results) - 1 if released_at_head else rng.randrange(4)
            # the head from one of ``heads``' two (``fwd``: the forwarded one), the other garbage
            fwd, other = rng.getrandbits(1), rng.getrandbits(32)
            ctx.set(dut.late.as_value(), pack(late_layout(SLOTS), {
                "head": {"chunk": head, "slot": head_slot}, "pending": pending, "run": run,
                "heads": {"fwd": fwd, "fx": head if fwd else other, "rd": other if fwd else head}}))
            after, fx = ctx.get(dut.sum), ctx.get(dut.effect)
            assert after == twin.record(slot), (msg, outcome, hex(after), hex(twin.record(slot)))
            assert ctx.get(dut.overflow) == 0
            emit = (after >> dut.record["emit"].offset) & 1  # the completer's own responses are the rows
            assert emit == (fx.release or fx.complete), (msg, outcome, results)
            effects["emit"] += emit
            seen.add(outcome)
            assert fx.release == released_at_head, (msg, outcome, results)
            assert fx.head_we == released_at_head
            if released_at_head:
                assert (fx.head.chunk, fx.run) == (job.head, len(results) - 1)
                effects["release"] += 1
                effects["run"] += run > 0
            sets = am.release == ReleaseMode.IN_ORDER and outcome == Outcome.AGGREGATED \
                and am.slot[slot].state == SlotState.COMPLETE
            assert (fx.pending_we, fx.pending_we and fx.pending) == (sets, sets), (msg, outcome)
            effects["pending"] += sets
            complete = am.release == ReleaseMode.ON_COMPLETION and outcome == Outcome.AGGREGATED and bool(results)
            assert (fx.complete, fx.resend) == (complete, outcome == Outcome.RESULT_RESENT), (msg, outcome, results)
            effects["complete"] += complete
            effects["resend_on_completion"] += am.release == ReleaseMode.ON_COMPLETION and fx.resend
            assert decision == Decision.DISCARD or after >> dut.record["tag"].offset & 3 != rl.FREE

    _run(dut, cases, rng)
    assert seen == set(Outcome), set(Outcome) - seen
    assert all(v >= 8 for v in effects.values()), effects


def test_write_and_read_have_no_effect() -> None:
    """WRITE gives the command's data (a fresh record: ``a`` is 0, as the engine passes it),
    READ the record (``b`` 0); neither has an effect, whatever the side and late operand."""
    dut = RecordDecision(slots=SLOTS, jobs=2)
    rng = random.Random(3)

    async def cases(ctx) -> None:
        for _ in range(200):
            op = rng.choice([Op.WRITE, Op.READ])
            a, b = rng.getrandbits(256), rng.getrandbits(256)
            ctx.set(dut.op, op)
            ctx.set(dut.a, 0 if op == Op.WRITE else a)
            ctx.set(dut.b, b if op == Op.WRITE else 0)
            ctx.set(dut.side.as_value(), rng.getrandbits(rl.RecordSide.size))
            ctx.set(dut.late.as_value(), rng.getrandbits(late_layout(SLOTS).size))
            assert ctx.get(dut.sum) == (b if op == Op.WRITE else a)
            fx = ctx.get(dut.effect)
            assert (fx.release, fx.head_we, fx.pending_we, fx.resend, fx.complete) == (0, 0, 0, 0, 0)

    _run(dut, cases, rng)
    assert effect_layout(SLOTS) == dut.effect.shape()


def test_record_layout_rejects_a_short_record() -> None:
    """A row narrower than the record: a one-line error naming the width and its minimum."""
    need = rl.slot_tag_layout(4).size + 7  # the tag, code, op, emit
    assert rl.record_layout(4).size == rl.RECORD_BITS
    with pytest.raises(ValueError, match=f"width must be at least {need}"):
        rl.record_layout(4, 128)


# round 9 (docs/large_slots.md, "(session 40, round 9)"): ``DecisionState``'s forwarded head's
# choice (``late.head = Mux(fx.head_we & same_job, fx.head, the heads' read)``) was in front of
# the decision's head checks (two 32-bit subtractions, an equality) and so of the engine's result
# row (11.27 ns in session 39's placement of the records core, 171 endpoints). The record
# decision's ``TagDecision`` now checks both heads (``late.heads``) and chooses the results.
def test_the_forwarded_heads_choice_is_after_the_head_checks() -> None:
    """``TagDecision(alt_head=True)``: within a cycle the choice ``alt`` reaches the outcome, the
    code and the tag to write through no adder, subtracter or compare, and each head through
    the checks' subtractions; on main 64d3389 there is no ``alt``: the chosen head came in
    through the checks (the test stops at the constructor there)."""
    td = TagDecision(jobs=2, alt_head=True)
    ends = ["out", "code", "tag_w"]
    table = comb_cells_table(td, ["alt", "head", "head_alt"], ends)
    arith = {"$add", "$sub", "$lt", "$le", "$gt", "$ge", "$eq", "$ne", "$alu"}
    assert table["alt", "out"] and table["alt", "code"], table
    assert not any(set(table["alt", e]) & arith for e in ends), table
    assert "$sub" in table["head", "code"] and "$sub" in table["head_alt", "code"], table

