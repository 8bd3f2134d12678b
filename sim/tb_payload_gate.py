"""cocotb benches of the payload gate (``hdl/payload_gate.py``), run by tests/test_payload_gate.py
through sim.simulator.run_cocotb.

``random_messages``: the gate alone against its Python twin (``sim/payload_gate_model.py``):
``messages`` random messages (a tenth with a wrong beat count), random decisions (WRITE / ADD /
DISCARD); random valid on ``beats``, ``req`` and ``decision`` and random ready on ``cmd``, their
probabilities re-drawn every 200 cycles (phases where decisions lag and the FIFO fills, phases
where the output stalls). Decision k is offered once request k was taken (its record read starts
with the message). Every command must equal the twin's, in order; a command offered and not
taken must stay unchanged; then the counters and ``error`` must be the twin's. Parameters
(tb_params): data_width, depth, address_bits, max_elements, messages, seed.

``gate_drives_store``: the gate driving the DRAM slot store end to end
(``hdl/gate_store_harness.py``: gate -> CommandArbiter -> DramSlotStore on cocotbext-axi's
``AxiRam``, through ``sim/tb_slot_store.py``'s ``Bench``: random memory content, latency re-drawn
from ``latency_range`` (20..200), random pauses on every AXI channel). Messages go to the first
row of one of a few slots (ADD onto WRITE-initialised slots is common), beats of int32 30 % near
the limits (``random_row``: sums saturate, in a short last beat's unused lanes too), random decisions, random
valid / ready on every stream as above. The twin's commands applied to the slot-store reference
(``sim/slot_store_model.py``: the golden model's saturating int32 add) give every response (data,
overflow counted on the message's lanes only, tag) in order; then every row in memory must be the
reference's (DISCARD and mismatched messages leave it), ``mem_error`` and the arbiter's
``copy_error`` 0, the gate's counters and ``error`` the twin's. Parameters: the harness's
(data_width, depth, max_elements, slots, row_bits, outstanding, base_address), messages, seed,
latency_range, p_axi, p_stream (fixed valid / ready probability on every stream), out (a JSON
file: input beats, commands, cycles, steady-state commands per cycle ``rate``, overflows, counters).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from wanreduce.hdl.gate_store_harness import gate_store_with_latency
from wanreduce.hdl.payload_fifo import beat_layout
from wanreduce.hdl.payload_gate import Decision, request_layout
from wanreduce.hdl.slot_store_signature import TAG_BITS, cmd_layout
from wanreduce.sim.axi_memory import steady_rate, vary_latency
from wanreduce.sim.payload_gate_model import GateCommand, GateMessage, expected_commands
from wanreduce.sim.simulator import generate_verilog, run_cocotb, tb_params
from wanreduce.sim.tb_slot_store import Bench, _pack, _unpack, random_row

COUNTERS = ("written", "added", "discarded", "mismatches", "orphans")


def random_messages_to(rng: random.Random, n: int, width: int, max_elements: int, first_row: Callable[[], int],
              word: Callable[[], int] | None = None) -> list[GateMessage]:
    """``n`` random messages to rows ``first_row()``, beats ``word()`` (default: random bits);
    a tenth with a wrong beat count."""
    word = word or (lambda: rng.getrandbits(width))
    lanes = width // 32
    out = []
    for _ in range(n):
        elements = rng.choice([rng.randint(1, max_elements), rng.randint(1, 3 * lanes)])
        beats = -(-elements // lanes)
        if rng.random() < 0.1:
            beats = max(1, beats + rng.choice([-1, 1]))
        out.append(GateMessage([word() for _ in range(beats)], first_row(),
                               elements, rng.getrandbits(TAG_BITS)))
    return out


class Inputs:
    """The gate's ``beats``, ``req`` and ``decision`` streams fed from ``messages`` and
    ``decisions`` with random valid (probabilities ``probs[0..2]``); decision k only once
    request k was taken. ``decisions`` None: no ``decision`` stream (a harness that decides
    itself, ``hdl/gate_record_harness.py``)."""

    NAMES = ("beats", "req", "decision")

    def __init__(self, dut, messages: list[GateMessage], decisions: list[int] | None, width: int,
                 address_bits: int, max_elements: int) -> None:
        self.queues = [
            [_pack(beat_layout(width), data=d, last=int(i == len(m.data) - 1))
             for m in messages for i, d in enumerate(m.data)],
            [_pack(request_layout(address_bits, max_elements), row=m.row, elements=m.elements, tag=m.tag)
             for m in messages],
            *([] if decisions is None else [decisions]),
        ]
        self.ports = [tuple(getattr(dut, f"{n}__{s}") for s in ("valid", "payload", "ready"))
                      for n in self.NAMES[:len(self.queues)]]
        self.sent, self.offered = [0] * len(self.queues), [False] * len(self.queues)
        self.cycles, self.probs = 0, [1.0] * 4
        for valid, _, _ in self.ports:
            valid.value = 0

    @property
    def done(self) -> bool:
        return self.sent == [len(q) for q in self.queues]

    @property
    def total(self) -> int:
        return sum(len(q) for q in self.queues)

    def offer(self, rng: random.Random, probs: list[float]) -> None:
        """Before the clock edge's ReadOnly: the valids and payloads of this cycle."""
        for k, (valid, payload, _) in enumerate(self.ports):
            may = self.sent[k] < len(self.queues[k]) and (k != 2 or self.sent[2] < self.sent[1])
            if not self.offered[k] and may and rng.random() < probs[k]:
                self.offered[k] = True
                payload.value = self.queues[k][self.sent[k]]
            valid.value = int(self.offered[k])

    def taken(self) -> None:
        """In ReadOnly: count what the gate took."""
        for k, (_, _, rdy) in enumerate(self.ports):
            if self.offered[k] and int(rdy.value):
                self.sent[k] += 1
                self.offered[k] = False

    async def cycle(self, dut, rng: random.Random, ready_port, fixed: float | None = None) -> bool:
        """One clock cycle: the inputs offered, ``ready_port`` (the output's ready) drawn, and
        what was taken counted; returns the ready. Probabilities ``fixed``, or re-drawn every
        200 cycles; ``self.cycles`` counts the cycles."""
        await RisingEdge(dut.clk)
        self.cycles += 1
        if self.cycles % 200 == 1 and fixed is None:
            self.probs = [rng.choice([0.1, 0.5, 0.9, 1.0]) for _ in range(4)]
        elif self.cycles == 1:
            self.probs = [fixed] * 4
        self.offer(rng, self.probs)
        ready = rng.random() < self.probs[3]
        ready_port.value = int(ready)
        await ReadOnly()
        self.taken()
        return ready

    async def stop(self, dut) -> None:
        await RisingEdge(dut.clk)
        for valid, _, _ in self.ports:
            valid.value = 0


def check_counters(dut, want) -> dict[str, int]:
    counts = {n: int(getattr(dut, n).value) for n in COUNTERS}
    assert counts == want.counts, f"counters {counts}, want {want.counts}"
    assert int(dut.error.value) == want.error
    return counts


async def drive_to_store(dut, rng: random.Random, inputs: Inputs, want, expected: list[tuple[int, int, int]],
                         rsp_layout, p: dict) -> dict:
    """Feed ``inputs`` and take the store's ``rsp`` (random ready; ``p["p_stream"]``: every
    stream's fixed valid / ready probability, else re-drawn) until every response of
    ``expected`` ((data, overflow, tag) of ``want.commands``) came, in order, and no further one
    20 cycles later. Returns the input beats, responses, cycles, steady-state responses
    (``rate``) and requests (``msg_rate``) per cycle, and the overflows."""
    got, overflows, stamps, req_stamps, reqs = 0, 0, [], [], 0
    while got < len(expected) or not inputs.done:
        ready = await inputs.cycle(dut, rng, dut.rsp__ready, p.get("p_stream"))
        cycle = inputs.cycles
        assert cycle < 400 * inputs.total + 5000, f"stuck: {got} of {len(expected)} responses"
        if inputs.sent[1] != reqs:
            reqs = inputs.sent[1]
            req_stamps.append(cycle)
        if ready and int(dut.rsp__valid.value):
            r = _unpack(rsp_layout, int(dut.rsp__payload.value))
            c = want.commands[got] if got < len(expected) else None
            assert got < len(expected) and (r["data"], r["overflow"], r["tag"]) == expected[got], \
                f"response {got} ({c}): got data {r['data']:#x} overflow {r['overflow']} tag {r['tag']}, " \
                f"want {expected[got] if c else None}"
            overflows += r["overflow"]
            got += 1
            stamps.append(cycle)
    await inputs.stop(dut)
    await ClockCycles(dut.clk, 20)
    assert not int(dut.rsp__valid.value), "a response beyond the reference's"
    return {"beats": len(inputs.queues[0]), "commands": got, "cycles": cycle, "rate": steady_rate(stamps),
            "msg_rate": steady_rate(req_stamps), "overflows": overflows}


@cocotb.test()
async def random_messages(dut):
    p = tb_params()
    rng = random.Random(p.get("seed", 1))
    w, ab, max_el = p["data_width"], p["address_bits"], p["max_elements"]
    messages = random_messages_to(rng, p.get("messages", 100), w, max_el, lambda: rng.getrandbits(ab))
    decisions = [rng.choice(list(Decision)).value for _ in messages]
    want = expected_commands(messages, decisions, w, ab, max_el)
    inputs = Inputs(dut, messages, decisions, w, ab, max_el)
    layout = cmd_layout(w, ab)

    cocotb.start_soon(Clock(dut.clk, 4, unit="ns").start())
    dut.rst.value = 1
    dut.cmd__ready.value = 0
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0

    got = []
    stalled = None
    while len(got) < len(want.commands) or not inputs.done:
        ready = await inputs.cycle(dut, rng, dut.cmd__ready)
        cycle = inputs.cycles
        assert cycle < 200 * inputs.total + 2000, f"stuck: {len(got)} of {len(want.commands)}"
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
    await inputs.stop(dut)
    await ClockCycles(dut.clk, 20)
    assert not int(dut.cmd__valid.value), "a command beyond the twin's"
    counts = check_counters(dut, want)
    dut._log.info(f"{len(messages)} messages, {len(got)} commands in {inputs.cycles} cycles, counters {counts}")


@cocotb.test()
async def gate_drives_store(dut):
    p = tb_params()
    b = Bench(dut, p)
    rng = b.rng
    w, max_el, row_bits = p["data_width"], p["max_elements"], p["row_bits"]
    messages = random_messages_to(rng, p.get("messages", 100), w, max_el, lambda: rng.randrange(p["slots"]) << row_bits,
                         lambda: random_row(rng, w // 32))
    decisions = rng.choices([Decision.WRITE.value, Decision.ADD.value, Decision.DISCARD.value], [1, 3, 1],
                            k=len(messages))
    want = expected_commands(messages, decisions, w, b.address_bits, max_el)
    inputs = Inputs(dut, messages, decisions, w, b.address_bits, max_el)
    model = await b.start()
    expected = [(*model.apply(c.op, c.row, c.data, c.lanes), c.tag) for c in want.commands]
    b.random_axi_pauses(p.get("p_axi", 0.3))
    vary_latency(dut, rng, *p.get("latency_range", (20, 200)))

    result = await drive_to_store(dut, rng, inputs, want, expected, b.rsp_layout, p)
    assert not int(dut.mem_error.value), "mem_error set"
    assert not int(dut.copy_error.value), "the command arbiter's copy_error set"
    counts = check_counters(dut, want)
    b.check_bursts()
    await b.check_memory(model)
    result.update(counts)
    if p.get("out"):
        with open(p["out"], "w") as f:
            json.dump(result, f)
    dut._log.info(f"{len(messages)} messages: {result}")


def run_gate_store(width: int, *, seed: int, messages: int = 150, outstanding: int = 32, **tb: object) -> None:
    """Generate the gate-and-store harness at ``width`` (a few slots of 8 rows, ``max_elements``
    a slot's, the store's table of ``outstanding`` entries) and run ``gate_drives_store`` on it (``tb``: further tb_params: latency_range,
    p_axi, p_stream, out). tests/test_payload_gate.py and bench/bench_payload_gate.py."""
    row_bits = 3
    params = {"data_width": width, "depth": 16, "max_elements": (1 << row_bits) * width // 32,
              "slots": 4, "row_bits": row_bits, "outstanding": outstanding, "base_address": 0x3000}
    top = f"gate_store_w{width}_n{outstanding}"
    path = generate_verilog(gate_store_with_latency, name=top, params=params)
    run_cocotb(verilog=path, toplevel=top, test_module=__name__, testcase="gate_drives_store",
               params={**params, "messages": messages, "seed": seed, **tb}, timeout_s=120)
