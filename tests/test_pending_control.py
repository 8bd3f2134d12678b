"""``PendingControl`` (hdl/pending_control.py): the one ``PendingWords`` port's operation each
cycle (reset CLEAR > decision SET / RELEASE > PEEK), the PEEK's answer kept while stage 1
holds, and the invariants it reports as ``error``."""

from __future__ import annotations

from stream_helpers import run_testbench

from wanreduce.hdl.pending_control import PendingControl
from wanreduce.hdl.pending_words import PendingOp

S, JOBS = 64, 2
BASES, LWS = (0, 32), (5, 4)  # job 0: slots 0..31; job 1: slots 32..47


def _dut() -> PendingControl:
    return PendingControl(slots=S, jobs=JOBS, job_bits=1)


def _config(ctx, dut: PendingControl) -> None:
    for j in range(JOBS):
        ctx.set(dut.job_base[j], BASES[j])
        ctx.set(dut.log2_window[j], LWS[j])


def _drive(ctx, dut: PendingControl, **values: int) -> None:
    for name, v in values.items():
        ctx.set(getattr(dut, name), v)


def _op(ctx, dut: PendingControl) -> tuple:
    """(valid, kind, slot, base, log2_window) as the port shows them now."""
    p = dut.op.payload
    return (ctx.get(dut.op.valid), PendingOp(ctx.get(p.kind)), ctx.get(p.slot), ctx.get(p.base),
            ctx.get(p.log2_window))


def test_operation_priority_and_regions() -> None:
    """A reset's first clearing cycle takes the port, then the decision's RELEASE / SET (stage
    1's slot and job), else the PEEK for the beat in stage 1 next cycle (the incoming one's job
    and slot when stage 1 advances, stage 1's own when it holds)."""
    dut = _dut()

    async def tb(ctx):
        _config(ctx, dut)
        ctx.set(dut.op.ready, 1)
        ctx.set(dut.job_in, 1)
        ctx.set(dut.job1, 0)
        ctx.set(dut.slot1, 5)
        ctx.set(dut.slot_n1, 40)
        ctx.set(dut.reset_job, 1)
        # a new first beat comes in: PEEK of its slot in its job's region
        _drive(ctx, dut, adv=1, take=1, first_in=1)
        assert _op(ctx, dut) == (1, PendingOp.PEEK, 40, 32, 4)
        # the incoming beat is not a first beat: no operation
        ctx.set(dut.first_in, 0)
        assert _op(ctx, dut)[0] == 0
        # stage 1 holds a first beat, no PEEK out for it yet: PEEK of stage 1's slot and job
        _drive(ctx, dut, adv=0, v1=1, first1=1, slot_n1=5)
        assert _op(ctx, dut) == (1, PendingOp.PEEK, 5, 0, 5)
        # a decision completing behind the head: SET; at the head: RELEASE (both stage 1's)
        _drive(ctx, dut, decide=1, in_order=1, fxs_n=1)
        assert _op(ctx, dut) == (1, PendingOp.SET, 5, 0, 5)
        _drive(ctx, dut, fxs_n=0, fxc_n=1)
        assert _op(ctx, dut) == (1, PendingOp.RELEASE, 5, 0, 5)
        # out of order (release on completion): no pending bits change
        ctx.set(dut.in_order, 0)
        assert _op(ctx, dut)[1] == PendingOp.PEEK
        ctx.set(dut.in_order, 1)
        # the window reset's engine starts: CLEAR of the reset job's region, first cycle only
        ctx.set(dut.reset_clear, 1)
        v, kind, _, base, lw = _op(ctx, dut)
        assert (v, kind, base, lw) == (1, PendingOp.CLEAR, 32, 4)
        ctx.set(dut.decide, 0)
        await ctx.tick()
        assert _op(ctx, dut)[1] != PendingOp.CLEAR  # the engine's second cycle: no second CLEAR

    run_testbench(dut, tb)


def test_peek_answer_is_kept_while_stage_1_holds() -> None:
    """Stage 1's first beat may not advance until its PEEK is answered; the answer (``run``)
    is kept while stage 1 holds, even when the words port answers something else later."""
    dut = _dut()

    async def tb(ctx):
        _config(ctx, dut)
        ctx.set(dut.op.ready, 1)
        # a first beat enters stage 1: its PEEK is issued and accepted
        _drive(ctx, dut, adv=1, take=1, first_in=1, slot_n1=3)
        assert _op(ctx, dut)[1] == PendingOp.PEEK
        await ctx.tick()
        # now in stage 1, the PEEK out: the gate is closed until the answer
        _drive(ctx, dut, adv=0, v1=1, first1=1, slot_n1=3)
        assert ctx.get(dut.gate) == 0
        assert _op(ctx, dut)[0] == 0, "no second PEEK while one is out"
        _drive(ctx, dut, pw_done=1, pw_run=9)
        assert ctx.get(dut.gate) == 1 and ctx.get(dut.run) == 9
        await ctx.tick()
        # stage 1 still holds (the decision waits for something else): the answer is kept
        _drive(ctx, dut, pw_done=0, pw_run=2)
        for _ in range(3):
            assert ctx.get(dut.gate) == 1 and ctx.get(dut.run) == 9
            assert _op(ctx, dut)[0] == 0, "answered: no PEEK again"
            await ctx.tick()
        # stage 1 advances with it; the next beat is no first beat: gate open, nothing kept
        _drive(ctx, dut, adv=1, first_in=0)
        await ctx.tick()
        _drive(ctx, dut, adv=0, first1=0)
        assert ctx.get(dut.gate) == 1 and ctx.get(dut.run) == 2

    run_testbench(dut, tb)


def test_error_flags_each_broken_invariant() -> None:
    """``error``: a decision's operation refused by the port; a decision right after one that
    changed a pending bit; a RELEASE whose run is not the one its PEEK found."""
    dut = _dut()

    async def tb(ctx):
        _config(ctx, dut)
        ctx.set(dut.v1, 1)
        ctx.set(dut.first1, 1)
        ctx.set(dut.in_order, 1)
        ctx.set(dut.decide, 1)
        ctx.set(dut.fxs_n, 1)
        ctx.set(dut.op.ready, 0)
        assert ctx.get(dut.error) == 1, "a SET not taken"
        ctx.set(dut.op.ready, 1)
        assert ctx.get(dut.error) == 0
        ctx.set(dut.fx_s, 1)
        assert ctx.get(dut.error) == 1, "a decision right after one that set a bit"
        ctx.set(dut.fx_s, 0)
        # a RELEASE decided with run 4 (the PEEK's answer, kept) ...
        _drive(ctx, dut, fxs_n=0, fxc_n=1, pw_run=4)
        assert ctx.get(dut.run) == 4 and ctx.get(dut.error) == 0
        await ctx.tick()
        _drive(ctx, dut, decide=0, fxc_n=0, fx_c=1)
        # ... clears run 4: fine; run 3: an error
        _drive(ctx, dut, pw_done=1, pw_run=4)
        assert ctx.get(dut.error) == 0
        ctx.set(dut.pw_run, 3)
        assert ctx.get(dut.error) == 1, "a RELEASE clearing another run than its PEEK's"

    run_testbench(dut, tb)
