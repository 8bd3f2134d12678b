"""cocotb bench of the whole core with its slots in DRAM through the board's real DRAM path
(``hdl/boards/litedram_model_core.py``: the core as the Versa builds it, the board's 64 -> 128-bit
``AxiUpsizer``, LiteDRAM's AXI frontend and controller on ``SDRAMPHYModel``), run by
tests/test_core_litedram.py. Issue 16 item 5, its last clause.

The pieces are those of the benches it composes: the two clocks at the board's frequencies,
the resets and ``init_done`` of ``sim/tb_slot_store_litedram.py`` (``start_clocks``), and two
runs. ``core_system``: the whole-core scenario of ``sim/tb_core.py`` (``CoreBench``,
``run_scenario``: drops on every port, rejects, saturation, resend, duplicates, busy / stale /
out of window, a window reset, two jobs and two groups; every result frame byte-exact against
the golden model, every head, probe answer and counter exact; with ``slot_memory`` ``records``
the record path's counters too, ``check_record_counters``). ``throughput`` (``dram`` only):
``sim/tb_core_perf.py``'s run (``run_throughput``; with ``spread`` every ADD reads its rows
from the DRAM; every result equal to its sum), with the DRAM efficiency it amounts to.
Nothing is injected: latency and backpressure on the memory are the controller's and the
DRAM's. The model's memory has no defined content, as the ``AxiRam`` benches' random fill: a
chunk's first contribution WRITEs its rows (a records core frees its regions' records first).

The core's own ``m_axi_mem`` (``dut.core``) is watched (``watch_port``): every burst INCR,
within 4 KiB, whole rows, at most the engine's ``burst_beats`` and inside its region, the engine
being the one its AXI ID names (``stores``, by ID: each engine's rows as ``slots``, ``row_bits``
0, ``row_width``, ``burst_beats``, ``base_address``: the ``Bench.check_bursts`` of
``sim/tb_slot_store.py``); at the end the converter's ``error`` must be low and each engine must
have read and written (``core_system``: STATUS (MEM_ERROR, RECORD_ERROR) and RESULTS_WITHHELD 0
too). Figures (core cycles, bursts and beats per direction, per ID with two, the latency the
core sees) to ``params["out"]``.
"""

from __future__ import annotations

import cocotb
from cocotb.triggers import ClockCycles
from cocotb.utils import get_sim_time

from wanreduce import regs
from wanreduce.hdl.boards.litedram_controller import DRAM_CONFIGS
from wanreduce.hdl.boards.versa_ecp5 import CORE_FREQ_HZ
from wanreduce.sim.simulator import tb_params
from wanreduce.sim.tb_core import CoreBench, check_record_counters, run_scenario
from wanreduce.sim.tb_core_perf import run_throughput, streams
from wanreduce.sim.tb_slot_store import Bench
from wanreduce.sim.tb_slot_store_litedram import (
    _write_out,
    dram_bytes_per_s,
    latency_summary,
    start_clocks,
    watch_port,
)


class PortWatch:
    """The core's ``m_axi_mem`` (``dut.core``) watched from now on (``watch_port``): its bursts,
    each checked by ``Bench.check_bursts`` against the region and burst size of the engine its
    AXI ID names (``p["stores"]``, by ID: the sums' store; in a records core the record engine
    too), and its latencies."""

    def __init__(self, dut, p: dict) -> None:
        self.stores = [Bench(dut, {"data_width": p["width"], "row_bits": 0, **st}) for st in p["stores"]]
        self.bursts: list[tuple[str, int, int]] = []  # (channel, address, beats), every ID
        self.ids: list[int] = []  # each burst's AXI ID
        self.read_latency: list[int] = []
        self.write_latency: list[int] = []
        cocotb.start_soon(watch_port(dut.core, dut.clk, self.bursts, self.read_latency,
                                     self.write_latency, self.ids))

    def beats(self, ch: str, axi_id: int | None = None) -> int:
        """The beats of the ``ar`` or ``aw`` bursts accepted so far (of ``axi_id``, or all)."""
        return sum(n for (c, _, n), i in zip(self.bursts, self.ids, strict=True)
                   if c == ch and axi_id in (None, i))

    def check_bursts(self) -> None:
        """Every burst to its ID's engine (an ID with none fails), each checked there."""
        for st in self.stores:
            st.bursts.clear()
        for burst, i in zip(self.bursts, self.ids, strict=True):
            assert i < len(self.stores), f"{burst[0]} burst at {burst[1]:#x} with AXI ID {i}: no engine has it"
            self.stores[i].bursts.append(burst)
        for st in self.stores:
            st.check_bursts()

    def rows(self) -> tuple[int, int]:
        """(rows read, rows written) so far: the beats of every AR burst, and of the AW bursts
        answered by a B (in AW order); a row is a beat (the core's rows are W wide). One engine
        only (the B's are not told apart by ID here)."""
        assert len(self.stores) == 1, "rows() counts the sums' store of a core with no other engine"
        aws = [n for c, _, n in self.bursts if c == "aw"]
        return self.beats("ar"), sum(aws[:len(self.write_latency)])

    def figures(self) -> dict:
        ids = range(len(self.stores))
        out = {"bursts": {ch: sum(c == ch for c, _, _ in self.bursts) for ch in ("ar", "aw")},
               "axi_beats": {ch: self.beats(ch) for ch in ("ar", "aw")},
               "read_latency": latency_summary(self.read_latency),
               "write_latency": latency_summary(self.write_latency)}
        if len(self.stores) > 1:  # per engine: ID 0 the sums, 1 the records
            out["axi_beats_by_id"] = {i: {ch: self.beats(ch, i) for ch in ("ar", "aw")} for i in ids}
        return out


async def start(dut, p: dict) -> PortWatch:
    """The board's two clocks, resets and ``init_done``; the core's AXI port watched."""
    await start_clocks(dut, DRAM_CONFIGS[p.get("board", "versa-ecp5")], prefixes=())
    return PortWatch(dut, p)


async def finish(dut, watch: PortWatch) -> None:
    """No converter error; every burst legal; each engine (the sums', the records') went
    through the memory both ways."""
    await ClockCycles(dut.clk, 2)
    assert not int(dut.upsizer_error.value), "the converter saw a burst it cannot convert"
    watch.check_bursts()
    for i in range(len(watch.stores)):  # the sums (ID 0) and, in a records core, the records (ID 1)
        assert watch.beats("ar", i) > 0 and watch.beats("aw", i) > 0, \
            f"ID {i}'s engine never went through the memory both ways: {watch.figures()}"


@cocotb.test()
async def core_system(dut):
    """``tb_core``'s whole scenario through LiteDRAM's controller: the same results and
    heads, probes and counters as the golden model (a records core: its record counters too);
    no memory, record or converter error; bursts as their engine may."""
    p = tb_params()
    tb = CoreBench(dut, p, ram=False)
    watch = await start(dut, p)
    began = get_sim_time("ns")
    sc = await run_scenario(tb, p)
    records = await check_record_counters(tb, sc) if p.get("slot_memory") == "records" else {}
    got = await tb.read([regs.STATUS, regs.RESULTS_WITHHELD])
    assert got == {regs.STATUS: 0, regs.RESULTS_WITHHELD: 0}, f"STATUS / RESULTS_WITHHELD: {got}"
    await finish(dut, watch)
    period_ns = 1e9 / CORE_FREQ_HZ  # the core clock start_clocks runs
    result = {"cycles": round((get_sim_time("ns") - began) / period_ns), "results": len(tb.results),
              **watch.figures(), **({"record_counters": records} if records else {})}
    dut._log.info("through LiteDRAM: %s", result)
    _write_out(p, result)


@cocotb.test()
async def throughput(dut):
    """``tb_core_perf``'s throughput run (back-to-back contributions on every port, each result
    checked against its sum; ``spread``: every ADD reads its rows from DRAM) through LiteDRAM's
    controller: beats per cycle into the reducer, the rows the memory moved and the DRAM
    efficiency they amount to (``tb_slot_store_litedram``'s measure)."""
    p = tb_params()
    sources, sink = streams(dut, p)
    watch = await start(dut, p)
    out = await run_throughput(dut, p, sources, sink, dut.core.reducer, watch.rows)
    await finish(dut, watch)
    cfg = DRAM_CONFIGS[p.get("board", "versa-ecp5")]
    # the DRAM's share busy with data: a row written per payload beat, read per ADD's beat
    moved = dram_bytes_per_s(out["steady_beats_per_cycle"], out["row_reads"] / out["row_writes"],
                             p["width"] // 8)
    out.update(watch.figures(), dram_efficiency=moved / cfg.peak_bytes_per_s)
    dut._log.info("through LiteDRAM: %s", out)
    _write_out(p, out)
