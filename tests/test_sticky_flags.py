"""``sticky_flags`` (hdl/sticky_flags.py), the sticky overflow flags ``ResultAssembler`` and
``StoreReadSplit`` share, alone in Amaranth's simulator, in flip-flops and in block RAM: a
stage loaded with random slots (often the same one back to back, as a message's rows are),
random clear / set updates (at most one per loaded slot, in its last cycle in the stage, as
both users update); the flag in the stage is the Python model's after every earlier
update, cycle for cycle in both forms; and the split's registers do not grow with S above the
limit (the flags are one S x 1 memory)."""

from __future__ import annotations

import random
import re

import pytest
from amaranth.back import rtlil
from amaranth.hdl import Elaboratable, Module, Signal
from stream_helpers import run_testbench

from wanreduce.commands.report import rtlil_bits
from wanreduce.hdl.sticky_flags import FLAGS_IN_FLIP_FLOPS_MAX_SLOTS, sticky_flags
from wanreduce.hdl.store_read_split import StoreReadSplit

SLOTS = 8


class _Stage(Elaboratable):
    """A one-slot stage as the users have: ``slot`` loaded from ``next_slot`` with ``load``."""

    def __init__(self, in_memory: bool) -> None:
        self.in_memory = in_memory
        self.load, self.next_slot, self.slot = Signal(), Signal(3), Signal(3)
        self.update, self.clear, self.set_, self.flag, self.new = Signal(), Signal(), Signal(), Signal(), Signal()

    def elaborate(self, platform: object) -> Module:
        m = Module()
        with m.If(self.load):
            m.d.sync += self.slot.eq(self.next_slot)
        flag, new = sticky_flags(m, SLOTS, in_memory=self.in_memory, load=self.load, next_slot=self.next_slot,
                                 slot=self.slot, update=self.update, clear=self.clear, set_=self.set_)
        m.d.comb += [self.flag.eq(flag), self.new.eq(new)]
        return m


@pytest.mark.parametrize("in_memory", [False, True], ids=["flip_flops", "block_ram"])
def test_sticky_flags_follow_the_model(in_memory: bool) -> None:
    rng = random.Random(3)
    dut = _Stage(in_memory)
    flags, seen = [0] * SLOTS, 0

    async def tb(ctx) -> None:
        nonlocal seen
        slot, loaded = 0, False
        for _ in range(3000):
            load = rng.random() < 0.7
            nxt = slot if rng.random() < 0.5 else rng.randrange(SLOTS)
            update = loaded and rng.random() < 0.8  # at most once per loaded slot, as it leaves
            clear, set_ = rng.random() < 0.15, rng.random() < 0.2
            for sig, v in ((dut.load, load), (dut.next_slot, nxt), (dut.update, update), (dut.clear, clear),
                           (dut.set_, set_)):
                ctx.set(sig, v)
            if loaded:
                assert ctx.get(dut.flag) == flags[slot], f"slot {slot}: flag {ctx.get(dut.flag)}, want {flags[slot]}"
                want_new = (0 if clear else flags[slot]) | set_
                assert ctx.get(dut.new) == want_new
                seen += flags[slot]
                if update:
                    flags[slot], loaded = want_new, False
            if load:
                slot, loaded = nxt, True
            await ctx.tick()

    run_testbench(dut, tb)
    assert seen > 100, "too few set flags seen"


def test_split_flags_do_not_grow_with_slots() -> None:
    """Above the limit the split's flags are a block RAM: its registers at S = 4096 minus those
    at S = 512 stay small (one flip-flop per slot: 3 584 more), one 4096 x 1 memory."""
    def text(slots: int) -> str:
        return rtlil.convert(StoreReadSplit(64, slots=slots, row_bits=3), name="dut")

    assert FLAGS_IN_FLIP_FLOPS_MAX_SLOTS < 512
    (small, _), (large, _) = rtlil_bits(text(512)), rtlil_bits(big := text(4096))
    assert large - small < 64, f"{small} register bits at S = 512, {large} at S = 4096"
    assert re.search(r"memory width 1 size 4096 \\ovf\b", big), "no 4096 x 1 memory for the flags"
