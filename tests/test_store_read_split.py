"""``StoreReadSplit`` (hdl/store_read_split.py) alone in Amaranth's simulator: random WRITE / ADD /
READ commands to a few slots, each answered in order after a random delay with a random
``overflow``, both outputs taken at random. Checked against a Python model: WRITE / ADD
responses on ``out`` unchanged and in order, READ responses on ``reads`` with the slot's sticky
flag (a WRITE clears it, an ADD with ``overflow`` sets it), a response tagged ``EMIT_TAG`` also
(a READ only) on ``own`` with the flag after its update, ``room`` throttling the commands,
``error`` only when ``own`` was pushed while not ready; with the flags in flip-flops and in
block RAM (``sticky_flags``: the limit lowered)."""

from __future__ import annotations

import random
from collections import deque

import pytest
from stream_helpers import HoldingSink, pack, run_testbench

from wanreduce.hdl.slot_store_signature import EMIT_TAG, TAG_BITS, Op, rsp_layout
from wanreduce.hdl.store_read_split import StoreReadSplit, read_rsp_layout

W, SLOTS, ROW_BITS = 64, 8, 2


@pytest.mark.parametrize("p_own", [1.0, 0.6], ids=["own_ready", "own_stalls"])
@pytest.mark.parametrize("in_memory", [False, True], ids=["flip_flops", "block_ram"])
@pytest.mark.parametrize("seed", [1, 2])
def test_split_routes_reads_with_the_sticky_flag(seed: int, in_memory: bool, p_own: float,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    if in_memory:
        monkeypatch.setattr(StoreReadSplit, "FLAGS_IN_FLIP_FLOPS_MAX_SLOTS", 1)
    rng = random.Random(seed)
    dut = StoreReadSplit(W, slots=SLOTS, row_bits=ROW_BITS, depth=4)
    commands = [(rng.choice([Op.WRITE, Op.ADD, Op.ADD, Op.READ]), rng.randrange(SLOTS << ROW_BITS))
                for _ in range(400)]
    answers = [(rng.getrandbits(W), int(op == Op.ADD and rng.random() < 0.3), rng.getrandbits(TAG_BITS))
               for op, _ in commands]
    flags, want_out, want_reads, want_own = [0] * SLOTS, [], [], []
    for (op, row), (d, ovf, tag) in zip(commands, answers, strict=True):
        slot = row >> ROW_BITS
        if op == Op.READ and not tag & EMIT_TAG:
            want_reads.append(pack(read_rsp_layout(W), {"data": d, "overflow": flags[slot]}))
        elif op != Op.READ:
            flags[slot] = 0 if op == Op.WRITE else flags[slot] | ovf
            want_out.append(pack(rsp_layout(W), {"data": d, "overflow": ovf, "tag": tag}))
        if tag & EMIT_TAG:  # the completer's own row, its flag after this response
            want_own.append(pack(read_rsp_layout(W), {"data": d, "overflow": flags[slot]}))
    out, reads, own = HoldingSink("out"), HoldingSink("reads"), HoldingSink("own")  # own: pushes only
    own_stalled = [0]

    async def tb(ctx) -> None:
        pending: deque = deque()  # (cycle due, answer) of each command taken
        k, cycle, limited = 0, 0, 0
        while len(out.received) + len(reads.received) < len(want_out) + len(want_reads) \
                or len(own.received) < len(want_own):
            cycle += 1
            assert cycle < 100 * len(commands), "stuck"
            fire = k < len(commands) and ctx.get(dut.room) and rng.random() < 0.6
            limited += k < len(commands) and not ctx.get(dut.room)
            ctx.set(dut.cmd_fire, fire)
            if fire:
                ctx.set(dut.cmd_op, commands[k][0])
                ctx.set(dut.cmd_row, commands[k][1])
            ok = bool(pending) and pending[0][0] <= cycle
            ctx.set(dut.rsp.valid, ok)
            if ok:
                ctx.set(dut.rsp.payload.as_value(), pack(rsp_layout(W), dict(zip(("data", "overflow", "tag"),
                                                                                 pending[0][1], strict=True))))
            r_out, r_reads, r_own = rng.random() < 0.6, rng.random() < 0.6, rng.random() < p_own
            ctx.set(dut.out.ready, r_out)
            ctx.set(dut.reads.ready, r_reads)
            ctx.set(dut.own.ready, r_own)
            if ctx.get(dut.own.valid):  # pushed, never held: a push while not ready is lost (error)
                own_stalled[0] += not r_own
                own.received.append(ctx.get(dut.own.payload.as_value()))
            out.step(cycle, ctx.get(dut.out.valid), ctx.get(dut.out.payload.as_value()), r_out)
            reads.step(cycle, ctx.get(dut.reads.valid), ctx.get(dut.reads.payload.as_value()), r_reads)
            if ok and ctx.get(dut.rsp.ready):
                pending.popleft()
            if fire:
                pending.append((cycle + rng.randint(1, 12), answers[k]))
                k += 1
            await ctx.tick()
        ctx.set(dut.rsp.valid, 0)
        ctx.set(dut.cmd_fire, 0)
        await ctx.tick()  # the last cycle's error registered
        assert ctx.get(dut.error) == (own_stalled[0] > 0) and limited > 0, \
            f"error {ctx.get(dut.error)}, own stalled {own_stalled[0]}, room low {limited} cycles"

    run_testbench(dut, tb)
    assert out.received == want_out
    assert reads.received == want_reads
    assert own.received == want_own and len(want_own) > 50
    assert (own_stalled[0] > 0) == (p_own < 1)


def test_split_rejects_a_bad_depth() -> None:
    with pytest.raises(ValueError, match="depth must be 2..2048, got 1"):
        StoreReadSplit(W, slots=SLOTS, row_bits=ROW_BITS, depth=1)
