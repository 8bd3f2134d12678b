"""cocotb bench of the payload gate (``hdl/payload_gate.py``) against its Python twin
(``sim/payload_gate_model.py``), run by tests/test_payload_gate.py through sim.simulator.run_cocotb.

``random_messages``: ``messages`` random messages (a tenth with a wrong beat count), random
decisions (WRITE / ADD / DISCARD); random valid on ``beats``, ``req`` and ``decision`` and random
ready on ``cmd``, their probabilities re-drawn every 200 cycles (phases where decisions lag and
the FIFO fills, phases where the output stalls). Decision k is offered once request k was taken
(its record read starts with the message). Every command must equal the twin's, in order; a
command offered and not taken must stay unchanged; then the counters and ``error`` must be the
twin's. Parameters (tb_params): data_width, depth, address_bits, max_elements, messages, seed.
"""

from __future__ import annotations

import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from wanreduce.hdl.payload_fifo import beat_layout
from wanreduce.hdl.payload_gate import Decision, request_layout
from wanreduce.hdl.slot_store_signature import TAG_BITS, cmd_layout
from wanreduce.sim.payload_gate_model import GateCommand, GateMessage, expected_commands
from wanreduce.sim.simulator import tb_params
from wanreduce.sim.tb_slot_store import _pack, _unpack

COUNTERS = ("written", "added", "discarded", "mismatches", "orphans")


def _messages(rng: random.Random, n: int, width: int, max_elements: int, address_bits: int) -> list[GateMessage]:
    lanes = width // 32
    out = []
    for _ in range(n):
        elements = rng.choice([rng.randint(1, max_elements), rng.randint(1, 3 * lanes)])
        beats = -(-elements // lanes)
        if rng.random() < 0.1:
            beats = max(1, beats + rng.choice([-1, 1]))
        out.append(GateMessage([rng.getrandbits(width) for _ in range(beats)], rng.getrandbits(address_bits),
                               elements, rng.getrandbits(TAG_BITS)))
    return out


@cocotb.test()
async def random_messages(dut):
    p = tb_params()
    rng = random.Random(p.get("seed", 1))
    w, ab, max_el = p["data_width"], p["address_bits"], p["max_elements"]
    messages = _messages(rng, p.get("messages", 100), w, max_el, ab)
    decisions = [rng.choice(list(Decision)).value for _ in messages]
    want = expected_commands(messages, decisions, w, ab, max_el)
    queues = [
        [_pack(beat_layout(w), data=d, last=int(i == len(m.data) - 1)) for m in messages for i, d in enumerate(m.data)],
        [_pack(request_layout(ab, max_el), row=m.row, elements=m.elements, tag=m.tag) for m in messages],
        decisions,
    ]
    names = ("beats", "req", "decision")
    ports = [tuple(getattr(dut, f"{n}__{s}") for s in ("valid", "payload", "ready")) for n in names]
    layout = cmd_layout(w, ab)

    cocotb.start_soon(Clock(dut.clk, 4, unit="ns").start())
    dut.rst.value = 1
    for valid, _, _ in ports:
        valid.value = 0
    dut.cmd__ready.value = 0
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0

    sent, offered, got = [0, 0, 0], [False, False, False], []
    stalled = None
    cycle, probs = 0, [1.0, 1.0, 1.0, 1.0]
    while len(got) < len(want.commands) or sent != [len(q) for q in queues]:
        await RisingEdge(dut.clk)
        cycle += 1
        assert cycle < 200 * sum(len(q) for q in queues) + 2000, f"stuck: {len(got)} of {len(want.commands)}"
        if cycle % 200 == 1:
            probs = [rng.choice([0.1, 0.5, 0.9, 1.0]) for _ in range(4)]
        for k, (valid, payload, _) in enumerate(ports):
            may = sent[k] < len(queues[k]) and (k != 2 or sent[2] < sent[1])
            if not offered[k] and may and rng.random() < probs[k]:
                offered[k] = True
                payload.value = queues[k][sent[k]]
            valid.value = int(offered[k])
        ready = rng.random() < probs[3]
        dut.cmd__ready.value = int(ready)
        await ReadOnly()
        for k, (_, _, rdy) in enumerate(ports):
            if offered[k] and int(rdy.value):
                sent[k] += 1
                offered[k] = False
        if int(dut.cmd__valid.value):
            word = int(dut.cmd__payload.value)
            assert stalled is None or word == stalled, f"cycle {cycle}: a stalled command changed"
            stalled = None
            if ready:
                c = _unpack(layout, word)
                got.append(GateCommand(**c))
                k = len(got) - 1
                assert k < len(want.commands) and got[k] == want.commands[k], \
                    f"command {k}: got {got[k]}, want {want.commands[k] if k < len(want.commands) else None}"
            else:
                stalled = word
        else:
            assert stalled is None, f"cycle {cycle}: a stalled command withdrawn"
    await RisingEdge(dut.clk)
    for valid, _, _ in ports:
        valid.value = 0
    await ClockCycles(dut.clk, 20)
    assert not int(dut.cmd__valid.value), "a command beyond the twin's"
    counts = {n: int(getattr(dut, n).value) for n in COUNTERS}
    assert counts == want.counts, f"counters {counts}, want {want.counts}"
    assert int(dut.error.value) == want.error
    dut._log.info(f"{len(messages)} messages, {len(got)} commands in {cycle} cycles, counters {counts}")
