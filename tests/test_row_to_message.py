"""``RowToMessage`` (hdl/row_to_message.py; docs/large_slots.md, "The core wiring", step 5): result
rows of random lengths, random ``valid`` in and ``ready`` out: every row leaves once, unchanged and
in order, ``first`` set exactly on each message's first beat (after reset and after each
``last``), valid and ready passed through in the same cycle."""

from __future__ import annotations

import random

from stream_helpers import offer_row, run_testbench

from wanreduce.hdl.row_to_message import RowToMessage


def test_rows_become_message_beats_with_first() -> None:
    rng = random.Random(16)
    dut = RowToMessage(64)
    lengths = [rng.randint(1, 4) for _ in range(40)]
    rows = [(m, i, rng.getrandbits(64), i == n - 1) for m, n in enumerate(lengths) for i in range(n)]
    out = []

    async def tb(ctx):
        k = 0
        while len(out) < len(rows):
            valid, ready = k < len(rows) and rng.random() < 0.7, rng.random() < 0.7
            offer_row(ctx, dut.rows, (rows[k][0], *rows[k][2:]) if valid else None)
            ctx.set(dut.m.ready, ready)
            assert ctx.get(dut.m.valid) == valid and ctx.get(dut.rows.ready) == ready  # passed through
            if valid and ready:
                p = dut.m.payload
                out.append((ctx.get(p.hdr.chunk), ctx.get(p.first), ctx.get(p.data), ctx.get(p.last)))
                k += 1
            await ctx.tick()

    run_testbench(dut, tb)
    assert out == [(m, int(i == 0), d, int(last)) for m, i, d, last in rows]
