"""``FrameFIFO`` (hdl/frame_fifo.py; the record path's store-and-forward results): frames of
1..``max_beats`` rows, random ``valid`` in and ``ready`` out: every row leaves once, in order,
with its frame's header and data; no row of a frame is offered before 2 cycles after its
frame's last row went in (hdl/frame_fifo.py's latency, the margin hdl/record_reducer.py's
argument uses); a beat offered and not taken stays; bad parameters are one-line errors."""

from __future__ import annotations

import random

import pytest
from stream_helpers import HoldingSink, offer_row, run_testbench

from wanreduce.hdl.frame_fifo import FrameFIFO, frame_fifo_depth


def _run(max_beats: int, *, p_in: float, p_out: float, seed: int, n_frames: int = 60) -> tuple[list, list]:
    """Random frames through a ``FrameFIFO``: (rows in, rows out), each (frame, chunk, data, last)."""
    rng = random.Random(seed)
    dut = FrameFIFO(64, max_beats=max_beats)
    lengths = [rng.randint(1, max_beats) for _ in range(n_frames)]
    rows = [(f, rng.getrandbits(32), rng.getrandbits(64), i == n - 1)
            for f, n in enumerate(lengths) for i in range(n)]
    chunk_of = {}  # frame -> its header's chunk (constant within the frame)
    for f, c, _, _ in rows:
        chunk_of.setdefault(f, c)
    rows = [(f, chunk_of[f], d, last) for f, _, d, last in rows]
    out, sink = [], HoldingSink("m")
    last_in_cycle: dict[int, int] = {}  # frame -> the cycle its last row was taken

    async def tb(ctx):
        k, cycle = 0, 0
        while len(out) < len(rows):
            assert cycle < 50 * len(rows), f"stuck at {len(out)} of {len(rows)} rows out"
            valid = k < len(rows) and rng.random() < p_in
            offer_row(ctx, dut.s, rows[k][1:] if valid else None)
            ready = rng.random() < p_out
            ctx.set(dut.m.ready, ready)
            o = dut.m.payload
            m_valid = ctx.get(dut.m.valid)
            beat = (ctx.get(o.hdr.chunk), ctx.get(o.data), bool(ctx.get(o.last))) if m_valid else None
            sink.step(cycle, m_valid, beat, ready)
            if m_valid:  # offered 2 cycles after its frame's last row at the earliest (the gate's margin)
                f = rows[len(out)][0]
                assert cycle - last_in_cycle.get(f, cycle) >= 2, \
                    f"cycle {cycle}: a row of frame {f} offered less than 2 cycles after its last row went in"
            if m_valid and ready:
                out.append((rows[len(out)][0], *beat))
            if valid and ctx.get(dut.s.ready):
                if rows[k][3]:
                    last_in_cycle[rows[k][0]] = cycle
                k += 1
            await ctx.tick()
            cycle += 1

    run_testbench(dut, tb)
    return rows, out


@pytest.mark.parametrize(("max_beats", "p_in", "p_out", "seed"), [
    (1, 0.9, 0.9, 1),  # one-row frames back to back
    (8, 0.8, 0.5, 2),  # the W 64, E 16 core's results; output slower than input
    (8, 0.5, 0.95, 3),  # input slower: frames wait for their last row
    (5, 1.0, 1.0, 4),  # a depth not a power of two of frames (16 beats), both sides at full rate
])
def test_frames_leave_whole_in_order_after_their_last_row(max_beats, p_in, p_out, seed) -> None:
    rows, out = _run(max_beats, p_in=p_in, p_out=p_out, seed=seed)
    assert out == [(f, c, d, last) for f, c, d, last in rows]


def test_full_rate_in_the_steady_state() -> None:
    """With ``valid`` and ``ready`` always set, frames of 8 rows leave at one row per cycle
    (two frames fit: one fills while the one before leaves)."""
    dut = FrameFIFO(64, max_beats=8)
    n = 8 * 20
    taken = []

    async def tb(ctx):
        ctx.set(dut.m.ready, 1)
        ctx.set(dut.s.valid, 1)
        k = 0
        for cycle in range(n + 40):
            ctx.set(dut.s.payload.last, k % 8 == 7)
            if ctx.get(dut.m.valid):
                taken.append(cycle)
            if ctx.get(dut.s.ready):
                k += 1
            await ctx.tick()

    run_testbench(dut, tb)
    assert len(taken) >= n
    steady = taken[n // 4: 3 * n // 4]
    assert steady[-1] - steady[0] == len(steady) - 1, "a bubble in the steady state"


def test_depth_holds_two_longest_frames() -> None:
    assert [frame_fifo_depth(b) for b in (1, 2, 3, 8, 9, 1024)] == [4, 4, 8, 16, 32, 2048]


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(max_beats=0), "max_beats must be an integer >= 1 rows, got 0"),
    (dict(max_beats=4, frames=1), "frames must be an integer >= 2, got 1"),
])
def test_bad_parameters_are_one_line_errors(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message) as e:
        FrameFIFO(64, **kwargs)
    assert "\n" not in str(e.value)
