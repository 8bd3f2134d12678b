"""The payload gate attached to the record engine (``hdl/gate_record_harness.py``; issue 16,
large S step 4; docs/large_slots.md, "Payload wait"): the stand-in decision's two forms agree,
and the cocotb bench (``sim/tb_gate_record.py``) at W 64 (records of 4 beats) and W 256 (a
record a beat) on ``AxiRam`` with latency 20-200 and pauses on every channel and stream."""

from __future__ import annotations

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from wanreduce.hdl.gate_record_harness import GateOnRecords, record_decision
from wanreduce.hdl.payload_gate import Decision
from wanreduce.sim.tb_gate_record import run_gate_records


def test_record_decision_cycles_write_add_add_discard() -> None:
    """The int form (the bench's twin) and the Value form (the harness) give the same decision
    for every count's low bits, each a ``Decision``: WRITE, ADD, ADD, DISCARD."""
    assert [Decision(record_decision(c)) for c in range(4)] == \
        [Decision.WRITE, Decision.ADD, Decision.ADD, Decision.DISCARD]
    m = Module()
    count, decision = Signal(32), Signal(2)
    m.d.comb += decision.eq(record_decision(count))
    got = {}

    async def tb(ctx) -> None:
        for c in (0, 1, 2, 3, 4, 0xFFFFFFFF, 0x12345676):
            ctx.set(count, c)
            got[c] = ctx.get(decision)

    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()
    assert got == {c: record_decision(c) for c in got}


@pytest.mark.parametrize(("kw", "msg"), [
    ({"max_elements": 31}, "max_elements must be 1..30"),
    ({"sums": {"slots": 4}}, "sums must give row_bits"),
    ({"records": {"row_bits": 2}}, r"records must not give \['row_bits'\]"),
])
def test_gate_on_records_rejects_bad_parameters(kw: dict, msg: str) -> None:
    params = {"address_width": 16, "depth": 16, "sums": {"slots": 4, "row_bits": 3},
              "records": {"base_address": 0x1000}, **kw}
    with pytest.raises(ValueError, match=msg):
        GateOnRecords(64, **params)


@pytest.mark.cocotb
@pytest.mark.parametrize("width", [64, 256])
def test_cocotb_gate_on_records(width: int) -> None:
    """Random messages to 4 slots, latency 20-200, pauses everywhere: every store response, every
    record and sums row, every counter as the twins say; the arbiters' errors 0."""
    run_gate_records(width, seed=width + 7)
