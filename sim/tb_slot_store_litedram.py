"""cocotb bench of the DRAM slot store through LiteDRAM's real controller on its DDR3 model
(``hdl/boards/litedram_model_store.py``: the store, the board's 64 -> 128-bit converter, the
board's LiteDRAM AXI frontend and controller on ``SDRAMPHYModel``), run by
tests/test_slot_store_litedram.py and bench/bench_slot_store_litedram.py.

Two clocks at the board's frequencies: the core's (``clk``, ``versa_ecp5.CORE_FREQ_HZ``) and the
controller's (``dram_clk``, ``DramConfig.sys_clk_hz``); ``init_done`` is raised after reset.
The model's memory has no defined content, so the bench first WRITEs every row of the store's
region (random data) and the reference (``sim/slot_store_model.py``) starts from that. The commands and the checks are those of
``sim/tb_slot_store.py`` (its ``Bench.run``: every response equal to the reference's, in order);
here nothing is injected: latency, backpressure and bandwidth are the controller's and DRAM's.
The store's own AXI port (``dut.store.m_axi_mem_*``) is watched: every burst checked (INCR,
within 4 KiB and the region, at most ``burst_beats``) and the latency it sees measured, in core
cycles: AR accepted -> that burst's first R beat; the burst's last W beat -> its B.

Tests: ``random_commands`` (random ops on clustered rows, random ``cmd`` valid / ``rsp``
ready) and ``throughput`` (the reducer's messages, ``cmd`` always valid, ``rsp`` always ready;
steady-state commands per cycle and the DRAM efficiency they amount to, to ``params["out"]``).
"""

from __future__ import annotations

import json
import statistics
from collections import deque

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from wanreduce.hdl.boards.litedram_controller import DRAM_CONFIGS
from wanreduce.hdl.boards.versa_ecp5 import CORE_FREQ_HZ
from wanreduce.hdl.slot_store_signature import Op
from wanreduce.sim.simulator import tb_params
from wanreduce.sim.slot_store_model import SlotStoreModel
from wanreduce.sim.tb_slot_store import (
    MODELS,
    Bench,
    _message_commands,
    _random_commands,
    steady_rate,
)


async def start_clocks(dut, cfg, prefixes: tuple[str, ...] = ("",), *,
                       core: tuple[str, str] = ("clk", "rst"),
                       dram: tuple[str, str] = ("dram_clk", "dram_rst")) -> None:
    """The core's and the controller's clocks (``core`` / ``dram``: clock and reset names),
    both resets, then ``init_done``; the ``cmd`` valid and ``rsp`` ready of each engine
    (``prefixes``) low meanwhile."""
    clk, rst = (getattr(dut, name) for name in core)
    dram_clk, dram_rst = (getattr(dut, name) for name in dram)
    cocotb.start_soon(Clock(clk, round(1e12 / CORE_FREQ_HZ), unit="ps").start())
    # an even period in ps (cocotb's Clock splits it in halves): 87.5 MHz -> 11 428 ps
    dram_ps = 2 * round(1e12 / cfg.sys_clk_hz / 2)
    cocotb.start_soon(Clock(dram_clk, dram_ps, unit="ps").start())
    rst.value = 1
    dram_rst.value = 1
    dut.init_done.value = 0
    for pre in prefixes:
        getattr(dut, f"{pre}cmd__valid").value = 0
        getattr(dut, f"{pre}rsp__ready").value = 0
    await ClockCycles(clk, 8)
    rst.value = 0
    dram_rst.value = 0
    await ClockCycles(dram_clk, 8)
    dut.init_done.value = 1
    await RisingEdge(clk)


async def watch_port(axi, clk, bursts: list, read_latency: list[int],
                     write_latency: list[int], ids: list[int] | None = None) -> None:
    """Record every AR/AW burst (channel, address, beats) of ``axi``'s ``m_axi_mem`` (each must
    be INCR; with ``ids`` its AXI ID there too, in the same order) and the latency of each read
    and write burst, in cycles of ``clk``: AR accepted -> that burst's first R beat; the burst's
    last W beat -> its B. Runs for ever."""
    reads: deque[int] = deque()  # AR cycles of bursts whose first R beat is still to come
    lengths: deque[int] = deque()  # beats of the bursts read (R has no rlast in the store)
    writes: deque[int] = deque()  # cycles of W last beats whose B is still to come
    left, cycle = 0, 0  # R beats still to come of the burst being read
    while True:
        await RisingEdge(clk)
        await ReadOnly()
        cycle += 1

        def go(ch: str) -> bool:
            return bool(int(getattr(axi, f"m_axi_mem_{ch}valid").value)
                        and int(getattr(axi, f"m_axi_mem_{ch}ready").value))

        for ch in ("aw", "ar"):
            if go(ch):
                bursts.append((ch, int(getattr(axi, f"m_axi_mem_{ch}addr").value),
                               int(getattr(axi, f"m_axi_mem_{ch}len").value) + 1))
                if ids is not None:
                    ids.append(int(getattr(axi, f"m_axi_mem_{ch}id").value))
                assert int(getattr(axi, f"m_axi_mem_{ch}burst").value) == 1, "not INCR"
        if go("ar"):
            reads.append(cycle)
            lengths.append(bursts[-1][2])
        if go("r"):
            if left == 0:
                read_latency.append(cycle - reads.popleft())
                left = lengths.popleft()
            left -= 1
        if go("w") and int(axi.m_axi_mem_wlast.value):
            writes.append(cycle)
        if go("b"):
            write_latency.append(cycle - writes.popleft())


def latency_summary(xs: list[int]) -> dict:
    """Count, min, median and max of latencies ``xs``."""
    return {"n": len(xs), "min": min(xs), "median": statistics.median(xs), "max": max(xs)} \
        if xs else {"n": 0}


class ModelBench(Bench):
    """Clocks, reset and ``init_done`` for the model; the store's AXI port watched."""

    def __init__(self, dut, p: dict, prefix: str = "") -> None:
        super().__init__(dut, p, prefix)
        self.cfg = DRAM_CONFIGS[p.get("board", "versa-ecp5")]
        self.read_latency: list[int] = []
        self.write_latency: list[int] = []

    async def start(self) -> SlotStoreModel:
        await start_clocks(self.dut, self.cfg)
        cocotb.start_soon(watch_port(self.dut.store, self.dut.clk, self.bursts, self.read_latency,
                                     self.write_latency))
        return await self.fill()

    async def fill(self) -> SlotStoreModel:
        """The model's memory has no defined content: WRITE every row first (random data), so
        the reference's initial rows (0) are only ever overwritten; returns the reference."""
        model = MODELS[self.p.get("model", "sums")](self.width, lambda row: 0)
        lanes = (1 << (self.width // 32)) - 1
        fill = [(int(Op.WRITE), row, self.rng.getrandbits(self.width), lanes, int(row + 1 < self.rows))
                for row in range(self.rows)]
        await self.run(fill, model, p_cmd=1.0, p_rsp=1.0)
        return model

    async def finish(self) -> dict:
        """Check the bursts and the error flags; the latencies seen (core cycles)."""
        await ClockCycles(self.dut.clk, 2)
        self.check_bursts()
        assert not int(self.dut.mem_error.value), "mem_error set (an AXI error response)"
        assert not int(self.dut.upsizer_error.value), "the converter saw a burst it cannot convert"
        return {"read_latency": latency_summary(self.read_latency),
                "write_latency": latency_summary(self.write_latency)}


def add_share(cmds: list[tuple]) -> float:
    """The share of ADDs in the middle half of ``cmds`` (the steady state's)."""
    q = len(cmds) // 4
    return sum(op == Op.ADD for op, *_ in cmds[q:-q]) / (len(cmds) - 2 * q)


def dram_bytes_per_s(rate: float, adds: float, row_bytes: int) -> float:
    """The DRAM bytes per second ``rate`` commands per core cycle move: a row written by each,
    a row read by each ADD (spread traffic: every ADD reads)."""
    return rate * (1 + adds) * row_bytes * CORE_FREQ_HZ


def _write_out(p: dict, result: dict) -> None:
    if p.get("out"):
        with open(p["out"], "w") as f:
            json.dump(result, f)


@cocotb.test()
async def random_commands(dut):
    """Random commands under random cmd/rsp handshakes: every response as the reference."""
    p = tb_params()
    b = ModelBench(dut, p)
    model = await b.start()
    cmds = _random_commands(b, p.get("commands", 500))
    await b.run(cmds, model, p_cmd=p.get("p_cmd", 0.7), p_rsp=p.get("p_rsp", 0.7))
    result = await b.finish()
    assert any(beats > 1 for _, _, beats in b.bursts), "no burst of more than one beat"
    _write_out(p, result)


@cocotb.test()
async def throughput(dut):
    """Back-to-back reducer traffic: steady-state commands per cycle, the DRAM efficiency it
    amounts to, and the latency the store sees (to params["out"])."""
    p = tb_params()
    b = ModelBench(dut, p)
    model = await b.start()
    cmds = _message_commands(b, p.get("commands", 2000))
    stamps = await b.run(cmds, model, p_cmd=1.0, p_rsp=1.0)
    rate = steady_rate(stamps)
    result = await b.finish()
    adds = add_share(cmds)
    moved = dram_bytes_per_s(rate, adds, b.row_bytes)
    result.update(rate=rate, adds=adds, cycles=stamps[-1], commands=len(cmds),
                  dram_bytes_per_s=moved, dram_efficiency=moved / b.cfg.peak_bytes_per_s,
                  **{f"mean_{ch}_burst": statistics.mean([n for c, _, n in b.bursts if c == ch] or [0])
                     for ch in ("ar", "aw")})
    _write_out(p, result)
    assert rate >= p.get("min_rate", 0.0), f"{rate:.3f} commands/cycle < {p.get('min_rate')}"
