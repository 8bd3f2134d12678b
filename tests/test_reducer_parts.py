"""Unit tests of the reducer's parts, each on its own (docs/reducer.md, "Parts"): the
configuration registers, the input stages' decode, the release queue, the window-reset engine
and the row accumulator (data memory, read-modify-write forwarding, sticky overflow). The
decision, the emitter and the probe are exercised through the whole reducer
(tests/test_reducer.py) against the golden model."""

from __future__ import annotations

import random
from collections import deque

import numpy as np
import pytest
from stream_helpers import Port, drive_random, pack, run_testbench, unpack

from wanreduce import wire
from wanreduce.fixedpoint import saturating_add
from wanreduce.hdl.layouts import message_beat_layout, payload_beats
from wanreduce.hdl.reducer_config import ReducerConfig
from wanreduce.hdl.reducer_input import InputStages
from wanreduce.hdl.reducer_layouts import OP_ADD, OP_NONE, OP_WRITE
from wanreduce.hdl.release_queue import ReleaseQueue
from wanreduce.hdl.row_accumulator import RowAccumulator
from wanreduce.hdl.window_reset import WindowReset

M32 = 0xFFFFFFFF


def _set_config(ctx, dut, jobs: list[tuple[int, int, int]], groups: list[int]) -> None:
    """jobs: (enable, base, log2_window) per job; groups: member bitmap per group."""
    for j, (en, base, lw) in enumerate(jobs):
        ctx.set(dut.job_cfg_in[j].enable, en)
        ctx.set(dut.job_cfg_in[j].base, base)
        ctx.set(dut.job_cfg_in[j].log2_window, lw)
    for g, bm in enumerate(groups):
        ctx.set(dut.group_bitmap_in[g], bm)


def test_config_registers_derive_per_job_and_group() -> None:
    """Clamped log2 window and window mask per job, one-member / configured per group, the
    release mode: all registered (visible one cycle after the inputs change)."""
    dut = ReducerConfig(slots=16, groups=3, jobs=2)

    async def tb(ctx):
        _set_config(ctx, dut, [(1, 3, 2), (0, 9, 7)], [0, 0b100, 0b1011])
        ctx.set(dut.release_on_completion, 1)
        assert ctx.get(dut.cfg.in_order) == 1 and ctx.get(dut.cfg.log2_window[0]) == 0  # not yet
        await ctx.tick()
        assert [ctx.get(dut.cfg.log2_window[j]) for j in range(2)] == [2, 4]  # 7 clamped to log2 16
        assert [ctx.get(dut.cfg.window_mask[j]) for j in range(2)] == [0b11, 0b1111]
        assert ctx.get(dut.cfg.job_cfg[1].base) == 9 and ctx.get(dut.cfg.job_cfg[0].enable) == 1
        assert ctx.get(dut.cfg.single) == 0b010 and ctx.get(dut.cfg.configured) == 0b110
        assert ctx.get(dut.cfg.members[2]) == 0b1011 and ctx.get(dut.cfg.in_order) == 0

    run_testbench(dut, tb)


@pytest.mark.parametrize(("width", "slots", "elements", "seed"), [(64, 16, 5, 1), (256, 4, 20, 2)])
def test_input_stages_decode_every_beat(width, slots, elements, seed) -> None:
    """Every beat comes out of stage P once, in order, with its decode equal to the Python
    arithmetic (slot, start slot, region, one-hot, members, sender bit, reject checks, ...)."""
    rng = random.Random(seed)
    jobs_cfg = [(1, 5 % slots, 2), (1, 1, 9), (0, 0, 1)]
    groups = [0b0110, 0b1000, 0]
    dut = InputStages(width, slots=slots, elements=elements, groups=len(groups), jobs=len(jobs_cfg))
    layout, sb = message_beat_layout(width), (slots - 1).bit_length()
    n_beats = payload_beats(elements, width)
    msgs = []
    for _ in range(40):
        hdr = {"job_id": rng.randrange(4), "group_id": rng.randrange(4), "sender_id": rng.randrange(34),
               "chunk": rng.getrandbits(32), "element_count": elements}
        msgs += [pack(layout, {"data": rng.getrandbits(width), "hdr": hdr, "first": int(k == 0),
                               "last": int(k == n_beats - 1)}) for k in range(n_beats)]

    def each_cycle(ctx, cycle):
        if cycle == 0:  # configuration (registered in the parent; constant inputs here)
            for j, (en, base, lw) in enumerate(jobs_cfg):
                lwc = min(lw, sb)
                ctx.set(dut.cfg.job_cfg[j].enable, en)
                ctx.set(dut.cfg.job_cfg[j].base, base)
                ctx.set(dut.cfg.job_cfg[j].log2_window, lw)
                ctx.set(dut.cfg.log2_window[j], lwc)
                ctx.set(dut.cfg.window_mask[j], (1 << lwc) - 1)
            for g, bm in enumerate(groups):
                ctx.set(dut.cfg.members[g], bm)
            ctx.set(dut.cfg.single, sum(1 << g for g, bm in enumerate(groups) if bin(bm).count("1") == 1))
            ctx.set(dut.cfg.configured, sum(1 << g for g, bm in enumerate(groups) if bm))
            ctx.set(dut.open, 1)

    run = drive_random(dut, Port.of(dut.s_msg), [Port(dut.p_valid, dut.take, dut.p.as_value()[:])],
                       msgs, p_valid=0.8, p_ready=0.6, seed=seed, each_cycle=each_cycle)
    got = [unpack(dut.dec_layout, v) for v in run.received[0]]
    assert len(got) == len(msgs)
    for k, (raw, d) in enumerate(zip(msgs, got, strict=True)):
        beat = unpack(layout, raw)
        h = beat.hdr
        assert d.beat.as_value().value == raw
        assert d.idx == k % n_beats
        job_ok = h.job_id < len(jobs_cfg)
        en, base, lw = jobs_cfg[h.job_id] if job_ok else (0, 0, 0)
        lwc = min(lw, sb)
        wm = (1 << lwc) - 1
        if job_ok:
            assert d.slot == (base + (h.chunk & wm)) % slots
        start = (base + ((h.chunk + 1) & wm)) % slots
        assert d.start == start and d.wmask == wm
        assert d.region == sum(1 << i for i in range(slots) if (i - base) % slots < (1 << lwc))
        assert d.oh == 1 << d.slot and d.lm == (1 << start) - 1
        members = groups[h.group_id] if h.group_id < len(groups) else 0
        is_member = h.sender_id < wire.MAX_SENDERS and members >> h.sender_id & 1
        assert d.bit == (1 << h.sender_id if h.sender_id < wire.MAX_SENDERS else 0)
        assert d.unconf == int(not (job_ok and en and h.group_id < len(groups) and members))
        assert d.nonmem == int(not is_member)
        assert d.cwrite == int(bool(is_member) and bin(members).count("1") == 1)
        assert d.chunk_p1 == (h.chunk + 1) & M32 and d.cw == (h.chunk - (1 << lwc)) & M32
        assert d.nbm1 == n_beats - 1


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_release_queue_is_a_fifo_with_its_head_and_masks(seed) -> None:
    """Random pushes (never into a full queue) and pops: the head register, the count, the
    occupied entries and the union of their slot masks follow a Python deque every cycle."""
    slots, rng = 8, random.Random(seed)
    dut = ReleaseQueue(slots=slots, jobs=2, masks=True)
    lay = dut.entry_layout

    async def tb(ctx):
        model: deque = deque()
        for _ in range(400):
            count = ctx.get(dut.count)
            assert count == len(model)
            occ = [ctx.get(dut.entries[i].as_value()) for i in range(dut.depth)
                   if ctx.get(dut.occupied) >> i & 1]
            assert sorted(occ) == sorted(e for e, _ in model)
            union = 0
            for _, mk in model:
                union |= mk
            assert ctx.get(dut.held_mask) == union
            if model:
                assert ctx.get(dut.head.as_value()) == model[0][0]
                assert ctx.get(dut.head_mask) == model[0][1]
            push = count < dut.depth and rng.random() < 0.5
            pop = count > 0 and rng.random() < 0.5
            entry = pack(lay, {"job": rng.randrange(2), "chunk": rng.getrandbits(32),
                               "slot": rng.randrange(slots), "more": rng.randrange(slots),
                               "resent": rng.getrandbits(1)})
            mask = rng.getrandbits(slots)
            ctx.set(dut.push, push)
            ctx.set(dut.pop, pop)
            ctx.set(dut.entry.as_value(), entry)
            ctx.set(dut.mask, mask)
            await ctx.tick()
            if pop:
                model.popleft()
            if push:
                model.append((entry, mask))

    run_testbench(dut, tb)


@pytest.mark.parametrize(("base", "lw", "slots"), [(5, 3, 16), (14, 2, 16), (3, 9, 8)])
def test_window_reset_waits_then_clears_the_region(base, lw, slots) -> None:
    """The input closes only at a message boundary, nothing is cleared before the pipeline has
    drained, then each slot of the (wrapping, clamped) region once, then one ready pulse."""
    dut = WindowReset(slots=slots, jobs=2)
    n = 1 << min(lw, (slots - 1).bit_length())

    async def tb(ctx):
        ctx.set(dut.job_cfg[1].base, base)
        ctx.set(dut.job_cfg[1].log2_window, lw)
        ctx.set(dut.reset.payload.job, 1)
        ctx.set(dut.in_msg, 1)
        ctx.set(dut.reset.valid, 1)
        for _ in range(3):  # inside a message: the input stays open
            await ctx.tick()
            assert not ctx.get(dut.stop) and not ctx.get(dut.clear) and not ctx.get(dut.reset.ready)
        ctx.set(dut.in_msg, 0)
        for _ in range(3):  # at the boundary it closes, but waits for the drain
            await ctx.tick()
            assert ctx.get(dut.stop) and not ctx.get(dut.clear) and not ctx.get(dut.reset.ready)
        ctx.set(dut.drained, 1)
        cleared, cycles = [], 0
        while not ctx.get(dut.reset.ready):
            await ctx.tick()
            cycles += 1
            assert ctx.get(dut.stop) and cycles < 100
            if ctx.get(dut.clear):
                cleared.append(ctx.get(dut.slot))
        assert cleared == [(base + i) % slots for i in range(n)]
        ctx.set(dut.reset.valid, 0)
        await ctx.tick()
        for _ in range(3):
            assert not ctx.get(dut.reset.ready) and not ctx.get(dut.stop) and not ctx.get(dut.clear)
            await ctx.tick()

    run_testbench(dut, tb)


def _lanes(v: int, n: int) -> np.ndarray:
    return np.array([(v >> 32 * k) & M32 for k in range(n)], np.uint32).view(np.int32)


def _row(lanes: np.ndarray) -> int:
    return sum(int(x) << 32 * k for k, x in enumerate(np.asarray(lanes, np.int32).view(np.uint32)))


@pytest.mark.parametrize(("width", "seed"), [(64, 1), (128, 2), (512, 3)])
def test_row_accumulator_equals_saturating_add(width, seed) -> None:
    """Beats through stage 1 and 2 as the decision moves them (random gaps and holds, rows
    repeated 1, 2, 3 cycles apart, so every forward is used): the rows read back equal the
    golden model's saturating sums, and each slot's sticky overflow flag (masked lanes only,
    cleared by a first write) is right every cycle."""
    slots, row_bits, rng = 4, 1, random.Random(seed)
    L = width // 32
    dut = RowAccumulator(width, slots=slots, row_bits=row_bits)
    rows = slots << row_bits
    big = [-(2**31), 2**31 - 1, 2**30, -(2**30), 5, -7]
    beats, written = [], set()
    for _ in range(300):
        row = rng.randrange(rows) if rng.random() < 0.5 or not beats else beats[-1]["row"]
        first = row not in written or rng.random() < 0.1
        op = OP_WRITE if first else rng.choice([OP_ADD, OP_ADD, OP_ADD, OP_NONE])
        written.add(row)
        data = _row(np.array([rng.choice(big) if rng.random() < 0.5 else rng.randint(-99, 99)
                              for _ in range(L)], np.int32))
        beats.append({"row": row, "op": op, "first": int(first), "data": data,
                      "lanes": rng.getrandbits(L), "hold": rng.random() < 0.2, "gap": rng.random() < 0.2})
    # the timeline of stage 1: per cycle (beat index or None, moves on this cycle)
    timeline = []
    for i, b in enumerate(beats):
        if b["gap"]:
            timeline.append((None, True))
        if b["hold"]:
            timeline.append((i, False))
        timeline.append((i, True))
    timeline.append((None, True))

    async def tb(ctx):
        mem: dict[int, np.ndarray] = {}
        ovf = [0] * slots
        expect_ovf = [0] * slots  # as visible now (applied one cycle after stage 2)
        stage2 = None
        for t, (bi, adv) in enumerate(timeline):
            nxt = next((x for x, _ in timeline[t + 1 :] if x is not None), None)
            b = beats[bi] if bi is not None else None
            ctx.set(dut.adv, adv)
            ctx.set(dut.row0, beats[nxt]["row"] if nxt is not None and adv else 0)
            ctx.set(dut.row1, b["row"] if b else 0)
            ctx.set(dut.load, int(b is not None and adv))
            if b is not None:
                ctx.set(dut.op, b["op"])
                ctx.set(dut.first, b["first"])
                ctx.set(dut.data, b["data"])
                ctx.set(dut.lanes, b["lanes"])
                ctx.set(dut.slot_oh, 1 << (b["row"] >> row_bits))
            ctx.set(dut.valid2, int(stage2 is not None))
            assert ctx.get(dut.overflow) == sum(f << s for s, f in enumerate(expect_ovf)), f"cycle {t}"
            expect_ovf = list(ovf)
            if stage2 is not None:  # the model's stage 2
                s2, slot = stage2, stage2["row"] >> row_bits
                if s2["op"] == OP_WRITE:
                    mem[s2["row"]] = _lanes(s2["data"], L)
                    if s2["first"]:
                        ovf[slot] = 0
                elif s2["op"] == OP_ADD:
                    old, q = mem[s2["row"]], _lanes(s2["data"], L)
                    mem[s2["row"]], _ = saturating_add(old, q)
                    masked = [k for k in range(L) if s2["lanes"] >> k & 1]
                    ovf[slot] |= int(saturating_add(old[masked], q[masked])[1])
                expect_ovf = list(ovf)
            stage2 = b if (b is not None and adv) else None
            await ctx.tick()
        for r in sorted(mem):  # read every row back through the emitter's port
            ctx.set(dut.e_row, r)
            await ctx.tick()
            assert ctx.get(dut.e_data) == _row(mem[r]), f"row {r}"

    run_testbench(dut, tb)
