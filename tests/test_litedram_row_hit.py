"""The bank machine's row hit from a flip-flop (hdl/boards/litedram_row_hit.py): a Versa bank
machine (LiteDRAM's, Migen simulator) with and without the patch, driven with the same random
requests, command readiness and refresh requests, gives the same outputs in every cycle."""

from __future__ import annotations

import contextlib
import random

import pytest

from wanreduce.hdl.boards.litedram_controller import DRAM_CONFIGS, controller_settings
from wanreduce.hdl.boards.litedram_model import phy_settings
from wanreduce.hdl.boards.litedram_row_hit import registered_row_hit

VERSA = DRAM_CONFIGS["versa-ecp5"]
ADDR_BITS = 20


def _bank_machine(*, patched: bool):
    from litedram import modules
    from litedram.core.bankmachine import BankMachine

    module = getattr(modules, VERSA.part)(VERSA.sys_clk_hz, VERSA.rate)
    s = controller_settings(VERSA)
    s.phy, s.geom, s.timing = phy_settings(VERSA), module.geom_settings, module.timing_settings
    with registered_row_hit() if patched else contextlib.nullcontext():
        return BankMachine(0, ADDR_BITS, 3, 1, s), s.geom.colbits


def _outputs(bm) -> tuple:
    c = bm.cmd
    return (c.valid, c.a, c.ba, c.cas, c.ras, c.we, c.is_cmd, c.is_read, c.is_write,
            bm.req.ready, bm.req.wdata_ready, bm.req.rdata_valid, bm.req.lock, bm.refresh_gnt)


def _trace(*, patched: bool, seed: int, cycles: int) -> list[tuple]:
    """Per cycle, the bank machine's outputs after the random inputs of that cycle settle.
    Addresses come from three rows (hits, misses, row changes) and random columns; the request
    rate changes every 150 cycles, so the command buffer both runs empty (a command loaded into
    an empty buffer, compared with a row left open) and stays full (auto-precharge)."""
    from migen import run_simulation

    bm, colbits = _bank_machine(patched=patched)
    rng = random.Random(seed)
    rows = [rng.randrange(1 << (ADDR_BITS - colbits)) for _ in range(3)]
    seen: list[tuple] = []

    def bench():
        for k in range(cycles):
            if k % 150 == 0:  # phases of sparse and dense requests: an empty buffer and a full FIFO
                p_req = rng.choice((0.03, 0.1, 0.6))
            addr = (rng.choice(rows) << colbits) | rng.randrange(1 << colbits)
            yield bm.req.valid.eq(rng.random() < p_req)
            yield bm.req.we.eq(rng.random() < 0.5)
            yield bm.req.addr.eq(addr)
            yield bm.cmd.ready.eq(rng.random() < 0.7)
            yield bm.refresh_req.eq(rng.random() < 0.02)
            yield  # settle
            now = []
            for s in _outputs(bm):
                now.append((yield s))
            seen.append(tuple(now))

    run_simulation(bm, bench())
    return seen


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_patched_bank_machine_is_the_same_cycle_for_cycle(seed: int) -> None:
    before = _trace(patched=False, seed=seed, cycles=3000)
    after = _trace(patched=True, seed=seed, cycles=3000)
    first = next((k for k, (a, b) in enumerate(zip(before, after, strict=True)) if a != b), None)
    assert first is None, f"cycle {first}: LiteDRAM {before[first]}, patched {after[first]}"
    issued = sum(1 for o in before if o[0] and o[3])  # reads / writes offered
    activates = sum(1 for o in before if o[0] and o[4] and not o[5])
    assert issued > 100 and activates > 20  # the stimulus exercised hits and row changes


def test_the_row_hit_is_a_flip_flop() -> None:
    """The FSM's ``row_hit`` is driven by a register, not by the row compare: the patched bank
    machine has no combinational assignment of it from ``==``."""
    from migen.fhdl.structure import _Assign, _Operator

    for patched in (False, True):
        bm, _ = _bank_machine(patched=patched)
        hit = [s for s in bm._fragment.comb if isinstance(s, _Assign)
               and s.l.backtrace[-1][0] == "row_hit"]
        assert len(hit) == 1
        compare = isinstance(hit[0].r, _Operator) and hit[0].r.op == "=="
        assert compare is not patched
