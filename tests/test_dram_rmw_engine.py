"""The DRAM read-modify-write engine (hdl/dram_rmw_engine.py) with a modify other than the slot
store's adder: the scaffold record modify (hdl/record_modify_scaffold.py) on AXI ID 1, checked
against its Python twin (sim/record_model.py) in the slot-store bench (sim/tb_slot_store.py) on
cocotbext-axi's AxiRam with random latency and backpressure, with and without a side input
(``side_shape``) and a strided address map (``row_stride`` / ``row_offset``); the engine's
parameter checks (the late operand's ports and signature too; its bench: test_decision_state.py)."""

from __future__ import annotations

import random

import pytest
from amaranth.back import rtlil
from amaranth.hdl import Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from wanreduce.hdl.decision_state import effect_layout, late_layout
from wanreduce.hdl.dram_rmw_engine import LATE_PORTS, DramRmwEngine
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
    (_bad(carry=Out(1)), r"modify: members must be among a, b, sum, overflow, op, side, late, effect, got \['carry'\]"),
    (_bad(side=In(8)), r"modify: member side needs the engine's side_shape \(None\), got In\(8\)"),
])
def test_rejects_a_modify_that_does_not_fit(modify, msg) -> None:
    with pytest.raises(ValueError, match=msg):
        DramRmwEngine(64, slots=4, row_bits=1, outstanding=8, modify=modify)


HEADER = data.StructLayout({"job": 1, "head": 16, "pending": 1})


@pytest.mark.parametrize(("modify", "side_shape", "msg"), [
    (_bad(), 8, r"modify: member side must be In\(unsigned\(8\)\) \(side_shape\), got nothing"),
    (_bad(side=In(7)), 8, r"modify: member side must be In\(unsigned\(8\)\) \(side_shape\), got In\(7\)"),
    (_bad(side=Out(8)), 8, r"modify: member side must be In\(unsigned\(8\)\) \(side_shape\), got Out\(8\)"),
    (_bad(side=In(18)), HEADER, r"modify: member side must be In\(StructLayout.*\) \(side_shape\), got In\(18\)"),
])
def test_rejects_a_side_that_does_not_fit(modify, side_shape, msg) -> None:
    """The modify has ``side`` exactly when the engine has ``side_shape``, of that shape."""
    with pytest.raises(ValueError, match=msg):
        DramRmwEngine(64, slots=4, row_bits=1, outstanding=8, modify=modify, side_shape=side_shape)


LATE, EFFECT = late_layout(16), effect_layout(16)


@pytest.mark.parametrize(("modify", "kw", "msg"), [
    (_bad(late=In(LATE)), {}, r"modify: member late needs the engine's late_shape \(None\), got In\(StructLayout"),
    (_bad(effect=Out(EFFECT)), {}, r"modify: member effect needs the engine's effect_shape \(None\)"),
    (_bad(), {"late_shape": LATE}, r"modify: member late must be In\(StructLayout.*\) \(late_shape\), got nothing"),
    (_bad(late=In(38)), {"late_shape": LATE}, r"modify: member late must be In\(StructLayout.*\) \(late_shape\), got In\(38\)"),
    (_bad(late=Out(LATE)), {"late_shape": LATE}, r"modify: member late must be In\(StructLayout.*\), got Out"),
    (_bad(), {"effect_shape": EFFECT}, r"modify: member effect must be Out\(StructLayout.*\) \(effect_shape\), got nothing"),
    (_bad(effect=In(EFFECT)), {"effect_shape": EFFECT}, r"modify: member effect must be Out\(StructLayout.*\), got In"),
    (_bad(effect=Out(8)), {"effect_shape": 9}, r"modify: member effect must be Out\(unsigned\(9\)\) \(effect_shape\), got Out\(8\)"),
])
def test_rejects_a_late_operand_that_does_not_fit(modify, kw, msg) -> None:
    """The modify has ``late`` / ``effect`` exactly when the engine has ``late_shape`` /
    ``effect_shape``, of that shape and direction."""
    with pytest.raises(ValueError, match=msg):
        DramRmwEngine(64, slots=4, row_bits=2, outstanding=8, modify=modify, **kw)


def test_late_ports_only_with_a_late_operand() -> None:
    """Without ``late_shape`` / ``effect_shape`` none of ``LATE_PORTS``; with them C0's command and
    its hold, the look-ahead (``ahead_side`` / ``c0_side`` with a side), ``late`` in and ``effect``
    out, of their shapes."""
    plain = DramRmwEngine(64, slots=4, row_bits=1, outstanding=8, modify=SaturatingAdder)
    assert not set(LATE_PORTS) & set(plain.signature.members)
    e = DramRmwEngine(64, slots=16, row_bits=0, outstanding=8, row_width=256, side_shape=4,
                      modify=lambda w: ScaffoldRecordModify(w, side_width=4, late_slots=16),
                      late_shape=LATE, effect_shape=EFFECT)
    m = e.signature.members
    assert set(LATE_PORTS) <= set(m)
    assert m["late"].flow == In and m["late"].shape == LATE and m["effect"].flow == Out and m["effect"].shape == EFFECT
    assert len(e.ahead_row) == 4 and len(e.ahead_side) == 4 and len(e.c0_row) == 4
    assert m["c0_hold"].flow == In and len(e.c0_side) == 4 and m["c0_valid"].flow == Out  # C0 shown, held
    no_side = DramRmwEngine(64, slots=16, row_bits=0, outstanding=8, row_width=256, late_shape=LATE,
                            modify=_bad(late=In(LATE)))
    assert "ahead_side" not in no_side.signature.members and "effect" not in no_side.signature.members


def test_side_travels_on_cmd_and_rsp() -> None:
    """``side_shape``: ``cmd`` and ``rsp`` carry ``side`` (any shape: a layout too); without it
    the ports are the slot store's."""
    e = DramRmwEngine(64, slots=4, row_bits=1, outstanding=8, modify=_bad(side=In(HEADER)), side_shape=HEADER)
    assert e.cmd.payload.side.shape() == HEADER and e.rsp.payload.side.shape() == HEADER
    e = DramRmwEngine(64, slots=4, row_bits=1, outstanding=8, modify=_bad(side=In(16)), side_shape=16)
    assert len(e.cmd.payload.side) == 16 and len(e.rsp.payload.side) == 16
    plain = DramRmwEngine(64, slots=4, row_bits=1, outstanding=8, modify=SaturatingAdder)
    assert "side" not in plain.cmd.payload.shape().members and "side" not in plain.rsp.payload.shape().members


@pytest.mark.parametrize(("kw", "msg"), [
    ({"row_stride": 16}, r"row_stride must be a power of two from 32 \(a 256-bit row\), got 16"),
    ({"row_stride": 3072}, r"row_stride must be a power of two from 32 \(a 256-bit row\), got 3072"),
    ({"row_stride": 2048, "row_offset": 2032},
     r"row_offset must be a multiple of 32 from 0 to 2016 \(a row inside its stride of 2048\), got 2032"),
    ({"row_stride": 2048, "row_offset": 2048},
     r"row_offset must be a multiple of 32 from 0 to 2016 \(a row inside its stride of 2048\), got 2048"),
    ({"row_stride": 2048, "row_offset": -32},
     r"row_offset must be a multiple of 32 from 0 to 2016 \(a row inside its stride of 2048\), got -32"),
    ({"row_offset": 32}, r"row_offset must be 0 without row_stride \(dense rows\), got 32"),
    # 64 rows of a 2 KiB stride: 128 KiB do not fit 16 address bits
    ({"row_stride": 2048, "address_width": 16},
     r"base_address \+ rows \* 2048 bytes must be <= 2\*\*address_width = 0x10000, got 0x21000"),
])
def test_rejects_a_bad_stride(kw, msg) -> None:
    args = {"slots": 16, "row_bits": 2, "outstanding": 8, "row_width": 256, "base_address": 0x1000}
    DramRmwEngine(64, modify=ScaffoldRecordModify, **args, row_stride=2048, row_offset=2016)
    with pytest.raises(ValueError, match=msg):
        DramRmwEngine(64, modify=ScaffoldRecordModify, **{**args, **kw})


def test_stride_of_one_row_is_dense() -> None:
    """``row_stride`` = R/8 (offset 0) is the dense map: the same RTLIL."""
    args = {"slots": 4, "row_bits": 1, "outstanding": 8, "row_width": 256, "modify": ScaffoldRecordModify}
    assert rtlil.convert(DramRmwEngine(64, **args, row_stride=32)) == rtlil.convert(DramRmwEngine(64, **args))


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


@pytest.mark.parametrize(("width", "side_width"), [(64, None), (256, None), (256, 16), (64, 32), (64, 80)])
def test_scaffold_modify_is_its_python_twin(width: int, side_width: int | None) -> None:
    """The scaffold modify against sim/record_model.py on random records: ADD as documented
    (with a random side, if any: the count's increment), WRITE (a = 0) the data, READ (b = 0)
    the record, whatever the side."""
    dut = ScaffoldRecordModify(width, side_width=side_width)
    rng = random.Random(width)
    fields = width // 32

    async def bench(ctx):
        for _ in range(200):
            a, b = rng.getrandbits(width), rng.getrandbits(width)
            if rng.random() < 0.3:  # bitmaps apart: no flag
                b &= ~(((a >> 32) & 0xFFFFFFFF) << 32)
            side = rng.getrandbits(side_width) if side_width else 0
            if side_width:
                ctx.set(dut.side, side)
            ctx.set(dut.op, Op.ADD)
            ctx.set(dut.a, a)
            ctx.set(dut.b, b)
            assert (ctx.get(dut.sum), ctx.get(dut.overflow)) == scaffold_update(a, b, fields, side)
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
    # A side input (16 and 40 bits: folded into the scaffold's count) with the dense map, and with the
    # record store's map: each record at the end of its row's 2 KiB stride.
    "w64_r256_n64_side": {"data_width": 64, "row_width": 256, "slots": 16, "row_bits": 4, "outstanding": 64,
                          "burst_beats": 16, "burst_hold": 64, "base_address": 0x2000, "delay_depth": 256,
                          "side_width": 16},
    "w64_r256_n16_stride": {"data_width": 64, "row_width": 256, "slots": 16, "row_bits": 2, "outstanding": 16,
                            "burst_beats": 16, "burst_hold": 64, "base_address": 0x2000, "delay_depth": 256,
                            "side_width": 40, "row_stride": 2048, "row_offset": 2016},
    # rows as wide as the bus, an 8 KiB stride (wider than a 4 KiB page), in its middle
    "w256_n8_stride": {"data_width": 256, "slots": 4, "row_bits": 2, "outstanding": 8, "burst_beats": 4,
                       "base_address": 0x1000, "delay_depth": 64, "side_width": 5, "row_stride": 8192,
                       "row_offset": 4096 + 32},
}


@pytest.mark.cocotb
@pytest.mark.parametrize(("config", "seed", "latency"), [
    ("w64_r256_n64", 31, [20, 200]), ("w64_r256_n4", 33, [1, 12]), ("w256_n8", 32, [1, 12]),
    ("w64_r256_n64_side", 34, [20, 200]), ("w64_r256_n16_stride", 35, [20, 200]),
    ("w256_n8_stride", 36, [1, 12])])
def test_cocotb_scaffold_engine_random_commands(config: str, seed: int, latency: list[int]) -> None:
    """Random WRITE / ADD / READ on runs of rows with repeats (hits on rows in flight, back to
    back), random cmd / rsp handshakes, random AXI pauses on every channel and a random latency:
    every response as the scaffold's Python twin, in order (with a side input: each command's
    own side in its update and echoed on its response, also when its row is forwarded); every
    burst with ID 1, of whole rows at their addresses (strided: one row per burst); then the
    memory holds the twin's rows and nothing else changed."""
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
