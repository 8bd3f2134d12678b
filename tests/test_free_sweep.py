"""``FreeSweep`` (hdl/free_sweep.py) alone in Amaranth's simulator, against a Python engine stand-in
(commands answered in order after a random delay, responses taken at random): the owner's
commands stop while a reset waits, the WRITEs start only once every earlier command answered, in
slot order over the region (several sizes and bases, wrapping at S, a window clamped to S), a
FREE record each with ``more`` but on the last; the state's reset after the drain; the WRITEs'
responses owned; random backpressure on every stream; a second reset waits for the first; the
counters. The sweep on the record engine is in tests/test_decision_records.py."""

from __future__ import annotations

import random
from collections import deque

import pytest
from stream_helpers import pack, run_testbench

from wanreduce.hdl.decision_state import region_layout
from wanreduce.hdl.free_sweep import FreeSweep
from wanreduce.hdl.layouts import ResetLayout
from wanreduce.hdl.reducer_layouts import FREE, record_layout
from wanreduce.hdl.slot_store_signature import Op

SLOTS, JOBS = 64, 4
REGIONS = [(0, 3), (62, 2), (17, 0), (5, 6)]  # 8 from 0; 4 wrapping at S; 1; the whole ring from 5


def region_rows(base: int, lw: int) -> list[int]:
    """The slots a reset of a job with region (base, lw) frees, in order."""
    return [(base + i) % SLOTS for i in range(1 << lw)]


def run_sweeps(resets: list[tuple[int, int]], seed: int, p_ready: float = 0.6) -> list[list[int]]:
    """Drive ``resets`` (job, head) with owner commands before and between them; returns the
    rows written per reset (every per-cycle rule asserted on the way)."""
    rng = random.Random(seed)
    dut = FreeSweep(slots=SLOTS, jobs=JOBS)
    rl = region_layout(SLOTS)
    free = pack(record_layout(JOBS), {"tag": {"state": FREE}})
    written: list[list[int]] = []

    async def tb(ctx) -> None:
        ctx.set(dut.region.as_value(), sum(pack(rl, {"base": b, "log2_window": lw}) << (j * rl.size)
                                for j, (b, lw) in enumerate(REGIONS)))
        engine: deque = deque()  # (kind, cycle accepted) of each command not yet answered
        todo, cycle, state_taken, offered = list(resets), 0, 0, 0
        gap = rng.randrange(10)
        while todo or ctx.get(dut.reset.valid) or engine:
            cycle += 1
            if todo and gap == 0 and not ctx.get(dut.reset.valid):
                ctx.set(dut.reset.payload.as_value(), pack(ResetLayout(JOBS), {"job": todo[0][0], "head": todo[0][1]}))
                ctx.set(dut.reset.valid, 1)
                written.append([])
                offered += 1
            gap = max(0, gap - 1)
            ctx.set(dut.cmd.ready, rng.random() < p_ready)
            ctx.set(dut.state_reset.ready, rng.random() < p_ready)
            stop, sweeping = ctx.get(dut.stop), ctx.get(dut.cmd.valid)
            assert stop == ctx.get(dut.reset.valid), "stop is the reset's valid"
            own = bool(not stop and todo and rng.random() < 0.5)  # an owner's command, only while not stopped
            write = sweeping and ctx.get(dut.cmd.ready)
            if sweeping or ctx.get(dut.state_reset.valid):
                assert all(k == "w" for k, _ in engine), "swept before every earlier command answered"
            if write:
                c = ctx.get(dut.cmd.payload)
                assert c.op == Op.WRITE and c.data == free, "a FREE record's WRITE"
                written[-1].append(c.row)
                job = ctx.get(dut.reset.payload).job
                assert c.more == (len(written[-1]) < len(region_rows(*REGIONS[job]))), "more but on the last"
                engine.append(("w", cycle))
            if own:
                engine.append(("c", cycle))
            ctx.set(dut.cmd_fire, bool(write or own))
            answer = engine and cycle - engine[0][1] > 2 and rng.random() < p_ready
            if answer:
                kind, _ = engine.popleft()
                assert ctx.get(dut.owns) == (kind == "w"), "owns is set exactly for the WRITEs' responses"
            ctx.set(dut.rsp_fire, bool(answer))
            if ctx.get(dut.state_reset.valid) and ctx.get(dut.state_reset.ready):
                assert ctx.get(dut.state_reset.payload).as_value().value == ctx.get(dut.reset.payload).as_value().value
                state_taken += 1
            if ctx.get(dut.reset.valid) and ctx.get(dut.reset.ready):
                job = todo.pop(0)[0]
                assert written[-1] == region_rows(*REGIONS[job]), f"reset {len(written)}: rows {written[-1]}"
                assert state_taken == offered, "the reset taken before the state's"
                ctx.set(dut.reset.valid, 0)
                gap = rng.randrange(12)
            await ctx.tick()
            assert cycle < 20000, "stuck"
        assert ctx.get(dut.sweeps) == len(resets)
        assert ctx.get(dut.records_freed) == sum(len(r) for r in written)

    run_testbench(dut, tb)
    return written


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_free_sweep_regions_in_order(seed: int) -> None:
    """Resets of every job (8 from 0, 4 wrapping at S, 1, the whole ring), back to back and
    apart, with owner commands in flight and random backpressure."""
    resets = [(j, 1000 * j + seed) for j in range(JOBS)] + [(seed % JOBS, 7), (2, 9), (1, 3)]
    written = run_sweeps(resets, seed)
    assert written == [region_rows(*REGIONS[j]) for j, _ in resets]


def test_free_sweep_full_ready() -> None:
    """No backpressure: the same order."""
    assert run_sweeps([(0, 1), (1, 2)], 7, p_ready=1.0) == [region_rows(*REGIONS[0]), region_rows(*REGIONS[1])]


def test_free_sweep_rejects_bad_slots() -> None:
    with pytest.raises(ValueError, match="slots"):
        FreeSweep(slots=100, jobs=2)
