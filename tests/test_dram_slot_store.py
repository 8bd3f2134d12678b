"""DRAM slot store (hdl/dram_slot_store.py) and its parts: burst coalescer, stream delay line,
parameter checks, AXI4 port names; cocotb benches (sim/tb_slot_store.py) of the store on
cocotbext-axi's AxiRam with random latency and backpressure, W 64 and 256, against the
reference of the slot-store interface (sim/slot_store_model.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from amaranth.back import verilog
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator
from stream_helpers import comb_cells_table, comb_cone

from wanreduce.hdl.burst_coalescer import BurstCoalescer
from wanreduce.hdl.dram_slot_store import DramSlotStore
from wanreduce.hdl.dram_slot_store_harness import DramSlotStoreHarness
from wanreduce.hdl.params import check_core_params
from wanreduce.hdl.stream_delay import StreamDelay
from wanreduce.sim.simulator import generate_verilog, run_cocotb
from wanreduce.sim.slot_store_model import SlotStoreModel, lanes_of, row_of

TB = "wanreduce.sim.tb_slot_store"


# --------------------------------------------------------------------------------------------
# parameters, ports


@pytest.mark.parametrize(("kw", "msg"), [
    ({"row_bits": 13}, r"row_bits must be 0\.\.12, got 13"),
    ({"base_address": 0x800}, r"base_address must be a non-negative multiple of 4096 \(4 KiB\), got 0x800"),
    ({"outstanding": 48}, r"outstanding must be a power of two from 4 to 1024, got 48"),
    ({"burst_beats": 512}, r"burst_beats must be a power of two from 1 to 256, got 512"),
    ({"index_bits": 0}, r"index_bits must be 1\.\.16, got 0"),
    ({"index_bits": 17}, r"index_bits must be 1\.\.16, got 17"),
    ({"width": 512, "burst_beats": 128}, r"burst_beats must be 1\.\.64 at width 512"),
    ({"address_width": 18, "slots": 4096, "row_bits": 4},
     r"base_address \+ rows \* 8 bytes must be <= 2\*\*address_width = 0x40000, got 0x80000"),
])
def test_rejects_bad_parameters(kw, msg) -> None:
    args = {"width": 64, "slots": 16, "row_bits": 2, **kw}
    with pytest.raises(ValueError, match=msg):
        DramSlotStore(args.pop("width"), **args)


def test_index_key_is_a_bijection_that_spreads_a_slots_first_rows() -> None:
    """The in-flight index's key (hdl/inflight_index.py ``index_key``, the engine's ``index.key``): equal keys only for equal rows
    (a conflict never merges two rows), 2**index_bits consecutive rows from a multiple of it in
    distinct sets, and the first rows of consecutive slots (where messages go) in distinct sets.
    (With the fold from the set's top, commit 3740508, slots 2k+1 and 2k+2 shared their sets.)"""
    store = DramSlotStore(64, slots=16, row_bits=6, index_bits=7)  # 10-bit rows, 128 sets
    row, key = Signal(store.address_bits), Signal(store.address_bits)
    m = Module()
    m.d.comb += key.eq(store.index.key(row))
    keys: dict[int, int] = {}

    async def bench(ctx) -> None:
        for r in range(1 << store.address_bits):
            ctx.set(row, r)
            keys[r] = ctx.get(key)

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    sets = {r: k & 127 for r, k in keys.items()}
    assert len(set(keys.values())) == len(keys)
    assert all(len({sets[r + i] for i in range(128)}) == 128 for r in range(0, len(keys), 128))
    assert len({sets[(s << 6) + b] for s in range(16) for b in range(8)}) == 16 * 8  # 8 rows of 16 slots


def test_params_checked_in_one_place() -> None:
    assert check_core_params(row_bits=3, outstanding=64) == {"row_bits": 3, "outstanding": 64}
    with pytest.raises(ValueError, match=r"unknown core parameter: rows \(one of .*row_bits"):
        check_core_params(rows=3)


def test_verilog_has_standard_axi4_names() -> None:
    text = verilog.convert(DramSlotStore(64, slots=4, row_bits=1, outstanding=8), name="dram_store")
    for ch, sigs in {"aw": "id addr len size burst valid ready", "w": "data strb last valid ready",
                     "b": "id resp valid ready", "ar": "id addr len size burst valid ready",
                     "r": "id data resp last valid ready"}.items():
        for s in sigs.split():
            assert f" m_axi_mem_{ch}{s}" in text, f"m_axi_mem_{ch}{s} missing"
    assert "m_axi_mem__" not in text


# --------------------------------------------------------------------------------------------
# reference


def test_reference_uses_the_golden_saturating_add() -> None:
    m = SlotStoreModel(64, lambda row: row_of([0x7FFFFFFF, -5]))
    assert m.apply(1, 3, row_of([1, 1]), 0b01) == (row_of([0x7FFFFFFF, -4]), 1)
    assert m.apply(1, 3, row_of([1, 1]), 0b10) == (row_of([0x7FFFFFFF, -3]), 0)  # lane 0 masked
    assert m.apply(2, 3, 0, 0) == (row_of([0x7FFFFFFF, -3]), 0)
    assert list(lanes_of(m.apply(0, 3, row_of([-1, 2]), 3)[0], 2)) == [-1, 2]


# --------------------------------------------------------------------------------------------
# burst coalescer and delay line (Amaranth simulator)


def _coalesce(rows_per_cycle: list[int | None], max_beats: int, page_beats: int, *,
              hold: int = 0, hold_beats: int | None = None,
              more: set[int] = frozenset()) -> list[tuple[int, int]]:
    """Bursts out of a coalescer fed ``rows_per_cycle`` (None: no push); the rows in ``more``
    come with ``more`` set."""
    dut = BurstCoalescer(16, max_beats=max_beats, page_beats=page_beats, depth=64, hold=hold,
                         hold_beats=hold_beats)
    out: list[tuple[int, int]] = []

    async def bench(ctx):
        ctx.set(dut.m.ready, 1)
        seq = [None, *rows_per_cycle, None, None, None]  # no push in the first cycle (row_next's rule)
        for t, row in enumerate(seq):
            ctx.set(dut.push, row is not None)
            ctx.set(dut.row, row or 0)
            ctx.set(dut.row_next, (seq[t + 1] if t + 1 < len(seq) else None) or 0)
            ctx.set(dut.more, row in more)
            if ctx.get(dut.m.valid):
                out.append((ctx.get(dut.m.payload.start), ctx.get(dut.m.payload.len_m1) + 1))
            await ctx.tick()
        for _ in range(hold + 4):
            if ctx.get(dut.m.valid):
                out.append((ctx.get(dut.m.payload.start), ctx.get(dut.m.payload.len_m1) + 1))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return out


def test_coalescer_runs_pages_and_gaps() -> None:
    rows = [*range(10, 30), None, 40, 41, *range(60, 70), 5]
    got = _coalesce(rows, max_beats=8, page_beats=64)
    # 10..29 in bursts of <= 8 that do not cross row 64 (none here), the gap closes 40..41,
    # 60..69 is cut at the page boundary (64 rows), a lone 5
    assert got == [(10, 8), (18, 8), (26, 4), (40, 2), (60, 4), (64, 6), (5, 1)]


def test_coalescer_random_rows_are_covered_in_order() -> None:
    rng = random.Random(3)
    rows: list[int | None] = []
    for _ in range(60):
        start = rng.randrange(200)
        rows += [*range(start, start + rng.randint(1, 20))] + ([None] if rng.random() < 0.3 else [])
    got = _coalesce(rows, max_beats=16, page_beats=32)
    flat = [s + k for s, n in got for k in range(n)]
    assert flat == [r for r in rows if r is not None]
    assert all(n <= 16 and s // 32 == (s + n - 1) // 32 for s, n in got)


def test_coalescer_holds_a_burst_open_while_its_message_goes_on() -> None:
    """``more`` on the last row pushed keeps the burst open across pauses of up to ``hold``
    cycles; without ``more``, with hold 0, at the length limit or a page end, a pause closes it."""
    trickle = [10, None, None, 11, None, None, None, 12, 13]  # one message, rows 10..13
    msg = {10, 11, 12}  # 13 is its last row
    assert _coalesce(trickle, max_beats=8, page_beats=64, hold=3, more=msg) == [(10, 4)]
    assert _coalesce(trickle, max_beats=8, page_beats=64, hold=0, more=msg) == [(10, 1), (11, 1), (12, 2)]
    assert _coalesce(trickle, max_beats=8, page_beats=64, hold=3) == [(10, 1), (11, 1), (12, 2)]
    # the timer runs out: 3 idle cycles with hold 2 close the burst
    assert _coalesce(trickle, max_beats=8, page_beats=64, hold=2, more=msg) == [(10, 2), (12, 2)]
    # a full burst, or one ending at a page boundary, does not wait
    assert _coalesce([10, 11, None, None, 12], max_beats=2, page_beats=64, hold=8,
                     more={10, 11}) == [(10, 2), (12, 1)]
    assert _coalesce([62, 63, None, None, 64], max_beats=8, page_beats=64, hold=8,
                     more={62, 63}) == [(62, 2), (64, 1)]
    # nor one of hold_beats beats (the owner's share of its table for a held burst)
    assert _coalesce([10, 11, None, None, 12], max_beats=8, page_beats=64, hold=8, hold_beats=2,
                     more={10, 11}) == [(10, 2), (12, 1)]
    # a message that never goes on: the burst still leaves once the timer runs out
    got = _coalesce([5, *[None] * 6], max_beats=8, page_beats=64, hold=30, more={5})
    assert got == [(5, 1)]


def _bursts_model(cycles: list[tuple[int | None, bool]], *, max_beats: int, page_beats: int,
                  hold: int, hold_beats: int, mask: int) -> list[tuple[int, int, int]]:
    """The bursts a coalescer closes, ``(cycle it closes in, start, beats)``, from each cycle's
    ``(row or None, more)``: the module docstring's rule, in Python."""
    closed: list[tuple[int, int, int]] = []
    is_open, start, beats, waiting, left = False, 0, 0, False, 0
    for t, (row, more) in enumerate(cycles):
        if row is not None:
            if is_open and row == (start + beats) & mask and beats < max_beats and row % page_beats:
                beats += 1
            else:
                if is_open:
                    closed.append((t, start, beats))
                is_open, start, beats = True, row, 1
            waiting, left = more, hold
        elif is_open:
            if hold and waiting and left and beats < hold_beats and (start + beats) % page_beats:
                left -= 1
            else:
                closed.append((t, start, beats))
                is_open = False
    return closed


@pytest.mark.parametrize(("max_beats", "page_beats", "hold", "hold_beats", "p_ready", "seed"), [
    (8, 64, 0, None, 1.0, 1), (16, 32, 3, None, 1.0, 2), (4, 16, 5, 2, 1.0, 3),
    (8, 64, 2, None, 0.4, 4), (1, 8, 0, None, 0.7, 5), (1, 1, 3, None, 1.0, 6),
    (8, 8, 4, 1, 1.0, 7), (2, 4, 1, None, 0.8, 8), (16, 16, 6, 3, 1.0, 9)])
def test_coalescer_queues_each_burst_a_cycle_after_it_closes(max_beats, page_beats, hold, hold_beats,
                                                              p_ready, seed) -> None:
    """Random runs of rows (gaps, ``more``, a row wrapping past the address's top, random ``m``
    ready) against the model: the same bursts in the same order, each written into the queue in
    the cycle after the model closes it (``w_en`` / ``w_data`` from flip-flops: the close decision
    no longer runs on into the queue's level and pointer in its own cycle, the Versa DRAM build's
    `aw_bursts` / `ar_bursts` queue paths, 9.0-9.2 ns, docs/benchmarks.md, session 43); with
    ``m`` always ready each burst shows on ``m`` four cycles after it closes."""
    bits = 8  # rows wrap at 256: the wrap is a gap (255 is not followed by 0 in a burst: 0 is a page start)
    rng = random.Random(seed)
    cycles: list[tuple[int | None, bool]] = [(None, False)]  # no push in the first cycle (row_next's rule)
    while len(cycles) < 600:
        row, n = rng.randrange(1 << bits), rng.randint(1, 24)
        for k in range(n):
            cycles.append(((row + k) & 0xFF, k < n - 1 or rng.random() < 0.2))
            if rng.random() < 0.25:  # a pause inside the run
                cycles += [(None, False)] * rng.randint(1, hold + 2)
        cycles += [(None, False)] * rng.choice([0, 0, 1, 3, hold + 2])
    cycles += [(None, False)] * (hold + 2)
    hb = min(max_beats, hold_beats or max_beats)
    want = _bursts_model(cycles, max_beats=max_beats, page_beats=page_beats, hold=hold, hold_beats=hb,
                         mask=(1 << bits) - 1)
    dut = BurstCoalescer(bits, max_beats=max_beats, page_beats=page_beats, depth=1024, hold=hold,
                         hold_beats=hold_beats)
    writes: list[tuple[int, int, int]] = []
    shown: list[tuple[int, int, int]] = []  # (cycle first valid, start, beats) per burst taken
    first_valid: list[int | None] = [None]

    async def bench(ctx):
        rng_r = random.Random(seed + 100)
        run = [*cycles, *[(None, False)] * 40]
        for t, (row, more) in enumerate(run):
            ctx.set(dut.push, row is not None)
            ctx.set(dut.row, row or 0)
            ctx.set(dut.row_next, (run[t + 1][0] if t + 1 < len(run) else None) or 0)  # the next cycle's row
            ctx.set(dut.more, more)
            ready = rng_r.random() < p_ready or t >= len(cycles)
            ctx.set(dut.m.ready, ready)
            assert not ctx.get(dut.next_error), t
            if ctx.get(dut.queue.w_en):
                w = ctx.get(dut.queue.w_data)
                writes.append((t, w.start, w.len_m1 + 1))
            if ctx.get(dut.m.valid):
                if first_valid[0] is None:
                    first_valid[0] = t
                if ready:
                    p = ctx.get(dut.m.payload)
                    shown.append((first_valid[0], p.start, p.len_m1 + 1))
                    first_valid[0] = None
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert len(want) > 40 and any(b > 1 for _, _, b in want) == (max_beats > 1 and page_beats > 1)
    assert writes == [(t + 1, s, b) for t, s, b in want]
    assert [(s, b) for _, s, b in shown] == [(s, b) for _, s, b in want]
    if p_ready == 1.0:
        assert shown == [(t + 4, s, b) for t, s, b in want]


def test_coalescer_checks_row_next() -> None:
    """`next_error`: a pushed row that is not the last cycle's `row_next` (the owner broke its
    promise), in that cycle only; not without a push."""
    dut = BurstCoalescer(8, max_beats=8, page_beats=64, depth=8, hold=2)
    seen: list[int] = []

    async def bench(ctx):
        # (push, row, row_next): the promise kept, broken without a push, broken with one
        for t, (push, row, row_next) in enumerate([(0, 0, 5), (1, 5, 6), (1, 6, 9), (0, 0, 4), (1, 7, 8),
                                                   (1, 8, 9), (1, 3, 0), (0, 0, 0)]):
            ctx.set(dut.push, push)
            ctx.set(dut.row, row)
            ctx.set(dut.row_next, row_next)
            if ctx.get(dut.next_error):
                seen.append(t)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen == [4, 6]


@pytest.mark.parametrize(("max_beats", "page_beats", "hold"), [(8, 64, 0), (16, 512, 8), (1, 1, 3)])
def test_coalescer_close_is_decided_from_flip_flops(max_beats, page_beats, hold) -> None:
    """The close decision's inputs are `push`, `is_open` and the four flags worked out a cycle
    early (`match`, `room`, `new_page`, `can_hold`): no compare, count or adder in its cycle, and
    neither `row` nor the burst's `following` / `beats` / the hold's timer `left` reach it (the
    Versa DRAM build's `ar_bursts` close, `beats` -> `w_en`, 9.13 ns at main 65ac2ac's seed 1,
    docs/benchmarks.md, session 44). Fails on 65ac2ac: `row`, `following` and `beats` reach
    `close_r` (`w_en`) through `$eq` / `$lt`."""
    dut = BurstCoalescer(12, max_beats=max_beats, page_beats=page_beats, depth=8, hold=hold)
    srcs = ["row", "following", "beats", "left", "start", "push", "is_open"]
    table = comb_cells_table(dut, srcs, ["w_en"])  # `close_r`'s wire (named after the queue port)
    for src in srcs[:5]:
        assert not table[src, "w_en"], (src, table[src, "w_en"])
    for src in srcs[5:]:
        assert table[src, "w_en"] and not {"$eq", "$ne", "$lt", "$add"} & set(table[src, "w_en"]), src
    sources, cells = comb_cone(dut, "close")
    assert sources <= {"push", "is_open", "match", "room", "new_page", "can_hold"}, sorted(sources)
    assert {"push", "is_open", "match"} <= sources, sorted(sources)
    assert not {"$eq", "$ne", "$lt", "$le", "$gt", "$ge", "$add", "$sub"} & set(cells), cells


def test_coalescer_hold_is_checked() -> None:
    with pytest.raises(ValueError, match=r"burst_hold must be 0\.\.4096 idle cycles, got 5000"):
        BurstCoalescer(8, max_beats=4, page_beats=8, depth=4, hold=5000)
    with pytest.raises(ValueError, match=r"burst_hold must be 0\.\.4096 idle cycles, got -1"):
        DramSlotStore(64, slots=4, row_bits=1, burst_hold=-1)


def test_stream_delay_holds_each_beat_latency_cycles() -> None:
    dut = StreamDelay(8, depth=32)
    entered, left = {}, {}

    async def bench(ctx):
        ctx.set(dut.latency, 7)
        cycle, sent = 0, 0
        rng = random.Random(1)
        while len(left) < 20:
            valid = sent < 20 and rng.random() < 0.6
            ready = rng.random() < 0.7
            ctx.set(dut.s.valid, valid)
            ctx.set(dut.s.payload, sent)
            ctx.set(dut.m.ready, ready)
            if valid and ctx.get(dut.s.ready):
                entered[sent] = cycle
                sent += 1
            if ready and ctx.get(dut.m.valid):
                left[ctx.get(dut.m.payload)] = cycle
            await ctx.tick()
            cycle += 1

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert list(left) == list(range(20))
    assert all(left[k] - entered[k] >= 7 for k in range(20))


# --------------------------------------------------------------------------------------------
# cocotb: the store on AxiRam


# W 64 with a 128-entry table (full rate at latency 20 needs about 2 x 20 + 2 x 16 + ~15 entries),
# W 256 with 64 entries (the table fills more often). Either fills under latency 200.
OUTSTANDING = {64: 128, 256: 64}




def _harness(width: int, *, outstanding: int | None = None, burst_beats: int = 16,
             burst_hold: int = 128):
    n = outstanding or OUTSTANDING[width]
    params = {"data_width": width, "slots": 16, "row_bits": 6, "outstanding": n,
              "burst_beats": burst_beats, "burst_hold": burst_hold, "base_address": 0x3000}
    top = f"dram_store_w{width}_n{n}_b{burst_beats}_h{burst_hold}"
    return params, generate_verilog(DramSlotStoreHarness, name=top, params=params), top


@pytest.mark.cocotb
@pytest.mark.parametrize(("width", "seed"), [(64, 1), (256, 2)])
def test_cocotb_random_commands(width: int, seed: int) -> None:
    params, path, top = _harness(width)
    run_cocotb(verilog=path, toplevel=top, test_module=TB, testcase="random_commands",
               params={**params, "seed": seed, "commands": 600})


@pytest.mark.cocotb
def test_cocotb_one_command_per_cycle_at_latency_20() -> None:
    params, path, top = _harness(64)
    run_cocotb(verilog=path, toplevel=top, test_module=TB, testcase="throughput",
               params={**params, "latency": 20, "commands": 2400, "min_rate": 0.95})


def memory_bound_bursts(out: Path, burst_hold: int, bandwidth: float = 0.5, latency: int = 50) -> dict:
    """The reducer's traffic with the memory's R and W channels moving on ``bandwidth`` of the
    cycles (the memory sets the pace: read data, hence completions and writes, trickle in with
    gaps): the throughput bench's figures (rate, mean read / write burst), 64-beat bursts."""
    params, path, top = _harness(64, outstanding=256, burst_beats=64, burst_hold=burst_hold)
    run_cocotb(verilog=path, toplevel=top, test_module=TB, testcase="throughput",
               params={**params, "latency": latency, "bandwidth": bandwidth, "commands": 3000,
                       "out": str(out)})
    return json.loads(out.read_text())


@pytest.mark.cocotb
def test_cocotb_memory_bound_bursts_stay_long(tmp_path) -> None:
    """Held open while ``more`` says the message goes on, the bursts stay long when the memory
    sets the pace (measured 61 / 60 beats; with ``burst_hold`` = 0: 13 / 20, and LiteDRAM pays a
    bus turn-around per burst)."""
    r = memory_bound_bursts(tmp_path / "r.json", 128)
    assert r["mean_read_burst"] >= 40 and r["mean_write_burst"] >= 40, r


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("width", [64, 256])
@pytest.mark.parametrize("seed", [11, 12, 13])
def test_cocotb_random_commands_long(width: int, seed: int) -> None:
    params, path, top = _harness(width)
    run_cocotb(verilog=path, toplevel=top, test_module=TB, testcase="random_commands",
               params={**params, "seed": seed, "commands": 4000, "p_axi": 0.5})

