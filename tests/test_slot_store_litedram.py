"""The DRAM slot store through LiteDRAM's real controller (issue 16 item 5): the model module
(hdl/boards/litedram_model.py), the wrapper (hdl/boards/litedram_model_store.py) and the cocotb
bench (sim/tb_slot_store_litedram.py) against the slot-store reference; the bank-lock fix the
bench called for (hdl/boards/litedram_bank_lock.py)."""

from __future__ import annotations

import contextlib
import json
import random
import re

import pytest

from wanreduce.hdl.boards.litedram_bank_lock import fixed_bank_lock
from wanreduce.hdl.boards.litedram_controller import DRAM_CONFIGS, controller_settings, generate
from wanreduce.hdl.boards.litedram_model import (
    cached_model,
    generate_model,
    model_bytes,
    phy_settings,
)
from wanreduce.hdl.boards.litedram_model_store import LiteDramModelStore
from wanreduce.hdl.boards.versa_dram_store import STORE_PARAMS
from wanreduce.sim.simulator import generate_verilog, run_cocotb

TB = "wanreduce.sim.tb_slot_store_litedram"
VERSA = DRAM_CONFIGS["versa-ecp5"]


def test_region_must_fit_the_model_memory() -> None:
    assert model_bytes(VERSA) == 256 * 1024  # 16 rows x 8 banks x 2 KiB
    LiteDramModelStore(64, slots=64, row_bits=9)  # 256 KiB exactly: fits
    with pytest.raises(ValueError, match=r"region ends at 0x41000, beyond the model's 0x40000"):
        LiteDramModelStore(64, slots=64, row_bits=9, base_address=0x1000)


def test_model_module_has_the_board_ports_and_small_memories(tmp_path) -> None:
    # The board's generator runs first in this process: its SoC is then LiteX's current top
    # (LiteXContext.top), whose hierarchy must not leak into the model's Verilog.
    generate("versa-ecp5", tmp_path / "board")
    text = generate_model("versa-ecp5", tmp_path / "model").read_text()
    assert cached_model("versa-ecp5").is_file()
    head = text[text.index("module litedram_versa_ecp5_model"):]
    head = head[:head.index(");")]
    for port in ("sys_clk", "sys_rst", "init_done", "axi_clk", "axi_rst", "user_port_axi_awaddr",
                 "user_port_axi_rdata", "user_port_axi_bresp"):
        assert re.search(rf"\b{port}\b", head), f"{port} not a port of the model module"
    # no DDR3 pads, no PLL, no init files (nor the board's hierarchy): the PHY is the model
    assert "ddram" not in text and "EHXPLLL" not in text and "readmem" not in text
    # one memory per bank, 16 DRAM rows of 256 bank words (128 bits: 1:2, 4 DFI words a phase)
    mems = re.findall(r"reg\s+\[127:0\]\s+(\w+)\s*\[0:(\d+)\]", text)
    assert len(mems) == VERSA.banks and {int(d) for _, d in mems} == {16 * 256 - 1}, mems


def _bank_machine(*, buffered: bool, fix: bool):
    """A Versa bank machine (LiteDRAM's, Migen), built with or without the fix."""
    from litedram import modules
    from litedram.core.bankmachine import BankMachine

    module = getattr(modules, VERSA.part)(VERSA.sys_clk_hz, VERSA.rate)
    s = controller_settings(VERSA)
    s.cmd_buffer_buffered = buffered
    s.phy, s.geom, s.timing = phy_settings(VERSA), module.geom_settings, module.timing_settings
    with fixed_bank_lock() if fix else contextlib.nullcontext():
        return BankMachine(0, 20, 3, 1, s)


def _lock_mismatches(*, buffered: bool, fix: bool, cycles: int = 3000, seed: int = 1) -> int:
    """Random traffic into a bank machine (phases of commands valid 2, 10 or 60 %, reads and writes, a few DRAM
    rows so it precharges and activates; the multiplexer takes its DRAM commands 90 % of the
    cycles): the cycles in which ``lock`` differs from "the bank holds a command" (its
    lookahead FIFO, output register included, or the buffer after it is not empty)."""
    from litex.soc.interconnect import stream
    from migen import run_simulation

    bm = _bank_machine(buffered=buffered, fix=fix)
    subs = [m for _, m in bm._submodules]
    fifo = next(m for m in subs if isinstance(m, stream.SyncFIFO))
    buf = next(m for m in subs if isinstance(m, stream.Buffer))
    rng = random.Random(seed)
    col_bits = len(bm.req.addr) - 4  # a few rows: row changes are frequent
    bad, held = [0], [0]

    def bench():
        busy = 0.1
        for _ in range(cycles):
            if not (yield bm.req.valid) or (yield bm.req.ready):  # a new command once taken
                yield bm.req.valid.eq(rng.random() < busy)
                yield bm.req.we.eq(rng.random() < 0.5)
                yield bm.req.addr.eq((rng.randrange(3) << col_bits) | rng.randrange(1 << 4))
            yield bm.cmd.ready.eq(rng.random() < 0.9)
            if rng.random() < 0.01:  # phases of light and heavy traffic
                busy = rng.choice([0.02, 0.1, 0.6])
            yield bm.refresh_req.eq(0)
            yield  # settle the combinational outputs of this cycle
            holds = ((yield fifo.level) != 0) or bool((yield buf.source.valid))
            bad[0] += int(bool((yield bm.req.lock)) != holds)
            held[0] += holds

    run_simulation(bm, bench())
    assert cycles // 10 < held[0] < cycles - cycles // 10, f"the bank held commands {held[0]} cycles"
    return bad[0]


def test_bank_lock_is_up_exactly_while_the_bank_holds_a_command() -> None:
    """Every cycle of random traffic, ``lock`` (now a flip-flop) equals "the bank holds a
    command"; without the fix the board's buffered FIFO makes them differ."""
    assert _lock_mismatches(buffered=True, fix=False) > 0
    assert _lock_mismatches(buffered=True, fix=True) == 0
    assert _lock_mismatches(buffered=False, fix=True) == 0


def _lock_after_accept(*, buffered: bool, fix: bool) -> list[int]:
    """A Versa bank machine (Migen simulator) takes one read; its ``lock`` over the next cycles,
    the command held (the multiplexer never takes it)."""
    from litedram import modules
    from litedram.core.bankmachine import BankMachine
    from migen import run_simulation

    module = getattr(modules, VERSA.part)(VERSA.sys_clk_hz, VERSA.rate)
    s = controller_settings(VERSA)
    s.cmd_buffer_buffered = buffered
    s.phy, s.geom, s.timing = phy_settings(VERSA), module.geom_settings, module.timing_settings
    with fixed_bank_lock() if fix else contextlib.nullcontext():
        bm = BankMachine(0, 20, 3, 1, s)
    seen: list[int] = []

    def bench():
        yield bm.req.valid.eq(1)
        yield bm.req.addr.eq(5)
        yield
        while not (yield bm.req.ready):
            yield
        yield  # taken at this edge
        yield bm.req.valid.eq(0)
        for _ in range(6):
            seen.append((yield bm.req.lock))
            yield

    run_simulation(bm, bench())
    return seen


def test_bank_lock_covers_every_held_command() -> None:
    """The crossbar's order guarantee: a bank machine holding a port's command keeps ``lock``
    up. The Versa's buffered command buffer leaves it down the cycle after acceptance (the
    bug the bench below found); the fix, and LiteDRAM's unbuffered default, do not."""
    assert controller_settings(VERSA).cmd_buffer_buffered  # the board's setting
    assert _lock_after_accept(buffered=True, fix=False)[0] == 0  # LiteDRAM 2024.12 as is
    assert _lock_after_accept(buffered=True, fix=True) == [1] * 6
    assert _lock_after_accept(buffered=False, fix=False) == [1] * 6
    assert _lock_after_accept(buffered=False, fix=True) == [1] * 6


def _bench(**store):
    params = {"data_width": 64, **store}
    top = "store_on_litedram_w64_n{outstanding}_b{burst_beats}".format(**store)
    sources = [generate_verilog(LiteDramModelStore, name=top, params=params),
               cached_model("versa-ecp5")]
    return params, sources, top


@pytest.mark.slow
@pytest.mark.cocotb
def test_cocotb_random_commands_through_litedram(tmp_path) -> None:
    params, sources, top = _bench(slots=16, row_bits=6, outstanding=64, burst_beats=16,
                                  base_address=0x3000)
    out = tmp_path / "r.json"
    run_cocotb(verilog=sources, toplevel=top, test_module=TB, testcase="random_commands",
               params={**params, "seed": 3, "commands": 1500, "out": str(out)})
    lat = json.loads(out.read_text())
    assert lat["read_latency"]["n"] > 0 and lat["write_latency"]["n"] > 0


@pytest.mark.slow
@pytest.mark.cocotb
def test_cocotb_throughput_through_litedram(tmp_path) -> None:
    """The board's store (its table, 128 entries, and its 64-beat bursts, the default
    ``burst_hold``) on the reducer's traffic, every ADD reading DRAM: the bursts held open while
    a message goes on stay long, at least 3/4 of the longest a hold reaches (``outstanding``/4
    beats; with ``burst_hold`` = 0 they averaged 2.4 / 4.2 beats and the efficiency was 0.18),
    so LiteDRAM's per-burst turnarounds leave most of the DQ bus to data; and the figure is not
    above what the bus can carry."""
    params, sources, top = _bench(slots=16, row_bits=6, outstanding=STORE_PARAMS["outstanding"],
                                  burst_beats=STORE_PARAMS["burst_beats"])
    out = tmp_path / "r.json"
    run_cocotb(verilog=sources, toplevel=top, test_module=TB, testcase="throughput",
               params={**params, "seed": 1, "commands": 3000, "message_beats": 64, "out": str(out)})
    r = json.loads(out.read_text())
    held = min(STORE_PARAMS["burst_beats"], STORE_PARAMS["outstanding"] // 4)
    assert r["mean_ar_burst"] >= 0.75 * held and r["mean_aw_burst"] >= 0.75 * held, r
    assert 0.6 <= r["dram_efficiency"] < 1.0, r
