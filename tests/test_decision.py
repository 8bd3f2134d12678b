"""Unit tests of the decision (hdl/decision.py, hdl/tag_decision.py; issue 16 item 6) on its
own, in Amaranth's simulator: ``TagDecision`` (header, tag, head, pending bit -> outcome, op, tag to write, effect)
against the golden model (``model.AggregatorModel.contribute`` on a slot set up as the tag
says), every outcome and drop reason reached; ``DecisionTable`` (cut 10's table of its late
inputs) against itself with the late inputs resolved beforehand; ``HeadCheck`` (hdl/head_check.py:
a chunk against its job's head or the forwarded new head) against a Python twin of the model's
head arithmetic, itself checked against the model's STALE / OUT_OF_WINDOW."""

from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from wanreduce.hdl import reducer_layouts as rl
from wanreduce.hdl.decision import DecisionTable
from wanreduce.hdl.head_check import HeadCheck, all_ones
from wanreduce.hdl.pending_effect import PendingEffect
from wanreduce.hdl.tag_decision import TagDecision
from wanreduce.model import SERIAL_HALF, AggregatorModel, Message, Outcome, ReleaseMode, SlotState
from wanreduce.sim.decision_record_model import STATE_OF

M32 = 0xFFFFFFFF
JOBS, SLOTS, LW = 2, 8, 2  # two jobs, four slots each (base 0 and 4)


def _comb_sim(top: Module, tb) -> None:
    """Run the testbench ``tb(ctx)`` on the combinational ``top``."""
    sim = Simulator(top)
    sim.add_testbench(tb)
    sim.run()


def _scenario(rng: random.Random, bias: float = 0.0) -> tuple[AggregatorModel, Message, int]:
    """A model with one slot set up at random near the message's (same or another chunk, job,
    header fields, bitmap, state; a head around the chunk), the message, the slot's index.
    ``bias``: the chance that the sender is a member, the chunk in the window and an ACTIVE
    slot's bitmap all members but the sender (so completions, at the head and behind it, are
    common; 0: the rng draws as without it)."""
    mode = rng.choice(list(ReleaseMode))
    am = AggregatorModel(slots=SLOTS, elements=4, groups=2, jobs=JOBS, release=mode)
    members = rng.choice([0b1, 0b0110, 0b1011, 0xF0, 0])
    am.set_group(0, members)
    am.set_group(1, 0b11)
    for j in range(JOBS):
        am.set_job(j, enabled=rng.random() < 0.93, base=4 * j, log2_window=LW)
    job, group = rng.randrange(JOBS), rng.choice([0, 0, 0, 1])
    head = rng.choice([0, 3, M32 - 1, rng.getrandbits(32)])
    am.reset_window(job, head)
    chunk = (head + rng.randint(-6, 7)) & M32
    sender = rng.choice([0, 1, 2, 3, 4, 5, 7, 9])
    biased = bias and rng.random() < bias
    if biased and am.group_table[group]:
        chunk = (head + rng.choice([0, rng.randrange(1 << LW)])) & M32
        sender = rng.choice([k for k in range(32) if am.group_table[group] >> k & 1])
    count = rng.choice([4, 3])
    msg = Message(msg_type=0, flags=0, group_id=group, job_id=job, round_id=rng.choice([1, 2]), chunk=chunk,
                  sender_id=sender, scale_exp=rng.choice([-3, 0]), element_count=count,
                  payload=np.zeros(count, np.int32), session=rng.choice([7, 8]))
    slot = am.slot_index(am.job_table[job], chunk)
    s = am.slot[slot]
    s.state = rng.choice(list(SlotState))
    s.job_id = job if rng.random() < 0.85 else 1 - job
    s.chunk = rng.choice([chunk, chunk, (chunk + 4) & M32, (chunk - 4) & M32, (chunk + 8) & M32])
    same_fields = rng.random() < 0.7
    s.round_id = msg.round_id if same_fields or rng.random() < 0.5 else 3 - msg.round_id
    s.group_id, s.scale_exp, s.count, s.session = msg.group_id, msg.scale_exp, msg.element_count, msg.session
    if not same_fields:
        field = rng.choice(["group_id", "scale_exp", "count", "session", None])
        if field is not None:
            setattr(s, field, getattr(s, field) ^ 1)
    # the model's invariants: COMPLETE / RELEASED hold all members of the tag's group, ACTIVE not all
    gm = am.group_table[s.group_id]
    done = s.state in (SlotState.COMPLETE, SlotState.RELEASED)
    s.bitmap = gm if done else rng.getrandbits(8) & gm
    if not done and s.bitmap == gm:
        s.bitmap = gm & (gm - 1)
    if biased and not done:
        s.bitmap = gm & ~(1 << sender)
    return am, msg, slot


def test_decision_against_the_model() -> None:
    """Every outcome and drop reason of the model, in both release modes, from the decision's
    own inputs: the outcome code, the op (WRITE for a new chunk, ADD for the same), the tag
    written (the slot's tag after the model's step), resend, whether a release entry is pushed
    (the model released results) and the effect (completed at the head / behind it)."""
    dut = TagDecision(jobs=JOBS)
    top = Module()
    top.submodules.dut = dut
    rng = random.Random(16)
    seen: set[Outcome] = set()
    effects: set[tuple[int, int]] = set()

    async def tb(ctx) -> None:
        for _ in range(1500):
            am, msg, slot = _scenario(rng)
            job = am.job_table[msg.job_id]
            s = am.slot[slot]
            members = am.group_table[msg.group_id]
            bit = 1 << msg.sender_id
            state, pending = STATE_OF[SlotState(s.state)]
            in_order = am.release == ReleaseMode.IN_ORDER
            head = job.head
            for name, value in (("job_id", msg.job_id), ("chunk", msg.chunk), ("round_id", msg.round_id),
                                ("group_id", msg.group_id), ("scale_exp", msg.scale_exp),
                                ("element_count", msg.element_count), ("session", msg.session),
                                ("sender_id", msg.sender_id)):
                ctx.set(getattr(dut.hdr, name), value)
            for name, value in (("state", state), ("job", s.job_id), ("round", s.round_id), ("chunk", s.chunk),
                                ("group", s.group_id), ("scale", s.scale_exp), ("count", s.count),
                                ("session", s.session), ("bitmap", s.bitmap), ("nbm1", 0)):
                ctx.set(getattr(dut.tag, name), value)
            ctx.set(dut.bit, bit)
            ctx.set(dut.members, members)
            ctx.set(dut.unconf, int(not job.enabled or members == 0))
            ctx.set(dut.nonmem, int(members & bit == 0))
            ctx.set(dut.in_order, int(in_order))
            ctx.set(dut.log2_window, job.log2_window)
            ctx.set(dut.cwrite, int(members == bit))
            ctx.set(dut.nbm1, 5)
            ctx.set(dut.head, head)
            ctx.set(dut.pending, pending)
            code, op, tag_w = ctx.get(dut.code), ctx.get(dut.out.op), ctx.get(dut.tag_w)
            out = ctx.get(dut.out)
            was_same = s.state != SlotState.FREE and s.job_id == msg.job_id and s.chunk == msg.chunk
            outcome, results = am.contribute(msg)
            seen.add(outcome)
            assert code == outcome, (msg, outcome, code)
            want_op = rl.OP_NONE if outcome != Outcome.AGGREGATED else rl.OP_ADD if was_same else rl.OP_WRITE
            assert op == want_op, (msg, outcome, op)
            assert out.resend == (outcome == Outcome.RESULT_RESENT)
            assert out.push == bool(results), (msg, outcome, results)
            complete = op != rl.OP_NONE and s.state in (SlotState.COMPLETE, SlotState.RELEASED)
            at_head = msg.chunk == head
            assert (out.fxc, out.fxs) == (int(complete and at_head), int(complete and not at_head))
            if complete:
                effects.add((out.fxc, out.fxs))
            if op != rl.OP_NONE:  # the tag written is the model's slot after the step
                assert out.done == complete
                want = {"state": rl.DONE if complete else rl.ACTIVE, "job": msg.job_id, "round": msg.round_id,
                        "chunk": msg.chunk, "group": msg.group_id, "scale": msg.scale_exp,
                        "count": msg.element_count, "session": msg.session, "bitmap": s.bitmap,
                        "nbm1": 5}
                assert {k: getattr(tag_w, k) for k in want} == want, (msg, outcome)

    _comb_sim(top, tb)
    assert seen == set(Outcome), set(Outcome) - seen
    assert effects == {(1, 0), (0, 1)}


def _resolved(late: dict, ck_pre: int, ck_live: int, head: int, head_fwd: int, fwd_job: int,
              pend: dict) -> tuple[int, int, int]:
    """The checks, head checks and pending bit the late inputs say (the previous decision's tag,
    its forwarded head, its effect on the slot's pending bit)."""
    ck = ck_live if late["live"] else ck_pre
    hd = head_fwd if late["fx_c"] and fwd_job else head
    bit = pend["bit"] & ~pend["clr"] & 1 if late["fx_c"] else pend["bit"] | pend["set"] if late["fx_s"] else pend["bit"]
    return ck, hd, bit


def _bits(layout, rng: random.Random) -> int:
    return rng.getrandbits(layout.size)


def test_table_picks_the_case_of_its_late_inputs() -> None:
    """``DecisionTable`` with its late inputs (``live``, ``fx_c``, ``fx_s``) gives the outcome of
    the same table fed the inputs they select (the live checks, the forwarded head checks, the
    pending bit after the previous decision's effect) with no late input set; random flags,
    biased so that every case changes the outcome somewhere."""
    dut, ref = DecisionTable(), DecisionTable()
    top = Module()
    top.submodules.dut, top.submodules.ref = dut, ref
    rng = random.Random(6)
    differs: set[tuple[int, int, int]] = set()

    async def tb(ctx) -> None:
        for _ in range(3000):
            late = {"live": rng.getrandbits(1), "fx_c": 0, "fx_s": 0}
            late[rng.choice(["fx_c", "fx_s", None]) or "live"] |= 1 if rng.random() < 0.7 else 0
            ck_pre, ck_live = _bits(rl.TagChecks, rng), _bits(rl.TagChecks, rng)
            head, head_fwd, fwd_job = _bits(rl.HeadChecks, rng), _bits(rl.HeadChecks, rng), rng.getrandbits(1)
            pend = {k: rng.getrandbits(1) for k in ("bit", "clr", "set")}
            flags = {n: rng.getrandbits(1) for n, _ in rl.DecisionFlags}
            flags["unconf"], flags["nonmem"] = int(rng.random() < 0.1), 0  # mostly configured members
            ck, hd, bit = _resolved(late, ck_pre, ck_live, head, head_fwd, fwd_job, pend)
            for d in (dut, ref):
                for k, v in flags.items():
                    ctx.set(getattr(d.flags, k), v)
            ctx.set(dut.ck_pre.as_value(), ck_pre)
            ctx.set(dut.ck_live.as_value(), ck_live)
            ctx.set(dut.head.as_value(), head)
            ctx.set(dut.head_fwd.as_value(), head_fwd)
            ctx.set(dut.fwd_job, fwd_job)
            for k, v in pend.items():
                ctx.set(getattr(dut.pending, k), v)
            for k, v in late.items():
                ctx.set(getattr(dut.late, k), v)
            ctx.set(ref.ck_pre.as_value(), ck)
            ctx.set(ref.ck_live.as_value(), ck_live ^ ck)  # not selected: must not matter
            ctx.set(ref.head.as_value(), hd)
            ctx.set(ref.head_fwd.as_value(), head_fwd ^ hd)
            ctx.set(ref.fwd_job, 1)
            ctx.set(ref.pending.bit, bit)
            ctx.set(ref.pending.clr, 1)
            ctx.set(ref.pending.set, 1)
            got, want = ctx.get(dut.out.as_value()), ctx.get(ref.out.as_value())
            assert got == want, (late, flags, ck_pre, ck_live, head, head_fwd, fwd_job, pend)
            # non-vacuous: the late inputs' resolution changed the inputs and the outcome
            base = ctx.get(ref.out.as_value())
            if (ck, hd, bit) != (ck_pre, head, pend["bit"]):
                ctx.set(ref.ck_pre.as_value(), ck_pre)
                ctx.set(ref.head.as_value(), head)
                ctx.set(ref.pending.bit, pend["bit"])
                if ctx.get(ref.out.as_value()) != base:
                    differs.add((late["live"], late["fx_c"], late["fx_s"]))

    _comb_sim(top, tb)
    assert {(1, 0, 0), (0, 1, 0), (0, 0, 1)} <= differs, differs


def test_short_push_c_is_the_same_function() -> None:
    """``DecisionTable(push_c_short=True)`` (the DRAM reducer's: ``push_c``'s first-beat term
    ``op_nz | (last & resend)`` instead of ``op_nz | (last & queued)``, hdl/decision.py) gives
    every output of the table without it, on random inputs (all of them free: the identity holds
    at every input, not only the reachable ones); non-vacuous: ``push_c`` set by a last beat
    without a data op (a resend) and by one with (``queued``'s other terms then do not matter)."""
    dut, ref = DecisionTable(push_c_short=True), DecisionTable()
    top = Module()
    top.submodules.dut, top.submodules.ref = dut, ref
    rng = random.Random(45)
    seen: set[tuple[int, int]] = set()

    async def tb(ctx) -> None:
        for _ in range(3000):
            ins = {"ck_pre": _bits(rl.TagChecks, rng), "ck_live": _bits(rl.TagChecks, rng),
                   "head": _bits(rl.HeadChecks, rng), "head_fwd": _bits(rl.HeadChecks, rng),
                   "fwd_job": rng.getrandbits(1), "pending": _bits(rl.PendingInputs, rng),
                   "flags": _bits(rl.DecisionFlags, rng), "late": _bits(rl.DecisionLate, rng)}
            for d in (dut, ref):
                for k, v in ins.items():
                    port = getattr(d, k)
                    ctx.set(port if k == "fwd_job" else port.as_value(), v)
            got, want = ctx.get(dut.out.as_value()), ctx.get(ref.out.as_value())
            assert got == want, ins
            o = ctx.get(ref.out)
            if o.push_c:
                seen.add((o.opc_nz, o.resend))

    _comb_sim(top, tb)
    assert {(0, 1), (1, 0)} <= seen, seen



def head_twin(chunk: int, window: int, head: int) -> dict[str, int]:
    """HeadChecks of ``chunk`` against ``head`` as the model computes them
    (``AggregatorModel._contribute``: d = chunk - head mod 2**32, late if d >= SERIAL_HALF, out
    of the window if not late and d >= window)."""
    d, dw = (chunk - head) & M32, (chunk - window - head) & M32
    return {"late": int(d >= SERIAL_HALF), "below_end": int(dw >= SERIAL_HALF), "at_head": int(chunk == head)}


def test_head_twin_is_the_models_window_check() -> None:
    """The twin's late / out-of-window agree with the model's STALE / OUT_OF_WINDOW for a
    contribution to a free slot around the head (in order, a one-member group: else AGGREGATED)."""
    rng = random.Random(12)
    seen = set()
    for _ in range(400):
        am = AggregatorModel(slots=SLOTS, elements=4, groups=1, jobs=1, release=ReleaseMode.IN_ORDER)
        am.set_group(0, 0b11)
        am.set_job(0, enabled=True, base=0, log2_window=LW)
        head = rng.choice([0, 5, SERIAL_HALF - 2, M32 - 2, rng.getrandbits(32)])
        am.reset_window(0, head)
        chunk = (head + rng.choice([rng.randint(-6, 7), SERIAL_HALF + rng.randint(-2, 2)])) & M32
        msg = Message(msg_type=0, flags=0, group_id=0, job_id=0, round_id=1, chunk=chunk, sender_id=0,
                      scale_exp=0, element_count=4, payload=np.zeros(4, np.int32), session=1)
        t = head_twin(chunk, 1 << LW, head)
        outcome, _ = am.contribute(msg)
        want = Outcome.STALE if t["late"] else Outcome.OUT_OF_WINDOW if not t["below_end"] else Outcome.AGGREGATED
        assert outcome == want, (head, chunk, t, outcome)
        seen.add(outcome)
    assert seen == {Outcome.STALE, Outcome.OUT_OF_WINDOW, Outcome.AGGREGATED}


def test_all_ones_is_every_bit_set() -> None:
    """``all_ones`` (hdl/head_check.py: the carry out of v + 1, the DRAM reducer's equalities as
    carry chains) is 1 exactly when every bit of ``v`` is: all ones, each single bit cleared,
    zero and random values, widths 1, 2, 5, 32."""
    for width in (1, 2, 5, 32):
        v = Signal(width)
        top = Module()
        out = Signal()
        top.d.comb += out.eq(all_ones(v))
        full = (1 << width) - 1
        rng = random.Random(width)
        values = [full, 0, *[full ^ (1 << i) for i in range(width)], *[rng.getrandbits(width) for _ in range(50)]]

        async def tb(ctx, v=v, out=out, values=values, full=full) -> None:
            for x in values:
                ctx.set(v, x)
                assert ctx.get(out) == int(x == full), (x, full)

        _comb_sim(top, tb)


@pytest.mark.parametrize(("per_job", "carry_eq", "split_eq", "reg_lo", "jobs"),
                         [(False, False, False, False, 3), (True, False, False, False, 3),
                          (True, True, False, False, 3), (True, True, True, False, 3), (True, True, True, True, 3),
                          (True, True, True, False, 2), (True, True, True, True, 2)])
def test_head_check_against_the_twin(per_job: bool, carry_eq: bool, split_eq: bool, reg_lo: bool,
                                     jobs: int) -> None:
    """``HeadCheck``: a chunk against its job's head register, or, when the previous decision
    completed at the head of the same job (``fwd.valid``, ``fwd.job``), against the new head it
    forwards (chunk + 1 + run: ``cp1 + run``, through the carry-save ``minus_hn`` / ``eq_hn``):
    the twin's flags for either head; chunks near the head, across the wrap and SERIAL_HALF.
    ``per_job`` (the DRAM reducer's: every job's compares, the job choosing the results) the
    same, also for a job number past the heads (its head 0, as without); ``carry_eq`` (the DRAM
    reducer's: the equalities as carry chains, ``all_ones``) the same; ``split_eq`` (the DRAM
    reducer's since session 46: the forwarded equality by ``eq_hn_split``, the run only in the low
    bits, cp1's upper bits + 1 given) the same, with cp1 + run carrying into and across the upper
    bits (cp1's low bits near all ones); ``reg_lo`` (the DRAM reducer's since session 48: the
    forwarded equality by ``eq_hn_reg``, cp1's low bits + run given as the register ``fx_lo``
    holds them, one chain; with two jobs the own head's equality one chain against the head the
    job selects) the same, with three jobs (a job past the heads) and two (the select folded)."""
    run_bits, lw = 4, 3
    dut = HeadCheck(jobs, run_bits, per_job=per_job, carry_eq=carry_eq, split_eq=split_eq, reg_lo=reg_lo)
    past = jobs < (1 << len(dut.job))  # a job number past the heads fits the port
    top = Module()
    top.submodules.dut = dut
    rng = random.Random(26)
    seen: set[tuple[int, int, int, int]] = set()

    async def tb(ctx) -> None:
        for _ in range(3000):
            heads = [rng.choice([0, M32, SERIAL_HALF - 1, rng.getrandbits(32)]) for _ in range(jobs)]
            job, fjob = rng.randrange(jobs + 1 if past and rng.random() < 0.1 else jobs), rng.randrange(jobs)
            valid = rng.getrandbits(1)
            cp1 = rng.choice([0, 1, M32, SERIAL_HALF, rng.getrandbits(32), M32 - rng.getrandbits(run_bits),
                              (rng.getrandbits(32) | 0xF) - rng.getrandbits(2)])
            run = rng.getrandbits(run_bits)
            fwd = valid and fjob == job
            head = (cp1 + run) & M32 if fwd else heads[job] if job < jobs else 0
            chunk = (head + rng.choice([rng.randint(-9, 10), SERIAL_HALF + rng.randint(-1, 1),
                                        rng.getrandbits(32)])) & M32
            cw = (chunk - (1 << lw)) & M32
            ctx.set(dut.job, job)
            ctx.set(dut.chunk, chunk)
            ctx.set(dut.cw, cw)
            for j in range(jobs):
                ctx.set(dut.heads[j], heads[j])
            for k, v in (("valid", valid), ("job", fjob), ("cp1", cp1), ("run", run)):
                ctx.set(getattr(dut.fwd, k), v)
            got = ctx.get(dut.checks)
            want = head_twin(chunk, 1 << lw, head)
            assert {k: getattr(got, k) for k in want} == want, (heads, job, fjob, valid, cp1, run, chunk)
            seen.add((int(fwd), *want.values()))

    _comb_sim(top, tb)
    # both heads, and with each: late, inside the window (at the head or behind it), beyond it
    assert {(f, 1, 1, 0) for f in (0, 1)} | {(f, 0, 1, a) for f in (0, 1) for a in (0, 1)} \
        | {(f, 0, 0, 0) for f in (0, 1)} <= seen, seen


@pytest.mark.parametrize(("jobs", "run_bits", "message"), [
    (0, 4, "jobs must be 1..16, got 0"),
    (17, 4, "jobs must be 1..16, got 17"),
    (2, 0, "run_bits must be 1..32, got 0"),
    (2, 33, "run_bits must be 1..32, got 33"),
    (2.0, 4, "jobs must be an integer, got 2.0"),
])
def test_head_check_rejects_bad_sizes(jobs, run_bits, message) -> None:
    """One-line errors naming the parameter and its range, from hdl/params.py's single check
    (the same text as the core's for ``jobs``)."""
    with pytest.raises(ValueError) as err:
        HeadCheck(jobs, run_bits)
    assert str(err.value) == message


def test_pending_effect_is_the_models_step() -> None:
    """``PendingEffect`` on the model's pending bits (slots COMPLETE: done, held for in-order
    release): a contribution completing a chunk either releases a run at the head (``effect.clr``
    with the released slots) or sets its own slot behind the head (``effect.set``), never both;
    the component's output is the model's vector after the step, and with its effect bit off a
    vector is not applied."""
    slots = 8
    dut = PendingEffect(slots)
    top = Module()
    top.submodules.dut = dut
    rng = random.Random(8)
    kinds: set[str] = set()

    def pending(am: AggregatorModel) -> int:
        return sum(1 << i for i in range(slots) if am.slot[i].state == SlotState.COMPLETE)

    async def tb(ctx) -> None:
        for _ in range(60):
            am = AggregatorModel(slots=slots, elements=4, groups=1, jobs=1, release=ReleaseMode.IN_ORDER)
            am.set_group(0, 0b1)  # one member: every contribution completes its chunk
            am.set_job(0, enabled=True, base=0, log2_window=3)
            am.reset_window(0, rng.getrandbits(32))
            for _ in range(12):
                chunk = (am.job_table[0].head + rng.randrange(slots)) & M32
                before = pending(am)
                am.contribute(Message(msg_type=0, flags=0, group_id=0, job_id=0, round_id=1, chunk=chunk,
                                      sender_id=0, scale_exp=0, element_count=4,
                                      payload=np.zeros(4, np.int32), session=1))
                after = pending(am)
                clr, set_ = before & ~after, after & ~before
                assert not (clr and set_)
                kind = "clr" if clr else "set" if set_ else "none"
                kinds.add(kind)
                ctx.set(dut.bits, before)
                ctx.set(dut.clr, clr | (rng.getrandbits(slots) & ~before))  # bits not pending: no matter
                ctx.set(dut.set, set_ or rng.getrandbits(slots))  # not applied without effect.set
                ctx.set(dut.effect.clr, int(kind == "clr"))
                ctx.set(dut.effect.set, int(kind == "set"))
                assert ctx.get(dut.out) == after, (kind, before, after)

    _comb_sim(top, tb)
    assert kinds == {"clr", "set", "none"}, kinds
