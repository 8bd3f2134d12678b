"""cocotb bench of the payload gate deciding on DRAM-resident records
(``hdl/gate_record_harness.py``: each message's request is a record ADD on the scaffold record
engine, AXI ID 1; its response, in order, is the gate's decision; the gate's commands go through
the CommandArbiter to the DRAM slot store, AXI ID 0; both through ``AxiIdArbiter`` onto one
cocotbext-axi ``AxiRam``), run by tests/test_gate_record.py and bench/bench_payload_gate.py.

``gate_on_records``: random messages (``sim/tb_payload_gate.py``'s, a tenth with a wrong beat
count) to the first row of one of a few slots, beats of random int32 30 % near the limits; random
valid on ``beats`` / ``req`` and ready on ``rsp`` (re-drawn every 200 cycles, or ``p_stream``),
random pauses on every AXI channel (``p_axi``), latency re-drawn from ``latency_range``. The
reference: the record twin (``sim/record_model.py``) applies each message's record ADD in
message order and :func:`~wanreduce.hdl.gate_record_harness.record_decision` of its count is the
message's decision; the gate's twin (``sim/payload_gate_model.py``) turns messages and decisions
into commands; the slot-store reference (``sim/slot_store_model.py``) sums them. Every store
response (data, overflow, tag) in order; then every record row and every sums row in memory (and
every other byte as it started), every AR / AW burst in its engine's region with its ID, the
gate's counters and ``error``, ``mem_error`` / ``rec_mem_error`` / ``copy_error`` 0, the AXI ID
arbiter's ``arb_error`` / ``arb_dropped`` 0; decisions of each kind and ADDs right after a WRITE
to the same slot must have happened. Parameters (tb_params): the harness's (data_width,
address_width, depth, max_elements, sums, records), messages, seed, latency_range, p_axi,
p_stream, out (a JSON file: the run's figures, the AR / AW beats of each engine among them).
"""

from __future__ import annotations

import json
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from wanreduce.hdl.gate_record_harness import (
    RECORD_WIDTH,
    gate_records_with_latency,
    record_decision,
)
from wanreduce.hdl.payload_gate import Decision, request_layout
from wanreduce.hdl.slot_store_signature import Op
from wanreduce.sim.axi_memory import attach_ram, random_axi_pauses, vary_latency
from wanreduce.sim.payload_gate_model import expected_commands
from wanreduce.sim.record_model import MASK, RecordModel
from wanreduce.sim.simulator import generate_verilog, run_cocotb, tb_params
from wanreduce.sim.slot_store_model import SlotStoreModel
from wanreduce.sim.tb_engines_on_arbiter import bursts_by_id
from wanreduce.sim.tb_payload_gate import Inputs, check_counters, drive_to_store, random_messages_to
from wanreduce.sim.tb_slot_store import CLOCK_NS, Bench, _pack, random_row


def _decisions(messages, model: RecordModel, row_bits: int, req_layout) -> list[int]:
    """Each message's record ADD (row = its slot, data = its request's bits) in message order
    on the twin; its decision from the count after."""
    lanes = (1 << (RECORD_WIDTH // 32)) - 1
    out = []
    for msg in messages:
        data = _pack(req_layout, row=msg.row, elements=msg.elements, tag=msg.tag)
        after, _ = model.apply(Op.ADD, msg.row >> row_bits, data, lanes)
        out.append(record_decision(after & MASK))
    return out


def _add_after_write(messages, decisions: list[int], row_bits: int) -> int:
    """ADD decisions whose slot's previous decision was a WRITE (the sums forwarded or re-read
    onto a fresh chunk)."""
    last: dict[int, int] = {}
    n = 0
    for msg, dec in zip(messages, decisions, strict=True):
        slot = msg.row >> row_bits
        n += dec == Decision.ADD.value and last.get(slot) == Decision.WRITE.value
        last[slot] = dec
    return n


@cocotb.test()
async def gate_on_records(dut):
    p = tb_params()
    rng = random.Random(p.get("seed", 1))
    w, max_el = p["data_width"], p["max_elements"]
    slots, row_bits = p["sums"]["slots"], p["sums"]["row_bits"]
    sums = Bench(dut, {"data_width": w, **p["sums"]})
    recs = Bench(dut, {"data_width": w, **p["records"], "slots": slots, "row_bits": 0, "row_width": RECORD_WIDTH,
                       "axi_id": 1}, prefix="rec_")
    messages = random_messages_to(rng, p.get("messages", 100), w, max_el, lambda: rng.randrange(slots) << row_bits,
                                  lambda: random_row(rng, w // 32))
    req_layout = request_layout(sums.address_bits, max_el)
    inputs = Inputs(dut, messages, None, w, sums.address_bits, max_el)

    cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
    dut.rst.value = 1
    dut.rsp__ready.value = 0
    size = max(b.base + b.rows * b.stride for b in (sums, recs))
    ram = attach_ram(dut, size)
    content = rng.randbytes(size)
    ram.write(0, content)
    for b in (sums, recs):
        b.ram, b.content = ram, content[b.base:b.base + b.rows * b.stride]

    def initial_of(b: Bench):
        return lambda row: int.from_bytes(content[b.address(row):b.address(row) + b.row_bytes], "little")

    rec_model, sum_model = RecordModel(RECORD_WIDTH, initial_of(recs)), SlotStoreModel(w, initial_of(sums))
    decisions = _decisions(messages, rec_model, row_bits, req_layout)
    want = expected_commands(messages, decisions, w, sums.address_bits, max_el)
    expected = [(*sum_model.apply(c.op, c.row, c.data, c.lanes), c.tag) for c in want.commands]
    random_axi_pauses(ram, rng, p.get("p_axi", 0.3))
    vary_latency(dut, rng, *p.get("latency_range", (20, 200)))
    cocotb.start_soon(bursts_by_id(dut, {0: sums, 1: recs}))
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    await RisingEdge(dut.clk)

    result = await drive_to_store(dut, rng, inputs, want, expected, sums.rsp_layout, p)
    for flag in ("mem_error", "rec_mem_error", "copy_error", "arb_error", "arb_dropped"):
        assert not int(getattr(dut, flag).value), f"{flag} set"
    counts = check_counters(dut, want)
    for b, model in ((sums, sum_model), (recs, rec_model)):
        b.check_bursts()
        await b.check_memory(model)
    kinds = {d.name: decisions.count(d.value) for d in Decision}
    for name, b in (("sums", sums), ("records", recs)):  # the memory traffic, in W beats
        for ch in ("ar", "aw"):
            result[f"{name}_{ch}_beats"] = sum(beats for c, _, beats in b.bursts if c == ch)
    result.update(counts, messages=len(messages), add_after_write=_add_after_write(messages, decisions, row_bits),
                  **{f"decided_{k}": v for k, v in kinds.items()})
    assert all(kinds.values()) and result["add_after_write"] > 0, f"too few of some decision: {result}"
    if p.get("out"):
        with open(p["out"], "w") as f:
            json.dump(result, f)
    dut._log.info(f"{len(messages)} messages: {result}")


def harness_params(width: int, *, slots: int, depth: int, outstanding: int) -> dict:
    """A gate-on-records harness's parameters: ``slots`` of 8 rows (sums at 0x3000, records at
    0x1000), ``max_elements`` a slot's, a payload FIFO of ``depth`` beats, each engine's table
    of ``outstanding`` entries."""
    row_bits = 3
    return {"data_width": width, "address_width": 16, "depth": depth, "max_elements": (1 << row_bits) * width // 32,
            "sums": {"slots": slots, "row_bits": row_bits, "outstanding": outstanding, "base_address": 0x3000},
            "records": {"outstanding": outstanding, "base_address": 0x1000}}


def run_gate_records(width: int, *, seed: int, messages: int = 150, depth: int = 64, outstanding: int = 32,
                     **tb: object) -> None:
    """Generate the gate-on-records harness at ``width`` (4 slots of 8 rows, ``max_elements`` a
    slot's, a payload FIFO of ``depth`` beats, each engine's table of ``outstanding``) and run
    ``gate_on_records`` on it (``tb``: further tb_params: latency_range, p_axi, p_stream, out).
    tests/test_gate_record.py and bench/bench_payload_gate.py."""
    params = harness_params(width, slots=4, depth=depth, outstanding=outstanding)
    top = f"gate_records_w{width}_d{depth}_n{outstanding}"
    path = generate_verilog(gate_records_with_latency, name=top, params=params)
    run_cocotb(verilog=path, toplevel=top, test_module=__name__, testcase="gate_on_records",
               params={**params, "messages": messages, "seed": seed, **tb}, timeout_s=240)
