"""cocotb bench of the two read-modify-write engines sharing one memory port
(``hdl/engines_on_arbiter_harness.py``: the slot store on AXI ID 0, the scaffold record engine on
ID 1, through ``AxiIdArbiter``), run by tests/test_dram_rmw_engine.py.

One ``AxiRam`` on ``m_axi_mem`` holds both regions (random bytes), with pauses on every channel
and a random latency. Each engine gets the slot-store bench's random commands
(``sim/tb_slot_store.py``: runs of rows with repeats, random ``cmd`` valid and ``rsp`` ready),
both at once, and each response is checked against its own reference in order (the sums:
``SlotStoreModel``; the records: ``RecordModel``). Every burst on ``m_axi_mem`` carries ID 0 or
1 and stays in that engine's region, of whole rows; ``error``, ``dropped`` and both
``mem_error`` stay 0. Parameters (tb_params): data_width, address_width, sums, records (each
engine's parameters), seed, commands, p_cmd, p_rsp, p_axi, latency_range.
"""

from __future__ import annotations

import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from wanreduce.sim.axi_memory import attach_ram, random_axi_pauses, vary_latency
from wanreduce.sim.record_model import RecordModel
from wanreduce.sim.simulator import tb_params
from wanreduce.sim.slot_store_model import SlotStoreModel
from wanreduce.sim.tb_slot_store import CLOCK_NS, Bench, run_random_together


async def bursts_by_id(dut, benches: dict[int, Bench]) -> None:
    """Each AR / AW burst on ``m_axi_mem`` to the bench of its ID (checked there at the end)."""
    while True:
        await RisingEdge(dut.clk)
        await ReadOnly()
        for ch in ("aw", "ar"):
            if int(getattr(dut, f"m_axi_mem_{ch}valid").value) and int(getattr(dut, f"m_axi_mem_{ch}ready").value):
                axi_id = int(getattr(dut, f"m_axi_mem_{ch}id").value)
                assert axi_id in benches, f"{ch} with ID {axi_id}"
                benches[axi_id].bursts.append((ch, int(getattr(dut, f"m_axi_mem_{ch}addr").value),
                                               int(getattr(dut, f"m_axi_mem_{ch}len").value) + 1))


@cocotb.test()
async def random_commands_both(dut):
    """Both engines at once on one memory: every response as its reference, every burst its
    engine's."""
    p = tb_params()
    rng = random.Random(p.get("seed", 1))
    w = p["data_width"]
    sums = Bench(dut, {"data_width": w, "seed": rng.random(), **p["sums"]})
    recs = Bench(dut, {"data_width": w, "seed": rng.random(), **p["records"], "model": "record",
                       "axi_id": 1}, prefix="rec_")
    cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
    dut.rst.value = 1
    for pre in ("", "rec_"):
        getattr(dut, f"{pre}cmd__valid").value = 0
        getattr(dut, f"{pre}rsp__ready").value = 0
    size = max(b.base + b.rows * b.stride for b in (sums, recs))
    ram = attach_ram(dut, size)
    content = rng.randbytes(size)
    ram.write(0, content)

    def initial_of(b: Bench):
        return lambda row: int.from_bytes(content[b.base + row * b.row_bytes:b.base + (row + 1) * b.row_bytes], "little")

    models = (SlotStoreModel(sums.width, initial_of(sums)), RecordModel(recs.width, initial_of(recs)))
    random_axi_pauses(ram, rng, p.get("p_axi", 0.3))
    lo, hi = p.get("latency_range", (20, 200))
    vary_latency(dut, rng, lo, hi)
    cocotb.start_soon(bursts_by_id(dut, {0: sums, 1: recs}))
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    await RisingEdge(dut.clk)
    await run_random_together((sums, recs), models, p)
    await ClockCycles(dut.clk, 2)
    for b in (sums, recs):
        b.check_bursts()
        assert any(beats > 1 for _, _, beats in b.bursts), f"{b.prefix or 'sums'}: no burst of more than one beat"
    assert not int(dut.mem_error.value) and not int(dut.rec_mem_error.value), "mem_error set"
    assert not int(dut.error.value) and not int(dut.dropped.value), "arbiter error"
