"""MessageRegisterSlice: every beat once, in order, 1 beat/cycle, and no combinational path."""

from __future__ import annotations

import random

import pytest
from amaranth.back import verilog
from amaranth.sim import Simulator
from stream_helpers import HoldingSink

from wanreduce.hdl.layouts import message_beat_layout
from wanreduce.hdl.message_register_slice import MessageRegisterSlice


def _simulate(width: int, n_beats: int, p_valid: float, p_ready: float, seed: int):
    """Drive random valid/ready; return (sent, received, cycles). Checks every cycle that the
    outputs do not move when only inputs change, and that a stalled output holds its beat."""
    dut = MessageRegisterSlice(width)
    size = message_beat_layout(width).size
    rng = random.Random(seed)
    beats = [rng.getrandbits(size) for _ in range(n_beats)]
    sink = HoldingSink("m_msg")
    received = sink.received
    cycles = 0

    async def tb(ctx) -> None:
        nonlocal cycles
        s, o = dut.s_msg, dut.m_msg
        sent, valid = 0, False
        outputs = [s.ready, o.valid, o.payload.as_value()]
        for cycle in range(n_beats * 40 + 100):
            if not valid and sent < n_beats:
                valid = rng.random() < p_valid
            ready = rng.random() < p_ready
            before = [ctx.get(x) for x in outputs]
            ctx.set(o.ready, not ready)
            ctx.set(s.valid, not valid)
            ctx.set(s.payload.as_value(), rng.getrandbits(size))
            assert [ctx.get(x) for x in outputs] == before, f"cycle {cycle}: combinational path"
            ctx.set(s.valid, valid)
            ctx.set(o.ready, ready)
            ctx.set(s.payload.as_value(), beats[sent] if valid else rng.getrandbits(size))
            sink.step(cycle, ctx.get(o.valid), ctx.get(o.payload.as_value()), ready)
            if valid and ctx.get(s.ready):
                sent += 1
                valid = False
            await ctx.tick()
            if len(received) == n_beats:
                cycles = cycle + 1
                break

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return beats, received, cycles


@pytest.mark.parametrize(
    ("width", "p_valid", "p_ready", "seed"),
    [(64, 0.5, 0.5, 1), (64, 0.9, 0.3, 2), (256, 0.3, 0.9, 3), (512, 0.7, 0.7, 4), (128, 1.0, 0.5, 5)],
)
def test_random_handshakes_every_beat_once_in_order(width: int, p_valid: float, p_ready: float, seed: int) -> None:
    beats, received, cycles = _simulate(width, 200, p_valid, p_ready, seed)
    assert cycles > 0, f"only {len(received)} of {len(beats)} beats came out"
    assert received == beats


def test_full_throughput_one_beat_per_cycle() -> None:
    beats, received, cycles = _simulate(64, 100, 1.0, 1.0, seed=6)
    assert received == beats
    assert cycles == 101  # one cycle of latency, then a beat every cycle


def test_rejects_bad_width() -> None:
    with pytest.raises(ValueError):
        MessageRegisterSlice(100)


def test_verilog_w512() -> None:
    text = verilog.convert(MessageRegisterSlice(512), name="message_register_slice")
    assert "s_msg__ready" in text
