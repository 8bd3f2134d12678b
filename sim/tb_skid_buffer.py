"""cocotb bench of the skid buffer (hdl/skid_buffer.py) through its AXI4-Stream wrapper
(hdl/axis_register_slice.py), run by tests/test_skid_buffer.py through sim.simulator.run_cocotb.

Whole frames go in through cocotbext-axi's AxiStreamSource and come out of an AxiStreamSink,
with random idle cycles on the source and random backpressure on the sink; every frame must
come out equal (tdata, tkeep via the partial last beat, tuser per beat), in order. With no
pauses a burst takes one cycle per beat (SIMPLE: two).
Parameters (from tb_params()): data_width, user_width, register_type, frames, seed.
"""

from __future__ import annotations

import itertools
import logging
import random

import cocotb
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import ClockCycles, RisingEdge, Timer
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from wanreduce.sim.simulator import tb_params

CLOCK_NS = 4


def _random_pauses(rng: random.Random, busy: float):
    """Endless pause pattern: True (pause) with probability ``busy``, in bursts."""
    while True:
        length = rng.randint(1, 8)
        value = rng.random() < busy
        yield from itertools.repeat(value, length)


async def _setup(dut):
    """Start the clock, hold reset, attach source and sink; returns (source, sink)."""
    cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
    dut.rst.value = 1
    # cocotbext-axi drives idle values on reset: create them while reset is asserted.
    source = AxiStreamSource(
        AxiStreamBus.from_prefix(dut, "s_axis", bus_separator="__"), dut.clk, dut.rst
    )
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_"), dut.clk, dut.rst)
    for bfm in (source, sink):
        bfm.log.setLevel(logging.WARNING)  # they log every frame at INFO
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    await RisingEdge(dut.clk)
    return source, sink


def _frame(rng: random.Random, byte_lanes: int, user_width: int) -> AxiStreamFrame:
    """A random frame: random length (partial last beat), one tuser value per beat."""
    length = rng.randint(1, 6 * byte_lanes)
    data = rng.randbytes(length)
    beats = -(-length // byte_lanes)
    tuser = []
    for _ in range(beats):
        tuser += [rng.getrandbits(user_width)] * byte_lanes
    return AxiStreamFrame(data, tuser=tuser[:length])


def _per_byte(value, length: int) -> list[int]:
    return [value] * length if isinstance(value, int) else list(value)


@cocotb.test()
async def frames_pass_under_backpressure(dut):
    """Random frames, random source idle and sink backpressure: all arrive intact, in order."""
    p = tb_params()
    data_width, user_width = p["data_width"], p.get("user_width", 1)
    assert len(dut.s_axis__tdata) == data_width
    rng = random.Random(p.get("seed", 1))
    source, sink = await _setup(dut)
    source.set_pause_generator(_random_pauses(rng, 0.3))
    sink.set_pause_generator(_random_pauses(rng, 0.4))

    frames = [_frame(rng, data_width // 8, user_width) for _ in range(p.get("frames", 200))]
    for frame in frames:
        await source.send(AxiStreamFrame(frame))
    for i, sent in enumerate(frames):
        got = await sink.recv()
        assert bytes(got.tdata) == bytes(sent.tdata), f"frame {i}: tdata differs"
        assert _per_byte(got.tuser, len(got.tdata)) == sent.tuser, f"frame {i}: tuser differs"
    await ClockCycles(dut.clk, 10)
    assert sink.empty(), "sink received more frames than were sent"


@cocotb.test()
async def full_throughput_when_ready(dut):
    """No pauses on either side: one beat per cycle (SIMPLE: per two), plus a few of latency."""
    p = tb_params()
    per_beat = 2 if p.get("register_type", "SKID") == "SIMPLE" else 1
    byte_lanes = p["data_width"] // 8
    source, sink = await _setup(dut)
    beats = 64
    frame = AxiStreamFrame(bytes(range(256)) * (beats * byte_lanes // 256 + 1))
    frame.tdata = frame.tdata[: beats * byte_lanes]
    await source.send(frame)
    start = get_sim_time("ns")
    got = await sink.recv()
    cycles = (get_sim_time("ns") - start) / CLOCK_NS
    assert bytes(got.tdata) == bytes(frame.tdata)
    assert cycles <= per_beat * beats + 3, f"{beats} beats took {cycles} cycles"
    await Timer(1, "ns")
