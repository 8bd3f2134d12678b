"""The DRAM read-modify-write engine (hdl/dram_rmw_engine.py) with a modify other than the slot
store's adder: the scaffold record modify (hdl/record_modify_scaffold.py) on AXI ID 1, checked
against its Python twin (sim/record_model.py) in the slot-store bench (sim/tb_slot_store.py) on
cocotbext-axi's AxiRam with random latency and backpressure; the engine's parameter checks."""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from wanreduce.hdl.dram_rmw_engine import DramRmwEngine
from wanreduce.hdl.engines_on_arbiter_harness import engines_with_latency
from wanreduce.hdl.record_modify_scaffold import ScaffoldRecordModify
from wanreduce.hdl.saturating_adder import SaturatingAdder
from wanreduce.hdl.scaffold_engine_harness import ScaffoldEngineHarness
from wanreduce.hdl.slot_store_signature import Op
from wanreduce.sim.record_model import scaffold_update
from wanreduce.sim.simulator import generate_verilog, run_cocotb

TB = "wanreduce.sim.tb_slot_store"


class _Modify(wiring.Component):
    """A modify with the members it is given (for the signature checks)."""

    def __init__(self, members: dict) -> None:
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        return Module()


def _bad(**change):
    def make(w: int) -> wiring.Component:
        members = {"a": In(w), "b": In(w), "sum": Out(w), "overflow": Out(w // 32), **change}
        return _Modify({k: v for k, v in members.items() if v is not None})
    return make


@pytest.mark.parametrize(("modify", "msg"), [
    (_bad(sum=None), r"modify: member sum must be Out\(64\), got nothing"),
    (_bad(a=In(32)), r"modify: member a must be In\(64\), got In\(32\)"),
    (_bad(overflow=Out(1)), r"modify: member overflow must be Out\(2\), got Out\(1\)"),
    (_bad(op=Out(2)), r"modify: member op must be In\(2\), got Out\(2\)"),
    (_bad(carry=Out(1)), r"modify: members must be among a, b, sum, overflow, op, got \['carry'\]"),
])
def test_rejects_a_modify_that_does_not_fit(modify, msg) -> None:
    with pytest.raises(ValueError, match=msg):
        DramRmwEngine(64, slots=4, row_bits=1, outstanding=8, modify=modify)


def test_rejects_bad_axi_id() -> None:
    with pytest.raises(ValueError, match=r"axi_id must be 0\.\.1 \(the port's 1-bit ID\), got 2"):
        DramRmwEngine(64, slots=4, row_bits=1, outstanding=8, modify=SaturatingAdder, axi_id=2)


@pytest.mark.parametrize(("kw", "msg"), [
    ({"row_width": 32}, r"row_width must be a power of two from 64 \(the data width\) to 1024, got 32"),
    ({"row_width": 384}, r"row_width must be a power of two from 64 \(the data width\) to 1024, got 384"),
    ({"row_width": 2048}, r"row_width must be a power of two from 64 \(the data width\) to 1024, got 2048"),
    ({"row_width": 256, "burst_beats": 2}, r"burst_beats must be >= 4 \(a 256-bit row is 4 beats of 64\), got 2"),
    # 1 024 rows: 8 KiB of 64-bit rows fit 14 address bits, 32 KiB of 256-bit rows do not
    ({"row_width": 256, "address_width": 14, "row_bits": 6},
     r"base_address \+ rows \* 32 bytes must be <= 2\*\*address_width = 0x4000, got 0x8000"),
])
def test_rejects_bad_row_width(kw, msg) -> None:
    args = {"slots": 16, "row_bits": 2, "outstanding": 8, **kw}
    DramRmwEngine(64, modify=ScaffoldRecordModify, **{**args, "row_width": 64, "burst_beats": 16})
    with pytest.raises(ValueError, match=msg):
        DramRmwEngine(64, modify=ScaffoldRecordModify, **args)


def test_row_width_sets_the_record_port() -> None:
    """Rows of R bits on a W-bit bus: commands, responses and the modify are R bits, the AXI
    data W."""
    e = DramRmwEngine(64, slots=4, row_bits=1, outstanding=8, modify=ScaffoldRecordModify, row_width=256)
    assert len(e.cmd.payload.data) == 256 and len(e.rsp.payload.data) == 256
    assert len(e.m_axi_mem_wdata) == 64 and len(e.m_axi_mem_rdata) == 64
    assert len(e.modify.sum) == 256


@pytest.mark.parametrize("width", [64, 256])
def test_scaffold_modify_is_its_python_twin(width: int) -> None:
    """The scaffold modify against sim/record_model.py on random records: ADD as documented,
    WRITE (a = 0) the data, READ (b = 0) the record."""
    dut = ScaffoldRecordModify(width)
    rng = random.Random(width)
    fields = width // 32

    async def bench(ctx):
        for _ in range(200):
            a, b = rng.getrandbits(width), rng.getrandbits(width)
            if rng.random() < 0.3:  # bitmaps apart: no flag
                b &= ~(((a >> 32) & 0xFFFFFFFF) << 32)
            ctx.set(dut.op, Op.ADD)
            ctx.set(dut.a, a)
            ctx.set(dut.b, b)
            assert (ctx.get(dut.sum), ctx.get(dut.overflow)) == scaffold_update(a, b, fields)
            ctx.set(dut.op, Op.WRITE)
            ctx.set(dut.a, 0)
            assert (ctx.get(dut.sum), ctx.get(dut.overflow)) == (b, 0)
            ctx.set(dut.op, Op.READ)
            ctx.set(dut.a, a)
            ctx.set(dut.b, 0)
            assert (ctx.get(dut.sum), ctx.get(dut.overflow)) == (a, 0)

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()


# The record's shape on the core's default bus: rows of 256 bits on a 64-bit port (4 beats per
# row; the gearboxes on R and W), with a 64-entry table and 20..200 cycles of latency, and with a
# tiny table (4: full most of the time, entries re-taken back to back, most commands hit a row
# in flight) at 1..12; rows as wide as the bus (W 256) with a tiny table. AXI ID 1, the record
# store's.
CONFIGS = {
    "w64_r256_n64": {"data_width": 64, "row_width": 256, "slots": 16, "row_bits": 4, "outstanding": 64,
                     "burst_beats": 16, "burst_hold": 64, "base_address": 0x2000, "delay_depth": 256},
    "w64_r256_n4": {"data_width": 64, "row_width": 256, "slots": 4, "row_bits": 2, "outstanding": 4,
                    "burst_beats": 8, "base_address": 0x1000, "delay_depth": 64},
    "w256_n8": {"data_width": 256, "slots": 4, "row_bits": 2, "outstanding": 8, "burst_beats": 4,
                "base_address": 0x1000, "delay_depth": 64},
}


@pytest.mark.cocotb
@pytest.mark.parametrize(("config", "seed", "latency"), [
    ("w64_r256_n64", 31, [20, 200]), ("w64_r256_n4", 33, [1, 12]), ("w256_n8", 32, [1, 12])])
def test_cocotb_scaffold_engine_random_commands(config: str, seed: int, latency: list[int]) -> None:
    """Random WRITE / ADD / READ on runs of rows with repeats (hits on rows in flight, back to
    back), random cmd / rsp handshakes, random AXI pauses on every channel and a random latency:
    every response as the scaffold's Python twin, in order; every burst with ID 1, of whole rows."""
    params = CONFIGS[config]
    top = f"scaffold_engine_{config}"
    path = generate_verilog(ScaffoldEngineHarness, name=top, params=params)
    run_cocotb(verilog=path, toplevel=top, test_module=TB, testcase="random_commands",
               params={**params, "seed": seed, "commands": 600, "latency_range": latency,
                       "model": "record", "axi_id": 1})


# The large-S arrangement at the core's default bus: the slot store (ID 0, 64-bit rows, 64
# entries) and the scaffold record engine (ID 1, 256-bit rows = 4 beats, 32 entries) through
# AxiIdArbiter onto one AxiRam, their regions side by side.
TWO_ENGINES = {
    "data_width": 64, "address_width": 16,
    "sums": {"slots": 16, "row_bits": 4, "outstanding": 64, "burst_beats": 16, "burst_hold": 64,
             "base_address": 0x0},
    "records": {"slots": 16, "row_bits": 2, "outstanding": 32, "row_width": 256, "burst_beats": 16,
                "burst_hold": 64, "base_address": 0x1000},
}


@pytest.mark.cocotb
def test_cocotb_two_engines_share_one_port() -> None:
    """Both engines at once, random commands each, random AXI pauses and latency 20..200: every
    response as its own reference, every burst with its engine's ID in its engine's region; the
    arbiter's error and dropped stay 0."""
    top = "engines_on_arbiter_w64"
    path = generate_verilog(engines_with_latency, name=top, params=TWO_ENGINES)
    run_cocotb(verilog=path, toplevel=top, test_module="wanreduce.sim.tb_engines_on_arbiter",
               testcase="random_commands_both",
               params={**TWO_ENGINES, "seed": 41, "commands": 600, "latency_range": [20, 200]})
