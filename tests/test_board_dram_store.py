"""The core's DRAM path on the boards (issue 16 item 3): the slot-store exerciser (the core's
stand-in) against a real slot store, ``attach_memory``'s checks, and the Versa's
``--dram-store-test`` build (DramSlotStore -> AxiUpsizer -> LiteDRAM)."""

from __future__ import annotations

import re

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from wanreduce.commands.build import run_build
from wanreduce.commands.report import parse_nextpnr_report
from wanreduce.hdl.boards import BOARDS
from wanreduce.hdl.boards.dram_controller import DramController, attach_memory
from wanreduce.hdl.boards.litedram_controller import DRAM_CONFIGS, module_name
from wanreduce.hdl.boards.slot_store_exerciser import SlotStoreExerciser
from wanreduce.hdl.boards.versa_dram_store import STORE_PARAMS
from wanreduce.hdl.dram_slot_store import DramSlotStore
from wanreduce.hdl.dram_slot_store_harness import DramSlotStoreHarness
from wanreduce.hdl.onchip_slot_store import OnChipSlotStore
from wanreduce.sim.simulator import generate_verilog, run_cocotb

# core clock of the slow bitstream test: the board default (the DRAM slot store is below 125 MHz
# on the ECP5: docs/benchmarks.md, "DRAM controller on the boards")
STORE_TEST_MHZ = 62.5


@pytest.mark.parametrize("corrupt_at", [None, 11])
def test_exerciser_checks_every_response(corrupt_at):
    """Three passes over 8 rows of an on-chip store: no error; one response with a flipped bit
    (the 12th: pass 1, an ADD) sets the sticky error."""
    m = Module()
    m.submodules.store = store = OnChipSlotStore(64, slots=2, row_bits=2)
    m.submodules.ex = ex = SlotStoreExerciser(64, 3)
    flip = Signal()
    m.d.comb += [store.cmd.valid.eq(ex.cmd.valid), store.cmd.payload.eq(ex.cmd.payload),
                 ex.cmd.ready.eq(store.cmd.ready),
                 ex.rsp.valid.eq(store.rsp.valid), ex.rsp.payload.eq(store.rsp.payload),
                 ex.rsp.payload.data.eq(store.rsp.payload.data ^ flip.replicate(64)),
                 store.rsp.ready.eq(ex.rsp.ready)]
    seen = []

    async def bench(ctx):
        n = 0
        for _ in range(400):
            ctx.set(flip, corrupt_at is not None and n == corrupt_at)
            await ctx.tick()
            if ctx.get(store.rsp.valid):
                n += 1
            if ctx.get(ex.passes) >= 3:
                break
        await ctx.tick().repeat(3)
        seen.append((ctx.get(ex.passes), ctx.get(ex.error)))

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    passes, error = seen[0]
    assert passes >= 3
    assert error == (corrupt_at is not None)


@pytest.mark.slow
@pytest.mark.cocotb
def test_versa_store_with_the_boards_bursts_on_axi_ram():
    """The store as the Versa builds it (STORE_PARAMS: the board's 64-beat bursts, 128 entries)
    on cocotbext-axi's AxiRam with random latency and backpressure: every response equals the
    reference, every burst INCR, within 4 KiB and at most 64 beats (sim/tb_slot_store.py).
    Slow: 64 slots x 256 rows and 128 entries take minutes to build and run on a loaded machine."""
    assert STORE_PARAMS["burst_beats"] == DRAM_CONFIGS["versa-ecp5"].burst_beats(64) == 64
    params = {"data_width": 64, **STORE_PARAMS}
    path = generate_verilog(DramSlotStoreHarness, name="versa_dram_store", params=params)
    run_cocotb(verilog=path, toplevel="versa_dram_store", test_module="wanreduce.sim.tb_slot_store",
               testcase="random_commands", params={**params, "seed": 5, "commands": 500})


def test_attach_memory_rejects_a_port_wider_than_the_dram_address(tmp_path):
    """The store's address must fit the DRAM's (else its region could lie outside it)."""
    store = DramSlotStore(64, slots=4, row_bits=4, address_width=32, outstanding=4)
    cfg = DRAM_CONFIGS["versa-ecp5"]
    pads = BOARDS["versa-ecp5"].platform().request("ddr3", 0, dir="-")
    dram = DramController("versa-ecp5", pads, Signal(), Signal())
    with pytest.raises(ValueError, match=rf"m_axi_mem has 32 address bits, the versa-ecp5 DRAM "
                                         rf"{cfg.addr_width} .*address_width={cfg.addr_width}$"):
        attach_memory(Module(), store, dram)


def test_dram_store_test_builds_the_core_path(tmp_path):
    """versa-ecp5 --dram-store-test: the store, the 64 -> 128 converter and the controller are
    in the design; the controller instance uses only ports its Verilog has."""
    board = BOARDS["versa-ecp5"]
    run_build(board, {}, tmp_path, bitstream=False, dram_store_test=True, core_mhz=125.0)
    name = module_name("versa-ecp5")
    verilog = (tmp_path / f"{name}.v").read_text()
    ports = set(re.findall(r"(?:input|output|inout)\s+wire\s+(?:\[\d+:0\]\s+)?(\w+)", verilog))
    top = (tmp_path / f"{board.top_name}.il").read_text()
    cell = re.search(rf"cell \\{name} \S+\n(.*?)\n\s*end\n", top, re.S).group(1)
    used = set(re.findall(r"connect \\(\w+) ", cell))
    assert {"user_port_axi_wdata", "user_port_axi_awlen", "axi_clk"} <= used <= ports
    for sub in ("store", "exerciser", "mem_upsizer"):
        assert f"module \\{board.top_name}.{sub}\n" in top
    assert "wire width 64 \\s_axi_wdata" in top and "wire width 128 \\m_axi_wdata" in top
    with pytest.raises(ValueError, match="choose one"):
        board.top({}, 125.0, dram_selftest=True, dram_store_test=True)


@pytest.mark.slow
def test_dram_store_test_bitstream_meets_its_clocks(tmp_path):
    """The core's DRAM path (DramSlotStore with the board's 64-beat bursts -> AxiUpsizer ->
    LiteDRAM) through the open flow at nextpnr's default seed, as CI runs it: a bitstream, and
    every clock (core, DRAM controller, init) meets its constraint; the DRAM controller's is the
    board's configured 87.5 MHz. Minutes; docs/benchmarks.md has the figures of every seed placed."""
    board = BOARDS["versa-ecp5"]
    run_build(board, {}, tmp_path, bitstream=True, dram_store_test=True, core_mhz=STORE_TEST_MHZ)
    assert (tmp_path / f"{board.top_name}.bit").stat().st_size > 100_000
    r = parse_nextpnr_report(tmp_path / f"{board.top_name}.report.json")
    failing = {clk: f for clk, f in r["fmax"].items() if f[0] < f[1]}
    assert not failing, f"clocks below their constraint (achieved, target MHz): {failing}"
    dram = [f for clk, f in r["fmax"].items() if "dram_clk" in clk]
    assert dram and dram[0][1] == pytest.approx(DRAM_CONFIGS["versa-ecp5"].sys_clk_hz / 1e6, rel=1e-3)  # period in ps
