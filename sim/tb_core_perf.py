"""cocotb performance bench of ``wanreduce_core`` (driven by ``bench/bench_core.py``).

Throughput: every port (network ports and the host port) sends back-to-back contributions with
no idle cycle, the egress sink is always ready; the bench counts transfers on the reducer's input
(``reducer.s_msg``) from its first to its last beat: beats per cycle through the reduction
pipeline. Latency: with all other contributions of a chunk already in, the cycles from the last
beat of the completing contribution entering the core (its ``tlast`` handshake on the AXI port)
to the first beat of its result leaving on ``m_axis_host``. Figures go to ``params["out"]``.

A DUT with its slots in DRAM (``hdl/core_dram_harness.py``: ``m_axi_mem_*`` and ``latency``)
gets an ``AxiRam`` 20..200 cycles away: ``latency`` (fixed for the run, on R and B) and
``bandwidth`` (the share of cycles R and W may move, random pauses in runs of 1..8: random
``ready`` backpressure on W, gaps in R). Throughput then also reports the steady-state rate
(middle half of the transfers), the cycles ``reducer.s_msg`` was valid but not ready (stalls)
and the rows read and written, and checks every result's payload against the sum of its
contributions (``min_rate``: the steady-state rate it must reach). ``spread``: each port sends
the chunks in its own rotated order, so a chunk's contributions arrive thousands of cycles
apart and every ADD reads its rows from memory (by default they arrive together and forward
inside the store).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from wanreduce import regs, wire
from wanreduce.hdl.layouts import header_beats, payload_beats
from wanreduce.sim import frames
from wanreduce.sim.axi_memory import MemoryFaults, attach_core_ram, steady_rate, throttle_data
from wanreduce.sim.simulator import tb_params


def streams(dut, p: dict) -> tuple[list[AxiStreamSource], AxiStreamSink]:
    """The core's ingress sources (network ports, then the host port) and its egress sink."""
    names = [f"s_axis_net{i}" for i in range(p["ports"])] + ["s_axis_host"]
    sources = [AxiStreamSource(AxiStreamBus.from_prefix(dut, n, bus_separator="__"), dut.clk, dut.rst) for n in names]
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_host", bus_separator="__"), dut.clk, dut.rst)
    return sources, sink


async def setup(dut, p):
    cocotb.start_soon(Clock(dut.clk, 4, unit="ns").start())
    dut.rst.value = 1
    sources, sink = streams(dut, p)
    mem = attach_memory(dut, p)
    await ClockCycles(dut.clk, 5)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)
    return sources, sink, mem


def attach_memory(dut, p) -> MemoryFaults | None:
    """Slots in DRAM: the ``AxiRam``, its ``latency`` and ``bandwidth``; counts its row accesses."""
    if not hasattr(dut, "m_axi_mem_awaddr"):
        return None
    rng = random.Random(p.get("seed", 1))
    ram = attach_core_ram(dut, p, rng)
    dut.latency.value = p.get("latency", 20)
    throttle_data(ram, rng, p.get("bandwidth", 1.0))
    return MemoryFaults(ram)


async def configure(sources, sink, p, senders: int) -> None:
    log2s = p["slots"].bit_length() - 1
    ops = [(True, regs.group(0), (1 << senders) - 1),
           (True, regs.job_cfg(0), regs.pack_job_cfg(enabled=True, log2_window=log2s, base=0)),
           (True, regs.CTRL, regs.CTRL_RELEASE_ON_COMPLETION)]
    await sources[-1].send(AxiStreamFrame(frames.control(ops)))
    f = await sink.recv()
    assert wire.AggHeader.unpack(bytes(f.tdata)[wire.AGG_OFFSET:]).msg_type == wire.MsgType.CONTROL_REPLY


@cocotb.test()
async def throughput(dut):
    p = tb_params()
    sources, sink, mem = await setup(dut, p)
    rows = None if mem is None else (lambda: (mem.read_beats, mem.write_beats))
    reducer = (dut.inner if mem is not None else dut).reducer  # the DRAM core sits in its harness
    out = await run_throughput(dut, p, sources, sink, reducer, rows)
    with open(p["out"], "w") as fh:
        json.dump(out, fh)
    assert out["steady_beats_per_cycle"] >= p.get("min_rate", 0.0), \
        f"{out['steady_beats_per_cycle']:.3f} beats/cycle < {p.get('min_rate')}"


async def run_throughput(dut, p: dict, sources: list[AxiStreamSource], sink: AxiStreamSink, reducer,
                         rows: Callable[[], tuple[int, int]] | None = None) -> dict:
    """The throughput run on a clocked core out of reset (``reducer``: its reducer, where the
    beats are counted); ``rows()``: the memory's (row reads, row writes) so far, if the slots
    are in DRAM (the run waits for the last writes, the figures include them). Every result
    checked against its sum; returns the figures."""
    n_ports = len(sources)
    await configure(sources, sink, p, n_ports)
    count, chunks = p["count"], p["chunks"]
    rng = np.random.default_rng(0)
    stamps: list[int] = []  # cycle of every payload beat into the reducer
    stalls: list[int] = []  # cycles the reducer's input was offered a beat and did not take it
    done = False

    async def monitor():
        cycle = 0
        while not done:
            await RisingEdge(dut.clk)
            await ReadOnly()
            cycle += 1
            if int(reducer.s_msg__valid.value):
                (stamps if int(reducer.s_msg__ready.value) else stalls).append(cycle)
            if probes is not None and stamps:
                probes.sample(bool(int(reducer.s_msg__valid.value)) and not int(reducer.s_msg__ready.value))

    probes = Probes(dut, p["probes"]) if p.get("probes") else None
    sums = np.zeros((chunks, count), np.int64)
    # spread: port s sends the chunks in an order rotated by s x chunks / ports, so a chunk's
    # contributions arrive far apart (as over a WAN) and each finds its rows back in memory
    skew = chunks // n_ports if p.get("spread") else 0
    for i in range(chunks):
        for port in range(n_ports):  # sender s on port s: one contribution per port per chunk
            c = (i + port * skew) % chunks
            payload = rng.integers(-1000, 1000, count).astype(np.int32)
            sums[c] += payload
            data = frames.contribution(sender=port, chunk=c, payload=payload)
            sources[port].send_nowait(AxiStreamFrame(data))
    cocotb.start_soon(monitor())
    results: list[bytes] = []
    for _ in range(200_000):
        while not sink.empty():
            results.append(bytes(sink.recv_nowait().tdata))
        if len(results) >= chunks:
            break
        await ClockCycles(dut.clk, 10)
    done = True
    expected = chunks * n_ports * payload_beats(count, p["width"])
    for _ in range(1000):  # results leave before their rows' writes end: let the writes drain
        if rows is None or rows()[1] >= expected:
            break
        await ClockCycles(dut.clk, 10)
    assert len(stamps) == expected, f"{len(stamps)} payload beats through the reducer, expected {expected}"
    assert len(results) == chunks, f"{len(results)} results, expected {chunks}"
    for data in results:  # |sums| <= 1000 * ports: no saturation, the result is the plain sum
        chunk = wire.AggHeader.unpack(data[wire.AGG_OFFSET:]).chunk
        got = np.frombuffer(data[wire.PAYLOAD_OFFSET:wire.PAYLOAD_OFFSET + 4 * count], "<i4")
        assert np.array_equal(got, sums[chunk]), f"chunk {chunk}: wrong sum"
    first, last = stamps[0], stamps[-1]
    out = {"beats": len(stamps), "cycles": last - first + 1, "beats_per_cycle": len(stamps) / (last - first + 1),
           "steady_beats_per_cycle": steady_rate(stamps), "stall_cycles": sum(first <= c <= last for c in stalls),
           "results_checked": len(results)}
    if rows is not None:
        out["row_reads"], out["row_writes"] = rows()
    if probes is not None:
        out["probes"] = probes.figures()
    return out


class Probes:
    """Where the cycles go (``p["probes"]``: name -> a signal's dotted path from the top): from
    the first beat into the reducer to the last result, each 1-bit probe's high cycles and, on
    the stalled cycles (the reducer's input offered a beat and not taking it), how often each
    combination of them was seen; a wider signal (a level, a count) gets its mean and maximum."""

    def __init__(self, dut, paths: dict[str, str]) -> None:
        self.handles = {}
        for name, path in paths.items():
            h = dut
            for part in path.split("."):
                h = getattr(h, part)
            self.handles[name] = h
        self.cycles = self.stalled = 0
        self.high: Counter = Counter()
        self.combos: Counter = Counter()
        self.sums: Counter = Counter()
        self.peak: dict[str, int] = {}

    def sample(self, stalled: bool) -> None:
        """One cycle (in ReadOnly)."""
        self.cycles += 1
        self.stalled += stalled
        bits = []
        for name, h in self.handles.items():
            v = int(h.value)
            if len(h) == 1:
                self.high[name] += v
                if v:
                    bits.append(name)
            else:
                self.sums[name] += v
                self.peak[name] = max(self.peak.get(name, 0), v)
        if stalled:
            self.combos[" ".join(bits)] += 1

    def figures(self) -> dict:
        """The counts, JSON-ready."""
        return {"cycles": self.cycles, "stalled": self.stalled, "high": dict(self.high),
                "mean": {k: v / self.cycles for k, v in self.sums.items()}, "peak": self.peak,
                "stall_combos": self.combos.most_common(15)}


@cocotb.test()
async def latency(dut):
    p = tb_params()
    sources, sink, _ = await setup(dut, p)
    await configure(sources, sink, p, 2)
    count = p["count"]
    w = p["width"]
    lat = []
    for c in range(4):
        await sources[0].send(AxiStreamFrame(frames.contribution(sender=0, chunk=c, payload=np.ones(count))))
        await sources[0].wait()
        await ClockCycles(dut.clk, 50 + 2 * payload_beats(count, w))
        src = sources[1]
        await src.send(AxiStreamFrame(frames.contribution(sender=1, chunk=c, payload=np.ones(count))))
        t_in = None
        cycle = 0
        while True:
            await RisingEdge(dut.clk)
            await ReadOnly()
            cycle += 1
            if t_in is None and int(src.bus.tvalid.value) and int(src.bus.tready.value) and int(src.bus.tlast.value):
                t_in = cycle
            if t_in is not None and int(dut.m_axis_host__tvalid.value):
                lat.append(cycle - t_in)
                break
            assert cycle < 10_000, "no result"
        await sink.recv()
    out = {"latency_cycles": lat, "payload_beats": payload_beats(count, w), "header_beats": header_beats(w)}
    with open(p["out"], "w") as fh:
        json.dump(out, fh)
