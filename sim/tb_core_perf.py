"""cocotb performance bench of ``wanreduce_core`` (driven by ``bench/bench_core.py``).

Throughput: every port (network ports and the host port) sends back-to-back contributions with
no idle cycle, the egress sink is always ready; the bench counts transfers on the reducer's input
(``reducer.s_msg``) from its first to its last beat: beats per cycle through the reduction
pipeline. Latency: with all other contributions of a chunk already in, the cycles from the last
beat of the completing contribution entering the core (its ``tlast`` handshake on the AXI port)
to the first beat of its result leaving on ``m_axis_host``. Figures go to ``params["out"]``.
"""

from __future__ import annotations

import json

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from wanreduce import regs, wire
from wanreduce.hdl.layouts import header_beats, payload_beats
from wanreduce.sim import frames
from wanreduce.sim.simulator import tb_params


async def setup(dut, p):
    cocotb.start_soon(Clock(dut.clk, 4, unit="ns").start())
    dut.rst.value = 1
    names = [f"s_axis_net{i}" for i in range(p["ports"])] + ["s_axis_host"]
    sources = [AxiStreamSource(AxiStreamBus.from_prefix(dut, n, bus_separator="__"), dut.clk, dut.rst) for n in names]
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_host", bus_separator="__"), dut.clk, dut.rst)
    await ClockCycles(dut.clk, 5)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)
    return sources, sink


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
    sources, sink = await setup(dut, p)
    n_ports = len(sources)
    await configure(sources, sink, p, n_ports)
    count, chunks = p["count"], p["chunks"]
    rng = np.random.default_rng(0)
    transfers, first, last = 0, None, 0
    done = False

    async def monitor():
        nonlocal transfers, first, last
        cycle = 0
        while not done:
            await RisingEdge(dut.clk)
            await ReadOnly()
            cycle += 1
            if int(dut.reducer.s_msg__valid.value) and int(dut.reducer.s_msg__ready.value):
                transfers += 1
                first = cycle if first is None else first
                last = cycle

    for c in range(chunks):
        for port in range(n_ports):  # sender s on port s: one contribution per port per chunk
            payload = rng.integers(-1000, 1000, count).astype(np.int32)
            data = frames.contribution(sender=port, chunk=c, payload=payload)
            sources[port].send_nowait(AxiStreamFrame(data))
    cocotb.start_soon(monitor())
    results = 0
    for _ in range(200_000):
        while not sink.empty():
            sink.recv_nowait()
            results += 1
        if results >= chunks:
            break
        await ClockCycles(dut.clk, 10)
    done = True
    expected = chunks * n_ports * payload_beats(count, p["width"])
    assert transfers == expected, f"{transfers} payload beats through the reducer, expected {expected}"
    assert results == chunks, f"{results} results, expected {chunks}"
    out = {"beats": transfers, "cycles": last - first + 1, "beats_per_cycle": transfers / (last - first + 1)}
    with open(p["out"], "w") as fh:
        json.dump(out, fh)


@cocotb.test()
async def latency(dut):
    p = tb_params()
    sources, sink = await setup(dut, p)
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
