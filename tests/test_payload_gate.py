"""Payload FIFO and payload gate (``hdl/payload_fifo.py``, ``hdl/payload_gate.py``; issue 16,
large S step 4): unit tests in Amaranth's simulator against the twin (``sim/payload_gate_model.py``) and
cocotb benches (``sim/tb_payload_gate.py``, marked ``cocotb``): the gate alone at W 64 and 512,
the gate driving the DRAM slot store (``hdl/gate_store_harness.py``) at W 64 and 256."""

from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth.hdl import Fragment, MemoryInstance, Shape, Value
from stream_helpers import Port, comb_cells_table, drive_random, pack, run_testbench, unpack

from wanreduce.hdl.layouts import beat_lanes
from wanreduce.hdl.payload_fifo import PayloadFIFO, beat_layout
from wanreduce.hdl.payload_gate import Decision, PayloadGate
from wanreduce.hdl.slot_store_signature import EMIT_TAG, Op
from wanreduce.sim.payload_gate_model import EMIT, GateCommand, GateMessage, expected_commands
from wanreduce.sim.simulator import generate_verilog, run_cocotb
from wanreduce.sim.slot_store_model import SlotStoreModel, lanes_of, row_of
from wanreduce.sim.tb_payload_gate import run_gate_store

WRITE, ADD, DISCARD = Decision.WRITE.value, Decision.ADD.value, Decision.DISCARD.value
COUNTERS = ("written", "added", "discarded", "mismatches", "orphans")


# --------------------------------------------------------------------------------------------
# beat_lanes: the lanes of a short last beat


@pytest.mark.parametrize(("width", "elements", "expected"), [
    (64, 3, [0b11, 0b01]), (64, 4, [0b11, 0b11]), (64, 1, [0b01]),
    (512, 17, [0xFFFF, 0x0001]), (512, 31, [0xFFFF, 0x7FFF]), (512, 16, [0xFFFF]),
])
def test_beat_lanes(width: int, elements: int, expected: list[int]) -> None:
    assert [beat_lanes(elements, b, width) for b in range(len(expected))] == expected


# --------------------------------------------------------------------------------------------
# PayloadFIFO


@pytest.mark.parametrize(("p_valid", "p_ready", "seed"), [(0.9, 0.3, 1), (0.3, 0.9, 2), (1.0, 1.0, 3), (0.7, 0.6, 4)])
def test_fifo_every_beat_once_in_order(p_valid: float, p_ready: float, seed: int) -> None:
    dut = PayloadFIFO(64, 8)
    rng = random.Random(seed)
    beats = [rng.getrandbits(65) for _ in range(300)]
    run = drive_random(dut, Port.of(dut.s), [Port.of(dut.m)], beats, p_valid=p_valid, p_ready=p_ready, seed=seed)
    assert run.received[0] == beats


def test_fifo_full_throughput_and_full_stall() -> None:
    """One beat per cycle in and out; with the output stalled it takes exactly ``depth`` + 3
    beats (memory, read register, skid buffer) and then holds ``s.ready`` low."""
    dut = PayloadFIFO(64, 16)
    result = {}

    async def tb(ctx) -> None:
        ctx.set(dut.m.ready, 0)
        ctx.set(dut.s.valid, 1)
        taken = 0
        for _ in range(40):
            ctx.set(dut.s.payload.data, taken)
            taken += ctx.get(dut.s.ready)
            await ctx.tick()
        result["held"], result["level"] = taken, ctx.get(dut.level)
        ctx.set(dut.s.valid, 0)
        ctx.set(dut.m.ready, 1)
        out = []
        for _ in range(40):
            if ctx.get(dut.m.valid):
                out.append(ctx.get(dut.m.payload.data))
            await ctx.tick()
        result["out"] = out

    run_testbench(dut, tb)
    assert result["held"] == result["level"] == 16 + 3
    assert result["out"] == list(range(19))


@pytest.mark.parametrize("seed", [1, 2])
def test_fifo_ready_is_exactly_not_full(seed: int) -> None:
    """``s.ready`` (a flip-flop since round 3) is ``free != 0`` in every cycle, under random
    valid / ready that fill and drain the memory many times: never early (a beat into a full
    memory), never late (a cycle lost)."""
    dut, rng, seen = PayloadFIFO(64, 4), random.Random(seed), {"full": 0, "bad": []}

    async def tb(ctx) -> None:
        for cycle in range(600):
            phase = cycle // 50 % 2  # fill (output mostly stalled), then drain
            ctx.set(dut.s.valid, rng.random() < (0.9 if phase == 0 else 0.4))
            ctx.set(dut.m.ready, rng.random() < (0.2 if phase == 0 else 0.9))
            ready, free = ctx.get(dut.s.ready), ctx.get(dut.free)
            seen["full"] += free == 0
            if ready != (free != 0):
                seen["bad"].append((cycle, ready, free))
            await ctx.tick()

    run_testbench(dut, tb)
    assert seen["bad"] == [] and seen["full"] > 20, seen


def test_fifo_is_one_memory() -> None:
    """One ``memory.Memory`` of ``depth`` x (W + 1): the beats are in block RAM, not flip-flops."""
    frag = Fragment.get(PayloadFIFO(64, 1024), None)
    mems = [sub for sub, _, _ in frag.subfragments if isinstance(sub, MemoryInstance)]
    assert [(m._data.depth, Shape.cast(m._data.shape).width) for m in mems] == [(1024, 65)]


@pytest.mark.parametrize(("args", "msg"), [((0, 16), "width must be"), ((64, 12), "depth must be"),
                                           ((64, 2), "depth must be")])
def test_fifo_rejects_bad_parameters(args, msg) -> None:
    with pytest.raises(ValueError, match=msg):
        PayloadFIFO(*args)


# --------------------------------------------------------------------------------------------
# PayloadGate in Amaranth's simulator


def _messages(rng: random.Random, n: int, width: int, max_elements: int, *, bad: float = 0.0) -> list[GateMessage]:
    lanes = width // 32
    out = []
    for _ in range(n):
        elements = rng.choice([rng.randint(1, max_elements), rng.randint(1, 2 * lanes)])
        beats = -(-elements // lanes)
        if rng.random() < bad:
            beats = max(1, beats + rng.choice([-1, 1, 2]))
        out.append(GateMessage([rng.getrandbits(width) for _ in range(beats)], rng.getrandbits(10),
                               elements, rng.getrandbits(16)))
    return out


def _run_gate(dut: PayloadGate, messages: list[GateMessage], decisions: list[int], *, p_valid: float = 1.0,
              p_ready: float = 1.0, seed: int = 0, cycles: int = 4000, hold_decisions: int = 0,
              hold_beat: tuple[int, int] = (-1, 0), each_cycle=None) -> dict:
    """Drive ``beats``, ``req`` and ``decision`` with random valid, ``cmd`` with random ready;
    decision k is offered only once request k was taken (orphans: after every request) and not
    before cycle ``hold_decisions``; beat ``hold_beat[0]`` not before cycle ``hold_beat[1]``. Returns the commands, counters, error and cycles."""
    rng = random.Random(seed)
    beats = [pack(beat_layout(dut.data_width), {"data": d, "last": int(i == len(msg.data) - 1)})
             for msg in messages for i, d in enumerate(msg.data)]
    reqs = [pack(dut.req_layout, {"row": msg.row, "elements": msg.elements, "tag": msg.tag}) for msg in messages]
    cmd_layout = dut.cmd.payload.shape()
    ports = [Port.of(dut.beats), Port.of(dut.req), Port.of(dut.decision)]
    queues = [beats, reqs, decisions]
    out: dict = {"commands": [], "stalled": 0}

    async def tb(ctx) -> None:
        sent, valid = [0, 0, 0], [False, False, False]
        for cycle in range(cycles):
            for k, (port, q) in enumerate(zip(ports, queues, strict=True)):
                allowed = sent[k] < len(q) and (k != 2 or (cycle >= hold_decisions and
                                                          (sent[2] < sent[1] or sent[1] == len(reqs))))
                allowed = allowed and (k != 0 or sent[0] != hold_beat[0] or cycle >= hold_beat[1])
                if not valid[k] and allowed:
                    valid[k] = rng.random() < p_valid
                ctx.set(port.valid, valid[k])
                ctx.set(port.payload, q[sent[k]] if valid[k] else 0)
            ready = rng.random() < p_ready
            ctx.set(dut.cmd.ready, ready)
            if ctx.get(dut.cmd.valid) and ready:
                c = unpack(cmd_layout, ctx.get(Value.cast(dut.cmd.payload)))
                out["commands"].append(GateCommand(c.op, c.row, c.data, c.lanes, c.tag, c.more))
            if valid[0] and not ctx.get(dut.beats.ready):
                out["stalled"] += 1
            if each_cycle is not None:
                each_cycle(ctx, cycle, out)
            taken = [valid[k] and ctx.get(p.ready) for k, p in enumerate(ports)]
            for k in range(3):
                if taken[k]:
                    sent[k] += 1
                    valid[k] = False
            await ctx.tick()
        out["sent"] = sent
        out.update({name: ctx.get(getattr(dut, name)) for name in COUNTERS})
        out["error"] = ctx.get(dut.error)

    run_testbench(dut, tb)
    return out


def _check(dut: PayloadGate, messages, decisions, run: dict) -> None:
    want = expected_commands(messages, decisions, dut.data_width, dut.address_bits, dut.max_elements)
    assert run["sent"] == [sum(len(m.data) for m in messages), len(messages), len(decisions)]
    assert run["commands"] == want.commands
    assert {name: run[name] for name in COUNTERS} == want.counts
    assert run["error"] == want.error


def _gate(width: int = 64, depth: int = 64, **kw) -> PayloadGate:
    return PayloadGate(width, depth, address_bits=10, **kw)


@pytest.mark.parametrize(("width", "p_valid", "p_ready", "seed"),
                         [(64, 1.0, 1.0, 1), (64, 0.6, 0.4, 2), (64, 0.9, 0.2, 3), (512, 0.7, 0.7, 4), (512, 0.4, 0.9, 5)])
def test_order_and_decisions_against_the_twin(width: int, p_valid: float, p_ready: float, seed: int) -> None:
    dut = _gate(width, 64, max_elements=40 * width // 32)
    rng = random.Random(seed)
    messages = _messages(rng, 30, width, dut.max_elements)
    decisions = [rng.choice([WRITE, ADD, DISCARD]) for _ in messages]
    run = _run_gate(dut, messages, decisions, p_valid=p_valid, p_ready=p_ready, seed=seed, cycles=6000)
    _check(dut, messages, decisions, run)
    assert run["commands"] and not run["error"]


def test_nothing_before_the_decision_and_the_last_beat() -> None:
    """No command while the decision is withheld (the message complete), nor while the message's
    last beat is withheld (its decision in): a message is released whole."""
    dut = _gate(64, 64)
    msg = GateMessage([11, 12, 13, 14, 15], 3, 9, 7)

    def no_early_command(ctx, cycle, out) -> None:
        if cycle < 200:
            assert not ctx.get(dut.cmd.valid), f"cycle {cycle}: a command before the decision"
    run = _run_gate(dut, [msg], [ADD], hold_decisions=200, each_cycle=no_early_command, cycles=300)
    _check(dut, [msg], [ADD], run)

    dut = _gate(64, 64)

    def last_beat_held(ctx, cycle, out) -> None:
        if cycle < 150:
            assert not ctx.get(dut.cmd.valid), f"cycle {cycle}: a command before the last beat"
        if cycle == 100:
            assert ctx.get(dut.decision.valid) and not ctx.get(dut.decision.ready)  # decision waiting
    run = _run_gate(dut, [msg], [WRITE], hold_beat=(4, 150), each_cycle=last_beat_held, cycles=300)
    _check(dut, [msg], [WRITE], run)


def test_full_fifo_stalls_the_input_and_loses_nothing() -> None:
    """Depth 16 and decisions held back: the FIFO fills, the input stalls (never drops), then
    every message goes out whole and in order."""
    dut = _gate(64, 16)
    rng = random.Random(7)
    messages = _messages(rng, 12, 64, 2 * 15)
    decisions = [rng.choice([WRITE, ADD, DISCARD]) for _ in messages]
    run = _run_gate(dut, messages, decisions, hold_decisions=300, p_ready=0.5, seed=7, cycles=2000)
    assert run["stalled"] > 100  # the request always there, 12 messages < 32: the FIFO was full
    _check(dut, messages, decisions, run)


def test_full_throughput() -> None:
    """Everything valid and ready: one command per cycle, across message boundaries too."""
    dut = _gate(64, 64, max_elements=40)
    rng = random.Random(3)
    messages = [GateMessage([rng.getrandbits(64) for _ in range(8)], 8 * k, 16, k) for k in range(20)]
    decisions = [WRITE] * 20
    first_last = []

    def watch(ctx, cycle, out) -> None:
        if ctx.get(dut.cmd.valid):
            first_last[:] = [first_last[0] if first_last else cycle, cycle]
    run = _run_gate(dut, messages, decisions, each_cycle=watch, cycles=400)
    _check(dut, messages, decisions, run)
    assert first_last[1] - first_last[0] + 1 == 160  # 160 commands in 160 consecutive cycles


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_mismatched_messages_are_drained_and_counted(seed: int) -> None:
    """Too short, too long and too many elements: no command whatever the decision, error and
    ``mismatches``; the messages around them unaffected."""
    dut = _gate(64, 32, max_elements=40)
    rng = random.Random(seed)
    messages = _messages(rng, 25, 64, 40, bad=0.4)
    messages.append(GateMessage([1, 2], 5, 41, 9))  # elements above max_elements
    decisions = [rng.choice([WRITE, ADD, DISCARD]) for _ in messages]
    run = _run_gate(dut, messages, decisions, p_valid=0.7, p_ready=0.6, seed=seed, cycles=5000)
    _check(dut, messages, decisions, run)
    assert run["mismatches"] >= 2 and run["error"]


@pytest.mark.parametrize(("width", "p_valid", "p_ready", "seed"), [(64, 1.0, 1.0, 1), (64, 0.7, 0.5, 2), (512, 0.6, 0.8, 3)])
def test_emitting_messages_tag_their_commands_or_read_their_rows(width: int, p_valid: float, p_ready: float,
                                                                 seed: int) -> None:
    """Decisions with ``emit``: a message's commands carry ``EMIT_TAG``; an emitting message
    drained (a beat-count mismatch, or DISCARD) READs its chunk's rows with ``EMIT_TAG`` instead
    (the emitter awaits them), after its beats are drained; others unaffected; against the twin."""
    dut = _gate(width, 32, max_elements=20 * width // 32)
    rng = random.Random(seed)
    messages = [GateMessage(m.data, m.row, m.elements, m.tag & (EMIT_TAG - 1))
                for m in _messages(rng, 40, width, dut.max_elements, bad=0.3)]
    decisions = [rng.choice([WRITE, ADD, DISCARD]) | (EMIT if rng.random() < 0.5 else 0) for _ in messages]
    run = _run_gate(dut, messages, decisions, p_valid=p_valid, p_ready=p_ready, seed=seed, cycles=8000)
    _check(dut, messages, decisions, run)
    reads = [c for c in run["commands"] if c.op == Op.READ]
    assert reads and all(c.tag & EMIT_TAG for c in reads)
    assert any(c.tag & EMIT_TAG for c in run["commands"] if c.op != Op.READ)
    assert any(not c.tag & EMIT_TAG for c in run["commands"])


def test_a_too_long_message_never_fills_the_fifo() -> None:
    """A message of 60 beats where its request says 2: only its first 2 and its last are stored,
    so it fits a 16-beat FIFO (storing it all would wait forever for its last beat)."""
    dut = _gate(64, 16)
    messages = [GateMessage(list(range(60)), 1, 4, 2), GateMessage([7, 8], 9, 3, 4)]
    run = _run_gate(dut, messages, [ADD, WRITE], hold_decisions=150, cycles=400)
    _check(dut, messages, [ADD, WRITE], run)
    assert run["mismatches"] == 1 and len(run["commands"]) == 2


# issue 16 round 7 (docs/large_slots.md, "(session 38, round 7)"): the gate's input side chose the
# message's request (``in_busy`` -> ``cur``) before the count's compare (``seen < expected``, a carry
# chain), which set the FIFO's push, so its ``room`` and write pointer (12.9 ns in round 6's
# placement); the compares are flip-flops now (``within_r``, ``ok_r``), ``in_busy`` only chooses
ARITH = {"$add", "$sub", "$lt", "$le", "$gt", "$ge", "$eq", "$ne"}


def test_the_message_state_reaches_the_fifos_push_through_no_compare() -> None:
    """Within a cycle, ``in_busy`` reaches the payload FIFO's ``room`` (``s__ready``, a flip-flop)
    and its push (``wr__en``: the memory's write and the write pointer's enable) through choices
    only, and ``cnt`` / ``exp_r`` / ``cur`` not at all (on main 8576c88: ``in_busy`` and ``cur``
    through a ``$gt``, ``$add``, ``$sub`` and ``$lt`` into each, ``cnt`` through the ``$lt``;
    yosys on the gate)."""
    srcs, regs = ["in_busy", "cnt", "exp_r", "cur"], ["fifo.s__ready", "fifo.wr__en"]
    table = comb_cells_table(_gate(), srcs, regs)
    assert all(table["in_busy", r] for r in regs), table
    assert {pair: c for pair, c in table.items() if set(c) & ARITH} == {}
    assert {pair: c for pair, c in table.items() if pair[0] != "in_busy" and c} == {}


def test_the_error_loads_from_a_flip_flop_not_the_start() -> None:
    """Within a cycle, nothing reaches ``error``'s next value but ``error`` and the flip-flop
    ``bad``: not the command ready, the decision's valid, the queue head's valid, ``busy`` /
    ``reading`` (the start's sources), nor ``undecided`` (the orphan's); on main 64d3389 each of
    them reached it through the start's logic (the records core's worst path in session 39's
    placement, 11.74 ns: the arbiter's room -> the FIFO's pop -> the start -> ``error``'s CE)."""
    srcs = ["cmd__ready", "decision__valid", "queue.head.m__valid", "busy", "reading", "undecided", "bad"]
    table = comb_cells_table(_gate(), srcs, ["error"])
    assert {pair: c for pair, c in table.items() if pair[0] != "bad" and c} == {}, table
    assert table["bad", "error"], table


@pytest.mark.parametrize(("width", "elements"), [(64, 3), (64, 9), (512, 17), (512, 31)])
def test_a_short_last_beat_leaves_the_rows_other_lanes(width: int, elements: int) -> None:
    """A message whose E is not a multiple of W/32, its beats all-ones garbage beyond E too,
    ADDed to a row whose lanes beyond E hold non-zero data, then WRITten and ADDed again: the
    gate's commands through the slot-store reference (``SlotStoreModel``) leave those lanes
    as they were after the ADD, 0 after the WRITE (and the ADD behind it), never the sender's."""
    n = width // 32
    dut = _gate(width, 16)
    garbage = (1 << width) - 1  # every int32 -1, the lanes beyond E included
    beats = -(-elements // n)
    row0 = 8
    msgs = [GateMessage([garbage] * beats, row0, elements, k) for k in range(3)]
    decisions = [ADD, WRITE, ADD]
    run = _run_gate(dut, msgs, decisions, cycles=200)
    initial = row_of(np.array([0x1234 + k for k in range(n)], np.int32))
    model = SlotStoreModel(width, lambda row: initial)
    last = row0 + beats - 1
    spare = [k for k in range(n) if k >= elements - (beats - 1) * n]  # the last beat's lanes beyond E
    assert spare
    after = []
    for c in run["commands"]:
        model.apply(c.op, c.row, c.data, c.lanes)
        if c.row == last:
            after.append(lanes_of(model.rows[last], n))
    assert [int(after[0][k]) for k in spare] == [0x1234 + k for k in spare]  # the ADD left them
    assert all(int(a[k]) == 0 for a in after[1:] for k in spare)  # the WRITE stored 0, the ADD 0 + 0
    assert all(int(a[k]) != 0 for a in after for k in range(n) if k not in spare)
    _check(dut, msgs, decisions, run)


def test_a_decision_with_no_message_is_an_error() -> None:
    dut = _gate(64, 32)
    messages = [GateMessage([5, 6], 1, 3, 2)]
    run = _run_gate(dut, messages, [WRITE, ADD, DISCARD], cycles=200)
    _check(dut, messages, [WRITE, ADD, DISCARD], run)
    assert run["orphans"] == 2 and run["error"] and len(run["commands"]) == 2


@pytest.mark.parametrize(("args", "kw", "msg"), [
    ((48, 64), {}, "data width must be"), ((64, 100), {}, "depth must be"),
    ((64, 64), {"address_bits": 0}, "address_bits must be 1..40"),
    ((64, 64), {"max_elements": 127}, r"max_elements must be 1..126"),
    ((64, 64), {"messages": 1}, "messages must be 2..4096"),
])
def test_gate_rejects_bad_parameters(args, kw, msg) -> None:
    with pytest.raises(ValueError, match=msg):
        PayloadGate(*args, **{"address_bits": 10, **kw})


# --------------------------------------------------------------------------------------------
# cocotb bench (sim/tb_payload_gate.py): random backpressure on every stream, W 64 and 512


@pytest.mark.cocotb
@pytest.mark.parametrize(("width", "depth"), [(64, 64), (512, 32)])
def test_cocotb_payload_gate(width: int, depth: int) -> None:
    params = {"data_width": width, "depth": depth, "address_bits": 12, "max_elements": 24 * width // 32}
    top = f"payload_gate_w{width}"
    path = generate_verilog(PayloadGate, name=top, params=params)
    run_cocotb(verilog=path, toplevel=top, test_module="wanreduce.sim.tb_payload_gate", testcase="random_messages",
               params={**params, "messages": 150, "seed": width}, timeout_s=120)


# --------------------------------------------------------------------------------------------
# cocotb bench (sim/tb_payload_gate.py::gate_drives_store): the gate driving the DRAM slot store
# through the CommandArbiter on AxiRam, latency 20..200, pauses on every stream and AXI channel


@pytest.mark.cocotb
@pytest.mark.parametrize("width", [64, 256])
def test_cocotb_gate_drives_the_store(width: int) -> None:
    run_gate_store(width, seed=width)
