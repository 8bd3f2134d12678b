"""cocotb system bench of ``wanreduce_core``: every port driven by cocotbext-axi, checked
against the golden model (``sim/core_scenario.py``): every result frame byte-exact, every
input frame accounted for in the status counters read back over CONTROL messages.

Parameters (``tb_params()``): the core's (ports, width, slots, elements, groups, jobs) plus
``senders`` and ``seed``. Sources idle randomly and the egress sink applies random
backpressure.
"""

from __future__ import annotations

import random
from collections import defaultdict

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from wanreduce import regs, wire
from wanreduce.model import Outcome
from wanreduce.sim import frames
from wanreduce.sim.core_scenario import build, expected_counters, result_frame
from wanreduce.sim.simulator import tb_params

CORE_KEYS = ("ports", "width", "slots", "elements", "groups", "jobs")


def pauses(rng: random.Random, p_pause: float):
    while True:
        yield rng.random() < p_pause


class CoreBench:
    def __init__(self, dut, params: dict) -> None:
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

    async def wait_for(self, cond, what: str, max_cycles: int = 200_000) -> None:
        for _ in range(max_cycles // 20):
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


@cocotb.test()
async def core_system(dut):
    """The whole scenario: results byte-exact, order per job in in-order mode, counters exact."""
    p = tb_params()
    cocotb.start_soon(Clock(dut.clk, 4, unit="ns").start())
    tb = CoreBench(dut, p)
    await tb.reset()
    cocotb.start_soon(tb.consume())
    sc = build(**{k: p[k] for k in CORE_KEYS if k != "width"}, senders=p["senders"], seed=p.get("seed", 1))

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
