"""Unit tests of the parts ``Reducer.elaborate`` builds inline (issue 16 item 6; docs/reducer.md,
"Parts built inline"): each on its own against a small reference of what it stands for. The
reducer calls them as functions so its RTLIL (pinned by tests/test_default_rtl.py) is unchanged;
each file wraps its function in a component for these tests."""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import Module
from amaranth.sim import Simulator

from wanreduce.hdl.release_run import ReleaseRun


def _comb_sim(dut, tb) -> None:
    """Run the testbench ``tb(ctx)`` on the combinational ``dut``."""
    top = Module()
    top.submodules.dut = dut
    sim = Simulator(top)
    sim.add_testbench(tb)
    sim.run()


def _release_run_reference(slots: int, base: int, lw: int, chunk: int, pending: set[int]):
    """The model's release run (``AggregatorModel._maybe_complete``) in slots: chunk ``chunk``
    completes at the head; the chunks after it whose slots are pending (COMPLETE) are released
    with it, up to the first that is not. Slot of chunk c: base + (c mod window) (mod S)."""
    w = 1 << lw
    slot = lambda c: (base + (c & (w - 1))) % slots  # noqa: E731
    run, cleared = 0, set()
    while run < w - 1 and slot(chunk + 1 + run) in pending:
        cleared.add(slot(chunk + 1 + run))
        run += 1
    return slot(chunk + 1 + run), cleared, run


@pytest.mark.parametrize(("slots", "table"), [(8, True), (8, False), (32, True), (32, False)])
def test_release_run_is_the_models_run(slots: int, table: bool) -> None:
    """``scan_slots`` + ``run_of`` (hdl/release_run.py), both forms of ``run_of``: for a chunk
    completing at its job's head, the pending slots of its region right behind it are cleared,
    the scan stops at the first slot that is not pending (its own slot at the latest: the run
    wraps the whole window), and the run length is the model's; slots outside the region are
    transparent and never cleared."""
    dut = ReleaseRun(slots, table=table)
    rng = random.Random(slots * 2 + table)
    sb = (slots - 1).bit_length()
    runs: set[int] = set()

    async def tb(ctx) -> None:
        for _ in range(400):
            lw = rng.randint(0, sb)
            w = 1 << lw
            base = rng.randrange(slots)
            chunk = rng.getrandbits(32)
            region = {(base + k) % slots for k in range(w)}
            own = (base + (chunk & (w - 1))) % slots
            # pending: a random subset, often a long run, never the completing slot itself
            fill = rng.choice([0.0, 0.5, 0.9, 1.0])
            pending = {s for s in region if s != own and rng.random() < fill}
            outside = {s for s in range(slots) if s not in region and rng.random() < 0.5}
            first, cleared, run = _release_run_reference(slots, base, lw, chunk, pending)
            start = (base + ((chunk + 1) & (w - 1))) % slots
            x = sum(1 << s for s in range(slots) if s in pending | outside or s not in region)
            ctx.set(dut.x, x)
            ctx.set(dut.below, (1 << start) - 1)
            ctx.set(dut.region, sum(1 << s for s in region))
            ctx.set(dut.start, start)
            ctx.set(dut.wmask, w - 1)
            got = ctx.get(dut.out)
            assert got.first_zero == 1 << first, (lw, base, chunk, pending)
            assert got.clr == sum(1 << s for s in cleared), (lw, base, chunk, pending)
            assert got.run == run, (lw, base, chunk, pending)
            runs.add(run)

    _comb_sim(dut, tb)
    assert {0, 1, slots - 1} <= runs, runs  # none, one, the whole window but its own slot
