"""cocotb system bench of ``wanreduce_core``: every port driven by cocotbext-axi, checked
against the golden model (``sim/core_scenario.py``): every result frame byte-exact, every
input frame accounted for in the status counters read back over CONTROL messages.

Parameters (``tb_params()``): the core's (ports, width, slots, elements, groups, jobs) plus
``senders`` and ``seed``; optionally ``SCENARIO_KEYS`` (the jobs' regions and the probes, for
large S) and ``wait_cycles`` (how long a wait for results or a reply may take: the record path
frees every region's records first, 2^15 of them at S 32 768). Sources idle randomly and the
egress sink applies random backpressure.

A DUT with slots in DRAM (``hdl/core_dram_harness.py``: ``m_axi_mem_*`` and a ``latency``
input) gets an ``AxiRam`` filled with random bytes (a chunk's first contribution must overwrite
whatever its rows held), random pauses on all five AXI channels (``p_axi``, default 0.3) and a
memory latency re-drawn from ``latency_range`` (default 20..200 cycles) every 300 cycles; the
same scenarios must give the same results (with ``slot_memory`` ``records`` the RAM holds the
records too, as random bytes: the record path frees them). ``mem_error_withholds_results`` (DRAM
only) makes the RAM answer SLVERR (a records core: on the sums' reads) and checks
STATUS.MEM_ERROR, RESULTS_WITHHELD and that no result leaves; ``late_row_read_error_withholds_its_result``
(records) fails only the last row's read of a multi-row result, after its first rows were read.
"""

from __future__ import annotations

import random
from collections import defaultdict

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from wanreduce import regs, wire
from wanreduce.hdl.layouts import payload_beats
from wanreduce.hdl.record_reducer import record_memory
from wanreduce.model import AggregatorModel, Outcome, PortConfig, parse_frame
from wanreduce.sim import frames
from wanreduce.sim.axi_memory import (
    MemoryFaults,
    attach_core_ram,
    random_axi_pauses,
    sums_row_address,
    vary_latency,
)
from wanreduce.sim.core_scenario import (
    RESULT_IP,
    RESULT_PORT,
    SITE_ID,
    Scenario,
    build,
    expected_counters,
    result_frame,
)
from wanreduce.sim.simulator import tb_params

CORE_KEYS = ("ports", "width", "slots", "elements", "groups", "jobs")
SCENARIO_KEYS = ("bases", "log2_window", "probe_span")  # optional: ``core_scenario.build``'s regions, probes


def pauses(rng: random.Random, p_pause: float):
    while True:
        yield rng.random() < p_pause


class CoreBench:
    """The core's streams driven and received; ``ram``: a DUT with ``m_axi_mem_*`` ports gets
    the ``AxiRam`` (False: its memory is its own, e.g. LiteDRAM's model behind the core)."""

    def __init__(self, dut, params: dict, *, ram: bool = True) -> None:
        self.dut, self.p = dut, params
        self.rng = random.Random(params.get("seed", 1))
        n_net = params["ports"]
        names = [f"s_axis_net{i}" for i in range(n_net)] + ["s_axis_host"]
        self.sources = [AxiStreamSource(AxiStreamBus.from_prefix(dut, n, bus_separator="__"), dut.clk, dut.rst)
                        for n in names]
        self.sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_host", bus_separator="__"), dut.clk, dut.rst)
        idle = params.get("idle", 0.2)
        for s in self.sources:
            s.set_pause_generator(pauses(random.Random(self.rng.random()), idle))
        self.sink.set_pause_generator(pauses(random.Random(self.rng.random()), params.get("backpressure", 0.3)))
        self.results: list[bytes] = []
        self.replies: list[list[int]] = []
        self.control_frames = 0
        self.cycles = 0
        self.wait_cycles = params.get("wait_cycles", 200_000)
        self.ram = self.faults = None
        if ram and hasattr(dut, "m_axi_mem_awaddr"):  # slots in DRAM: the memory, its latency, pauses
            self.ram = attach_core_ram(dut, params, self.rng)
            self.faults = MemoryFaults(self.ram)
            random_axi_pauses(self.ram, self.rng, params.get("p_axi", 0.3))
            vary_latency(dut, self.rng, *params.get("latency_range", (20, 200)))

    async def reset(self) -> None:
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 5)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 2)

    async def consume(self) -> None:
        while True:
            f = await self.sink.recv()
            data = bytes(f.tdata)
            assert not f.tuser or not any(f.tuser if isinstance(f.tuser, list) else [f.tuser])
            agg = wire.AggHeader.unpack(data[wire.AGG_OFFSET:])
            if agg.msg_type == wire.MsgType.CONTROL_REPLY:
                self.replies.append(wire.reply_values(data[wire.HEADER_BYTES:]))
            else:
                assert agg.msg_type == wire.MsgType.RESULT, f"unexpected message type {agg.msg_type}"
                self.results.append(data)

    async def wait_for(self, cond, what: str) -> None:
        for _ in range(self.wait_cycles // 20):
            if cond():
                return
            await ClockCycles(self.dut.clk, 20)
        raise AssertionError(f"timed out waiting for {what}")

    async def control(self, ops: list[tuple[bool, int, int]]) -> list[int]:
        """Run register operations (split into messages of at most E/2 operations)."""
        per_msg = max(1, self.p["elements"] // 2)
        values: list[int] = []
        for i in range(0, len(ops), per_msg):
            n = len(self.replies)
            await self.sources[-1].send(AxiStreamFrame(frames.control(ops[i : i + per_msg])))
            self.control_frames += 1
            await self.wait_for(lambda n=n: len(self.replies) > n, "a control reply")
            values += self.replies[n]
        return values

    async def read(self, addrs: list[int]) -> dict[int, int]:
        return dict(zip(addrs, await self.control([(False, a, 0) for a in addrs]), strict=True))


async def check_heads_and_probes(tb: CoreBench, ph) -> None:
    """JOBj_HEAD and JOBj_PROBE_BITMAP (of the chunks around each head) as the model's once
    phase ``ph`` has drained."""
    heads = await tb.read([regs.job_head(j) for j in range(len(ph.heads))])
    assert list(heads.values()) == ph.heads, f"phase {ph.name}: heads {list(heads.values())}, expected {ph.heads}"
    keys = list(ph.probes)
    got = (await tb.control([op for j, c in keys for op in ((True, regs.job_probe(j), c),
                                                             (False, regs.job_probe_bitmap(j), 0))]))[1::2]
    bad = {k: (g, ph.probes[k]) for k, g in zip(keys, got, strict=True) if g != ph.probes[k]}
    assert not bad, f"phase {ph.name}: probe bitmaps (got, expected) {bad}"


async def run_scenario(tb: CoreBench, p: dict) -> Scenario:
    """``core_scenario.build``'s scenario through the core of ``tb`` (clocked, out of reset):
    every phase's result frames byte-exact (in order per job in in-order mode), each job's head
    and the probe's answers around it as the model's, then every counter as the golden model's
    and every input frame accounted for. Whatever the core's
    slots are attached to (on chip, an ``AxiRam``, LiteDRAM's model), the same checks."""
    dut = tb.dut
    cocotb.start_soon(tb.consume())
    sc = build(**{k: p[k] for k in CORE_KEYS if k != "width"}, **{k: p[k] for k in SCENARIO_KEYS if k in p},
               senders=p["senders"], seed=p.get("seed", 1))

    ident = await tb.read([regs.ID, regs.PARAMS0, regs.PARAMS1])
    assert ident[regs.ID] == regs.CORE_ID
    assert ident[regs.PARAMS1] & 0xFFFF == p["elements"]

    outcome_addrs = [regs.outcome_counter(o) for o in Outcome]
    for ph in sc.phases:
        if ph.control:
            await tb.control(ph.control)
        before = len(tb.results)
        for port, fl in enumerate(ph.frames):
            for f in fl:
                await tb.sources[port].send(AxiStreamFrame(f.data, tuser=f.tuser))
        for s in tb.sources:
            await s.wait()
        await tb.wait_for(lambda ph=ph, before=before: len(tb.results) >= before + len(ph.results),
                          f"{len(ph.results)} results of phase {ph.name}")
        # drain barrier: every contribution of the phase has an outcome
        for _ in range(200):
            got = await tb.read(outcome_addrs)
            if sum(got.values()) >= ph.outcomes_after:
                break
            await ClockCycles(dut.clk, 50)
        assert sum(got.values()) == ph.outcomes_after, f"phase {ph.name}: outcomes {got}"
        await ClockCycles(dut.clk, 100)
        await check_heads_and_probes(tb, ph)
        got_frames = tb.results[before:]
        want = [result_frame(r) for r in ph.results]
        assert len(got_frames) == len(want), f"phase {ph.name}: {len(got_frames)} results, expected {len(want)}"
        if ph.ordered:
            by_job_got, by_job_want = defaultdict(list), defaultdict(list)
            for f in got_frames:
                by_job_got[wire.AggHeader.unpack(f[wire.AGG_OFFSET:]).job_id].append(f)
            for r, f in zip(ph.results, want, strict=True):
                by_job_want[r.job_id].append(f)
            for job in by_job_want:
                assert by_job_got[job] == by_job_want[job], f"phase {ph.name}: job {job} results differ"
        else:
            assert sorted(got_frames) == sorted(want), f"phase {ph.name}: results differ"
        dut._log.info("phase %s: %d frames in, %d results, ok", ph.name,
                      sum(len(f) for f in ph.frames), len(ph.results))

    assert any(v for ph in sc.phases for v in ph.probes.values()), "no chunk held at any phase's end"
    exp = expected_counters(sc)
    host_in = regs.port_frames_in(sc.ports)
    got = await tb.read(sorted(a for a in exp if a != host_in))
    # The host port also received every control frame: read its count in a message of its
    # own, which then includes every control frame sent so far (this one too).
    got.update(await tb.read([host_in]))
    exp[host_in] += tb.control_frames
    mismatches = {hex(a): (got[a], exp[a]) for a in exp if got[a] != exp[a]}
    assert not mismatches, f"counters (got, expected): {mismatches}"
    total_in = sum(exp[regs.port_frames_in(i)] for i in range(sc.all_ports)) - tb.control_frames
    accounted = sum(v for a, v in exp.items() if a != regs.RESULTS_OUT and a not in
                    [regs.port_frames_in(i) for i in range(sc.all_ports)])
    assert total_in == accounted, "every input frame is either dropped with a reason or has an outcome"
    dut._log.info("all %d input frames accounted for; %d results", total_in, len(tb.results))
    return sc


async def check_record_counters(tb: CoreBench, sc: Scenario) -> dict[str, int]:
    """A records core after ``sc``: the record path's counters show nothing inconsistent
    (mismatches, orphans, IDs the arbiter dropped all 0) and every configured region freed at
    least once (after its JOBj_CFG write); returns them."""
    got = await tb.read([regs.record_counter(n) for n in regs.RECORD_COUNTERS])
    c = dict(zip(regs.RECORD_COUNTERS, got.values(), strict=True))
    assert c["mismatches"] == c["orphans"] == c["arb_dropped"] == 0, c
    windows = sum(j.window for j in sc.model.job_table if j.enabled)
    assert c["records_freed"] >= windows, c
    return c


@cocotb.test()
async def core_system(dut):
    """The whole scenario: results byte-exact, order per job in in-order mode, counters exact."""
    p = tb_params()
    cocotb.start_soon(Clock(dut.clk, 4, unit="ns").start())
    tb = CoreBench(dut, p)
    await tb.reset()
    sc = await run_scenario(tb, p)
    if p.get("slot_memory") == "records":
        await check_record_counters(tb, sc)
    if tb.ram is not None:  # slots in DRAM: no error response on the way, the memory used
        assert (await tb.read([regs.STATUS]))[regs.STATUS] == 0, "STATUS.MEM_ERROR or RECORD_ERROR set"
        f = tb.faults
        dut._log.info("DRAM: %d row reads, %d row writes", f.read_beats, f.write_beats)
        assert f.read_beats > 0 and f.write_beats > 0, "the sums never went through the memory"


async def two_member_job(tb: CoreBench, p: dict):
    """Reset the core of ``tb``, configure group 0 = senders {0, 1} and job 0 (window 4, base 0)
    in it and in a golden model; returns ``contribute(sender, chunk)``: a random contribution
    sent (sender 0 on the host port, 1 on network port 0) and given to the model, which returns
    the results it releases."""
    await tb.reset()
    cocotb.start_soon(tb.consume())
    model = AggregatorModel(slots=p["slots"], elements=p["elements"], groups=p["groups"], jobs=p["jobs"])
    cfg = PortConfig(local_mac=frames.CORE_MAC, local_ip=frames.CORE_IP, max_elements=p["elements"],
                     elements=p["elements"])
    model.set_group(0, 0b11)
    model.set_job(0, enabled=True, base=0, log2_window=2)
    await tb.control([(True, regs.SITE_ID, SITE_ID), (True, regs.RESULT_IP, RESULT_IP),
                      (True, regs.RESULT_UDP_PORT, RESULT_PORT), (True, regs.group(0), 0b11),
                      (True, regs.job_cfg(0), regs.pack_job_cfg(enabled=True, log2_window=2, base=0))])
    rng = tb.rng

    async def contribute(sender: int, chunk: int) -> list:
        payload = np.array([rng.randint(-1000, 1000) for _ in range(p["elements"])], np.int32)
        data = frames.contribution(sender=sender, chunk=chunk, payload=payload, session=0xC500)
        await tb.sources[-1 if sender == 0 else 0].send(AxiStreamFrame(data))
        _, res = model.contribute(parse_frame(data, cfg))
        return res

    return contribute


@cocotb.test()
async def mem_error_withholds_results(dut):
    """DRAM slots: a chunk released before any error is sent exactly as the model says; then
    the RAM answers SLVERR to the read of a chunk's second contribution (its first was written
    long before, so nothing is forwarded in the store): STATUS.MEM_ERROR becomes 1 and stays,
    that result and every later one are withheld (RESULTS_WITHHELD counts them, RESULTS_OUT
    does not) and no result frame leaves."""
    p = tb_params()
    cocotb.start_soon(Clock(dut.clk, 4, unit="ns").start())
    tb = CoreBench(dut, p)
    assert tb.faults is not None, "the DUT has no m_axi_mem port"
    if p.get("slot_memory") == "records":  # the sums' reads fail, not the records' (their decisions stay right)
        tb.faults.read_range = (0, record_memory(p["width"], slots=p["slots"], elements=p["elements"])[0])
    contribute = await two_member_job(tb, p)

    async def idle(cycles: int) -> None:  # long enough for the store to free every entry
        await ClockCycles(dut.clk, cycles)

    status = [regs.STATUS, regs.RESULTS_WITHHELD, regs.RESULTS_OUT, regs.outcome_counter(Outcome.AGGREGATED)]
    want = await contribute(1, 0) + await contribute(0, 0)
    await tb.wait_for(lambda: len(tb.results) == 1, "chunk 0's result")
    assert tb.results == [result_frame(r) for r in want]
    got = await tb.read(status)
    assert got == {regs.STATUS: 0, regs.RESULTS_WITHHELD: 0, regs.RESULTS_OUT: 1,
                   regs.outcome_counter(Outcome.AGGREGATED): 2}, got

    assert await contribute(1, 1) == []
    await idle(2000)
    tb.faults.reads = True
    assert len(await contribute(0, 1)) == 1  # the model releases chunk 1; the core must not
    for _ in range(200):
        got = await tb.read(status)
        if got[regs.outcome_counter(Outcome.AGGREGATED)] == 4 and got[regs.RESULTS_WITHHELD] == 1:
            break
        await idle(100)
    await idle(2000)
    assert tb.faults.failed > 0, "no read reached the memory while it failed"
    got = await tb.read(status)
    assert got == {regs.STATUS: regs.STATUS_MEM_ERROR, regs.RESULTS_WITHHELD: 1, regs.RESULTS_OUT: 1,
                   regs.outcome_counter(Outcome.AGGREGATED): 4}, got
    assert len(tb.results) == 1, "a result computed from a failed read was sent"

    # sticky: the memory works again, the flag stays and results stay withheld
    tb.faults.reads = False
    await contribute(1, 2)
    await contribute(0, 2)
    await idle(3000)
    got = await tb.read(status)
    assert got[regs.STATUS] == regs.STATUS_MEM_ERROR and got[regs.RESULTS_WITHHELD] == 2, got
    assert len(tb.results) == 1


@cocotb.test()
async def record_read_error_is_never_silent(dut):
    """A records core (``slot_memory`` ``records``): the RAM answers SLVERR to the records' reads
    only, from a chunk's second contribution on (its decision is then made on whatever the failed
    read returned): STATUS.MEM_ERROR becomes 1 and stays, no result frame leaves after it (the
    chunk the model releases included; RESULTS_OUT stays 1), the memory answering again or not."""
    p = tb_params()
    cocotb.start_soon(Clock(dut.clk, 4, unit="ns").start())
    tb = CoreBench(dut, p)
    assert tb.faults is not None, "the DUT has no m_axi_mem port"
    base, end = record_memory(p["width"], slots=p["slots"], elements=p["elements"])
    tb.faults.read_range = (base, end)
    contribute = await two_member_job(tb, p)

    status = [regs.STATUS, regs.RESULTS_OUT]
    want = await contribute(1, 0) + await contribute(0, 0)
    await tb.wait_for(lambda: len(tb.results) == 1, "chunk 0's result")
    assert tb.results == [result_frame(r) for r in want]
    assert await tb.read(status) == {regs.STATUS: 0, regs.RESULTS_OUT: 1}
    assert await contribute(1, 1) == []
    await ClockCycles(dut.clk, 2000)
    tb.faults.reads = True
    assert len(await contribute(0, 1)) == 1  # the model releases chunk 1
    await tb.wait_for(lambda: tb.faults.failed > 0, "a record read while the records fail")
    await ClockCycles(dut.clk, 3000)
    assert await tb.read(status) == {regs.STATUS: regs.STATUS_MEM_ERROR, regs.RESULTS_OUT: 1}
    tb.faults.reads = False  # sticky: the records answer again, nothing leaves
    for chunk in (1, 2):
        await contribute(1, chunk)
        await contribute(0, chunk)
    await ClockCycles(dut.clk, 3000)
    assert await tb.read(status) == {regs.STATUS: regs.STATUS_MEM_ERROR, regs.RESULTS_OUT: 1}
    assert len(tb.results) == 1, "a result left after a record read failed"


@cocotb.test()
async def late_row_read_error_withholds_its_result(dut):
    """A records core: a multi-row result whose *last* row's sums READ answers SLVERR, its first
    rows read fine (a resend of a released chunk: the emitter reads every row from memory, the
    chunk's writes long acknowledged, so nothing is forwarded and no other read touches the
    row). Its first row reaches the result path before the error: only a store-and-forward
    result path can still withhold it. STATUS.MEM_ERROR becomes 1, RESULTS_WITHHELD counts the
    result, RESULTS_OUT does not, no frame leaves, nor any later one."""
    p = tb_params()
    cocotb.start_soon(Clock(dut.clk, 4, unit="ns").start())
    tb = CoreBench(dut, p)
    assert tb.faults is not None and p.get("slot_memory") == "records", "a records core is needed"
    beats = payload_beats(p["elements"], p["width"])
    assert beats >= 2, f"a multi-row result is needed, got {beats} row(s)"
    contribute = await two_member_job(tb, p)

    status = [regs.STATUS, regs.RESULTS_WITHHELD, regs.RESULTS_OUT, regs.outcome_counter(Outcome.RESULT_RESENT)]
    want = await contribute(1, 0) + await contribute(0, 0)
    await tb.wait_for(lambda: len(tb.results) == 1, "chunk 0's result")
    assert tb.results == [result_frame(r) for r in want]
    await ClockCycles(dut.clk, 2000)  # every write acknowledged: the resend reads its rows from memory
    last = sums_row_address(p, slot=0, row=beats - 1)  # chunk 0 of job 0 (base 0): slot 0
    tb.faults.read_range = (last, last + p["width"] // 8)
    tb.faults.reads = True
    resent = await contribute(0, 0)
    assert len(resent) == 1 and resent[0].resent  # the model sends it again; the core must not
    await tb.wait_for(lambda: tb.faults.failed > 0, "the resend's read of its last row")
    await ClockCycles(dut.clk, 3000)
    got = await tb.read(status)
    assert tb.faults.failed == 1, f"{tb.faults.failed} failed reads: only the resend's last row must fail"
    assert got == {regs.STATUS: regs.STATUS_MEM_ERROR, regs.RESULTS_WITHHELD: 1, regs.RESULTS_OUT: 1,
                   regs.outcome_counter(Outcome.RESULT_RESENT): 1}, got
    assert len(tb.results) == 1, f"a result whose row {beats - 1} read failed left"

    tb.faults.reads = False  # sticky: the memory answers again, later results are withheld too
    assert await contribute(1, 1) == []
    assert len(await contribute(0, 1)) == 1
    await ClockCycles(dut.clk, 3000)
    got = await tb.read(status)
    assert got[regs.STATUS] == regs.STATUS_MEM_ERROR and got[regs.RESULTS_WITHHELD] == 2, got
    assert len(tb.results) == 1, "a result left after a memory error"
