"""MessageDemux: CONTROL beats to m_control, the rest to m_data; every beat once, in order per
output, 1 beat/cycle, registered (no combinational path from any input to any output)."""

from __future__ import annotations

import random

import pytest
from amaranth.back import verilog
from stream_helpers import Port, comb_cells_table, drive_random, min_flops_between, pack

from wanreduce import wire
from wanreduce.hdl.core import WanreduceCore
from wanreduce.hdl.layouts import message_beat_layout
from wanreduce.hdl.message_demux import MessageDemux


def _beats(width: int, n: int, p_ctrl: float, rng: random.Random,
           pattern: list[bool] | None = None) -> list[tuple[bool, int]]:
    """(is CONTROL, beat as an integer) pairs; ``pattern``: the CONTROL flags (else random)."""
    layout = message_beat_layout(width)
    out = []
    for i in range(n):
        ctrl = pattern[i] if pattern else rng.random() < p_ctrl
        msg_type = wire.MsgType.CONTROL if ctrl else rng.choice(
            [wire.MsgType.CONTRIBUTION, wire.MsgType.RESULT, wire.MsgType.CONTROL_REPLY])
        out.append((ctrl, pack(layout, {
            "data": rng.getrandbits(width), "first": rng.getrandbits(1), "last": rng.getrandbits(1),
            "hdr": {"msg_type": int(msg_type), "chunk": rng.getrandbits(32),
                    "element_count": rng.getrandbits(16)}})))
    return out


def _simulate(width: int, n: int, p_ctrl: float, p_valid: float, p_ready: tuple[float, float],
              seed: int, pattern: list[bool] | None = None, max_cycles: int | None = None,
              ready_copy: bool = False, ping_pong: bool = False, valid_copy: bool = False):
    """Random valid and per-output ready; returns (sent beats, received per output, cycles).
    ``ready_copy`` (with ``ping_pong``): the DRAM core's demux; its ``copy_error`` checked every
    cycle; ``valid_copy``: ``m_data_valid_c`` equal to ``m_data.valid`` every cycle too."""
    dut = MessageDemux(width, ready_copy=ready_copy, ping_pong=ping_pong, valid_copy=valid_copy)

    def check(ctx, cycle: int) -> None:
        assert not ctx.get(dut.copy_error), f"cycle {cycle}: a skid register's ready copy differs"
        if valid_copy:
            assert ctx.get(dut.m_data_valid_c) == ctx.get(dut.m_data.valid), f"cycle {cycle}: valid copy"

    beats = _beats(width, n, p_ctrl, random.Random(seed), pattern)
    run = drive_random(dut, Port.of(dut.s_msg), [Port.of(dut.m_data), Port.of(dut.m_control)],
                       [b for _, b in beats], p_valid=p_valid, p_ready=p_ready, seed=seed + 1000,
                       max_cycles=max_cycles, each_cycle=check if ready_copy or valid_copy else None)
    return beats, run.received, run.cycles


@pytest.mark.parametrize(
    ("width", "p_ctrl", "p_valid", "p_ready", "seed"),
    [(64, 0.5, 0.9, (0.5, 0.5), 1), (64, 0.3, 1.0, (0.9, 0.2), 2), (256, 0.7, 0.6, (0.2, 0.9), 3),
     (512, 0.5, 1.0, (1.0, 0.0), 4), (128, 0.1, 0.8, (0.7, 0.7), 5)],
)
@pytest.mark.parametrize(("ready_copy", "ping_pong", "valid_copy"),
                         [(False, False, False), (True, False, False), (True, True, False), (True, True, True)])
def test_every_beat_once_in_order_to_its_output(width, p_ctrl, p_valid, p_ready, seed, ready_copy,
                                                ping_pong, valid_copy) -> None:
    n = 300
    if p_ready[1] == 0.0:  # control output blocked: only data beats can all come out
        p_ctrl = 0.0
    beats, received, cycles = _simulate(width, n, p_ctrl, p_valid, p_ready, seed, ready_copy=ready_copy,
                                        ping_pong=ping_pong, valid_copy=valid_copy)
    assert cycles > 0, f"only {len(received[0]) + len(received[1])} of {n} beats came out"
    for k in range(2):
        want = [b for c, b in beats if c == k]
        assert received[k] == want
    if ready_copy:  # cycle for cycle the demux without the copies
        assert cycles == _simulate(width, n, p_ctrl, p_valid, p_ready, seed)[2]


def test_blocked_control_output() -> None:
    """m_control never ready: the first CONTROL beat waits in its output register and data beats
    still pass it; the second waits in its skid register and blocks the input behind it."""
    pattern = [False] * 5 + [True] + [False] * 5 + [True] + [False] * 5
    beats, received, cycles = _simulate(64, len(pattern), 0.0, 1.0, (1.0, 0.0), seed=7,
                                        pattern=pattern, max_cycles=60)
    assert cycles == 0  # never all out
    assert received[0] == [b for c, b in beats[:11] if not c] and received[1] == []


@pytest.mark.parametrize(("ready_copy", "ping_pong"), [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("p_ctrl", [0.0, 1.0, 0.5])
def test_full_throughput_one_beat_per_cycle(p_ctrl, ready_copy, ping_pong) -> None:
    beats, received, cycles = _simulate(64, 100, p_ctrl, 1.0, (1.0, 1.0), seed=6, ready_copy=ready_copy,
                                        ping_pong=ping_pong)
    assert len(received[0]) + len(received[1]) == 100
    assert cycles == 101  # one cycle of latency, then a beat every cycle


def test_verilog_w512() -> None:
    text = verilog.convert(MessageDemux(512), name="message_demux")
    assert "s_msg__ready" in text and "m_control__valid" in text


@pytest.mark.parametrize("ping_pong", [False, True])
def test_control_ready_reaches_no_control_data_register(ping_pong: bool) -> None:
    """``ping_pong`` (the DRAM core's demux): the control buffer is two alternating slots too, so
    the control block's ready (``m_control.ready``) reaches no data register of it within the
    cycle (only ``rp``, ``m.valid``, ``s.ready`` and the enable copies): two flip-flops to the
    slots' outputs. Without it (the on-chip demux, and 193bd2d's DRAM demux, whose control
    buffer was the output + skid registers) the ready is in the output register's enables (~100
    at W = 64): one, the before-case."""
    dut = MessageDemux(64, ready_copy=True, ping_pong=ping_pong)
    regs = ["slot0", "slot1"] if ping_pong else ["m__payload"]  # (out_data is m__payload)
    dsts = [f"control_skid.{r}" for r in regs]
    assert min_flops_between(dut, ["m_control__ready"], dsts) == (2 if ping_pong else 1)
    if ping_pong:  # the data buffer as before (session 45): the merger's grant reaches no slot
        assert min_flops_between(dut, ["m_data__ready"], ["data_skid.slot0", "data_skid.slot1"]) == 2


@pytest.mark.parametrize("slot_memory", ["onchip", "dram"])
def test_dram_core_merger_reads_the_data_buffers_valid_copy(slot_memory: str) -> None:
    """In the DRAM core the merger's arbitration reads the demux data buffer's copy of its valid
    (``MessageDemux(valid_copy=True)``, ``SkidBuffer(valid_copy=True)``): no cell from the
    buffer's own ``m.valid`` flip-flop to the merger's output register, its
    pointer or the merger slice's slot enables / ready within the cycle; the copy reaches them.
    In the on-chip core (RTL unchanged, as 3a66ba7's DRAM core) ``m.valid`` is the merger's
    input valid: ``demux.data_skid.m__valid`` -> the merger's grant -> ``merger_slice0.slot_en0``
    / ``core.s__payload``, 8.47-8.55 ns (2.7 ns of route first) at session 46's landing seed 6,
    the before-case. The copy's value: the random tests above (``m_data_valid_c`` ==
    ``m_data.valid`` every cycle), the skid buffer's lockstep test and test_core -k dram."""
    dram = slot_memory == "dram"
    core = WanreduceCore(ports=1, slots=4, elements=16, groups=1, jobs=1, slot_memory=slot_memory)
    regs = ["merger.m_msg__payload", "merger.ptr", "merger.locked"] + (
        ["merger_slice0.slot_en0", "merger_slice0.slot_en1", "merger_slice0.s__ready"] if dram else [])
    srcs = ["demux.data_skid.m__valid"] + (["demux.data_skid.m_valid_c"] if dram else [])
    table = comb_cells_table(core, srcs, regs + ["demux.data_skid.s__ready"])
    for reg in regs:
        assert bool(sum(table["demux.data_skid.m__valid", reg].values())) != dram, (reg, table)
        if dram:
            assert sum(table["demux.data_skid.m_valid_c", reg].values()), (reg, table)
    # (the name is right: the flip-flop still runs the buffer's own state)
    assert sum(table["demux.data_skid.m__valid", "demux.data_skid.s__ready"].values()), table
