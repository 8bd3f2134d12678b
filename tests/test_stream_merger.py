# amaranth: UnusedElaboratable=no
"""StreamMerger: packet atomicity, round-robin order and fairness, 1 beat/cycle, integrity.

One cycle-based testbench drives every input and the sink: each cycle it decides (randomly or
saturated) which inputs present a beat and whether the sink is ready, reads the settled
``ready``s, records transfers, then ticks. Besides the end-to-end scoreboard (every message
intact and in order per input), every cycle is checked against a reference of the arbiter:
a message start goes to the first valid input after the last input served, inside a message only
the locked input moves, and the merger never idles when it could move a beat.
"""

from __future__ import annotations

import random

import pytest
from amaranth.back import rtlil, verilog
from amaranth.sim import Simulator

from wanreduce.hdl.layouts import lanes, message_beat_layout
from wanreduce.hdl.stream_merger import MAX_INPUTS, StreamMerger

# --------------------------------------------------------------------------------------------
# Harness


def make_messages(rng: random.Random, width: int, inp: int, count: int, max_beats: int,
                  fixed_beats: int | None = None) -> list[dict]:
    """``count`` messages for input ``inp``; hdr.sender_id = input, hdr.chunk = sequence."""
    out = []
    for seq in range(count):
        beats = fixed_beats or rng.randint(1, max_beats)
        out.append({
            "hdr": {
                "msg_type": rng.randint(1, 4),
                "flags": rng.randrange(8),
                "group_id": rng.randrange(256),
                "job_id": rng.randrange(1 << 16),
                "round_id": rng.randrange(1 << 32),
                "chunk": seq,
                "sender_id": inp,
                "scale_exp": rng.randint(-128, 127),
                "element_count": (beats - 1) * lanes(width) + rng.randint(1, lanes(width)),
            },
            "data": [rng.getrandbits(width) for _ in range(beats)],
        })
    return out


def _beat_value(layout, msg: dict, k: int):
    return layout.const({
        "data": msg["data"][k], "hdr": msg["hdr"],
        "first": int(k == 0), "last": int(k == len(msg["data"]) - 1),
    })


class Run:
    """Drive a StreamMerger for ``cycles`` cycles (or until all messages are out)."""

    def __init__(self, width: int, n: int, msgs: list[list[dict]], p_valid: float, p_ready: float,
                 seed: int, cycles: int | None = None) -> None:
        self.width, self.n, self.msgs = width, n, msgs
        self.p_valid, self.p_ready, self.cycles = p_valid, p_ready, cycles
        self.rng = random.Random(seed)
        self.out_beats: list[tuple[int, int, object]] = []  # (cycle, grant, payload Const)
        self.starts: list[int] = []  # input of every message start, in order
        self.dut = StreamMerger(width, n)

    def run(self) -> Run:
        dut, n, rng = self.dut, self.n, self.rng
        layout = message_beat_layout(self.width)
        total = sum(len(m["data"]) for ms in self.msgs for m in ms)
        pos = [[0, 0] for _ in range(n)]  # (message index, beat index) per input
        presenting = [False] * n
        last_served = 0  # reference round-robin pointer (the merger resets to input 0)
        locked_on: int | None = None

        async def tb(ctx) -> None:
            nonlocal last_served, locked_on
            cycle = 0
            while len(self.out_beats) < total if self.cycles is None else cycle < self.cycles:
                assert cycle < 50 * total + 1000, "merger stalled"
                for i in range(n):
                    mi, bi = pos[i]
                    if not presenting[i] and mi < len(self.msgs[i]) and rng.random() < self.p_valid:
                        presenting[i] = True
                        ctx.set(dut.s_msg[i].payload, _beat_value(layout, self.msgs[i][mi], bi))
                        ctx.set(dut.s_msg[i].valid, 1)
                ready = rng.random() < self.p_ready
                ctx.set(dut.m_msg.ready, ready)
                out_valid = ctx.get(dut.m_msg.valid)
                if out_valid and ready:
                    self.out_beats.append((cycle, ctx.get(dut.grant), ctx.get(dut.m_msg.payload)))
                moved = [i for i in range(n) if presenting[i] and ctx.get(dut.s_msg[i].ready)]
                # Reference arbiter.
                assert len(moved) <= 1, f"two inputs accepted in one cycle: {moved}"
                can_move = (not out_valid) or ready
                if locked_on is not None:
                    expect = locked_on if (presenting[locked_on] and can_move) else None
                else:
                    order = [(last_served + k) % n for k in range(1, n + 1)]
                    cands = [i for i in order if presenting[i]]
                    expect = cands[0] if (cands and can_move) else None
                assert moved == ([] if expect is None else [expect]), (
                    f"cycle {cycle}: moved {moved}, expected {expect} (locked {locked_on}, "
                    f"last {last_served}, valid {presenting}, can_move {can_move})")
                for i in moved:
                    mi, bi = pos[i]
                    if bi == 0:
                        self.starts.append(i)
                    if bi + 1 == len(self.msgs[i][mi]["data"]):
                        pos[i] = [mi + 1, 0]
                        last_served, locked_on = i, None
                    else:
                        pos[i] = [mi, bi + 1]
                        locked_on = i
                await ctx.tick()
                for i in moved:  # the beat is gone; maybe present the next one at once
                    presenting[i] = False
                    ctx.set(dut.s_msg[i].valid, 0)
                cycle += 1

        sim = Simulator(dut)
        sim.add_clock(1e-8)
        sim.add_testbench(tb)
        sim.run()
        return self

    def received(self) -> list[list[dict]]:
        """Reassemble output beats into messages per input, checking atomicity on the way."""
        per_input: list[list[dict]] = [[] for _ in range(self.n)]
        cur = None
        for _, grant, p in self.out_beats:
            hdr = {name: int(getattr(p.hdr, name)) for name in
                   ("msg_type", "flags", "group_id", "job_id", "round_id", "chunk", "sender_id",
                    "scale_exp", "element_count")}
            if cur is None:
                assert p.first, "message does not start with first"
                cur = {"grant": grant, "hdr": hdr, "data": []}
            else:
                assert not p.first, "first inside a message (interleaved?)"
                assert grant == cur["grant"] and hdr == cur["hdr"], "messages interleaved"
            cur["data"].append(int(p.data))
            if p.last:
                assert cur["grant"] == cur["hdr"]["sender_id"], "grant does not name the input"
                per_input[cur["grant"]].append({"hdr": cur["hdr"], "data": cur["data"]})
                cur = None
        return per_input


# --------------------------------------------------------------------------------------------
# Integrity and arbitration under random idle/backpressure


@pytest.mark.parametrize(
    "width,n,p_valid,p_ready,seed",
    [
        (64, 1, 0.6, 0.7, 1),
        (64, 2, 0.5, 0.5, 2),
        (64, 3, 1.0, 0.3, 3),
        (64, 9, 0.3, 0.9, 4),
        (64, 9, 0.9, 1.0, 5),
        (256, 4, 0.7, 0.6, 6),
        (512, 8, 0.5, 0.8, 7),
        (512, 5, 1.0, 1.0, 8),
    ],
)
def test_random_traffic_delivered_intact_and_in_order(width, n, p_valid, p_ready, seed) -> None:
    rng = random.Random(seed)
    msgs = [make_messages(rng, width, i, rng.randint(3, 8), max_beats=5) for i in range(n)]
    run = Run(width, n, msgs, p_valid, p_ready, seed).run()
    got = run.received()
    for i in range(n):
        assert got[i] == msgs[i], f"input {i}: messages differ"


def test_single_beat_messages_random() -> None:
    rng = random.Random(11)
    msgs = [make_messages(rng, 64, i, 12, max_beats=1) for i in range(4)]
    run = Run(64, 4, msgs, 0.5, 0.6, 11).run()
    assert run.received() == msgs


# --------------------------------------------------------------------------------------------
# Saturation: throughput and fairness


@pytest.mark.parametrize("n", [1, 2, 3, 9])
@pytest.mark.parametrize("beats", [1, 4, None])
def test_saturated_full_throughput_and_fair(n, beats) -> None:
    cycles = 260
    rng = random.Random(100 + n)
    # More messages than can possibly be sent, so every input stays saturated.
    msgs = [make_messages(rng, 64, i, cycles, max_beats=6, fixed_beats=beats) for i in range(n)]
    run = Run(64, n, msgs, 1.0, 1.0, 0, cycles=cycles).run()
    window = [b for b in run.out_beats if b[0] >= 20]  # skip the first cycles (pipeline fill)
    measured_cycles = cycles - 20
    assert measured_cycles >= 200
    rate = len(window) / measured_cycles
    assert rate >= 0.99, f"{rate:.3f} beats/cycle"
    # Fairness: messages completed per input within the window, equal within one.
    done = [0] * n
    for _, grant, p in window:
        if p.last:
            done[grant] += 1
    assert max(done) - min(done) <= 1, done
    # Strict rotation: message starts cycle through the inputs.
    assert run.starts[: 3 * n] == [(k + 1) % n for k in range(3 * n)]


def test_round_robin_skips_idle_inputs_and_prefers_after_last() -> None:
    # Only inputs 1 and 3 of 5 send; the order must alternate 1, 3, 1, 3, ...
    rng = random.Random(21)
    msgs = [[] for _ in range(5)]
    msgs[1] = make_messages(rng, 64, 1, 6, max_beats=3)
    msgs[3] = make_messages(rng, 64, 3, 6, max_beats=3)
    run = Run(64, 5, msgs, 1.0, 1.0, 21).run()
    assert run.starts == [1, 3] * 6
    assert run.received()[1] == msgs[1] and run.received()[3] == msgs[3]


def test_no_idle_cycle_between_back_to_back_messages() -> None:
    # Two inputs, single-beat messages, sink always ready: the output is valid every cycle
    # from the first beat out to the last.
    rng = random.Random(31)
    msgs = [make_messages(rng, 64, i, 20, max_beats=1) for i in range(2)]
    run = Run(64, 2, msgs, 1.0, 1.0, 31).run()
    cycles = [c for c, _, _ in run.out_beats]
    assert cycles == list(range(cycles[0], cycles[0] + 40))
    assert cycles[0] == 1  # one cycle of latency


# --------------------------------------------------------------------------------------------
# Construction, ports, conversion


@pytest.mark.parametrize("n", [0, MAX_INPUTS + 1, -1, 2.0, True])
def test_bad_n_inputs_rejected(n) -> None:
    with pytest.raises(ValueError, match="n_inputs"):
        StreamMerger(64, n)


@pytest.mark.parametrize("width", [32, 96, 1024, 48])
def test_bad_width_rejected(width) -> None:
    with pytest.raises(ValueError, match="data width"):
        StreamMerger(width, 2)


def test_ports() -> None:
    dut = StreamMerger(256, 9)
    assert len(dut.s_msg) == 9
    assert len(dut.grant) == 4
    assert len(dut.m_msg.payload.data) == 256
    assert len(StreamMerger(64, 1).grant) == 0


def test_verilog_conversion_w512() -> None:
    text = verilog.convert(StreamMerger(512, 9), name="stream_merger")
    assert "module stream_merger" in text
    rtlil.convert(StreamMerger(64, 1), name="stream_merger_1")


def test_outputs_do_not_depend_combinationally_on_ready() -> None:
    dut = StreamMerger(64, 3)
    layout = message_beat_layout(64)
    rng = random.Random(41)
    msgs = make_messages(rng, 64, 2, 1, max_beats=1, fixed_beats=2)

    async def tb(ctx) -> None:
        ctx.set(dut.s_msg[2].payload, _beat_value(layout, msgs[0], 0))
        ctx.set(dut.s_msg[2].valid, 1)
        ctx.set(dut.m_msg.ready, 1)
        await ctx.tick()
        ctx.set(dut.s_msg[2].payload, _beat_value(layout, msgs[0], 1))
        for _ in range(4):
            seen = set()
            for ready in (0, 1, 0):
                ctx.set(dut.m_msg.ready, ready)
                seen.add((ctx.get(dut.m_msg.valid), ctx.get(dut.m_msg.payload).as_value().value,
                          ctx.get(dut.grant)))
                assert ctx.get(dut.s_msg[2].ready) == ready  # ready passes straight through
            assert len(seen) == 1
            await ctx.tick()  # ready was left at 0: everything holds

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
