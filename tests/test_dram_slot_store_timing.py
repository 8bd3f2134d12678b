"""The DRAM slot store's timing cuts (issue 16, "≥ 125 MHz"): the queues with registered heads
(hdl/registered_fifo.py) and the store with a tiny in-flight table, where the cuts' corner cases
(the CAM compare one cycle before its reduction, an entry freed and re-taken in consecutive
cycles, the registered `full`, the response credit) happen on almost every command."""

from __future__ import annotations

import random
import re

import pytest
from amaranth.back import rtlil
from amaranth.hdl import Module
from amaranth.sim import Simulator
from stream_helpers import comb_cells_table, comb_cone
from twin_helpers import run_twins

from wanreduce.hdl.dram_slot_store import DramSlotStore
from wanreduce.hdl.dram_slot_store_harness import DramSlotStoreHarness
from wanreduce.hdl.registered_fifo import RegisteredFIFO
from wanreduce.sim.simulator import generate_verilog, run_cocotb


def test_registered_fifo_keeps_order_under_random_handshakes() -> None:
    """Every entry leaves once, in order, at one per cycle when both sides are always ready;
    it holds depth + 2 entries (the skid buffer's two registers) before refusing one."""
    dut = RegisteredFIFO(8, 8)
    out: list[int] = []
    streak: list[int] = []
    held: list[int] = []

    async def bench(ctx):
        rng, sent = random.Random(5), 0
        for cycle in range(400):
            phase_busy = cycle < 300
            w = phase_busy and rng.random() < 0.6 and ctx.get(dut.w_rdy)
            ready = rng.random() < 0.5 if phase_busy else 1
            ctx.set(dut.w_en, w)
            ctx.set(dut.w_data, sent & 0xFF)
            ctx.set(dut.m.ready, ready)
            if ready and ctx.get(dut.m.valid):
                out.append(ctx.get(dut.m.payload))
            sent += w
            await ctx.tick()
        # full rate: write every cycle, read every cycle
        ctx.set(dut.m.ready, 1)
        for k in range(40):
            ctx.set(dut.w_en, 1)
            ctx.set(dut.w_data, k)
            if ctx.get(dut.m.valid):
                streak.append(ctx.get(dut.m.payload))
            await ctx.tick()
        # capacity: nothing read, write while w_rdy
        ctx.set(dut.m.ready, 0)
        ctx.set(dut.w_en, 0)
        for _ in range(6):
            await ctx.tick()
        before = len(streak)  # the full-rate entries still queued leave nothing behind
        for _ in range(20):
            ctx.set(dut.w_en, ctx.get(dut.w_rdy))
            held.append(ctx.get(dut.w_rdy))
            await ctx.tick()
        ctx.set(dut.w_en, 0)
        out.append(sent)
        held.append(before)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    sent = out.pop()
    assert out == [k & 0xFF for k in range(sent)]
    # full rate: three cycles to the head, then one entry per cycle (40 - 3 seen in 40 cycles)
    assert streak == list(range(37))
    # capacity: the 3 full-rate entries not yet read + the new ones = depth + 2
    before = held.pop()
    assert before == 37 and 3 + sum(held) == 8 + 2


def test_registered_fifo_level_counts_the_queue_behind_the_head() -> None:
    """``level`` (the result assembler's room check reads it) is the number of entries in the
    queue: every cycle of random handshakes held - 2 <= level <= held (the head's two
    registers take up to two), and with nothing read it settles at held - 2."""
    dut = RegisteredFIFO(8, 8)
    seen: list[tuple[int, int]] = []

    async def bench(ctx):
        rng, held = random.Random(7), 0
        for cycle in range(300):
            w = cycle < 250 and rng.random() < 0.6 and ctx.get(dut.w_rdy)
            ready = int(cycle < 250 and rng.random() < 0.4)
            ctx.set(dut.w_en, w)
            ctx.set(dut.m.ready, ready)
            seen.append((held, ctx.get(dut.level)))
            held += w - (ready & ctx.get(dut.m.valid))
            await ctx.tick()
        seen.append((held, ctx.get(dut.level)))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert all(h - 2 <= lv <= h for h, lv in seen), [x for x in seen if not x[0] - 2 <= x[1] <= x[0]][:3]
    assert max(lv for _, lv in seen) >= 6  # the random phase filled the queue
    held, level = seen[-1]
    assert held >= 2 and level == held - 2


# N = 4 and 8 entries, 16 rows, short latencies: the table is full most of the time, entries are
# freed and taken again back to back, and most commands hit a row in flight. With 2 or 4
# buckets (index_bits 1, 2) for the 16 rows, most commands find their bucket owned by another
# row in the table (a conflict: they wait in A, which ``set_waits`` counts) or a stale pointer;
# with a set per row (index_bits 12) ``set_waits`` stays 0.
# Seed 40 at N 8 / index_bits 2 lost an update before commit (session 33) cleared a set's stale
# pointers into the entry a command takes: two ways led to one row, the lookup took the older
# entry (a miss on a row in the table: the row read before its write was acknowledged).
# ``copy``: the DRAM reducer's store (``cmd_ready_copy``: the ping-pong command skid, ``wlen`` /
# ``blen`` written through flip-flops, the registered C2 select; session 47)
@pytest.mark.cocotb
@pytest.mark.parametrize(("outstanding", "seed", "index_bits", "commands", "copy"), [
    (4, 21, 12, 500, False), (8, 22, 12, 500, False), (4, 23, 1, 500, False), (8, 24, 2, 500, False),
    (8, 40, 2, 2000, False), (4, 41, 1, 500, True), (8, 42, 2, 1000, True)])
def test_cocotb_tiny_table(outstanding: int, seed: int, index_bits: int, commands: int, copy: bool) -> None:
    params = {"data_width": 64, "slots": 4, "row_bits": 2, "outstanding": outstanding,
              "burst_beats": 4, "base_address": 0x1000, "delay_depth": 64, "index_bits": index_bits,
              **({"cmd_ready_copy": True} if copy else {})}
    top = f"dram_store_tiny_n{outstanding}_i{index_bits}{'_copy' if copy else ''}"
    path = generate_verilog(DramSlotStoreHarness, name=top, params=params)
    run_cocotb(verilog=path, toplevel=top, test_module="wanreduce.sim.tb_slot_store",
               testcase="random_commands",
               params={**params, "seed": seed, "commands": commands, "p_cmd": 0.9, "p_rsp": 0.9,
                       # 16 rows in 16 sets (index_bits 12: 4 address bits) never conflict
                       "set_waits": "none" if index_bits >= 4 else "some",
                       "latency_range": [1, 12]})


def test_result_buffer_is_written_from_flip_flops() -> None:
    """The result buffer's write address and data are flip-flop outputs (C3 writes C2's
    registered row): C2's select -> saturating adder reaches a register, not a block-RAM data
    input (the Versa DRAM build's core-clock critical path, `base_sel` -> adder -> `results`,
    94.7 MHz against 125 before; docs/benchmarks.md)."""
    text = rtlil.convert(DramSlotStore(64, slots=4, row_bits=2, outstanding=8, burst_beats=4),
                         name="store")
    flops = set(re.findall(r"cell \$dff \S+\n(?:\s+parameter .*\n)*(?:\s+connect \\(?:D|CLK) .*\n)*"
                           r"\s+connect \\Q \\(\S+)", text))
    (port,) = re.findall(r"cell \$memwr\S* \S+\n\s+parameter \\MEMID \"\\\\results\"\n(?:.*\n)*?\s+end", text)
    addr = re.search(r"connect \\ADDR \\(\S+)", port).group(1)
    wdata = re.search(r"connect \\DATA \\(\S+)", port).group(1)
    assert addr in flops, f"results write address from {addr}, not a flip-flop"
    assert wdata in flops, f"results write data from {wdata}, not a flip-flop"


def test_c2_adds_two_registers() -> None:
    """C2's sum is the saturating adder on two flip-flops (`c2_base`, `c2_b`; Amaranth names
    their wires after the adder ports they drive, `a` and `b`): no choice of the row before in
    front of the adder, only its clamp (two 2:1 per lane) behind it. C2 chose 3:1 (early /
    result buffer / one back) in front of it, the loop `new_r` -> adder -> `new_r` in one cycle:
    the Versa DRAM build's core path, 10.2 ns at 98.3 MHz against 125 (docs/benchmarks.md)."""
    sources, cells = comb_cone(DramSlotStore(64, slots=4, row_bits=2, outstanding=8, burst_beats=4), "sum")
    assert sources == {"a", "b"}, sorted(sources)
    assert not cells["$pmux"] and not cells["$eq"] and cells["$mux"] == 2 * 2, cells


def test_rready_is_a_constant() -> None:
    """RREADY is 1 (the read-data FIFO has room for every row read: one per table entry), so no
    level of the engine reaches the manager's R handshake within a cycle: RREADY from the FIFO's
    level ran on through the upsizer's R unpacking into its input register's enables (the Versa
    DRAM build's core path, 9.05 ns at b4ba1c4's seed 1, docs/benchmarks.md)."""
    sources, cells = comb_cone(DramSlotStore(64, slots=4, row_bits=2, outstanding=8, burst_beats=4),
                               "m_axi_mem_rready")
    assert sources == set() and not cells, (sorted(sources), cells)


def test_a_valid_only_picks_the_lookup() -> None:
    """The in-flight index's lookup is built for both windows (with and without a command in A)
    and ``a_valid`` only picks the result: from it to A's registers no key compare, only the final
    choice and the stage's enable. Its fanout into the window's multiplexers ran on through the
    whole lookup (`a_valid` -> `recent1_way` -> `l3_lo1` -> `a_src` / `a_way`, the Versa DRAM
    build's core path, 9.71 ns at main 96d8c95's seed 1; 216-221 cells, 32 `$eq`, before the cut)."""
    regs = ["index.a_src", "index.a_way", "index.a_conf", "index.a_view"]
    table = comb_cells_table(DramSlotStore(64, slots=4, row_bits=2, outstanding=8, burst_beats=4),
                             ["index.a_valid"], regs)
    for reg in regs:
        cells = table["index.a_valid", reg]
        assert cells and not cells["$eq"] and not cells["$reduce_or"] and cells["$mux"] <= 6, (reg, cells)


def test_fire_reads_no_response_count() -> None:
    """C0's ``fire`` (the command queue's pop and the read-data FIFO's read enable) takes the
    response credit from a flip-flop (``credit`` == owed != RSP_DEPTH, worked out from owed's next
    value): ``owed`` -> its compare -> ``fire`` -> the read-data FIFO's level was the Versa DRAM
    build's core path after session 36's first two cuts (9.63 ns at seed 1)."""
    sources, _ = comb_cone(DramSlotStore(64, slots=4, row_bits=2, outstanding=8, burst_beats=4), "fire")
    assert "owed" not in sources and "credit" in sources, sorted(sources)


def test_the_window_compares_come_a_stage_early() -> None:
    """The in-flight index's window compares (the candidates' keys with L3's row, their entries
    with the set's pointers) are registered a stage early (`c*_in_set`, `c*_same`, `c*_ret*`): from
    the candidates' keys and entries and L3's set to A's registers no `$eq` (`recent1_key` -> the
    compares -> the priority chain -> A was the Versa DRAM build's core path after session 36's
    cuts, 9.1-9.75 ns; before this cut 8 `$eq` from `recent1_key` to `a_src`)."""
    srcs = ["index.recent1_key", "index.recent0_entry", "index.a_key", "index.tail", "index.l3_set"]
    regs = ["index.a_src", "index.a_way", "index.a_conf", "index.a_view"]
    table = comb_cells_table(DramSlotStore(64, slots=4, row_bits=2, outstanding=8, burst_beats=4), srcs, regs)
    for src in srcs:
        for reg in regs:
            assert not table[src, reg]["$eq"], (src, reg, table[src, reg])
    assert any(table[src, "index.a_src"] for src in srcs), "no path at all: the wire names changed?"


@pytest.mark.parametrize(("coalescer", "feed"), [("ar_bursts", ["q_cmd", "q_valid", "q_hit"]),
                                                 ("aw_bursts", ["c2", "c2_valid"])])
def test_burst_queues_are_written_from_flip_flops(coalescer: str, feed: list[str]) -> None:
    """A coalescer's close decision (its row from the store's register against `following`,
    `beats` against the burst limit, the page bit, `push`, the hold) ends at a flip-flop: the
    queue's write enable and data come straight from `close_r` / `closed_r` (Amaranth names their
    wires after the queue ports they drive, `w_en` / `w_data`), a cycle later, and from those
    registers to the queue's level no cell within a cycle (its write pointer `produce` is behind
    the same `w_en`; after `proc` its flip-flop carries another name, so only the level is named
    here). The decision ran on through the FIFO's
    `w_en` -> level / pointer logic: the Versa DRAM build's core paths `aw_bursts.queue.queue.inner_level`
    / `produce` from `beats` / `c2` (8.7-9.0 ns) and `ar_bursts...inner_level` from `following` /
    the queued command (9.1-9.2 ns) at session 42's landing netlist (docs/benchmarks.md, session 43)."""
    store = DramSlotStore(64, slots=4, row_bits=2, outstanding=8, burst_beats=4, burst_hold=8)
    srcs = [*(f"{coalescer}.{r}" for r in ("following", "beats", "start", "is_open", "can_hold", "left")), *feed]
    regs = [f"{coalescer}.queue.queue.inner_level"]
    table = comb_cells_table(store, [*srcs, f"{coalescer}.w_en"], regs)
    for src in srcs:
        for reg in regs:
            assert not table[src, reg], (src, reg, table[src, reg])
    assert all(table[f"{coalescer}.w_en", reg] for reg in regs), "no path at all: the wire names changed?"
    for port in ("w_en", "w_data"):  # each straight from one flip-flop
        sources, cells = comb_cone(store, f"{coalescer}.queue.{port}")
        assert sources == {f"{coalescer}.{port}"} and not cells, (port, sorted(sources), cells)


@pytest.mark.parametrize(("coalescer", "source"), [("ar_bursts", "index.a_cmd"), ("aw_bursts", "c1")])
def test_burst_close_is_decided_from_flip_flops(coalescer: str, source: str) -> None:
    """A coalescer's close decision (`close_r`'s next value, the wire `w_en`) reads no compare
    of the row: `following`, `beats`, `start`, the hold's timer `left` and the row's source
    register (`a_cmd` for AR, `c1` for AW, a cycle before the row is `q_cmd` / `c2`) reach it
    through no cell within a cycle; their compares end at the flags `match` / `room` /
    `can_hold`, a cycle early (the Versa DRAM build's `ar_bursts` close, `beats` -> `w_en`, 9.13 ns
    at main 65ac2ac's seed 1, docs/benchmarks.md, session 44). Fails on 65ac2ac: `following` and
    `beats` reach `w_en` through `$eq` / `$lt`."""
    store = DramSlotStore(64, slots=4, row_bits=2, outstanding=8, burst_beats=4, burst_hold=8)
    srcs = [f"{coalescer}.{r}" for r in ("following", "beats", "start", "left")]
    srcs_all = [*srcs, f"{coalescer}.row_p1", source]
    flags = [f"{coalescer}.{r}" for r in ("match", "room", "can_hold")]
    table = comb_cells_table(store, [*srcs_all, *flags], [f"{coalescer}.w_en", *flags])
    for src in srcs_all:
        assert not table[src, f"{coalescer}.w_en"], (src, table[src, f"{coalescer}.w_en"])
    for flag in flags:  # the flags do reach it, through logic gates only
        cells = table[flag, f"{coalescer}.w_en"]
        assert cells and not {"$eq", "$ne", "$lt", "$add", "$sub"} & set(cells), (flag, cells)
    # the compares moved: `following` -> `match`, `beats` -> `room` / `can_hold`, the row's source -> `match`
    assert table[f"{coalescer}.following", f"{coalescer}.match"]["$eq"], "no path at all: the wire names changed?"
    assert table[source, f"{coalescer}.match"]["$eq"]
    assert table[f"{coalescer}.beats", f"{coalescer}.room"]


def _store(**kw) -> DramSlotStore:
    return DramSlotStore(64, slots=4, row_bits=2, outstanding=8, burst_beats=4, **kw)


def test_c2_base_choice_is_a_registered_select() -> None:
    """The DRAM reducer's store (``cmd_ready_copy``) chooses C2's row before (``c2_base``, the
    adder's ``a``) with a 2-bit select worked out at C0 (``c1_base_sel``): from C1's command
    (``c1``: ``fwd``, ``op``) and the two bypass compares (``c1_two_back`` / ``c1_three_back``)
    no logic reaches ``a``, only the select flip-flops' one 4:1. Before, ``c1.fwd`` -> three LUT
    levels -> ``store.a`` (13 endpoints, 8.80 ns at main 193bd2d's seed 1). Fails on 193bd2d
    (``c1`` and ``c1_three_back`` reach ``a`` through $and/$not/$mux); without the flag the
    logic is 193bd2d's."""
    srcs = ["c1", "c1_three_back", "c1_base_sel"]
    new = comb_cells_table(_store(cmd_ready_copy=True), srcs, ["a"])
    assert not new["c1", "a"] and not new["c1_three_back", "a"], {k: dict(v) for k, v in new.items()}
    assert new["c1_base_sel", "a"] == {"$mux": 4}, dict(new["c1_base_sel", "a"])
    old = comb_cells_table(_store(), srcs[:2], ["a"])
    assert old["c1", "a"] and old["c1_three_back", "a"]  # (the flag off: 193bd2d's choice)


def _store_value(rng, name: str, width: int) -> int:
    """Commands on three rows (forwarding from one, two and three back), ops WRITE / ADD /
    READ, data near the int32 limits (saturation), and random AXI handshakes / read data."""
    if name == "cmd__payload":
        layout = _store().cmd.payload.shape()
        lanes = [rng.choice([0, 1, 0x7FFFFFF0, 0x80000005, rng.getrandbits(32)]) for _ in range(2)]
        return layout.const({"op": rng.choice([0, 1, 1, 2]), "row": rng.choice([0, 1, 5]),
                             "data": lanes[0] | lanes[1] << 32, "lanes": rng.getrandbits(2),
                             "tag": rng.getrandbits(16), "more": rng.getrandbits(1)}).as_value().value
    if name in ("m_axi_mem_rresp", "m_axi_mem_bresp"):
        return 0
    if name.endswith(("valid", "ready")):
        return int(rng.random() < (0.3 if name == "m_axi_mem_rvalid" else 0.7))
    return rng.getrandbits(width)


@pytest.mark.parametrize("seed", [1, 2])
def test_c2_base_select_is_exact(seed: int) -> None:
    """The store with ``cmd_ready_copy`` (the registered C2 select and the command skid's
    enable copy; since session 47 also the ping-pong command skid and ``wlen`` / ``blen`` written
    through flip-flops) against the store without (193bd2d's logic) on the same random inputs,
    2000 cycles: every output equal in every cycle (WLAST while WVALID: the W-length queue's head
    register holds another stale value while empty), ``copy_error`` never set."""
    run_twins(_store(), _store(cmd_ready_copy=True), cycles=2000, seed=seed, value=_store_value,
              only_new=("copy_error",), valid_of={"m_axi_mem_wlast": "m_axi_mem_wvalid"})


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_registered_write_fifo_is_exact(seed: int) -> None:
    """``RegisteredFIFO(registered_write=True)`` against the buffered one on the same random
    writes and head handshakes (depth 4: full and empty often): ``m.valid`` and ``level`` equal
    in every cycle, ``m.payload`` while valid; a write only while both ``w_rdy`` are high (near
    full they may differ: the new one is ``level < depth``, checked)."""
    old, new = RegisteredFIFO(8, 4), RegisteredFIFO(8, 4, registered_write=True)
    top = Module()
    top.submodules.old, top.submodules.new = old, new

    async def bench(ctx):
        rng = random.Random(seed)
        for cycle in range(3000):
            phase = (cycle // 200) % 3  # fill / drain / both at random
            w = rng.random() < (0.9, 0.2, 0.5)[phase]
            ready = rng.random() < (0.2, 0.9, 0.5)[phase]
            x = rng.getrandbits(8)
            both = ctx.get(old.w_rdy) and ctx.get(new.w_rdy)
            for d in (old, new):
                ctx.set(d.w_en, w and both)
                ctx.set(d.w_data, x)
                ctx.set(d.m.ready, ready)
            assert ctx.get(old.m.valid) == ctx.get(new.m.valid), cycle
            assert ctx.get(old.level) == ctx.get(new.level), cycle
            assert ctx.get(new.w_rdy) == (ctx.get(new.level) < 4), cycle
            if ctx.get(old.m.valid):
                assert ctx.get(old.m.payload) == ctx.get(new.m.payload), cycle
            await ctx.tick()

    sim = Simulator(top)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def test_awready_reaches_no_queue_memory_write() -> None:
    """The DRAM reducer's store (``cmd_ready_copy``) writes the W- and B-length queues (``wlen`` /
    ``blen``, written on the AW handshake) through flip-flops: their memories' write enables
    (the FIFOs' ``w_en``) come from one flip-flop each, and AWREADY (the upsizer's, across the
    chip) reaches no memory write within its cycle (`mem_upsizer.aw_out.s__ready` ->
    `store.wlen.queue.storage` WRE, 8.85 ns at the Versa DRAM build's seed 2, session 47). Fails
    on 3a66ba7: `m_axi_mem_awready` is in both `w_en` cones. Without the flag: 3a66ba7's logic."""
    for q in ("wlen", "blen"):
        sources, cells = comb_cone(_store(cmd_ready_copy=True), f"{q}.queue.w_en")
        assert sources == {f"{q}.w_en_r"} and not cells, (q, sorted(sources), cells)
        old, _ = comb_cone(_store(), f"{q}.queue.w_en")
        assert "m_axi_mem_awready" in old, sorted(old)


def test_index_ready_reaches_no_command_register() -> None:
    """The DRAM reducer's store (``cmd_ready_copy``) takes commands through a ping-pong skid
    (``SkidBuffer(ping_pong=True, ready_copy=True)``): the index's ready (``adv``, from A's flags
    ``a_valid`` / ``full`` / ``a_conf`` / ``a_gone``) reaches no command bit's register within a
    cycle, only the slot pointers (`index.a_valid` -> `store.cmd__payload`, 30 endpoints,
    8.96 ns at the Versa DRAM build's seed 6, session 47). Fails on 3a66ba7: no `cmd_in.slot0`
    (the output register `cmd_in.m__payload` loads on `adv`). Without the flag: 3a66ba7's logic."""
    store = _store(cmd_ready_copy=True)
    for slot in ("cmd_in.slot0", "cmd_in.slot1"):
        comb_cone(store, slot)  # (the register exists)
    srcs = ["index.a_valid", "index.full", "index.a_conf", "index.a_gone"]
    table = comb_cells_table(store, srcs, ["cmd_in.slot0", "cmd_in.slot1", "cmd_in.rp"])
    for src in srcs:
        assert not table[src, "cmd_in.slot0"] and not table[src, "cmd_in.slot1"], (src, table)
        assert table[src, "cmd_in.rp"], "no path at all: the wire names changed?"
    old = comb_cells_table(_store(), srcs[:1], ["cmd_in.m__payload"])
    assert old["index.a_valid", "cmd_in.m__payload"]
