"""cocotb bench of the AXI ID arbiter (hdl/axi_id_arbiter.py), run by tests/test_axi_id_arbiter.py.

The arbiter inside ``with_latency`` (delay lines on its ``m_axi_mem`` R and B, ``latency``
re-drawn at random), an ``AxiRam`` on ``m_axi_mem``, one cocotbext-axi ``AxiMaster`` per port
using that port's ID, and pause generators on all five channels of every master and of the RAM.
Several tasks per master write and read random byte ranges (random lengths and start bytes: bursts
of 1..many beats, some split at 4 KiB by the master) in disjoint areas, each read checked against
the model of what was written; at the end the RAM equals the model everywhere. A monitor on
``m_axi_mem`` checks every burst: its ID is a port's, and the W beats follow the AW order with
``wlast`` exactly on each burst's last beat (no W burst interleaved). ``error`` and ``dropped``
stay 0. Parameters (tb_params): ids, data_width, seed, ops, lat_lo, lat_hi, busy.
"""

from __future__ import annotations

import logging
import random
from collections import deque

import cocotb
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import ClockCycles, Combine, ReadOnly, RisingEdge, with_timeout
from cocotbext.axi import AxiBus, AxiMaster

from wanreduce.hdl.axi_id_arbiter import slave_prefix
from wanreduce.sim.axi_memory import attach_ram, pauses, random_axi_pauses, vary_latency
from wanreduce.sim.simulator import tb_params

CLOCK_NS = 4
RAM_BYTES = 1 << 16
TASKS_PER_PORT = 2
US_PER_OP = 10  # simulated time allowed per op (25 ops: ~41 us at 64 bits, busy 0.3): a lost or
# misrouted beat hangs a master, which then fails here rather than at the CPU limit


async def _monitor(dut, ids: list[int], seen: dict) -> None:
    """Every ``m_axi_mem`` handshake: IDs are the ports'; W beats frame the AW bursts in order."""
    aw: deque = deque()  # (ID, beats) of the AWs not yet paired with their W burst
    w_lens: deque = deque()  # beats of the W bursts (ended by wlast) not yet paired
    beats = 0  # W beats of the current burst so far
    while True:
        await RisingEdge(dut.clk)
        await ReadOnly()
        if dut.m_axi_mem_awvalid.value and dut.m_axi_mem_awready.value:
            awid = int(dut.m_axi_mem_awid.value)
            assert awid in ids, f"AW with ID {awid}, not a port's"
            aw.append((awid, int(dut.m_axi_mem_awlen.value) + 1))
            seen["aw"].append(awid)
        if dut.m_axi_mem_arvalid.value and dut.m_axi_mem_arready.value:
            arid = int(dut.m_axi_mem_arid.value)
            assert arid in ids, f"AR with ID {arid}, not a port's"
            seen["ar"].append(arid)
        if dut.m_axi_mem_wvalid.value and dut.m_axi_mem_wready.value:
            beats += 1
            if dut.m_axi_mem_wlast.value:
                w_lens.append(beats)
                beats = 0
        while aw and w_lens:  # W may run ahead of the memory's AW handshake: pair in order
            awid, n = aw.popleft()
            got = w_lens.popleft()
            seen["w_bursts"] += 1
            assert got == n, f"W burst of {got} beats for the {n}-beat AW (ID {awid}): wlast misplaced"


@cocotb.test()
async def random_transfers(dut):
    p = tb_params()
    ids, rng = p["ids"], random.Random(p["seed"])
    cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
    dut.rst.value = 1
    ram = attach_ram(dut, RAM_BYTES)
    masters = [AxiMaster(AxiBus.from_prefix(dut, slave_prefix(k)), dut.clk, dut.rst)
               for k in range(len(ids))]
    for mst in masters:
        for iface in (mst.write_if, mst.read_if):
            iface.log.setLevel(logging.WARNING)
        w, r = mst.write_if, mst.read_if
        for ch in (w.aw_channel, w.w_channel, w.b_channel, r.ar_channel, r.r_channel):
            ch.set_pause_generator(pauses(random.Random(rng.random()), p["busy"]))
    random_axi_pauses(ram, rng, p["busy"])
    vary_latency(dut, rng, p["lat_lo"], p["lat_hi"], period=200)
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    await RisingEdge(dut.clk)

    ref = bytearray(rng.randbytes(RAM_BYTES))
    ram.write(0, bytes(ref))
    seen = {"aw": [], "ar": [], "w_bursts": 0}
    cocotb.start_soon(_monitor(dut, ids, seen))
    tasks = len(ids) * TASKS_PER_PORT
    area = RAM_BYTES // tasks
    beat = p["data_width"] // 8
    done = {"reads": 0, "writes": 0}

    async def worker(port: int, t: int) -> None:
        r = random.Random(p["seed"] * 100 + port * 10 + t)
        lo = (port * TASKS_PER_PORT + t) * area
        mst, own = masters[port], ids[port]
        for _ in range(p["ops"]):
            n = r.choice([1, beat, 2 * beat, 32, r.randint(1, 300), r.randint(1, area // 2)])
            addr = lo + r.randrange(area - n)
            if r.random() < 0.5:
                data = r.randbytes(n)
                await mst.write(addr, data, awid=own)
                ref[addr:addr + n] = data
                done["writes"] += 1
            else:
                got = (await mst.read(addr, n, arid=own)).data
                assert bytes(got) == bytes(ref[addr:addr + n]), \
                    f"port {port} (ID {own}) read {addr:#x}+{n}: differs from what was written"
                done["reads"] += 1

    running = [cocotb.start_soon(worker(k, t)) for k in range(len(ids)) for t in range(TASKS_PER_PORT)]
    await with_timeout(Combine(*running), US_PER_OP * p["ops"], "us")
    await ClockCycles(dut.clk, 4)
    assert ram.read(0, RAM_BYTES) == bytes(ref), "RAM differs from the model"
    for k in ids:
        assert seen["aw"].count(k) and seen["ar"].count(k), f"ID {k}: no AW or no AR burst seen"
    assert seen["w_bursts"] == len(seen["aw"]), (seen["w_bursts"], len(seen["aw"]))
    assert int(dut.error.value) == 0, "error set"
    assert int(dut.dropped.value) == 0, "responses dropped"
    dut._log.info("%d writes, %d reads; %d AW, %d AR bursts on m_axi_mem; %.0f us simulated",
                  done["writes"], done["reads"], len(seen["aw"]), len(seen["ar"]),
                  get_sim_time("us"))
