"""``RecordEmitter`` (hdl/record_emitter.py) alone in Amaranth's simulator, against a Python
stand-in of the record engine and the slot store (each answers its READs in order after a random
latency, offers them at random) and random ``row.ready``: runs of several jobs in regions (one
wrapping at S, one of a single slot, runs up to the whole region), random records (beats 1 to
``2**row_bits``) and sums, a random sticky overflow per slot. Checked: every record READ (slot,
in region order), every data READ (row, ``more``, tag), every row (header from the record,
OVERFLOW, the sums, ``last``), every ``read_done``; a stalled output holds its beat and the
store's responses; at most ``prefetch + 2`` records and ``headers + 2`` chunks in flight, and
records read ahead of an earlier chunk's rows (the prefetch); ``idle`` at the end. A quarter of
the runs are resends' (one chunk, ``resent``): their rows' headers have RESENT. With ``p_own``,
that share of the other runs is ``own``: its first chunk's rows (their own data and overflow)
come on ``own_rsp`` at random, in order, and it has no data READs."""

from __future__ import annotations

import random
from collections import deque

import pytest
from stream_helpers import HoldingSink, pack, run_testbench, unpack

from wanreduce import wire
from wanreduce.hdl.decision_state import region_layout
from wanreduce.hdl.layouts import AggHeaderLayout
from wanreduce.hdl.record_emitter import RecordEmitter, result_row_layout
from wanreduce.hdl.record_release_queue import release_item_layout
from wanreduce.hdl.reducer_layouts import record_layout
from wanreduce.hdl.slot_store_signature import Op, cmd_layout

SLOTS, JOBS, W = 64, 3, 64
REGIONS = [(0, 3), (62, 2), (17, 0)]  # 8 slots from 0; 4 wrapping at S; 1


def region_slots(job: int, start: int, n: int) -> list[int]:
    """``n`` slots from ``start`` in ``job``'s region, wrapping in it (the model's slot_index)."""
    base, lw = REGIONS[job]
    return [(base + ((start - base + i) & ((1 << lw) - 1))) % SLOTS for i in range(n)]


def random_tag(rng: random.Random, row_bits: int) -> dict:
    """A record's tag with random header fields and ``nbm1`` below ``2**row_bits``."""
    return {"state": rng.randrange(3), "job": rng.randrange(JOBS), "round": rng.getrandbits(32),
            "chunk": rng.getrandbits(32), "group": rng.getrandbits(8), "scale": rng.randrange(-128, 128),
            "count": rng.getrandbits(16), "bitmap": rng.getrandbits(32), "session": rng.getrandbits(16),
            "nbm1": rng.randrange(1 << row_bits)}


def header_of(tag: dict, overflow: int, resent: int = 0) -> int:
    """The RESULT header the emitter makes of ``tag`` (the model's ``Result`` fields)."""
    flags = overflow * wire.Flags.OVERFLOW | resent * wire.Flags.RESENT
    return pack(AggHeaderLayout, {"msg_type": wire.MsgType.RESULT, "flags": flags,
                                  "group_id": tag["group"], "job_id": tag["job"], "round_id": tag["round"],
                                  "chunk": tag["chunk"], "sender_id": 0, "scale_exp": tag["scale"],
                                  "element_count": tag["count"], "session": tag["session"]})


def run_emitter(seed: int, *, row_bits: int = 2, prefetch: int = 4, headers: int = 2, runs: int = 40,
                latency: tuple[int, int] = (1, 30), p_ready: float = 0.7, read_tag: int = 0x5A5,
                p_own: float = 0.0, own_rows: int | None = None) -> dict:
    """Drive ``runs`` random runs through the emitter; every check of the module docstring
    asserted; returns the counts (``max_records``, ``max_chunks``, ``overlap``: cycles a record
    READ was outstanding while an earlier chunk's rows were not all out)."""
    rng = random.Random(seed)
    dut = RecordEmitter(W, slots=SLOTS, jobs=JOBS, row_bits=row_bits, prefetch=prefetch, headers=headers,
                        read_tag=read_tag, own_rows=own_rows)
    rlay, item = record_layout(JOBS), release_item_layout(SLOTS, JOBS)
    tags = {s: random_tag(rng, row_bits) for s in range(SLOTS)}
    sums = {r: rng.getrandbits(W) for r in range(SLOTS << row_bits)}
    ovf = {s: rng.randrange(2) for s in range(SLOTS)}
    todo = []
    for _ in range(runs):
        job = rng.randrange(JOBS)
        window = 1 << REGIONS[job][1]
        resent = int(rng.random() < 0.25)  # a resend's entry: one chunk (run 0), RESENT
        own = int(not resent and rng.random() < p_own)  # its first chunk's rows: the completer's own
        todo.append((job, region_slots(job, rng.randrange(SLOTS), 1)[0], 0 if resent else rng.randrange(window), resent,
                     own))
    assert any(t[3] for t in todo), "no resend among the runs"
    flagged = [(s, resent, own and k == 0) for job, start, run, resent, own in todo
               for k, s in enumerate(region_slots(job, start, 1 + run))]
    want_slots = [s for s, *_ in flagged]
    want_reads = [(s << row_bits | b, int(b < tags[s]["nbm1"])) for s, _, own in flagged if not own
                  for b in range(tags[s]["nbm1"] + 1)]
    own_rsp = [(rng.getrandbits(W), rng.randrange(2)) for s, _, own in flagged if own for _ in range(tags[s]["nbm1"] + 1)]
    rows_layout = result_row_layout(W)
    want_rows, k_own = [], 0
    for s, resent, own in flagged:
        for b in range(tags[s]["nbm1"] + 1):
            data, flag = own_rsp[k_own] if own else (sums[s << row_bits | b], ovf[s])
            k_own += own
            want_rows.append(pack(rows_layout, {"hdr": {}, "data": data, "last": int(b == tags[s]["nbm1"])})
                             | header_of(tags[s], flag, resent))
    got = {"slots": [], "reads": [], "done": []}
    out = HoldingSink("row")
    stats = {"max_records": 0, "max_chunks": 0, "overlap": 0}
    cmd = cmd_layout(W, (SLOTS - 1).bit_length() + row_bits)

    async def tb(ctx) -> None:
        rl = region_layout(SLOTS)
        ctx.set(dut.region.as_value(), sum(pack(rl, {"base": b, "log2_window": lw}) << (j * rl.size)
                                           for j, (b, lw) in enumerate(REGIONS)))
        records: deque = deque()  # (cycle due, slot) of each record READ
        reads: deque = deque()  # (cycle due, row) of each data READ
        runs_left, cycle, taken_records, rows_out_chunks = list(todo), 0, 0, 0
        own_left, own_valid, own_taken = list(own_rsp), False, 0
        while len(out.received) < len(want_rows) or not ctx.get(dut.idle):
            cycle += 1
            assert cycle < 200 * len(want_rows) + 1000, "stuck"
            # the inputs, offered at random (held until taken)
            if runs_left:
                ctx.set(dut.run.payload.as_value(), pack(item, dict(zip(("job", "start", "run", "resent", "own"), runs_left[0],
                                                                         strict=True))))
            ctx.set(dut.run.valid, bool(runs_left))
            rec_ok = bool(records) and records[0][0] <= cycle
            ctx.set(dut.rec_data.valid, rec_ok)
            if rec_ok:
                ctx.set(dut.rec_data.payload.as_value(), pack(rlay, {"tag": tags[records[0][1]]}))
            rsp_ok = bool(reads) and reads[0][0] <= cycle
            ctx.set(dut.data_rsp.valid, rsp_ok)
            if rsp_ok:
                r = reads[0][1]
                ctx.set(dut.data_rsp.payload.as_value(), sums[r] | ovf[r >> row_bits] << W)
            own_valid = bool(own_left) and (own_valid or rng.random() < 0.5)  # held until taken
            ctx.set(dut.own_rsp.valid, own_valid)
            if own_valid:
                ctx.set(dut.own_rsp.payload.as_value(), own_left[0][0] | own_left[0][1] << W)
            ctx.set(dut.rec_read.ready, rng.random() < p_ready)
            ctx.set(dut.data_cmd.ready, rng.random() < p_ready)
            row_ready = rng.random() < p_ready
            ctx.set(dut.row.ready, row_ready)
            # what the emitter does this cycle
            assert not ctx.get(dut.data_rsp.ready) or ctx.get(dut.row.ready), "a response taken with the row held"
            out.step(cycle, ctx.get(dut.row.valid), ctx.get(dut.row.payload.as_value()), row_ready)
            if ctx.get(dut.row.valid) and row_ready and ctx.get(dut.row.payload.last):
                rows_out_chunks += 1
            if ctx.get(dut.run.valid) and ctx.get(dut.run.ready):
                runs_left.pop(0)
            if ctx.get(dut.rec_read.valid) and ctx.get(dut.rec_read.ready):
                s = ctx.get(dut.rec_read.payload)
                got["slots"].append(s)
                records.append((cycle + rng.randint(*latency), s))
            if rec_ok and ctx.get(dut.rec_data.ready):
                records.popleft()
                taken_records += 1
            if ctx.get(dut.data_cmd.valid) and ctx.get(dut.data_cmd.ready):
                c = unpack(cmd, ctx.get(dut.data_cmd.payload.as_value()))
                assert c.op == Op.READ and c.tag == read_tag and c.lanes == (1 << W // 32) - 1, f"a READ: {c}"
                got["reads"].append((c.row, c.more))
                reads.append((cycle + rng.randint(*latency), c.row))
            if rsp_ok and ctx.get(dut.data_rsp.ready):
                reads.popleft()
            if own_valid and ctx.get(dut.own_rsp.ready):
                own_left.pop(0)
                own_valid = False
            own_taken += ctx.get(dut.own_taken)
            assert not ctx.get(dut.data_final) or ctx.get(dut.data_cmd.valid) and ctx.get(dut.data_cmd.ready)
            if ctx.get(dut.read_done):
                got["done"].append((ctx.get(dut.read_job), (ctx.get(dut.read_next) - 1) & 0xFFFFFFFF))
            in_flight = len(got["slots"]) - taken_records
            stats["max_records"] = max(stats["max_records"], in_flight)
            stats["max_chunks"] = max(stats["max_chunks"], taken_records - rows_out_chunks)
            stats["overlap"] += in_flight > 0 and taken_records > rows_out_chunks
            await ctx.tick()

        stats["own_taken"] = own_taken

    run_testbench(dut, tb)
    assert stats["own_taken"] == len(own_rsp), "own_taken"
    assert got["slots"] == want_slots, f"record READs {got['slots'][:20]}, want {want_slots[:20]}"
    assert got["reads"] == want_reads, "data READs"
    for k, (g, w) in enumerate(zip(out.received, want_rows, strict=True)):
        assert g == w, f"row {k}: {unpack(rows_layout, g)}, want {unpack(rows_layout, w)}"
    assert got["done"] == [(tags[s]["job"], tags[s]["chunk"]) for s in want_slots], "read_done"
    assert stats["max_records"] <= prefetch + 2, f"records in flight: {stats}"
    assert stats["max_chunks"] <= headers + 2, f"chunks in flight: {stats}"
    return stats


@pytest.mark.parametrize(("seed", "row_bits", "prefetch", "headers"), [(1, 2, 4, 2), (2, 0, 1, 1), (3, 3, 8, 4)])
def test_record_emitter_rows_as_the_records_and_sums(seed: int, row_bits: int, prefetch: int, headers: int) -> None:
    """Random runs, latencies and backpressure: every READ and row as the stand-in's, in order,
    within the in-flight bounds; the records prefetched ahead of earlier rows."""
    stats = run_emitter(seed, row_bits=row_bits, prefetch=prefetch, headers=headers)
    assert stats["overlap"] > 50, f"no prefetch: {stats}"


@pytest.mark.parametrize(("seed", "row_bits", "own_rows"), [(5, 2, 4), (6, 3, 16), (7, 0, 1)])
def test_record_emitter_takes_own_chunks_rows_from_the_own_fifo(seed: int, row_bits: int, own_rows: int) -> None:
    """Half the runs ``own``: their first chunk's rows from ``own_rsp`` (data and overflow as
    pushed, at random times, the FIFO as small as a slot), no data READs for it, ``read_done``
    at its take, ``own_taken`` per row; every other check as above."""
    stats = run_emitter(seed, row_bits=row_bits, p_own=0.5, own_rows=own_rows)
    assert stats["own_taken"] > 10, stats


def test_record_emitter_streams_when_everything_is_ready() -> None:
    """Every stream ready, latency 20 on both: the records are read ahead (more than one
    outstanding at once), as the prefetch depth allows."""
    stats = run_emitter(4, prefetch=4, headers=4, latency=(20, 20), p_ready=1.0)
    assert stats["max_records"] >= 4, stats


@pytest.mark.parametrize(("kw", "msg"), [
    ({"prefetch": 0}, "prefetch must be 1..512, got 0"),
    ({"headers": 600}, "headers must be 1..512, got 600"),
    ({"read_tag": 1 << 16}, "read_tag must be 0..65535, got 65536"),
    ({"own_rows": 3}, "own_rows must be 4..4096 \\(a slot's rows at least\\), got 3"),
])
def test_record_emitter_rejects_bad_parameters(kw: dict, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        RecordEmitter(W, slots=SLOTS, jobs=JOBS, row_bits=2, **kw)
